"""Selection: score a pool of papers against a subscriber's profile, pick, group and explain.

`Pool` analyses one day's papers once; `rank` orders them for one subscriber (with the parts of
every score); `select_digest` turns the picks into a `Digest`. The formula is in `rank.py`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date

from ..models import Digest, Item, Section, Subscriber
from .corpus import CorpusStats
from .pool import Embedder, Pool
from .profile import Signals
from .rank import LIKED_SECTION, TRENDING_SECTION, Ranked, SelectSettings, rank
from .text import tokens

__all__ = ["LIKED_SECTION", "TRENDING_SECTION", "CorpusStats", "Embedder", "Pool", "Ranked", "SelectSettings",
           "Signals", "group", "rank", "select_digest", "tokens"]


def group(ranked: Iterable[Ranked]) -> tuple[Section, ...]:
    """Picks grouped by section, sections in order of their best pick, picks in rank order."""
    sections: dict[str, list[Item]] = {}
    for r in ranked:
        sections.setdefault(r.section, []).append(Item(r.paper, r.score, r.reasons))
    return tuple(Section(name, tuple(items)) for name, items in sections.items())


def select_digest(pool: Pool, subscriber: Subscriber, *, day: date, settings: SelectSettings,
                  received: Iterable[int] = (), signals: Signals | None = None) -> Digest:
    """Pick, rank and group the papers of `pool` for one subscriber on one date."""
    if signals is None:
        signals = Signals(received=frozenset(received))
    elif received:
        signals = Signals(signals.received | frozenset(received), signals.liked, signals.disliked, signals.seeds)
    picks = rank(pool, subscriber, day=day, settings=settings, signals=signals, parts=False)
    return Digest(subscriber, day, group(picks), trending=not subscriber.interests)
