"""Scores: how relevant each paper is to one subscriber, on the calibrated scale (the formula is in `rank.py`).

`Scored` holds one subscriber's scores on some papers of the pool, interest by interest: every paper
(`Scores`, what a preview and `digest rank` compute), or the few dozen candidates the batch ranking
kept for them (`batch.candidates`, what a send run computes). Picking, sections and reasons read
`Scored` only, so both give the same digest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from digest.models import Interest, Paper, Subscriber
from digest.select.dense import InterestVectors
from digest.select.learn import MODEL_A, NEGATIVES, FeedbackModel, fit, without
from digest.select.neural import DIM
from digest.select.pool import Index, Pool, Unit
from digest.select.profile import CompiledInterest, Signals, compile_interest, reference, seed_papers
from digest.select.vectors import EXACT_BLOCK, DenseProfile, exact_dot, fused_rows

LIKED_SECTION = "More like papers you liked"
# The words' calibration (bench/calibrate.py, keyword profiles): log-odds at one typical mention, and how fast they
# grow with the log of the score in the interest's unit. It is the whole relevance with the text model off, and
# the lexical feature of the fusion with it on.
CALIBRATION_A, CALIBRATION_B = 0.212, 1.369
NO_MATCH = -8.0  # log-odds of a paper that matches nothing of an interest
_LEAST = float(np.finfo(np.float64).tiny)
LEXICAL_FLOOR = -4.0  # the lexical feature's least value (a paper sharing no word with the interest)
AUTHOR_LOGIT = 8.0  # log-odds given to a paper by an author the interest follows: it is always shown
# Sections: interests surer than SECTION_SURE (88%) of a paper count as equally sure, and the one whose words match it
# best (SECTION_WORDS × its words' log-odds) takes it; otherwise the surest one does.
SECTION_SURE, SECTION_WORDS = 2.0, 0.1
# The fusion, fitted by bench/calibrate.py on profile set T (seed 1): per style of interest, the log-odds of relevance
# are A + query × z_query + model × z_model + lexical × max(L, LEXICAL_FLOOR), the z's being `vectors.features`.
FUSION = {
    "keywords": (-2.409, 0.462, 0.615, 0.389),
    "description": (-2.011, 0.352, 0.708, 0.503),
    "both": (-2.485, 0.451, 0.571, 0.500),
}
# A library: A + model × z_model + neighbours × z_neighbours + words × max(W, LEXICAL_FLOOR), W being the words'
# calibration of a paper's score on the library papers' BM25F centroid, read in the library's own unit
# (`library_words_feature`); fitted by bench/calibrate.py on libraries of 3, 5, 10 and 20 papers.
LIBRARY_FUSION = (-3.235, 0.912, 0.150, 0.673)


@dataclass(frozen=True)
class SelectSettings:
    """The knobs of the scoring formula (the `[select]` settings)."""

    min_relevance: float = 0.5
    title_weight: float = 3.0
    upvote_weight: float = 0.5
    comment_weight: float = 2.0
    star_weight: float = 0.2
    citation_weight: float = 1.0
    recency_weight: float = 0.3
    recency_half_life_days: float = 30.0
    description_weight: float = 0.3
    seed_weight: float = 3.0
    feedback_clicks: float = 10.0
    diversity: float = 0.3
    text_model: float = 1.0  # 1: words and the text model fused; 0: words alone
    # The honest-dates split (`digest.select.ages`): a paper published more than max_age_days before the digest is
    # "old", and a digest takes at most trending_again old papers besides its max_papers recent ones (0: no split).
    max_age_days: float = 0.0
    trending_again: float = 0.0
    # How a reader's several interests share a digest's places (`rank.choose`): SHARES (each interest with papers above
    # the floor a share, by weight), XQUAD (a diversification that rewards covering interests), or ONE_ORDER (every
    # paper in one order, whatever its interest).
    allocation: float = 1.0


ONE_ORDER, SHARES, XQUAD = 0.0, 1.0, 2.0
ALLOCATIONS = {"off": ONE_ORDER, "shares": SHARES, "xquad": XQUAD}  # `select.allocation`


def calibration(dense: bool = False) -> tuple[float, float]:
    """The words' calibration constants (A, B)."""
    return CALIBRATION_A, CALIBRATION_B


