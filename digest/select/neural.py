"""The built-in sentence-embedding model: all-MiniLM-L6-v2, int8, run by ONNX Runtime (no PyTorch).

The model and its tokenizer are package data (`digest/data/text_model/`, built and checked against
the original weights by `tools/build_text_model.py`; licence and digests beside them), so nothing is
downloaded at run time. A text is cut at MAX_TOKENS word pieces (the model's own limit), embedded
and mean-pooled; every vector has unit length, so a dot product is a cosine similarity.

Each text is embedded on its own, never padded into a batch: the int8 model quantises its
activations per call (dynamic quantisation), so a padded batch would shift a text's vector by up to
0.007 in cosine depending on its neighbours; alone, a text has one vector whatever else is embedded
(and batching measured no faster here). `threads` texts are embedded at once, one core each
(default: all cores, for an ingest; a send never embeds papers, it reads their vectors from the store).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from digest.errors import ConfigError

MODEL_NAME = "all-MiniLM-L6-v2-int8"  # the store's embeddings are keyed by this: a new model, new vectors
DIM = 384
MAX_TOKENS = 256
BATCH = 32
MAX_CHARS = 4000  # a text's first characters only: 256 word pieces never need more, and a huge abstract costs nothing
MEMO = 20_000  # texts whose embeddings a model keeps in memory


def model_dir() -> Path:
    return Path(str(resources.files("digest.data").joinpath("text_model")))


class TextModel:
    """Unit-length embeddings of texts (rows), batched; loaded once per process (`load`)."""

    def __init__(self, threads: int | None = None, path: Path | None = None) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are dependencies of the package
            raise ConfigError(f"the text model needs onnxruntime and tokenizers: {exc}") from exc
        folder = path or model_dir()
        self.threads = threads or max(os.cpu_count() or 1, 1)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # texts run side by side instead (see the module doc)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(folder / "model-int8.onnx"), options,
                                                providers=["CPUExecutionProvider"])
            self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        except Exception as exc:  # noqa: BLE001 - a missing or damaged install is a configuration problem
            raise ConfigError(f"the built-in text model in {folder} cannot be loaded ({exc}); reinstall paper-digest"
                              ) from exc
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.no_padding()
        self._memo: dict[str, np.ndarray] = {}  # the last MEMO texts embedded (a process opening several stores)

    def embed(self, texts: Sequence[str], *, batch: int = BATCH,
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Embeddings of `texts` (len(texts) × DIM, float32, unit rows); `progress` is told of each batch done."""
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        todo = []
        for n, text in enumerate(texts):
            found = self._memo.get(text)
            if found is None:
                todo.append(n)
            else:
                out[n] = found
        if todo:
            fresh = self._embed([texts[n] for n in todo], batch, progress)
            out[todo] = fresh
            for n, vector in zip(todo, fresh, strict=True):
                self._memo[texts[n]] = vector
            while len(self._memo) > MEMO:
                del self._memo[next(iter(self._memo))]
        return out

    def _embed(self, texts: Sequence[str], batch: int, progress: Callable[[int], None] | None) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        encoded = self.tokenizer.encode_batch([t[:MAX_CHARS] for t in texts])

        def one(n: int) -> None:
            ids = np.array([encoded[n].ids], dtype=np.int64)
            out[n] = self.session.run(None, {"input_ids": ids, "attention_mask": np.ones_like(ids)})[0][0]

        if self.threads > 1 and len(texts) > 1:
            from concurrent.futures import ThreadPoolExecutor  # ONNX Runtime lets go of the GIL while it runs

            with ThreadPoolExecutor(self.threads) as pool:
                for start in range(0, len(texts), batch):
                    list(pool.map(one, range(start, min(start + batch, len(texts)))))
                    if progress is not None:
                        progress(min(batch, len(texts) - start))
        else:
            for start in range(0, len(texts), batch):
                for n in range(start, min(start + batch, len(texts))):
                    one(n)
                if progress is not None:
                    progress(min(batch, len(texts) - start))
        return out


@cache  # one per process and thread count: loading takes a fraction of a second, and workers share it after a fork
def load(threads: int | None = None) -> TextModel:
    return TextModel(threads)
