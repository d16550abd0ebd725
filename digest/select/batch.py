"""Ranking one pool for many subscribers at once, as sparse matrix products.

    raw      = A · (K · Wᵀ)                                  interests × papers, BM25 units
    logit    = max over each subscriber's interests of calibrate(raw, unit, weight)
    logit'   = (1 - s) × logit + s × (W_unit · M + b)         for subscribers with a learned model
    score    = sigmoid(logit' + log boost), blocked and below-floor papers at -inf

W is the pool's BM25F matrix (papers × terms), K holds every distinct keyword, description and seed
centroid as a row (units × terms: the pool's `Index` scores each unit once and keeps K · Wᵀ for the
whole run), A maps interests to their units with their coefficients (interests × units), W_unit is W
with unit-length rows and M holds the learned models' weights (terms × subscribers). The rest is done
a chunk of subscribers at a time so memory stays bounded, and the best `k` papers per subscriber are
found with `argpartition` over the whole chunk. No Python loop runs per (subscriber, paper) pair.

`rank_many` returns each subscriber's top k (the scale benchmark). `candidates` is the candidate
generation of a send run (`select_many`): each subscriber's scores (`Scored`) on their best few dozen
eligible papers, interest by interest in float64 as `Scores` computes them for the whole pool, so
that diversity, sections and reasons, worked out per digest on those candidates only, give the same
digest as ranking the whole pool for that subscriber alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date

import numpy as np
import scipy.sparse as sp

from digest.memory import held
from digest.models import Interest, Paper, Subscriber
from digest.select import integer
from digest.select.dense import InterestVectors
from digest.select.learn import FeedbackModel, logits_of
from digest.select.pool import Index, Pool, Unit
from digest.select.profile import (
    CompiledInterest,
    Part,
    Signals,
    compile_interest,
    keyword_part,
    mean_reference,
    seed_papers,
    unit_reference,
)
from digest.select.rank import blocked_indices, boost, candidate_window, old_papers
from digest.select.scores import (
    NO_MATCH,
    ONE_ORDER,
    DenseParts,
    Directions,
    Scored,
    SelectSettings,
    blend,
    calibrate,
    calibration,
    dense_parts,
    directions,
    feedback_model,
    interest_logits,
    section_keys,
    sigmoid,
)
from digest.select.vectors import codes, exact_dot

TIE_MARGIN = 1e-3  # log-odds: candidates this close to the k-th, or to the floor, are kept too (rounding)
DETAIL_CHUNK = 1000  # subscribers per chunk when every interest's scores are kept (stored matches' `candidates`)
# `candidates` takes as many subscribers a chunk as keep each interests × papers array (float64) of the chunk under
# this many floats (4 MB): a batch of 100 readers at a week's window held ten 10 MB arrays at once, what set a
# send's peak memory (539 → 483 MiB at 7,000 papers, the same CPU); at 1,000 papers a chunk is the whole batch.
DETAIL_FLOATS = 500_000
# Subscribers per chunk of `rank_many`: a chunk's arrays (subscribers × papers in float64, 16 MB at 1,000
# papers) stay below glibc's largest mmap threshold (32 MB), so they are reused from the heap instead of
# being mapped and faulted in afresh every chunk. Chunks only split the subscribers: each row is computed alone.
RANK_CHUNK = 2000


@dataclass(frozen=True)
class TopK:
    """Per subscriber (rows), the best papers' pool indices, their scores, and whether they pass the floor."""

    papers: np.ndarray
    scores: np.ndarray
    passes: np.ndarray


