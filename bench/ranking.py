"""Ranking quality on real labeled papers, and ranking throughput at scale.

    .venv/bin/python bench/ranking.py [--data FILE] [--pools 30] [--seed 2] [--semantic auto|on|off] [--no-supervised]
    .venv/bin/python bench/ranking.py --scale [--subscribers 100000] [--papers 1000]

Quality: for each arXiv category below, day-sized pools of --pool-size papers are cut from the
arXiv sample (consecutive listing days of its uniform part); a pool with fewer than
--min-positives papers of the category gets random papers of the category swapped in for random
others. A subscriber profile for the category is a short keyword list. Every method ranks every
pool; a paper is relevant when arXiv lists it in the category. Reported: precision@10 and nDCG@10,
averaged over the pools. Methods:
  random      a random order;
  newest      newest listing first;
  tfidf       scikit-learn TfidfVectorizer (sublinear tf, 1-2-grams, English stop words) fitted on
              the whole sample, cosine between the joined keywords and each paper (arxiv-sanity style);
  ours        digest.select.rank with the default settings, term statistics from the whole sample;
  ours+sem    ours with sentence-embedding similarity blended in (needs the `semantic` extra);
  supervised  logistic regression (C=10, balanced classes) on tf-idf 1-2-grams (sublinear tf, min_df 2),
              trained on the true labels of every paper outside the category's pools (one fit per
              category); where that leaves fewer than 100 papers of the category (cs.DC, cs.AR,
              stat.ML), outside the pool (one fit per pool): not a competitor (it reads the
              answers), a rough ceiling on how far these labels can be predicted from title and
              abstract.
--scale: see scale.py.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.models import Interest, Paper, Subscriber  # noqa: E402
from digest.select import CorpusStats, Pool, SelectSettings, rank  # noqa: E402
from digest.sources.jsonl import paper_of_object  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "/work/shared/data/arxiv_sample.jsonl.gz")
DAY = date(2026, 7, 1)
SUPERVISED_MIN_POSITIVES = 100  # fewer papers of the category outside its pools: the reference is fitted per pool
SEMANTIC_WEIGHT = 60.0  # the value the README recommends with the semantic extra
# What a subscriber following the category might write; fixed before any method was measured.
PROFILES = {
    "cs.CV": ["computer vision", "image", "object detection", "segmentation", "visual recognition"],
    "cs.CL": ["natural language processing", "language model", "text", "machine translation", "NLP"],
    "cs.RO": ["robot", "robotics", "manipulation", "motion planning", "locomotion"],
    "cs.CR": ["security", "privacy", "attack", "vulnerability", "malware", "cryptography"],
    "cs.DC": ["distributed systems", "parallel computing", "cluster", "GPU", "scheduling", "cloud computing"],
    "cs.AR": ["hardware accelerator", "FPGA", "processor", "memory architecture", "chip design"],
    "cs.IR": ["information retrieval", "recommender system", "search", "ranking", "retrieval-augmented generation"],
    "stat.ML": ["statistical learning theory", "Bayesian", "Gaussian process", "variational inference",
                "high-dimensional statistics"],
}


@dataclass
class Sample:
    """The arXiv sample as Papers (store ids = line numbers), with categories and listing days."""

    papers: list[Paper]
    uniform: list[int]
    by_day: dict[date, list[int]]

    def has(self, i: int, category: str) -> bool:
        return category in self.papers[i].categories


def load(path: str) -> Sample:
    papers, uniform, by_day = [], [], {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            row = json.loads(line)
            paper = replace(paper_of_object(row, seen_on=DAY), store_id=n + 1)
            papers.append(paper)
            if row.get("in_uniform_sample"):
                uniform.append(n)
                by_day.setdefault(paper.listed_on, []).append(n)
    return Sample(papers, uniform, by_day)


def sample_corpus(sample: Sample) -> CorpusStats:
    """Term statistics of the whole sample, as a store holding it would have them."""
    corpus = CorpusStats()
    corpus.add_texts((p.store_id, p.title, p.abstract) for p in sample.papers)  # type: ignore[misc]
    return corpus


def make_pools(sample: Sample, category: str, count: int, size: int, min_positives: int,
               rng: random.Random) -> list[list[Paper]]:
    """Pools of consecutive listing days, topped up to `min_positives` papers of the category.

    A paper swapped in takes the listing day of the one it replaces, so that "newest first" and the
    recency boost cannot tell the swapped-in papers apart.
    """
    days = sorted(sample.by_day)
    everyone = [i for i in range(len(sample.papers)) if sample.has(i, category)]
    pools = []
    for _ in range(count):
        start, picked = rng.randrange(len(days)), []
        while len(picked) < size:
            picked += sample.by_day[days[start % len(days)]]
            start += 1
        pool = [sample.papers[i] for i in picked[:size]]
        missing = min_positives - sum(category in p.categories for p in pool)
        if missing > 0:
            inside = set(picked[:size])
            extra = rng.sample([i for i in everyone if i not in inside], missing)
            slots = rng.sample([n for n, p in enumerate(pool) if category not in p.categories], missing)
            for slot, i in zip(slots, extra, strict=True):
                pool[slot] = replace(sample.papers[i], listed_on=pool[slot].listed_on)
        pools.append(pool)
    return pools


def precision_ndcg(order: Sequence[int], relevant: set[int], k: int = 10) -> tuple[float, float]:
    gains = [1.0 if i in relevant else 0.0 for i in order[:k]]
    dcg = sum(g / math.log2(n + 2) for n, g in enumerate(gains))
    ideal = sum(1 / math.log2(n + 2) for n in range(min(k, len(relevant))))
    return sum(gains) / k, dcg / ideal if ideal else 0.0


Method = Callable[[list[Paper], str, random.Random], list[Paper]]


def tfidf_method(sample: Sample, **options: object) -> Method:
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(strip_accents="unicode", stop_words="english", ngram_range=(1, 2),
                                 sublinear_tf=True, dtype=np.float32, **options)  # type: ignore[arg-type]
    matrix = vectorizer.fit_transform(f"{p.title} {p.abstract}" for p in sample.papers).tocsr()

    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        query = vectorizer.transform([" ".join(PROFILES[category])])
        score = (matrix[_rows(pool)] @ query.T).toarray().ravel()
        return [pool[j] for j in np.lexsort((np.arange(len(pool)), -score))]
    return run


def ours_method(sample: Sample, corpus: CorpusStats, settings: SelectSettings, embedder: object = None) -> Method:
    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(PROFILES[category])),))
        ranked = rank(Pool(pool, corpus, embedder=embedder), subscriber,  # type: ignore[arg-type]
                      day=DAY, settings=settings, limit=10)
        return [r.paper for r in ranked]
    return run


def _rows(pool: Sequence[Paper]) -> list[int]:
    return [p.store_id - 1 for p in pool]  # type: ignore[operator]


def random_method(pool: list[Paper], _: str, rng: random.Random) -> list[Paper]:
    return rng.sample(pool, len(pool))


def newest_method(pool: list[Paper], _: str, __: random.Random) -> list[Paper]:
    """Latest listing day first; within a day, the order of the listing."""
    return sorted(pool, key=lambda p: p.listed_on, reverse=True)  # type: ignore[arg-type, return-value]


def supervised_method(sample: Sample, pools: dict[str, list[list[Paper]]]) -> Method:
    """Logistic regression on the true labels of every paper outside the category's pools, else outside the pool."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    matrix = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, dtype=np.float32).fit_transform(
        f"{p.title} {p.abstract}" for p in sample.papers).tocsr()
    shared: dict[str, LogisticRegression | None] = {}

    def fit(category: str, held_out: list[int], min_positives: int = 1) -> LogisticRegression | None:
        labels = np.array([sample.has(i, category) for i in range(len(sample.papers))])
        outside = np.ones(len(sample.papers), dtype=bool)
        outside[held_out] = False
        if labels[outside].sum() < min_positives:
            return None
        return LogisticRegression(C=10, class_weight="balanced", max_iter=1000).fit(matrix[outside], labels[outside])

    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        if category not in shared:
            held_out = [r for cat_pool in pools[category] for r in _rows(cat_pool)]
            shared[category] = fit(category, held_out, SUPERVISED_MIN_POSITIVES)
        model = shared[category] or fit(category, _rows(pool))
        assert model is not None
        score = model.decision_function(matrix[_rows(pool)])
        return [pool[j] for j in np.argsort(-score, kind="stable")]
    return run


