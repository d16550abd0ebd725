"""Ranking throughput: one pool of real papers for many generated subscribers (`ranking.py --scale`).

Subscribers have 1–3 interests from the topic table, each a random subset of its keywords plus one
word of their own drawn from the 5,000 commonest title words (so distinct keywords number in the
thousands, as real profiles would). Every tenth subscriber is trending-only. Half of those with
interests have clicked: they carry a learned model (`learn.FeedbackModel`: weights and a Rocchio
direction in the text model's space, as a model learned from their clicks would have) and a few
received papers. With the text model (the default) every interest's profile is made first, as an
import makes them, and kept in a throwaway SQLite store's cache (timed apart: it is not a send's
work); a send reads them back a chunk of subscribers at a time.
Timed: building the pool index, then `rank_many` (the sparse products, the text model's exact
products, the fusion and calibration, the learned models, the top 10 per subscriber) for the first
10,000 subscribers and for all of them; memory: the peak traced by tracemalloc during a second run of
each ranking (numpy and scipy report their buffers to it; tracing slows Python down, so the timed run
is untraced) and the process's peak resident size. With `--workers N` the same subscribers are also ranked split
over N processes forked after the pool is built (each with one BLAS thread, as `digest send --workers N` runs its
workers; the profile store's connections closed before the fork), timed from the fork to the last share's top 10s
back in the parent, and checked to be the one-process run's top 10s.
"""

from __future__ import annotations

import random
import resource
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Sequence
from datetime import date
from typing import Any

import numpy as np

from digest.models import Interest, Paper, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, Signals
from digest.select.batch import TopK, rank_many
from digest.select.learn import FeedbackModel
from digest.select.neural import DIM
from digest.select.text import words
from digest.store import Store

DAY = date(2026, 7, 1)
TOPICS = {
    "vision": ["computer vision", "object detection", "segmentation", "image", "video understanding"],
    "language": ["language model", "machine translation", "NLP", "text", "instruction tuning"],
    "robotics": ["robot", "manipulation", "motion planning", "locomotion", "embodied agent"],
    "security": ["security", "privacy", "attack", "malware", "jailbreak"],
    "systems": ["distributed systems", "GPU", "scheduling", "LLM serving", "KV cache"],
    "hardware": ["hardware accelerator", "FPGA", "processor", "chip design", "memory architecture"],
    "retrieval": ["information retrieval", "recommender system", "ranking", "retrieval-augmented generation"],
    "statistics": ["Bayesian", "Gaussian process", "variational inference", "causal inference"],
    "generation": ["diffusion", "video generation", "text-to-image", "Gaussian splatting", "NeRF"],
    "reasoning": ["reasoning", "chain of thought", "reinforcement learning", "reward model", "math"],
}


def make_subscribers(n: int, vocabulary: Sequence[str], seed: int) -> list[Subscriber]:
    rng = random.Random(seed)
    names = list(TOPICS)
    out = []
    for i in range(n):
        interests: tuple[Interest, ...] = ()
        if i % 10:
            interests = tuple(
                Interest(name, (*rng.sample(TOPICS[name], rng.randint(2, len(TOPICS[name]))), rng.choice(vocabulary)),
                         round(rng.uniform(0.5, 1.5), 2))
                for name in rng.sample(names, rng.randint(1, 3)))
        out.append(Subscriber(email=f"reader{i}@example.org", interests=interests))
    return out


def make_signals(subscribers: Sequence[Subscriber], pool: Pool, seed: int) -> dict[str, Signals]:
    """A learned model and a few received papers for every other subscriber with interests."""
    rng = np.random.default_rng(seed)
    out = {}
    for n, sub in enumerate(subscribers):
        if sub.interests and n % 2:
            model = FeedbackModel(rng.normal(0, 1, DIM).astype(np.float32), -1.0, int(rng.integers(1, 40)), 0.0, 5.0,
                                  rng.normal(0, 0.3, DIM).astype(np.float32))
            received = frozenset(int(pool.papers[i].store_id) for i in rng.choice(len(pool), 5))  # type: ignore[arg-type]
            out[sub.email] = Signals(received=received, model=model)
    return out


def timed_rank(pool: Pool, subscribers: list[Subscriber], settings: SelectSettings,
               signals: dict[str, Signals]) -> tuple[float, int]:
    """Seconds to rank (untraced) and the peak traced memory (bytes) of a second, traced ranking.

    tracemalloc slows every Python allocation down, so time and memory are measured in two runs.
    """
    start = time.perf_counter()
    top = rank_many(pool, subscribers, day=DAY, settings=settings, k=10, signals=signals)
    seconds = time.perf_counter() - start
    assert top.papers.shape == (len(subscribers), 10)
    tracemalloc.start()
    rank_many(pool, subscribers, day=DAY, settings=settings, k=10, signals=signals)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak


def _give_back() -> None:
    """Free what nothing holds any more and give the heap's free pages back to the system (glibc)."""
    import gc

    from digest.memory import give_back

    gc.collect()
    give_back()


def _reset_resident_peak() -> bool:
    """Start the process's peak resident size (VmHWM) again from its current size (Linux); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return False
    return True


def _resident(field: str) -> int:
    """A size from /proc/self/status (kB): VmRSS now, VmHWM the peak."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit(f"/proc/self/status has no {field}")


