"""The scoring core: the three ways a reader's papers are scored, behind one function, and the digests made of them.

A reader's papers can be scored by one of three paths, which must give the same digest to the last pick and
reason (`tests/select/test_core.py` holds them to it):

    each    `Scores`: every paper of the pool scored for one reader (preview, `digest rank`, a test send, and
            any reader a batch could not rank)
    batch   `batch.candidates`: a batch of readers scored at once as matrix products, and each reader's best
            `candidate_window` papers kept with their scores
    stored  `stored.candidates`: each interest's matches kept in the store (the window's papers scored once per
            interest, the new ones since), for readers without a learned model

Whichever path scored them, a reader's `Scored` goes through the same `rank.sections` (floor, boosts, quotas,
diversity, sections, reasons). `digests` is the one entry: it picks each reader's path (`plan`), scores, and
makes the digests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import Literal

import numpy as np

from digest.models import Digest, Item, Section, Subscriber
from digest.select import stored
from digest.select.batch import candidates
from digest.select.matches import CacheStore
from digest.select.pool import Pool
from digest.select.profile import Signals
from digest.select.rank import Ranked, blocked_papers, candidate_window, rank, sections
from digest.select.scores import Scored, Scores, SelectSettings

Path = Literal["each", "batch", "stored"]
PATHS: tuple[Path, ...] = ("each", "batch", "stored")


def group(ranked: Iterable[Ranked]) -> tuple[Section, ...]:
    """Picks grouped by section, sections in order of their best pick, picks in rank order."""
    found: dict[str, list[Item]] = {}
    for r in ranked:
        found.setdefault(r.section, []).append(Item(r.paper, r.score, r.reasons))
    return tuple(Section(name, tuple(items)) for name, items in found.items())


@dataclass(frozen=True)
class Plan:
    """Which path scores each reader of a batch: by email, "each", "batch" or "stored"."""

    paths: Mapping[str, Path]

    def readers(self, subscribers: Sequence[Subscriber], path: Path) -> list[Subscriber]:
        return [s for s in subscribers if self.paths.get(s.email) == path]


def plan(pool: Pool, subscribers: Sequence[Subscriber], *, settings: SelectSettings, signals: Mapping[str, Signals],
         store: CacheStore | None = None, shared_only: bool = False, path: Path | None = None) -> Plan:
    """Each reader's path: readers without interests get the trending digest (no path); with `path` every reader
    with interests takes it; otherwise a batch takes the stored matches for readers without a learned model when a
    store is given and they can be used (with `shared_only`, only when those readers share interests: where it
    pays), and the batch products for the rest."""
    ranked = [s for s in subscribers if s.interests]
    if path is not None:
        return Plan({s.email: path for s in ranked})
    quick = [s for s in ranked if stored.without_model(signals.get(s.email))] \
        if store is not None and stored.usable(pool, settings) else []
    if shared_only and not stored.shared(quick):
        quick = []
    chosen = {id(s) for s in quick}
    return Plan({s.email: "stored" if id(s) in chosen else "batch" for s in ranked})


def score(pool: Pool, subscribers: Sequence[Subscriber], path: Path, *, day: date, settings: SelectSettings,
          signals: Mapping[str, Signals], store: CacheStore | None = None, k: int | None = None) -> list[Scored | None]:
    """The readers' scores by one path, in order: every paper of the pool (`each`), or each reader's best `k`
    candidates (`batch`, `stored`; default: as many as the largest digest among them can draw on; None for a
    reader with no candidate)."""
    if not subscribers:
        return []
    if path == "each":
        return [Scores(pool, s, settings, signals.get(s.email, Signals())) for s in subscribers]
    k = k or candidate_window(max(s.max_papers for s in subscribers))
    if path == "batch":
        return list(candidates(pool, subscribers, day=day, settings=settings, k=k, signals=signals))
    if store is None:
        raise ValueError("the stored path needs a store")
    return list(stored.candidates(pool, subscribers, day=day, settings=settings, k=k, signals=signals, store=store))


def digest_of(pool: Pool, subscriber: Subscriber, scored: Scored | None, *, day: date, settings: SelectSettings,
              signals: Signals) -> Digest:
    """One reader's digest from their scores: picked, grouped and explained by `rank.sections`. A reader without
    interests gets the trending digest; scores over every paper (`each`, or None: scored here) still hold what
    is blocked for the reader, which a batch's candidates have left out already."""
    if not subscriber.interests:
        return Digest(subscriber, day, group(rank(pool, subscriber, day=day, settings=settings, signals=signals)),
                      trending=True)
    if scored is None or isinstance(scored, Scores):
        scored = scored or Scores(pool, subscriber, settings, signals)
        return Digest(subscriber, day, sections(pool, scored, subscriber, day=day, settings=settings,
                                                blocked=blocked_papers(pool, subscriber, signals)))
    return Digest(subscriber, day, sections(pool, scored, subscriber, day=day, settings=settings))


def digests(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
            signals: Mapping[str, Signals], store: CacheStore | None = None, shared_only: bool = False,
            path: Path | None = None) -> list[Digest]:
    """The readers' digests, in order: each reader's path planned (`plan`), the readers of each path scored
    together (`score`), then each digest made the same way (`digest_of`)."""
    pool.index(settings.title_weight).trim()  # memory stays flat however many batches a run ranks
    chosen = plan(pool, subscribers, settings=settings, signals=signals, store=store, shared_only=shared_only,
                  path=path)
    ranked = [s for s in subscribers if s.interests]
    k = candidate_window(max(s.max_papers for s in ranked)) if ranked else 0
    found: dict[str, Scored] = {}
    for way in ("stored", "batch", "each"):
        readers = chosen.readers(subscribers, way)
        if readers and way != "each":  # (`each` scores every paper: done reader by reader, in `digest_of`)
            found.update((s.email, c) for s, c in zip(readers, score(pool, readers, way, day=day, settings=settings,
                                                                     signals=signals, store=store, k=k), strict=True)
                         if c is not None)
    if found and settings.diversity > 0:  # the pairs diversity weighs, for the batch at once
        pool.index(settings.title_weight).hold_similarity(np.concatenate(
            [c.papers[c.relevance >= settings.min_relevance] for c in found.values()]))
    return [digest_of(pool, s, found.get(s.email), day=day, settings=settings,
                      signals=signals.get(s.email, Signals())) for s in subscribers]


def select_digest(pool: Pool, subscriber: Subscriber, *, day: date, settings: SelectSettings,
                  received: Iterable[int] = (), signals: Signals | None = None) -> Digest:
    """Pick, rank and group the papers of `pool` for one subscriber on one date (the `each` path)."""
    if signals is None:
        signals = Signals(received=frozenset(received))
    elif received:
        signals = replace(signals, received=signals.received | frozenset(received))
    return digest_of(pool, subscriber, None, day=day, settings=settings, signals=signals)


def select_many(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
                signals: Mapping[str, Signals], store: CacheStore | None = None,
                shared_only: bool = False) -> list[Digest]:
    """`select_digest` for a batch of subscribers, the same picks, the candidates found for all at once (`digests`
    with each reader's path planned: the batch products, or with a `store` the stored matches where they serve)."""
    return digests(pool, subscribers, day=day, settings=settings, signals=signals, store=store,
                   shared_only=shared_only)
