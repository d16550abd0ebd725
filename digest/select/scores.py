"""Scores: how relevant each paper is to one subscriber, on the calibrated scale (the formula is in `rank.py`).

`Scored` holds one subscriber's scores on some papers of the pool, interest by interest: every paper
(`Scores`, what a preview and `digest rank` compute), or the few dozen candidates the batch ranking
kept for them (`batch.candidates`, what a send run computes). Picking, sections and reasons read
`Scored` only, so both give the same digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..models import Interest, Paper, Subscriber
from .learn import MODEL_A, NEGATIVES, FeedbackModel, fit, sample
from .pool import Index, Pool
from .profile import CompiledInterest, Signals, compile_interest, reference, seed_papers

LIKED_SECTION = "More like papers you liked"
SEMANTIC_BASE = 0.2  # cosine similarity of unrelated abstracts with this model hovers around here
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
    # The honest-dates split (`digest.dating`): a paper published more than max_age_days before the digest is
    # "old", and a digest takes at most trending_again old papers besides its max_papers recent ones (0: no split).
    max_age_days: float = 0.0
    trending_again: float = 0.0


def calibration(dense: bool) -> tuple[float, float]:
    """The fitted constants (A, B): for keywords alone, or with dense similarity added."""
    return (DENSE_CALIBRATION_A, DENSE_CALIBRATION_B) if dense else (CALIBRATION_A, CALIBRATION_B)


def calibrate(raw: np.ndarray, unit: float | np.ndarray, weight: float | np.ndarray = 1.0,
              dense: bool = False) -> np.ndarray:
    """Log-odds of being on topic from raw scores in BM25 units (see `rank.py`); `unit` and `weight` may be
    columns (one per row of `raw`)."""
    a, b = calibration(dense)
    with np.errstate(divide="ignore"):
        logit = a + b * np.log(np.maximum(raw, 0.0) / unit) + np.log(weight)
    return np.maximum(logit, NO_MATCH)


def blend(lexical: np.ndarray, model: np.ndarray, share: float | np.ndarray,
          out: np.ndarray | None = None) -> np.ndarray:
    """The log-odds of relevance with the learned model's in: lexical + s × (model − min(lexical, MODEL_A)).

    Where the keywords found a paper (log-odds above MODEL_A, the model's value for a typical paper of
    the pool) the model adds its evidence to theirs, so clicks sharpen an interest and never dilute
    what the keywords are sure of; where they found little or nothing, the model's log-odds take the
    share s of the blend, so papers like the liked ones come in that no keyword names. With `out` (which
    may be `model`), the same operations write there.
    """
    if out is None:
        return lexical + share * (model - np.minimum(lexical, MODEL_A))  # type: ignore[no-any-return]
    np.subtract(model, np.minimum(lexical, MODEL_A), out=out)
    np.multiply(share, out, out=out)
    np.add(lexical, out, out=out)
    return out


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))  # type: ignore[no-any-return]


def boosted(relevance: np.ndarray, boost: np.ndarray) -> np.ndarray:
    """The relevance with its odds multiplied by the trending and recency boost: still from 0 to 1, and
    a sure match stays ahead of a doubtful one that is trending."""
    odds = relevance * boost
    return odds / (1.0 - relevance + odds)  # type: ignore[no-any-return]


@dataclass(eq=False)
class Scored:
    """One subscriber's scores on some papers of the pool (columns), interest by interest (rows).

    `logits` are each interest's calibrated log-odds (its weight and dense similarity in); the paper's
    relevance is the best interest's, blended with the learned model's when there is one.
    """

    papers: np.ndarray  # pool indices of the columns, ascending
    interests: Sequence[CompiledInterest]
    units: Sequence[float]  # each interest's unit (`profile.reference`)
    lexical: np.ndarray  # raw BM25F scores, interests × papers
    logits: np.ndarray  # interests × papers
    settings: SelectSettings
    dense: np.ndarray | None = None  # standardised dense similarity, interests × papers
    semantic: np.ndarray | None = None  # sentence-embedding cosine (the semantic extra), interests × papers
    model_logit: np.ndarray | None = None  # the learned model's log-odds
    share: float = 0.0  # the learned model's share of the relevance
    liked: tuple[Paper, ...] = ()
    # (best, lexical_logit, relevance, lexical_relevance) when the caller has them: a batch works them out
    # for all its subscribers at once, with the same arithmetic as below
    derived: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    best: np.ndarray = field(init=False)  # the interest each paper matches best
    lexical_logit: np.ndarray = field(init=False)
    relevance: np.ndarray = field(init=False)
    lexical_relevance: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.derived is not None:
            self.best, self.lexical_logit, self.relevance, self.lexical_relevance = self.derived
            return
        self.best = self.logits.argmax(axis=0) if len(self.logits) > 1 else np.zeros(len(self.papers), np.int64)
        self.lexical_logit = self.logits.max(axis=0)
        logit = self.lexical_logit
        if self.model_logit is not None:
            logit = blend(logit, self.model_logit, self.share)
        self.relevance = sigmoid(logit)
        self.lexical_relevance = sigmoid(self.lexical_logit)

    def relevance_lift(self, j: int) -> float:
        """How much the learned model raised the j-th paper's log-odds over the keywords' (0 without one)."""
        if self.model_logit is None:
            return 0.0
        lexical = self.lexical_logit[j:j + 1]
        return float(blend(lexical, self.model_logit[j:j + 1], self.share)[0] - lexical[0])

    def raw(self, n: int) -> np.ndarray:
        """The n-th interest's raw score (BM25 units) of every paper, semantic similarity included."""
        if self.semantic is None:
            return self.lexical[n]
        return self.lexical[n] + self.settings.semantic_weight * np.maximum(self.semantic[n] - SEMANTIC_BASE, 0.0)

    def section(self, j: int) -> str:
        """The section of the j-th paper: its best interest, or the liked papers' when only the model found it."""
        if self.lexical_logit[j] <= NO_MATCH and self.relevance[j] > self.lexical_relevance[j]:
            return LIKED_SECTION
        return self.interests[int(self.best[j])].interest.name

    def section_names(self, picks: Sequence[int]) -> list[str]:
        """`section` of each of the picks (at once: a digest's picks)."""
        at = np.asarray(picks, dtype=np.int64)
        liked = (self.lexical_logit[at] <= NO_MATCH) & (self.relevance[at] > self.lexical_relevance[at])
        return [LIKED_SECTION if like else self.interests[n].interest.name
                for like, n in zip(liked.tolist(), self.best[at].tolist(), strict=True)]


