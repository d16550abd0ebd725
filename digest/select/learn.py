"""A subscriber's own model, learned from their clicks: what arxiv-sanity-lite does per tag.

Positives are the papers the subscriber marked *more* and their interests' seed papers; negatives
are the papers marked *less* (counted `DISLIKED_WEIGHT` times) and a sample of the store. Features
are the papers' unit-length BM25F vectors in the hashed term space the pool shares and, when dense
similarity is on, their unit-length dense embeddings (`dense.py`) as DENSE_DIM more columns after
the hashed ones: a handful of clicks says little about words, and much more about where the papers
sit in the embedding space. A model fitted on any papers scores any pool. The model is a logistic
regression (balanced classes, as arxiv-sanity-lite's per-tag SVM); only its `MAX_TERMS` strongest
word weights are kept (and every dense one), which keeps a stored model a few kB and a send run's
models two matrix products.

Its log-odds are blended with the calibrated keyword relevance (`scores.blend`, formula in `rank.py`) with
the share clicks / (clicks + feedback_clicks): a few clicks move the next digest, many clicks dominate it.
"""

from __future__ import annotations

import hashlib
import io
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from ..models import Paper
from .corpus import CorpusStats, Fields, bm25_weights, unit_length
from .pool import Embedder, Index
from .text import N_FEATURES

if TYPE_CHECKING:
    from ..models import Subscriber
    from ..store import Store
    from .profile import Signals

MAX_TERMS = 400  # strongest weights kept per model
DISLIKED_WEIGHT = 5.0  # a paper marked less counts as this many sampled store papers
NEGATIVES = 1000  # papers sampled from the store as negatives (was 200: +0.025 ±0.009 held-out P@10, set A)
C = 1.0  # inverse regularisation strength of the logistic regression
MODEL_A = -1.0  # log-odds of a paper the model scores like the pool's median paper
MODEL_B = 1.5  # log-odds gained per (robust) standard deviation over the pool of the model's score
NEAR = 0.2  # a sampled paper this close (cosine) to a positive is not taken as a negative: it may well be one
MODEL_VERSION = "lr-3"
STANDARDISE_ROWS = 256  # papers a model's scores are standardised on
DENSE_DIM = 256  # columns N_FEATURES .. N_FEATURES + DENSE_DIM hold the dense embedding


@dataclass(frozen=True)
class FeedbackModel:
    """A linear model over hashed terms: sorted columns, their weights, an intercept, and the clicks it learned from."""

    cols: np.ndarray
    coef: np.ndarray
    intercept: float
    clicks: int

    def logits(self, index: Index, dense: np.ndarray | None = None) -> np.ndarray:
        """The model's log-odds for every paper of the pool (`dense`: the pool's dense embeddings)."""
        words = self.cols < N_FEATURES
        local, weights = index.local(self.cols[words], self.coef[words].astype(np.float64))
        out = np.full(index.matrix.shape[0], self.intercept)
        if len(local):
            out += np.asarray(index.rows[:, local] @ weights).ravel()
        if dense is not None and not words.all():
            out += dense[:, self.cols[~words] - N_FEATURES] @ self.coef[~words].astype(np.float64)
        return out

    def relevance_logits(self, index: Index, dense: np.ndarray | None = None) -> np.ndarray:
        """Log-odds of relevance: the model's score standardised over the pool, so that its scale
        (which depends on how many papers it learned from) does not matter: MODEL_A + MODEL_B × z."""
        return standardised(self.logits(index, dense)[:, None])[:, 0]

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez_compressed(buf, cols=self.cols.astype(np.int32), coef=self.coef.astype(np.float32),
                            meta=np.array([self.intercept, self.clicks], dtype=np.float64))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> FeedbackModel:
        with np.load(io.BytesIO(data)) as saved:
            intercept, clicks = saved["meta"].tolist()
            return cls(saved["cols"].astype(np.int32), saved["coef"].astype(np.float32), intercept, int(clicks))


