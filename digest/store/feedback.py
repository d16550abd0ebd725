"""Feedback and libraries (tables `feedback` and `libraries`): each reader's "more / less like this" marks, and
the entries of the libraries readers keep (a profile's file, an upload, pasted ids), by the library's key."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

import sqlalchemy as sa

from digest.models import LibraryEntry, Paper
from digest.store.engine import Base
from digest.store.tables import _from_row, _now, cache, feedback, libraries, papers


@dataclass(frozen=True)
class Mark:
    """One "more / less like this" a reader gave: the paper, +1 or -1, and when."""

    paper: Paper
    value: int
    marked_at: datetime


class FeedbackStore(Base):
    """The `feedback` and `libraries` tables (mixed into Store)."""


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

    def put_library(self, key: str, entries: Sequence[LibraryEntry]) -> None:
        """Keep a library's entries under its digest (`libraries.digest_of`); kept once, whoever shares it."""
        from digest.store.subscribers import put_libraries

        with self.write() as conn:
            put_libraries(conn, {key: entries})

    def update_library(self, key: str, entries: Sequence[LibraryEntry]) -> None:
        """Replace the entries kept under a library's key with what was learnt of them (its ids looked up): the key
        stays, so every profile naming it reads the new entries."""
        from digest.store.subscribers import library_json

        with self.write() as conn:
            changed = conn.execute(libraries.update().where(libraries.c.key == key).values(
                entries=library_json(entries), updated_at=_now())).rowcount
            if not changed:  # (a signup's library, kept once the reader confirms: kept now, under its key)
                conn.execute(libraries.insert().values(key=key, entries=library_json(entries), updated_at=_now()))

    def library_entries(self, key: str) -> tuple[LibraryEntry, ...]:
        """A stored library's entries (none for an unknown digest)."""
        with self.engine.connect() as conn:
            text = conn.execute(sa.select(libraries.c.entries).where(libraries.c.key == key)).scalar()
        if text is None:
            return ()
        return tuple(LibraryEntry(r["title"], r["abstract"], r["arxiv_id"], r["doi"], tuple(r["authors"]),
                                  date.fromisoformat(r["added"]) if r["added"] else None, r["line"])
                     for r in json.loads(text))
