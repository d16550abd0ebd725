"""Subscribers' feedback, the selector's paper lookups, its caches (term statistics, embeddings), readers' libraries."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from digest.models import MAX_ROW_ID, LibraryEntry, Paper, clean_arxiv_id, normalise_title
from digest.store.engine import Base
from digest.store.tables import _from_row, _now, cache, embeddings, feedback, libraries, papers


@dataclass(frozen=True)
class Mark:
    """One "more / less like this" a reader gave: the paper, +1 or -1, and when."""

    paper: Paper
    value: int
    marked_at: datetime


class FeedbackStore(Base):
    """Feedback, paper lookups and caches for the selector (mixed into Store)."""


    def add_feedback(self, subscriber: str, paper_id: int, value: int) -> None:
        """Record that a subscriber wants more (+1) or less (-1) like a paper; the latest word counts."""
        key = (feedback.c.subscriber == subscriber) & (feedback.c.paper_id == paper_id)
        with self.write() as conn:
            conn.execute(feedback.delete().where(key))
            conn.execute(feedback.insert().values(subscriber=subscriber, paper_id=paper_id, value=value,
                                                  created_at=_now()))

    def marks_of(self, email: str, limit: int) -> tuple[list[Mark], int]:
        """A reader's latest `limit` marks (any case of the address), newest first, and how many there are in all."""
        mine = sa.func.lower(feedback.c.subscriber) == email.lower()
        query = (sa.select(papers, feedback.c.value.label("mark"), feedback.c.created_at.label("marked_at"))
                 .join(feedback, feedback.c.paper_id == papers.c.id).where(mine)
                 .order_by(feedback.c.created_at.desc(), feedback.c.paper_id.desc()).limit(limit))
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(feedback).where(mine)).scalar_one()
            return [Mark(_from_row(row), row.mark, row.marked_at) for row in conn.execute(query)], int(total)

    def remove_feedback(self, email: str, paper_id: int | None = None) -> int:
        """Forget a reader's mark on one paper, or (None) every mark and the model learned from them; how many went.
        The next send learns from what is left (a learned model is kept under a fingerprint of its marks)."""
        key = email.lower()
        mine = sa.func.lower(feedback.c.subscriber) == key
        with self.write() as conn:
            if paper_id is not None:
                return int(conn.execute(feedback.delete().where(mine & (feedback.c.paper_id == paper_id))).rowcount)
            conn.execute(cache.delete().where(sa.func.lower(cache.c.key) == f"feedback-model/{key}"))
            return int(conn.execute(feedback.delete().where(mine)).rowcount)

    def feedback_by_subscriber(self, subscribers: str | Sequence[str] | None = None) -> dict[str, dict[int, int]]:
        """Every subscriber's feedback (or that of one or some): paper id → +1 or -1."""
        query = sa.select(feedback.c.subscriber, feedback.c.paper_id, feedback.c.value)
        chosen = [subscribers] if isinstance(subscribers, str) else subscribers
        parts = [None] if chosen is None else [chosen[i:i + 500] for i in range(0, len(chosen), 500)]
        out: dict[str, dict[int, int]] = {}
        with self.engine.connect() as conn:
            for part in parts:
                for row in conn.execute(query if part is None else query.where(feedback.c.subscriber.in_(part))):
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
        by_id = {r: int(r.lstrip("#")) for r in refs if r.lstrip("#").isascii() and r.lstrip("#").isdigit()}
        by_id = {r: n for r, n in by_id.items() if n <= MAX_ROW_ID}  # larger is no row, and overflows the query
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

    def sample_papers(self, n: int, seed: int) -> list[Paper]:
        """About n papers of the store, the same for one seed while the store is unchanged (a model's negatives)."""
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(papers)).scalar() or 0
            if not total:
                return []
            step = max(total // n, 1)
            query = sa.select(papers).where((papers.c.id + seed) % step == 0).order_by(papers.c.id).limit(n)
            return [_from_row(row) for row in conn.execute(query)]

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

    def get_caches(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The cached values of these keys (a few queries for many keys); missing keys are left out.

        Read straight from the driver, the keys in order: a ranking reads a stored profile for every interest,
        and SQLAlchemy's rows cost more than SQLite finding the keys (180,000 profiles: 2.1 s of CPU through
        SQLAlchemy, 1.4 s from the driver, 1.0 s with the keys sorted, neighbouring keys sharing the index's
        pages)."""
        wanted = sorted(set(keys))
        out: dict[str, bytes] = {}
        if not wanted:
            return out
        raw = self.engine.raw_connection()
        try:
            cursor = raw.cursor()
            if self.engine.dialect.name == "postgresql":
                cursor.execute("SELECT key, value FROM cache WHERE key = ANY(%s)", (wanted,))
                out.update((key, bytes(value)) for key, value in cursor.fetchall())
            else:
                for start in range(0, len(wanted), 500):  # stay below SQLite's bound-parameter limit
                    part = wanted[start:start + 500]
                    cursor.execute(f"SELECT key, value FROM cache WHERE key IN ({', '.join('?' * len(part))})", part)
                    out.update((key, bytes(value)) for key, value in cursor.fetchall())
            cursor.close()
        finally:
            raw.close()  # (back to the pool, which ends the read's transaction)
        return out

    def put_cache(self, key: str, value: bytes) -> None:
        """Keep `value` under `key` (replacing the key's)."""
        with self.write() as conn:
            _upsert_caches(conn, {key: value})

    def put_caches(self, values: dict[str, bytes]) -> None:
        """Keep many values at once, each replacing its key's (an upsert: two workers writing one key both succeed,
        the last one's value stays)."""
        if values:
            with self.write(serial=False) as conn:
                _upsert_caches(conn, values)

    def purge_caches(self, prefix: str, before: datetime) -> int:
        """Forget the cached values under `prefix` last written before `before`; how many."""
        with self.write(serial=False) as conn:
            return int(conn.execute(cache.delete().where(cache.c.key.startswith(prefix, autoescape=True),
                                                         cache.c.updated_at < before)).rowcount or 0)

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
        with self.write() as conn:
            conn.execute(embeddings.delete().where(embeddings.c.model == model,
                                                   embeddings.c.paper_key.in_(list(vectors))))
            conn.execute(embeddings.insert(), [
                {"paper_key": key, "model": model, "vector": np.asarray(v, dtype="<f4").tobytes()}
                for key, v in vectors.items()])

    def put_library(self, key: str, entries: Sequence[LibraryEntry]) -> None:
        """Keep a library's entries under its digest (`libraries.digest_of`); kept once, whoever shares it."""
        from digest.store.roster import put_libraries

        with self.write() as conn:
            put_libraries(conn, {key: entries})

    def library_entries(self, key: str) -> tuple[LibraryEntry, ...]:
        """A stored library's entries (none for an unknown digest)."""
        with self.engine.connect() as conn:
            text = conn.execute(sa.select(libraries.c.entries).where(libraries.c.key == key)).scalar()
        if text is None:
            return ()
        return tuple(LibraryEntry(r["title"], r["abstract"], r["arxiv_id"], r["doi"], tuple(r["authors"]),
                                  date.fromisoformat(r["added"]) if r["added"] else None, r["line"])
                     for r in json.loads(text))


def _upsert_caches(conn: sa.Connection, values: dict[str, bytes]) -> None:
    """Each value under its key, replacing the key's (an upsert: no delete-then-insert window for another writer)."""
    table = (postgresql if conn.dialect.name == "postgresql" else sqlite).insert(cache)
    upsert = table.on_conflict_do_update(index_elements=[cache.c.key], set_={
        "value": table.excluded.value, "updated_at": table.excluded.updated_at})
    now = _now()
    rows = [{"key": key, "value": value, "updated_at": now} for key, value in sorted(values.items())]
    for start in range(0, len(rows), 500):  # (sorted: two writers take the rows' locks in one order)
        conn.execute(upsert, rows[start:start + 500])
