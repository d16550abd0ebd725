"""Term statistics of the whole store (document frequencies, field lengths) and BM25F weights.

A keyword's weight depends on how rare it is, and a day's pool of a few hundred papers is too small
to say that: *diffusion* may be in a third of today's papers and still be a distinctive word. So
the inverse document frequencies come from every paper in the store. They are kept in the store as
one cached blob and brought up to date with the papers added since, once per run.

A new install's store holds a few hundred papers, too few to say which words are rare. So the
package ships background statistics (`digest/data/background.npz`, document frequencies of the 7,471
papers of the arXiv sample that no ranking benchmark draws from, built by `tools/build_background.py`),
and `blended` adds them to the store's with a weight that shrinks as the store grows: the background
counts as BACKGROUND_DOCS × K / (K + N) documents for a store of N papers (K = BACKGROUND_HALF), so a
store of K papers weighs as much as half the background, and a store of ten times K takes over.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np
import scipy.sparse as sp

from digest.models import Paper
from digest.select.text import ANALYZER_VERSION, N_FEATURES, count_matrix

BM25_K1 = 1.2  # term-frequency saturation: the 2nd mention adds less than the 1st, the 5th little
BM25_B = 0.75  # how much a long abstract's counts are discounted
BACKGROUND_DOCS = 7_471  # documents the shipped background statistics count at most (a fresh store)
BACKGROUND_HALF = 5_000  # store size at which the background weighs half as much as on a fresh install
# A single paper has no others to be scored on: its papers' unit is this share of its score on its own row, what
# the papers of a ten-paper library of an arXiv category score on the others' centroid against their own rows
# (the 30 libraries of bench/ranking.py's two profile sets: 0.025-0.068, median 0.030).
ONE_PAPER_SHARE = 0.03


@dataclass(frozen=True)
class Fields:
    """Term counts of a batch of papers, title and abstract apart (rows are papers)."""

    title: sp.csr_matrix
    abstract: sp.csr_matrix

    @classmethod
    def of(cls, papers: Sequence[Paper]) -> Fields:
        return cls(count_matrix(p.title for p in papers), count_matrix(p.abstract for p in papers))

    @classmethod
    def of_texts(cls, pairs: Sequence[tuple[str, str]]) -> Fields:
        return cls(count_matrix(t for t, _ in pairs), count_matrix(a for _, a in pairs))

    CACHE_PREFIX = f"pool-fields/{ANALYZER_VERSION}/{N_FEATURES}/"

    @classmethod
    def cache_key(cls, papers: Sequence[Paper]) -> str:
        """The store cache key of these papers' counts: their texts' digest, so a changed paper is a new key."""
        digest = hashlib.blake2b(digest_size=16)
        for p in papers:
            digest.update(p.title.encode("utf-8", "surrogatepass") + b"\x00" +
                          p.abstract.encode("utf-8", "surrogatepass") + b"\x01")
        return f"{cls.CACHE_PREFIX}{len(papers)}/{digest.hexdigest()}"

    def to_bytes(self) -> bytes:
        """The counts as the store's cache keeps them (`from_bytes` reads them back, the same matrices)."""
        buf = io.BytesIO()
        parts = {f"{name}_{part}": getattr(getattr(self, name), part)
                 for name in ("title", "abstract") for part in ("indptr", "indices", "data")}
        np.savez(buf, **parts)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Fields:
        with np.load(io.BytesIO(data)) as saved:
            title, abstract = ((saved[f"{name}_data"], saved[f"{name}_indices"], saved[f"{name}_indptr"])
                               for name in ("title", "abstract"))
        rows = len(title[2]) - 1
        return cls(sp.csr_matrix(title, shape=(rows, N_FEATURES)), sp.csr_matrix(abstract, shape=(rows, N_FEATURES)))

    @classmethod
    def stacked(cls, parts: Sequence[Fields]) -> Fields:
        """The parts' rows one after another (the same matrices as analysing their papers together)."""
        if len(parts) == 1:
            return parts[0]
        return cls(sp.vstack([f.title for f in parts], format="csr"),
                   sp.vstack([f.abstract for f in parts], format="csr"))

    def __len__(self) -> int:
        return int(self.title.shape[0])

    def present(self) -> sp.csr_matrix:
        """1 where a term occurs in the title or the abstract."""
        both = (self.title + self.abstract).tocsr()
        both.data[:] = 1.0
        return both


