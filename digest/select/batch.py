"""Ranking one pool for many subscribers at once, as sparse matrix products.

    raw      = (W · K) · A                                   papers × interests, BM25 units
    logit    = max over each subscriber's interests of calibrate(raw, unit, weight)
    logit'   = (1 - s) × logit + s × (W_unit · M + b)         for subscribers with a learned model
    score    = sigmoid(logit' + log boost), blocked and below-floor papers at -inf

W is the pool's BM25F matrix (papers × terms), K holds every distinct keyword, description and seed
centroid of every subscriber as a column (terms × units), A maps units to interests with their
coefficients (units × interests), W_unit is W with unit-length rows and M holds the learned models'
weights (terms × subscribers). W · K is computed once; the rest a chunk of subscribers at a time so
memory stays bounded, and the best `k` papers per subscriber are found with `argpartition` over the
whole chunk. No Python loop runs per (subscriber, paper) pair.

This is the candidate generation of a send run (`select_many`): diversity and reasons are applied
per digest by `rank`, on the candidates this returns, which give the same picks as ranking the
whole pool for each subscriber.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import scipy.sparse as sp

from ..models import Interest, Paper, Subscriber
from .learn import DENSE_DIM, FeedbackModel, standardised
from .pool import Index, Pool, Unit
from .profile import Signals, compile_interest, description_unit, keyword_unit, seed_papers, unit_reference
from .rank import NO_MATCH, SelectSettings, blocked_papers, boost, calibration, feedback_model
from .text import N_FEATURES

TIE_MARGIN = 1e-3  # candidates within this many log-odds of the k-th are kept too (float32 against float64)


@dataclass(frozen=True)
class TopK:
    """Per subscriber (rows), the best papers' pool indices, their scores, and whether they pass the floor.

    `candidates` (with `ties=True`): per subscriber, every eligible paper scoring at least the k-th
    best less TIE_MARGIN, so that ties and rounding cannot leave one out.
    """

    papers: np.ndarray
    scores: np.ndarray
    passes: np.ndarray
    candidates: list[np.ndarray] | None = None


class _Plan:
    """Distinct query units, the sparse map from units to interests, each interest's unit and weight."""

    def __init__(self, subscribers: Sequence[Subscriber], settings: SelectSettings, index: Index | None = None,
                 signals: Mapping[str, Signals] | None = None) -> None:
        self.units: list[Unit] = []
        self._ids: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        weights: list[float] = []
        self.interests: list[tuple[Interest, tuple[Paper, ...]]] = []  # for the dense queries
        self.first_interest = np.zeros(len(subscribers) + 1, dtype=np.int64)
        unit_refs: list[float] = []  # each distinct unit's reference (`profile.unit_reference`)
        idf = index.corpus.idf() if index is not None else None
        n = 0
        for s, subscriber in enumerate(subscribers):
            self.first_interest[s] = n
            seeds = signals[subscriber.email].seeds if signals and subscriber.email in signals else {}
            for interest in subscriber.interests:
                for unit, coef, kind in self._parts(interest, settings, index, seeds):
                    known = len(self.units)
                    rows.append(self._id(unit))
                    if len(self.units) > known:
                        unit_refs.append(1.0 if idf is None else unit_reference(unit, kind, idf))
                    cols.append(n)
                    vals.append(coef)
                self.interests.append((interest, seed_papers(interest, seeds) if interest.seed_papers else ()))
                weights.append(interest.weight)
                n += 1
        self.first_interest[len(subscribers)] = n
        self.map = sp.csr_matrix((vals, (rows, cols)), shape=(len(self.units), n), dtype=np.float64)
        # an interest's unit: the mean of coef × reference over its parts that have one (`profile.mean_reference`)
        refs = np.array(unit_refs, dtype=np.float64)
        total = np.asarray(self.map.T @ refs).ravel()
        count = np.asarray((self.map != 0).astype(np.float64).T @ (refs > 0)).ravel()
        self.refs = np.where(count > 0, total / np.maximum(count, 1), 1.0)
        self.log_weights = np.log(np.array(weights, dtype=np.float64))

    @staticmethod
    def _parts(interest, settings, index, seeds) -> list[tuple[Unit, float, str]]:  # type: ignore[no-untyped-def]
        if index is None or not interest.seed_papers:  # no store papers to find seeds in: words only
            parts = [(keyword_unit(k), 1.0, "keyword") for k in interest.keywords]
            if interest.description:
                parts.append((description_unit(interest.description)[0], settings.description_weight, "description"))
            return parts
        compiled = compile_interest(interest, index, seeds, description_weight=settings.description_weight,
                                    seed_weight=settings.seed_weight)
        return [(p.unit, p.coef, p.kind) for p in compiled.parts]

    def _id(self, unit: Unit) -> int:
        if unit.key not in self._ids:
            self._ids[unit.key] = len(self.units)
            self.units.append(unit)
        return self._ids[unit.key]


