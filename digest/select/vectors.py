"""An interest in the text model's space: its query, its own learned model, and what their scores mean.

Sentence embeddings share a large common direction (every abstract is a bit like every other), so
all vectors here are centred on the mean embedding of the shipped reference papers and scaled to
unit length before cosines are taken; centring alone lifts a library's centroid from the worst
method measured to one of the best (docs/benchmarks.md, "Ranking quality").

An interest gets a `DenseProfile` once, when it is stored or first ranked, from its own words or
library and the shipped reference papers only (`digest/data/reference.npz`: the 7,471 arXiv papers of the sample
listed before any benchmark pool's, which no pool draws from), so it never depends on the day's papers or on the
store's size:

- its query: the centred embedding of its words (keywords, then its description), or for a library
  the mean of its papers' centred embeddings;
- its model, a linear classifier in the embedding space, as arxiv-sanity-lite trains per tag and
  Scholar Inbox per reader: positives are the library's papers, or for words the PSEUDO_POSITIVES
  reference papers nearest the query (pseudo-relevance feedback: the words pick examples, the model
  learns what sets them apart from the rest); negatives are the reference papers. It is a weighted
  ridge regression (least squares on the labels), solved in closed form: the reference part of the
  normal equations is the same for every interest and is factorised once per process, and an
  interest's few positives are a low-rank update of it (the Woodbury identity), so a profile costs a
  fraction of a millisecond instead of the 130 ms of a logistic regression, ranking as well as it
  (measured: docs/benchmarks.md, "Ranking quality") — which is what lets an import of 100,000 subscribers make
  every profile;
- for a library, its papers themselves (a paper's mean similarity to them, zotero-arxiv-daily's signal);
- every score's mean and spread over the reference papers, so that each is read as a z-score: how
  unusual a paper's closeness to this interest is among papers in general.

Every score is linear in a paper's centred unit vector, so an interest's fused evidence from the text
model is one direction (`DenseProfile.direction`, weighted by `scores.FUSION`) and scoring a day's
papers for a batch of interests is one matrix product, made exact by int8 codes (`exact_dot`).
"""

from __future__ import annotations

import hashlib
import io
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources

import numpy as np

from digest.select import integer
from digest.select.neural import DIM, MODEL_NAME

PSEUDO_POSITIVES = 10  # reference papers nearest a query that its model learns from
# `text_profiles`: queries whose nearest reference papers one product shortlists (64 × 7,471 closeness: 1.9 MB, its
# argpartition 3.8 MB; 256 raised an import's peak by 44 MB), and how many it shortlists for each before the nearest
# are chosen exactly (float32 errors move a closeness by ~1e-7)
PROFILE_BLOCK = 64
NEAREST_CANDIDATES = 64
# (ridge penalty per reference paper, weight of each positive) of a text interest's model and of a library's
# (None: the positives weigh as much as all the reference papers together); chosen on profile set T
TEXT_RIDGE = (0.01, 10.0)
LIBRARY_RIDGE = (0.03, None)
CODE_MAX = 127.0  # int8 codes of vectors (see `exact_dot`)
# values of an exact product scaled (and finished) at a time: 1 MB of float64, which stays in the core's cache
EXACT_BLOCK = 131_072
WOODBURY_MAX = 64  # positives up to which the update is solved by the Woodbury identity (else directly)
MAX_NEIGHBOURS = 500  # library papers kept for the neighbour signal (the most recently added)
VERSION = "v5"  # a profile made by another version is made again (v5: every reserved paper is a reference paper)


@dataclass(frozen=True, eq=False)
class Reference:
    """The shipped reference papers: their mean embedding and their centred unit rows (their raw embeddings are
    not kept: nothing reads them, and 7,471 rows are 11 MB)."""

    mean: np.ndarray
    centred: np.ndarray


def _reference(*names: str) -> list[np.ndarray]:
    """These arrays of the reference data shipped in the package (`np.load` reads only the arrays asked for)."""
    data = resources.files("digest.data").joinpath("reference.npz").read_bytes()
    with np.load(io.BytesIO(data)) as saved:
        if str(saved["model"]) != MODEL_NAME:  # pragma: no cover - tools/build_background.py keeps them in step
            raise RuntimeError(f"reference.npz was built with {saved['model']}, not {MODEL_NAME}")
        return [saved[name] for name in names]


