"""What readers with libraries of their own cost a send's selection, against readers of keywords in the same run.

    .venv/bin/python bench/library_readers.py [--readers 2000]

N readers, each with a library of 10 papers of the arXiv sample (as `seed_papers` the store holds), and N readers
with keyword interests (a topic's keywords from the sample's titles), over a pool of 1,000 papers of the sample,
selected with `select_many` as a send does. The store is a SQLite file in a temporary folder: a first process state
makes and keeps every library's profile and words (what the first send after a library is made does), then a fresh
embedder, as the next send's process has, reads them back; that second selection is the steady cost. Figures: CPU
seconds of each selection, per reader, and the ratio of a library reader to a keyword reader.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ranking as bench  # noqa: E402

from digest.models import Interest, Subscriber  # noqa: E402
from digest.select import Pool, SelectSettings, Signals, select_many  # noqa: E402
from digest.store import Store  # noqa: E402

DAY = date(2026, 6, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sample = bench.load()
    bench.load_vectors(sample)
    rng = random.Random(args.seed)
    papers = [replace(sample.papers[n], listed_on=DAY, published=DAY) for n in rng.sample(range(len(sample.papers)),
                                                                                          1000)]
    corpus = bench.Ours(sample).corpus
    words = sorted({w for p in sample.papers[:5000] for w in p.title.lower().split() if len(w) > 6})
    libraries, keywords, signals = [], [], {}
    for i in range(args.readers):
        library = [sample.papers[n] for n in rng.sample(range(len(sample.papers)), 10)]
        refs = tuple(p.arxiv_id or p.title for p in library)
        libraries.append(Subscriber(email=f"lib{i}@example.org", interests=(Interest("Mine", seed_papers=refs),)))
        signals[libraries[-1].email] = Signals(seeds=dict(zip(refs, library, strict=True)))
        keywords.append(Subscriber(email=f"kw{i}@example.org",
                                   interests=(Interest("Topic", tuple(rng.sample(words, 3))),)))
        signals[keywords[-1].email] = Signals()
    store = Store(f"sqlite:///{tempfile.mkdtemp()}/bench.db")
    timings: dict[str, float] = {}
    for label in ("first", "steady"):
        for kind, readers in (("libraries", libraries), ("keywords", keywords)):
            embedder = bench.sample_embedder(sample)
            embedder.store = store  # type: ignore[attr-defined]
            pool = Pool(papers, corpus, dense=embedder)
            start = time.process_time()
            found = select_many(pool, readers, day=DAY, settings=SelectSettings(), signals=signals)
            timings[f"{label} {kind}"] = spent = time.process_time() - start
            print(f"{label:6} {kind:9}: {spent:6.2f} s CPU, {1000 * spent / len(readers):5.2f} ms a reader, "
                  f"{sum(d.count for d in found):,} papers picked", flush=True)
    print(f"steady: a library reader costs {timings['steady libraries'] / timings['steady keywords']:.2f} times a "
          f"keyword reader; peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