class Scores(Scored):
    """Every pool paper's calibrated relevance for one subscriber, and the interest it matches best."""

    def __init__(self, pool: Pool, subscriber: Subscriber, settings: SelectSettings, signals: Signals) -> None:
        self.pool, self.index = pool, pool.index(settings.title_weight)
        compiled = [self._compiled(pool, settings, i, signals) for i in subscriber.interests]
        interests = [c for c, _, _ in compiled]
        lexical = np.vstack([v for _, v, _ in compiled])
        units = [u for _, _, u in compiled]
        semantic = None
        if settings.semantic_weight and pool.embedder is not None:
            semantic = np.vstack([pool.semantic(ci.interest, ci.seed_papers) for ci in interests])
        dense = None
        if settings.dense_weight and pool.dense is not None:
            dense = np.vstack([pool.dense_interest(ci.interest, ci.seed_papers) for ci in interests])
        self.model = feedback_model(pool, subscriber, signals, settings)
        share, model_logit = 0.0, None
        if self.model is not None:
            share = self.model.clicks / (self.model.clicks + settings.feedback_clicks)
            dense_papers = pool.dense_papers() if settings.dense_weight else None
            model_logit = self.model.relevance_logits(self.index, dense_papers)
        weights = np.array([ci.interest.weight for ci in interests])[:, None]
        raw = lexical
        if semantic is not None:
            raw = lexical + settings.semantic_weight * np.maximum(semantic - SEMANTIC_BASE, 0.0)
        logits = calibrate(raw, np.array(units)[:, None], weights, dense is not None)
        if dense is not None:
            logits = logits + settings.dense_weight * dense
        super().__init__(np.arange(len(pool)), interests, units, lexical, logits, settings, dense, semantic,
                         model_logit, share, signals.liked)

    def interest_logit(self, n: int) -> np.ndarray:
        """Calibrated log-odds that each paper is on the n-th interest's topic (its weight and dense similarity in)."""
        return self.logits[n]

    @staticmethod
    def _compiled(pool: Pool, settings: SelectSettings, interest: Interest,
                  signals: Signals) -> tuple[CompiledInterest, np.ndarray, float]:
        """The interest's query parts, its raw lexical scores and its unit, shared by interests with the same words."""
        index = pool.index(settings.title_weight)
        seeds = tuple(signals.seeds.get(ref) for ref in interest.seed_papers)
        key = ("interest", frozenset(interest.keywords), interest.description, seeds,
               settings.description_weight, settings.seed_weight)  # keyword order does not matter
        found = index.memo.get(key)
        if found is None:
            compiled = compile_interest(interest, index, signals.seeds, description_weight=settings.description_weight,
                                        seed_weight=settings.seed_weight)
            found = (replace(compiled, key=key), lexical_scores(index, compiled), reference(compiled.parts,
                                                                                            index.corpus.idf()))
            index.remember(key, found, vectors=1)
        compiled, raw, unit = found
        return CompiledInterest(interest, compiled.parts, compiled.description_words, compiled.seed_papers,
                                compiled.key), raw, unit


def lexical_scores(index: Index, compiled: CompiledInterest) -> np.ndarray:
    """An interest's raw score of every paper: its parts' scores times their coefficients, summed in order."""
    rows = index.unit_rows([part.unit for part in compiled.parts])
    raw = np.zeros(index.unit_scores.shape[1])
    for row, part in zip(rows.tolist(), compiled.parts, strict=True):
        raw += part.coef * index.unit_scores[row]
    return raw


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
