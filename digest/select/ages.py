"""Honest dates: a paper published long before the digest date is not presented as new.

A paper published more than `select.max_age_days` before the digest date (a 2021 paper back on
today's trending list) is never one of the digest's new papers: it can only appear in a small
section of its own, "Trending again", at most `select.trending_again` of them, ranked for the
subscriber like the rest (0: never shown). `max_papers` is a maximum, everything included: "Trending
again" takes its places from within it (`select.rank.age_quota`: at most `trending_again` and at most half
of them, unless too few recent papers matched). One ranking serves both parts: the selector takes the
subscriber's recent and old papers, each kind from its own best candidates (`select.rank.old_papers`, by
`models.is_old`), and the picks are split by age after. With `trending_again = 0` old papers are blocked
before ranking. A paper without a known publication date counts as recent: nothing says otherwise.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date

from digest.models import AGAIN_SECTION, Digest, Section, Subscriber, is_old
from digest.select import Pool, Signals
from digest.select.rank import age_quota

__all__ = ["AGAIN_SECTION", "Ages", "is_old"]


class Ages:
    """What a digest makes of its papers' ages: `max_age_days` (0: none is old), `again` (how many old ones it may
    show, in the last section; 0: none)."""

    def __init__(self, max_age_days: int, again: int) -> None:
        self.max_age_days, self.again = max_age_days, again
        self._ids: tuple[Pool, date, frozenset[int], frozenset[int]] | None = None  # pool, day, old ids, recent ids

    def ranked_with(self, subscriber: Subscriber, pool: Pool, day: date, signals: Signals) -> Signals:
        """The signals the selector ranks `subscriber` with: the old papers blocked like papers already received
        when none may show, and for a trending-only profile, whose old papers `again_reader` picks apart (its
        ranking is a cheap sort). Otherwise unchanged: the selector takes max_papers recent papers and `again` old
        ones itself (`select.rank.old_papers`)."""
        if not self.max_age_days or (self.again and subscriber.interests):
            return signals
        return _blocking(signals, self._papers(pool, day)[0])

    def again_reader(self, subscriber: Subscriber, pool: Pool, day: date,
                     signals: Signals) -> tuple[Subscriber, Signals] | None:
        """For a trending-only profile: how to pick its "Trending again" papers (the recent ones blocked); else None."""
        if not (self.max_age_days and self.again) or subscriber.interests:
            return None
        return (replace(subscriber, max_papers=min(self.again, subscriber.max_papers)),
                _blocking(signals, self._papers(pool, day)[1]))

    def _papers(self, pool: Pool, day: date) -> tuple[frozenset[int], frozenset[int]]:
        """The store ids of the pool's old papers and of its recent ones (one pool a run: worked out once)."""
        if self._ids is None or self._ids[0] is not pool or self._ids[1] != day:
            ids = [(p.store_id, is_old(p, day, self.max_age_days)) for p in pool.papers if p.store_id is not None]
            self._ids = (pool, day, frozenset(i for i, old in ids if old), frozenset(i for i, old in ids if not old))
        return self._ids[2], self._ids[3]

    def split(self, digest: Digest, subscriber: Subscriber, again: Digest | None = None) -> Digest:
        """`digest` for `subscriber`: at most max_papers papers in all (`age_quota`), the recent ones in their
        sections, then at most `again` old ones, best first, under "Trending again" (alone when no recent one).
        `again`: a trending-only profile's old papers, picked apart."""
        if not self.max_age_days:
            return replace(digest, subscriber=subscriber)
        items = digest.items + (again.items if again is not None else ())
        recent = [i for i in items if not is_old(i.paper, digest.date, self.max_age_days)]
        old = [i for i in items if is_old(i.paper, digest.date, self.max_age_days)]
        recent_n, old_n = age_quota(subscriber.max_papers, self.again, len(recent), len(old))
        kept = {id(i) for i in sorted(recent, key=lambda i: -i.score)[:recent_n]}
        sections = [Section(s.name, tuple(i for i in s.items if id(i) in kept), s.note) for s in digest.sections]
        sections = [s for s in sections if s.items]
        if old_n:  # alone, when nothing recent matched: old papers on the topics beat no digest
            sections.append(Section(AGAIN_SECTION, tuple(sorted(old, key=lambda i: -i.score)[:old_n])))
        return replace(digest, subscriber=subscriber, sections=tuple(sections))


def _blocking(signals: Signals, papers: frozenset[int]) -> Signals:
    """`signals` with `papers` blocked as if received."""
    return replace(signals, received=signals.received | papers) if papers else signals