class _Plan:
    """Every interest of the subscribers compiled, its units' rows in the index, its unit and weight.

    An interest of keywords alone (most are) is not compiled here: each distinct keyword's unit, row and
    reference are looked up once per run, and its `CompiledInterest` is built only when asked for
    (`compiled`, what candidates and dense similarity read), the same as `compile_interest` makes it.
    """

    def __init__(self, subscribers: Sequence[Subscriber], settings: SelectSettings, index: Index,
                 signals: Mapping[str, Signals] | None = None, text_model: bool = False, local: bool = False) -> None:
        """`local`: the map's columns number the run's distinct units (`units`), not rows of the index's unit table,
        and no unit is scored on the whole pool (`stored` scores them on the papers it needs: `unit_scores_on`)."""
        self.interests: list[Interest] = []
        self.seeds: list[Mapping[str, Paper]] = []  # each interest's subscriber's seed papers
        self._compiled: dict[int, CompiledInterest] = {}  # interests with a description or seed papers
        self.first_interest = np.zeros(len(subscribers) + 1, dtype=np.int64)
        units: dict[str, int] = {}  # unit key → its number among this run's distinct units
        distinct: list[Unit] = []
        keywords: dict[str, tuple[int, float, float]] = {}  # keyword → its unit's number, coefficient, reference
        parts: list[tuple[int, float, float]] = []  # every interest's parts in order, as the keywords' above
        indptr, refs, weights = [0], [], []
        idf = index.corpus.idf()
        no_seeds: Mapping[str, Paper] = {}
        for s, subscriber in enumerate(subscribers):
            self.first_interest[s] = len(self.interests)
            seeds = signals[subscriber.email].seeds if signals and subscriber.email in signals else no_seeds
            for interest in subscriber.interests:
                if interest.description or (interest.seed_papers and not text_model):
                    compiled = compile_interest(interest, index, seeds, description_weight=settings.description_weight,
                                                seed_weight=settings.seed_weight, with_seeds=not text_model)
                    self._compiled[len(self.interests)] = compiled
                    # the same arithmetic as `profile.reference`, each unit's reference computed once per pool
                    found = [(_number(units, distinct, part.unit), part.coef, part.coef * _reference(index, part, idf))
                             for part in compiled.parts]
                else:  # keywords alone: `compile_interest` would make one keyword part each
                    try:
                        found = [keywords[k] for k in interest.keywords]
                    except KeyError:
                        found = [_keyword(keywords, k, units, distinct, index, idf) for k in interest.keywords]
                parts += found
                self.interests.append(interest)
                self.seeds.append(seeds)
                indptr.append(len(parts))
                refs.append(mean_reference([ref for _, _, ref in found]))
                weights.append(interest.weight)
        self.first_interest[len(subscribers)] = len(self.interests)
        self.units = distinct
        numbers = np.array([n for n, _, _ in parts], dtype=np.int64)
        rows = numbers if local else index.unit_rows(distinct)[numbers]
        # interests × units, each interest's parts in their order (not summed or sorted): the products
        # below add an interest's parts in the order `scores.lexical_scores` does
        self.map = sp.csr_matrix((np.array([coef for _, coef, _ in parts], dtype=np.float64), rows, np.array(indptr)),
                                 shape=(len(self.interests), len(distinct) if local else len(index.unit_scores)))
        self.refs = np.array(refs, dtype=np.float64)
        self.weights = np.array(weights, dtype=np.float64)
        self.authors = any(i.authors for i in self.interests)

    def unit_scores_on(self, index: Index, units: np.ndarray, papers: np.ndarray) -> np.ndarray:
        """These of the run's units' (local numbers) scores of these papers (units × papers), each value as the
        index's unit table has it (the same sums in the same order)."""
        return index.scores_on([self.units[u] for u in units.tolist()], papers)

    def vectors(self, pool: Pool, lo: int, hi: int) -> list[InterestVectors]:
        """Interests lo..hi's profiles in the text model's space."""
        at = {id(interest): n for n, interest in enumerate(self.interests[lo:hi], lo)}

        def seeds(interest: Interest) -> tuple[Paper, ...]:
            return seed_papers(interest, self.seeds[at[id(interest)]])

        return pool.dense.interests(self.interests[lo:hi], seeds)  # type: ignore[union-attr, no-any-return]

    def compiled(self, lo: int, hi: int) -> list[CompiledInterest]:
        """Interests lo..hi compiled (as `compile_interest` compiles them)."""
        return [self._compiled[n] if n in self._compiled else
                CompiledInterest(self.interests[n], tuple(keyword_part(k) for k in self.interests[n].keywords),
                                 ()) for n in range(lo, hi)]

    def raw(self, index: Index, lo: int, hi: int, factor: np.ndarray | None = None) -> np.ndarray:
        """Interests lo..hi's raw scores of every paper (interests × papers), each scaled by `factor`."""
        rows = self.map[lo:hi] if factor is None else sp.diags(factor) @ self.map[lo:hi]
        return np.asarray(rows @ index.unit_scores[: self.map.shape[1]])


def _keyword(keywords: dict[str, tuple[int, float, float]], keyword: str, numbers: dict[str, int], distinct: list[Unit],
             index: Index, idf: np.ndarray) -> tuple[int, float, float]:
    """A keyword's unit number, coefficient and reference (`compile_interest`'s part for it), looked up once per run."""
    found = keywords.get(keyword)
    if found is None:
        part = keyword_part(keyword)
        found = keywords[keyword] = (_number(numbers, distinct, part.unit), part.coef,
                                     part.coef * _reference(index, part, idf))
    return found


def _number(numbers: dict[str, int], distinct: list[Unit], unit: Unit) -> int:
    """The unit's number among a run's distinct units (by key), a new one for a unit not seen yet."""
    found = numbers.get(unit.key)
    if found is None:
        found = numbers[unit.key] = len(distinct)
        distinct.append(unit)
    return found


def _reference(index: Index, part: Part, idf: np.ndarray) -> float:
    key = ("reference", part.unit.key, part.kind)
    found = index.memo.get(key)
    if found is None:
        found = index.memo[key] = unit_reference(part.unit, part.kind, idf)
    return found  # type: ignore[no-any-return]


@dataclass
class _Run:
    """What every chunk of one ranking shares."""

    plan: _Plan
    pool: Pool
    index: Index
    log_boost: np.ndarray
    settings: SelectSettings
    models: list[FeedbackModel | None]
    blocked: list[np.ndarray]
    dense: bool  # the text model joins the logit
    emails: list[str]
    old: np.ndarray | None = None  # the pool's old papers, when a digest takes a quota of them (`rank.old_papers`)
    ahead: _Ahead | None = field(default=None, repr=False)  # the chunks prepared ahead (`reading_ahead`)

    def prepared(self, start: int, end: int) -> _Prepared:
        """Subscribers start..end's `_Prepared` (made ahead when the run is `reading_ahead`)."""
        if self.ahead is not None:
            return self.ahead.get(start, end)
        return _prepare(self, start, end)


@dataclass(frozen=True)
class _Models:
    """A chunk's learned models: which of its subscribers (`_chunk_rows`' rows) have one, their shares, and their
    log-odds and Rocchio terms (those × papers)."""

    rows: list[int]
    share: np.ndarray
    logits: np.ndarray
    rocchio: np.ndarray


