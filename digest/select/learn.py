"""A subscriber's own model, learned from their clicks: what arxiv-sanity-lite does per tag.

Positives are the papers the subscriber marked *more* and their interests' library (seed) papers;
negatives are the papers marked *less* (counted DISLIKED_WEIGHT times each) and NEGATIVES papers
sampled from the store, the papers this newsletter brings in (the model learns what sets the liked
ones apart from those). Features are the papers' embeddings from the text model: a handful of
clicks says little about words and much more about where the papers sit in the embedding space, so
three clicks on a sub-topic reach papers that share no keyword with them. The model is a logistic
regression with balanced classes.

Two terms reach the ranking (formula in `rank.py`):
- the model's score, as a z-score over the shipped reference papers, gives log-odds MODEL_A + MODEL_B × z,
  blended with the interests' log-odds (`scores.blend`) with the share clicks / (clicks +
  feedback_clicks): a few clicks move the next digest, many clicks dominate it;
- a Rocchio step in the centred embedding space (`vectors.centred`): ROCCHIO_MORE × the cosine of a paper
  with the mean of the liked papers minus ROCCHIO_LESS × that with the mean of the disliked ones, added
  to the log-odds, so the neighbours of a paper marked *less* drop at once. Measured on simulated readers
  (docs/benchmarks.md, "Ranking quality"), the two together add about twice what either adds alone.

A stored model is DIM weights, an intercept, its scores' mean and spread over the reference papers,
and the Rocchio direction; it does not depend on the day's papers, so a paper's score is the same
whichever day it is ranked on.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from digest.models import Paper
from digest.select.neural import DIM, MODEL_NAME
from digest.select.vectors import centred, codes, exact_dot, reference

if TYPE_CHECKING:
    from digest.models import Subscriber
    from digest.select.pool import Embedder
    from digest.store import Store

DISLIKED_WEIGHT = 5.0  # a paper marked less counts as this many sampled store papers
NEGATIVES = 1000  # papers sampled from the store as negatives
ROCCHIO_MORE = 5.0  # log-odds per unit of cosine towards the liked papers' centre
ROCCHIO_LESS = 2.0  # ... away from the disliked papers' centre (less: one dislike must not sink a whole interest)
C = 1.0  # inverse regularisation strength of the logistic regression
MODEL_A = -1.0  # log-odds of a paper the model scores like a typical reference paper
MODEL_B = 1.5  # log-odds gained per standard deviation (over the reference papers) of the model's score
MODEL_VERSION = "lr-dense-3"  # (3: the reference papers' statistics are over all 7,471 of them)


@dataclass(frozen=True)
class FeedbackModel:
    """A linear model over embeddings: weights, an intercept, its scores' spread, and the clicks it learned from."""

    weights: np.ndarray
    intercept: float
    clicks: int
    mean: float = 0.0  # of its scores over the reference papers
    spread: float = 1.0
    direction: np.ndarray | None = None  # ROCCHIO_MORE × liked centre − ROCCHIO_LESS × disliked centre

    def rocchio(self, unit: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """The Rocchio term of papers given by the codes of their centred unit embeddings (float64)."""
        if self.direction is None:
            return np.zeros(len(unit[0]))
        return exact_dot(unit, codes(self.direction))[:, 0]  # type: ignore[no-any-return]

    def relevance_logits(self, unit: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        """Log-odds of relevance of papers given by the codes of their centred unit embeddings: MODEL_A + MODEL_B × z
        (`vectors.exact_dot`: the same to the last bit in a batch of many models)."""
        product = exact_dot(codes(self.weights), unit)
        return logits_of(product, np.array([self.intercept]), np.array([self.mean]), np.array([self.spread]))[0]

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        direction = self.direction if self.direction is not None else np.zeros(0, dtype=np.float32)
        np.savez(buf, weights=self.weights.astype(np.float32), direction=direction.astype(np.float32),
                 meta=np.array([self.intercept, self.clicks, self.mean, self.spread], dtype=np.float64))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> FeedbackModel:
        with np.load(io.BytesIO(data)) as saved:
            intercept, clicks, mean, spread = saved["meta"].tolist()
            direction = saved["direction"].astype(np.float32) if "direction" in saved else None
            return cls(saved["weights"].astype(np.float32), intercept, int(clicks), mean, spread,
                       direction if direction is not None and len(direction) else None)


def logits_of(products: np.ndarray, intercepts: np.ndarray, means: np.ndarray, spreads: np.ndarray) -> np.ndarray:
    """Models' log-odds from their weights' products with papers (models × papers, or one row): the arithmetic
    `FeedbackModel.relevance_logits` and a batch share."""
    rows = np.atleast_2d(products)
    return MODEL_A + MODEL_B * ((rows + intercepts[:, None]) - means[:, None]) / spreads[:, None]  # type: ignore[no-any-return]


def fit(liked: Sequence[Paper], disliked: Sequence[Paper], seeds: Sequence[Paper], embedder: Embedder,
        negatives: np.ndarray) -> FeedbackModel | None:
    """The subscriber's model, or None without a marked or seed paper; `negatives`: sampled papers' embeddings."""
    positives = list({p.key: p for p in [*liked, *seeds]}.values())
    if not positives and not disliked:
        return None

    def unit(papers: Sequence[Paper]) -> np.ndarray | None:
        return centred(embedder.papers(list(papers))) if papers else None

    return fit_rows(unit(positives) if positives else np.zeros((0, DIM), dtype=np.float32), unit(liked),
                    unit(disliked), centred(negatives) if len(negatives) else negatives,
                    clicks=len(liked) + len(disliked))


def fit_rows(positives: np.ndarray, liked: np.ndarray | None, disliked: np.ndarray | None, negatives: np.ndarray, *,
             clicks: int) -> FeedbackModel:
    """`fit` on the papers' centred unit embeddings (`liked` and `disliked` make the Rocchio direction)."""
    ref = reference()
    if len(positives) and len(negatives):
        from sklearn.linear_model import LogisticRegression  # imported when a model is learned: it takes a second

        n_dis = 0 if disliked is None else len(disliked)
        x = np.vstack([positives, *([disliked] if n_dis else []), negatives])
        labels = np.r_[np.ones(len(positives)), np.zeros(n_dis + len(negatives))]
        weight = np.r_[np.ones(len(positives)), np.full(n_dis, DISLIKED_WEIGHT), np.ones(len(negatives))]
        weight[: len(positives)] *= weight[len(positives):].sum() / len(positives)  # balanced classes
        model = LogisticRegression(C=C, max_iter=1000).fit(x, labels, sample_weight=weight)
        weights, intercept = model.coef_.ravel().astype(np.float32), float(model.intercept_[0])
    else:  # dislikes alone: nothing to learn a direction of relevance from, only what to move away from
        weights, intercept = np.zeros(DIM, dtype=np.float32), 0.0
    scores = ref.centred @ weights + intercept
    direction = np.zeros(DIM, dtype=np.float64)
    if liked is not None and len(liked):
        direction += ROCCHIO_MORE * liked.mean(axis=0)
    if disliked is not None and len(disliked):
        direction -= ROCCHIO_LESS * disliked.mean(axis=0)
    return FeedbackModel(weights, intercept, clicks, float(scores.mean()), float(scores.std()) + 1e-6,
                         direction.astype(np.float32))


def fingerprint(liked: Sequence[Paper], disliked: Sequence[Paper], seeds: Sequence[Paper]) -> str:
    """What a stored model was learned from: a model whose fingerprint differs is learned again."""
    text = "|".join([MODEL_VERSION, MODEL_NAME, *(f"+{p.key}" for p in liked), *(f"-{p.key}" for p in disliked),
                     *(f"s{p.key}" for p in seeds)])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def with_models(signals: Mapping[str, Any], subscribers: Sequence[Subscriber], store: Store, embedder: Embedder,
                seeds_of: Callable[[Subscriber, Any], Sequence[Paper]]) -> dict[str, Any]:
    """The signals (`profile.Signals`) with each clicking subscriber's learned model: read from the store's cache,
    learned again (and stored) when the clicks or seeds changed since. `seeds_of`: a subscriber's seed papers."""
    out = dict(signals)
    negatives: np.ndarray | None = None  # sampled and embedded once for every subscriber who needs a model
    for sub in subscribers:
        sig = signals.get(sub.email)
        if sig is None or not (sig.liked or sig.disliked):
            continue
        seeds = seeds_of(sub, sig)
        key = f"feedback-model/{sub.email}"
        mark = fingerprint(sig.liked, sig.disliked, seeds).encode()
        saved = store.get_cache(key)
        if saved is not None and saved.startswith(mark + b"\n"):
            model: FeedbackModel | None = FeedbackModel.from_bytes(saved[len(mark) + 1:])
        else:
            if negatives is None:
                sampled = store.sample_papers(NEGATIVES, seed=0)
                negatives = embedder.papers(sampled) if sampled else np.zeros((0, DIM), dtype=np.float32)
            model = fit(sig.liked, sig.disliked, seeds, embedder, without(negatives, embedder, sig.liked, seeds))
            if model is not None:
                store.put_cache(key, mark + b"\n" + model.to_bytes())
        out[sub.email] = replace(sig, model=model)
    return out


def without(negatives: np.ndarray, embedder: Embedder, *groups: Sequence[Paper]) -> np.ndarray:
    """The sampled negatives, leaving out any that is one of the positives (a liked paper is in the store too)."""
    positives = [p for group in groups for p in group]
    if not positives or not len(negatives):
        return negatives
    seen = embedder.papers(positives)
    same = (negatives @ seen.T).max(axis=1) > 0.9999
    return negatives[~same]
