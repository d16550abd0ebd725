"""One day's pool of papers, analysed once and shared by every subscriber of a run.

Everything that does not depend on the subscriber is computed here, once per pool: the BM25F
document-term matrix (restricted to the pool's own columns, so slicing it is cheap), unit-length
rows for paper-to-paper similarity, each paper's trending and recency boost, and each query unit's
scores (a keyword used by a thousand subscribers is scored once, kept as one row of a units × papers
matrix that the batch ranking multiplies with).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

try:
    from scipy.sparse import _sparsetools  # the C routines of its products (`_cross_product`)
except ImportError:  # pragma: no cover - a scipy that moved them: its public product instead
    _sparsetools = None

from digest.models import Paper
from digest.select import integer
from digest.select.authors import author_keys, followed_keys
from digest.select.corpus import CorpusStats, Fields, PaperTerms, background, bm25_weights
from digest.select.text import N_FEATURES, bigrams, columns, tokens
from digest.select.vectors import centred, codes

# Pools up to this size keep every pair's similarity in memory (16 MB at most); a larger pool keeps the pairs of this
# many papers, the ones a run's digests weigh for diversity most often (`hold_similarity`).
SIMILARITY_MATRIX_LIMIT = 2048
# Papers' similarity as kept and handed out: float32 (half the memory: a week's window held 32 MB of pairs in float64).
# Every path rounds the same float64 sums to it, kept or computed now, so a digest weighs the same values either way.
SIMILARITY = np.float32
CROSS_ROWS = 256  # `_cross_product` works out this many rows at a time (256 × 2,048 held papers: 8 MB of room)
MEMO_FLOATS = 25_000_000  # at most this many floats (200 MB) of per-interest scores are kept per pool
MEMO_ENTRIES = 100_000  # memoised values a long run keeps between batches
# Scored query units kept between batches, as floats (20 MB): each unit is a row of pool-length floats, so a pool
# of 7,000 papers (a week's window) keeps 357 units where one of 1,000 keeps 2,500. A count of units instead
# made memory follow the window: 10,000 units at 7,000 papers were 560 MB. (80 MB kept nothing a later batch used
# at a week's window, a batch of readers with their own keywords bringing hundreds of units: 10,000 readers' day-8
# send, the same CPU with 20 MB and 100 MB less memory.)
MAX_UNIT_FLOATS = 2_500_000


def in_sorted(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Which of `values` are in `ascending` (a binary search each: `np.isin` sorts both on every call)."""
    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    return ascending[at] == values  # type: ignore[no-any-return]


