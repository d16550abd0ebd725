"""Relevance on narrow topics whose truth is not arXiv's categories: paper lists researchers curated on one subject.

    .venv/bin/python bench/finer.py [--data SAMPLE] [--topics bench/topics/topics.json]
        [--profiles bench/topics/profiles.py] [--pools 5] [--seed 3] [--styles ...] [--methods ...]

`bench/ranking.py` takes arXiv's categories as the truth; they are broad. Here a topic is a curated list (an "awesome"
list on GitHub: speculative decoding, GUI agents, industrial anomaly detection, ...), and a paper is relevant when the
list cites it. `bench/topics/topics.json` holds each topic's source (repository, file, commit) and the arXiv ids it
cites that the sample holds (`bench/topics/extract.py` makes an entry); `bench/topics/profiles.py` holds the profiles,
written from each list's name and README before anything was measured. Another topics file (and its profiles) is
evaluated the same way with --topics and --profiles; an entry may also carry its own "keywords" and "sentence".

Protocol, per topic:
  library   LIBRARY_SIZE of the topic's papers, as a reader's own library: the topic's papers listed before
            ranking.RESERVED_BEFORE first (a library is what the reader has read before), then drawable ones.
  pools     up to --pools pools of POOL_SIZE drawable papers (listed on or after RESERVED_BEFORE), each with
            POSITIVES of the topic's papers outside the library, no topic paper in two pools (so a small topic gets
            fewer pools, or none), and POOL_SIZE - POSITIVES negatives drawn from the topic's own arXiv categories:
            a category is drawn with the weight of how often it tags the topic's papers, then a drawable paper of it
            that the topic does not list. Hard and fair: the negatives share the topic's categories, so the
            category alone does not find the topic.
  styles    keywords, sentence (one sentence in the reader's words), library.
  methods   each scores every paper of a pool (ranking.py's classes; the store they see is the whole sample):
              hybrid   the product's selector (ranking.Ours: digest.select.rank, diversity included)
              neural   the built-in text model alone: cosine with the profile's text or the library's centroid
              bm25s    the bm25s library with Snowball stems, each pool indexed
              tfidf    arxiv-sanity-lite's tf-idf cosine, fitted on the store
              svm      (library only) arxiv-sanity-lite's per-tag linear SVM: the library against the rest of the store
              random   a random order
Reported: P@10 and nDCG@10 per style and topic (mean over the topic's pools), their mean over topics (± standard
error over topics: the spread a new topic would be drawn from) and over every pool (± standard error over pools),
and paired differences of hybrid against each anchor. Caveat: a list is not exhaustive, so a negative can be on the
topic without the list citing it; every method meets the same negatives.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import runpy
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import ranking  # noqa: E402  (imports digest first, as a send has it)

# isort: split
import numpy as np  # noqa: E402
from ranking import Bm25s, Case, Method, Neural, Ours, Profile, Sample, Tfidf  # noqa: E402

POOL_SIZE, POSITIVES, LIBRARY_SIZE = 300, 10, 10
STYLES = ("keywords", "sentence", "library")
METHODS = ("random", "tfidf", "bm25s", "neural", "svm", "hybrid")
LIBRARY_ONLY = ("svm",)
DEFAULT_TOPICS = ROOT / "bench" / "topics" / "topics.json"
DEFAULT_PROFILES = ROOT / "bench" / "topics" / "profiles.py"


@dataclass(frozen=True)
class Topic:
    """One curated list: its name, where it came from, the sample rows it cites, and the reader's words for it."""

    name: str
    source: dict[str, str]
    rows: np.ndarray
    keywords: tuple[str, ...] = ()
    sentence: str = ""


@dataclass(frozen=True)
class Draw:
    """What a topic is ranked on: its library and pools (sample rows)."""

    library: np.ndarray
    pools: list[np.ndarray]


# -- topics and profiles ----------------------------------------------------------------------------------------