def ranked_in_processes(pool: Pool, subscribers: list[Subscriber], settings: SelectSettings,
                        signals: dict[str, Signals], workers: int, dense: Any) -> tuple[float, TopK]:
    """Seconds to rank the subscribers split over `workers` processes (share n: the n-th run of consecutive
    subscribers, as a send's workers claim batches; every other subscriber has a learned model, so a stride would give
    one process all of them), and the top 10s put back in the subscribers' order."""
    import multiprocessing

    from threadpoolctl import threadpool_limits

    from digest.delivery.workers import Died, in_processes

    taken = multiprocessing.get_context("fork").Value("i", 0)
    bounds = [len(subscribers) * n // workers for n in range(workers + 1)]

    def job(stop: Any) -> tuple[int, TopK]:
        with taken.get_lock():
            share = taken.value
            taken.value += 1
        with threadpool_limits(limits=1, user_api="blas"):
            return share, rank_many(pool, subscribers[bounds[share]:bounds[share + 1]], day=DAY, settings=settings,
                                    k=10, signals=signals)

    start = time.perf_counter()
    results = in_processes(workers, job, before_fork=dense.store.close if dense is not None else lambda: None)
    seconds = time.perf_counter() - start
    out = TopK(np.zeros((len(subscribers), 10), dtype=np.int64), np.zeros((len(subscribers), 10), np.float32),
               np.zeros((len(subscribers), 10), dtype=bool))
    for result in results:
        if isinstance(result, Died):
            raise SystemExit(f"a ranking process failed: {result}")
        share, top = result
        part = slice(bounds[share], bounds[share + 1])
        out.papers[part], out.scores[part], out.passes[part] = top.papers, top.scores, top.passes
    return seconds, out


def run_scale(papers: list[Paper], n_papers: int, n_subscribers: int, seed: int, dense: Any = None,
              workers: int = 1) -> None:
    """`dense`: the text model's embedder over the sample (None: words alone); `workers` > 1: also split over that
    many processes."""
    rng = random.Random(seed)
    corpus = CorpusStats()
    corpus.add_texts((p.store_id, p.title, p.abstract) for p in papers)  # type: ignore[misc]
    common = Counter(w for p in papers[:20000] for w in words(p.title))
    vocabulary = [w for w, _ in common.most_common(5000)]
    subscribers = make_subscribers(n_subscribers, vocabulary, seed)
    settings = SelectSettings(text_model=1.0 if dense is not None else 0.0)
    profiles = 0.0
    if dense is not None:
        folder = tempfile.mkdtemp(prefix="scale-")
        dense.store = Store(f"sqlite:///{folder}/profiles.db")
        start = time.perf_counter()
        for lo in range(0, len(subscribers), 2000):  # as an import makes them, a batch at a time
            dense.interests([i for s in subscribers[lo:lo + 2000] for i in s.interests])
        profiles = time.perf_counter() - start
        dense._profiles.clear()  # a send starts with none in memory  # noqa: SLF001
        dense._texts.clear()  # nor the query texts' embeddings, nor the text model: it never loads it  # noqa: SLF001
        dense._model = None  # noqa: SLF001
        _give_back()
    start = time.perf_counter()
    chosen = [p for p in rng.sample(papers, n_papers)]  # (store ids kept: the embedder finds their vectors by them)
    pool = Pool(chosen, corpus, dense=dense)
    pool.index(settings.title_weight)
    if dense is not None:
        pool.dense_codes()
    build = time.perf_counter() - start
    signals = make_signals(subscribers, pool, seed)
    small = subscribers[: n_subscribers // 10]
    timed_rank(pool, small[:100], settings, signals)  # warm up the keyword cache of the analyzer
    small_seconds, small_peak = timed_rank(pool, small, settings, signals)
    held_before = _resident("VmRSS") if _reset_resident_peak() else None
    big_seconds, big_peak = timed_rank(pool, subscribers, settings, signals)
    ranking_peak = _resident("VmHWM") if held_before is not None else None
    if workers > 1:
        one = rank_many(pool, subscribers, day=DAY, settings=settings, k=10, signals=signals)
        split_seconds, split = ranked_in_processes(pool, subscribers, settings, signals, workers, dense)
        same = all(np.array_equal(getattr(one, name), getattr(split, name)) for name in ("papers", "scores", "passes"))
    interests = sum(len(s.interests) for s in subscribers)
    keywords = len({k for s in subscribers for i in s.interests for k in i.keywords})
    print(f"pool: {n_papers} papers (index built in {build:.2f} s); {n_subscribers} subscribers, "
          f"{interests} interests, {keywords} distinct keywords, {len(signals)} learned models; text model "
          f"{'on' if dense is not None else 'off'}")
    if dense is not None:
        print(f"profiles_made_seconds: {profiles:.1f} (an import's work, for {interests} interests)")
    print(f"rank_{len(small)}_seconds: {small_seconds:.2f}")
    print(f"rank_{n_subscribers}_seconds: {big_seconds:.2f}")
    print(f"ratio: {big_seconds / small_seconds:.1f} (for {n_subscribers // len(small)}x the subscribers)")
    print(f"subscribers_per_second: {n_subscribers / big_seconds:.0f}")
    print(f"peak_traced_mib_{len(small)}: {small_peak / 2**20:.0f}")
    print(f"peak_traced_mib_{n_subscribers}: {big_peak / 2**20:.0f}")
    print(f"process_peak_rss_mib: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    if ranking_peak is not None:
        print(f"rank_{n_subscribers}_peak_rss_mib: {ranking_peak / 1024:.0f} (the process's peak while it ranked; "
              f"{held_before / 1024:.0f} resident before it: the sample, the readers and their learned models)")
    if workers > 1:
        print(f"rank_{n_subscribers}_seconds_in_{workers}_processes: {split_seconds:.2f} (the same top 10s as one "
              f"process: {'yes' if same else 'NO'})")
        print(f"worker_peak_rss_mib: {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.0f}")
        if not same:
            raise SystemExit("the ranking split over processes differs from one process's")