@cache
def reference() -> Reference:
    """The reference data shipped in the package (read once per process, when a profile or a model is made)."""
    mean = reference_mean()
    return Reference(mean, _centre(_reference("vectors")[0].astype(np.float32), mean))  # (in place: 11 MB, not 3 × 11)


@cache
def reference_mean() -> np.ndarray:
    """The reference papers' mean embedding (`reference().mean`), without their rows: what centring papers needs,
    and all a send reads when its readers' profiles and models are in the store (11 MB of rows not loaded)."""
    return _reference("mean")[0].astype(np.float32)  # type: ignore[no-any-return]


def centred(vectors: np.ndarray, mean: np.ndarray | None = None) -> np.ndarray:
    """Rows minus the reference mean, scaled to unit length (float32, a new array)."""
    return _centre(np.array(vectors, dtype=np.float32), reference_mean() if mean is None else mean)


def _centre(rows: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """`centred` in place on float32 rows (each step in the rows themselves: no copies of them)."""
    rows -= np.asarray(mean, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    rows /= np.where(norms > 0, norms, 1.0)
    return rows


@cache
def _features_mean() -> np.ndarray:
    """The reference papers' centred rows' own mean (float64): what the ridge models' features are shifted by."""
    return reference().centred.astype(np.float64).mean(axis=0)  # type: ignore[no-any-return]


@cache
def _normal(penalty: float) -> np.ndarray:
    """XᵀX + penalty × n × I for the shifted reference rows X: the shared part of every ridge model."""
    x = reference().centred.astype(np.float64) - _features_mean()
    return x.T @ x + penalty * len(x) * np.eye(x.shape[1])  # type: ignore[no-any-return]


@cache
def _inverse(penalty: float) -> np.ndarray:
    return np.linalg.inv(_normal(penalty))  # type: ignore[no-any-return]


# -- exact scores: int8 codes --------------------------------------------------------------------------------

def codes(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows as int8 codes (held in float32) and a scale per row: row ≈ codes × scale."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    scale = np.abs(rows).max(axis=1, initial=0.0) / CODE_MAX
    scale[scale == 0] = 1.0
    return np.rint(rows / scale[:, None]).astype(np.float32), scale


def exact_dot(a: tuple[np.ndarray | integer.Held, np.ndarray], b: tuple[np.ndarray | integer.Held, np.ndarray],
              then: Callable[[slice, np.ndarray], object] | None = None,
              product: np.ndarray | None = None) -> np.ndarray:
    """The dot products of rows of `a` with rows of `b`, both `codes` (rows of a × rows of b, float64; either may
    hold its codes as `integer.Held`, a pool's, whose forms for the product are made once).

    Every partial sum of two int8 codes' products is an integer below 2**24 (127 × 127 × 384), which float32
    holds exactly, so the product is the same to the last bit however BLAS orders the sums: a subscriber's
    scores are the same in a batch of thousands as alone. The scaling runs EXACT_BLOCK values' rows at a time, and
    `then(rows, block)` (if given) finishes each block of rows in place while it is still in the core's cache: a
    batch's thousands of rows × a window of papers in float64 are tens of megabytes, and each pass over all of
    them went out to memory and back. `product`: `a[0] @ b[0].T` when the caller made it (with more rows at once:
    the same integers); made by `integer.product` otherwise."""
    if product is None:
        product = integer.product(a[0], b[0])
    out = np.empty(product.shape)
    step = max(1, EXACT_BLOCK // max(out.shape[1], 1))
    for lo in range(0, len(out), step):
        rows = slice(lo, lo + step)
        block = out[rows]
        np.copyto(block, product[rows])  # (exact: float32 or int32 to float64)
        block *= a[1][rows, None]  # the same products as a × s_a × s_b, in place
        block *= b[1][None, :]
        if then is not None:
            then(rows, block)
    return out


# -- profiles ----------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class DenseProfile:
    """One interest in the centred embedding space (see the module doc); `kind` is "text" or "library".

    Every score is linear in a paper's centred unit vector u: the query's u·query, the model's u·weights + bias,
    a library's mean closeness u·centre; each with its mean and spread over the reference papers."""

    kind: str
    query: np.ndarray  # unit vector
    query_stats: tuple[float, float]
    weights: np.ndarray
    bias: float
    model_stats: tuple[float, float]
    centre: np.ndarray  # the library papers' mean (zeros for words)
    centre_stats: tuple[float, float]
    neighbours: np.ndarray  # the library papers (float16 rows, most recently added first; none for words)
    _fused: dict[tuple[float, float, float], tuple[np.ndarray, float, float]] = field(
        default_factory=dict, compare=False, repr=False)

    def fused(self, query: float, model: float, centre: float) -> tuple[np.ndarray, float, float]:
        """`direction` as int8 codes: (codes, their scale, the constant), made once per profile and weights."""
        key = (query, model, centre)
        found = self._fused.get(key)
        if found is None:
            d, c = self.direction(query, model, centre)
            rows, scale = codes(d)
            found = self._fused[key] = (rows[0].astype(np.int8), float(scale[0]), c)
        return found

    def direction(self, query: float, model: float, centre: float) -> tuple[np.ndarray, float]:
        """(d, c) with u·d + c = query × z_query + model × z_model + centre × z_centre."""
        (qm, qs), (mm, ms), (cm, cs) = self.query_stats, self.model_stats, self.centre_stats
        d = (query / qs) * self.query.astype(np.float64) + (model / ms) * self.weights.astype(np.float64)
        d += (centre / cs) * self.centre.astype(np.float64)
        return d, model * (self.bias - mm) / ms - query * qm / qs - centre * cm / cs

    def z_scores(self, unit: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(z_query, z_model, z_centre) of papers given by their codes (float64 rows; for explanations)."""
        rows, scale = self._codes
        found = exact_dot(unit, (rows.astype(np.float32), scale))
        (qm, qs), (mm, ms), (cm, cs) = self.query_stats, self.model_stats, self.centre_stats
        return (found[:, 0] - qm) / qs, (found[:, 1] + self.bias - mm) / ms, (found[:, 2] - cm) / cs

    @cached_property
    def _codes(self) -> tuple[np.ndarray, np.ndarray]:
        """The query's, the model's and the centre's codes (int8, 1.2 kB), made once: a send explains an interest's
        papers in every digest that has it."""
        rows, scale = codes(np.vstack([self.query, self.weights, self.centre]))
        return rows.astype(np.int8), scale

    def to_bytes(self) -> bytes:
        """A compact binary form (read back by `from_bytes` with no parsing but `frombuffer`): the statistics in
        float64, the vectors in float16 (scores read them through int8 codes), a text profile's empty centre and
        neighbours left out (1.6 kB)."""
        rows = len(self.neighbours)
        head = np.array([*self.query_stats, self.bias, *self.model_stats, *self.centre_stats, rows], dtype="<f8")
        vectors = [self.query, self.weights] + ([self.centre] if self.kind == "library" else [])
        return (self.kind.encode()[:8].ljust(8, b" ") + head.tobytes()
                + np.concatenate(vectors).astype("<f2").tobytes() + self.neighbours.astype("<f2").tobytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> DenseProfile:
        kind = data[:8].decode("ascii", "replace").strip()
        count = 3 if kind == "library" else 2
        if kind not in ("text", "library") or len(data) < 72 + 2 * count * DIM:
            raise ValueError("not a stored profile")
        head = struct.unpack_from("<8d", data, 8)  # (Python floats at once: a send reads thousands of profiles)
        body = np.frombuffer(data, dtype="<f2", count=count * DIM, offset=72).astype(np.float32)
        rows = int(head[7])
        if len(data) != 72 + 2 * (count + rows) * DIM:
            raise ValueError("a stored profile has the wrong length")
        neighbours = np.frombuffer(data, dtype="<f2", count=rows * DIM, offset=72 + 2 * count * DIM).reshape(rows, DIM)
        centre = body[2 * DIM:] if kind == "library" else np.zeros(DIM, dtype=np.float32)
        return cls(kind, body[:DIM], head[0:2], body[DIM:2 * DIM], head[2], head[3:5], centre, head[5:7], neighbours)


# A text profile as `to_bytes` writes it: its kind, eight statistics, its query and its model (no centre, no rows).
_TEXT_RECORD = np.dtype([("kind", "S8"), ("head", "<f8", 8), ("vectors", "<f2", (2, DIM))])
_NO_CENTRE = np.zeros(DIM, dtype=np.float32)
_NO_CENTRE.flags.writeable = False
_NO_NEIGHBOURS = np.zeros((0, DIM), dtype=np.float16)
_NO_NEIGHBOURS.flags.writeable = False


def profiles_from_bytes(stored: Sequence[bytes]) -> list[DenseProfile | ValueError]:
    """`DenseProfile.from_bytes` of many stored profiles (or the error that one raises): text profiles written by
    `to_bytes` are decoded together (one `frombuffer` and one conversion for all instead of a few microseconds of
    calls each: a send reads thousands), the same values; anything else one at a time."""
    out: list[DenseProfile | ValueError] = [ValueError("unread")] * len(stored)
    text = [n for n, data in enumerate(stored) if len(data) == _TEXT_RECORD.itemsize and data[:8] == b"text    "]
    if text:
        found = np.frombuffer(b"".join([stored[n] for n in text]), dtype=_TEXT_RECORD)
        vectors = found["vectors"].astype(np.float32)
        queries, models = list(vectors[:, 0]), list(vectors[:, 1])  # (row views made at once)
        for n, head, query, weights in zip(text, found["head"].tolist(), queries, models, strict=True):
            out[n] = (DenseProfile("text", query, (head[0], head[1]), weights, head[2], (head[3], head[4]), _NO_CENTRE,
                                   (head[5], head[6]), _NO_NEIGHBOURS) if head[7] == 0 else ValueError(
                "a stored profile has the wrong length"))
    done = set(text)
    for n, data in enumerate(stored):
        if n not in done:
            try:
                out[n] = DenseProfile.from_bytes(data)
            except (ValueError, KeyError, OSError) as exc:
                out[n] = exc if isinstance(exc, ValueError) else ValueError(str(exc))
    return out


def fused_rows(wanted: Sequence[tuple[DenseProfile, tuple[float, float, float]]],
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`DenseProfile.fused` of many (profile, weights) at once: the codes (rows, float32), their scales and the
    constants. The same element-wise arithmetic as one profile at a time, so the same values to the last bit; each
    is kept in its profile's memo (a profile's own `fused` finds it)."""
    rows = np.empty((len(wanted), DIM), dtype=np.float32)
    scales, consts = np.empty(len(wanted)), np.empty(len(wanted))
    todo = []
    for n, (profile, key) in enumerate(wanted):
        found = profile._fused.get(key)  # noqa: SLF001
        if found is None:
            todo.append(n)
        else:
            rows[n], scales[n], consts[n] = found
    if todo:
        profiles = [wanted[n][0] for n in todo]
        query, model, centre = np.array([wanted[n][1] for n in todo], dtype=np.float64).T
        (qm, qs), (mm, ms), (cm, cs) = (np.array([getattr(p, name) for p in profiles], dtype=np.float64).T
                                        for name in ("query_stats", "model_stats", "centre_stats"))
        bias = np.array([p.bias for p in profiles], dtype=np.float64)
        d = ((query / qs)[:, None] * np.stack([p.query for p in profiles]).astype(np.float64)
             + (model / ms)[:, None] * np.stack([p.weights for p in profiles]).astype(np.float64))
        centred = np.flatnonzero(centre)  # (a text profile's centre takes no weight: adding its zeros changes nothing
        if len(centred):  # but the sign of a zero, which no code or sum keeps)
            d[centred] += (centre[centred] / cs[centred])[:, None] * np.stack(
                [profiles[j].centre for j in centred.tolist()]).astype(np.float64)
        found_rows, found_scales = codes(d)
        found_consts = model * (bias - mm) / ms - query * qm / qs - centre * cm / cs
        rows[todo], scales[todo], consts[todo] = found_rows, found_scales, found_consts
        int8 = found_rows.astype(np.int8)
        for j, n in enumerate(todo):
            profile, key = wanted[n]
            profile._fused[key] = (int8[j], float(found_scales[j]), float(found_consts[j]))  # noqa: SLF001
    return rows, scales, consts


@cache
def _covariance() -> np.ndarray:
    """The reference papers' centred rows' covariance (float64, DIM × DIM; population, as `np.std` takes it)."""
    x = reference().centred.astype(np.float64) - _features_mean()
    return x.T @ x / len(x)  # type: ignore[no-any-return]


def _stats(direction: np.ndarray, bias: float = 0.0) -> tuple[float, float]:
    """The mean and spread over the reference papers of the score u·direction + bias, worked out from their mean
    and covariance (two products with DIM numbers, not a pass over 7,471 rows for each: a profile made for each of an
    import's interests read the 11 MB of rows twice), in float64."""
    d = np.asarray(direction, dtype=np.float64)
    spread = float(np.sqrt(max(float(d @ _covariance() @ d), 0.0)))
    return float(_features_mean() @ d) + bias, spread + 1e-6


def _fit(positives: np.ndarray, ridge: tuple[float, float | None]) -> tuple[np.ndarray, float]:
    """A weighted ridge regression of the positives (target 1) against the reference papers (target 0), on
    centred unit rows shifted by their reference mean: (XᵀX + w UᵀU + λnI) v = w Σ u, solved through the
    shared inverse (the Woodbury identity for a few positives)."""
    penalty, weight = ridge
    mean = _features_mean()
    shifted = np.asarray(positives, dtype=np.float64) - mean
    w = weight if weight is not None else len(reference().centred) / max(len(shifted), 1)
    rhs = w * shifted.sum(axis=0)
    inverse = _inverse(penalty)
    if len(shifted) <= WOODBURY_MAX:
        u = shifted.T * np.sqrt(w)  # d × k
        au = inverse @ u
        weights = inverse @ rhs - au @ np.linalg.solve(np.eye(u.shape[1]) + u.T @ au, au.T @ rhs)
    else:
        full = _normal(penalty) + w * shifted.T @ shifted
        weights = np.linalg.solve(full, rhs)
    return weights.astype(np.float32), float(-mean @ weights)


def _half(vector: np.ndarray) -> np.ndarray:
    """A vector as the store keeps it (float16), so that a profile made now scores as one read back later."""
    return np.asarray(vector, dtype=np.float16).astype(np.float32)


def text_profile(vector: np.ndarray) -> DenseProfile:
    """The profile of an interest's words, from their raw embedding."""
    return text_profiles(vector[None, :])[0]


def text_profiles(vectors: np.ndarray) -> list[DenseProfile]:
    """The profiles of many interests' words, from their raw embeddings (rows): each the profile `text_profile`
    makes of its row alone, to the last bit.

    A profile's pseudo-positives are the reference papers nearest its query. Finding them read the 11 MB of
    reference rows once per profile (0.7 ms a profile in an import, bound by memory); here one product finds the
    NEAREST_CANDIDATES nearest of PROFILE_BLOCK queries at once, and the nearest PSEUDO_POSITIVES among them are
    chosen on closeness worked out again row by row in float64 (ties to the lower row), which does not depend on
    how many queries shared the product."""
    ref = reference()
    vectors = np.atleast_2d(vectors)
    out = []
    for lo in range(0, len(vectors), PROFILE_BLOCK):
        # (centred a block at a time: an import's thousands of interests are not copied all at once)
        block = _half(centred(vectors[lo:lo + PROFILE_BLOCK]))
        closeness = ref.centred @ block.T  # reference papers × queries, float32: only to shortlist
        shortlist = np.argpartition(-closeness, NEAREST_CANDIDATES - 1, axis=0)[:NEAREST_CANDIDATES]
        for j, query in enumerate(block):
            rows = np.sort(shortlist[:, j])
            exact = (ref.centred[rows].astype(np.float64) * query.astype(np.float64)).sum(axis=1)
            nearest = rows[np.lexsort((rows, -exact))[:PSEUDO_POSITIVES]]
            weights, bias = _fit(ref.centred[np.sort(nearest)], TEXT_RIDGE)
            weights = _half(weights)
            out.append(DenseProfile("text", query, _stats(query), weights, bias, _stats(weights, bias),
                                    np.zeros(DIM, dtype=np.float32), (0.0, 1.0), np.zeros((0, DIM), dtype=np.float16)))
    return out


def library_profile(vectors: np.ndarray) -> DenseProfile:
    """The profile of a library, from its papers' raw embeddings (most recently added first)."""
    rows = centred(np.asarray(vectors[:MAX_NEIGHBOURS], dtype=np.float32))
    centre = _half(rows.mean(axis=0))
    query = _half(centre / (np.linalg.norm(centre) or 1.0))
    weights, bias = _fit(rows, LIBRARY_RIDGE)
    weights = _half(weights)
    return DenseProfile("library", query, _stats(query), weights, bias, _stats(weights, bias), centre, _stats(centre),
                        rows.astype(np.float16))


def text_key(text: str) -> str:
    """The store cache key of a text interest's profile."""
    return f"dense-profile/{VERSION}/{MODEL_NAME}/text/" + hashlib.sha256(text.encode("utf-8", "surrogatepass")
                                                                          ).hexdigest()[:40]


def library_key(digest: str) -> str:
    """The store cache key of a library's profile (`digest`: the library's own digest)."""
    return f"dense-profile/{VERSION}/{MODEL_NAME}/library/{digest}"
