"""Scoring one subscriber against a pool: relevance, boosts, floor, diversity, sections, reasons.

For paper d and interest i (with weight w_i), in BM25 units:

    relevance_i(d) = w_i × ( Σ_keywords BM25F(keyword, d)
                           + description_weight × BM25F(description, d)
                           + seed_weight × BM25F(centroid of seed papers, d)
                           + semantic_weight × max(0, cos(embedding(d), embedding(interest)) - SEMANTIC_BASE) )
    relevance(d)   = max_i relevance_i(d)
                     + liked_weight × BM25F(centroid liked, d) - disliked_weight × BM25F(centroid disliked, d)
    score(d)       = relevance(d) × (1 + upvote_weight × trend(d)) × (1 + recency_weight × recency(d))

trend(d) = log(1 + upvotes + comment_weight × comments), scaled to 1 for the pool's top paper;
recency(d) = 0.5 ** (age in days / recency_half_life_days). A paper is eligible when it is not
excluded, not already received, not marked *less*, and its relevance reaches `relevance_floor`.
Eligible papers are picked best score first, with maximal marginal relevance: each next pick
maximises (1 - diversity) × score / best score - diversity × (its highest similarity to a pick),
so near-duplicates do not fill a digest. Each pick goes to the section of the interest it matches
best; sections are ordered by their best pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

import numpy as np

from ..models import Paper, Subscriber
from .explain import Explainer
from .pool import Index, Pool
from .profile import CompiledInterest, Part, Signals, compile_interest, feedback_parts

TRENDING_SECTION = "Trending"
LIKED_SECTION = "More like papers you liked"
SEMANTIC_BASE = 0.2  # cosine similarity of unrelated abstracts with this model hovers around here
MMR_WINDOW = 3  # diversity re-ranks the best (window × wanted) candidates
NEAR_DUPLICATE = 0.75  # cosine similarity above which a paper repeats one already picked (goes last)


@dataclass(frozen=True)
class SelectSettings:
    """The knobs of the scoring formula (the `[select]` settings)."""

    relevance_floor: float = 12.0
    title_weight: float = 3.0
    upvote_weight: float = 0.5
    comment_weight: float = 2.0
    recency_weight: float = 0.3
    recency_half_life_days: float = 30.0
    description_weight: float = 0.3
    seed_weight: float = 3.0
    liked_weight: float = 3.0
    disliked_weight: float = 3.0
    diversity: float = 0.3
    semantic_weight: float = 0.0


@dataclass(frozen=True)
class Ranked:
    """One candidate paper as ranked for one subscriber, with the parts of its score."""

    paper: Paper
    rank: int
    score: float
    relevance: float
    passes_floor: bool
    section: str
    reasons: tuple[str, ...]
    parts: dict[str, float] = field(default_factory=dict)


class Scores:
    """Every pool paper's relevance for one subscriber, and the interest it matches best."""

    def __init__(self, pool: Pool, subscriber: Subscriber, settings: SelectSettings, signals: Signals) -> None:
        self.pool, self.settings = pool, settings
        self.index = pool.index(settings.title_weight)
        self.interests = [self._compiled(i, signals) for i in subscriber.interests]
        self.liked = signals.liked
        self.feedback = feedback_parts(signals, self.index, liked_weight=settings.liked_weight,
                                       disliked_weight=settings.disliked_weight)
        self.semantic = self._semantic()
        per_interest = np.vstack([self.interest_relevance(n) for n in range(len(self.interests))])
        self.best = per_interest.argmax(axis=0)
        self.lexical_best = per_interest.max(axis=0)
        self.feedback_score = self._sum(self.feedback)
        self.relevance = self.lexical_best + self.feedback_score

    def _compiled(self, interest, signals: Signals) -> CompiledInterest:  # type: ignore[no-untyped-def]
        seeds = tuple(signals.seeds.get(ref) for ref in interest.seed_papers)
        key = ("interest", interest, seeds, self.settings.description_weight, self.settings.seed_weight)
        memo = self.index.memo
        if key not in memo:
            memo[key] = compile_interest(interest, self.index, signals.seeds,
                                         description_weight=self.settings.description_weight,
                                         seed_weight=self.settings.seed_weight)
        return memo[key]

    def _sum(self, parts: Sequence[Part]) -> np.ndarray:
        total = np.zeros(len(self.pool))
        for part in parts:
            total += part.coef * self.index.scores(part.unit)
        return total

    def _semantic(self) -> list[np.ndarray] | None:
        if not self.settings.semantic_weight or self.pool.embedder is None:
            return None
        return [self.pool.semantic(ci.interest, ci.seed_papers) for ci in self.interests]

    def interest_relevance(self, n: int) -> np.ndarray:
        """Relevance of every paper to the n-th interest, its weight included."""
        ci = self.interests[n]
        total = self._sum(ci.parts)
        if self.semantic is not None:
            total = total + self.settings.semantic_weight * np.maximum(self.semantic[n] - SEMANTIC_BASE, 0.0)
        return ci.interest.weight * total

    def section(self, i: int) -> str:
        if self.lexical_best[i] <= 0 and self.feedback_score[i] > 0:
            return LIKED_SECTION
        return self.interests[int(self.best[i])].interest.name