def load_profiles(path: Path) -> dict[str, dict[str, object]]:
    """{topic: {"keywords": [...], "sentence": "..."}} from a Python file (its PROFILES) or a JSON file."""
    if not path.exists():
        return {}
    if path.suffix == ".py":
        return dict(runpy.run_path(str(path))["PROFILES"])
    return dict(json.loads(path.read_text()))


def load_topics(sample: Sample, path: Path, profiles: dict[str, dict[str, object]]) -> list[Topic]:
    """The topics file's entries, their arXiv ids turned into sample rows (ids the sample lacks are dropped)."""
    row_of = {p.arxiv_id: n for n, p in enumerate(sample.papers) if p.arxiv_id}
    topics = []
    for item in json.loads(path.read_text()):
        words = {**profiles.get(item["topic"], {}), **{k: item[k] for k in ("keywords", "sentence") if k in item}}
        rows = sorted({row_of[i] for i in item["arxiv_ids"] if i in row_of})
        topics.append(Topic(item["topic"], item.get("source", {}), np.array(rows, dtype=np.int64),
                            tuple(words.get("keywords", ())), str(words.get("sentence", ""))))  # type: ignore[arg-type]
    return topics


# -- libraries and pools ------------------------------------------------------------------------------------------


def make_library(sample: Sample, topic: Topic, rng: random.Random, size: int = LIBRARY_SIZE) -> np.ndarray:
    """`size` of the topic's papers, those listed before RESERVED_BEFORE first (they can be in no pool anyway)."""
    rows = topic.rows.tolist()
    older = [n for n in rows if not sample.drawable[n]]
    newer = [n for n in rows if sample.drawable[n]]
    chosen = rng.sample(older, min(size, len(older)))
    chosen += rng.sample(newer, min(size - len(chosen), len(newer)))
    return np.array(chosen, dtype=np.int64)


def negative_candidates(sample: Sample, topic: Topic) -> tuple[list[np.ndarray], list[float]]:
    """Per category of the topic's papers: the drawable papers of that category the topic does not list, and the
    category's weight (how many of the topic's papers it tags)."""
    counts: dict[str, int] = {}
    for n in topic.rows.tolist():
        for c in sample.categories[n]:
            counts[c] = counts.get(c, 0) + 1
    listed = np.zeros(len(sample.papers), dtype=bool)
    listed[topic.rows] = True
    outside = sample.drawable & ~listed
    candidates, weights = [], []
    for category, count in sorted(counts.items()):
        rows = np.flatnonzero(outside & np.array([category in c for c in sample.categories]))
        if len(rows):
            candidates.append(rows)
            weights.append(float(count))
    return candidates, weights


def draw_negatives(candidates: Sequence[np.ndarray], weights: Sequence[float], count: int,
                   rng: random.Random) -> list[int]:
    """`count` distinct papers: each a category drawn by weight, then a paper of that category at random."""
    chosen: dict[int, None] = {}
    while len(chosen) < count:
        rows = rng.choices(candidates, weights=weights)[0]
        chosen.setdefault(int(rows[rng.randrange(len(rows))]), None)
    return list(chosen)


