"""Text analysis shared by documents and queries: stemmed words, bigrams, hashed term columns.

Documents and queries go through the same analyzer. Each word is kept in two forms: lightly
stemmed (plurals only: *kernels* → *kernel*, *LLMs* → *LLM*), which is what words and bigrams are
built from, and Snowball-stemmed with a `~` prefix (*caching* → `~cach`). A query counts the stem
form at `STEM_WEIGHT`: Snowball alone conflates too much (*distributed* and *distribution* are both
`distribut`, which made a "distributed systems" profile match every paper about probability
distributions), the light form alone misses *caching* for *cache*. Stop words are dropped before
bigrams are formed, so *mixture of experts* and *mixture-of-experts* both give `mixture expert`.

Terms are hashed into a fixed number of columns, so no vocabulary has to be kept or fitted: term
statistics from the whole store and the matrix of one day's pool share columns by construction.
The hash is scikit-learn's FeatureHasher's (MurmurHash3 of the UTF-8 bytes, seed 0, |h| mod
N_FEATURES), computed here with numpy for many terms at once: the shipped background statistics and
every store's cached ones were made with it, and importing scikit-learn takes most of a second. The
stop words are scikit-learn's English list (tests check both against scikit-learn).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import numpy as np
import scipy.sparse as sp
import snowballstemmer

N_FEATURES = 2**20  # hashed term columns; collisions at this size touch only very rare bigrams
ANALYZER_VERSION = "light-bigram-stem-1"  # part of the cache key of stored term statistics
STEM_WEIGHT = 0.6  # how much a Snowball-stem match counts next to a match of the word itself

_WORD = re.compile(r"[a-z0-9]+")
_ACRONYM_PLURAL = re.compile(r"\b([A-Z][A-Z0-9]*[A-Z0-9])s\b")  # LLMs → LLM, GPUs → GPU
_STEMMER = snowballstemmer.stemmer("english")
STOP_WORDS = frozenset("""
    a about above across after afterwards again against all almost alone along already also although always am
    among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at back
    be became because become becomes becoming been before beforehand behind being below beside besides between
    beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do done down
    due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone everything
    everywhere except few fifteen fifty fill find fire first five for former formerly forty found four from front
    full further get give go had has hasnt have he hence her here hereafter hereby herein hereupon hers herself
    him himself his how however hundred i ie if in inc indeed interest into is it its itself keep last latter
    latterly least less ltd made many may me meanwhile might mill mine more moreover most mostly move much must my
    myself name namely neither never nevertheless next nine no nobody none noone nor not nothing now nowhere of
    off often on once one only onto or other others otherwise our ours ourselves out over own part per perhaps
    please put rather re same see seem seemed seeming seems serious several she should show side since sincere six
    sixty so some somehow someone something sometime sometimes somewhere still such system take ten than that the
    their them themselves then thence there thereafter thereby therefore therein thereupon these they thick thin
    third this those though three through throughout thru thus to together too top toward towards twelve twenty
    two un under until up upon us very via was we well were what whatever when whence whenever where whereafter
    whereas whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why will
    with within without would yet you your yours yourself yourselves
