"""Text analysis shared by documents and queries: stemmed words, bigrams, hashed term columns.

Documents and queries go through the same analyzer. Each word is kept in two forms: lightly
stemmed (plurals only: *kernels* → *kernel*, *LLMs* → *LLM*), which is what words and bigrams are
built from, and Snowball-stemmed with a `~` prefix (*caching* → `~cach`). A query counts the stem
form at `STEM_WEIGHT`: Snowball alone conflates too much (*distributed* and *distribution* are both
`distribut`, which made a "distributed systems" profile match every paper about probability
distributions), the light form alone misses *caching* for *cache*. Stop words are dropped before
bigrams are formed, so *mixture of experts* and *mixture-of-experts* both give `mixture expert`.

Terms are hashed into a fixed number of columns (scikit-learn's FeatureHasher), so no vocabulary
has to be kept or fitted: term statistics from the whole store and the matrix of one day's pool
share columns by construction.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
import snowballstemmer
from sklearn.feature_extraction import FeatureHasher
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

N_FEATURES = 2**20  # hashed term columns; collisions at this size touch only very rare bigrams
ANALYZER_VERSION = "light-bigram-stem-1"  # part of the cache key of stored term statistics
STEM_WEIGHT = 0.6  # how much a Snowball-stem match counts next to a match of the word itself

_WORD = re.compile(r"[a-z0-9]+")
_ACRONYM_PLURAL = re.compile(r"\b([A-Z][A-Z0-9]*[A-Z0-9])s\b")  # LLMs → LLM, GPUs → GPU
_STOP = frozenset(ENGLISH_STOP_WORDS)
_STEMMER = snowballstemmer.stemmer("english")
_HASHER = FeatureHasher(N_FEATURES, input_type="string", alternate_sign=False)


@lru_cache(maxsize=500_000)
def _stem(word: str) -> str:
    return "~" + str(_STEMMER.stemWord(word))


@lru_cache(maxsize=500_000)
def _light(word: str) -> str:
    """A plural made singular (S-stemmer): studies → study, boxes → box, kernels → kernel."""
    if len(word) > 4 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("us", "ss", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case words without stop words, an acronym's plural made singular."""
    text = _ACRONYM_PLURAL.sub(r"\1", text).lower()
    return [w for w in _WORD.findall(text) if len(w) > 1 and w not in _STOP]


def tokens(text: str) -> tuple[str, ...]:
    """The lightly stemmed words of a text, so that kernel/kernels and LLM/LLMs match."""
    return tuple(_light(w) for w in words(text))


def stems(text: str) -> tuple[str, ...]:
    """The Snowball stems of a text's words, so that cache/caching match (weakly)."""
    return tuple(_stem(w) for w in words(text))


def bigrams(words: Sequence[str]) -> list[str]:
    """Adjacent word pairs, the phrase terms ("kv cache")."""
    return [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]


def terms(text: str) -> list[str]:
    """Every term of a text: its words, their bigrams, and their Snowball stems."""
    found = words(text)
    light = [_light(w) for w in found]
    return [*light, *bigrams(light), *(_stem(w) for w in found)]


def columns(items: Iterable[str]) -> np.ndarray:
    """The hashed column of each term, in order."""
    return _columns(tuple(items))


@lru_cache(maxsize=100_000)
def _columns(items: tuple[str, ...]) -> np.ndarray:
    # Cached: explaining a digest asks for the same keywords' columns again and again.
    if not items:
        return np.zeros(0, dtype=np.int64)
    row = _HASHER.transform([[term] for term in items])
    found = np.asarray(row.indices, dtype=np.int64)
    found.flags.writeable = False
    return found


def count_matrix(texts: Iterable[str]) -> sp.csr_matrix:
    """Term counts of each text (rows) in hashed columns."""
    rows = [terms(text) for text in texts]
    if not rows:
        return sp.csr_matrix((0, N_FEATURES), dtype=np.float64)
    return sp.csr_matrix(_HASHER.transform(rows), dtype=np.float64)


@lru_cache(maxsize=10_000)
def surface_forms(text: str) -> dict[str, str]:
    """Each light form of `text`'s words mapped to the first word it came from, to show terms as written."""
    text = _ACRONYM_PLURAL.sub(r"\1", text)
    forms: dict[str, str] = {}
    for word in re.findall(r"[A-Za-z0-9]+", text):
        lower = word.lower()
        if len(lower) > 1 and lower not in _STOP:
            forms.setdefault(_light(lower), word)
    return forms