def semantic_embedder(choice: str, cache: Path) -> object | None:
    """The sentence-embedding model with a per-paper cache, or None when off or not installed."""
    if choice == "off":
        return None
    try:
        from digest.select.semantic import SentenceEmbedder
        from digest.store import Store
    except ImportError:
        return None
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        return SentenceEmbedder(store=Store(f"sqlite:///{cache}"))
    except Exception as exc:  # the extra is missing: say so and measure without it
        if choice == "on":
            raise
        print(f"(semantic matching not measured: {exc})", file=sys.stderr)
        return None


def evaluate(methods: dict[str, Method], pools: dict[str, list[list[Paper]]],
             seed: int) -> dict[str, dict[str, tuple[float, float]]]:
    """Mean (precision@10, nDCG@10) per category and method."""
    results: dict[str, dict[str, tuple[float, float]]] = {}
    for category, cat_pools in pools.items():
        results[category] = {}
        for name, method in methods.items():
            rng = random.Random(seed)
            scores = []
            for pool in cat_pools:
                relevant = {p.store_id for p in pool if category in p.categories}
                order = [p.store_id for p in method(pool, category, rng)]
                scores.append(precision_ndcg(order, relevant))  # type: ignore[arg-type]
            results[category][name] = (float(np.mean([p for p, _ in scores])), float(np.mean([n for _, n in scores])))
        row = "  ".join(f"{m} {p:.2f}/{n:.3f}" for m, (p, n) in results[category].items())
        print(f"  {category}: {row}", file=sys.stderr, flush=True)
    return results


