"""Honest dates: a paper published long before the digest date is not presented as new.

A paper published more than `select.max_age_days` before the digest date (a 2021 paper back on
today's trending list) is never one of the digest's new papers: it can only appear in a small
section of its own, "Trending again", at most `select.trending_again` of them, ranked for the
subscriber like the rest (0: never shown). One ranking serves both parts: the selector picks
`trending_again` more papers than the subscriber's `max_papers`, and the picks are split by age
after. So an old paper can take the place of a recent one (the digest then holds fewer new papers),
never the other way round; with `trending_again = 0` old papers are blocked before ranking. A paper
without a known publication date counts as recent: nothing says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import date

from .models import AGAIN_SECTION, Digest, Paper, Section, Subscriber
from .select import Pool, Signals

__all__ = ["AGAIN_SECTION", "Ages", "is_old", "split"]


def is_old(paper: Paper, day: date, max_age_days: int) -> bool:
    """Whether `paper` was published more than `max_age_days` before `day` (0: no paper is old)."""
    return bool(max_age_days and paper.published and (day - paper.published).days > max_age_days)


class Ages:
    """What a digest makes of its papers' ages: `max_age_days` (0: none is old), `again` (how many old ones it may
    show, in the last section; 0: none)."""

    def __init__(self, max_age_days: int, again: int) -> None:
        self.max_age_days, self.again = max_age_days, again
        self._old: tuple[Pool, date, frozenset[int]] | None = None  # (the pool, day, its old papers' ids)

    def reader(self, subscriber: Subscriber, pool: Pool, day: date, signals: Signals) -> tuple[Subscriber, Signals]:
        """The subscriber and signals the selector ranks with: room for `again` more picks (split off after, one
        pass for both parts), or, when no old paper may show, the old papers blocked like papers already received."""
        if not self.max_age_days:
            return subscriber, signals
        if self.again:
            return replace(subscriber, max_papers=subscriber.max_papers + self.again), signals
        old = self._old_ids(pool, day)
        return subscriber, (replace(signals, received=signals.received | old) if old else signals)

    def _old_ids(self, pool: Pool, day: date) -> frozenset[int]:
        if self._old is None or self._old[0] is not pool or self._old[1] != day:  # (one pool a run: once)
            ids = frozenset(p.store_id for p in pool.papers if p.store_id is not None and is_old(p, day,
                                                                                                   self.max_age_days))
            self._old = (pool, day, ids)
        return self._old[2]

    def split(self, digest: Digest, subscriber: Subscriber) -> Digest:
        """`digest` (ranked for `reader`'s subscriber) for `subscriber`: at most max_papers recent papers in their
        sections, then at most `again` old ones, best first, under "Trending again" (none when no recent one)."""
        if not self.max_age_days:
            return replace(digest, subscriber=subscriber)
        recent = [i for i in digest.items if not is_old(i.paper, digest.date, self.max_age_days)]
        old = [i for i in digest.items if is_old(i.paper, digest.date, self.max_age_days)]
        kept = {id(i) for i in sorted(recent, key=lambda i: -i.score)[: subscriber.max_papers]}
        sections = [Section(s.name, tuple(i for i in s.items if id(i) in kept)) for s in digest.sections]
        sections = [s for s in sections if s.items]
        if sections and old and self.again:
            sections.append(Section(AGAIN_SECTION, tuple(sorted(old, key=lambda i: -i.score)[: self.again])))
        return replace(digest, subscriber=subscriber, sections=tuple(sections))


def split(papers: Sequence[Paper], day: date, max_age_days: int) -> tuple[list[Paper], list[Paper]]:
    """(recent, old) papers of `papers` on `day`, each in the given order."""
    recent: list[Paper] = []
    old: list[Paper] = []
    for paper in papers:
        (old if is_old(paper, day, max_age_days) else recent).append(paper)
    return recent, old