@dataclass(frozen=True)
class _Prepared:
    """What a chunk of subscribers needs before its interests are fused: the interests' raw scores of every paper,
    with the text model their profiles, their words' calibrated log-odds and fused directions (`scores.directions`),
    and the subscribers' learned models' products."""

    raw: np.ndarray
    vectors: list[InterestVectors] | None = None
    words: np.ndarray | None = None
    fused: Directions | None = None
    models: _Models | None = None
    product: np.ndarray | None = None  # the directions' codes × the pool's (integers), when made with other chunks'


# `candidates` multiplies the fused directions of consecutive chunks' interests, up to this many, with the pool's
# codes at once: a chunk of a week's window holds about 70 interests, and a product that short costs 79 µs a row
# against 63 at 180 (7,000 papers, one thread: OpenBLAS packs the pool's codes for every product). At most 256 ×
# 2 rows (text and library) of float32 as wide as the pool: 14 MB at 7,000 papers.
PRODUCT_INTERESTS = 256


def _prepare(run: _Run, start: int, end: int,
             made: tuple[list[InterestVectors], Directions, np.ndarray] | None = None) -> _Prepared:
    """Subscribers start..end's `_Prepared`; `made`: their interests' profiles, directions and product, made with
    other chunks' (`_made_together`)."""
    plan = run.plan
    lo, hi, _, _, rows = _chunk_rows(run, start, end)
    raw, models = plan.raw(run.index, lo, hi), _models(run, rows)
    if not run.dense:
        return _Prepared(raw, models=models)
    vectors, fused, product = made if made is not None else (*_profiles(run, lo, hi), None)
    return _Prepared(raw, vectors, calibrate(raw, plan.refs[lo:hi][:, None]), fused, models, product)


def _profiles(run: _Run, lo: int, hi: int) -> tuple[list[InterestVectors], Directions]:
    """Interests lo..hi's profiles in the text model's space and their fused directions."""
    vectors = run.plan.vectors(run.pool, lo, hi)
    return vectors, directions(run.plan.interests[lo:hi], vectors)