class Embedder(Protocol):
    """The text model's embeddings (one row per input) of papers and of query texts, and interests' profiles."""

    def papers(self, papers: Sequence[Paper]) -> np.ndarray: ...

    def texts(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Unit:
    """A weighted set of hashed terms scored as one query: a keyword, a description, seed papers."""

    key: str
    cols: np.ndarray
    weights: np.ndarray


class Index:
    """The pool's BM25F matrix for one title weight, and every query unit's scores on it."""

    def __init__(self, fields: Fields, corpus: CorpusStats, title_weight: float) -> None:
        weights = bm25_weights(fields, corpus, title_weight)
        # the pool's hashed columns, sorted, and each one's number among them: marked in a table over every hashed
        # column (np.unique and a binary search per entry took 0.65 s for a week's 2.3 million entries)
        present = np.zeros(N_FEATURES, dtype=bool)
        present[weights.indices] = True
        self.cols = np.flatnonzero(present).astype(weights.indices.dtype)
        self._lookup = np.full(N_FEATURES, -1, dtype=np.int32)  # hashed column → its number (-1: not in the pool)
        self._lookup[self.cols] = np.arange(len(self.cols), dtype=np.int32)
        local = sp.csr_matrix((weights.data, self._lookup[weights.indices], weights.indptr),
                              shape=(weights.shape[0], len(self.cols)))
        # each paper's terms in ascending order (the by-term matrix and every unit's scores are the same either way):
        # two papers' similarity is then summed over their common terms in one order whichever of the two is the
        # row, so a pair has one value however it is worked out (`_cross`)
        local.sort_indices()
        self.matrix = local.tocsc()
        self._paper_rows = local  # the same, a row per paper (`scores_on` slices papers from it)
        # each paper's Euclidean length: `unit_length_rows` scales rows to unit length when similarity asks
        # (unit_length's arithmetic, row by row: the values of scaling the whole matrix, no longer kept in memory)
        squares = sp.csr_matrix((local.data * local.data, local.indices, local.indptr), shape=local.shape)
        self._norms = np.sqrt(squares @ np.ones(local.shape[1]))
        self._norms[self._norms == 0] = 1.0
        self.corpus, self.title_weight = corpus, title_weight
        self._unit_row: dict[str, int] = {}  # unit key → its row of _unit_scores
        self._unit_scores = np.zeros((0, weights.shape[0]))
        self._n_units = 0
        self.memo: dict[Any, Any] = {}  # compiled interests and paper vectors, shared by subscribers
        self._vectors_left = MEMO_FLOATS // max(weights.shape[0], 1)
        self.zeros = np.zeros(weights.shape[0])
        self.zeros.flags.writeable = False
        self._similarity: np.ndarray | None = None
        self._slot: np.ndarray | None = None  # a large pool: each paper's row of `_held` (-1: not held)
        self._held = np.zeros((0, 0), dtype=SIMILARITY)  # held × held papers, their similarity (rows in `_slot` order)
        self._members = np.zeros(0, dtype=np.int64)  # the held papers, in `_held`'s order
        self._scratch: np.ndarray | None = None  # scratch: a pool column's number among some units' terms (or -1)
        self._kept: tuple[dict[str, int], np.ndarray, np.ndarray] | None = None  # `keep_scores`

    def trim(self) -> None:
        """Between batches: forget what a long run has memoised beyond its budget (recomputed when needed again).

        Keywords × papers explained, units scored, vectors: each run adds more the more varied its
        subscribers are, so without this a run's memory grew with its number of subscribers.
        """
        if len(self.memo) > MEMO_ENTRIES:
            kept = {k: v for k, v in self.memo.items() if isinstance(k, tuple) and k[:1] in (("boost",), ("trending",))}
            self.memo.clear()
            self.memo.update(kept)
            self._vectors_left = MEMO_FLOATS // max(self.zeros.shape[0], 1)
        if self._n_units * max(self._unit_scores.shape[1], 1) > MAX_UNIT_FLOATS:
            self._unit_row.clear()
            self._unit_scores = np.zeros((0, self._unit_scores.shape[1]))
            self._n_units = 0

    def remember(self, key: Any, value: Any, vectors: int = 0) -> None:
        """Memoise a value holding `vectors` pool-length arrays, while the memory budget lasts."""
        if vectors <= self._vectors_left:
            self._vectors_left -= vectors
            self.memo[key] = value

    def lookup(self) -> np.ndarray:
        """Hashed column → local column (-1: not in the pool), as one array (the table the index was built with)."""
        return self._lookup

    def local(self, cols: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keep the terms the pool has, as local column numbers."""
        pos = self.lookup()[cols]  # (a table, not searchsorted: that converted the pool's columns every call)
        found = pos >= 0
        return pos[found].astype(np.int64), weights[found]

    def scores(self, unit: Unit) -> np.ndarray:
        """Every paper's BM25 score for the unit (computed once per unit key)."""
        row = self.unit_rows([unit])[0]  # (may grow the matrix: read it after)
        return self._unit_scores[row]

    def prepare(self, units: Sequence[Unit]) -> None:
        """Score many units at once with one sparse matrix product (a send run's interests)."""
        self.unit_rows(units)

    def unit_rows(self, units: Sequence[Unit]) -> np.ndarray:
        """Each unit's row in `unit_scores`, the units not scored yet scored together in one sparse product.

        A unit's scores do not depend on which other units are scored with it: each is a sum over the
        unit's own terms, in the unit's order.
        """
        known = [self._unit_row.get(u.key) for u in units]
        if None not in known:
            return np.array(known, dtype=np.int64)
        todo = list({u.key: u for u in units if u.key not in self._unit_row}.values())
        if todo:
            product = (self.query_matrix(todo).T @ self.matrix.T).toarray()  # units × papers
            start = self._n_units
            if start + len(todo) > len(self._unit_scores):  # grow by doubling; rows handed out stay valid
                budget = MAX_UNIT_FLOATS // max(self._unit_scores.shape[1], 1)  # (doubling past it held 2× the budget)
                rows = max(min(2 * len(self._unit_scores), budget), start + len(todo), 64)
                grown = np.zeros((rows, self._unit_scores.shape[1]))
                grown[:start] = self._unit_scores[:start]
                self._unit_scores = grown
            self._unit_scores[start:start + len(todo)] = product
            self._unit_row.update((u.key, start + j) for j, u in enumerate(todo))
            self._n_units += len(todo)
        return np.fromiter((self._unit_row[u.key] for u in units), dtype=np.int64, count=len(units))

    def scored(self, key: str) -> bool:
        """Whether the unit of this key has its row in `unit_scores`."""
        return key in self._unit_row

    @property
    def unit_scores(self) -> np.ndarray:
        """Every scored unit's scores on every paper (units × papers; rows as `unit_rows` numbers them)."""
        return self._unit_scores[: self._n_units]

    def query_matrix(self, units: Sequence[Unit]) -> sp.csc_matrix:
        """Units as the columns of one sparse (pool terms × units) matrix."""
        if not units:
            return sp.csc_matrix((len(self.cols), 0))
        pos = self.lookup()[np.concatenate([u.cols for u in units])]  # every unit's terms at once
        found = pos >= 0
        owner = np.repeat(np.arange(len(units)), [len(u.cols) for u in units])
        weights = np.concatenate([u.weights for u in units])
        return sp.csc_matrix((weights[found], (pos[found], owner[found])), shape=(len(self.cols), len(units)))

    def keep_scores(self, units: Sequence[Unit], papers: np.ndarray, table: np.ndarray) -> None:
        """Keep these units' scores of these papers (ascending; units × papers, as `scores_on` made them) for
        `scores_on` to read back: a batch's reasons are worked out on papers its candidates were scored on."""
        self._kept = ({u.key: n for n, u in enumerate(units)}, papers, table)

    def scores_on(self, units: Sequence[Unit], papers: np.ndarray) -> np.ndarray:
        """These units' scores of these papers only (units × papers), each value as the whole pool's product makes
        it (`unit_rows`), at the cost of the papers and terms asked for, not the pool's.

        Both sides keep only the units' terms, renumbered in the pool's order (a product over the pool's 400,000
        columns converted a matrix of that many rows every call): each sum still runs over a unit's terms in
        order, so the values are the same to the last bit."""
        known = [self._unit_row.get(u.key) for u in units]
        if None not in known:  # scored on the whole pool already (the full re-rank's batch)
            return self._unit_scores[np.array(known, dtype=np.int64)[:, None], papers[None, :]]
        if self._kept is not None:
            rows, kept, table = self._kept
            at = np.searchsorted(kept, papers)
            if all(u.key in rows for u in units) and np.all(at < len(kept)) and np.array_equal(
                    kept[np.minimum(at, len(kept) - 1)], papers):
                return table[np.array([rows[u.key] for u in units], dtype=np.int64)[:, None], at[None, :]]
        query = self.query_matrix(units).T.tocsr()  # units × pool columns, each row's terms ascending
        terms = np.unique(query.indices)
        table = np.full(len(self.cols), -1, dtype=np.int64) if self._scratch is None else self._scratch
        self._scratch = table
        table[terms] = np.arange(len(terms))
        rows = self._paper_rows[papers]
        local = table[rows.indices]
        keep = local >= 0
        kept = np.concatenate([[0], np.cumsum(keep)])[rows.indptr]  # each paper's first kept entry
        mine = sp.csr_matrix((rows.data[keep], local[keep], kept), shape=(len(papers), len(terms)))
        mapped = sp.csr_matrix((query.data, table[query.indices], query.indptr), shape=(len(units), len(terms)))
        table[terms] = -1
        return np.asarray((mapped @ mine.T).toarray())

    def vector(self, papers: Sequence[Paper]) -> tuple[np.ndarray, np.ndarray]:
        """Unit-length centroid of the papers' BM25F rows as (hashed columns, weights): Rocchio's input, and seed
        papers' words with the text model off (a library's own words: `scores.library_words_feature`)."""
        return PaperTerms.of(Fields.of(papers)).centroid(self.corpus, self.title_weight)

    def unit_length_rows(self, papers: np.ndarray) -> sp.csr_matrix:
        """These papers' BM25F rows scaled to unit length (cosine similarity between papers is their product)."""
        indptr, cols, data = self._unit_rows_arrays(papers)
        return sp.csr_matrix((data, cols, indptr), shape=(len(papers), self._paper_rows.shape[1]))

    def _unit_rows_arrays(self, papers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`unit_length_rows` as bare CSR arrays (indptr, pool columns, values), without the matrix around them
        (`_cross`'s few dozen papers: its construction's checks cost more than the values)."""
        rows = self._paper_rows
        starts = rows.indptr[papers]
        lengths = rows.indptr[papers + 1] - starts
        indptr = np.zeros(len(papers) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        at = np.arange(indptr[-1]) + np.repeat(starts - indptr[:-1], lengths)
        return indptr, rows.indices[at], rows.data[at] / np.repeat(self._norms[papers], lengths)

    def _cross(self, left: np.ndarray, right: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Similarity of each `left` paper (rows) with each `right` one, worked out now (into `out`, or a new
        SIMILARITY array): the left papers' terms that some right paper has, numbered among the right papers' terms,
        and `_cross_product` on bare arrays.

        Every value is the sum over the pair's common terms in ascending order (rows sorted in `__init__`), as the
        pool-wide product `rows @ rows.T` sums it: the same to the last bit, and the same whichever paper is the row
        (so a pair's value worked out once serves both (i, j) and (j, i)). Numbered among the pair's own terms
        rather than the pool's columns: a product over a week's 400,000 columns converted a matrix of that many rows
        on every call, most of the call's time for a few dozen papers."""
        l_ptr, l_cols, l_data = self._unit_rows_arrays(left)
        r_ptr, r_cols, r_data = self._unit_rows_arrays(right)
        if self._scratch is None:
            self._scratch = np.full(len(self.cols), -1, dtype=np.int64)
        table = self._scratch
        table[r_cols] = np.arange(len(r_cols))  # a term repeated takes one number (the last written)
        r_local, l_local = table[r_cols], table[l_cols]
        table[r_cols] = -1
        keep = l_local >= 0
        l_ptr = np.concatenate([[0], np.cumsum(keep)])[l_ptr]  # each left row's first kept entry
        out = np.empty((len(left), len(right)), dtype=SIMILARITY) if out is None else out
        _cross_product((l_ptr, l_local[keep], l_data[keep]), (r_ptr, r_local, r_data), len(r_cols), out)
        return out

    def similarity_among(self, picks: np.ndarray) -> np.ndarray:
        """Cosine similarity between each pair of the given papers (a small pool keeps every pair; a large one the
        pairs of the papers `hold_similarity` was given, and the pairs of the others are worked out now)."""
        if self.matrix.shape[0] > SIMILARITY_MATRIX_LIMIT:
            at = self._slot[picks] if self._slot is not None else np.full(len(picks), -1)
            missing = at < 0
            if not missing.any():
                return self._held[at[:, None], at]
            out = np.empty((len(picks), len(picks)), dtype=SIMILARITY)
            inside = np.flatnonzero(~missing)
            out[inside[:, None], inside] = self._held[at[inside][:, None], at[inside]]
            fresh = self._cross(picks, picks[missing])  # every pick × the papers not held
            out[:, missing] = fresh
            out[missing, :] = fresh.T  # (a pair's value is the same either way round: `_cross`)
            return out
        if self._similarity is None:
            rows = self.unit_length_rows(np.arange(len(self._norms)))
            self._similarity = np.asarray((rows @ rows.T).toarray()).astype(SIMILARITY)
        return self._similarity[picks[:, None], picks]

    def hold_similarity(self, papers: np.ndarray) -> None:
        """Keep the pairwise similarity of these papers (a batch's candidates, repeats counting) with every paper
        held already, up to SIMILARITY_MATRIX_LIMIT papers, the most repeated first: worked out in one product
        rather than a small one per digest (a digest's few dozen candidates cost a third of a millisecond, most of
        it the product's set-up, and a week's window brings the same papers up in thousands of digests).

        Each value is the sum over the two papers' common terms in ascending order, as in the pool-wide product
        (`similarity_among` of a small pool) and in `_cross`: the same to the last bit (each kept as SIMILARITY,
        rounded alike on every path)."""
        n = self.matrix.shape[0]
        held = len(self._members)
        if n <= SIMILARITY_MATRIX_LIMIT or held >= SIMILARITY_MATRIX_LIMIT or not len(papers):
            return
        if self._slot is None:
            self._slot = np.full(n, -1, dtype=np.int64)
        found, counts = np.unique(papers, return_counts=True)
        unheld = self._slot[found] < 0
        if not unheld.any():
            return
        new = found[unheld][np.argsort(-counts[unheld], kind="stable")][:SIMILARITY_MATRIX_LIMIT - held]
        members = np.concatenate([self._members, new])
        if len(members) > len(self._held):
            grown = np.zeros((min(max(2 * len(self._held), len(members), 256), SIMILARITY_MATRIX_LIMIT),) * 2,
                             dtype=SIMILARITY)
            grown[:held, :held] = self._held[:held, :held]
            self._held = grown
        self._cross(new, members, out=self._held[held:len(members), :len(members)])  # new × (held, then new)
        self._held[:held, held:len(members)] = self._held[held:len(members), :held].T  # (the same either way round)
        self._slot[new] = np.arange(held, len(members))
        self._members = members


def _cross_product(left: tuple[np.ndarray, np.ndarray, np.ndarray], right: tuple[np.ndarray, np.ndarray, np.ndarray],
                   columns: int, out: np.ndarray) -> None:
    """left @ rightᵀ into `out` (dense, its own dtype), each side given as CSR arrays (indptr, column numbers below
    `columns`, values), by the C routines `scipy.sparse`'s own product calls (`csr_tocsc` for the transpose,
    `csr_matmat`), so each value is summed in the same order, the left row's: the same to the last bit as
    `csr_matrix(left) @ csr_matrix(right).T`. Without the matrices built and checked around them, a digest's
    similarity among its 20 candidates costs half (0.41 → 0.18 ms a call on a week's window). CROSS_ROWS rows at a
    time, each block made room for as if every pair shared a term."""
    n, m = len(left[0]) - 1, len(right[0]) - 1
    l_ptr, l_cols, l_data = left[0].astype(np.int64), left[1].astype(np.int64), left[2]
    r_ptr, r_cols, r_data = right[0].astype(np.int64), right[1].astype(np.int64), right[2]
    if _sparsetools is None:
        a = sp.csr_matrix((l_data, l_cols, l_ptr), shape=(n, columns))
        b = sp.csr_matrix((r_data, r_cols, r_ptr), shape=(m, columns))
        out[...] = (a @ b.T).toarray()
        return
    t_ptr, t_cols, t_data = np.empty(columns + 1, dtype=np.int64), np.empty(len(r_cols), dtype=np.int64), np.empty(
        len(r_data))
    _sparsetools.csr_tocsc(m, columns, r_ptr, r_cols, r_data, t_ptr, t_cols, t_data)  # rightᵀ, a row per column
    size = min(n, CROSS_ROWS)
    c_ptr, c_cols, c_data = np.empty(size + 1, dtype=np.int64), np.empty(size * m, dtype=np.int64), np.empty(size * m)
    dense = np.empty((size, m))
    for start in range(0, n, CROSS_ROWS):
        rows = min(CROSS_ROWS, n - start)  # (the left rows' entries where `l_ptr` puts them: no copy)
        _sparsetools.csr_matmat(rows, m, l_ptr[start:start + rows + 1], l_cols, l_data, t_ptr, t_cols, t_data,
                                c_ptr, c_cols, c_data)
        block = dense[:rows]
        block.fill(0.0)
        _sparsetools.csr_todense(rows, m, c_ptr, c_cols, c_data, block)
        out[start:start + rows] = block


class Pool:
    """The papers one digest date draws from, analysed once and shared by every subscriber."""

    def __init__(self, papers: Sequence[Paper], corpus: CorpusStats | None = None, *,
                 background: bool | CorpusStats = True, dense: Embedder | None = None,
                 fields: Fields | None = None) -> None:
        """`corpus`: the store's term statistics; `background`: blend in the shipped ones (or these), or not;
        `dense`: the text model's embeddings (None: words only); `fields`: the papers' term counts when already
        analysed (`Fields.of(papers)`)."""
        self.papers = list(papers)
        self._fields = fields if fields is not None else Fields.of(self.papers)
        shipped = _background() if background is True else background or None
        self.corpus = _with_pool(corpus, self.papers, self.fields).blended(shipped)
        self.index_by_id = {p.store_id: i for i, p in enumerate(self.papers) if p.store_id is not None}
        self._positions: tuple[int, np.ndarray] | None = None  # (lowest store id, store id - lowest → index or -1)
        self.dense = dense
        self._dense_papers: np.ndarray | None = None
        self._dense_codes: tuple[np.ndarray, np.ndarray] | None = None
        self._dense_held: integer.Held | None = None
        self._indexes: dict[float, Index] = {}
        self._boosts: dict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = {}
        present = self.fields.present()
        present.sort_indices()
        # which papers hold which terms: by term (1 byte a value: phrase look-ups sum a few columns) and by paper
        # (each paper's terms ascending, without values: `has_terms` searches them)
        self._present = sp.csc_matrix(present, dtype=np.int8)
        self._term_starts, self._term_cols = present.indptr, present.indices
        self._contains: dict[str, np.ndarray] = {}
        self._authored: dict[tuple[str, ...], np.ndarray] = {}
        self._author_names: list[frozenset[str]] | None = None

    def __len__(self) -> int:
        return len(self.papers)

    @cached_property
    def store_ids(self) -> np.ndarray | None:
        """Every paper's store id in pool order (int64), or None if a paper has none (not from a store). Made once:
        a send's every batch asks (`stored.usable`), a week's window is 7,000 papers."""
        if any(p.store_id is None for p in self.papers):
            return None
        return np.array([p.store_id for p in self.papers], dtype=np.int64)

    def positions(self, store_ids: Iterable[int] | np.ndarray) -> np.ndarray:
        """The pool indices of the papers with these store ids (those in the pool), in the order given: a table
        over the pool's range of store ids, so a reader's week of received papers is one array look-up."""
        if self._positions is None:
            low = min(self.index_by_id, default=0)
            table = np.full(max(self.index_by_id, default=-1) - low + 1, -1, dtype=np.int64)
            table[np.fromiter(self.index_by_id, dtype=np.int64) - low] = np.fromiter(self.index_by_id.values(),
                                                                                     dtype=np.int64)
            self._positions = low, table
        low, table = self._positions
        ids = (store_ids if isinstance(store_ids, np.ndarray) else np.fromiter(store_ids, dtype=np.int64)) - low
        found = table[ids[(ids >= 0) & (ids < len(table))]]
        return found[found >= 0]  # type: ignore[no-any-return]

    @property
    def fields(self) -> Fields:
        """The papers' term counts: kept until the pool's first index is built (a week's window holds 28 MB of them,
        which nothing reads after), analysed again if an index for another title weight needs them."""
        if self._fields is None:
            self._fields = Fields.of(self.papers)
        return self._fields

    def index(self, title_weight: float) -> Index:
        """The BM25F index for this title weight (built on first use)."""
        if title_weight not in self._indexes:
            self._indexes[title_weight] = Index(self.fields, self.corpus, title_weight)
            self._fields = None
        return self._indexes[title_weight]

    def contains(self, phrase: str) -> np.ndarray:
        """Which papers contain the phrase (a word, or all of a phrase's word pairs) in title or abstract."""
        if phrase not in self._contains:
            self._contains[phrase] = self._find(phrase)
        return self._contains[phrase]

    def _find(self, phrase: str) -> np.ndarray:
        words = tokens(phrase)
        needed = columns(bigrams(words) if len(words) > 1 else words)
        if not len(needed):
            return np.zeros(len(self.papers), dtype=bool)
        hits = np.asarray(self._present[:, needed].sum(axis=1, dtype=np.int64)).ravel()
        return hits >= len(needed)

    def has_terms(self, i: int, cols: np.ndarray) -> np.ndarray:
        """Which of the hashed columns paper i contains (a binary search of its ascending terms: sets of them, kept
        per shown paper, held 25 MB at a week's window)."""
        return in_sorted(cols, self._term_cols[self._term_starts[i]:self._term_starts[i + 1]])

    def dense_papers(self) -> np.ndarray | None:
        """The pool's embeddings (papers × dimensions, float32), or None without the text model."""
        if self.dense is None:
            return None
        if self._dense_papers is None:
            self._dense_papers = self.dense.papers(self.papers)
        return self._dense_papers

    def dense_unit(self, papers: np.ndarray | None = None) -> np.ndarray:
        """The pool's embeddings centred on the reference mean, unit length (`vectors.centred`), of every paper or
        of these: made when asked, not kept (the codes are what scoring reads; a week's window held 10 MB of them
        besides; `centred` works row by row, so a row alone is the same to the last bit)."""
        raw = self.dense_papers()
        assert raw is not None
        return centred(raw if papers is None else raw[papers])

    def dense_codes(self, papers: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The pool's centred unit embeddings as int8 codes (`vectors.codes`, kept as int8: a week's window in 2.7
        MB, not 10.7 in float32), of every paper or of these."""
        if self._dense_codes is None:
            rows, scale = codes(self.dense_unit())
            self._dense_codes = rows.astype(np.int8), scale
        if papers is None:
            return self._dense_codes
        return self._dense_codes[0][papers], self._dense_codes[1][papers]

    def dense_held(self) -> integer.Held:
        """Every paper's codes (`dense_codes`) as the integer kernel takes them, made once: each batch multiplies
        its interests' directions and its readers' models with them."""
        if self._dense_held is None:
            self._dense_held = integer.Held(self.dense_codes()[0])
        return self._dense_held

    def product_codes(self) -> tuple[integer.Held, np.ndarray]:
        """`dense_codes()` of every paper as `vectors.exact_dot` multiplies them: the held codes and their scales."""
        return self.dense_held(), self.dense_codes()[1]

    def by_authors(self, names: Sequence[str]) -> np.ndarray:
        """Which papers one of these authors wrote (names compared as `authors.normalised` reads them)."""
        key = tuple(names)
        found = self._authored.get(key)
        if found is None:
            if self._author_names is None:
                self._author_names = [frozenset(author_keys(p.authors)) for p in self.papers]
            wanted = followed_keys(names)
            found = self._authored[key] = np.fromiter((bool(w & wanted) for w in self._author_names), dtype=bool,
                                                      count=len(self.papers))
        return found

    def boosts(self, day: date, weights: tuple[float, float, float], half_life: float) -> tuple[np.ndarray, np.ndarray]:
        """Every paper's trend and recency signal in [0, 1] (the same for every subscriber); `weights`: how many
        upvotes a comment, a GitHub star and a citation count as (`trend`)."""
        key = (day, weights, half_life)
        if key not in self._boosts:
            self._boosts[key] = (trend(self.papers, *weights), _recency(self.papers, day, half_life))
        return self._boosts[key]


def _background() -> CorpusStats:
    return background()


def _with_pool(corpus: CorpusStats | None, papers: Sequence[Paper], fields: Fields) -> CorpusStats:
    """The corpus statistics, counting in pool papers they do not cover yet (a file of new papers)."""
    if corpus is None:
        stats = CorpusStats()
        stats.add(fields)
        return stats
    outside = [i for i, p in enumerate(papers) if p.store_id is None or p.store_id > corpus.max_id]
    if not outside:
        return corpus
    stats = CorpusStats(corpus.df.copy(), corpus.n_docs, corpus.title_terms, corpus.abstract_terms, corpus.max_id)
    stats.add(Fields(fields.title[outside], fields.abstract[outside]))
    return stats


UNKNOWN_ATTENTION = 1.0  # what a paper without any reported count counts as, in upvotes (`trend`)


def attention(paper: Paper, comment_weight: float, star_weight: float, citation_weight: float) -> float | None:
    """How much attention the sources report for a paper, in upvotes: upvotes + comment_weight × comments +
    star_weight × GitHub stars + citation_weight × citations, the counts no source reported left out; None when
    no source reported any."""
    counts = (paper.upvotes, paper.comments, paper.stars, paper.citations)
    if all(c is None for c in counts):
        return None
    return sum(w * (c or 0) for w, c in zip((1.0, comment_weight, star_weight, citation_weight), counts, strict=True))


def trend(papers: Sequence[Paper], comment_weight: float, star_weight: float, citation_weight: float) -> np.ndarray:
    """Every paper's trend in [0, 1]: log(1 + attention), scaled so the pool's most-followed paper is 1.

    A paper no source reported any count for (one from an arXiv feed, say, with no signals configured) is not
    taken for one nobody follows: it counts as a weak signal, UNKNOWN_ATTENTION (one upvote). With no count
    known in the whole pool every trend is 0."""
    seen = [attention(p, comment_weight, star_weight, citation_weight) for p in papers]
    if all(a is None for a in seen):
        return np.zeros(len(papers))
    values = np.array([UNKNOWN_ATTENTION if a is None else a for a in seen], dtype=float)
    return np.log1p(values) / math.log1p(values.max())


def _recency(papers: Sequence[Paper], day: date, half_life: float) -> np.ndarray:
    """0.5 ** (age in days / half_life), age from publication (else listing); 0 when unknown."""
    out = np.zeros(len(papers))
    for i, paper in enumerate(papers):
        when = paper.published or paper.listed_on
        if when is not None:
            out[i] = 0.5 ** (max((day - when).days, 0) / half_life)
    return out
