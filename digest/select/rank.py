"""Scoring one subscriber against a pool: calibrated relevance, boosts, floor, diversity, sections, reasons.

For paper d and interest i, the raw score is in BM25 units:

    raw_i(d) = Σ_keywords BM25F(keyword, d) + description_weight × BM25F(description, d)
               + seed_weight × BM25F(centroid of seed papers, d)
               + semantic_weight × max(0, cos(embedding(d), embedding(interest)) - SEMANTIC_BASE)

and is read in the interest's own unit, ref_i (what one mention of a typical one of its keywords in
an abstract scores, from the same term statistics: `profile.reference`). The calibration turns it
into a probability that the paper is on topic, fitted on labelled arXiv papers (`bench/calibrate.py`;
A and B are CALIBRATION_A/B, or DENSE_CALIBRATION_A/B when dense similarity is on, z_i(d) being the
paper's dense cosine similarity to the interest standardised over the pool, `dense.py`):

    logit_i(d)   = A + B × log(raw_i(d) / ref_i) + log(weight_i) [+ dense_weight × z_i(d)]
    lexical(d)   = sigmoid(max_i logit_i(d))                  (no match at all: logit NO_MATCH)
    relevance(d) = sigmoid((1 - s) × logit_lexical(d) + s × model(d)),   s = clicks / (clicks + feedback_clicks)
    score(d)     = relevance(d) with its odds × (1 + upvote_weight × trend(d)) × (1 + recency_weight × recency(d))

model(d) is the log-odds of the subscriber's learned model (`learn.py`), when they have clicked.
An interest's weight multiplies its odds. trend(d) = log(1 + upvotes + comment_weight × comments),
scaled to 1 for the pool's top paper; recency(d) = 0.5 ** (age in days / recency_half_life_days).
A paper is eligible when it is not excluded, not already received, not marked *less*, and its
relevance reaches `min_relevance`. Eligible papers are taken best score first, re-ranked for
diversity (maximal marginal relevance in one vectorised pass): (1 - diversity) × score / best
score - diversity × (its highest similarity to a better-scored candidate); a near-duplicate
(cosine >= NEAR_DUPLICATE) of a better candidate is left out, so one story in five versions does
not fill a digest. Each pick goes to the section of the interest it matches best; sections are
ordered by their best pick.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date

import numpy as np

from ..models import Interest, Paper, Subscriber
from .explain import Explainer
from .learn import NEGATIVES, FeedbackModel, fit, sample
from .pool import Index, Pool
from .profile import CompiledInterest, Signals, compile_interest, reference, seed_papers

TRENDING_SECTION = "Trending"
LIKED_SECTION = "More like papers you liked"
SEMANTIC_BASE = 0.2  # cosine similarity of unrelated abstracts with this model hovers around here
MMR_WINDOW = 2  # diversity re-ranks the best (window × wanted) candidates
NEAR_DUPLICATE = 0.75  # cosine similarity above which a paper repeats one already picked (goes last)
# Fitted by bench/calibrate.py on the tuning pools: the log-odds at one typical mention, and how fast they grow
# with the log of the score in the interest's unit; keywords alone, and with dense similarity (whose fitted
# weight, 0.51, is the default select.dense_weight).
CALIBRATION_A, CALIBRATION_B = 0.212, 1.369
DENSE_CALIBRATION_A, DENSE_CALIBRATION_B = -0.330, 1.095
NO_MATCH = -8.0  # log-odds of a paper that matches nothing of an interest


@dataclass(frozen=True)
class SelectSettings:
    """The knobs of the scoring formula (the `[select]` settings)."""

    min_relevance: float = 0.5
    title_weight: float = 3.0
    upvote_weight: float = 0.5
    comment_weight: float = 2.0
    recency_weight: float = 0.3
    recency_half_life_days: float = 30.0
    description_weight: float = 0.3
    seed_weight: float = 3.0
    feedback_clicks: float = 10.0
    diversity: float = 0.3
    semantic_weight: float = 0.0
    dense_weight: float = 0.5


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


def calibration(dense: bool) -> tuple[float, float]:
    """The fitted constants (A, B): for keywords alone, or with dense similarity added."""
    return (DENSE_CALIBRATION_A, DENSE_CALIBRATION_B) if dense else (CALIBRATION_A, CALIBRATION_B)


def calibrate(raw: np.ndarray, unit: float, weight: float = 1.0, dense: bool = False) -> np.ndarray:
    """Log-odds of being on topic from raw scores in BM25 units (see the module doc)."""
    a, b = calibration(dense)
    with np.errstate(divide="ignore"):
        logit = a + b * np.log(np.maximum(raw, 0.0) / unit) + np.log(weight)
    return np.maximum(logit, NO_MATCH)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def boosted(relevance: np.ndarray, boost: np.ndarray) -> np.ndarray:
    """The relevance with its odds multiplied by the trending and recency boost: still from 0 to 1, and
    a sure match stays ahead of a doubtful one that is trending."""
    odds = relevance * boost
    return odds / (1.0 - relevance + odds)


class Scores:
    """Every pool paper's calibrated relevance for one subscriber, and the interest it matches best."""

    def __init__(self, pool: Pool, subscriber: Subscriber, settings: SelectSettings, signals: Signals) -> None:
        self.pool, self.settings = pool, settings
        self.index = pool.index(settings.title_weight)
        compiled = [self._compiled(i, signals) for i in subscriber.interests]
        self.interests = [c for c, _, _ in compiled]
        self.lexical = [v for _, v, _ in compiled]
        self.units = [u for _, _, u in compiled]
        self.liked = signals.liked
        self.semantic = self._semantic()
        self.dense = None
        if settings.dense_weight and pool.dense is not None:
            self.dense = [pool.dense_interest(ci.interest, ci.seed_papers) for ci in self.interests]
        per_interest = np.vstack([self.interest_logit(n) for n in range(len(self.interests))])
        self.best = per_interest.argmax(axis=0) if len(self.interests) > 1 else np.zeros(len(pool), np.int64)
        self.lexical_logit = per_interest.max(axis=0)
        self.model = self._model(subscriber, signals)
        self.share = 0.0
        logit = self.lexical_logit
        if self.model is not None:
            self.share = self.model.clicks / (self.model.clicks + settings.feedback_clicks)
            self.model_logit = self._model_logits(self.model)
            logit = (1 - self.share) * logit + self.share * self.model_logit
        self.relevance = sigmoid(logit)
        self.lexical_relevance = sigmoid(self.lexical_logit)

    def _compiled(self, interest: Interest, signals: Signals) -> tuple[CompiledInterest, np.ndarray, float]:
        """The interest's query parts, its raw lexical scores and its unit, shared by interests with the same words."""
        seeds = tuple(signals.seeds.get(ref) for ref in interest.seed_papers)
        key = ("interest", frozenset(interest.keywords), interest.description, seeds,
               self.settings.description_weight, self.settings.seed_weight)  # keyword order does not matter
        found = self.index.memo.get(key)
        if found is None:
            compiled = compile_interest(interest, self.index, signals.seeds,
                                        description_weight=self.settings.description_weight,
                                        seed_weight=self.settings.seed_weight)
            raw = np.zeros(len(self.pool))
            for part in compiled.parts:
                raw += part.coef * self.index.scores(part.unit)
            found = (replace(compiled, key=key), raw, reference(compiled.parts, self.index.corpus.idf()))
            self.index.remember(key, found, vectors=1)
        compiled, raw, unit = found
        return CompiledInterest(interest, compiled.parts, compiled.description_words, compiled.seed_papers,
                                compiled.key), raw, unit

    def _semantic(self) -> list[np.ndarray] | None:
        if not self.settings.semantic_weight or self.pool.embedder is None:
            return None
        return [self.pool.semantic(ci.interest, ci.seed_papers) for ci in self.interests]

    def raw(self, n: int) -> np.ndarray:
        """The n-th interest's raw score (BM25 units) of every paper, semantic similarity included."""
        total = self.lexical[n]
        if self.semantic is not None:
            total = total + self.settings.semantic_weight * np.maximum(self.semantic[n] - SEMANTIC_BASE, 0.0)
        return total

    def interest_logit(self, n: int) -> np.ndarray:
        """Calibrated log-odds that each paper is on the n-th interest's topic (its weight and dense similarity in)."""
        logit = calibrate(self.raw(n), self.units[n], self.interests[n].interest.weight, self.dense is not None)
        if self.dense is not None:
            logit = logit + self.settings.dense_weight * self.dense[n]
        return logit

    def _model(self, subscriber: Subscriber, signals: Signals) -> FeedbackModel | None:
        return feedback_model(self.pool, subscriber, signals, self.settings)

    def _model_logits(self, model: FeedbackModel) -> np.ndarray:
        return model.relevance_logits(self.index, self.pool.dense_papers() if self.settings.dense_weight else None)

    def section(self, i: int) -> str:
        if self.lexical_logit[i] <= NO_MATCH and self.relevance[i] > self.lexical_relevance[i]:
            return LIKED_SECTION
        return self.interests[int(self.best[i])].interest.name