def _product_groups(run: _Run, spans: Sequence[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Consecutive chunks (subscribers start..end) whose interests, PRODUCT_INTERESTS at most, are multiplied at
    once."""
    groups: list[list[tuple[int, int]]] = []
    size = PRODUCT_INTERESTS
    for start, end in spans:
        count = int(run.plan.first_interest[end] - run.plan.first_interest[start])
        if not groups or size + count > PRODUCT_INTERESTS:
            groups.append([])
            size = 0
        groups[-1].append((start, end))
        size += count
    return groups


def _made_together(run: _Run, group: Sequence[tuple[int, int]],
                   ) -> dict[tuple[int, int], tuple[list[InterestVectors], Directions, np.ndarray]]:
    """Each chunk's interests' profiles and fused directions (`_profiles`, chunk by chunk in order, as `_prepare`),
    and their codes' products with the pool's made in one product (`integer.product`): the same integers, row by
    row."""
    if not run.dense or len(group) < 2:
        return {}
    made = {}
    for start, end in group:
        lo, hi = int(run.plan.first_interest[start]), int(run.plan.first_interest[end])
        if hi > lo:
            made[(start, end)] = _profiles(run, lo, hi)
    if not made:
        return {}
    rows = [fused[0][0] for _, fused in made.values()]
    product = integer.product(np.vstack(rows), run.pool.dense_held())
    bounds = np.cumsum([0] + [len(r) for r in rows]).tolist()
    return {span: (vectors, fused, product[a:b])
            for (span, (vectors, fused)), a, b in zip(made.items(), bounds[:-1], bounds[1:], strict=True)}


class _Ahead:
    """A run's chunks prepared (`_prepare`) by a thread of their own, each while the chunk before it is scored.

    Preparing a chunk is reading its interests' profiles (mostly SQLite finding their keys, 10-20 microseconds a
    key, the interpreter's lock let go meanwhile), their fused directions, the words' raw scores and calibration and
    the learned models' products; the fusion that follows is array arithmetic that lets the lock go too, so the two
    overlap on two cores. Only this thread touches the embedder while the run lasts (its memos are not shared
    between threads), and it prepares the chunks in the run's order. Each chunk is computed alone, so its values are
    those it gets prepared where it is scored."""

    def __init__(self, run: _Run, chunks: Sequence[tuple[int, int]], executor: ThreadPoolExecutor) -> None:
        self.run = run
        self.executor = executor
        self.following = dict(zip(chunks, chunks[1:], strict=False))  # each chunk → the next one with interests
        self.pending: dict[tuple[int, int], Future[_Prepared]] = {}

    def _start(self, chunk: tuple[int, int]) -> None:
        if chunk not in self.pending:
            self.pending[chunk] = self.executor.submit(_prepare, self.run, *chunk)

    def get(self, start: int, end: int) -> _Prepared:
        self._start((start, end))  # (first, if not asked for yet: the thread works in the order asked)
        following = self.following.get((start, end))
        if following is not None:
            self._start(following)
        return self.pending.pop((start, end)).result()


@contextmanager
def reading_ahead(run: _Run, starts: Sequence[int], ends: Sequence[int]) -> Iterator[None]:
    """Within it, the run's chunks of subscribers starts[n]..ends[n] are prepared a chunk ahead (`_Ahead`), when
    there is more than one chunk with interests and the text model is on (and its profiles' store, if any, is the
    same database on every thread).

    `rank_many` prepares ahead; a send's `candidates` does not. A send's batches of 100 readers are one chunk each on
    its first days and a few small chunks at a week's window, and there preparing ahead cost more than it gave (a
    week of 10,000 readers, one worker: days 5-7 3.52-3.65 against 2.88-3.30 CPU ms a digest, and peak memory 508-517
    against 430-458 MiB; probably the second thread's arrays, from an allocator arena of its own: not checked)."""
    first = run.plan.first_interest
    chunks = [(a, b) for a, b in zip(starts, ends, strict=True) if first[b] > first[a]]
    store = getattr(run.pool.dense, "store", None)
    if not run.dense or len(chunks) < 2 or not getattr(store, "shared_by_threads", True):
        yield
        return
    run.pool.dense_codes()  # (made here if not yet: both threads read them, and only this one calls the embedder)
    with ThreadPoolExecutor(1, thread_name_prefix="profiles") as executor, _one_core_fewer():
        run.ahead = ahead = _Ahead(run, chunks, executor)
        try:
            yield
        finally:  # (a chunk that failed leaves the next one's: not waited for if not started)
            run.ahead = None
            for future in ahead.pending.values():
                future.cancel()


@contextmanager
def _one_core_fewer() -> Iterator[None]:
    """BLAS keeps to one core fewer than the process may use (at least one thread, never more than it had), the
    preparing thread taking that core: at 100,000 readers on two cores, 14.9 s with two BLAS threads against 12.7
    with one (medians of three, interleaved; docs/benchmarks.md). A send's workers run one BLAS thread already."""
    from threadpoolctl import threadpool_info, threadpool_limits

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    have = min((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)
    with threadpool_limits(limits=max(1, min(have, cores - 1)), user_api="blas"):
        yield


def _run(pool: Pool, subscribers: Sequence[Subscriber], day: date, settings: SelectSettings,
         signals: Mapping[str, Signals] | None, local: bool = False) -> _Run:
    index = pool.index(settings.title_weight)
    dense = bool(settings.text_model) and pool.dense is not None
    plan = _Plan(subscribers, settings, index, signals, dense, local)
    models: list[FeedbackModel | None] = [None] * len(subscribers)
    blocked: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * len(subscribers)
    if signals is not None:
        for n, sub in enumerate(subscribers):
            if sub.interests and sub.email in signals:
                models[n] = feedback_model(pool, sub, signals[sub.email], settings)
                blocked[n] = blocked_indices(pool, sub, signals[sub.email])
    return _Run(plan, pool, index, np.log(boost(pool, day, settings)), settings, models, blocked, dense,
                [s.email for s in subscribers], old_papers(pool, day, settings))


@held()
def rank_many(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings,
              k: int = 10, chunk: int = RANK_CHUNK, signals: Mapping[str, Signals] | None = None) -> TopK:
    """The best `k` papers of the pool for every subscriber with interests, by matrix products.

    With `signals`, seed papers and learned models count, and received, disliked and excluded papers
    are left out, as `rank` does.
    """
    run = _run(pool, subscribers, day, settings, signals)
    k = min(k, len(pool))
    out = TopK(np.zeros((len(subscribers), k), dtype=np.int64), np.zeros((len(subscribers), k), np.float32),
               np.zeros((len(subscribers), k), dtype=bool))
    starts = range(0, len(subscribers), chunk)
    ends = [min(start + chunk, len(subscribers)) for start in starts]
    with reading_ahead(run, starts, ends):
        for start, end in zip(starts, ends, strict=True):
            _top_chunk(run, start, end, out)
    return out


@held()
def candidates(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings, k: int,
               signals: Mapping[str, Signals], chunk: int | None = None) -> list[Scored | None]:
    """Per subscriber, their scores on their best `k` eligible papers (None without interests).

    Eligible: not blocked, relevance at least `min_relevance`. Papers within TIE_MARGIN of the k-th
    best, or of the floor, are kept too, so that rounding cannot leave out a paper `rank` would pick.
    `chunk`: subscribers scored together (by default as many as DETAIL_FLOATS allows; each row is computed alone).
    """
    run = _run(pool, subscribers, day, settings, signals)
    if chunk is None:
        per_reader = max(sum(len(s.interests) for s in subscribers) / max(len(subscribers), 1), 1.0)
        chunk = max(8, int(DETAIL_FLOATS / (per_reader * max(len(pool), 1))))
    out: list[Scored | None] = [None] * len(subscribers)
    spans = [(start, min(start + chunk, len(subscribers))) for start in range(0, len(subscribers), chunk)]
    for group in _product_groups(run, spans):  # (not `reading_ahead`: see there)
        made = _made_together(run, group)
        for start, end in group:
            _candidate_chunk(run, start, end, min(k, len(pool)), signals, out, made.pop((start, end), None))
    return out


def _model_logits(pool: Pool, models: Sequence[FeedbackModel]) -> np.ndarray:
    """The models' log-odds of relevance for every paper of the pool (models × papers), as one exact matrix product
    (each the same as `FeedbackModel.relevance_logits` alone)."""
    weights = codes(np.vstack([m.weights for m in models]))  # (row by row: each model's `codes` alone)
    return logits_of(exact_dot(weights, pool.product_codes()), np.array([m.intercept for m in models]),
                     np.array([m.mean for m in models]), np.array([m.spread for m in models]))


def _rocchio(pool: Pool, models: Sequence[FeedbackModel]) -> np.ndarray:
    """The models' Rocchio terms for every paper of the pool (models × papers; each as `FeedbackModel.rocchio`)."""
    zero = np.zeros(pool.dense_codes()[0].shape[1])
    rows = codes(np.vstack([m.direction if m.direction is not None else zero for m in models]))  # (row by row)
    return exact_dot(pool.product_codes(), rows).T  # type: ignore[no-any-return]


def _best(values: np.ndarray, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each subscriber's best value over their interests' rows (first row, count): `_best_interest`'s values.

    The subscribers with most interests first, so that those with a j-th interest are a prefix of the rows and each
    slot is one `np.maximum` in place: the values `_best_interest` keeps (log-odds are never NaN), but for the sign
    of a zero, which nothing after can tell (it is added to, compared, or put through the sigmoid). 15 times faster
    at a week's window than gathering and scattering the subscribers that have each slot."""
    order = np.argsort(-counts, kind="stable")
    start, count = first[order], counts[order]
    best = values[start]
    for j in range(1, int(count.max(initial=1))):
        more = int(np.count_nonzero(count > j))
        np.maximum(best[:more], values[start[:more] + j], out=best[:more])
    out = np.empty_like(best)
    out[order] = best
    return out


def _best_interest(values: np.ndarray, first: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each subscriber's best value over their interests' rows (first row, count), and which interest gives it
    (the first on ties, as argmax): an interest slot at a time (np.maximum.reduceat is several times slower)."""
    best = values[first]
    which = np.zeros(best.shape, dtype=np.int64)
    for j in range(1, int(counts.max(initial=1))):
        more = np.flatnonzero(counts > j)
        candidate = values[first[more] + j]
        if len(more) == len(first):  # every subscriber has a j-th interest: in place
            better = candidate > best
            np.copyto(best, candidate, where=better)
            which[better] = j
            continue
        current, chosen = best[more], which[more]
        better = candidate > current
        np.copyto(current, candidate, where=better)
        chosen[better] = j
        best[more], which[more] = current, chosen
    return best, which


def _fast_best(run: _Run, lo: int, hi: int, first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each subscriber's best calibrated log-odds over their interests, without dense similarity (float32).

    log is monotone: each interest's raw scores are scaled by weight^(1/b) / unit, the best interest
    taken, and calibrated once per (subscriber, paper) instead of once per (interest, paper). The raw
    scores come an interest slot at a time, subscribers × papers (the subscribers with most interests
    first, so that those with a j-th interest are the first rows), each row computed as the product
    for all interests computes it; the best is taken in float64 (scores are finite: np.maximum is
    `where(a > b, a, b)`) and rounded to float32 once (rounding is monotone: the same as taking the
    best after rounding each).
    """
    a, b = calibration(False)
    factor = np.exp(np.log(run.plan.weights[lo:hi]) / b) / run.plan.refs[lo:hi]
    scaled = sp.diags(factor) @ run.plan.map[lo:hi]
    units = run.index.unit_scores[: run.plan.map.shape[1]]
    order = np.argsort(-counts, kind="stable")
    first, counts = first[order], counts[order]
    best = np.asarray(scaled[first] @ units)
    for j in range(1, int(counts.max(initial=1))):
        more = int(np.count_nonzero(counts > j))
        np.maximum(best[:more], np.asarray(scaled[first[:more] + j] @ units), out=best[:more])
    logit = np.empty(best.shape, dtype=np.float32)
    logit[order] = best
    with np.errstate(divide="ignore"):  # a + b × log(max(best, 0)), at least NO_MATCH, in place
        np.maximum(logit, 0.0, out=logit)
        np.log(logit, out=logit)
        np.multiply(b, logit, out=logit)
        np.add(a, logit, out=logit)
        np.maximum(logit, NO_MATCH, out=logit)
    return logit


def _interest_logits(run: _Run, lo: int, hi: int, found: _Prepared,
                     ) -> tuple[np.ndarray, np.ndarray, DenseParts | None, list[InterestVectors], np.ndarray | None]:
    """Interests lo..hi's raw scores, calibrated log-odds and text-model features (interests × papers, float64),
    computed as `Scores` computes them, their profiles (none without the text model) and, with the text model,
    their words' calibrated log-odds (what `section_keys` reads); `found`: their chunk's `_Prepared`."""
    raw, vectors = found.raw, found.vectors
    logit = interest_logits(run.pool, run.index, run.plan.interests[lo:hi], raw, run.plan.refs[lo:hi], vectors,
                            words=found.words, fused=found.fused, product=found.product)
    return raw, logit, None, vectors or [], found.words


def _models(run: _Run, rows: np.ndarray) -> _Models | None:
    """The learned models of these subscribers (rows of the run) that have one, their products with the pool."""
    found = [run.models[r] for r in rows.tolist()]  # (a list indexed by numpy integers is slow)
    with_model = [n for n, m in enumerate(found) if m is not None]
    if not with_model:
        return None
    models: list[FeedbackModel] = [found[n] for n in with_model]  # type: ignore[misc]
    share = np.array([m.clicks / (m.clicks + run.settings.feedback_clicks) for m in models])
    return _Models(with_model, share, _model_logits(run.pool, models), _rocchio(run.pool, models))


def _learned(best: np.ndarray, models: _Models | None,
             keep: bool = True) -> tuple[list[int], np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Blend the learned models (`_models` of the chunk's subscribers) into the subscribers' best log-odds (in
    place); which rows have one, their shares and their models' log-odds (rows × papers; without `keep`,
    overwritten by the blend)."""
    if models is None:
        return [], np.zeros(0), (np.zeros((0, best.shape[1])), np.zeros((0, best.shape[1])))
    with_model, share, learned = models.rows, models.share, models.logits
    best[with_model] = blend(best[with_model], learned, share[:, None], out=None if keep else learned,
                             extra=models.rocchio)
    return with_model, share, (learned, models.rocchio)


def _floor(settings: SelectSettings) -> float:
    """min_relevance as log-odds."""
    level = settings.min_relevance
    if 0 < level < 1:
        return float(np.log(level) - np.log1p(-level))
    return -np.inf if level <= 0 else np.inf


def _chunk_rows(run: _Run, start: int, end: int) -> tuple[int, int, np.ndarray, np.ndarray, np.ndarray]:
    """The chunk's interests lo..hi; for each subscriber with interests, their first interest (from lo),
    how many they have, and their row."""
    first_interest = run.plan.first_interest
    lo, hi = int(first_interest[start]), int(first_interest[end])
    counts = np.diff(first_interest[start:end + 1])
    has = counts > 0  # subscribers without interests get nothing here
    return lo, hi, first_interest[start:end][has] - lo, counts[has], np.arange(start, end)[has]


def _top_chunk(run: _Run, start: int, end: int, out: TopK) -> None:
    """Score subscribers start..end and keep their top k.

    Papers are ordered by log-odds + log(boost), the same order as the boosted probability `rank`
    uses; probabilities are computed for the picks only.
    """
    lo, hi, first, counts, rows = _chunk_rows(run, start, end)
    if hi == lo:
        return
    if run.dense or run.plan.authors:
        found = run.prepared(start, end)
        best = _best(_interest_logits(run, lo, hi, found)[1], first, counts).astype(np.float32)
        models = found.models
    else:
        best, models = _fast_best(run, lo, hi, first, counts), _models(run, rows)
    _learned(best, models, keep=False)
    key = best + run.log_boost.astype(np.float32)[None, :]
    for n, r in enumerate(rows):
        if len(run.blocked[r]):
            key[n, run.blocked[r]] = -np.inf
    k = out.papers.shape[1]
    top = np.argpartition(-key, k - 1, axis=1)[:, :k]
    order = np.take_along_axis(key, top, axis=1).argsort(axis=1, kind="stable")[:, ::-1]
    picked = np.take_along_axis(top, order, axis=1)
    out.papers[rows] = picked
    out.scores[rows] = 1.0 / (1.0 + np.exp(-np.take_along_axis(key, picked, axis=1)))
    out.passes[rows] = np.take_along_axis(best, picked, axis=1) >= _floor(run.settings)


def _candidate_chunk(run: _Run, start: int, end: int, k: int, signals: Mapping[str, Signals],
                     out: list[Scored | None],
                     made: tuple[list[InterestVectors], Directions, np.ndarray] | None = None) -> None:
    """Subscribers start..end's candidates, with every interest's scores on them (`made`: see `_prepare`)."""
    lo, hi, first, counts, rows = _chunk_rows(run, start, end)
    if hi == lo:
        return
    found = run.prepared(start, end) if made is None else _prepare(run, start, end, made)
    raw, logit, parts, vectors, words = _interest_logits(run, lo, hi, found)
    models = found.models
    del found, words  # (`_sections` works out the few it needs again)
    best = _best(logit, first, counts)
    lexical = best.copy() if models is not None else best  # (`_learned` blends into `best` the rows with a model)
    with_model, share, learned = _learned(best, models)
    key = best + run.log_boost[None, :]
    floor = _floor(run.settings)
    # The k-th best is taken among papers surely above the floor; papers near it stay candidates, and
    # the digest applies the floor exactly (on the relevance, as `rank` does).
    sure = np.where(best >= floor + TIE_MARGIN, key, -np.inf)
    near = np.where(best >= floor - TIE_MARGIN, key, -np.inf)
    for n, r in enumerate(rows.tolist()):
        if len(run.blocked[r]):
            sure[n, run.blocked[r]] = -np.inf
            near[n, run.blocked[r]] = -np.inf
    kept = _top_split(sure, near, k, run.old, run.settings)
    shared = _interest_tops(run, logit, first, counts, rows, models, k)
    if shared is not None:
        kept |= shared
    which = _sections(kept, raw, logit, run.plan.refs[lo:hi], first, counts)
    _scored(run, lo, rows, first, counts, kept, _Kept(raw, logit, parts, vectors, lexical, best, which, learned),
            dict(zip(with_model, share.tolist(), strict=True)), signals, out)


def _interest_tops(run: _Run, logit: np.ndarray, first: np.ndarray, counts: np.ndarray, rows: np.ndarray,
                   models: _Models | None, k: int) -> np.ndarray | None:
    """For the readers with several interests (whose places are shared among them, `shares`), the papers each of
    their interests may take: its own best k recent eligible papers by its own log-odds (the learned model blended
    in) and boost, and those within TIE_MARGIN of the k-th or the floor (subscribers × papers; None when no reader
    of the chunk has two interests, or places are not shared)."""
    if run.settings.allocation == ONE_ORDER:
        return None
    several = np.flatnonzero(counts >= 2)
    if not len(several):
        return None
    starts, sizes = first[several], counts[several]
    at = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(int(sizes.sum()))  # their interest rows
    own = logit[at]  # (a copy)
    unmatched = own <= NO_MATCH  # what the learned model alone finds is no interest's
    if models is not None:
        position = {n: m for m, n in enumerate(models.rows)}
        owner = np.repeat(several, sizes).tolist()
        for row, n in enumerate(owner):
            m = position.get(n)
            if m is not None:
                own[row] = blend(own[row], models.logits[m], models.share[m], extra=models.rocchio[m])
    own[unmatched] = -np.inf
    if run.old is not None:
        own[:, run.old] = -np.inf  # old papers have their own places ("Trending again")
    for reader, size, start in zip(several.tolist(), sizes.tolist(), (np.cumsum(sizes) - sizes).tolist(), strict=True):
        blocked = run.blocked[rows[reader]]
        if len(blocked):
            own[start:start + size, blocked] = -np.inf
    floor = _floor(run.settings)
    key = own + run.log_boost[None, :]
    sure = np.where(own >= floor + TIE_MARGIN, key, -np.inf)
    kept = _top_near(sure, np.where(own >= floor - TIE_MARGIN, key, -np.inf), k)
    out = np.zeros((len(rows), logit.shape[1]), dtype=bool)
    out[several] = np.logical_or.reduceat(kept, np.cumsum(sizes) - sizes, axis=0)
    return out


def _sections(kept: np.ndarray, raw: np.ndarray, logit: np.ndarray, refs: np.ndarray, first: np.ndarray,
              counts: np.ndarray) -> np.ndarray:
    """Which of its subscriber's interests takes each kept paper (subscribers × papers, set where `kept` is):
    `_best_interest` of `section_keys`, worked out on the kept papers only (a few dozen a subscriber, not the
    window), each key from the same values with the same operations, so the same interest (the first on ties)."""
    which = np.zeros(kept.shape, dtype=np.int64)
    row, paper = np.nonzero(kept)  # (the order boolean indexing reads them)
    start, count = first[row], counts[row]

    def keys(slot: np.ndarray, at: np.ndarray) -> np.ndarray:
        interest = start[at] + slot
        values = raw[interest, paper[at]]
        return section_keys(logit[interest, paper[at]], values, refs[interest],
                            calibrate(values, refs[interest]))  # as `_interest_logits` calibrates the words

    every = np.arange(len(row))
    best, chosen = keys(np.zeros(len(row), dtype=np.int64), every), np.zeros(len(row), dtype=np.int64)
    for j in range(1, int(count.max(initial=1))):
        more = np.flatnonzero(count > j)
        candidate = keys(np.full(len(more), j), more)
        better = candidate > best[more]
        best[more[better]], chosen[more[better]] = candidate[better], j
    which[row, paper] = chosen
    return which


def _top_split(sure: np.ndarray, near: np.ndarray, k: int, old: np.ndarray | None,
               settings: SelectSettings) -> np.ndarray:
    """`_top_near` of each kind apart, recent papers (k) and old ones (`candidate_window(trending_again)`), when a
    digest takes a quota of old papers: old papers cannot crowd recent ones out of a digest's candidates. May
    overwrite `sure` and `near`.

    A window with no old paper (the usual day) is one pass. With a few old papers, the recent papers' pass runs on
    the whole rows with the old columns at -inf rather than on a copy of the recent columns (rows × window, twice):
    it keeps the same papers (a -inf is never among the k best or near them, and a row with fewer than k sure
    papers keeps every near one either way). Measured on 39 rows × 7,000 papers: 5.8 -> 4.5 ms with none old,
    7.8 -> 6.3 with 50; with half of them old, copies of each half cost less, and are kept."""
    columns = np.flatnonzero(old) if old is not None else np.zeros(0, dtype=np.int64)
    if not len(columns):
        return _top_near(sure, near, k)
    old_k = min(candidate_window(int(settings.trending_again)), sure.shape[1])
    if 4 * len(columns) > sure.shape[1]:
        kept = np.zeros(sure.shape, dtype=bool)
        for kind, wanted in ((np.flatnonzero(~old), k), (columns, old_k)):  # type: ignore[operator]
            kept[:, kind] = _top_near(sure[:, kind], near[:, kind], wanted)
        return kept
    kept_old = _top_near(sure[:, columns], near[:, columns], old_k)
    sure[:, columns] = -np.inf
    near[:, columns] = -np.inf
    kept = _top_near(sure, near, k)
    kept[:, columns] = kept_old
    return kept


def _top_near(sure: np.ndarray, near: np.ndarray, k: int) -> np.ndarray:
    """Per row, the papers `near` keeps at or above (within TIE_MARGIN of) the k-th best of `sure` (all the finite
    ones with fewer than k columns: as if the row went on with -inf)."""
    if k > sure.shape[1]:
        return np.isfinite(near)  # type: ignore[no-any-return]
    kth = _kth_best(sure, k)
    cutoff = np.where(np.isfinite(kth), kth - TIE_MARGIN, -np.inf)
    return (near >= cutoff[:, None]) & np.isfinite(near)  # type: ignore[no-any-return]


def _kth_best(values: np.ndarray, k: int) -> np.ndarray:
    """Each row's k-th largest value (-inf for a row with fewer than k above -inf; +inf for k = 0).

    A row of a week's window is mostly -inf (a paper below the floor is not a sure candidate: 3.4 % of a day-7
    send's entries are above it), so the values above -inf are packed to the left of a narrow array first and
    the partition runs on that: the same k-th value, 1.65 -> 0.58 ms a chunk of 38 rows × 7,000 papers. Rows that
    are mostly above -inf are partitioned as they are."""
    rows, width = values.shape
    if k == 0:
        return np.full(rows, np.inf)
    flat = np.flatnonzero(values > -np.inf)
    row = flat // width
    counts = np.bincount(row, minlength=rows)
    most = int(counts.max(initial=0))
    if k > most:
        return np.full(rows, -np.inf)
    if 4 * most > width:
        return -np.partition(-values, k - 1, axis=1)[:, k - 1]  # type: ignore[no-any-return]
    packed = np.full((rows, most), -np.inf)
    packed[row, np.arange(len(flat)) - np.repeat(np.cumsum(counts) - counts, counts)] = values.ravel()[flat]
    return -np.partition(-packed, k - 1, axis=1)[:, k - 1]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class _Kept:
    """A chunk's scores (interests × papers, or subscribers × papers), of which each subscriber keeps some papers."""

    raw: np.ndarray
    logit: np.ndarray
    parts: DenseParts | None
    vectors: list[InterestVectors]  # each interest's profiles (none without the text model)
    lexical: np.ndarray  # each subscriber's best interest's log-odds
    blended: np.ndarray  # ... with the learned model blended in
    which: np.ndarray  # which of their interests is the best
    learned: tuple[np.ndarray, np.ndarray]  # the learned models' log-odds and Rocchio terms (with a model × papers)


def _scored(run: _Run, lo: int, rows: np.ndarray, first: np.ndarray, counts: np.ndarray, kept: np.ndarray,
            chunk: _Kept, shares: dict[int, float], signals: Mapping[str, Signals], out: list[Scored | None],
            columns: np.ndarray | None = None) -> None:
    """Each subscriber's `Scored` on the papers `kept` marks (subscribers × papers).

    What every digest needs is taken for the whole chunk at once, row by row, and each subscriber gets slices of
    it: their papers, and their interests' rows, reshaped. The kept entries are found once (`flatnonzero`, in the
    row-major order boolean indexing reads) and every array is gathered at them, rather than each array scanned
    under a mask as wide as the window (39 rows × 7,000 papers: 0.97 -> 0.10 ms a chunk, the same values). The
    relevance is computed here with the same arithmetic as `Scored` would, so it is the same. `columns`: each
    row's own pool indices (subscribers × papers, `stored.candidates`), when the chunk's are not the pool's.
    """
    width = kept.shape[1]
    flat = np.flatnonzero(kept)
    owner = flat // width
    sizes = np.bincount(owner, minlength=len(rows))
    ends = np.cumsum(sizes).tolist()
    at_column = flat - owner * width
    papers = at_column if columns is None else columns.ravel()[flat]
    which, lexical = chunk.which.ravel()[flat], chunk.lexical.ravel()[flat]
    relevance, lexical_relevance = sigmoid(chunk.blended.ravel()[flat]), sigmoid(lexical)
    interests = int(counts.sum())
    lengths = np.repeat(sizes, counts)  # each interest row: its subscriber's kept papers, in their order
    starts = np.repeat(np.cumsum(sizes) - sizes, counts)
    at = np.arange(int(lengths.sum())) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    entries = np.repeat(np.arange(interests), lengths) * width + at_column[at]
    raw, logit = chunk.raw.ravel()[entries], chunk.logit.ravel()[entries]

    interest_ends = np.cumsum(lengths).tolist()
    learned = chunk.learned[0][kept[list(shares)]] if shares else None
    rocchio = chunk.learned[1][kept[list(shares)]] if shares else None
    model_ends = dict(zip(shares, np.cumsum(sizes[list(shares)]).tolist(), strict=True))
    refs = run.plan.refs[lo:lo + interests].tolist()
    compiled = run.plan.compiled(lo, lo + interests)
    for n, (r, a, count, size, end) in enumerate(zip(rows.tolist(), first.tolist(), counts.tolist(),
                                                      sizes.tolist(), ends, strict=True)):
        at = slice(end - size, end)
        b = a + count
        block = slice(interest_ends[a] - size, interest_ends[b - 1])
        model = slice(model_ends[n] - size, model_ends[n]) if n in shares else None
        out[r] = Scored(papers[at], compiled[a:b], refs[a:b],
                        raw[block].reshape(count, size), logit[block].reshape(count, size), run.settings,
                        dense_of=_dense_later(run.pool, run.index, run.plan.interests[lo + a:lo + b],
                                              chunk.vectors[a:b], raw[block].reshape(count, size), refs[a:b],
                                              papers[at])
                        if chunk.vectors else None,
                        vectors=chunk.vectors[a:b] if chunk.vectors else (),
                        model_logit=learned[model] if model is not None and learned is not None else None,
                        rocchio=rocchio[model] if model is not None and rocchio is not None else None,
                        share=shares.get(n, 0.0), liked=signals.get(run.emails[r], Signals()).liked,
                        derived=(which[at], lexical[at], relevance[at], lexical_relevance[at]))


def _dense_later(pool: Pool, index: Index, interests: Sequence[Interest], vectors: Sequence[InterestVectors],
                 raw: np.ndarray, refs: Sequence[float], papers: np.ndarray) -> Callable[[int], DenseParts]:
    """A subscriber's `dense_parts` on their candidates, an interest's row at a time, worked out when their digest
    first reads it (`Scored.text_row`): each row is worked out alone in `dense_parts`, from the same inputs (the
    words' calibration of a one-row matrix: the same operations), so the same values. (It holds the pool and
    these few arrays, not the run; the words' calibration only for an interest with a library, the one that reads
    it.)"""
    def row(n: int) -> DenseParts:
        words = calibrate(raw[n:n + 1], np.array(refs[n:n + 1])[:, None]) if vectors[n].library is not None else None
        found = dense_parts(pool, index, interests[n:n + 1], vectors[n:n + 1], words, papers)
        return DenseParts(found.query[0], found.model[0], found.neighbours[0], found.library[0])
    return row


def prepare(pool: Pool, subscribers: Sequence[Subscriber], settings: SelectSettings) -> None:
    """Score every keyword, description and seed centroid of a send run's subscribers in one sparse product,
    up front."""
    _Plan(subscribers, settings, pool.index(settings.title_weight))
