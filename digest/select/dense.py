"""Dense similarity in the default install: WordLlama static embeddings (numpy only, no PyTorch).

The package `wordllama` ships its 256-dimension "l2_supercat" token embeddings and tokenizer inside
the wheel; they are loaded from the package folder with downloads disabled, so nothing is fetched at
run time. A text's embedding is the pooled embedding of its tokens (about a thousand papers a second
on one core here). A paper's embedding is computed once and kept in the store, keyed by the paper
and MODEL_NAME; so is an interest's (its name, keywords and description), keyed by a hash of its
text, so that a daily run reads its subscribers' interests back instead of embedding them again, and
a process keeps the last MEMO_TEXTS it used.

How it enters the relevance: each interest's cosine similarities over the pool are standardised
(z-scores over the pool) and `select.dense_weight` × z is added to the interest's calibrated log-odds
(`rank.py`). Measurements and the choice of the weight: BENCHMARKS.md, issue 11.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..models import Paper

if TYPE_CHECKING:
    from ..store import Store

MODEL_NAME = "wordllama-l2-supercat-256"
BATCH = 256
DIM = 256
MEMO_TEXTS = 50_000  # query texts' embeddings a process keeps in memory (1 kB each)


@cache  # read-only once loaded: every embedder of the process (and its forked workers) shares one
def load_model() -> Any:
    """The WordLlama model shipped in the `wordllama` package, loaded without any download."""
    try:
        import wordllama
    except ImportError as exc:
        raise ConfigError("select.dense_weight is set but the package wordllama is missing: "
                          "pip install wordllama (or set select.dense_weight = 0)") from exc
    # wordllama 0.4 looks for its tokenizer in wordllama/tokenizer/ but ships it in tokenizers/: naming
    # the package folder as the cache finds both files there, and disable_download makes a miss an error.
    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


def paper_text(paper: Paper) -> str:
    return f"{paper.title}. {paper.abstract}"


def text_key(text: str) -> str:
    """A query text's key in the store's embeddings table (beside the papers' keys, which have no `text:`)."""
    return "text:" + hashlib.sha256(text.encode()).hexdigest()[:40]


class DenseEmbedder:
    """Unit-length embeddings of papers (cached in the store) and of query texts (cached in memory)."""

    def __init__(self, store: Store | None = None, model: Any = None) -> None:
        self._model = model
        self.store = store
        self._texts: dict[str, np.ndarray] = {}
        self._papers: dict[str, np.ndarray] = {}

    @property
    def model(self) -> Any:
        if self._model is None:  # loaded on first use: ingest, status and the web pages never need it
            self._model = load_model()
        return self._model

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        out = [np.asarray(self.model.embed(list(texts[i:i + BATCH]), norm=True), dtype=np.float32)
               for i in range(0, len(texts), BATCH)]
        return np.vstack(out) if out else np.zeros((0, DIM), dtype=np.float32)

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of query texts (an interest's words): from memory, else the store, else computed (and stored)."""
        found = {t: self._texts[t] for t in dict.fromkeys(texts) if t in self._texts}
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing and self.store is not None:
            keys = {text_key(t): t for t in missing}
            found.update((keys[k], v) for k, v in self.store.embeddings(list(keys), MODEL_NAME).items())
            missing = [t for t in missing if t not in found]
        if missing:
            computed = dict(zip(missing, self._encode(missing), strict=True))
            if self.store is not None:
                self.store.put_embeddings({text_key(t): v for t, v in computed.items()}, MODEL_NAME)
            found.update(computed)
        for text, vector in found.items():
            self._texts.pop(text, None)  # most recently used last
            self._texts[text] = vector
        while len(self._texts) > MEMO_TEXTS:
            del self._texts[next(iter(self._texts))]
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        return np.vstack([found[t] for t in texts])

    def papers(self, papers: Sequence[Paper]) -> np.ndarray:
        """Embeddings of papers: from memory, else the store, else computed (and stored)."""
        if not papers:
            return np.zeros((0, DIM), dtype=np.float32)
        keys = [p.key for p in papers]
        wanted = [k for k in dict.fromkeys(keys) if k not in self._papers]
        if wanted and self.store is not None:
            self._papers.update(self.store.embeddings(wanted, MODEL_NAME))
        missing = [n for n, key in enumerate(keys) if key not in self._papers]
        if missing:
            fresh = self._encode([paper_text(papers[n]) for n in missing])
            computed = {keys[n]: fresh[j] for j, n in enumerate(missing)}
            if self.store is not None:
                self.store.put_embeddings(computed, MODEL_NAME)
            self._papers.update(computed)
        return np.vstack([np.asarray(self._papers[key], dtype=np.float32) for key in keys])
