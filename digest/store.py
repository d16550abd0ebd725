"""All database I/O: papers and their upvote history, the send log, suppressions, feedback, caches (SQLAlchemy Core)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .errors import StoreError
from .models import Paper, clean_arxiv_id, normalise_title

metadata = sa.MetaData()

papers = sa.Table(
    "papers", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("arxiv_id", sa.String, unique=True),
    sa.Column("title_norm", sa.String, nullable=False, index=True),
    sa.Column("title", sa.String, nullable=False),
    sa.Column("abstract", sa.Text, nullable=False),
    sa.Column("data", sa.Text, nullable=False),  # the remaining Paper fields as JSON
    sa.Column("upvotes", sa.Integer),
    sa.Column("published", sa.Date),
    sa.Column("first_seen", sa.Date, nullable=False, index=True),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

upvotes = sa.Table(
    "upvotes", metadata,
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("observed_on", sa.Date, primary_key=True),
    sa.Column("upvotes", sa.Integer, nullable=False),
)

deliveries = sa.Table(
    "deliveries", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("digest_date", sa.Date, primary_key=True),
    sa.Column("message_id", sa.String, nullable=False),
    sa.Column("status", sa.String, nullable=False),  # pending | sent | failed | bounced
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("transport", sa.String, nullable=False),
    sa.Column("detail", sa.Text, nullable=False, default=""),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

received = sa.Table(
    "received", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("digest_date", sa.Date, nullable=False),
)

suppressions = sa.Table(
    "suppressions", metadata,
    sa.Column("email", sa.String, primary_key=True),
    sa.Column("reason", sa.String, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)

fetches = sa.Table(
    "fetches", metadata,
    sa.Column("source", sa.String, primary_key=True),  # the source's label
    sa.Column("url", sa.String, nullable=False),
    sa.Column("fetched_at", sa.DateTime, nullable=False),
    sa.Column("result", sa.String, nullable=False),  # ok | not-modified | failed
    sa.Column("papers", sa.Integer, nullable=False),
    sa.Column("errors", sa.Integer, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("etag", sa.String),
    sa.Column("last_modified", sa.String),
    sa.Column("last_ok_at", sa.DateTime),
)

runs = sa.Table(
    "runs", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("command", sa.String, nullable=False),
    sa.Column("started_at", sa.DateTime, nullable=False),
    sa.Column("finished_at", sa.DateTime),
    sa.Column("status", sa.String, nullable=False),  # running | ok | failed
    sa.Column("summary", sa.Text, nullable=False, default=""),
)

preferences = sa.Table(
    "preferences", metadata,
    sa.Column("email", sa.String, primary_key=True),  # lower-case
    sa.Column("frequency", sa.String),  # overrides the profile's when set
    sa.Column("paused_until", sa.Date),  # no digest dated on or before this day
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

locks = sa.Table(
    "locks", metadata,
    sa.Column("name", sa.String, primary_key=True),
    sa.Column("owner", sa.String, nullable=False),
    sa.Column("heartbeat_at", sa.DateTime, nullable=False),
)

feedback = sa.Table(
    "feedback", metadata,
    sa.Column("subscriber", sa.String, primary_key=True),
    sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
    sa.Column("value", sa.Integer, nullable=False),  # +1 more like this, -1 less like this
    sa.Column("created_at", sa.DateTime, nullable=False),
)

cache = sa.Table(  # derived data worth keeping between runs (term statistics); safe to delete
    "cache", metadata,
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
    sa.Column("updated_at", sa.DateTime, nullable=False),
)

embeddings = sa.Table(
    "embeddings", metadata,
    sa.Column("paper_key", sa.String, primary_key=True),
    sa.Column("model", sa.String, primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),  # float32, little-endian
)

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.String, primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

# Paper fields kept in the JSON column (the rest have columns of their own).
_COLUMN_FIELDS = {"title", "abstract", "arxiv_id", "upvotes", "published", "store_id"}
_JSON_FIELDS = [f.name for f in fields(Paper) if f.name not in _COLUMN_FIELDS]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _to_json(paper: Paper) -> str:
    out: dict[str, Any] = {}
    for name in _JSON_FIELDS:
        value = getattr(paper, name)
        if value in (None, (), ""):
            continue
        out[name] = value.isoformat() if isinstance(value, date) else value
    return json.dumps(out, sort_keys=True, ensure_ascii=False)


def _from_row(row: Any) -> Paper:
    data = json.loads(row.data)
    for name in ("authors", "categories", "keywords"):
        if name in data:
            data[name] = tuple(data[name])
    if "listed_on" in data:
        data["listed_on"] = date.fromisoformat(data["listed_on"])
    return Paper(title=row.title, abstract=row.abstract, arxiv_id=row.arxiv_id, upvotes=row.upvotes,
                 published=row.published, store_id=row.id, **data)


def _merge(old: Paper, new: Paper) -> Paper:
    """Combine two sightings of one paper, whatever order they arrive in.

    A sighting from a later listing overrides; otherwise it only fills what is missing, and an
    upvote count only goes up. Ingesting the same files twice therefore changes nothing.
    """
    newer = bool(old.listed_on and new.listed_on and new.listed_on > old.listed_on)
    changes: dict[str, Any] = {}
    for f in fields(Paper):
        value, current = getattr(new, f.name), getattr(old, f.name)
        if f.name == "store_id" or value in (None, (), "") or value == current:
            continue
        if newer or current in (None, (), ""):
            changes[f.name] = value
    if not newer and new.upvotes is not None and old.upvotes is not None:
        changes["upvotes"] = max(new.upvotes, old.upvotes)
    return replace(old, **changes)


@dataclass(frozen=True)
class IngestCounts:
    """What one ingest did to the store."""

    distinct: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0


@dataclass(frozen=True)
class FetchRecord:
    """The last fetch of one source."""

    source: str
    url: str
    fetched_at: datetime
    result: str
    papers: int
    errors: int
    attempts: int
    detail: str = ""
    etag: str | None = None
    last_modified: str | None = None
    last_ok_at: datetime | None = None


@dataclass(frozen=True)
class Preference:
    """What a subscriber changed on the preferences page (the profile file is never touched)."""

    email: str
    frequency: str | None = None
    paused_until: date | None = None


@dataclass(frozen=True)
class RunRecord:
    """One run of a command that changes state (fetch, send, run, a scheduled job)."""

    id: int
    command: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    summary: str


@dataclass(frozen=True)
class DeliveryRecord:
    """One row of the send log."""

    subscriber: str
    digest_date: date
    message_id: str
    status: str
    attempts: int
    transport: str
    detail: str


class FeedbackStore:
    """Feedback, paper lookups and caches for the selector (mixed into Store)."""

    engine: Engine

    def add_feedback(self, subscriber: str, paper_id: int, value: int) -> None:
        """Record that a subscriber wants more (+1) or less (-1) like a paper; the latest word counts."""
        key = (feedback.c.subscriber == subscriber) & (feedback.c.paper_id == paper_id)
        with self.engine.begin() as conn:
            conn.execute(feedback.delete().where(key))
            conn.execute(feedback.insert().values(subscriber=subscriber, paper_id=paper_id, value=value,
                                                  created_at=_now()))

    def feedback_by_subscriber(self, subscriber: str | None = None) -> dict[str, dict[int, int]]:
        """Every subscriber's feedback (or one's): paper id → +1 or -1."""
        query = sa.select(feedback.c.subscriber, feedback.c.paper_id, feedback.c.value)
        if subscriber is not None:
            query = query.where(feedback.c.subscriber == subscriber)
        out: dict[str, dict[int, int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                out.setdefault(row.subscriber, {})[row.paper_id] = row.value
        return out

    def papers_by_id(self, ids: Iterable[int]) -> dict[int, Paper]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(papers).where(papers.c.id.in_(wanted)))
            return {row.id: _from_row(row) for row in rows}

    def find_papers(self, refs: Iterable[str]) -> dict[str, Paper]:
        """Papers named by arXiv id (any version), store id (`#12`) or title; unknown references are left out."""
        refs = list(dict.fromkeys(refs))
        if not refs:
            return {}
        by_id = {r: int(r.lstrip("#")) for r in refs if r.lstrip("#").isdigit()}
        by_arxiv = {clean_arxiv_id(r.removeprefix("arXiv:")): r for r in refs if r not in by_id}
        by_arxiv.pop(None, None)
        by_title = {normalise_title(r): r for r in refs if r not in by_id}
        found: dict[str, Paper] = {}
        with self.engine.connect() as conn:
            query = sa.select(papers).where(papers.c.id.in_(list(by_id.values())) |
                                            papers.c.arxiv_id.in_(list(by_arxiv)) |
                                            papers.c.title_norm.in_(list(by_title)))
            for row in conn.execute(query):
                paper = _from_row(row)
                for ref, number in by_id.items():
                    if number == row.id:
                        found[ref] = paper
                if row.arxiv_id in by_arxiv:
                    found.setdefault(by_arxiv[row.arxiv_id], paper)
                if row.title_norm in by_title:
                    found.setdefault(by_title[row.title_norm], paper)
        return found

    def texts_after(self, paper_id: int) -> Iterator[tuple[int, str, str]]:
        """(id, title, abstract) of the papers added after `paper_id`, in id order."""
        query = sa.select(papers.c.id, papers.c.title, papers.c.abstract).where(papers.c.id > paper_id)
        with self.engine.connect() as conn:
            for row in conn.execute(query.order_by(papers.c.id)):
                yield row.id, row.title, row.abstract

    def get_cache(self, key: str) -> bytes | None:
        with self.engine.connect() as conn:
            value = conn.execute(sa.select(cache.c.value).where(cache.c.key == key)).scalar()
        return bytes(value) if value is not None else None

    def put_cache(self, key: str, value: bytes) -> None:
        with self.engine.begin() as conn:
            conn.execute(cache.delete().where(cache.c.key == key))
            conn.execute(cache.insert().values(key=key, value=value, updated_at=_now()))

    def embeddings(self, keys: Sequence[str], model: str) -> dict[str, np.ndarray]:
        """Stored embeddings of the papers with these keys, for one model."""
        out: dict[str, np.ndarray] = {}
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):  # stay below SQLite's bound-parameter limit
                query = sa.select(embeddings).where(embeddings.c.model == model,
                                                    embeddings.c.paper_key.in_(keys[start:start + 500]))
                for row in conn.execute(query):
                    out[row.paper_key] = np.frombuffer(row.vector, dtype="<f4")
        return out

    def put_embeddings(self, vectors: dict[str, np.ndarray], model: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(embeddings.delete().where(embeddings.c.model == model,
                                                   embeddings.c.paper_key.in_(list(vectors))))
            conn.execute(embeddings.insert(), [
                {"paper_key": key, "model": model, "vector": np.asarray(v, dtype="<f4").tobytes()}
                for key, v in vectors.items()])


class Store(FeedbackStore):
    """The database: open it with a SQLAlchemy URL; tables are created on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            folder = Path(url.removeprefix("sqlite:///")).parent
            if str(folder) not in ("", ".") and not folder.exists():
                raise StoreError(f"database folder {folder} does not exist")
        try:
            self.engine: Engine = sa.create_engine(url)
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            metadata.create_all(self.engine)
        except sa.exc.SQLAlchemyError as exc:
            reason = getattr(exc, "orig", None) or exc
            raise StoreError(f"cannot open database {url}: {reason}") from exc

    def close(self) -> None:
        self.engine.dispose()

    # -- papers -------------------------------------------------------------

    def add_papers(self, batch: Iterable[Paper], *, seen_on: date) -> IngestCounts:
        """Insert or merge papers (one transaction); same arXiv id or title is one paper."""
        touched: set[int] = set()
        inserted: set[int] = set()
        changed: set[int] = set()
        with self.engine.begin() as conn:
            by_arxiv, by_title = self._index(conn)
            for paper in batch:
                row_id = (by_arxiv.get(paper.arxiv_id) if paper.arxiv_id else None) \
                    or by_title.get(normalise_title(paper.title))
                if row_id is None:
                    row_id = self._insert(conn, paper, seen_on)
                    inserted.add(row_id)
                elif self._update(conn, row_id, paper):
                    changed.add(row_id)
                if self._observe(conn, row_id, paper, seen_on):
                    changed.add(row_id)
                touched.add(row_id)
                by_title[normalise_title(paper.title)] = row_id
                if paper.arxiv_id:
                    by_arxiv[paper.arxiv_id] = row_id
        updated = changed - inserted
        return IngestCounts(len(touched), len(inserted), len(updated), len(touched - inserted - updated))

    @staticmethod
    def _index(conn: Connection) -> tuple[dict[str, int], dict[str, int]]:
        rows = conn.execute(sa.select(papers.c.id, papers.c.arxiv_id, papers.c.title_norm)).all()
        return ({r.arxiv_id: r.id for r in rows if r.arxiv_id}, {r.title_norm: r.id for r in rows})

    @staticmethod
    def _values(paper: Paper) -> dict[str, Any]:
        return dict(arxiv_id=paper.arxiv_id, title_norm=normalise_title(paper.title), title=paper.title,
                    abstract=paper.abstract, data=_to_json(paper), upvotes=paper.upvotes,
                    published=paper.published, updated_at=_now())

    def _insert(self, conn: Connection, paper: Paper, seen_on: date) -> int:
        result = conn.execute(papers.insert().values(first_seen=seen_on, **self._values(paper)))
        return int(result.inserted_primary_key[0])

    def _update(self, conn: Connection, row_id: int, paper: Paper) -> bool:
        old = _from_row(conn.execute(sa.select(papers).where(papers.c.id == row_id)).one())
        merged = _merge(old, paper)
        if merged == old:
            return False
        conn.execute(papers.update().where(papers.c.id == row_id).values(**self._values(merged)))
        return True

    @staticmethod
    def _observe(conn: Connection, row_id: int, paper: Paper, seen_on: date) -> bool:
        """Add the upvote count to the paper's history; True when the history changed."""
        if paper.upvotes is None:
            return False
        day = paper.listed_on or seen_on
        key = (upvotes.c.paper_id == row_id) & (upvotes.c.observed_on == day)
        old = conn.execute(sa.select(upvotes.c.upvotes).where(key)).scalar()
        if old is None:
            conn.execute(upvotes.insert().values(paper_id=row_id, observed_on=day, upvotes=paper.upvotes))
        elif paper.upvotes > old:
            conn.execute(upvotes.update().where(key).values(upvotes=paper.upvotes))
        else:
            return False
        return True

    def candidates(self, day: date, window_days: int) -> list[Paper]:
        """Papers new on `day`: first seen in the store within the window ending that day."""
        start = day - timedelta(days=max(window_days, 1) - 1)
        query = sa.select(papers).where(papers.c.first_seen >= start, papers.c.first_seen <= day)
        with self.engine.connect() as conn:
            return [_from_row(row) for row in conn.execute(query.order_by(papers.c.id))]

    def all_papers(self) -> list[Paper]:
        with self.engine.connect() as conn:
            return [_from_row(row) for row in conn.execute(sa.select(papers).order_by(papers.c.id))]

    def upvote_history(self, paper_id: int) -> list[tuple[date, int]]:
        query = sa.select(upvotes.c.observed_on, upvotes.c.upvotes).where(upvotes.c.paper_id == paper_id)
        with self.engine.connect() as conn:
            return [(r.observed_on, r.upvotes) for r in conn.execute(query.order_by(upvotes.c.observed_on))]

    def count_papers(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(papers)).scalar_one())

    # -- history, send log, suppressions ---------------------------------------

    def received_before(self, subscriber: str, day: date) -> set[int]:
        """Ids of papers this subscriber got in digests dated before `day`."""
        query = sa.select(received.c.paper_id).where(
            received.c.subscriber == subscriber, received.c.digest_date < day)
        with self.engine.connect() as conn:
            return set(conn.execute(query).scalars())

    def received_by_subscriber(self, day: date) -> dict[str, set[int]]:
        """For every subscriber at once, the ids of papers received in digests dated before `day`."""
        query = sa.select(received.c.subscriber, received.c.paper_id).where(received.c.digest_date < day)
        out: dict[str, set[int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                out.setdefault(row.subscriber, set()).add(row.paper_id)
        return out

    def delivery(self, subscriber: str, day: date) -> DeliveryRecord | None:
        query = sa.select(deliveries).where(deliveries.c.subscriber == subscriber,
                                            deliveries.c.digest_date == day)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _record(row) if row else None

    def deliveries_on(self, day: date) -> list[DeliveryRecord]:
        query = sa.select(deliveries).where(deliveries.c.digest_date == day).order_by(deliveries.c.subscriber)
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def mark_pending(self, subscriber: str, day: date, message_id: str, transport: str) -> None:
        """Record, before handing over, that this digest is about to be sent (committed at once)."""
        with self.engine.begin() as conn:
            key = (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            if conn.execute(sa.select(deliveries.c.status).where(key)).first():
                conn.execute(deliveries.update().where(key).values(
                    status="pending", attempts=deliveries.c.attempts + 1, updated_at=_now()))
            else:
                conn.execute(deliveries.insert().values(
                    subscriber=subscriber, digest_date=day, message_id=message_id, status="pending",
                    attempts=1, transport=transport, detail="", updated_at=_now()))

    def mark_sent(self, subscriber: str, day: date, paper_ids: Sequence[int]) -> None:
        """Record a handed-over digest and the papers it carried, in one transaction."""
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(
                (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            ).values(status="sent", detail="", updated_at=_now()))
            # One read and one batch insert rather than two statements per paper: this runs per digest.
            have = set(conn.execute(sa.select(received.c.paper_id).where(received.c.subscriber == subscriber))
                       .scalars())
            rows = [{"subscriber": subscriber, "paper_id": paper_id, "digest_date": day}
                    for paper_id in dict.fromkeys(paper_ids) if paper_id not in have]
            if rows:
                conn.execute(received.insert(), rows)

    def mark_failed(self, subscriber: str, day: date, detail: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(
                (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            ).values(status="failed", detail=detail[:2000], updated_at=_now()))

    def note_temporary(self, subscriber: str, day: date, detail: str, *, retrying: bool) -> None:
        """Keep a digest pending with the server's reply; `retrying` counts the attempt about to follow."""
        key = (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
        attempts = deliveries.c.attempts + (1 if retrying else 0)
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(key).values(
                status="pending", attempts=attempts, detail=detail[:2000], updated_at=_now()))

    def mark_bounced(self, subscriber: str, day: date, detail: str, suppress_after: int) -> bool:
        """Record a hard bounce; suppress the address once it has bounced `suppress_after` digests in a row.

        In a row means since the last digest it accepted. One transaction, so the bounce and the
        suppression it causes are never half-recorded. True when this bounce suppressed the address.
        """
        mine = deliveries.c.subscriber == subscriber
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(mine & (deliveries.c.digest_date == day)).values(
                status="bounced", detail=detail[:2000], updated_at=_now()))
            last_sent = conn.execute(sa.select(sa.func.max(deliveries.c.digest_date)).where(
                mine & (deliveries.c.status == "sent"))).scalar()
            since = (deliveries.c.digest_date > last_sent) if last_sent else sa.true()
            bounces = conn.execute(sa.select(sa.func.count()).select_from(deliveries).where(
                mine & (deliveries.c.status == "bounced") & since)).scalar_one()
            known = conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email == subscriber)).first()
            if bounces < suppress_after or known:
                return False
            conn.execute(suppressions.insert().values(email=subscriber, reason=f"bounced: {detail}"[:2000],
                                                      created_at=_now()))
            return True

    def suppress(self, email: str, reason: str) -> None:
        with self.engine.begin() as conn:
            if not conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email == email)).first():
                conn.execute(suppressions.insert().values(email=email, reason=reason, created_at=_now()))

    def suppressed(self) -> dict[str, str]:
        """Suppressed addresses (unsubscribed, bounced) with the reason."""
        with self.engine.connect() as conn:
            return {r.email: r.reason for r in conn.execute(sa.select(suppressions))}

    def unsuppress(self, email: str, reason: str) -> bool:
        """Lift a suppression made for `reason` (a resubscribe never lifts a bounce); True if one was."""
        with self.engine.begin() as conn:
            result = conn.execute(suppressions.delete().where(
                (sa.func.lower(suppressions.c.email) == email.lower()) & (suppressions.c.reason == reason)))
            return bool(result.rowcount)

    def paper(self, paper_id: int) -> Paper | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(papers).where(papers.c.id == paper_id)).first()
        return _from_row(row) if row else None

    # -- preferences -------------------------------------------------------------------

    def preference(self, email: str) -> Preference | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(preferences).where(preferences.c.email == email.lower())).first()
        return Preference(row.email, row.frequency, row.paused_until) if row else None

    def preferences(self) -> dict[str, Preference]:
        """Every subscriber's preferences, by lower-case address."""
        with self.engine.connect() as conn:
            return {r.email: Preference(r.email, r.frequency, r.paused_until)
                    for r in conn.execute(sa.select(preferences))}

    _UNSET: Any = object()

    def set_preference(self, email: str, *, frequency: Any = _UNSET, paused_until: Any = _UNSET) -> None:
        """Change the given fields of a subscriber's preferences (None clears one)."""
        changes = {k: v for k, v in (("frequency", frequency), ("paused_until", paused_until))
                   if v is not Store._UNSET}
        key = email.lower()
        with self.engine.begin() as conn:
            if conn.execute(sa.select(preferences.c.email).where(preferences.c.email == key)).first():
                conn.execute(preferences.update().where(preferences.c.email == key).values(
                    updated_at=_now(), **changes))
            else:
                conn.execute(preferences.insert().values(email=key, updated_at=_now(), **changes))

    # -- fetches and runs ---------------------------------------------------------

    def last_fetch(self, source: str) -> FetchRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(fetches).where(fetches.c.source == source)).first()
        return FetchRecord(**row._mapping) if row else None

    def fetches(self) -> list[FetchRecord]:
        with self.engine.connect() as conn:
            return [FetchRecord(**r._mapping) for r in conn.execute(sa.select(fetches).order_by(fetches.c.source))]

    def record_fetch(self, record: FetchRecord) -> None:
        """Replace the source's last fetch; a failed fetch keeps the validators of the last good one."""
        values = {k: v for k, v in record.__dict__.items()}
        with self.engine.begin() as conn:
            old = conn.execute(sa.select(fetches).where(fetches.c.source == record.source)).first()
            if record.result == "failed" and old is not None:
                values.update(etag=old.etag, last_modified=old.last_modified, last_ok_at=old.last_ok_at)
            elif record.result != "failed":
                values["last_ok_at"] = record.fetched_at
            conn.execute(fetches.delete().where(fetches.c.source == record.source))
            conn.execute(fetches.insert().values(**values))

    def start_run(self, command: str) -> int:
        with self.engine.begin() as conn:
            result = conn.execute(runs.insert().values(command=command, started_at=_now(), status="running",
                                                       summary=""))
            return int(result.inserted_primary_key[0])

    def finish_run(self, run_id: int, status: str, summary: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                finished_at=_now(), status=status, summary=summary[:4000]))

    def recent_runs(self, limit: int = 10) -> list[RunRecord]:
        query = sa.select(runs).order_by(runs.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [RunRecord(**r._mapping) for r in conn.execute(query)]

    # -- the schedule lock -----------------------------------------------------------

    def acquire_lock(self, name: str, owner: str, stale_after: float) -> bool:
        """Take the named lock unless another owner's heartbeat is fresher than `stale_after` seconds."""
        now = _now()
        try:
            with self.engine.begin() as conn:
                row = conn.execute(sa.select(locks).where(locks.c.name == name)).first()
                if row is None:
                    conn.execute(locks.insert().values(name=name, owner=owner, heartbeat_at=now))
                    return True
                if row.owner != owner and (now - row.heartbeat_at).total_seconds() < stale_after:
                    return False
                conn.execute(locks.update().where(locks.c.name == name).values(owner=owner, heartbeat_at=now))
                return True
        except sa.exc.IntegrityError:  # another process inserted the row between our read and write
            return False

    def heartbeat(self, name: str, owner: str) -> bool:
        """Refresh the lock; False when it is no longer ours."""
        with self.engine.begin() as conn:
            result = conn.execute(locks.update().where((locks.c.name == name) & (locks.c.owner == owner))
                                  .values(heartbeat_at=_now()))
            return bool(result.rowcount)

    def release_lock(self, name: str, owner: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(locks.delete().where((locks.c.name == name) & (locks.c.owner == owner)))

    def lock_holder(self, name: str) -> str:
        """Who holds the lock and how long ago they were last heard from."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(locks).where(locks.c.name == name)).first()
        if row is None:
            return "nobody"
        return f"{row.owner}, last heartbeat {(_now() - row.heartbeat_at).total_seconds():.0f} s ago"

    def secret(self) -> str:
        """The link-signing key kept in the database, made on first use."""
        with self.engine.begin() as conn:
            value = conn.execute(sa.select(meta.c.value).where(meta.c.key == "secret")).scalar()
            if value is None:
                value = secrets.token_urlsafe(32)
                conn.execute(meta.insert().values(key="secret", value=value))
            return str(value)


def _record(row: Any) -> DeliveryRecord:
    return DeliveryRecord(**{k: v for k, v in row._mapping.items() if k != "updated_at"})


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (preview, status) never block a send
    cursor.execute("PRAGMA synchronous=FULL")  # the send log must survive a power cut
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