""".split())  # noqa: SIM905 - 318 words read better as text; scikit-learn's ENGLISH_STOP_WORDS (from the Glasgow Information Retrieval Group's list)
_STOP = STOP_WORDS


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
    found = hashed_columns(list(items))
    found.flags.writeable = False
    return found


def count_matrix(texts: Iterable[str]) -> sp.csr_matrix:
    """Term counts of each text (rows) in hashed columns."""
    distinct: dict[str, int] = {}  # each distinct term hashed once
    cols: list[int] = []
    indptr = [0]
    for text in texts:
        cols += [distinct.setdefault(term, len(distinct)) for term in terms(text)]
        indptr.append(len(cols))
    column = hashed_columns(list(distinct))[np.array(cols, dtype=np.int64)]
    counts = sp.csr_matrix((np.ones(len(cols)), column, np.array(indptr)), shape=(len(indptr) - 1, N_FEATURES))
    counts.sum_duplicates()  # sorted columns, a term's occurrences counted (FeatureHasher's output exactly)
    return counts


_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)
_MASK = 0xFFFFFFFF
SMALL = 64  # fewer keys than this are hashed one by one in Python (numpy's per-call overhead dominates)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))  # type: ignore[no-any-return]


def murmurhash3_32(keys: Sequence[bytes]) -> np.ndarray:
    """MurmurHash3 (x86, 32 bits, seed 0) of each byte string, as signed 32-bit integers."""
    if len(keys) < SMALL:
        return np.array([_murmur(k) for k in keys], dtype=np.uint32).view(np.int32)
    # Longest keys first: block b is mixed into the first `active[b]` rows only.
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    order = np.argsort(-lengths, kind="stable")
    lengths = lengths[order]
    n = len(keys)
    width = 4 * (int(lengths[0]) // 4 + 1)
    padded = np.zeros((n, width), dtype=np.uint8)  # each key's bytes, then zeros
    row = np.repeat(np.arange(n), lengths)
    padded[row, np.arange(len(row)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = \
        np.frombuffer(b"".join(keys[i] for i in order.tolist()), dtype=np.uint8)
    words = padded.view("<u4")
    h = np.zeros(n, dtype=np.uint32)
    with np.errstate(over="ignore"):
        for b in range(words.shape[1]):
            full = int(np.searchsorted(-lengths, -4 * (b + 1), side="right"))  # keys with a whole block b
            tail = int(np.searchsorted(-lengths, -4 * b, side="left"))  # ... and those ending inside it
            k = _rotl(words[:tail, b] * _C1, 15) * _C2
            h[:tail] ^= k  # the last 1-3 bytes (zero-padded) are mixed in without the rotation
            h[:full] = _rotl(h[:full], 13) * np.uint32(5) + np.uint32(0xE6546B64)
        h ^= lengths.astype(np.uint32)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    out = np.empty(n, dtype=np.uint32)
    out[order] = h
    return out.view(np.int32)


def _murmur(key: bytes) -> int:
    """`murmurhash3_32` of one key (unsigned), in plain Python."""
    h, n = 0, len(key)
    end = n - n % 4
    for start in range(0, end, 4):
        k = int.from_bytes(key[start:start + 4], "little") * 0xCC9E2D51 & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= k * 0x1B873593 & _MASK
        h = ((h << 13) | (h >> 19)) & _MASK
        h = (h * 5 + 0xE6546B64) & _MASK
    if end < n:
        k = int.from_bytes(key[end:], "little") * 0xCC9E2D51 & _MASK
        k = ((k << 15) | (k >> 17)) & _MASK
        h ^= k * 0x1B873593 & _MASK
    h ^= n
    h ^= h >> 16
    h = h * 0x85EBCA6B & _MASK
    h ^= h >> 13
    h = h * 0xC2B2AE35 & _MASK
    return h ^ (h >> 16)


def hashed_columns(items: Sequence[str]) -> np.ndarray:
    """Each term's column: |MurmurHash3 of its UTF-8 bytes| mod N_FEATURES, as FeatureHasher has it."""
    if len(items) < SMALL:  # a keyword's few terms: each term's column kept, terms recur across keywords
        return np.array([_column(t) for t in items], dtype=np.int64)
    h = murmurhash3_32([t.encode("utf-8") for t in items]).astype(np.int64)
    # FeatureHasher maps -2**31 to (2**31 - N_FEATURES) % N_FEATURES: the same as |-2**31| % N_FEATURES,
    # N_FEATURES being a power of two
    return np.abs(h) % N_FEATURES


@lru_cache(maxsize=500_000)
def _column(term: str) -> int:
    """`hashed_columns` of one term, in plain Python."""
    h = _murmur(term.encode("utf-8"))
    return abs(h - (1 << 32) if h >= 1 << 31 else h) % N_FEATURES


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
