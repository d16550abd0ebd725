"""Relevance on profiles written outside the ranking code, in four styles, against strong anchors.

    .venv/bin/python bench/ranking.py [--set R] [--pools 10] [--seed 2] [--categories ...] [--methods ...]
    .venv/bin/python bench/ranking.py --set T --seed 1        # the tuning run (calibration is fitted on it)

The protocol of the issue: for each arXiv category, pools of 300 papers holding exactly 30 of the
category (and 270 that arXiv does not list in it), each ranked for a profile of that category; a
paper is relevant when arXiv lists it in the category. Pools and libraries draw only from papers
listed on or after RESERVED_BEFORE: the earlier ones are where the shipped background statistics and
reference embeddings come from (`tools/build_background.py`), so no pool paper is in them. The store
the methods see is the whole sample (as a store holding it would be), unlabelled.

Profiles (`relevance_profiles.py`, written by a helper who saw neither this code nor the data, before
anything was measured): SET_T (tuning: the calibration and every weight are fitted on it, seed 1)
and SET_R (report, seed 2), each in four styles: keywords, description (one sentence), keywords +
description, and library (LIBRARY_SIZE papers of the category from outside its pools, as a reader's
own library). Set R also has a second keyword list (style `keywords2`).

Methods, each scoring every paper of a pool:
  random       a random order
  tfidf        scikit-learn tf-idf cosine (arxiv-sanity-lite's settings), fitted on the store
  bm25s        the `bm25s` library with Snowball stems (PyStemmer), English stop words, each pool indexed
  neural       cosine with the built-in text model (all-MiniLM-L6-v2 int8), untuned
  svm          (library) arxiv-sanity-lite's per-tag linear SVM on tf-idf: library vs the rest of the store
  zotero       (library) zotero-arxiv-daily: similarity to each library paper, weighted by how recently added
  lexical      ours, words only (BM25F, calibrated)
  hybrid       ours, the product's ranking (`digest.select.rank`)
  supervised   logistic regression on the true labels of the store outside the category's pools (a ceiling)
Reported: P@10 and nDCG@10 per category and style (mean over pools, standard error), paired
differences of hybrid against each anchor with the categories it beats them in, and the floor's
precision and recall per style at `select.min_relevance`, and each method's ceiling for the floor: the
largest share of the relevant papers that a cut per pool, chosen knowing the labels, passes at precision
0.75 (the issue's target), so a calibration's shortfall and a ranking's are told apart.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import digest  # noqa: E402, F401  (before numpy: the package sets how OpenBLAS's threads wait, as a send has it)

# isort: split
import numpy as np  # noqa: E402
import relevance_profiles as written  # noqa: E402

from digest.models import Paper  # noqa: E402
from digest.sources.jsonl import paper_of_object  # noqa: E402

DEFAULT_DATA = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --data
DAY = date(2026, 7, 1)
RESERVED_BEFORE = date(2025, 6, 1)  # papers listed before this: background and reference data only
POOL_SIZE, POSITIVES = 300, 30
LIBRARY_SIZE = 10
STYLES = ("keywords", "description", "both", "library")
TUNING_CATEGORIES = written.CATEGORIES[:10]
_CATEGORY = re.compile(r"^[a-z-]+(\.[A-Za-z-]+)?$")


@dataclass
class Sample:
    """The arXiv sample: papers (store ids = line numbers + 1), their categories, and who may be drawn."""

    papers: list[Paper]
    categories: list[frozenset[str]]
    drawable: np.ndarray  # bool: listed on or after RESERVED_BEFORE
    vectors: np.ndarray | None = None  # the text model's embeddings (float32, unit rows), when loaded

    def rows_of(self, category: str) -> np.ndarray:
        return np.array([n for n, c in enumerate(self.categories) if category in c], dtype=np.int64)


def load(path: str = DEFAULT_DATA) -> Sample:
    papers, categories, drawable = [], [], []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for n, line in enumerate(lines):
            row = json.loads(line)
            paper = replace(paper_of_object(row, seen_on=DAY), store_id=n + 1)
            papers.append(paper)
            categories.append(frozenset(c for c in row.get("categories", []) if _CATEGORY.match(c)))
            drawable.append(paper.listed_on is not None and paper.listed_on >= RESERVED_BEFORE)
    return Sample(papers, categories, np.array(drawable))


def load_vectors(sample: Sample, max_tokens: int = 256) -> None:
    """The sample's embeddings from `bench/embed_sample.py`'s cache."""
    from embed_sample import cache_path

    path = cache_path(max_tokens)
    if not path.exists():
        raise SystemExit(f"{path} is missing: run .venv/bin/python bench/embed_sample.py --max-tokens {max_tokens}")
    sample.vectors = np.load(path).astype(np.float32)


@dataclass(frozen=True)
class Case:
    """One pool ranked for one profile: the pool's rows of the sample, and which are relevant."""

    category: str
    rows: np.ndarray
    labels: np.ndarray


