"""Ranking one pool for many subscribers at once, as sparse matrix products.

    scores = max over each subscriber's interests of ((W · K) · A) × boost

W is the pool's BM25F matrix (papers × terms), K holds every distinct keyword and description of
every subscriber as a column (terms × units), A maps units to interests with their weights
(units × interests). W · K is computed once; (W · K) · A is computed for a chunk of subscribers at
a time so memory stays bounded, and the best `k` papers per subscriber are found with
`argpartition` over the whole chunk. No Python loop runs per (subscriber, paper) pair.

This is the candidate generation of a send run. Seeds, feedback, semantic matching, exclusions,
history and diversity are applied per digest by `rank`, on the few candidates this returns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import numpy as np
import scipy.sparse as sp

from ..models import Subscriber
from .pool import Pool, Unit
from .profile import description_unit, keyword_unit
from .rank import SelectSettings


@dataclass(frozen=True)
class TopK:
    """Per subscriber (rows), the best papers' pool indices, their scores, and whether they pass the floor."""

    papers: np.ndarray
    scores: np.ndarray
    passes: np.ndarray


class _Plan:
    """Distinct query units and the sparse map from units to interests, with each interest's subscriber."""

    def __init__(self, subscribers: Sequence[Subscriber], description_weight: float) -> None:
        self.units: list[Unit] = []
        self._ids: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        self.first_interest = np.zeros(len(subscribers) + 1, dtype=np.int64)
        n = 0
        for s, subscriber in enumerate(subscribers):
            self.first_interest[s] = n
            for interest in subscriber.interests:
                parts = [(keyword_unit(k), 1.0) for k in interest.keywords]
                if interest.description:
                    parts.append((description_unit(interest.description)[0], description_weight))
                for unit, coef in parts:
                    rows.append(self._id(unit))
                    cols.append(n)
                    vals.append(coef * interest.weight)
                n += 1
        self.first_interest[len(subscribers)] = n
        self.map = sp.csr_matrix((vals, (rows, cols)), shape=(len(self.units), n), dtype=np.float32)

    def _id(self, unit: Unit) -> int:
        if unit.key not in self._ids:
            self._ids[unit.key] = len(self.units)
            self.units.append(unit)
        return self._ids[unit.key]


def rank_many(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
              k: int = 10, chunk: int = 5000) -> TopK:
    """The best `k` papers of the pool for every subscriber (those with interests), by matrix products."""
    index = pool.index(settings.title_weight)
    plan = _Plan(subscribers, settings.description_weight)
    unit_scores = np.asarray((index.matrix @ index.query_matrix(plan.units)).toarray(), dtype=np.float32)
    trend, recency = pool.boosts(day, settings.comment_weight, settings.recency_half_life_days)
    boost = ((1 + settings.upvote_weight * trend) * (1 + settings.recency_weight * recency)).astype(np.float32)
    k = min(k, len(pool))
    out = TopK(np.zeros((len(subscribers), k), dtype=np.int64), np.zeros((len(subscribers), k), np.float32),
               np.zeros((len(subscribers), k), dtype=bool))
    for start in range(0, len(subscribers), chunk):
        _chunk(plan, unit_scores, boost, start, min(start + chunk, len(subscribers)), settings, out)
    return out


def _chunk(plan: _Plan, unit_scores: np.ndarray, boost: np.ndarray, start: int, end: int,
           settings: SelectSettings, out: TopK) -> None:
    """Score subscribers start..end: interests as rows, the best interest per subscriber, top k."""
    lo, hi = plan.first_interest[start], plan.first_interest[end]
    if hi == lo:
        return
    interests = np.asarray(plan.map[:, lo:hi].T @ unit_scores.T)  # (interests × papers), dense
    first = plan.first_interest[start:end] - lo
    has = np.diff(plan.first_interest[start:end + 1]) > 0  # subscribers without interests get none here
    relevance = np.maximum.reduceat(interests, first[has], axis=0)
    score = relevance * boost[None, :]
    k = out.papers.shape[1]
    top = np.argpartition(-score, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(score, top, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
    best = np.take_along_axis(top, order, axis=1)
    rows = np.arange(start, end)[has]
    out.papers[rows] = best
    out.scores[rows] = np.take_along_axis(score, best, axis=1)
    out.passes[rows] = np.take_along_axis(relevance, best, axis=1) >= settings.relevance_floor


def prepare(pool: Pool, subscribers: Sequence[Subscriber], settings: SelectSettings) -> None:
    """Score every keyword and description of a send run's subscribers in one sparse product, up front."""
    plan = _Plan(subscribers, settings.description_weight)
    pool.index(settings.title_weight).prepare(plan.units)
