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
Eligible papers are taken best score first, re-ranked for diversity (maximal marginal
relevance in one vectorised pass): (1 - diversity) × score / best score - diversity × (its highest
similarity to a better-scored candidate); a near-duplicate (cosine >= NEAR_DUPLICATE) of a better
candidate is left out, so one story in five versions does not fill a digest. Each pick goes to the
section of the interest it matches best; sections are ordered by their best pick.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date

import numpy as np

from ..models import Interest, Paper, Subscriber
from .explain import Explainer
from .pool import Index, Pool
from .profile import CompiledInterest, Part, Signals, compile_interest, feedback_parts

TRENDING_SECTION = "Trending"
LIKED_SECTION = "More like papers you liked"
SEMANTIC_BASE = 0.2  # cosine similarity of unrelated abstracts with this model hovers around here
MMR_WINDOW = 2  # diversity re-ranks the best (window × wanted) candidates
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
        compiled = [self._compiled(i, signals) for i in subscriber.interests]
        self.interests = [c for c, _ in compiled]
        self.lexical = [v for _, v in compiled]
        self.liked = signals.liked
        self.feedback: tuple[Part, ...] = ()
        if signals.liked or signals.disliked:
            self.feedback = feedback_parts(signals, self.index, liked_weight=settings.liked_weight,
                                           disliked_weight=settings.disliked_weight)
        self.semantic = self._semantic()
        if len(self.interests) == 1:
            self.lexical_best = self.interest_relevance(0)
            self.best = np.zeros(len(pool), dtype=np.int64)
        else:
            per_interest = np.vstack([self.interest_relevance(n) for n in range(len(self.interests))])
            self.best = per_interest.argmax(axis=0)
            self.lexical_best = per_interest.max(axis=0)
        self.feedback_score = self._sum(self.feedback) if self.feedback else self.index.zeros
        self.relevance = self.lexical_best + self.feedback_score if self.feedback else self.lexical_best

    def _compiled(self, interest: Interest, signals: Signals) -> tuple[CompiledInterest, np.ndarray]:
        """The interest's query parts and its unweighted lexical scores, shared by interests with the same words."""
        seeds = tuple(signals.seeds.get(ref) for ref in interest.seed_papers)
        key = ("interest", frozenset(interest.keywords), interest.description, seeds,
               self.settings.description_weight, self.settings.seed_weight)  # keyword order does not matter
        found = self.index.memo.get(key)
        if found is None:
            compiled = compile_interest(interest, self.index, signals.seeds,
                                        description_weight=self.settings.description_weight,
                                        seed_weight=self.settings.seed_weight)
            found = (replace(compiled, key=key), self._sum(compiled.parts))
            self.index.remember(key, found, vectors=1)
        compiled, lexical = found
        return CompiledInterest(interest, compiled.parts, compiled.description_words, compiled.seed_papers,
                                compiled.key), lexical

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
        total = self.lexical[n]
        if self.semantic is not None:
            total = total + self.settings.semantic_weight * np.maximum(self.semantic[n] - SEMANTIC_BASE, 0.0)
        return ci.interest.weight * total

    def section(self, i: int) -> str:
        if self.lexical_best[i] <= 0 and self.feedback_score[i] > 0:
            return LIKED_SECTION
        return self.interests[int(self.best[i])].interest.name


def _boost(pool: Pool, day: date, settings: SelectSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    memo = pool.index(settings.title_weight).memo
    key = ("boost", day, settings)
    if key not in memo:
        trend, recency = pool.boosts(day, settings.comment_weight, settings.recency_half_life_days)
        memo[key] = trend, recency, (1 + settings.upvote_weight * trend) * (1 + settings.recency_weight * recency)
    return memo[key]  # type: ignore[no-any-return]


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


def diversify(index: Index, order: np.ndarray, score: np.ndarray, wanted: int, diversity: float, *,
              drop_duplicates: bool = False) -> list[int]:
    """Re-rank the best candidates, relevance traded against redundancy (maximal marginal relevance in one pass).

    Each of the best (MMR_WINDOW × wanted) candidates gets (1 - diversity) × score / best score -
    diversity × (its highest similarity to a better-scored candidate); greedy MMR compares with the
    picks instead, which needs a loop per pick. A near-duplicate of a better candidate goes after
    all the others, and with `drop_duplicates` (a digest) it is left out.
    """
    if diversity <= 0 or len(order) <= 1:
        return order[:wanted].tolist()
    window = order[: max(MMR_WINDOW * wanted, wanted + 5)]  # typically a few dozen papers
    top = float(score[window[0]])
    value = score[window] / top if top > 0 else np.zeros(len(window))
    redundancy = np.tril(index.similarity_among(window), k=-1).max(axis=1)
    duplicate = redundancy >= NEAR_DUPLICATE
    gain = np.where(duplicate, -np.inf, (1 - diversity) * value - diversity * redundancy)
    ranked = np.argsort(-gain, kind="stable")
    kept = window[ranked[: int((~duplicate).sum())]].tolist()
    out = kept + order[len(window):].tolist()
    if not drop_duplicates:
        out += window[duplicate].tolist()
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
    order = candidates[np.argsort(-final[candidates], kind="stable")]
    wanted = subscriber.max_papers if limit is None else limit
    positive = order[final[order] > 0]
    picks = diversify(scores.index, positive, final, wanted, settings.diversity, drop_duplicates=limit is None)
    picks += order[final[order] <= 0][: wanted - len(picks)].tolist()
    explain = Explainer(scores, picks)
    values = zip(picks, final[picks].round(4).tolist(), scores.relevance[picks].round(4).tolist(),
                 passes[picks].tolist(), strict=True)
    return [Ranked(pool.papers[i], n + 1, score, relevance, ok, scores.section(i), explain.reasons(i),
                   explain.parts(i) | {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4),
                                       "boost": round(float(boost[i]), 4)} if parts else {})
            for n, (i, score, relevance, ok) in enumerate(values)]


def _trending(pool: Pool, subscriber: Subscriber, day: date, settings: SelectSettings, blocked: np.ndarray,
              limit: int | None) -> list[Ranked]:
    """A profile without interests: the most upvoted papers, the boosts breaking ties."""
    trend, recency, boost = _boost(pool, day, settings)
    memo = pool.index(settings.title_weight).memo
    key = ("trending", day, settings)
    if key not in memo:  # the same order for every trending-only subscriber
        memo[key] = sorted(range(len(pool)), key=lambda i: (-(pool.papers[i].upvotes or 0), -boost[i], i))
    ranked = [i for i in memo[key] if not blocked[i]]
    out = []
    for n, i in enumerate(ranked[: limit or subscriber.max_papers]):
        paper = pool.papers[i]
        reason = f"trending: {paper.upvotes} upvotes" if paper.upvotes else "new today"
        out.append(Ranked(paper, n + 1, float(paper.upvotes or 0), 0.0, True, TRENDING_SECTION, (reason,),
                          {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4)}))
    return out