def make_pools(sample: Sample, category: str, count: int, rng: random.Random) -> list[np.ndarray]:
    """`count` pools of POOL_SIZE drawable papers, exactly POSITIVES of the category, in a random order."""
    inside = sample.drawable & np.array([category in c for c in sample.categories])
    positives, negatives = np.flatnonzero(inside), np.flatnonzero(sample.drawable & ~inside)
    pools = []
    for _ in range(count):
        rows = np.concatenate([rng.sample(list(positives), POSITIVES),
                               rng.sample(list(negatives), POOL_SIZE - POSITIVES)])
        rng.shuffle(rows)  # type: ignore[arg-type]
        pools.append(np.asarray(rows, dtype=np.int64))
    return pools


def make_library(sample: Sample, category: str, pools: Sequence[np.ndarray], rng: random.Random,
                 size: int = LIBRARY_SIZE) -> np.ndarray:
    """A reader's library: `size` papers of the category that none of its pools holds, drawable ones when there
    are enough (a small category's pools use most of them: then older ones make up the rest)."""
    used = set(np.concatenate(pools).tolist()) if pools else set()
    candidates = [n for n in sample.rows_of(category).tolist() if n not in used]
    drawable = [n for n in candidates if sample.drawable[n]]
    if len(drawable) >= size:
        return np.array(rng.sample(drawable, size), dtype=np.int64)
    older = [n for n in candidates if not sample.drawable[n]]
    return np.array(drawable + rng.sample(older, size - len(drawable)), dtype=np.int64)


@dataclass(frozen=True)
class Profile:
    """What a reader gave for one category, in one style."""

    category: str
    style: str
    keywords: tuple[str, ...] = ()
    description: str = ""
    library: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # sample rows

    def text(self) -> str:
        """The profile as one query text (what the text-only anchors read)."""
        return ". ".join(p for p in (", ".join(self.keywords), self.description) if p)


def profiles_for(category: str, chosen: str, style: str, library: np.ndarray) -> Profile:
    table = {"T": written.SET_T, "R": written.SET_R}[chosen][category]
    if style == "keywords":
        return Profile(category, style, tuple(table["keywords"]))
    if style == "keywords2":
        return Profile(category, style, tuple(written.SET_R2_KEYWORDS[category]))
    if style == "description":
        return Profile(category, style, description=table["description"])
    if style == "both":
        return Profile(category, style, tuple(table["keywords"]), table["description"])
    return Profile(category, style, library=library)


Method = Callable[[Case, Profile], np.ndarray]  # a score per paper of the pool, higher = more relevant


def best(scores: np.ndarray, k: int = 10) -> np.ndarray:
    """The pool indices of the k best scores, best first (ties in pool order)."""
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def precision_ndcg(scores: np.ndarray, labels: np.ndarray, k: int = 10) -> tuple[float, float]:
    """P@k and nDCG@k of ranking by `scores` (ties in pool order)."""
    order = best(scores, k)
    gains = labels[order].astype(float)
    dcg = float((gains / np.log2(np.arange(2, len(gains) + 2))).sum())
    ideal = float((1 / np.log2(np.arange(2, min(k, int(labels.sum())) + 2))).sum())
    return float(gains.mean()), dcg / ideal if ideal else 0.0