@dataclass
class _Run:
    """What every chunk of one ranking shares."""

    plan: _Plan
    index: Index
    unit_scores: np.ndarray
    boost: np.ndarray
    settings: SelectSettings
    models: list[FeedbackModel | None]
    blocked: list[np.ndarray]
    ties: bool
    pool: Pool | None = None  # with dense similarity on: the pool whose embeddings join the logit


def rank_many(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
              k: int = 10, chunk: int = 5000, signals: Mapping[str, Signals] | None = None,
              ties: bool = False) -> TopK:
    """The best `k` eligible papers of the pool for every subscriber with interests, by matrix products.

    With `signals`, seed papers and learned models count, and received, disliked and excluded papers
    are left out, as `rank` does; `ties=True` also returns every candidate within TIE_MARGIN of the k-th.
    """
    index = pool.index(settings.title_weight)
    plan = _Plan(subscribers, settings, index, signals)
    unit_scores = np.asarray((index.matrix @ index.query_matrix(plan.units)).toarray(), dtype=np.float64)
    models: list[FeedbackModel | None] = [None] * len(subscribers)
    blocked: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(subscribers)
    if signals is not None:
        for n, sub in enumerate(subscribers):
            if sub.interests and sub.email in signals:
                models[n] = feedback_model(pool, sub, signals[sub.email], settings)
                blocked[n] = np.flatnonzero(blocked_papers(pool, sub, signals[sub.email]))
    dense = pool if settings.dense_weight and pool.dense is not None else None
    run = _Run(plan, index, unit_scores, boost(pool, day, settings), settings, models, blocked, ties, dense)
    k = min(k, len(pool))
    out = TopK(np.zeros((len(subscribers), k), dtype=np.int64), np.zeros((len(subscribers), k), np.float32),
               np.zeros((len(subscribers), k), dtype=bool),
               [np.zeros(0, dtype=np.int64)] * len(subscribers) if ties else None)
    for start in range(0, len(subscribers), chunk):
        _chunk(run, start, min(start + chunk, len(subscribers)), out)
    return out


def _model_logits(index: Index, models: Sequence[FeedbackModel], dense: np.ndarray | None) -> np.ndarray:
    """The models' log-odds of relevance for every paper (papers × models), as two matrix products."""
    weights = np.zeros((DENSE_DIM, len(models)))
    owners, terms, values = [], [], []
    for j, model in enumerate(models):
        words = model.cols < N_FEATURES
        owners.append(np.full(int(words.sum()), j))
        terms.append(model.cols[words])
        values.append(model.coef[words])
        weights[model.cols[~words] - N_FEATURES, j] = model.coef[~words]
    owner = np.concatenate(owners) if owners else np.zeros(0, dtype=np.int64)
    cols_all = np.concatenate(terms).astype(np.int64) if terms else np.zeros(0, dtype=np.int64)
    coef_all = np.concatenate(values).astype(np.float64) if values else np.zeros(0)
    pos = index.lookup()[cols_all]  # every model's terms as local columns at once (-1: not in the pool)
    found = pos >= 0
    matrix = sp.csc_matrix((coef_all[found], (pos[found], owner[found])), shape=(len(index.cols), len(models)))
    intercepts = np.array([m.intercept for m in models])
    out = np.asarray((index.rows @ matrix).toarray()) + intercepts[None, :]
    if dense is not None:
        out += dense @ weights
    return standardised(out)


