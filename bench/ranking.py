"""Ranking quality on real labeled papers, the relevance floor, feedback, cold start, and throughput at scale.

    .venv/bin/python bench/ranking.py [--profiles B] [--seed 2] [--pools 30] [--no-supervised]
    .venv/bin/python bench/ranking.py --feedback [--profiles B] [--seed 2] [--subscribers 8] [--held-out 3]
    .venv/bin/python bench/ranking.py --floor-ceiling [--profiles B] [--seed 2] [--categories ...]
    .venv/bin/python bench/ranking.py --scale [--subscribers 100000] [--papers 1000]

Quality: for each arXiv category of the profile set (`profiles.py`: settings and the calibration
were chosen on set A with seed 1, figures are reported on set B with seed 2), day-sized pools of
--pool-size papers are cut from the arXiv sample (consecutive listing days of its uniform part); a
pool with fewer than --min-positives papers of the category gets random papers of the category
swapped in for random others. A paper is relevant when arXiv lists it in the category. Reported:
precision@10 and nDCG@10, mean over pools with the standard error, and the paired difference to
tf-idf (mean and standard error over pools). Methods:
  random      a random order;
  tfidf       scikit-learn TfidfVectorizer (sublinear tf, 1-2-grams, English stop words) fitted on
              the whole sample, cosine between the joined keywords and each paper (arxiv-sanity style);
  ours        digest.select.rank with the default settings, term statistics from the whole sample;
  ours+sem    ours with sentence-embedding similarity blended in (the `semantic` extra, when installed);
  seeds-only  ours with a store of only the 197 seed papers (a new install), the shipped background blended in;
  no-bg       the same store without the background statistics;
  supervised  logistic regression (C=10, balanced classes) on tf-idf 1-2-grams (sublinear tf, min_df 2),
              trained on the true labels of every paper outside the category's pools (one fit per
              category); where that leaves fewer than 100 papers of the category, outside the pool:
              not a competitor (it reads the answers), a rough ceiling for title-and-abstract methods.
Also: the floor's precision and recall pooled over every paper of every pool, at several levels of
select.min_relevance. --floor-ceiling: the most recall any floor reaches at precision 0.75 on each
method's scores (a global threshold, and cuts per pool chosen knowing the labels). --feedback: the
simulated subscriber of issue 11, on each day's pool and on --held-out fixed evaluation pools (see
`feedback.py`).
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

sys.path.insert(0, str(ROOT / "bench"))
from profiles import MAIN, SETS  # noqa: E402

from digest.select import Signals  # noqa: E402
from digest.select.rank import Scores  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "/work/shared/data/arxiv_sample.jsonl.gz")
DAY = date(2026, 7, 1)
SUPERVISED_MIN_POSITIVES = 100  # fewer papers of the category outside its pools: the reference is fitted per pool
SEMANTIC_WEIGHT = 60.0  # the value the README recommends with the semantic extra
PROFILES: dict[str, list[str]] = dict(SETS["B"])  # the profiles being measured (set by --profiles)
FLOOR_LEVELS = (0.3, 0.4, 0.5, 0.6, 0.7)
CEILING_PRECISION = 0.75  # the floor target's precision (issue 11)


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
Scorer = Callable[[list[Paper], str], np.ndarray]  # a score per paper of the pool, higher = more relevant


def tfidf_scores(sample: Sample, **options: object) -> Scorer:
    """Cosine of tf-idf vectors (arxiv-sanity-lite's settings) between the joined keywords and each paper."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(strip_accents="unicode", stop_words="english", ngram_range=(1, 2),
                                 sublinear_tf=True, dtype=np.float32, **options)  # type: ignore[arg-type]
    matrix = vectorizer.fit_transform(f"{p.title} {p.abstract}" for p in sample.papers).tocsr()

    def score(pool: list[Paper], category: str) -> np.ndarray:
        query = vectorizer.transform([" ".join(PROFILES[category])])
        return (matrix[_rows(pool)] @ query.T).toarray().ravel()
    return score


def tfidf_method(sample: Sample, **options: object) -> Method:
    scorer = tfidf_scores(sample, **options)

    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        score = scorer(pool, category)
        return [pool[j] for j in np.lexsort((np.arange(len(pool)), -score))]
    return run


