"""Time the "Why" explanations of many digests over the seed papers, as a send run makes them.

    .venv/bin/python bench/why.py [--subscribers 1000] [--repeat 3] [--sample 1000]

Subscribers are varied profiles: keyword subsets of `render.TOPICS`, or a sentence (the relevance
benchmark's descriptions, written by a helper who saw neither the code nor the data, and a few more in
the seed papers' fields), or both. The pool is the seed papers, or with `--sample N` N papers of the
arXiv sample (the relevance benchmark's profiles then: keywords, sentence or both of its categories;
the sample's embeddings from bench/embed_sample.py's cache, the store's statistics from the whole sample).
Their candidates are found for all at once (`batch.candidates`, as a send run does), then each digest's
picks are chosen; only what explains them is timed: `Explainer` made, and the reasons and strength of
every pick (CPU time, the least of `--repeat` runs, each run on a fresh pool so that nothing memoised by
the previous one helps). Last lines: `name: value` figures.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from functools import partial
from pathlib import Path

from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from relevance_profiles import SET_R, SET_T  # noqa: E402
from render import TOPICS  # noqa: E402

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.models import Interest, Subscriber  # noqa: E402
from digest.select.batch import candidates  # noqa: E402
from digest.select.explain import Explainer  # noqa: E402
from digest.select.pool import Pool  # noqa: E402
from digest.select.profile import Signals  # noqa: E402
from digest.select.rank import candidate_window, choose  # noqa: E402
from digest.select.scores import SelectSettings  # noqa: E402

DAY = date(2026, 6, 12)
SENTENCES = [
    "Making LLM inference faster on long inputs, and routing tokens in mixture-of-experts models.",
    "I want papers on KV cache compression and speculative decoding for serving large language models.",
    "Hand-written and compiled GPU kernels: CUDA, Triton, and kernel fusion for attention.",
    "Training giant models on many GPUs with pipeline parallelism and less memory.",
    "Agents that browse the web and use tools reliably.",
    *(profile["description"] for profiles in (SET_T, SET_R) for profile in profiles.values()),
]


def make_subscribers(n: int, seed: int = 11, sample: bool = False) -> list[Subscriber]:
    """`n` varied profiles: a third keywords, a third a sentence, a third both."""
    rng = random.Random(seed)
    written = [p for profiles in (SET_T, SET_R) for p in profiles.values()]
    out = []
    for i in range(n):
        if sample:
            profile = rng.choice(written)
            name, pool_keywords, sentence = "Interest", list(profile["keywords"]), str(profile["description"])
        else:
            name = rng.choice(list(TOPICS))
            pool_keywords, sentence = TOPICS[name], rng.choice(SENTENCES)
        keywords = tuple(rng.sample(pool_keywords, rng.randint(2, len(pool_keywords)))) if i % 3 != 1 else ()
        out.append(Subscriber(email=f"reader{i}@example.org", max_papers=rng.choice((5, 10, 15)),
                              interests=(Interest(name, keywords, description=sentence if i % 3 else ""),)))
    return out


def explain_seconds(make_pool: Callable[[], Pool], subscribers: list[Subscriber],
                    settings: SelectSettings) -> tuple[float, int]:
    """CPU seconds spent explaining every digest's picks on a fresh pool, and how many picks were explained."""
    pool = make_pool()
    signals = {s.email: Signals() for s in subscribers}
    wanted = max(s.max_papers for s in subscribers)
    scored = candidates(pool, subscribers, day=DAY, settings=settings, k=candidate_window(wanted), signals=signals)
    chosen = [choose(pool, s, sub, day=DAY, settings=settings)[0] for sub, s in zip(subscribers, scored, strict=True)]
    index = pool.index(settings.title_weight)
    picks = 0
    start = time.process_time()
    for scores, picked in zip(scored, chosen, strict=True):
        explain = Explainer(pool, index, scores, picked)
        for j in picked:
            explain.reasons(j)
            getattr(explain, "strength", lambda j: "")(j)
        picks += len(picked)
    return time.process_time() - start, picks


def sample_pool(size: int) -> Callable[[], Pool]:
    """A maker of pools of `size` papers of the arXiv sample (the last listed), with the sample's statistics."""
    import ranking

    sample = ranking.load()
    ranking.load_vectors(sample)
    ours = ranking.Ours(sample)
    papers = [replace(p, listed_on=DAY, published=DAY) for p in sample.papers[-size:]]
    return lambda: Pool(papers, ours.corpus, dense=ours.dense)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sample", type=int, default=0, help="papers of the arXiv sample as the pool (0: the seeds)")
    args = parser.parse_args()
    subscribers = make_subscribers(args.subscribers, sample=bool(args.sample))
    settings = SelectSettings(max_age_days=0)
    with tempfile.TemporaryDirectory() as folder:
        app = None
        if args.sample:
            make_pool = sample_pool(args.sample)
        else:
            app = App(build_config({"store": {"url": "sqlite:///digest.db"}, "subscribers": {"dir": folder},
                                    "ingest": {"paths": [str(ROOT / "seeds")]}, "select": {"max_age_days": 0}},
                                   base=Path(folder)))
            app.ingest([ROOT / "seeds"], seen_on=DAY)
            make_pool = partial(app.pool, DAY)
        with threadpool_limits(limits=1, user_api="blas"):
            runs = [explain_seconds(make_pool, subscribers, settings) for _ in range(args.repeat)]
        if app is not None:
            app.close()
    seconds, picks = min(runs)
    print(f"runs (CPU s): {', '.join(f'{s:.3f}' for s, _ in runs)}")
    print(f"digests: {len(subscribers)}")
    print(f"picks: {picks}")
    print(f"explain_ms_per_digest: {1000 * seconds / len(subscribers):.3f}")
    print(f"explain_us_per_pick: {1e6 * seconds / max(picks, 1):.1f}")


if __name__ == "__main__":
    main()