def se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


# -- the anchors ----------------------------------------------------------------------------------------


def random_method(seed: int) -> Method:
    def score(case: Case, _: Profile) -> np.ndarray:
        return np.random.default_rng([seed, int(case.rows[0])]).random(len(case.rows))
    return score


def paper_texts(sample: Sample, rows: np.ndarray) -> list[str]:
    return [f"{sample.papers[n].title} {sample.papers[n].abstract}" for n in rows.tolist()]


class Tfidf:
    """arxiv-sanity-lite's tf-idf (its compute.py settings), fitted on the whole store."""

    def __init__(self, sample: Sample) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self.sample = sample
        self.vectorizer = TfidfVectorizer(strip_accents="unicode", lowercase=True, analyzer="word",
                                          stop_words="english", token_pattern=r"(?u)\b[a-zA-Z_][a-zA-Z0-9_]+\b",
                                          ngram_range=(1, 2), max_features=20000, norm="l2", use_idf=True,
                                          smooth_idf=True, sublinear_tf=True, max_df=0.1, min_df=5,
                                          dtype=np.float32)
        self.matrix = self.vectorizer.fit_transform(paper_texts(sample, np.arange(len(sample.papers)))).tocsr()
        self._svms: dict[tuple[int, ...], object] = {}

    def cosine(self, case: Case, profile: Profile) -> np.ndarray:
        """Query text (or the library's centroid) against each paper."""
        if profile.style == "library":
            query = np.asarray(self.matrix[profile.library].mean(axis=0))
            return np.asarray(self.matrix[case.rows] @ query.T).ravel()
        return (self.matrix[case.rows] @ self.vectorizer.transform([profile.text()]).T).toarray().ravel()

    def svm(self, case: Case, profile: Profile) -> np.ndarray:
        """arxiv-sanity-lite's per-tag SVM: the library against every other paper of the store (one fit per library)."""
        from sklearn.svm import LinearSVC

        key = tuple(profile.library.tolist())
        if key not in self._svms:
            labels = np.zeros(self.matrix.shape[0], dtype=np.int64)
            labels[profile.library] = 1
            self._svms[key] = LinearSVC(class_weight="balanced", max_iter=10000, tol=1e-6, C=0.01).fit(
                self.matrix, labels)
        return self._svms[key].decision_function(self.matrix[case.rows])  # type: ignore[no-any-return]


class Bm25s:
    """A stock library call: `bm25s` with Snowball stems and English stop words, each pool indexed."""

    def __init__(self, sample: Sample) -> None:
        import Stemmer

        self.sample, self.stemmer = sample, Stemmer.Stemmer("english")

    def score(self, case: Case, profile: Profile) -> np.ndarray:
        import bm25s

        texts = paper_texts(self.sample, case.rows)
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False),
                        show_progress=False)
        query = " ".join(paper_texts(self.sample, profile.library)) if profile.style == "library" else profile.text()
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, return_ids=False,
                                show_progress=False)[0]
        return retriever.get_scores(tokens)


class Neural:
    """The built-in text model, untuned: cosine of the profile's text (or library centroid) with each paper."""

    def __init__(self, sample: Sample) -> None:
        from digest.select.neural import load

        self.sample, self.model = sample, load()
        self._texts: dict[str, np.ndarray] = {}

    def query(self, text: str) -> np.ndarray:
        if text not in self._texts:
            self._texts[text] = self.model.embed([text])[0]
        return self._texts[text]

    def cosine(self, case: Case, profile: Profile) -> np.ndarray:
        vectors = self.sample.vectors
        assert vectors is not None
        query = vectors[profile.library].mean(axis=0) if profile.style == "library" else self.query(profile.text())
        return vectors[case.rows] @ query

    def zotero(self, case: Case, profile: Profile) -> np.ndarray:
        """zotero-arxiv-daily's scoring: similarity to each library paper, the most recently added weighing most
        (weights 1 / (1 + log10(rank + 1)), normalised; the library's order is the order of adding, newest first)."""
        vectors = self.sample.vectors
        assert vectors is not None
        weights = 1 / (1 + np.log10(np.arange(len(profile.library)) + 1))
        weights /= weights.sum()
        return (vectors[case.rows] @ vectors[profile.library].T) @ weights * 10