def _best_logits(run: _Run, lo: int, hi: int, first: np.ndarray) -> np.ndarray:
    """Each subscriber's best calibrated log-odds over their interests (subscribers × papers, float32)."""
    plan = run.plan
    a, b = calibration(run.pool is not None)
    if run.pool is None:
        # log is monotone: scale each interest's raw scores by weight^(1/b) / unit, take the best interest,
        # and calibrate once per (subscriber, paper) instead of once per (interest, paper)
        factor = np.exp(plan.log_weights[lo:hi] / b) / plan.refs[lo:hi]
        raw = np.asarray((plan.map[:, lo:hi] @ sp.diags(factor)).T @ run.unit_scores.T, dtype=np.float32)
        best = np.maximum.reduceat(raw, first, axis=0)
        with np.errstate(divide="ignore"):
            return np.maximum(a + b * np.log(np.maximum(best, 0.0)), NO_MATCH).astype(np.float32)
    raw = np.asarray(plan.map[:, lo:hi].T @ run.unit_scores.T)  # (interests × papers), dense
    with np.errstate(divide="ignore"):
        logit = a + b * np.log(np.maximum(raw, 0.0) / plan.refs[lo:hi, None])
    logit = np.maximum(logit + plan.log_weights[lo:hi, None], NO_MATCH)
    queries = np.vstack([run.pool.dense_query(i, seeds) for i, seeds in plan.interests[lo:hi]])
    logit += run.settings.dense_weight * run.pool.dense_z(queries).T
    return np.maximum.reduceat(logit, first, axis=0).astype(np.float32)


def _chunk(run: _Run, start: int, end: int, out: TopK) -> None:
    """Score subscribers start..end: interests as rows, the best interest per subscriber, top k.

    Papers are ordered by log-odds + log(boost), the same order as the boosted probability `rank`
    uses; probabilities are computed for the picks only.
    """
    plan = run.plan
    lo, hi = plan.first_interest[start], plan.first_interest[end]
    if hi == lo:
        return
    first = plan.first_interest[start:end] - lo
    has = np.diff(plan.first_interest[start:end + 1]) > 0  # subscribers without interests get none here
    rows = np.arange(start, end)[has]
    best = _best_logits(run, lo, hi, first[has])
    with_model = [n for n, r in enumerate(rows) if run.models[r] is not None]
    if with_model:
        models = [run.models[rows[n]] for n in with_model]
        share = np.array([m.clicks / (m.clicks + run.settings.feedback_clicks) for m in models])  # type: ignore[union-attr]
        dense = run.pool.dense_papers() if run.pool is not None else None
        learned = _model_logits(run.index, models, dense).T  # type: ignore[arg-type]
        best[with_model] = (1 - share[:, None]) * best[with_model] + share[:, None] * learned
    floor = float(np.log(run.settings.min_relevance) - np.log1p(-run.settings.min_relevance)) \
        if 0 < run.settings.min_relevance < 1 else (-np.inf if run.settings.min_relevance <= 0 else np.inf)
    key = best + np.log(run.boost).astype(np.float32)[None, :]
    if run.ties:  # candidates for a digest: only papers that pass the floor
        key[best < floor] = -np.inf
    for n, r in enumerate(rows):
        if len(run.blocked[r]):
            key[n, run.blocked[r]] = -np.inf
    k = out.papers.shape[1]
    top = np.argpartition(-key, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(key, top, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
    picked = np.take_along_axis(top, order, axis=1)
    out.papers[rows] = picked
    out.scores[rows] = 1.0 / (1.0 + np.exp(-np.take_along_axis(key, picked, axis=1)))
    out.passes[rows] = np.take_along_axis(best, picked, axis=1) >= floor
    if out.candidates is not None:
        kth = key[np.arange(len(rows)), picked[:, -1]]
        cutoff = np.where(np.isfinite(kth), kth - TIE_MARGIN, -np.inf)
        for n, r in enumerate(rows):
            out.candidates[r] = np.flatnonzero((key[n] >= cutoff[n]) & np.isfinite(key[n]))


def prepare(pool: Pool, subscribers: Sequence[Subscriber], settings: SelectSettings) -> None:
    """Score every keyword and description of a send run's subscribers in one sparse product, up front."""
    plan = _Plan(subscribers, settings)
    pool.index(settings.title_weight).prepare(plan.units)