class CorpusStats:
    """Document frequency of every hashed term and mean field lengths over a set of papers."""

    KEY = f"corpus-stats/{ANALYZER_VERSION}/{N_FEATURES}"

    def __init__(self, df: np.ndarray | None = None, n_docs: int = 0, title_terms: float = 0.0,
                 abstract_terms: float = 0.0, max_id: int = 0) -> None:
        self.df = df if df is not None else np.zeros(N_FEATURES, dtype=np.int32)
        self.n_docs, self.max_id = n_docs, max_id
        self.title_terms, self.abstract_terms = title_terms, abstract_terms
        self._idf: np.ndarray | None = None

    @classmethod
    def of(cls, papers: Sequence[Paper]) -> CorpusStats:
        """Statistics of just these papers (a pool with no store behind it)."""
        stats = cls()
        stats.add(Fields.of(papers))
        return stats

    def add(self, fields: Fields, max_id: int = 0) -> None:
        """Count a batch of papers in."""
        if not len(fields):
            return
        present = fields.present()
        np.add.at(self.df, present.indices, 1)
        self.n_docs += len(fields)
        self.title_terms += float(fields.title.sum())
        self.abstract_terms += float(fields.abstract.sum())
        self.max_id = max(self.max_id, max_id)
        self._idf = None

    def add_texts(self, rows: Iterable[tuple[int, str, str]], batch: int = 2000) -> int:
        """Count in (store id, title, abstract) rows, a batch at a time; returns how many."""
        done, chunk = 0, []
        for row in rows:
            chunk.append(row)
            if len(chunk) == batch:
                done += self._add_chunk(chunk)
                chunk = []
        return done + self._add_chunk(chunk)

    def _add_chunk(self, chunk: list[tuple[int, str, str]]) -> int:
        if chunk:
            self.add(Fields.of_texts([(t, a) for _, t, a in chunk]), max(i for i, _, _ in chunk))
        return len(chunk)

    @property
    def avg_title(self) -> float:
        return self.title_terms / self.n_docs if self.n_docs else 1.0

    @property
    def avg_abstract(self) -> float:
        return self.abstract_terms / self.n_docs if self.n_docs else 1.0

    def idf(self) -> np.ndarray:
        """BM25's inverse document frequency, never negative: log(1 + (N - df + 0.5) / (df + 0.5))."""
        if self._idf is None:
            df = self.df.astype(np.float64)
            self._idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5))
        return self._idf

    def to_bytes(self, min_df: int = 1) -> bytes:
        """A compact serialisation: the frequencies of terms in at least `min_df` papers, columns as gaps."""
        nz = np.flatnonzero(self.df >= min_df)
        df = self.df[nz]
        buf = io.BytesIO()
        np.savez_compressed(buf, gaps=np.diff(nz, prepend=0).astype(np.uint32),
                            df=df.astype(np.uint16 if df.max(initial=0) < 2**16 else np.int32), meta=np.array(
            [self.n_docs, self.title_terms, self.abstract_terms, self.max_id], dtype=np.float64))
        return buf.getvalue()

    def blended(self, background: CorpusStats | None) -> CorpusStats:
        """These statistics with the background's added, weighted down as this store grows (see the module doc)."""
        if background is None or not background.n_docs:
            return self
        docs = BACKGROUND_DOCS * BACKGROUND_HALF / (BACKGROUND_HALF + self.n_docs)
        share = min(docs / background.n_docs, 1.0)
        df = self.df + np.rint(background.df * share).astype(np.int32)
        return CorpusStats(df, self.n_docs + round(background.n_docs * share),
                           self.title_terms + background.title_terms * share,
                           self.abstract_terms + background.abstract_terms * share, self.max_id)

    @classmethod
    def from_bytes(cls, data: bytes) -> CorpusStats:
        with np.load(io.BytesIO(data)) as saved:
            df = np.zeros(N_FEATURES, dtype=np.int32)
            cols = np.cumsum(saved["gaps"], dtype=np.int64) if "gaps" in saved else saved["cols"]
            df[cols] = saved["df"]
            n_docs, title_terms, abstract_terms, max_id = saved["meta"].tolist()
        return cls(df, int(n_docs), title_terms, abstract_terms, int(max_id))


