"""Papers (tables `papers` and `upvotes`, their upvote history): ingest with merging, the day's candidates, lookups
by store id, arXiv id, DOI or title, and counts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from datetime import date, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from digest.models import (
    MAX_ROW_ID,
    NOT_TEXT,
    REPLACEMENT,
    Paper,
    clean_arxiv_id,
    clean_doi,
    family_name,
    normalise_title,
)
from digest.store.engine import Base
from digest.store.records import IngestCounts
from digest.store.tables import CHUNK, _from_row, _now, _to_json, papers, upvotes


def _merge(old: Paper, new: Paper) -> Paper:
    """Combine two sightings of one paper, whatever order they arrive in.

    A sighting of a later version (arXiv's v2 after v1), or from a later listing and not of an earlier version,
    overrides; otherwise it only fills what is missing, and an upvote count only goes up. Ids (arXiv id, DOI) are
    only ever filled: they are what the paper is known by. Ingesting the same files twice therefore changes
    nothing. Whatever the sighting, dates never go back: the listing date only moves forward and the publication
    date only earlier (a paper is published once; a later one is a misread year), and text holding
    replacement characters, NUL, control characters or lone surrogates never overwrites clean text (it may be
    repaired by clean text). The parsers refuse such records already (sources._fields.checked); this is the
    store's own guarantee, whatever brings a paper in.
    """
    ahead = bool(old.version and new.version and new.version > old.version)
    behind = bool(old.version and new.version and new.version < old.version)
    listed_later = bool(old.listed_on and new.listed_on and new.listed_on > old.listed_on)
    newer = not behind and (ahead or listed_later)
    changes: dict[str, Any] = {}
    for f in fields(Paper):
        value, current = getattr(new, f.name), getattr(old, f.name)
        if f.name == "store_id" or value in (None, (), "") or value == current:
            continue
        if f.name in _IDS and current:
            continue
        if _worse(value, current):
            continue
        if newer or current in (None, (), "") or _worse(current, value):
            changes[f.name] = value
    if old.published and new.published and new.published > old.published:
        changes.pop("published", None)
    if old.listed_on and new.listed_on and new.listed_on < old.listed_on:
        changes.pop("listed_on", None)
    if "summary" in changes:  # who wrote a summary goes with it
        changes["summary_by"] = new.summary_by
    else:
        changes.pop("summary_by", None)
    for name in _COUNTS:  # counts of attention only go up (an older sighting reports fewer)
        value, current = getattr(new, name), getattr(old, name)
        if not newer and value is not None and current is not None:
            changes[name] = max(value, current)
    return replace(old, **changes)


_COUNTS = ("upvotes", "stars", "citations")


_IDS = ("arxiv_id", "doi")


def _same(row: Paper, paper: Paper) -> bool:
    """Whether a stored paper of the same normalised title is `paper`: neither arXiv id nor DOI differs, and the
    first authors' family names are the same (a paper without authors is not told apart by them)."""
    if row.arxiv_id and paper.arxiv_id and row.arxiv_id != paper.arxiv_id:
        return False
    if row.doi and paper.doi and row.doi != paper.doi:
        return False
    ours, theirs = family_name(row.authors), family_name(paper.authors)
    return not ours or not theirs or ours == theirs


@dataclass
class _Known:
    """The stored papers' identities, kept up to date as a batch is written: store id by arXiv id, by DOI, and the
    store ids of each normalised title."""

    by_arxiv: dict[str, int]
    by_doi: dict[str, int]
    by_title: dict[str, list[int]]

    @classmethod
    def read(cls, conn: Connection) -> _Known:
        known = cls({}, {}, {})
        for row in conn.execute(sa.select(papers.c.id, papers.c.arxiv_id, papers.c.doi, papers.c.title_norm)):
            known.note(row.id, row.arxiv_id, row.doi, row.title_norm)
        return known

    def note(self, row_id: int, arxiv_id: str | None, doi: str | None, title_norm: str) -> None:
        if arxiv_id:
            self.by_arxiv[arxiv_id] = row_id
        if doi:
            self.by_doi[doi] = row_id
        ids = self.by_title.setdefault(title_norm, [])
        if row_id not in ids:
            ids.append(row_id)

    def candidates(self, paper: Paper) -> list[int]:
        """Every stored paper `paper` may be (read before matching it)."""
        ids = [self.by_arxiv.get(paper.arxiv_id or ""), self.by_doi.get(paper.doi or "")]
        return [i for i in ids if i is not None] + self.by_title.get(normalise_title(paper.title), [])

    def find(self, paper: Paper, rows: dict[int, Paper]) -> int | None:
        """The stored paper `paper` is: same arXiv id, else same DOI, else same title and first author."""
        if paper.arxiv_id and paper.arxiv_id in self.by_arxiv:
            return self.by_arxiv[paper.arxiv_id]
        if paper.doi and paper.doi in self.by_doi:
            return self.by_doi[paper.doi]
        ids = self.by_title.get(normalise_title(paper.title), [])
        return next((i for i in ids if _same(rows[i], paper)), None)

    def taken(self, row_id: int, paper: Paper) -> dict[str, Any]:
        """`paper`'s ids that another stored paper holds (a sighting that names two stored papers), as None."""
        out: dict[str, Any] = {}
        if paper.arxiv_id and self.by_arxiv.get(paper.arxiv_id, row_id) != row_id:
            out["arxiv_id"] = None
        if paper.doi and self.by_doi.get(paper.doi, row_id) != row_id:
            out["doi"] = None
        return out


def _worse(value: Any, than: Any) -> bool:
    """Whether `value` holds replacement characters (undecoded bytes) or what is not text, and `than` does not."""
    def has(text: Any) -> bool:
        items = text if isinstance(text, tuple) else (text,)
        return any(isinstance(item, str) and (REPLACEMENT in item or NOT_TEXT.search(item)) for item in items)
    return has(value) and not has(than)



class PaperStore(Base):
    """Papers and their upvote history (mixed into Store)."""


    def add_papers(self, batch: Iterable[Paper], *, seen_on: date) -> IngestCounts:
        """Insert or merge papers (one transaction). A sighting is the stored paper of the same arXiv id
        (version-less), else of the same DOI, else of the same normalised title and first author's family name
        whose ids do not differ from its own; the merged paper holds the ids of both."""
        touched: set[int] = set()
        inserted: set[int] = set()
        changed: set[int] = set()
        with self.write() as conn:
            known = _Known.read(conn)
            sightings = list(dict.fromkeys(batch))  # the same sighting twice changes nothing the second time
            # what the store holds of the papers the sightings may be, read in a few statements rather than one per
            # paper (a cron run re-reads its sources every time: on PostgreSQL those were 2,000 round trips a run),
            # then kept as written
            ids = sorted({i for paper in sightings for i in known.candidates(paper)})
            rows, observed = self._stored(conn, ids), self._observed(conn, ids)
            for paper in sightings:
                row_id = known.find(paper, rows)
                if row_id is None:
                    row_id = self._insert(conn, paper, seen_on)
                    inserted.add(row_id)
                    rows[row_id] = replace(paper, store_id=row_id)
                else:
                    merged = self._update(conn, row_id, replace(paper, **known.taken(row_id, paper)), rows[row_id])
                    if merged is not None:
                        rows[row_id] = merged
                        changed.add(row_id)
                if self._observe(conn, row_id, paper, seen_on, observed):
                    changed.add(row_id)
                touched.add(row_id)
                row = rows[row_id]
                known.note(row_id, row.arxiv_id, row.doi, normalise_title(row.title))
                known.note(row_id, None, None, normalise_title(paper.title))
        updated = changed - inserted
        return IngestCounts(len(touched), len(inserted), len(updated), len(touched - inserted - updated))

    @staticmethod
    def _values(paper: Paper) -> dict[str, Any]:
        return dict(arxiv_id=paper.arxiv_id, title_norm=normalise_title(paper.title), title=paper.title,
                    abstract=paper.abstract, data=_to_json(paper), upvotes=paper.upvotes,
                    published=paper.published, doi=paper.doi, version=paper.version, updated_at=_now())

    def _insert(self, conn: Connection, paper: Paper, seen_on: date) -> int:
        result = conn.execute(papers.insert().values(first_seen=seen_on, **self._values(paper)))
        return int(result.inserted_primary_key[0])

    @staticmethod
    def _stored(conn: Connection, ids: Sequence[int]) -> dict[int, Paper]:
        out = {}
        for start in range(0, len(ids), CHUNK):
            for row in conn.execute(sa.select(papers).where(papers.c.id.in_(ids[start:start + CHUNK]))):
                out[row.id] = _from_row(row)
        return out

    @staticmethod
    def _observed(conn: Connection, ids: Sequence[int]) -> dict[tuple[int, date], int]:
        out = {}
        for start in range(0, len(ids), CHUNK):
            query = sa.select(upvotes).where(upvotes.c.paper_id.in_(ids[start:start + CHUNK]))
            out.update({(r.paper_id, r.observed_on): r.upvotes for r in conn.execute(query)})
        return out

    def _update(self, conn: Connection, row_id: int, paper: Paper, old: Paper) -> Paper | None:
        """Merge a sighting into the stored paper `old`: the merged paper, or None when it is unchanged."""
        merged = _merge(old, paper)
        if merged == old:
            return None
        conn.execute(papers.update().where(papers.c.id == row_id).values(**self._values(merged)))
        return merged

    @staticmethod
    def _observe(conn: Connection, row_id: int, paper: Paper, seen_on: date,
                 observed: dict[tuple[int, date], int]) -> bool:
        """Add the upvote count to the paper's history (`observed`: the history as read before this batch, kept
        up to date here); True when the history changed."""
        if paper.upvotes is None:
            return False
        day = paper.listed_on or seen_on
        key = (upvotes.c.paper_id == row_id) & (upvotes.c.observed_on == day)
        old = observed.get((row_id, day))
        if old is None:
            conn.execute(upvotes.insert().values(paper_id=row_id, observed_on=day, upvotes=paper.upvotes))
        elif paper.upvotes > old:
            conn.execute(upvotes.update().where(key).values(upvotes=paper.upvotes))
        else:
            return False
        observed[(row_id, day)] = paper.upvotes
        return True

    def put_signals(self, counts: dict[int, dict[str, int | None]]) -> int:
        """Set papers' trend counts as a service reported them today (`{store id: {"stars": n, "citations": m}}`,
        only those two names): what the service says replaces what was kept. The number of papers changed."""
        changed = 0
        ids = sorted(counts)
        with self.write() as conn:
            rows = self._stored(conn, ids)
            for row_id in ids:
                old = rows.get(row_id)
                if old is None:
                    continue
                new = replace(old, **{k: v for k, v in counts[row_id].items() if k in ("stars", "citations")})
                if new != old:
                    conn.execute(papers.update().where(papers.c.id == row_id).values(**self._values(new)))
                    changed += 1
        return changed

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

    def paper(self, paper_id: int) -> Paper | None:
        if not 0 < paper_id <= MAX_ROW_ID:  # no such row, and more than the database's integers can hold
            return None
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(papers).where(papers.c.id == paper_id)).first()
        return _from_row(row) if row else None

    def papers_by_id(self, ids: Iterable[int]) -> dict[int, Paper]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(papers).where(papers.c.id.in_(wanted)))
            return {row.id: _from_row(row) for row in rows}

    def find_papers(self, refs: Iterable[str]) -> dict[str, Paper]:
        """Papers named by arXiv id (any version), store id (`#12`), DOI (`doi:10.1101/…`, as `LibraryEntry.ref`
        names one) or title; unknown references are left out."""
        refs = list(dict.fromkeys(refs))
        if not refs:
            return {}
        by_id = {r: int(r.lstrip("#")) for r in refs if r.lstrip("#").isascii() and r.lstrip("#").isdigit()}
        by_id = {r: n for r, n in by_id.items() if n <= MAX_ROW_ID}  # larger is no row, and overflows the query
        by_arxiv = {clean_arxiv_id(r.removeprefix("arXiv:")): r for r in refs if r not in by_id}
        by_arxiv.pop(None, None)
        by_doi = {clean_doi(r.removeprefix("doi:")): r for r in refs if r.startswith("doi:")}
        by_doi.pop(None, None)
        by_title = {normalise_title(r): r for r in refs if r not in by_id}
        found: dict[str, Paper] = {}
        with self.engine.connect() as conn:
            query = sa.select(papers).where(papers.c.id.in_(list(by_id.values())) |
                                            papers.c.arxiv_id.in_(list(by_arxiv)) |
                                            papers.c.doi.in_(list(by_doi)) |
                                            papers.c.title_norm.in_(list(by_title)))
            for row in conn.execute(query):
                paper = _from_row(row)
                for ref, number in by_id.items():
                    if number == row.id:
                        found[ref] = paper
                if row.arxiv_id in by_arxiv:
                    found.setdefault(by_arxiv[row.arxiv_id], paper)
                if row.doi in by_doi:
                    found.setdefault(by_doi[row.doi], paper)
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