def calibrate(raw: np.ndarray, unit: float | np.ndarray, weight: float | np.ndarray = 1.0,
              dense: bool = False) -> np.ndarray:
    """Log-odds of being on topic from raw scores in BM25 units (see `rank.py`); `unit` and `weight` may be
    columns (one per row of `raw`).

    A float64 matrix is calibrated a megabyte of rows at a time (EXACT_BLOCK values), every step done on the block
    while it is in the core's cache: the same operations in the same order as on the whole, bit for bit (a chunk's
    thousands of interests × a pool are tens of megabytes, and seven passes over them went out to memory and back;
    3,600 × 1,000: 37 -> 14 ms with the zeros' shortcut below)."""
    a, b = CALIBRATION_A, CALIBRATION_B
    raw, units = np.asarray(raw), np.asarray(unit)
    with np.errstate(divide="ignore"):
        shape = np.broadcast_shapes(raw.shape, units.shape, np.shape(weight))
        if raw.dtype != np.float64 or units.dtype != np.float64 or raw.ndim != 2 or shape != raw.shape:
            return np.maximum(a + b * np.log(np.maximum(raw, 0.0) / unit) + np.log(weight),  # type: ignore[no-any-return]
                              NO_MATCH)
        logit = np.empty(shape)
        log_weights = np.log(weight)
        # No match (0) is taken up to the smallest normal float when that still ends below NO_MATCH for every row:
        # the same value after the floor, and SIMD logarithms leave their fast path for zeros (3.6 million values,
        # about half of them zeros: 22 ms; with none: 4.4 ms).
        least = _LEAST if b > 0 and np.log(_LEAST) * b + a + np.max(log_weights, initial=-np.inf) < NO_MATCH else 0.0
        units, log_weight = np.broadcast_to(units, shape), np.broadcast_to(log_weights, shape)
        step = max(1, EXACT_BLOCK // max(shape[1], 1))
        for lo in range(0, shape[0], step):
            rows = slice(lo, lo + step)
            block = logit[rows]
            np.maximum(raw[rows], 0.0, out=block)
            block /= units[rows]
            if least:
                np.maximum(block, least, out=block)
            np.log(block, out=block)  # a + b × log(…) + log(weight)
            block *= b
            block += a
            block += log_weight[rows]
            np.maximum(block, NO_MATCH, out=block)
    return logit


def style(interest: Interest) -> str:
    """Which fusion an interest's words take: keywords, a description, or both."""
    if interest.keywords and interest.description:
        return "both"
    return "keywords" if interest.keywords else "description"


@dataclass(frozen=True)
class DenseParts:
    """The text model's z-scores of some interests (rows) on some papers (columns), for explanations: closeness
    to the words, the interest's model (its words' or, where the library decides, its library's), and the
    mean closeness to the library's papers (0 without one)."""

    query: np.ndarray
    model: np.ndarray
    neighbours: np.ndarray
    library: np.ndarray  # bool, interests × papers: the interest's library decides the paper's log-odds


# `directions`: the profiles' fused directions as codes and their scales, the constants, the words' coefficients, and
# which interests the text profiles' rows and the library profiles' rows belong to.
Directions = tuple[tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray, list[int], list[int]]


def directions(interests: Sequence[Interest], vectors: Sequence[InterestVectors]) -> Directions:
    """Every profile's fused direction as codes, and its constant: the text profiles' (words) then the library
    profiles'; with each text profile's lexical coefficient, and which interests each belongs to."""
    wanted: list[tuple[DenseProfile, tuple[float, float, float]]] = []
    consts, lexical, text, library = [], [], [], []
    for n, v in enumerate(vectors):
        if v.text is not None:
            a, q, m, w = FUSION[style(interests[n])]
            wanted.append((v.text, (q, m, 0.0)))
            consts.append(a)
            lexical.append(w)
            text.append(n)
    a, m, k, _ = LIBRARY_FUSION
    for n, v in enumerate(vectors):
        if v.library is not None:
            wanted.append((v.library, (0.0, m, k)))
            consts.append(a)
            library.append(n)
    if not wanted:
        return (np.zeros((0, DIM), dtype=np.float32), np.zeros(0)), np.zeros(0), np.zeros(0), text, library
    rows, scales, fused = fused_rows(wanted)
    return (rows, scales), np.array(consts) + fused, np.array(lexical), text, library


def fuse(lexical: np.ndarray, interests: Sequence[Interest], vectors: Sequence[InterestVectors],
         pool: Pool, index: Index, columns: np.ndarray | None = None, fused: Directions | None = None,
         product: np.ndarray | None = None) -> np.ndarray:
    """Each interest's log-odds of relevance (interests × papers, before its weight): its words' fusion and its
    library's, the larger of the two (`columns`: only these papers of the pool).

    `lexical` is the words' calibrated log-odds (`calibrate` without the weight), NO_MATCH for no words. The
    text model's part is one exact matrix product of the interests' directions (`fused`: `directions` of these
    interests, when the caller made them) with the papers' codes (`product`: that product in float32, when the
    caller made it too)."""
    found, consts, weights, text, library = directions(interests, vectors) if fused is None else fused
    every = len(text) == len(lexical)  # (every interest has words: `text` is every row, in order)
    dense = None
    if len(consts):
        ours = lexical if every else lexical[text]

        def finish(rows: slice, block: np.ndarray) -> None:  # + constant + weight × max(lexical, LEXICAL_FLOOR)
            block += consts[rows, None]
            words = np.maximum(ours[rows], LEXICAL_FLOOR)  # (rows past the words' are the libraries': none here)
            words *= weights[rows, None]
            block[:len(words)] += words

        papers = pool.product_codes() if columns is None else pool.dense_codes(columns)
        dense = exact_dot(found, papers, then=finish, product=product)
        if library:
            dense[len(text):] += library_words(pool, index, [vectors[n] for n in library], columns)
        if every and not library:  # nothing else to combine
            return dense
    out = np.full(lexical.shape, -np.inf)
    if dense is not None:
        if text:
            out[text] = dense[:len(text)]
        if library:
            out[library] = np.maximum(out[library], dense[len(text):])
    none = [n for n, v in enumerate(vectors) if v.text is None and v.library is None]
    if none:  # authors alone, or a library the store cannot read yet: words (if any) decide
        out[none] = lexical[none]
    return out


def library_words(pool: Pool, index: Index, vectors: Sequence[InterestVectors], columns: np.ndarray | None,
                  ) -> np.ndarray:
    """The words' share of each library's fusion: LIBRARY_FUSION's words coefficient × `library_words_feature`."""
    found = library_words_feature(pool, index, vectors, columns)
    found *= LIBRARY_FUSION[3]
    return found


def library_words_feature(pool: Pool, index: Index, vectors: Sequence[InterestVectors], columns: np.ndarray | None,
                          ) -> np.ndarray:
    """The library's words as a feature of its fusion (rows: these interests' libraries, in order) on the pool's
    papers, `columns` of them, or each row its own (`columns` two-dimensional): max(W, LEXICAL_FLOOR), W being the
    words' calibration of a paper's score on the library papers' BM25F centroid read in the library's own unit,
    what its papers themselves score on it on average. So a paper as close to the library's words as its own papers
    are means the same whether the library is a broad field or five papers on one question. Each distinct library
    is scored on the whole pool once a run, and only its scores and its unit are kept (a centroid of a library's
    papers holds thousands of terms: kept for 2,000 libraries, they held 200 MB)."""
    entries: dict[str, tuple[Unit, float]] = {}
    for v in vectors:
        if v.library_words is not None and "library-words:" + v.library_words.key not in entries:
            key = "library-words:" + v.library_words.key
            own = index.memo.get(key)
            if own is not None and index.scored(key):  # its scores are in the index's table: the key finds them
                entries[key] = (Unit(key, np.zeros(0, dtype=np.int64), np.zeros(0)), own)
            else:
                cols, weights, own = v.library_words.terms.centroid_and_score(index.corpus, index.title_weight)
                index.memo[key] = own
                entries[key] = (Unit(key, cols, weights), own)
    found = [entries["library-words:" + v.library_words.key] if v.library_words is not None else None
             for v in vectors]
    units = [f[0] if f is not None else None for f in found]
    width = len(pool.papers) if columns is None else columns.shape[-1]
    raw = np.zeros((len(vectors), width))
    scored = [n for n, u in enumerate(units) if u is not None]
    if scored:
        rows = index.unit_rows([units[n] for n in scored])  # type: ignore[misc]
        table = index.unit_scores[rows]  # (read after: scoring new units may grow the table)
        raw[scored] = table if columns is None else table[:, columns] if columns.ndim == 1 else np.take_along_axis(
            table, columns[scored], axis=1)
    refs = np.array([f[1] if f is not None else 0.0 for f in found])
    logits = calibrate(raw, np.where(refs > 0, refs, 1.0)[:, None])
    return np.maximum(logits, LEXICAL_FLOOR, out=logits)


def dense_parts(pool: Pool, index: Index, interests: Sequence[Interest], vectors: Sequence[InterestVectors],
                lexical: np.ndarray | None, columns: np.ndarray) -> DenseParts:
    """The text model's z-scores of the interests on these papers (`columns` of the pool; `lexical`: the interests'
    words' calibrated log-odds on them, to tell where the library's fusion beats the words': read only for an
    interest with a library, and None may stand for it when no interest has one)."""
    shape = (len(interests), len(columns))
    parts = DenseParts(np.zeros(shape), np.zeros(shape), np.zeros(shape), np.zeros(shape, dtype=bool))
    unit = pool.dense_codes(columns)
    for n, v in enumerate(vectors):
        if v.text is not None:
            parts.query[n], parts.model[n], _ = v.text.z_scores(unit)
        if v.library is not None:
            words = np.full(len(columns), -np.inf)
            if v.text is not None:
                if lexical is None:
                    raise ValueError("dense_parts: an interest with a library needs its words' log-odds")
                a, q, m, w = FUSION[style(interests[n])]
                words = a + q * parts.query[n] + m * parts.model[n] + w * np.maximum(lexical[n], LEXICAL_FLOOR)
            _, model, parts.neighbours[n] = v.library.z_scores(unit)
            a, m, k, _ = LIBRARY_FUSION
            own = library_words(pool, index, [v], columns)[0]
            decides = a + m * model + k * parts.neighbours[n] + own >= words
            parts.model[n] = np.where(decides, model, parts.model[n])
            parts.library[n] = decides
    return parts


def followed(pool: Pool, interests: Sequence[Interest], logits: np.ndarray,
             columns: np.ndarray | None = None) -> np.ndarray:
    """The log-odds with every paper by an author an interest follows raised to AUTHOR_LOGIT (in place)."""
    for n, interest in enumerate(interests):
        if interest.authors:
            found = pool.by_authors(interest.authors)
            if columns is not None:
                found = found[columns]
            np.maximum(logits[n], np.where(found, AUTHOR_LOGIT, -np.inf), out=logits[n])
    return logits


def blend(lexical: np.ndarray, model: np.ndarray, share: float | np.ndarray,
          out: np.ndarray | None = None, extra: np.ndarray | None = None) -> np.ndarray:
    """The log-odds of relevance with the learned model's in: lexical + s × (model − min(lexical, MODEL_A)) + extra.

    Where the interests found a paper (log-odds above MODEL_A, the model's value for a typical paper)
    the model adds its evidence to theirs, so clicks sharpen an interest and never dilute what the
    interests are sure of; where they found little or nothing, the model's log-odds take the share s of
    the blend, so papers like the liked ones come in that no interest names. `extra`: the model's Rocchio
    term (`learn.FeedbackModel.rocchio`). With `out` (which may be `model`), the same operations write there.
    """
    if out is None:
        found = lexical + share * (model - np.minimum(lexical, MODEL_A))
        return found if extra is None else found + extra  # type: ignore[no-any-return]
    np.subtract(model, np.minimum(lexical, MODEL_A), out=out)
    np.multiply(share, out, out=out)
    np.add(lexical, out, out=out)
    if extra is not None:
        np.add(out, extra, out=out)
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

    `logits` are each interest's calibrated log-odds (its weight in); the paper's relevance is the best
    interest's, blended with the learned model's when there is one.
    """

    papers: np.ndarray  # pool indices of the columns, ascending
    interests: Sequence[CompiledInterest]
    units: Sequence[float]  # each interest's unit (`profile.reference`)
    lexical: np.ndarray  # raw BM25F scores, interests × papers
    logits: np.ndarray  # interests × papers
    settings: SelectSettings
    dense: DenseParts | None = None  # the text model's features, interests × papers
    model_logit: np.ndarray | None = None  # the learned model's log-odds
    share: float = 0.0  # the learned model's share of the relevance
    rocchio: np.ndarray | None = None  # the learned model's Rocchio term (added to the log-odds)
    liked: tuple[Paper, ...] = ()
    vectors: Sequence[InterestVectors] = ()  # per interest, its profiles in the text model's space (or none)
    # (best, lexical_logit, relevance, lexical_relevance) when the caller has them: a batch works them out
    # for all its subscribers at once, with the same arithmetic as below
    derived: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    # `dense` left for later, an interest's row at a time (`text_row`): a digest reads the text model's features for
    # its picks' best interests where no word of theirs explains a pick; worked out for every interest and candidate
    # of every reader they cost a 10,000-reader send about 1.4 s of process time (with their words' calibration)
    dense_of: Callable[[int], DenseParts] | None = field(default=None, repr=False)
    _rows: dict[int, DenseParts] = field(default_factory=dict, init=False, repr=False)
    best: np.ndarray = field(init=False)  # the interest each paper matches best
    lexical_logit: np.ndarray = field(init=False)
    relevance: np.ndarray = field(init=False)
    lexical_relevance: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        if self.derived is not None:
            self.best, self.lexical_logit, self.relevance, self.lexical_relevance = self.derived
            return
        self.best = (section_keys(self.logits, self.lexical, self.units).argmax(axis=0) if len(self.logits) > 1
                     else np.zeros(len(self.papers), np.int64))
        self.lexical_logit = self.logits.max(axis=0)
        logit = self.lexical_logit
        if self.model_logit is not None:
            logit = blend(logit, self.model_logit, self.share, extra=self.rocchio)
        self.relevance = sigmoid(logit)
        self.lexical_relevance = sigmoid(self.lexical_logit)

    @property
    def has_text_parts(self) -> bool:
        """Whether the text model's features are there, worked out or left for later."""
        return self.dense is not None or self.dense_of is not None

    def text_row(self, n: int) -> DenseParts | None:
        """The text model's features of interest n on these papers (`dense`'s row n, each array one-dimensional),
        worked out on first use when the caller left them for later (`dense_of`)."""
        if self.dense is not None:
            d = self.dense
            return DenseParts(d.query[n], d.model[n], d.neighbours[n], d.library[n])
        if self.dense_of is None:
            return None
        found = self._rows.get(n)
        if found is None:
            found = self._rows[n] = self.dense_of(n)
        return found

    def relevance_lift(self, j: int) -> float:
        """How much the learned model raised the j-th paper's log-odds over the interests' (0 without one)."""
        if self.model_logit is None:
            return 0.0
        lexical = self.lexical_logit[j:j + 1]
        extra = self.rocchio[j:j + 1] if self.rocchio is not None else None
        return float(blend(lexical, self.model_logit[j:j + 1], self.share, extra=extra)[0] - lexical[0])

    def raw(self, n: int) -> np.ndarray:
        """The n-th interest's raw lexical score (BM25 units) of every paper."""
        return self.lexical[n]

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


def section_keys(logits: np.ndarray, raw: np.ndarray, units: Sequence[float] | np.ndarray,
                 words: np.ndarray | None = None) -> np.ndarray:
    """What decides a paper's section among its subscriber's interests (interests × papers): its log-odds, those
    above SECTION_SURE counting as equally sure, then the interest whose words match it best (`words`: the raw
    scores' `calibrate` on `units`, when the caller has it)."""
    if words is None:
        words = calibrate(raw, np.asarray(units, dtype=np.float64)[:, None])
    keys = np.maximum(words, LEXICAL_FLOOR)
    keys *= SECTION_WORDS  # min(logits, SECTION_SURE) + SECTION_WORDS × max(words, LEXICAL_FLOOR), in place
    keys += np.minimum(logits, SECTION_SURE)
    return keys


def interest_logits(pool: Pool, index: Index, interests: Sequence[Interest], raw: np.ndarray, units: np.ndarray,
                    vectors: Sequence[InterestVectors] | None, columns: np.ndarray | None = None,
                    words: np.ndarray | None = None, fused: Directions | None = None,
                    product: np.ndarray | None = None) -> np.ndarray:
    """Every interest's log-odds of relevance (interests × papers): the words' calibration alone without the
    text model (`vectors` None), the fusion with it; the interest's weight in, followed authors' papers raised.
    `words`: `calibrate(raw, units[:, None])`, when the caller has it; `fused`: `directions(interests, vectors)`
    (`product`: its codes' product with the pool's, see `fuse`)."""
    weights = np.array([i.weight for i in interests], dtype=np.float64)[:, None]
    if vectors is None:
        logits = calibrate(raw, units[:, None], weights)
    else:
        logits = fuse(calibrate(raw, units[:, None]) if words is None else words, interests, vectors, pool, index,
                      columns, fused, product)
        logits += np.log(weights)
        np.maximum(logits, NO_MATCH, out=logits)
    return followed(pool, interests, logits, columns)


def dense_vectors(pool: Pool, interests: Sequence[Interest], signals: Signals,
                  settings: SelectSettings) -> list[InterestVectors] | None:
    """The interests' profiles in the text model's space, or None when words alone rank."""
    if not settings.text_model or pool.dense is None:
        return None
    return pool.dense.interests(interests, lambda i: seed_papers(i, signals.seeds))  # type: ignore[attr-defined, no-any-return]


class Scores(Scored):
    """Every pool paper's calibrated relevance for one subscriber, and the interest it matches best."""

    def __init__(self, pool: Pool, subscriber: Subscriber, settings: SelectSettings, signals: Signals) -> None:
        self.pool, self.index = pool, pool.index(settings.title_weight)
        text_model = bool(settings.text_model) and pool.dense is not None
        compiled = [self._compiled(pool, settings, i, signals, text_model) for i in subscriber.interests]
        interests = [c for c, _, _ in compiled]
        lexical = np.vstack([v for _, v, _ in compiled])
        units = [u for _, _, u in compiled]
        vectors = dense_vectors(pool, subscriber.interests, signals, settings)
        self.model = feedback_model(pool, subscriber, signals, settings)
        share, model_logit, rocchio = 0.0, None, None
        if self.model is not None and pool.dense is not None:
            share = self.model.clicks / (self.model.clicks + settings.feedback_clicks)
            model_logit = self.model.relevance_logits(pool.product_codes())
            rocchio = self.model.rocchio(pool.product_codes())
        logits = interest_logits(pool, self.index, subscriber.interests, lexical, np.array(units), vectors)
        dense = None
        if vectors is not None:
            dense = dense_parts(pool, self.index, subscriber.interests, vectors,
                                calibrate(lexical, np.array(units)[:, None]), np.arange(len(pool)))
        super().__init__(np.arange(len(pool)), interests, units, lexical, logits, settings, dense, model_logit,
                         share, rocchio, signals.liked, vectors or ())

    def interest_logit(self, n: int) -> np.ndarray:
        """Calibrated log-odds that each paper is on the n-th interest's topic (its weight in)."""
        return self.logits[n]

    @staticmethod
    def _compiled(pool: Pool, settings: SelectSettings, interest: Interest, signals: Signals,
                  text_model: bool) -> tuple[CompiledInterest, np.ndarray, float]:
        """The interest's query parts, its raw lexical scores and its unit, shared by interests with the same words."""
        index = pool.index(settings.title_weight)
        seeds = tuple(signals.seeds.get(ref) for ref in interest.seed_papers) if not text_model else ()
        key = ("interest", frozenset(interest.keywords), interest.description, seeds,
               settings.description_weight, settings.seed_weight, text_model)  # keyword order does not matter
        found = index.memo.get(key)
        if found is None:
            compiled = compile_interest(interest, index, signals.seeds, description_weight=settings.description_weight,
                                        seed_weight=settings.seed_weight, with_seeds=not text_model)
            found = (replace(compiled, key=key), lexical_scores(index, compiled), reference(compiled.parts,
                                                                                            index.corpus.idf()))
            index.remember(key, found, vectors=1)
        compiled, raw, unit = found
        return CompiledInterest(interest, compiled.parts, compiled.seed_papers,
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
    """The learned model the signals carry; without one, learned here from the clicks and the library papers."""
    if signals.model is not None or not (signals.liked or signals.disliked) or pool.dense is None:
        return signals.model
    seeds = [p for i in subscriber.interests for p in seed_papers(i, signals.seeds)]
    key = ("model", subscriber.email, tuple(p.key for p in signals.liked), tuple(p.key for p in signals.disliked),
           tuple(p.key for p in seeds))
    index = pool.index(settings.title_weight)
    if key not in index.memo:
        vectors = pool.dense_papers()
        assert vectors is not None
        picked = np.random.default_rng(0).permutation(len(vectors))[:NEGATIVES]  # the pool stands for the store
        negatives = without(vectors[np.sort(picked)], pool.dense, signals.liked, seeds)
        index.memo[key] = fit(signals.liked, signals.disliked, seeds, pool.dense, negatives)
    return index.memo[key]  # type: ignore[no-any-return]
