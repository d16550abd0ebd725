"""Build the background data shipped with the package: term statistics and reference embeddings.

    .venv/bin/python tools/build_background.py [--data SAMPLE.jsonl.gz] [--min-df 2]

Both come from the papers of the arXiv sample listed before RESERVED_BEFORE (2025-06-01, 7,471
papers), which no ranking benchmark draws a pool or a library from (`bench/ranking.py`), so the
benchmarks measure how they transfer to papers they have not seen.

- `digest/data/background.npz`: document frequencies of every hashed term (words, bigrams, stems:
  `digest.select.text`) and the mean title and abstract lengths. Terms found in fewer than --min-df
  papers are left out (a term the background lacks counts as unseen, the rarest there is). Rebuild it
  when the analyzer changes (text.ANALYZER_VERSION).
- `digest/data/reference.npz`: the built-in text model's embeddings of every one of them (float16),
  and their mean embedding. An interest's similarities are read against the
  reference papers (`digest.select.vectors`); rebuild it when the text model changes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.select.corpus import CorpusStats  # noqa: E402
from digest.select.neural import MODEL_NAME, load  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --data
OUT = ROOT / "digest" / "data"
RESERVED_BEFORE = date(2025, 6, 1)  # the same as bench/ranking.py's


def reserved(path: str) -> list[tuple[int, str, str]]:
    """(sample line number + 1, title, abstract) of the papers listed before RESERVED_BEFORE."""
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            row = json.loads(line)
            if date.fromisoformat(row["listing_date"]) < RESERVED_BEFORE:
                out.append((n + 1, row.get("title") or "", row.get("abstract") or ""))
    return out


def vectors_of(rows: list[tuple[int, str, str]]) -> np.ndarray:
    """The papers' embeddings: from bench/embed_sample.py's cache when it is there, else computed."""
    cache = ROOT / "bench" / "out" / f"sample-{MODEL_NAME}-256.npy"
    if cache.exists():
        return np.load(cache)[[n - 1 for n, _, _ in rows]].astype(np.float32)
    return load().embed([f"{title}. {abstract}" for _, title, abstract in rows])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, required=not DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--min-df", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rows = reserved(args.data)
    stats = CorpusStats()
    count = stats.add_texts(iter(rows))
    stats.max_id = 0  # store ids mean nothing outside the store that counted them
    data = stats.to_bytes(min_df=args.min_df)
    (args.out / "background.npz").write_bytes(data)
    kept = int((stats.df >= args.min_df).sum())
    print(f"{count} papers, {int((stats.df > 0).sum())} hashed terms, {kept} kept (df >= {args.min_df}): "
          f"background.npz {len(data) / 2**20:.2f} MiB")
    vectors = vectors_of(rows)
    np.savez_compressed(args.out / "reference.npz", model=np.array(MODEL_NAME),
                        mean=vectors.mean(axis=0).astype(np.float32), vectors=vectors.astype(np.float16))
    size = (args.out / "reference.npz").stat().st_size
    print(f"reference.npz: {len(rows)} papers' embeddings, {size / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
