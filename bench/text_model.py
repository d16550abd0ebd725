"""The built-in text model's speed: load time and papers embedded per second, int8 (shipped) and fp32, 1 and 2 threads.

    .venv/bin/python bench/text_model.py [--papers 400] [--rounds 3]

Real titles and abstracts from the arXiv sample, each embedded alone as the product does (256 word
pieces); `threads` texts at once, one core each. The fp32 column needs `bench/out/model-fp32.onnx`
(`tools/build_text_model.py --keep-fp32`). Figures are the median of --rounds, with min and max; the
machine is shared, so compare the rows of one run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.select.neural import TextModel, model_dir  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --data


def texts(path: str, count: int) -> list[str]:
    out = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            row = json.loads(line)
            out.append(f"{row['title']}. {row['abstract']}")
            if len(out) == count:
                break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", default=DEFAULT_DATA, required=not DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    args = parser.parse_args()
    sample = texts(args.data, args.papers)
    folders = {"int8": model_dir()}
    fp32 = ROOT / "bench" / "out" / "model-fp32.onnx"
    if fp32.exists():
        folder = Path(tempfile.mkdtemp())
        shutil.copy(fp32, folder / "model-int8.onnx")  # (the file name the loader reads)
        shutil.copy(model_dir() / "tokenizer.json", folder / "tokenizer.json")
        folders["fp32"] = folder
    print(f"{args.papers} real abstracts, each alone, {args.rounds} rounds (median [min, max])")
    print("| model | threads | size MB | load s | papers / s |")
    print("|---|---:|---:|---:|---:|")
    for name, folder in folders.items():
        size = (folder / "model-int8.onnx").stat().st_size / 2**20
        for threads in (1, 2):
            loads, speeds = [], []
            for _ in range(args.rounds):
                start = time.perf_counter()
                model = TextModel(threads, folder)
                loads.append(time.perf_counter() - start)
                start = time.perf_counter()
                model.embed(sample)
                speeds.append(len(sample) / (time.perf_counter() - start))
            print(f"| {name} | {threads} | {size:.0f} | {statistics.median(loads):.2f} | "
                  f"{statistics.median(speeds):.1f} [{min(speeds):.1f}, {max(speeds):.1f}] |", flush=True)


if __name__ == "__main__":
    main()
