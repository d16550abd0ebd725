"""Build the background term statistics shipped with the package (`digest/data/background.npz`).

    .venv/bin/python bench/build_background.py [--data ../shared/data/arxiv_sample.jsonl.gz] [--min-df 2]

Document frequencies of every hashed term (words, bigrams, stems: `digest.select.text`) over the
45,256 papers of the arXiv sample, and their mean title and abstract lengths. Terms found in fewer
than --min-df papers are left out (a term the background lacks counts as unseen, the rarest there
is), which keeps the file near one MB. Rebuild it when the analyzer changes (text.ANALYZER_VERSION).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.select.corpus import CorpusStats  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "/work/shared/data/arxiv_sample.jsonl.gz")
OUT = ROOT / "digest" / "data" / "background.npz"


def rows(path: str):
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            row = json.loads(line)
            yield n + 1, row.get("title") or "", row.get("abstract") or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--min-df", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    stats = CorpusStats()
    count = stats.add_texts(rows(args.data))
    stats.max_id = 0  # store ids mean nothing outside the store that counted them
    data = stats.to_bytes(min_df=args.min_df)
    args.out.write_bytes(data)
    kept = int((stats.df >= args.min_df).sum())
    print(f"{count} papers, {int((stats.df > 0).sum())} hashed terms, {kept} kept (df >= {args.min_df}): "
          f"{args.out} {len(data) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
