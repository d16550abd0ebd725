"""Selection: score a pool of papers against a subscriber's profile, pick, group and explain.

The selector is one pass: profile → query units (`profile.py`), pool → index (`pool.py`),
(query, index) → scores (`scores.py`, or `batch.py` for many subscribers at once), scores → picks →
sections (`rank.py`) → reasons (`explain.py`). `Pool` analyses one day's papers once; `rank` orders
them for one subscriber (with the parts of every score); `select_digest` turns the picks into a
`Digest`; `select_many` does it for a batch of subscribers, scoring the whole batch as matrix
products and each digest's few dozen candidates only. The formula is in `rank.py`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import date

import numpy as np

from digest.models import Digest, Item, Section, Subscriber
from digest.select import stored
from digest.select.batch import candidates
from digest.select.corpus import CorpusStats
from digest.select.matches import CacheStore
from digest.select.pool import Embedder, Pool
from digest.select.profile import Signals
from digest.select.rank import TRENDING_SECTION, Ranked, blocked_papers, candidate_window, rank, sections
from digest.select.scores import LIKED_SECTION, Scored, Scores, SelectSettings
from digest.select.text import tokens

__all__ = ["LIKED_SECTION", "TRENDING_SECTION", "CorpusStats", "Embedder", "Pool", "Ranked", "SelectSettings",
           "Signals", "group", "rank", "select_digest", "select_many", "tokens"]


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
        signals = replace(signals, received=signals.received | frozenset(received))
    if not subscriber.interests:
        return Digest(subscriber, day, group(rank(pool, subscriber, day=day, settings=settings, signals=signals)),
                      trending=True)
    scores = Scores(pool, subscriber, settings, signals)
    return Digest(subscriber, day, sections(pool, scores, subscriber, day=day, settings=settings,
                                            blocked=blocked_papers(pool, subscriber, signals)))


def select_many(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
                signals: Mapping[str, Signals], store: CacheStore | None = None,
                shared_only: bool = False) -> list[Digest]:
    """`select_digest` for a batch of subscribers, the same picks, the candidates found for all at once.

    `batch.candidates` scores the pool for the whole batch as matrix products (seed papers, learned
    models, the floor and what is blocked included) and keeps each subscriber's best `candidate_window`
    papers with their scores; diversity, sections and reasons are then worked out per digest on those
    candidates only. With a `store`, the candidates of subscribers without a learned model come from each
    interest's matches kept in it (`stored`): the window's papers are scored once per interest, not every send;
    with `shared_only`, only when those readers share interests (`stored.shared`), the case where it pays.
    """
    pool.index(settings.title_weight).trim()  # memory stays flat however many batches a run ranks
    ranked = [s for s in subscribers if s.interests]
    found: dict[str, Scored] = {}
    if ranked:
        k = candidate_window(max(s.max_papers for s in ranked))
        quick = [s for s in ranked if stored.without_model(signals.get(s.email))] \
            if store is not None and stored.usable(pool, settings) else []
        if shared_only and not stored.shared(quick):
            quick = []
        chosen = {id(s) for s in quick}
        rest = [s for s in ranked if id(s) not in chosen]
        for group, scored in ((quick, stored.candidates(pool, quick, day=day, settings=settings, k=k, signals=signals,
                                                          store=store) if quick and store is not None else []),
                              (rest, candidates(pool, rest, day=day, settings=settings, k=k, signals=signals)
                               if rest else [])):
            found.update((s.email, c) for s, c in zip(group, scored, strict=True) if c is not None)
    if found and settings.diversity > 0:  # the pairs diversity weighs, for the batch at once
        pool.index(settings.title_weight).hold_similarity(np.concatenate(
            [c.papers[c.relevance >= settings.min_relevance] for c in found.values()]))
    out = []
    for subscriber in subscribers:
        if subscriber.email in found:
            out.append(Digest(subscriber, day, sections(pool, found[subscriber.email], subscriber, day=day,
                                                        settings=settings)))
        else:
            out.append(select_digest(pool, subscriber, day=day, settings=settings,
                                     signals=signals.get(subscriber.email, Signals())))
    return out