def make_draw(sample: Sample, topic: Topic, pools: int, seed: int) -> Draw:
    """The topic's library and pools; the topic's own random stream, so a topic draws the same in any topics file."""
    rng = random.Random(f"{seed}:{topic.name}")
    library = make_library(sample, topic, rng)
    positives = [n for n in topic.rows.tolist() if sample.drawable[n] and n not in set(library.tolist())]
    rng.shuffle(positives)
    candidates, weights = negative_candidates(sample, topic)
    out = []
    for k in range(min(pools, len(positives) // POSITIVES)):
        rows = positives[k * POSITIVES:(k + 1) * POSITIVES] + draw_negatives(candidates, weights,
                                                                             POOL_SIZE - POSITIVES, rng)
        rng.shuffle(rows)
        out.append(np.array(rows, dtype=np.int64))
    return Draw(library, out)


def profile_for(topic: Topic, style: str, library: np.ndarray) -> Profile | None:
    """The reader's profile in one style, or None when the topic has no words for that style."""
    if style == "keywords":
        return Profile(topic.name, style, keywords=topic.keywords) if topic.keywords else None
    if style == "sentence":
        return Profile(topic.name, style, description=topic.sentence) if topic.sentence else None
    return Profile(topic.name, style, library=library) if len(library) else None


# -- the run -----------------------------------------------------------------------------------------------------


def build_methods(sample: Sample, wanted: Sequence[str], seed: int) -> dict[str, Method]:
    from digest.select import SelectSettings

    tfidf = Tfidf(sample) if {"tfidf", "svm"} & set(wanted) else None
    methods: dict[str, Method] = {}
    for name in wanted:
        if name == "random":
            methods[name] = ranking.random_method(seed)
        elif name == "tfidf":
            methods[name] = tfidf.cosine  # type: ignore[union-attr]
        elif name == "svm":
            methods[name] = tfidf.svm  # type: ignore[union-attr]
        elif name == "bm25s":
            methods[name] = Bm25s(sample).score
        elif name == "neural":
            methods[name] = Neural(sample).cosine
        elif name == "hybrid":
            methods[name] = Ours(sample, SelectSettings()).score
        else:
            raise SystemExit(f"unknown method {name!r} (known: {', '.join(METHODS)})")
    return methods


@dataclass
class Results:
    """(P@10, nDCG@10) of every pool, per style, topic and method."""

    scores: dict[str, dict[str, dict[str, list[tuple[float, float]]]]] = field(default_factory=dict)

    def add(self, style: str, topic: str, method: str, value: tuple[float, float]) -> None:
        self.scores.setdefault(style, {}).setdefault(topic, {}).setdefault(method, []).append(value)

    def array(self, style: str, topic: str, method: str) -> np.ndarray:
        return np.array(self.scores[style][topic][method])


def evaluate_topic(sample: Sample, topic: Topic, draw: Draw, methods: dict[str, Method], styles: Sequence[str],
                   results: Results) -> None:
    """Every method on every pool of the topic for every style the topic has a profile in."""
    profiles = {s: profile_for(topic, s, draw.library) for s in styles}
    listed = set(topic.rows.tolist())
    for rows in draw.pools:
        labels = np.array([n in listed for n in rows.tolist()])
        case = Case(topic.name, rows, labels)
        for style, profile in profiles.items():
            if profile is None:
                continue
            for name, method in methods.items():
                if name in LIBRARY_ONLY and style != "library":
                    continue
                results.add(style, topic.name, name, ranking.precision_ndcg(method(case, profile), labels))


# -- the report ----------------------------------------------------------------------------------------------------


def se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def print_topics(sample: Sample, topics: Sequence[Topic], draws: dict[str, Draw]) -> None:
    print("\n### topics\n")
    print("| topic | source | in sample | drawable | pools | library (older + drawable) |")
    print("|---|---|---:|---:|---:|---:|")
    for t in topics:
        d = draws[t.name]
        older = int((~sample.drawable[d.library]).sum()) if len(d.library) else 0
        source = f"{t.source.get('repo', '?')} `{t.source.get('path', '?')}` @{t.source.get('commit', '?')[:10]}"
        print(f"| {t.name} | {source} | {len(t.rows)} | {int(sample.drawable[t.rows].sum())} | {len(d.pools)} | "
              f"{older} + {len(d.library) - older} |")


def topic_means(results: Results, style: str, method: str, k: int) -> np.ndarray:
    return np.array([results.array(style, t, method)[:, k].mean() for t in results.scores[style]])


def pooled(results: Results, style: str, method: str, k: int) -> np.ndarray:
    return np.concatenate([results.array(style, t, method)[:, k] for t in results.scores[style]])


def print_style(results: Results, style: str) -> None:
    by_topic = results.scores[style]
    methods = list(next(iter(by_topic.values())))
    pools = sum(len(v[methods[0]]) for v in by_topic.values())
    print(f"\n### {style}: P@10 / nDCG@10, {len(by_topic)} topics, {pools} pools\n")
    print(f"| topic (pools) | {' | '.join(methods)} |")
    print(f"|---|{'---:|' * len(methods)}")
    for t, per_method in by_topic.items():
        cells = " | ".join(f"{v[:, 0].mean():.2f} / {v[:, 1].mean():.3f}"
                           for v in (np.array(per_method[m]) for m in methods))
        print(f"| {t} ({len(per_method[methods[0]])}) | {cells} |")
    for label, values in (("mean over topics", topic_means), ("mean over pools", pooled)):
        cells = []
        for m in methods:
            p, n = values(results, style, m, 0), values(results, style, m, 1)
            cells.append(f"{p.mean():.3f} ±{se(p):.3f} / {n.mean():.3f} ±{se(n):.3f}")
        print(f"| **{label}** | {' | '.join(cells)} |")
    if "hybrid" not in methods:
        return
    print()
    for anchor in [m for m in methods if m != "hybrid"]:
        parts = []
        for k, metric in ((1, "nDCG@10"), (0, "P@10")):
            by_topic_diff = topic_means(results, style, "hybrid", k) - topic_means(results, style, anchor, k)
            by_pool_diff = pooled(results, style, "hybrid", k) - pooled(results, style, anchor, k)
            parts.append(f"{metric} {by_topic_diff.mean():+.3f} ±{se(by_topic_diff):.3f} over topics "
                         f"(above in {int((by_topic_diff > 0).sum())}, below in {int((by_topic_diff < 0).sum())} of "
                         f"{len(by_topic_diff)}), {by_pool_diff.mean():+.3f} ±{se(by_pool_diff):.3f} over pools")
        print(f"- hybrid − {anchor}: " + "; ".join(parts))


def shown(path: Path) -> str:
    """A path as the report shows it: relative to the repository when inside it."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def print_header(args: argparse.Namespace) -> None:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(f"$ {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"commit {head.stdout.strip() or '?'}; seed {args.seed}; up to {args.pools} pools of {POOL_SIZE} "
          f"({POSITIVES} of the topic) per topic; library of {LIBRARY_SIZE}; topics {shown(args.topics)}, profiles "
          f"{shown(args.profiles)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=ranking.DEFAULT_DATA, required=not ranking.DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--topics", type=Path, default=DEFAULT_TOPICS, help="a topics file (default: %(default)s)")
    parser.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES,
                        help="the topics' keywords and sentences, .py (PROFILES) or .json (default: %(default)s)")
    parser.add_argument("--pools", type=int, default=5, help="pools per topic, at most (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=3, help="the draw's seed (default: %(default)s)")
    parser.add_argument("--styles", nargs="*", default=list(STYLES))
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--max-tokens", type=int, default=256, help="the embeddings cache's (bench/embed_sample.py)")
    args = parser.parse_args()
    started = time.monotonic()
    print_header(args)
    sample = ranking.load(args.data)
    ranking.load_vectors(sample, args.max_tokens)
    topics = load_topics(sample, args.topics, load_profiles(args.profiles))
    draws = {t.name: make_draw(sample, t, args.pools, args.seed) for t in topics}
    print_topics(sample, topics, draws)
    methods = build_methods(sample, args.methods, args.seed)
    results = Results()
    for topic in topics:
        if not draws[topic.name].pools:
            print(f"  {topic.name}: too few drawable papers for a pool, skipped", file=sys.stderr, flush=True)
            continue
        evaluate_topic(sample, topic, draws[topic.name], methods, args.styles, results)
        line = "  ".join(f"{s}: " + " ".join(f"{m} {results.array(s, topic.name, m)[:, 1].mean():.3f}"
                                             for m in results.scores[s][topic.name])
                         for s in args.styles if topic.name in results.scores.get(s, {}))
        print(f"  {topic.name}  {line}", file=sys.stderr, flush=True)
    for style in args.styles:
        if results.scores.get(style):
            print_style(results, style)
    print(f"\nrun time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