def standardised(scores: np.ndarray) -> np.ndarray:
    """Columns of model scores (papers × models) as log-odds of relevance, each standardised over the pool.

    The median and the spread are read on at most STANDARDISE_ROWS evenly spaced papers of the pool
    (the same ones for every model), which keeps a send run's many models cheap.
    """
    sample = scores[:: max(1, len(scores) // STANDARDISE_ROWS)]
    median = np.median(sample, axis=0)
    mad = 1.4826 * np.median(np.abs(sample - median), axis=0)  # robust: the liked papers are outliers
    spread = np.maximum(mad, 0.5 * sample.std(axis=0)) + 1e-9  # many papers share no term with the model
    return MODEL_A + MODEL_B * (scores - median) / spread


def standardised_rows(scores: np.ndarray) -> np.ndarray:
    """`standardised` with the models as rows (models × papers, C order), in place: the same arithmetic to
    the last bit, faster for many models.

    The medians partition contiguous rows (the order statistics do not depend on the layout); the
    spread's standard deviation is taken, as there, over the sampled papers as rows (papers × models),
    so that its sums add the same numbers in the same order.
    """
    picked = scores[:, :: max(1, scores.shape[1] // STANDARDISE_ROWS)]
    deviation = 0.5 * np.ascontiguousarray(picked.T).std(axis=0)
    sample = np.array(picked)  # (a copy: partitioned in place, which leaves each row's median as it is)
    median = np.median(sample, axis=1, overwrite_input=True)
    np.subtract(sample, median[:, None], out=sample)
    mad = 1.4826 * np.median(np.abs(sample, out=sample), axis=1, overwrite_input=True)
    spread = np.maximum(mad, deviation) + 1e-9
    np.subtract(scores, median[:, None], out=scores)
    np.multiply(MODEL_B, scores, out=scores)
    np.divide(scores, spread[:, None], out=scores)
    np.add(MODEL_A, scores, out=scores)
    return scores


def features(papers: Sequence[Paper], corpus: CorpusStats, title_weight: float,
             dense: Embedder | None = None) -> sp.csr_matrix:
    """Unit-length BM25F rows of the papers in the hashed term space, their dense embeddings after them."""
    words = unit_length(bm25_weights(Fields.of(papers), corpus, title_weight))
    if dense is None or not papers:
        return words
    vectors = sp.csr_matrix(dense.papers(papers).astype(np.float64))
    return sp.hstack([words, vectors], format="csr")


def fit(positives: Sequence[Paper], negatives: Sequence[Paper], disliked: Sequence[Paper], corpus: CorpusStats,
        *, title_weight: float, clicks: int, dense: Embedder | None = None,
        negative_rows: sp.csr_matrix | None = None) -> FeedbackModel | None:
    """The subscriber's model, or None without a positive paper to learn from.

    `negative_rows`: the negatives' `features`, when the caller made them once for many subscribers."""
    positive_keys = {p.key for p in positives}
    keep = [n for n, p in enumerate(negatives) if p.key not in positive_keys]
    if not positives or not (keep or disliked):
        return None
    if negative_rows is None and keep:
        negative_rows = features(negatives, corpus, title_weight, dense)  # a paper's row depends on it alone
    if len(keep) < len(negatives):
        negative_rows = negative_rows[keep] if keep else None
    rows = [features(group, corpus, title_weight, dense) if group else None for group in (positives, disliked)]
    return fit_rows(rows[0], rows[1], negative_rows, clicks=clicks)


def fit_rows(positives: sp.csr_matrix, disliked: sp.csr_matrix | None, negatives: sp.csr_matrix | None, *,
             clicks: int) -> FeedbackModel | None:
    """`fit` on the papers' feature rows (unit-length BM25F, hashed columns)."""
    if negatives is not None and negatives.shape[0]:
        words = slice(0, N_FEATURES)
        near = np.asarray((negatives[:, words] @ positives[:, words].T).max(axis=1).todense()).ravel()
        negatives = negatives[near < NEAR]
    parts = [m for m in (positives, disliked, negatives) if m is not None and m.shape[0]]
    if len(parts) < 2:
        return None
    n_pos = positives.shape[0]
    n_dis = disliked.shape[0] if disliked is not None else 0
    n_neg = negatives.shape[0] if negatives is not None else 0
    labels = np.array([1] * n_pos + [0] * (n_dis + n_neg))
    weight = np.array([1.0] * n_pos + [DISLIKED_WEIGHT] * n_dis + [1.0] * n_neg)
    weight[labels == 1] *= weight[labels == 0].sum() / n_pos  # balanced classes
    matrix = sp.vstack(parts).tocsc()
    used = np.flatnonzero(np.diff(matrix.indptr))  # only the columns these papers have
    from sklearn.linear_model import LogisticRegression  # imported when a model is learned: it takes a second

    model = LogisticRegression(C=C, solver="liblinear", max_iter=500).fit(matrix[:, used], labels,
                                                                         sample_weight=weight)
    coef = model.coef_.ravel()
    is_word = used < N_FEATURES
    words = np.flatnonzero(is_word)
    keep = np.sort(np.concatenate([words[np.argsort(-np.abs(coef[words]), kind="stable")[:MAX_TERMS]],
                                   np.flatnonzero(~is_word)]))
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
                corpus: CorpusStats, *, title_weight: float, dense: Embedder | None = None) -> dict[str, Signals]:
    """The signals with each clicking subscriber's learned model: read from the store's cache, learned
    again (and stored) when the clicks or seeds changed since."""
    from .profile import seed_papers

    out = dict(signals)
    negatives: list[Paper] | None = None
    negative_rows: sp.csr_matrix | None = None  # analysed once for every subscriber who needs a model
    for sub in subscribers:
        sig = signals.get(sub.email)
        if sig is None or not (sig.liked or sig.disliked):
            continue
        seeds = [p for i in sub.interests for p in seed_papers(i, sig.seeds)]
        key = f"feedback-model/{sub.email}"
        mark = (fingerprint(sig.liked, sig.disliked, seeds) + ("+dense" if dense is not None else "")).encode()
        saved = store.get_cache(key)
        if saved is not None and saved.startswith(mark + b"\n"):
            model: FeedbackModel | None = FeedbackModel.from_bytes(saved[len(mark) + 1:])
        else:
            if negatives is None:
                negatives = store.sample_papers(NEGATIVES, seed=0)
                negative_rows = features(negatives, corpus, title_weight, dense) if negatives else None
            model = fit([*sig.liked, *seeds], negatives, sig.disliked, corpus, title_weight=title_weight,
                        clicks=len(sig.liked) + len(sig.disliked), dense=dense, negative_rows=negative_rows)
            if model is not None:
                store.put_cache(key, mark + b"\n" + model.to_bytes())
        out[sub.email] = replace(sig, model=model)
    return out
