"""A subscriber's own model, learned from their clicks: what arxiv-sanity-lite does per tag.

Positives are the papers the subscriber marked *more* and their interests' seed papers; negatives
are the papers marked *less* (counted `DISLIKED_WEIGHT` times) and a sample of the store. Features
are the papers' unit-length BM25F vectors in the hashed term space the pool shares, so a model fitted
on any papers scores any pool. The model is a logistic regression (balanced classes, as
arxiv-sanity-lite's per-tag SVM); only its `MAX_TERMS` strongest weights are kept, which keeps a
stored model a few kB and a send run's models one sparse matrix.

Its log-odds are blended with the calibrated keyword relevance (see `rank.py`) with the share
clicks / (clicks + feedback_clicks): a few clicks move the next digest, many clicks dominate it.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize

from ..models import Paper
from .corpus import CorpusStats, Fields, bm25_weights
from .pool import Index

if TYPE_CHECKING:
    from ..models import Subscriber
    from ..store import Store
    from .profile import Signals

MAX_TERMS = 400  # strongest weights kept per model
DISLIKED_WEIGHT = 20.0  # a paper marked less counts as this many sampled store papers
NEGATIVES = 200  # papers sampled from the store as negatives
C = 1.0  # inverse regularisation strength of the logistic regression
MODEL_A = -1.0  # log-odds of a paper the model scores like the pool's median paper
MODEL_B = 1.5  # log-odds gained per (robust) standard deviation over the pool of the model's score
NEAR = 0.2  # a sampled paper this close (cosine) to a positive is not taken as a negative: it may well be one
MODEL_VERSION = "lr-1"


@dataclass(frozen=True)
class FeedbackModel:
    """A linear model over hashed terms: sorted columns, their weights, an intercept, and the clicks it learned from."""

    cols: np.ndarray
    coef: np.ndarray
    intercept: float
    clicks: int

    def logits(self, index: Index) -> np.ndarray:
        """The model's log-odds for every paper of the pool."""
        local, weights = index.local(self.cols, self.coef.astype(np.float64))
        if not len(local):
            return np.full(index.matrix.shape[0], self.intercept)
        return np.asarray(index.rows[:, local] @ weights).ravel() + self.intercept

    def relevance_logits(self, index: Index) -> np.ndarray:
        """Log-odds of relevance: the model's score standardised over the pool, so that its scale
        (which depends on how many papers it learned from) does not matter: MODEL_A + MODEL_B × z."""
        return standardised(self.logits(index)[:, None])[:, 0]

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, cols=self.cols.astype(np.int32), coef=self.coef.astype(np.float32),
                            meta=np.array([self.intercept, self.clicks], dtype=np.float64))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> FeedbackModel:
        with np.load(io.BytesIO(data)) as saved:
            intercept, clicks = saved["meta"].tolist()
            return cls(saved["cols"].astype(np.int64), saved["coef"].astype(np.float32), intercept, int(clicks))


def standardised(scores: np.ndarray) -> np.ndarray:
    """Columns of model scores (papers × models) as log-odds of relevance, each standardised over the pool."""
    median = np.median(scores, axis=0)
    spread = 1.4826 * np.median(np.abs(scores - median), axis=0) + 1e-9  # robust: the liked papers are outliers
    return MODEL_A + MODEL_B * (scores - median) / spread


def features(papers: Sequence[Paper], corpus: CorpusStats, title_weight: float):  # type: ignore[no-untyped-def]
    """Unit-length BM25F rows of the papers in the hashed term space."""
    return normalize(bm25_weights(Fields.of(papers), corpus, title_weight))


def fit(positives: Sequence[Paper], negatives: Sequence[Paper], disliked: Sequence[Paper], corpus: CorpusStats,
        *, title_weight: float, clicks: int) -> FeedbackModel | None:
    """The subscriber's model, or None without a positive paper to learn from."""
    positive_keys = {p.key for p in positives}
    negatives = [p for p in negatives if p.key not in positive_keys]
    if not positives or not (negatives or disliked):
        return None
    if negatives:
        near = (features(negatives, corpus, title_weight) @ features(positives, corpus, title_weight).T).max(axis=1)
        negatives = [p for p, sim in zip(negatives, near.toarray().ravel(), strict=True) if sim < NEAR]
    papers = [*positives, *disliked, *negatives]
    labels = np.array([1] * len(positives) + [0] * (len(disliked) + len(negatives)))
    weight = np.array([1.0] * len(positives) + [DISLIKED_WEIGHT] * len(disliked) + [1.0] * len(negatives))
    weight[labels == 1] *= weight[labels == 0].sum() / len(positives)  # balanced classes
    matrix = features(papers, corpus, title_weight).tocsc()
    used = np.flatnonzero(np.diff(matrix.indptr))  # only the columns these papers have
    model = LogisticRegression(C=C, max_iter=500).fit(matrix[:, used], labels, sample_weight=weight)
    coef = model.coef_.ravel()
    keep = np.sort(np.argsort(-np.abs(coef), kind="stable")[:MAX_TERMS])
    keep = keep[coef[keep] != 0]
    return FeedbackModel(used[keep].astype(np.int64), coef[keep].astype(np.float32), float(model.intercept_[0]),
                         clicks)


def sample(papers: Sequence[Paper], n: int, seed: str) -> list[Paper]:
    """A deterministic sample of n papers, the same for the same seed string."""
    rng = random.Random(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    return rng.sample(list(papers), min(n, len(papers)))


def fingerprint(liked: Sequence[Paper], disliked: Sequence[Paper], seeds: Sequence[Paper]) -> str:
    """What a stored model was learned from: a model whose fingerprint differs is learned again."""
    text = "|".join([MODEL_VERSION, *(f"+{p.key}" for p in liked), *(f"-{p.key}" for p in disliked),
                     *(f"s{p.key}" for p in seeds)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def with_models(signals: Mapping[str, Signals], subscribers: Sequence[Subscriber], store: Store,
                corpus: CorpusStats, *, title_weight: float) -> dict[str, Signals]:
    """The signals with each clicking subscriber's learned model: read from the store's cache, learned
    again (and stored) when the clicks or seeds changed since."""
    from .profile import seed_papers

    out = dict(signals)
    negatives: list[Paper] | None = None
    for sub in subscribers:
        sig = signals.get(sub.email)
        if sig is None or not (sig.liked or sig.disliked):
            continue
        seeds = [p for i in sub.interests for p in seed_papers(i, sig.seeds)]
        key = f"feedback-model/{sub.email}"
        mark = fingerprint(sig.liked, sig.disliked, seeds).encode()
        saved = store.get_cache(key)
        if saved is not None and saved.startswith(mark + b"\n"):
            model: FeedbackModel | None = FeedbackModel.from_bytes(saved[len(mark) + 1:])
        else:
            if negatives is None:
                negatives = store.sample_papers(NEGATIVES, seed=0)
            model = fit([*sig.liked, *seeds], negatives, sig.disliked, corpus, title_weight=title_weight,
                        clicks=len(sig.liked) + len(sig.disliked))
            if model is not None:
                store.put_cache(key, mark + b"\n" + model.to_bytes())
        out[sub.email] = replace(sig, model=model)
    return out