@lru_cache(maxsize=1)
@lru_cache(maxsize=1)
def background() -> CorpusStats:
    """The shipped background statistics (document frequencies of real arXiv papers), read once per process."""
    data = resources.files("digest.data").joinpath("background.npz").read_bytes()
    return CorpusStats.from_bytes(data)


def bm25_weights(fields: Fields, stats: CorpusStats, title_weight: float) -> sp.csr_matrix:
    """BM25F: field counts length-normalised and summed (title × title_weight), saturated, × idf."""
    title_norm = 1 - BM25_B + BM25_B * _row_sums(fields.title) / stats.avg_title
    abstract_norm = 1 - BM25_B + BM25_B * _row_sums(fields.abstract) / stats.avg_abstract
    tf = (sp.diags(title_weight / title_norm) @ fields.title + sp.diags(1 / abstract_norm) @ fields.abstract)
    tf = sp.csr_matrix(tf)
    tf.data = tf.data * (BM25_K1 + 1) / (tf.data + BM25_K1) * stats.idf()[tf.indices]
    return tf


@dataclass(frozen=True, eq=False)
class PaperTerms:
    """A few papers' term counts, title and abstract side by side, on the papers' own columns: what the unit-length
    centroid of their BM25F rows (`centroid`) needs, which then costs their terms rather than the 2**20 hashed
    columns (a library of ten papers: 8 ms through `bm25_weights`, a few hundred microseconds here).

    Each entry is one (paper, term): `local` numbers the term among `cols` (ascending hashed columns), `title` and
    `abstract` count it in each field; `indptr` splits the entries by paper, as a CSR matrix's does."""

    cols: np.ndarray  # int32
    indptr: np.ndarray  # int64, papers + 1
    local: np.ndarray  # int32
    title: np.ndarray  # float32 (counts: whole numbers, exact)
    abstract: np.ndarray  # float32

    MAGIC = b"PTERMS1\n"

    @classmethod
    def of(cls, fields: Fields) -> PaperTerms:
        parts = [sp.coo_matrix(m) for m in (fields.title, fields.abstract)]
        rows = np.concatenate([m.row for m in parts]).astype(np.int64)
        hashed = np.concatenate([m.col for m in parts]).astype(np.int64)
        cols, local = np.unique(hashed, return_inverse=True)
        entry, at = np.unique(rows * max(len(cols), 1) + local, return_inverse=True)  # (paper, term), sorted
        counts = [np.bincount(at[sl], weights=m.data, minlength=len(entry)) for sl, m in zip(
            (slice(0, parts[0].nnz), slice(parts[0].nnz, None)), parts, strict=True)]
        papers = entry // max(len(cols), 1)
        indptr = np.searchsorted(papers, np.arange(len(fields) + 1)).astype(np.int64)
        return cls(cols.astype(np.int32), indptr, (entry % max(len(cols), 1)).astype(np.int32),
                   counts[0].astype(np.float32), counts[1].astype(np.float32))

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def centroid(self, stats: CorpusStats, title_weight: float) -> tuple[np.ndarray, np.ndarray]:
        """The unit-length centroid of the papers' BM25F rows (`bm25_weights`, each row to unit length, their mean)
        as (hashed columns, weights)."""
        if not len(self) or not len(self.local):
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        _, _, _, mean, kept, norm = self._mean(stats, title_weight)
        return self.cols[kept].astype(np.int64), mean[kept] / norm

    def centroid_and_score(self, stats: CorpusStats, title_weight: float) -> tuple[np.ndarray, np.ndarray, float]:
        """`centroid`, and what the papers themselves score on average, each on the centroid of the others (its
        BM25F row, as a pool's index holds it, times that centroid at unit length): the score that means "as close
        to these papers as they are to one another". Leaving each paper out keeps a small library's papers from
        scoring high on a centroid that is a quarter themselves; one paper: ONE_PAPER_SHARE of its own row's."""
        n = len(self)
        if not n or not len(self.local):
            return np.zeros(0, dtype=np.int64), np.zeros(0), 0.0
        paper, weights, norms, mean, kept, norm = self._mean(stats, title_weight)
        on_mean = np.bincount(paper, weights * mean[self.local], minlength=n)  # row_i · mean
        if n == 1:
            own = ONE_PAPER_SHARE * float(on_mean[0]) / norm
        else:  # row_i · (n·mean − u_i), u_i = row_i / |row_i|, over the length of n·mean − u_i
            length = np.sqrt(np.maximum(n * n * norm * norm - 2 * n * on_mean / norms + 1, 1e-12))
            own = float(np.maximum((n * on_mean - norms) / length, 0.0).mean())
        return self.cols[kept].astype(np.int64), mean[kept] / norm, own

    def _mean(self, stats: CorpusStats, title_weight: float,
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        """Each entry's paper and BM25F weight, each paper's row length, the mean of the unit-length rows over
        `cols`, its nonzero columns and its length (papers and entries: at least one each)."""
        n = len(self)
        paper = np.repeat(np.arange(n), np.diff(self.indptr))
        title, abstract = self.title.astype(np.float64), self.abstract.astype(np.float64)
        title_norm = 1 - BM25_B + BM25_B * np.bincount(paper, title, minlength=n) / stats.avg_title
        abstract_norm = 1 - BM25_B + BM25_B * np.bincount(paper, abstract, minlength=n) / stats.avg_abstract
        tf = title * (title_weight / title_norm)[paper] + abstract * (1 / abstract_norm)[paper]
        weights = tf * (BM25_K1 + 1) / (tf + BM25_K1) * stats.idf()[self.cols][self.local]
        norms = np.sqrt(np.bincount(paper, weights * weights, minlength=n))
        norms[norms == 0] = 1.0
        mean = np.bincount(self.local, weights / norms[paper], minlength=len(self.cols)) / n
        kept = np.flatnonzero(mean)
        return paper, weights, norms, mean, kept, float(np.sqrt(mean[kept] @ mean[kept])) or 1.0

    def to_bytes(self) -> bytes:
        head = np.array([len(self.cols), len(self.indptr), len(self.local)], dtype="<i8")
        return self.MAGIC + b"".join(a.astype(t).tobytes() for a, t in (
            (head, "<i8"), (self.cols, "<i4"), (self.indptr, "<i8"), (self.local, "<i4"), (self.title, "<f4"),
            (self.abstract, "<f4")))

    @classmethod
    def from_bytes(cls, data: bytes) -> PaperTerms:
        """Read back `to_bytes`; ValueError for anything else."""
        start = len(cls.MAGIC)
        if data[:start] != cls.MAGIC or len(data) < start + 24:
            raise ValueError("not a papers' term counts")
        ncols, nptr, nent = (int(v) for v in np.frombuffer(data, dtype="<i8", count=3, offset=start))
        if min(ncols, nptr - 1, nent) < 0 or len(data) != start + 24 + 4 * ncols + 8 * nptr + 12 * nent:
            raise ValueError("papers' term counts of the wrong length")
        out, at = [], start + 24
        for count, kind in ((ncols, "<i4"), (nptr, "<i8"), (nent, "<i4"), (nent, "<f4"), (nent, "<f4")):
            out.append(np.frombuffer(data, dtype=kind, count=count, offset=at))
            at += count * np.dtype(kind).itemsize
        cols, indptr, local, title, abstract = out
        if (nent and (local.min() < 0 or local.max() >= ncols)) or (ncols and (cols.min() < 0 or cols.max(
                ) >= N_FEATURES)) or indptr[0] != 0 or indptr[-1] != nent or np.any(
                np.diff(indptr) < 0):
            raise ValueError("papers' term counts out of range")
        return cls(cols.astype(np.int32), indptr.astype(np.int64), local.astype(np.int32),
                   title.astype(np.float32), abstract.astype(np.float32))


def _row_sums(matrix: sp.csr_matrix) -> np.ndarray:
    return np.asarray(matrix.sum(axis=1), dtype=np.float64).ravel()


def unit_length(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """The rows scaled to unit Euclidean length (rows of zeros stay zero): scikit-learn's `normalize`,
    to the last bit (squares summed in row order, then divided), without importing scikit-learn."""
    matrix = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    squares = sp.csr_matrix((matrix.data * matrix.data, matrix.indices, matrix.indptr), shape=matrix.shape)
    norms = np.sqrt(squares @ np.ones(matrix.shape[1]))
    norms[norms == 0] = 1.0
    matrix.data /= np.repeat(norms, np.diff(matrix.indptr))
    return matrix