def ours_method(sample: Sample, corpus: CorpusStats, settings: SelectSettings, embedder: object = None,
                background: bool = True, dense: object = None) -> Method:
    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(PROFILES[category])),))
        ranked = rank(Pool(pool, corpus, embedder=embedder, background=background, dense=dense),  # type: ignore[arg-type]
                      subscriber,
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


def supervised_scores(sample: Sample, pools: dict[str, list[list[Paper]]]) -> Scorer:
    """The reference's predicted log-odds of relevance (a threshold on it is one on the probability): logistic
    regression on the true labels of every paper outside the category's pools, else outside the pool."""
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

    def score(pool: list[Paper], category: str) -> np.ndarray:
        if category not in shared:
            held_out = [r for cat_pool in pools[category] for r in _rows(cat_pool)]
            shared[category] = fit(category, held_out, SUPERVISED_MIN_POSITIVES)
        model = shared[category] or fit(category, _rows(pool))
        assert model is not None
        return model.decision_function(matrix[_rows(pool)])
    return score


def supervised_method(sample: Sample, pools: dict[str, list[list[Paper]]]) -> Method:
    """Logistic regression on the true labels of every paper outside the category's pools, else outside the pool."""
    scorer = supervised_scores(sample, pools)

    def run(pool: list[Paper], category: str, _: random.Random) -> list[Paper]:
        return [pool[j] for j in np.argsort(-scorer(pool, category), kind="stable")]
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
             seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Per category and method, (precision@10, nDCG@10) of every pool: an array of shape (pools, 2)."""
    results: dict[str, dict[str, np.ndarray]] = {}
    for category, cat_pools in pools.items():
        results[category] = {}
        for name, method in methods.items():
            rng = random.Random(seed)
            scores = []
            for pool in cat_pools:
                relevant = {p.store_id for p in pool if category in p.categories}
                order = [p.store_id for p in method(pool, category, rng)]
                scores.append(precision_ndcg(order, relevant))  # type: ignore[arg-type]
            results[category][name] = np.array(scores)
        row = "  ".join(f"{m} {v[:, 0].mean():.2f}/{v[:, 1].mean():.3f}" for m, v in results[category].items())
        print(f"  {category}: {row}", file=sys.stderr, flush=True)
    return results


def _se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def report(results: dict[str, dict[str, np.ndarray]], pools: dict[str, list[list[Paper]]],
           main: tuple[str, ...]) -> None:
    methods = list(next(iter(results.values())))
    print("precision@10 / nDCG@10, mean over pools (± standard error of the nDCG mean)")
    print(f"| category | positives | {' | '.join(methods)} | hybrid − tfidf nDCG (paired) |")
    print(f"|---|---:|{'---:|' * (len(methods) + 1)}")
    for category, row in results.items():
        positives = np.mean([sum(category in p.categories for p in pool) for pool in pools[category]])
        cells = " | ".join(f"{v[:, 0].mean():.2f} / {v[:, 1].mean():.3f} ±{_se(v[:, 1]):.3f}" for v in row.values())
        diff = row["hybrid"][:, 1] - row["tfidf"][:, 1]
        print(f"| {category} | {positives:.1f} | {cells} | {diff.mean():+.3f} ±{_se(diff):.3f} |")
    for label, cats in (("mean of the 8 main categories", [c for c in main if c in results]),
                        ("mean of all categories", list(results))):
        if not cats:
            continue
        print(f"\n{label} ({len(cats)}): pools paired across categories")
        for name in methods:
            p10 = np.concatenate([results[c][name][:, 0] for c in cats])
            ndcg = np.concatenate([results[c][name][:, 1] for c in cats])
            print(f"  {name}: P@10 {p10.mean():.3f} ±{_se(p10):.3f}, nDCG@10 {ndcg.mean():.3f} ±{_se(ndcg):.3f}")
        for name in [m for m in methods if m not in ("random", "tfidf", "supervised")]:
            diff = np.concatenate([results[c][name][:, 1] - results[c]["tfidf"][:, 1] for c in cats])
            wins = sum(results[c][name][:, 1].mean() > results[c]["tfidf"][:, 1].mean() for c in cats)
            line = (f"  {name} − tfidf: nDCG@10 {diff.mean():+.3f} ±{_se(diff):.3f} (paired), "
                    f"above tfidf in {wins}/{len(cats)} categories")
            if "supervised" in methods:
                gap = np.mean([results[c]["supervised"][:, 1].mean() - results[c]["tfidf"][:, 1].mean() for c in cats])
                line += f"; share of the tfidf → supervised gap closed: {diff.mean() / gap:.0%}" if gap > 0 else ""
            print(line)
    if "seeds-only" in methods:
        cats = list(results)
        diff = np.concatenate([results[c]["seeds-only"][:, 1] - results[c]["hybrid"][:, 1] for c in cats])
        bare = np.concatenate([results[c]["no-bg"][:, 1] - results[c]["hybrid"][:, 1] for c in cats])
        print(f"\ncold start (all categories, hybrid): seeds-only store − full-sample store nDCG@10 {diff.mean():+.4f} "
              f"±{_se(diff):.4f}; without the background {bare.mean():+.4f} ±{_se(bare):.4f}")


def floor_table(pools: dict[str, list[list[Paper]]], corpus: CorpusStats, settings: SelectSettings,
                main: tuple[str, ...], dense: object = None) -> None:
    """Pooled precision and recall of `relevance >= level` over every paper of every pool."""
    counts: dict[str, np.ndarray] = {}
    for category, cat_pools in pools.items():
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(PROFILES[category])),))
        c = np.zeros((len(FLOOR_LEVELS), 3))  # passed, passed and relevant, relevant
        for papers in cat_pools:
            relevance = Scores(Pool(papers, corpus, dense=dense), subscriber, settings, Signals()).relevance  # type: ignore[arg-type]
            labels = np.array([category in p.categories for p in papers])
            for n, level in enumerate(FLOOR_LEVELS):
                passed = relevance >= level
                c[n] += (passed.sum(), (passed & labels).sum(), labels.sum())
        counts[category] = c
    kind = "hybrid (dense similarity on)" if dense is not None else "keywords alone"
    print(f"\nfloor, {kind}: pooled precision / recall of relevance >= level (every paper of every pool)")
    print(f"| level | {' | '.join(counts)} | 8 main | all |")
    print(f"|---:|{'---:|' * (len(counts) + 2)}")
    for n, level in enumerate(FLOOR_LEVELS):
        def cell(c: np.ndarray, n: int = n) -> str:
            return f"{c[n, 1] / max(c[n, 0], 1):.2f} / {c[n, 1] / c[n, 2]:.2f}"
        main_sum = sum(counts[c] for c in main if c in counts)
        print(f"| {level} | {' | '.join(cell(c) for c in counts.values())} | "
              f"{cell(main_sum) if isinstance(main_sum, np.ndarray) else '-'} | {cell(sum(counts.values()))} |")


def cuts(score: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Papers passed and relevant papers passed by every threshold `score >= t` (t over the distinct scores, and
    above them all): a cut of the ranking never splits papers with the same score."""
    order = np.argsort(-score, kind="stable")
    ranked, relevant = score[order], labels[order]
    passed = np.arange(len(ranked) + 1)
    hits = np.concatenate([[0], np.cumsum(relevant)])
    ends = np.concatenate([[True], ranked[:-1] != ranked[1:], [True]]) if len(ranked) else np.array([True])
    return passed[ends], hits[ends]


def best_cut(score: np.ndarray, labels: np.ndarray, precision: float = CEILING_PRECISION) -> tuple[int, int]:
    """(passed, relevant passed) of the threshold that lets through the most relevant papers at a precision of
    at least `precision` (0, 0 when none reaches it)."""
    passed, hits = cuts(score, labels)
    ok = hits >= precision * passed - 1e-9
    best = int(np.flatnonzero(ok)[np.argmax(hits[ok])])
    return int(passed[best]), int(hits[best])


def oracle_pooled(per_pool: list[tuple[np.ndarray, np.ndarray]],
                  precision: float = CEILING_PRECISION) -> tuple[int, int]:
    """(passed, relevant passed) of the per-pool cuts that let through the most relevant papers at a precision of at
    least `precision` over all pools together (each pool may fall below it).

    Lagrangian relaxation (each pool maximises hits + mu × (hits − precision × passed), mu the smallest found that
    meets the precision), then greedily any cut that passes more relevant papers while the slack allows: a feasible
    choice, near the exact optimum (a knapsack) but not always at it.
    """
    def choose(mu: float) -> list[int]:
        return [int(np.argmax(hits + mu * (hits - precision * passed))) for passed, hits in per_pool]

    def slack(chosen: list[int]) -> float:
        return sum(float(h[c] - precision * p[c]) for (p, h), c in zip(per_pool, chosen, strict=True))

    low, high = 0.0, 1.0
    while slack(choose(high)) < -1e-9:
        high *= 2
    for _ in range(50):
        mid = (low + high) / 2
        low, high = (mid, high) if slack(choose(mid)) < -1e-9 else (low, mid)
    chosen = choose(high)
    room = slack(chosen)
    while True:  # the move that gains the most relevant papers within the slack left
        best: tuple[int, int, int] | None = None
        for n, ((passed, hits), c) in enumerate(zip(per_pool, chosen, strict=True)):
            cost = (hits[c] - precision * passed[c]) - (hits - precision * passed)
            gain = hits - hits[c]
            ok = np.flatnonzero((gain > 0) & (cost <= room + 1e-9))
            if len(ok):
                j = int(ok[np.argmax(gain[ok])])
                if best is None or gain[j] > best[0]:
                    best = (int(gain[j]), n, j)
        if best is None:
            break
        _, n, j = best
        passed, hits = per_pool[n]
        room -= float((hits[chosen[n]] - precision * passed[chosen[n]]) - (hits[j] - precision * passed[j]))
        chosen[n] = j
    return (sum(int(p[c]) for (p, _), c in zip(per_pool, chosen, strict=True)),
            sum(int(h[c]) for (_, h), c in zip(per_pool, chosen, strict=True)))


def floor_ceiling(pools: dict[str, list[list[Paper]]], scorers: dict[str, Scorer], main: tuple[str, ...]) -> None:
    """How much recall any floor could reach at precision CEILING_PRECISION, over every paper of every pool of the
    main categories, for each method's scores: (a) one threshold for every pool and category; (b) a cut per pool
    chosen knowing the labels, each pool at that precision (the oracle of BENCHMARKS.md's floor section); (c) a cut
    per pool knowing the labels, the precision reached over all pools together; (d) one threshold per category
    (per interest) knowing the labels, the precision reached over all categories together: what a perfect
    calibration of each interest, the same on every day, could reach."""
    cats = [c for c in main if c in pools]
    data: dict[str, dict[str, list[tuple[np.ndarray, np.ndarray]]]] = {name: {c: [] for c in cats} for name in scorers}
    for category in cats:
        for pool in pools[category]:
            labels = np.array([category in p.categories for p in pool])
            for name, scorer in scorers.items():
                data[name][category].append((np.asarray(scorer(pool, category), dtype=np.float64), labels))
        print(f"  {category}", file=sys.stderr, flush=True)
    relevant = {c: sum(int(y.sum()) for _, y in data[next(iter(data))][c]) for c in cats}
    total = sum(relevant.values())

    def cell(passed: int, hits: int, of: int) -> str:
        return f"{hits / of:.2f} / {hits / passed:.2f}" if passed else "0.00 / –"

    p = CEILING_PRECISION
    print(f"\nfloor ceiling: recall / precision at precision >= {p}, pooled over every paper of every pool of "
          f"{len(cats)} categories ({', '.join(cats)}; {total} relevant papers)")
    print("| scores | (a) one global threshold | (b) oracle cut per pool, each pool at the precision "
          "| (c) oracle cut per pool, pooled precision | (d) oracle threshold per category, pooled precision |")
    print("|---|---:|---:|---:|---:|")
    per_category: dict[str, list[str]] = {}
    for name, by_cat in data.items():
        every = [pair for c in cats for pair in by_cat[c]]
        a = best_cut(np.concatenate([s for s, _ in every]), np.concatenate([y for _, y in every]))
        b_cat = {c: np.sum([best_cut(s, y) for s, y in by_cat[c]], axis=0) for c in cats}
        b = np.sum(list(b_cat.values()), axis=0)
        c_ = oracle_pooled([cuts(s, y) for s, y in every])
        d = oracle_pooled([cuts(np.concatenate([s for s, _ in by_cat[c]]), np.concatenate([y for _, y in by_cat[c]]))
                           for c in cats])
        print(f"| {name} | {cell(*a, total)} | {cell(int(b[0]), int(b[1]), total)} | {cell(*c_, total)} "
              f"| {cell(*d, total)} |")
        per_category[name] = [f"{b_cat[c][1] / relevant[c]:.2f}" for c in cats]
    print(f"\n(b) per category: recall of the oracle cut per pool (each pool at precision >= {p})")
    print(f"| scores | {' | '.join(cats)} |")
    print(f"|---|{'---:|' * len(cats)}")
    for name, row in per_category.items():
        print(f"| {name} | {' | '.join(row)} |")


def relevance_scores(corpus: CorpusStats, settings: SelectSettings, dense: object = None) -> Scorer:
    """Our calibrated relevance (what `select.min_relevance` is compared with)."""
    def score(pool: list[Paper], category: str) -> np.ndarray:
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(PROFILES[category])),))
        return Scores(Pool(pool, corpus, dense=dense), subscriber, settings, Signals()).relevance  # type: ignore[arg-type]
    return score


