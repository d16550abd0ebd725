"""Compose (select → render → MIME) digests for many generated subscribers over the seed papers.

    .venv/bin/python bench/render.py [--subscribers 10000] [--baseline 300]

Two ways, in the same run on the same machine:
  ours   — the real pipeline: CSS inlined once when each template loads, then a plain Jinja render.
  naive  — the same pipeline, but `premailer.transform()` run over every finished HTML message
           (what most newsletter code does); timed on the first --baseline subscribers, being slow.
  tuned  — as naive, but premailer with the options ours uses at load time (no CSS validation):
           shows how much of the gain is inlining once rather than tuning premailer.
The last lines are `name: value` figures; `speedup` is ours / naive in digests per second.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import premailer
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.models import Interest, Subscriber  # noqa: E402
from digest.render.filters import clear_caches  # noqa: E402
from digest.render.renderer import Renderer, inline_css  # noqa: E402

DAY = date(2026, 6, 12)
# Keyword sets a research-newsletter audience would write, in the seed papers' fields.
TOPICS = {
    "LLM inference": ["KV cache", "speculative decoding", "LLM serving", "prefill", "throughput", "latency"],
    "GPU kernels": ["CUDA", "Triton", "kernel fusion", "tensor cores", "GEMM", "FlashAttention"],
    "Quantization": ["quantization", "low-bit", "FP8", "INT4", "outliers", "post-training quantization"],
    "Efficient training": ["distributed training", "pipeline parallelism", "ZeRO", "mixed precision", "optimizer"],
    "Mixture of experts": ["mixture of experts", "MoE", "expert routing", "sparse experts", "load balancing"],
    "Compilers": ["compiler", "MLIR", "code generation", "autotuning", "TVM", "transpilation"],
    "Agents": ["agent", "tool use", "planning", "multi-agent", "web agent"],
    "Video generation": ["video generation", "diffusion", "text-to-video", "temporal consistency"],
    "Neural rendering": ["Gaussian splatting", "NeRF", "novel view synthesis", "3D reconstruction"],
    "Reasoning": ["reasoning", "chain of thought", "reinforcement learning", "math", "reward model"],
    "Retrieval": ["retrieval", "RAG", "embedding", "reranking", "long context"],
    "Accelerators": ["accelerator", "FPGA", "systolic array", "ASIC", "hardware"],
}


def make_subscribers(n: int, seed: int = 7) -> list[Subscriber]:
    """`n` varied profiles: 1–3 topics each with a random subset of their keywords; every 10th trending-only."""
    rng = random.Random(seed)
    names = list(TOPICS)
    subscribers = []
    for i in range(n):
        interests: tuple[Interest, ...] = ()
        if i % 10:
            picked = rng.sample(names, rng.randint(1, 3))
            interests = tuple(Interest(name, tuple(rng.sample(TOPICS[name], rng.randint(2, len(TOPICS[name])))),
                                       round(rng.uniform(0.5, 1.5), 2)) for name in picked)
        subscribers.append(Subscriber(email=f"reader{i}@example.org", name=f"Reader {i}",
                                      max_papers=rng.choice((5, 10, 15)), interests=interests))
    return subscribers


def run(app: App, subscribers: list[Subscriber], day: date = DAY) -> tuple[float, int, int]:
    """Seconds to compose every digest of `day`, the papers they hold, and the bytes of the messages.

    Composed as a send run composes: the pool analysed once, then a batch (`delivery.batch_size`) at a
    time: the batch's history and feedback read in a few queries, ranked together (`select_many`),
    each digest rendered and built into a message.
    """
    papers = size = 0
    clear_caches()  # each run starts with cold formatting caches, as a send process does
    start = time.perf_counter()
    pool = app.composer.pool(day)
    compose, batch = app.composer.batch(pool), app.config.delivery.batch_size
    # one BLAS thread, as a send worker has (idle BLAS threads would add CPU time that is not composing)
    with app.renderer.pinned(), threadpool_limits(limits=1, user_api="blas"):
        for first in range(0, len(subscribers), batch):
            for composed in compose(subscribers[first:first + batch], day):
                if isinstance(composed, Exception):
                    raise composed
                papers += composed.digest.count
                size += len(composed.message.as_bytes())
    return time.perf_counter() - start, papers, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=300, help="subscribers timed for the naive baseline")
    parser.add_argument("--max-age-days", type=int, default=None,
                        help="select.max_age_days (default: the setting's; 0 shows the seed pages' old papers as new, "
                             "as before the setting, for digests of the same content)")
    args = parser.parse_args()
    subscribers = make_subscribers(args.subscribers)
    with tempfile.TemporaryDirectory() as tmp:
        raw: dict[str, dict[str, object]] = {"store": {"url": "sqlite:///bench.db"}}
        if args.max_age_days is not None:
            raw["select"] = {"max_age_days": args.max_age_days}
        config = build_config(raw, base=Path(tmp))
        app = App(config)
        app.ingest([ROOT / "seeds"], seen_on=DAY)
        run(app, subscribers[:50])  # warm up: templates loaded and inlined, stemmer cache filled
        ours, papers, size = run(app, subscribers)
        app.composer.renderer = Renderer(inline_per_message=inline_css)
        tuned, _, _ = run(app, subscribers[: args.baseline])
        app.composer.renderer = Renderer(inline_per_message=premailer.transform)  # its defaults, as its README shows
        naive, _, _ = run(app, subscribers[: args.baseline])
        pool_size = len(app.composer.pool(DAY).papers)
        app.close()
    ours_rate = len(subscribers) / ours
    baseline = min(args.baseline, len(subscribers))
    naive_rate, tuned_rate = baseline / naive, baseline / tuned
    print(f"pool: {pool_size} papers; {len(subscribers)} subscribers; "
          f"{papers / len(subscribers):.1f} papers and {size / len(subscribers) / 1024:.1f} KiB per message")
    print(f"ours_seconds: {ours:.2f}")
    print(f"ours_digests_per_second: {ours_rate:.1f}")
    print(f"tuned_premailer_digests_per_second: {tuned_rate:.1f}")
    print(f"speedup_vs_tuned: {ours_rate / tuned_rate:.1f}")
    print(f"naive_digests_per_second: {naive_rate:.1f}")
    print(f"speedup: {ours_rate / naive_rate:.1f}")


if __name__ == "__main__":
    main()