class Supervised:
    """Logistic regression on the true labels of every store paper outside the category's pools (a ceiling)."""

    def __init__(self, sample: Sample, tfidf: Tfidf, pools: dict[str, list[np.ndarray]]) -> None:
        self.sample, self.tfidf, self.pools = sample, tfidf, pools
        self.models: dict[str, object] = {}

    def score(self, case: Case, _: Profile) -> np.ndarray:
        from sklearn.linear_model import LogisticRegression

        if case.category not in self.models:
            labels = np.array([case.category in c for c in self.sample.categories])
            outside = np.ones(len(labels), dtype=bool)
            outside[np.concatenate(self.pools[case.category])] = False
            self.models[case.category] = LogisticRegression(C=10, class_weight="balanced", max_iter=2000).fit(
                self.tfidf.matrix[outside], labels[outside])
        return self.models[case.category].decision_function(self.tfidf.matrix[case.rows])  # type: ignore[attr-defined]


# -- ours -------------------------------------------------------------------------------------------------


def sample_embedder(sample: Sample) -> object:
    """The product's embedder with the sample's papers read from bench/embed_sample.py's cache (by store id), as a
    store holding them would serve them; query texts and libraries go through the product's code."""
    from digest.select.dense import DenseEmbedder

    class SampleEmbedder(DenseEmbedder):
        def papers(self, papers: Sequence[Paper]) -> np.ndarray:
            vectors = sample.vectors
            assert vectors is not None
            if all(p.store_id is not None for p in papers):
                return vectors[[p.store_id - 1 for p in papers]]  # type: ignore[operator]
            return super().papers(papers)

    return SampleEmbedder()


class Ours:
    """The product's own selector on a pool: its digest order (diversity included) and calibrated relevance."""

    def __init__(self, sample: Sample, settings: object = None, *, dense: object = "default") -> None:
        from digest.select import CorpusStats, SelectSettings

        self.sample = sample
        self.settings = settings if settings is not None else SelectSettings()
        self.corpus = CorpusStats()
        self.corpus.add_texts((p.store_id, p.title, p.abstract) for p in sample.papers)  # type: ignore[misc]
        self.dense = self._dense() if dense == "default" else dense
        self._pools: dict[tuple[int, ...], object] = {}
        self.relevance: dict[tuple[str, str, tuple[int, ...]], np.ndarray] = {}

    def _dense(self) -> object:
        return sample_embedder(self.sample)

    def pool(self, case: Case) -> object:
        from digest.select import Pool

        key = tuple(case.rows.tolist())
        if key not in self._pools:
            papers = [replace(self.sample.papers[n], listed_on=DAY, published=DAY) for n in case.rows.tolist()]
            self._pools.clear()  # one pool at a time: every profile of a pool is ranked before the next
            self._pools[key] = Pool(papers, self.corpus, dense=self.dense)
        return self._pools[key]

    def subscriber(self, profile: Profile) -> tuple[object, object]:
        from digest.models import Interest, Subscriber
        from digest.select import Signals

        seeds = {}
        refs: tuple[str, ...] = ()
        if profile.style == "library":
            papers = [self.sample.papers[n] for n in profile.library.tolist()]
            refs = tuple(p.arxiv_id or p.title for p in papers)
            seeds = dict(zip(refs, papers, strict=True))
        interest = Interest("Interest", profile.keywords, description=profile.description, seed_papers=refs)
        return Subscriber(email="bench@example.org", interests=(interest,)), Signals(seeds=seeds)

    def score(self, case: Case, profile: Profile, clicks: object = None) -> np.ndarray:
        """The digest's ten picks in order (10 … 1), the other papers after them by relevance (`clicks`: Signals
        with the reader's marks and what they were sent before)."""
        from digest.select import rank
        from digest.select.scores import Scores

        pool = self.pool(case)
        subscriber, signals = self.subscriber(profile)
        if clicks is not None:
            signals = replace(signals, liked=clicks.liked, disliked=clicks.disliked,  # type: ignore[attr-defined]
                              received=clicks.received)  # type: ignore[attr-defined]
        relevance = Scores(pool, subscriber, self.settings, signals).relevance  # type: ignore[arg-type]
        self.relevance[(case.category, profile.style, tuple(case.rows[:3].tolist()))] = relevance
        picks = rank(pool, subscriber, day=DAY, settings=self.settings, signals=signals, limit=10, parts=False)
        out = relevance - 1000.0
        at = {p.store_id: n for n, p in enumerate(pool.papers)}  # type: ignore[attr-defined]
        for n, r in enumerate(picks):
            out[at[r.paper.store_id]] = 10.0 - n
        return out


