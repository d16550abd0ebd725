"""Term statistics of the whole store (document frequencies, field lengths) and BM25F weights.

A keyword's weight depends on how rare it is, and a day's pool of a few hundred papers is too small
to say that: *diffusion* may be in a third of today's papers and still be a distinctive word. So
the inverse document frequencies come from every paper in the store. They are kept in the store as
one cached blob and brought up to date with the papers added since, once per run.

A new install's store holds a few hundred papers, too few to say which words are rare. So the
package ships background statistics (`digest/data/background.npz`, document frequencies of the 7,471
papers of the arXiv sample that no ranking benchmark draws from, built by `bench/build_background.py`),
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

from ..models import Paper
from .text import ANALYZER_VERSION, N_FEATURES, count_matrix

BM25_K1 = 1.2  # term-frequency saturation: the 2nd mention adds less than the 1st, the 5th little
BM25_B = 0.75  # how much a long abstract's counts are discounted
BACKGROUND_DOCS = 7_471  # documents the shipped background statistics count at most (a fresh store)
BACKGROUND_HALF = 5_000  # store size at which the background weighs half as much as on a fresh install


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
