"""The send path's selector: `select_many` per batch against `select_digest` one by one, in CPU ms per digest.

    .venv/bin/python bench/select_many.py [--subscribers 10000] [--baseline 500] [--batch 100] [--feedback]
    .venv/bin/python bench/select_many.py --profile [--subscribers 2000]   # cProfile of select_many's batches

The end-to-end bench's workload (`e2e_site.py`): the 1,000 arXiv papers listed up to its day, its generated
profiles (1–3 interests from the topic table, every tenth trending-only), the text model on as in a default
install, the interests' profiles already at hand (a store keeps them from one run to the next). With
--feedback, every third subscriber has received 5 papers of the pool and marked a few (their models learned
beforehand, as a run reads them from the store). Each way gets its own pool, warmed by one digest, so what
is timed is the per-digest cost of a run (the pool's analysis is paid once per run either way): `select_many`
on every subscriber in batches of --batch (a send run's delivery.batch_size), then `select_digest` on the
first --baseline, whose digests are checked to be the same as the batch's.

CPU time counts OpenBLAS's worker threads, which spin while they wait: on a busy two-core machine the dense
similarity's matrix product (one per batch) took four times the CPU with them as without. Run it as well
with OPENBLAS_NUM_THREADS=1 to see the selector's own cost (and what single-threaded send workers would pay).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import random
import sys
import time
from dataclasses import replace
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import e2e_site  # noqa: E402

from digest.models import Digest, Interest, Paper, Subscriber  # noqa: E402
from digest.select import Pool, SelectSettings, Signals, select_digest, select_many  # noqa: E402
from digest.select.dense import DenseEmbedder  # noqa: E402
from digest.select.scores import feedback_model  # noqa: E402
from digest.sources.jsonl import paper_of_object  # noqa: E402

SAMPLE = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --data
DAY = date(2026, 6, 30)  # bench/e2e.py's default day


def load_papers(sample: Path, day: date) -> list[Paper]:
    rows = e2e_site.day_papers(sample, day)
    return [replace(paper_of_object(row, seen_on=day), store_id=n + 1) for n, row in enumerate(rows)]


def make_subscribers(n: int, sample: Path, day: date, seed: int) -> list[Subscriber]:
    """The e2e site's profiles, as the roster would read them."""
    vocabulary = e2e_site.title_vocabulary(sample)
    return [Subscriber(email=p["email"], max_papers=p["max_papers"],  # type: ignore[arg-type]
                       interests=tuple(Interest(i["name"], tuple(i["keywords"]), i["weight"])
                                       for i in p["interests"]))  # type: ignore[attr-defined]
            for p in e2e_site.profiles(n, vocabulary, day, seed)]


def make_signals(subscribers: list[Subscriber], pool: Pool, settings: SelectSettings, feedback: bool,
                 seed: int) -> dict[str, Signals]:
    """No history; with `feedback`, every third subscriber with 5 received papers, 3 liked and 1 disliked, and
    the model learned from them (a send run reads it from the store's cache: `learn.with_models`)."""
    rng = random.Random(seed)
    out = {}
    for n, sub in enumerate(subscribers):
        sig = Signals()
        if feedback and n % 3 == 0:
            marked = rng.sample(pool.papers, 4)
            sig = Signals(received=frozenset(p.store_id for p in rng.sample(pool.papers, 5)),  # type: ignore[misc]
                          liked=tuple(marked[:3]), disliked=tuple(marked[3:]))
            sig = replace(sig, model=feedback_model(pool, sub, sig, settings))
        out[sub.email] = sig
    return out


def fresh_pool(papers: list[Paper], settings: SelectSettings, embedder: DenseEmbedder, day: date) -> Pool:
    """A pool analysed and warmed by one digest, as it is after the first batch of a run."""
    pool = Pool(papers, dense=embedder)
    select_digest(pool, Subscriber("warm@example.org", interests=(Interest("warm", ("model",)),)), day=day,
                  settings=settings)
    return pool


def batched(pool: Pool, subscribers: list[Subscriber], signals: dict[str, Signals], day: date,
            settings: SelectSettings, size: int, keep: int = 0) -> list[Digest]:
    """Every subscriber's digest a batch at a time; the first `keep` digests are returned, the others dropped
    as a send run drops them once rendered (holding 10,000 would slow the garbage collector down)."""
    out: list[Digest] = []
    for start in range(0, len(subscribers), size):
        batch = subscribers[start:start + size]
        digests = select_many(pool, batch, day=day, settings=settings,
                              signals={s.email: signals[s.email] for s in batch})
        out += digests[: max(0, keep - start)]
    return out


def picks(digest: Digest) -> list[tuple[str, int | None, float, tuple[str, ...]]]:
    return [(s.name, i.paper.store_id, i.score, i.reasons) for s in digest.sections for i in s.items]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=500, help="subscribers ranked one by one")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--feedback", action="store_true")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", action="store_true", help="cProfile select_many instead of comparing")
    parser.add_argument("--data", type=Path, default=Path(SAMPLE) if SAMPLE else None, required=not SAMPLE,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    args = parser.parse_args()
    settings = SelectSettings()
    papers = load_papers(args.data, DAY)
    subscribers = make_subscribers(args.subscribers, args.data, DAY, args.seed)
    embedder = DenseEmbedder()  # one model for both ways; query embeddings are kept in memory, as in a run
    signals = make_signals(subscribers, Pool(papers, dense=embedder), settings, args.feedback, args.seed)
    # the interests' profiles made beforehand, as the store keeps them from one run to the next
    embedder.interests([i for s in subscribers for i in s.interests])
    pool = fresh_pool(papers, settings, embedder, DAY)
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(batched, pool, subscribers, signals, DAY, settings, args.batch)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(35)
        return
    start = time.process_time()
    many = batched(pool, subscribers, signals, DAY, settings, args.batch, keep=args.baseline)
    many_ms = (time.process_time() - start) * 1000 / len(subscribers)
    pool = fresh_pool(papers, settings, embedder, DAY)
    chosen = subscribers[: args.baseline]
    start = time.process_time()
    one = [select_digest(pool, s, day=DAY, settings=settings, signals=signals[s.email]) for s in chosen]
    one_ms = (time.process_time() - start) * 1000 / len(chosen)
    same = sum(picks(a) == picks(b) for a, b in zip(one, many, strict=False))
    print(f"papers: {len(papers)}")
    print(f"subscribers: {len(subscribers)} (batches of {args.batch}{', with feedback' if args.feedback else ''})")
    print(f"select_many_ms_per_digest: {many_ms:.3f}")
    print(f"select_digest_ms_per_digest: {one_ms:.3f} (first {len(chosen)})")
    print(f"ratio: {one_ms / many_ms:.1f}")
    print(f"same_digests: {same}/{len(chosen)}")


if __name__ == "__main__":
    main()