def seed_corpus() -> CorpusStats:
    """Term statistics of a store holding only the 197 seed papers (a new install)."""
    from digest.sources import iter_paths, parse_file

    papers = {}
    for path in iter_paths([ROOT / "seeds"]):
        for paper in parse_file(path, seen_on=DAY).papers:
            papers.setdefault(paper.key, paper)
    return CorpusStats.of(list(papers.values()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, help="the arXiv sample (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--profiles", default="B", choices=sorted(SETS), help="profile set (A: tuning, B: report)")
    parser.add_argument("--pools", type=int, default=30, help="pools per category")
    parser.add_argument("--pool-size", type=int, default=300)
    parser.add_argument("--min-positives", type=int, default=20)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--semantic", choices=("auto", "on", "off"), default="auto")
    parser.add_argument("--cache", type=Path, default=ROOT / "bench" / "out" / "embeddings.db",
                        help="SQLite file caching paper embeddings between runs")
    parser.add_argument("--no-supervised", action="store_true", help="skip the supervised reference (faster)")
    parser.add_argument("--feedback", action="store_true", help="the ten-day feedback curve instead")
    parser.add_argument("--held-out", type=int, default=3,
                        help="--feedback: fixed evaluation pools per simulated subscriber (0: the day curve only)")
    parser.add_argument("--floor", action="store_true", help="only the floor tables (hybrid and keywords alone)")
    parser.add_argument("--floor-ceiling", action="store_true",
                        help="only the recall a floor could reach at precision 0.75 (thresholds, per-pool oracles)")
    parser.add_argument("--scale", action="store_true", help="time ranking for many subscribers instead")
    parser.add_argument("--subscribers", type=int, default=None, help="--scale: 100000; --feedback: 4 per category")
    parser.add_argument("--papers", type=int, default=1000)
    parser.add_argument("--categories", nargs="*", help="only these categories (--feedback: default the 8 main ones)")
    args = parser.parse_args()
    PROFILES.clear()
    PROFILES.update({c: k for c, k in SETS[args.profiles].items() if not args.categories or c in args.categories})
    sample = load(args.data)
    if args.scale:
        from scale import run_scale

        run_scale(sample.papers, args.papers, args.subscribers or 100_000, args.seed)
        return
    corpus = sample_corpus(sample)
    settings = SelectSettings()
    if args.feedback:
        from feedback import feedback_curve

        feedback_curve(sample, corpus, settings, args.subscribers or 4, args.seed, args.categories or MAIN,
                       SETS[args.profiles], with_supervised=not args.no_supervised, held_out=args.held_out)
        return
    rng = random.Random(args.seed)
    pools = {c: make_pools(sample, c, args.pools, args.pool_size, args.min_positives, rng) for c in PROFILES}
    seeds = seed_corpus()
    from digest.select.dense import DenseEmbedder

    dense = DenseEmbedder()
    if args.floor:
        floor_table(pools, corpus, settings, MAIN, dense)
        floor_table(pools, corpus, replace(settings, dense_weight=0.0), MAIN)
        return
    if args.floor_ceiling:
        print(f"profiles {args.profiles}, seed {args.seed}, {args.pools} pools of {args.pool_size} per category")
        alone = replace(settings, dense_weight=0.0)
        scorers: dict[str, Scorer] = {"tfidf": tfidf_scores(sample),
                                      "ours (keywords alone)": relevance_scores(corpus, alone),
                                      "hybrid": relevance_scores(corpus, settings, dense)}
        if not args.no_supervised:
            scorers["supervised"] = supervised_scores(sample, pools)
        floor_ceiling(pools, scorers, MAIN)
        return
    methods: dict[str, Method] = {"random": random_method, "tfidf": tfidf_method(sample),
                                  "ours": ours_method(sample, corpus, settings),
                                  "hybrid": ours_method(sample, corpus, settings, dense=dense)}
    embedder = semantic_embedder(args.semantic, args.cache)
    if embedder is not None:
        methods["ours+sem"] = ours_method(sample, corpus, replace(settings, semantic_weight=SEMANTIC_WEIGHT), embedder)
    methods["seeds-only"] = ours_method(sample, seeds, settings, dense=dense)
    methods["no-bg"] = ours_method(sample, seeds, settings, background=False, dense=dense)
    if not args.no_supervised:
        methods["supervised"] = supervised_method(sample, pools)
    print(f"profiles {args.profiles}, seed {args.seed}, {args.pools} pools of {args.pool_size} per category")
    report(evaluate(methods, pools, args.seed), pools, MAIN)
    floor_table(pools, corpus, settings, MAIN, dense)


if __name__ == "__main__":
    main()