# -- the run and its report -----------------------------------------------------------------------------

LIBRARY_ONLY = ("svm", "zotero")
FLOOR_LEVELS = (0.3, 0.4, 0.5, 0.6, 0.7)
ORACLE_PRECISION = 0.75  # the floor target: recall at this precision


@dataclass
class Results:
    """(P@10, nDCG@10) of every pool, per style, category and method; the floor's counts per style and level."""

    scores: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = field(default_factory=dict)
    floor: dict[str, np.ndarray] = field(default_factory=dict)  # style → levels × (passed, hits, relevant)
    hits: dict[tuple[str, str], list[np.ndarray]] = field(default_factory=dict)  # (style, method) → cumulative hits

    def add(self, style: str, category: str, method: str, value: tuple[float, float]) -> None:
        self.scores.setdefault(style, {}).setdefault(category, {}).setdefault(method, []).append(value)

    def array(self, style: str, category: str, method: str) -> np.ndarray:
        return np.array(self.scores[style][category][method])


def evaluate(sample: Sample, methods: dict[str, Method], pools: dict[str, list[np.ndarray]],
             profiles: dict[tuple[str, str], Profile], styles: Sequence[str],
             relevance: Callable[[], np.ndarray | None], min_relevance: float) -> Results:
    """Every method on every pool for every profile; `relevance` gives the calibrated relevance of the last
    `hybrid` call (the floor reads it)."""
    results = Results()
    for category, cat_pools in pools.items():
        for rows in cat_pools:
            labels = np.array([category in sample.categories[n] for n in rows.tolist()])
            case = Case(category, rows, labels)
            for style in styles:
                profile = profiles[(category, style)]
                for name, method in methods.items():
                    if name in LIBRARY_ONLY and style != "library":
                        continue
                    scores = method(case, profile)
                    results.add(style, category, name, precision_ndcg(scores, labels))
                    results.hits.setdefault((style, name), []).append(
                        np.cumsum(labels[np.argsort(-scores, kind="stable")]))
                    if name == "hybrid":
                        found = relevance()
                        if found is not None:
                            counts = results.floor.setdefault(style, np.zeros((len(FLOOR_LEVELS), 3)))
                            for n, level in enumerate(FLOOR_LEVELS):
                                passed = found >= level
                                counts[n] += (passed.sum(), (passed & labels).sum(), labels.sum())
        line = "  ".join(f"{style}: " + " ".join(f"{m} {results.array(style, category, m)[:, 1].mean():.3f}"
                                                  for m in results.scores[style][category]) for style in styles)
        print(f"  {category}  {line}", file=sys.stderr, flush=True)
    return results