def feedback_model(pool: Pool, subscriber: Subscriber, signals: Signals,
                   settings: SelectSettings) -> FeedbackModel | None:
    """The learned model the signals carry; without one, learned here with a sample of the pool as negatives."""
    if signals.model is not None or not (signals.liked or signals.disliked):
        return signals.model
    index = pool.index(settings.title_weight)
    seeds = [p for i in subscriber.interests for p in seed_papers(i, signals.seeds)]
    positives = [*signals.liked, *seeds]
    key = ("model", subscriber.email, tuple(p.key for p in positives), tuple(p.key for p in signals.disliked))
    if key not in index.memo:
        negatives = sample(pool.papers, NEGATIVES, subscriber.email)
        dense = pool.dense if settings.dense_weight else None
        index.memo[key] = fit(positives, negatives, signals.disliked, index.corpus, title_weight=settings.title_weight,
                              clicks=len(signals.liked) + len(signals.disliked), dense=dense)
    return index.memo[key]  # type: ignore[no-any-return]


def boost(pool: Pool, day: date, settings: SelectSettings) -> np.ndarray:
    """Every paper's trending × recency factor."""
    return _boost(pool, day, settings)[2]


def _boost(pool: Pool, day: date, settings: SelectSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    memo = pool.index(settings.title_weight).memo
    key = ("boost", day, settings)
    if key not in memo:
        trend, recency = pool.boosts(day, settings.comment_weight, settings.recency_half_life_days)
        memo[key] = trend, recency, (1 + settings.upvote_weight * trend) * (1 + settings.recency_weight * recency)
    return memo[key]  # type: ignore[no-any-return]


def blocked_papers(pool: Pool, subscriber: Subscriber, signals: Signals) -> np.ndarray:
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

    Each of the best (MMR_WINDOW × wanted) candidates gets (1 - diversity) × value - diversity × (its
    highest similarity to a better-scored candidate), its value being its log-odds scaled to 0..1
    over those candidates; greedy MMR compares with the
    picks instead, which needs a loop per pick. A near-duplicate of a better candidate goes after
    all the others, and with `drop_duplicates` (a digest) it is left out.
    """
    if diversity <= 0 or len(order) <= 1:
        return order[:wanted].tolist()
    window = order[: max(MMR_WINDOW * wanted, wanted + 5)]  # typically a few dozen papers
    # Values are the candidates' log-odds scaled to 0..1 over the window: the best candidate 1, the
    # window's last 0 (near-certain probabilities all sit near 1, their log-odds do not).
    clipped = np.clip(score[window], 1e-12, 1 - 1e-12)
    logit = np.log(clipped) - np.log1p(-clipped)
    span = float(logit[0] - logit.min())
    value = (logit - logit.min()) / span if span > 0 else np.ones(len(window))
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
         signals: Signals | None = None, limit: int | None = None, parts: bool = True,
         within: np.ndarray | None = None) -> list[Ranked]:
    """The subscriber's candidates, best first: the digest's picks, or with `limit` the top N regardless of floor.

    `parts=False` leaves out the score breakdown (a digest does not show it); `within` (pool indices)
    restricts the picks to candidates found by `rank_many`.
    """
    signals = signals or Signals()
    blocked = blocked_papers(pool, subscriber, signals)
    if not subscriber.interests:
        return _trending(pool, subscriber, day, settings, blocked, limit)
    scores = Scores(pool, subscriber, settings, signals)
    trend, recency, boost = _boost(pool, day, settings)
    final = boosted(scores.relevance, boost)
    passes = scores.relevance >= settings.min_relevance
    eligible = ~blocked & (passes if limit is None else True)
    if within is not None:
        eligible &= np.isin(np.arange(len(pool)), within)
    candidates = np.flatnonzero(eligible)
    order = candidates[np.argsort(-final[candidates], kind="stable")]
    wanted = subscriber.max_papers if limit is None else limit
    positive = order[final[order] > 0]
    picks = diversify(scores.index, positive, final, wanted, settings.diversity, drop_duplicates=limit is None)
    picks += order[final[order] <= 0][: wanted - len(picks)].tolist()
    explain = Explainer(scores, picks)
    values = zip(picks, final[picks].round(6).tolist(), scores.relevance[picks].round(6).tolist(),
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