def _boost(pool: Pool, day: date, settings: SelectSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    trend, recency = pool.boosts(day, settings.comment_weight, settings.recency_half_life_days)
    return trend, recency, (1 + settings.upvote_weight * trend) * (1 + settings.recency_weight * recency)


def _blocked(pool: Pool, subscriber: Subscriber, signals: Signals) -> np.ndarray:
    """Papers never to be picked: excluded, already received, or marked less."""
    blocked = np.zeros(len(pool), dtype=bool)
    for phrase in subscriber.exclude:
        blocked |= pool.contains(phrase)
    disliked = {p.store_id for p in signals.disliked if p.store_id is not None}
    for paper_id in set(signals.received) | disliked:
        if paper_id in pool.index_by_id:
            blocked[pool.index_by_id[paper_id]] = True
    return blocked


def mmr(index: Index, order: np.ndarray, score: np.ndarray, wanted: int, diversity: float, *,
        drop_duplicates: bool = False) -> list[int]:
    """Maximal marginal relevance over `order` (best first): relevance traded against redundancy.

    A near-duplicate of a pick is never picked before a paper that is not one; with
    `drop_duplicates` (a digest) it is not picked at all.
    """
    if diversity <= 0 or len(order) <= 1:
        return order[:wanted].tolist()
    window = order[: max(MMR_WINDOW * wanted, wanted + 10)]
    top = float(score[window[0]])
    value = score[window] / top if top > 0 else np.zeros(len(window))
    similar = index.similarity(window)[:, window]
    picked: list[int] = []
    redundancy = np.zeros(len(window))
    free = np.ones(len(window), dtype=bool)
    while len(picked) < wanted:
        open_ = free & (redundancy < NEAR_DUPLICATE)
        if not open_.any():
            break
        j = int(np.where(open_, (1 - diversity) * value - diversity * redundancy, -np.inf).argmax())
        picked.append(j)
        free[j] = False
        redundancy = np.maximum(redundancy, similar[j])
    out = [int(window[j]) for j in picked] + order[len(window):].tolist()
    if not drop_duplicates:
        out += [int(window[j]) for j in np.flatnonzero(free)]
    return out[:wanted]


def rank(pool: Pool, subscriber: Subscriber, *, day: date, settings: SelectSettings,
         signals: Signals | None = None, limit: int | None = None, parts: bool = True) -> list[Ranked]:
    """The subscriber's candidates, best first: the digest's picks, or with `limit` the top N regardless of floor.

    `parts=False` leaves out the score breakdown (a digest does not show it).
    """
    signals = signals or Signals()
    blocked = _blocked(pool, subscriber, signals)
    if not subscriber.interests:
        return _trending(pool, subscriber, day, settings, blocked, limit)
    scores = Scores(pool, subscriber, settings, signals)
    trend, recency, boost = _boost(pool, day, settings)
    final = scores.relevance * boost
    passes = (scores.relevance >= settings.relevance_floor) & (scores.relevance > 0)
    eligible = ~blocked & (passes if limit is None else True)
    candidates = np.flatnonzero(eligible)
    order = candidates[np.lexsort((candidates, -final[candidates]))]
    wanted = subscriber.max_papers if limit is None else limit
    positive = order[final[order] > 0]
    picks = mmr(scores.index, positive, final, wanted, settings.diversity, drop_duplicates=limit is None)
    picks += order[final[order] <= 0][: wanted - len(picks)].tolist()
    explain = Explainer(scores)
    return [Ranked(pool.papers[i], n + 1, round(float(final[i]), 4), round(float(scores.relevance[i]), 4),
                   bool(passes[i]), scores.section(i), explain.reasons(i),
                   explain.parts(i) | {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4),
                                       "boost": round(float(boost[i]), 4)} if parts else {})
            for n, i in enumerate(picks)]


def _trending(pool: Pool, subscriber: Subscriber, day: date, settings: SelectSettings, blocked: np.ndarray,
              limit: int | None) -> list[Ranked]:
    """A profile without interests: the most upvoted papers, the boosts breaking ties."""
    trend, recency, boost = _boost(pool, day, settings)
    ranked = sorted((i for i in range(len(pool)) if not blocked[i]),
                    key=lambda i: (-(pool.papers[i].upvotes or 0), -boost[i], i))
    out = []
    for n, i in enumerate(ranked[: limit or subscriber.max_papers]):
        paper = pool.papers[i]
        reason = f"trending: {paper.upvotes} upvotes" if paper.upvotes else "new today"
        out.append(Ranked(paper, n + 1, float(paper.upvotes or 0), 0.0, True, TRENDING_SECTION, (reason,),
                          {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4)}))
    return out