def report(results: dict[str, dict[str, tuple[float, float]]], pools: dict[str, list[list[Paper]]]) -> None:
    methods = list(next(iter(results.values())))
    print("precision@10 / nDCG@10, mean over pools (positives: mean per pool)")
    print(f"| category | positives | {' | '.join(methods)} |")
    print(f"|---|---:|{'---:|' * len(methods)}")
    for category, row in results.items():
        positives = np.mean([sum(category in p.categories for p in pool) for pool in pools[category]])
        cells = " | ".join(f"{p:.2f} / {n:.3f}" for p, n in row.values())
        print(f"| {category} | {positives:.1f} | {cells} |")
    means = {m: (np.mean([r[m][0] for r in results.values()]), np.mean([r[m][1] for r in results.values()]))
             for m in methods}
    print(f"| **mean** | | {' | '.join(f'{p:.2f} / {n:.3f}' for p, n in means.values())} |")
    for name in [m for m in methods if m.startswith("ours")]:
        wins = sum(r[name][1] > r["tfidf"][1] for r in results.values())
        print(f"{name}: nDCG@10 above tfidf in {wins}/{len(results)} categories; "
              f"mean precision@10 {means[name][0]:.3f} (target 0.8)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="the arXiv sample (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--pools", type=int, default=30, help="pools per category")
    parser.add_argument("--pool-size", type=int, default=300)
    parser.add_argument("--min-positives", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--semantic", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench" / "out" / "embeddings.db",
                        help="SQLite file caching paper embeddings between runs")
    parser.add_argument("--no-supervised", action="store_true", help="skip the supervised reference (faster)")
    parser.add_argument("--scale", action="store_true", help="time ranking for many subscribers instead")
    parser.add_argument("--subscribers", type=int, default=100_000)
    parser.add_argument("--papers", type=int, default=1000)
    args = parser.parse_args()
    sample = load(args.data)
    if args.scale:
        from scale import run_scale

        run_scale(sample.papers, args.papers, args.subscribers, args.seed)
        return
    corpus = CorpusStats()
    corpus.add_texts((p.store_id, p.title, p.abstract) for p in sample.papers)  # type: ignore[misc]
    rng = random.Random(args.seed)
    pools = {c: make_pools(sample, c, args.pools, args.pool_size, args.min_positives, rng) for c in PROFILES}
    settings = SelectSettings()
    methods: dict[str, Method] = {"random": random_method, "newest": newest_method,
                                  "tfidf": tfidf_method(sample), "ours": ours_method(sample, corpus, settings)}
    embedder = semantic_embedder(args.semantic, args.cache)
    if embedder is not None:
        sem = replace(settings, semantic_weight=SEMANTIC_WEIGHT)
        methods["ours+sem"] = ours_method(sample, corpus, sem, embedder)
    if not args.no_supervised:
        methods["supervised"] = supervised_method(sample, pools)
    report(evaluate(methods, pools, args.seed), pools)


if __name__ == "__main__":
    main()