def report(results: Results, anchors: Sequence[str], min_relevance: float) -> None:
    for style, by_category in results.scores.items():
        cats = list(by_category)
        methods = list(next(iter(by_category.values())))
        print(f"\n### {style}: P@10 / nDCG@10 (± standard error of the nDCG mean over pools)\n")
        print(f"| category | {' | '.join(methods)} |")
        print(f"|---|{'---:|' * len(methods)}")
        for c in cats:
            cells = " | ".join(f"{v[:, 0].mean():.2f} / {v[:, 1].mean():.3f} ±{se(v[:, 1]):.3f}"
                               for v in (results.array(style, c, m) for m in methods))
            print(f"| {c} | {cells} |")
        means = []
        for m in methods:
            both = np.concatenate([results.array(style, c, m) for c in cats])
            means.append(f"{both[:, 0].mean():.3f} / {both[:, 1].mean():.3f} ±{se(both[:, 1]):.3f}")
        print(f"| **mean** | {' | '.join(means)} |")
        if "hybrid" not in methods:
            continue
        print()
        for anchor in [a for a in anchors if a in methods and a != "hybrid"]:
            for k, label in ((1, "nDCG@10"), (0, "P@10")):
                diff = np.concatenate([results.array(style, c, "hybrid")[:, k] - results.array(style, c, anchor)[:, k]
                                       for c in cats])
                wins = sum(results.array(style, c, "hybrid")[:, k].mean()
                           > results.array(style, c, anchor)[:, k].mean() for c in cats)
                print(f"- hybrid − {anchor}: {label} {diff.mean():+.3f} ±{se(diff):.3f} (paired over {len(diff)} "
                      f"pools), above it in {wins} of {len(cats)} categories")
    if results.floor:
        print("\n### the floor: precision / recall of relevance ≥ level, pooled over every paper of every pool\n")
        print(f"| level | {' | '.join(results.floor)} | pooled |")
        print(f"|---:|{'---:|' * (len(results.floor) + 1)}")
        total = sum(results.floor.values())
        for n, level in enumerate(FLOOR_LEVELS):
            def cell(c: np.ndarray, n: int = n) -> str:
                return f"{c[n, 1] / max(c[n, 0], 1):.2f} / {c[n, 1] / max(c[n, 2], 1):.2f}"
            mark = " (default)" if abs(level - min_relevance) < 1e-9 else ""
            print(f"| {level}{mark} | {' | '.join(cell(c) for c in results.floor.values())} | {cell(total)} |")


def best_recall(hits: Sequence[np.ndarray], precision: float = ORACLE_PRECISION) -> float:
    """The most of the relevant papers any floor could pass at this pooled precision, each pool cut where suits it
    best (an oracle: a threshold per pool, chosen knowing the labels). Each pool keeps the top k maximising
    hits(k) - λ·k; λ is swept, and the largest pooled recall whose pooled precision reaches `precision` is kept."""
    relevant = sum(int(h[-1]) for h in hits)
    best = 0.0
    for lam in np.linspace(0.3, 1.0, 141):
        kept = hits_at = 0
        for h in hits:
            gain = np.concatenate([[0.0], h - lam * np.arange(1, len(h) + 1)])
            k = int(np.argmax(gain))
            kept += k
            hits_at += int(h[k - 1]) if k else 0
        if kept and hits_at / kept >= precision:
            best = max(best, hits_at / max(relevant, 1))
    return best


def report_ceiling(results: Results) -> None:
    """`best_recall` per method and style: how far any calibration of that ranking could take the floor."""
    styles = list(dict.fromkeys(s for s, _ in results.hits))
    methods = list(dict.fromkeys(m for _, m in results.hits if m != "random"))
    print(f"\n### the floor's ceiling: the most relevant papers any per-pool cut passes at precision ≥ "
          f"{ORACLE_PRECISION} (labels known)\n")
    print(f"| method | {' | '.join(styles)} | pooled |")
    print(f"|---|{'---:|' * (len(styles) + 1)}")
    for m in methods:
        cells = [f"{best_recall(results.hits[(s, m)]):.2f}" if (s, m) in results.hits else "" for s in styles]
        every = [h for s in styles for h in results.hits.get((s, m), [])]
        print(f"| {m} | {' | '.join(cells)} | {best_recall(every):.2f} |")


# -- feedback: clicks that teach ---------------------------------------------------------------------------


