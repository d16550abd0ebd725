"""Embed the whole arXiv sample once with the built-in text model, for the ranking benchmarks.

    .venv/bin/python bench/embed_sample.py [--max-tokens 256] [--threads 2]

Writes bench/out/sample-<model>-<tokens>.npy (45,256 × 384 float16, rows in the sample's line order),
which `bench/ranking.py` reads instead of embedding the sample again (about 20 minutes here).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.select.neural import MODEL_NAME, TextModel  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --data


def cache_path(max_tokens: int) -> Path:
    return ROOT / "bench" / "out" / f"sample-{MODEL_NAME}-{max_tokens}.npy"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=DEFAULT_DATA, required=not DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    args = parser.parse_args()
    texts = []
    with gzip.open(args.data, "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            texts.append(f"{row['title']}. {row['abstract']}")
    model = TextModel(args.threads)
    model.tokenizer.enable_truncation(args.max_tokens)
    out = np.zeros((len(texts), 384), dtype=np.float16)  # (each text alone: see digest.select.neural)
    start, step = time.perf_counter(), 2048
    for lo in range(0, len(texts), step):
        out[lo:lo + step] = model.embed(texts[lo:lo + step])
        done = min(lo + step, len(texts))
        print(f"{done}/{len(texts)} {done / (time.perf_counter() - start):.1f} papers/s", flush=True)
    path = cache_path(args.max_tokens)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    print("written", path)


if __name__ == "__main__":
    main()