def feedback_curve(sample: Sample, chosen: str, categories: Sequence[str], readers: int, days: int, seed: int,
                   style: str = "keywords") -> None:
    """The simulated reader: each day a new pool, the digest's top 10, a random half of them marked
    (*more* when of the category, *less* when not); the next day ranks with every mark so far. The same pools
    ranked with no clicks are the paired baseline. Reported: P@10 per day (mean over readers, standard error)
    with clicks, without, and the paired difference; the target reads days 4-10.

    A day's pool shares papers with the days before (a small category has fewer papers than ten pools hold), and a
    paper a reader has been sent never comes again, marked or not (`rank.blocked_papers`): so each side is ranked
    with what it sent the days before as received, as a send does. (Without that, the side with clicks lost the
    papers it had marked *more* while the baseline showed them again every day: a paper marked is a paper seen.)"""
    from digest.select import SelectSettings, Signals

    ours = Ours(sample, SelectSettings())
    rng = random.Random(seed)
    with_clicks = np.zeros((0, days))
    without = np.zeros((0, days))
    for category in categories:
        for _ in range(readers):
            pools = make_pools(sample, category, days, rng)
            library = make_library(sample, category, pools, rng)
            profile = profiles_for(category, chosen, style, library)
            liked: list[Paper] = []
            disliked: list[Paper] = []
            sent_with: set[int] = set()  # store ids each side has sent the reader
            sent_without: set[int] = set()
            row_with, row_without = [], []
            for rows in pools:
                labels = np.array([category in sample.categories[n] for n in rows.tolist()])
                case = Case(category, rows, labels)
                base = ours.score(case, profile, Signals(received=frozenset(sent_without)))
                row_without.append(precision_ndcg(base, labels)[0])
                signals = Signals(received=frozenset(sent_with), liked=tuple(liked), disliked=tuple(disliked))
                scores = ours.score(case, profile, signals)
                row_with.append(precision_ndcg(scores, labels)[0])
                top = best(scores)
                sent_with.update(int(sample.papers[int(rows[j])].store_id) for j in top.tolist())
                sent_without.update(int(sample.papers[int(rows[j])].store_id) for j in best(base).tolist())
                for j in rng.sample(top.tolist(), 5):
                    paper = sample.papers[int(rows[j])]
                    (liked if labels[j] else disliked).append(paper)
            with_clicks = np.vstack([with_clicks, row_with])
            without = np.vstack([without, row_without])
        print(f"  {category}: with clicks {with_clicks[-readers:, 3:].mean():.3f}, without "
              f"{without[-readers:, 3:].mean():.3f} (days 4-{days})", file=sys.stderr, flush=True)
    diff = with_clicks - without
    print(f"\n### feedback: P@10 by day, {len(with_clicks)} simulated readers ({readers} per category, {style} "
          f"profiles of set {chosen}), half of each day's top 10 marked\n")
    print("| day | with clicks | no clicks | difference (paired) |")
    print("|---:|---:|---:|---:|")
    for d in range(days):
        print(f"| {d + 1} | {with_clicks[:, d].mean():.3f} ±{se(with_clicks[:, d]):.3f} | "
              f"{without[:, d].mean():.3f} ±{se(without[:, d]):.3f} | {diff[:, d].mean():+.3f} ±{se(diff[:, d]):.3f} |")
    late = diff[:, 3:].mean(axis=1)
    print(f"\ndays 4-{days}: with clicks {with_clicks[:, 3:].mean():.3f}, without {without[:, 3:].mean():.3f}, "
          f"difference {late.mean():+.3f} ±{se(late):.3f} (paired over readers)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA, required=not DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--set", default="R", choices=("T", "R"), help="profile set (T: tuning, R: report)")
    parser.add_argument("--seed", type=int, default=None, help="pool seed (default: 1 for T, 2 for R)")
    parser.add_argument("--pools", type=int, default=6, help="pools per category")
    parser.add_argument("--categories", nargs="*", help="default: set T's ten, set R's twenty")
    parser.add_argument("--styles", nargs="*", default=None)
    parser.add_argument("--methods", nargs="*", default=None,
                        help="default: random tfidf bm25s neural svm zotero lexical hybrid supervised")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--feedback", action="store_true", help="the feedback curve instead (simulated readers)")
    parser.add_argument("--readers", type=int, default=2, help="--feedback: simulated readers per category")
    parser.add_argument("--days", type=int, default=10, help="--feedback: days each reader is followed")
    parser.add_argument("--scale", action="store_true", help="time ranking for many subscribers instead (scale.py)")
    parser.add_argument("--subscribers", type=int, default=100_000, help="--scale: generated subscribers")
    parser.add_argument("--papers", type=int, default=1000, help="--scale: papers in the pool")
    parser.add_argument("--words-only", action="store_true", help="--scale: without the text model")
    parser.add_argument("--workers", type=int, default=1,
                        help="--scale: also rank the subscribers split over this many processes, as `digest send "
                             "--workers N` does (checked against one process's top 10s)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else (1 if args.set == "T" else 2)
    categories = args.categories or (TUNING_CATEGORIES if args.set == "T" else written.CATEGORIES)
    styles = args.styles or ([*STYLES, "keywords2"] if args.set == "R" else list(STYLES))
    wanted = args.methods or ["random", "tfidf", "bm25s", "neural", "svm", "zotero", "lexical", "hybrid",
                              "supervised"]
    sample = load(args.data)
    load_vectors(sample, args.max_tokens)
    if args.scale:
        from scale import run_scale

        run_scale(sample.papers, args.papers, args.subscribers, seed,
                  dense=None if args.words_only else sample_embedder(sample), workers=args.workers)
        return
    if args.feedback:
        feedback_curve(sample, args.set, categories, args.readers, args.days, seed)
        return
    rng = random.Random(seed)
    pools = {c: make_pools(sample, c, args.pools, rng) for c in categories}
    libraries = {c: make_library(sample, c, pools[c], rng) for c in categories}
    profiles = {(c, s): profiles_for(c, args.set, s, libraries[c]) for c in categories for s in styles}
    tfidf = Tfidf(sample)
    methods: dict[str, Method] = {}
    ours: Ours | None = None
    for name in wanted:
        if name == "random":
            methods[name] = random_method(seed)
        elif name == "tfidf":
            methods[name] = tfidf.cosine
        elif name == "bm25s":
            methods[name] = Bm25s(sample).score
        elif name == "neural":
            neural = Neural(sample)
            methods[name] = neural.cosine
        elif name == "zotero":
            methods[name] = Neural(sample).zotero
        elif name == "svm":
            methods[name] = tfidf.svm
        elif name == "hybrid-nodiv":  # the same relevance, ranked without the digest's diversity step
            from digest.select import SelectSettings

            methods[name] = Ours(sample, replace(SelectSettings(), diversity=0.0)).score
        elif name in ("lexical", "hybrid"):
            from digest.select import SelectSettings

            settings = SelectSettings()
            if name == "lexical":
                methods[name] = Ours(sample, replace(settings, text_model=0.0), dense=None).score
            else:
                ours = Ours(sample, settings)
                methods[name] = ours.score
        elif name == "supervised":
            methods[name] = Supervised(sample, tfidf, pools).score
    last: dict[str, np.ndarray | None] = {"relevance": None}

    def relevance() -> np.ndarray | None:
        if ours is None or not ours.relevance:
            return None
        return ours.relevance.popitem()[1]

    min_relevance = ours.settings.min_relevance if ours is not None else 0.5  # type: ignore[attr-defined]
    print(f"set {args.set}, seed {seed}, {args.pools} pools of {POOL_SIZE} ({POSITIVES} of the category) per "
          f"category, {len(categories)} categories, library of {LIBRARY_SIZE}")
    results = evaluate(sample, methods, pools, profiles, styles, relevance, min_relevance)
    report(results, ["random", "tfidf", "bm25s", "neural", "svm", "zotero", "lexical", "supervised"], min_relevance)
    report_ceiling(results)
    del last


if __name__ == "__main__":
    main()
