"""Readers with several interests: how a digest's ten places are shared among them, per policy, against anchors.

    .venv/bin/python bench/interests.py [--readers 60] [--pools 2] [--seed 3] [--skew] [--policies today ...]

Readers are generated from `--seed` (and written to bench/out/ with their pools): `--readers` readers for each count
of interests 2, 3, 4 and 5. Each interest is one category of `relevance_profiles.CATEGORIES` (distinct within a
reader) given in one style of set R (keywords, description, both, or a library of LIBRARY_SIZE papers of the category
from outside the reader's pools, as `ranking.make_library` draws it); a reader's styles are a shuffled cycle of the
four, so they are mixed. Each reader gets `--pools` pools of POOL_SIZE drawable papers: `--positives` (default
POSITIVES_PER_INTEREST) papers of each interest's category (with `--skew`, the first interest is broad: SKEW_BROAD
papers of its category, SKEW_NARROW of each other's), each listed in that one of the reader's categories only, and
the rest listed in none of them. A paper is relevant when it is in the category of one of the reader's interests, and
counts for that interest.

Methods, each picking for every reader and pool:
  <policy>    the product's digest (`select.select_digest`, max_papers 10, the relevance floor applies) with the
              SelectSettings overrides of POLICIES (`today`: the defaults)
  bm25s-rr    `ranking.Bm25s` on each interest's profile, the interests taking turns at their best unpicked paper
  neural-rr   the same with `ranking.Neural` (the text model alone)
  bm25s-max   one order by each paper's best score over the interests (bm25s scores are not comparable across
              interests: a broad or wordy profile outscores the others)
Anchors have no floor: they always pick 10.

Per reader and pool: precision (relevant picks / picks; undefined for an empty digest, counted apart), coverage
(every interest has a relevant pick), weakest (the fewest relevant picks of any interest) and the picks' count.
Reported per method by interest count and overall as means with standard errors over readers (a reader's pools
averaged first), each policy's paired difference against `today`, the issue's target rows (3 interests, 10 places:
coverage ≥ 0.95, mean weakest ≥ 2, precision no more than 0.02 below today's), relevant picks per interest by
style (and broad against narrow with --skew), and what the product's digests do with the places.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ranking  # noqa: E402  (imports digest before numpy, as a send does)

# isort: split
import numpy as np  # noqa: E402
import relevance_profiles as written  # noqa: E402

from digest.models import Interest, Subscriber  # noqa: E402
from digest.select import SelectSettings, Signals, select_digest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
POOL_SIZE = ranking.POOL_SIZE
POSITIVES_PER_INTEREST = 10
SKEW_BROAD, SKEW_NARROW = 40, 5
INTEREST_COUNTS = (2, 3, 4, 5)
MAX_PAPERS = 10
STYLES = ranking.STYLES  # keywords, description, both, library
ANCHORS = ("bm25s-rr", "neural-rr", "bm25s-max")
# name → SelectSettings field overrides; "today" is one order over all interests (the digest before shared places)
POLICIES: dict[str, dict[str, object]] = {"today": {"allocation": 0.0}, "shares": {"allocation": 1.0},
                                          "xquad": {"allocation": 2.0}}
# The target, for readers of TARGET_INTERESTS interests and 10 places.
TARGET_INTERESTS, TARGET_COVERAGE, TARGET_WEAKEST, TARGET_PRECISION_LOSS = 3, 0.95, 2.0, 0.02


# -- readers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    """A generated reader: one profile per interest (a category each), and the pools their digests are picked from."""

    name: str
    profiles: tuple[ranking.Profile, ...]
    pools: tuple[np.ndarray, ...]  # sample rows, in pool order

    @property
    def categories(self) -> tuple[str, ...]:
        return tuple(p.category for p in self.profiles)


def category_masks(sample: ranking.Sample) -> dict[str, np.ndarray]:
    return {c: np.array([c in cats for cats in sample.categories]) for c in written.CATEGORIES}


def make_pool(sample: ranking.Sample, masks: dict[str, np.ndarray], categories: Sequence[str], sizes: Sequence[int],
              rng: random.Random) -> np.ndarray:
    """POOL_SIZE drawable papers: sizes[i] listed in categories[i] and in none of the other categories, the rest
    in none of them, in a random order."""
    listed = np.vstack([masks[c] for c in categories])
    once = listed.sum(axis=0) == 1
    rows: list[int] = []
    for i, size in enumerate(sizes):
        rows += rng.sample(np.flatnonzero(sample.drawable & once & listed[i]).tolist(), size)
    rows += rng.sample(np.flatnonzero(sample.drawable & ~listed.any(axis=0)).tolist(), POOL_SIZE - len(rows))
    rng.shuffle(rows)
    return np.array(rows, dtype=np.int64)


def styles_for(count: int, rng: random.Random) -> list[str]:
    """A reader's styles: the four in a shuffled order, cycled (mixed: no two alike below five interests)."""
    order = list(STYLES)
    rng.shuffle(order)
    return [order[i % len(order)] for i in range(count)]


def make_readers(sample: ranking.Sample, per_count: int, pools: int, seed: int, skew: bool,
                 positives: int = POSITIVES_PER_INTEREST) -> list[Reader]:
    masks = category_masks(sample)
    rng = random.Random(seed)
    readers = []
    for count in INTEREST_COUNTS:
        for n in range(per_count):
            categories = rng.sample(written.CATEGORIES, count)
            styles = styles_for(count, rng)
            sizes = [SKEW_BROAD] + [SKEW_NARROW] * (count - 1) if skew else [positives] * count
            drawn = [make_pool(sample, masks, categories, sizes, rng) for _ in range(pools)]
            profiles = []
            for category, style in zip(categories, styles, strict=True):
                library = ranking.make_library(sample, category, drawn, rng) if style == "library" \
                    else np.zeros(0, dtype=np.int64)
                profiles.append(ranking.profiles_for(category, "R", style, library))
            readers.append(Reader(f"r{count}-{n:03d}", tuple(profiles), tuple(drawn)))
    return readers


def write_readers(sample: ranking.Sample, readers: Sequence[Reader], path: Path) -> None:
    """The readers as JSON: each interest's category, style and library, each pool's papers (arXiv ids)."""
    def ids(rows: np.ndarray) -> list[str]:
        return [sample.papers[n].arxiv_id or sample.papers[n].title for n in rows.tolist()]

    out = [{"name": r.name,
            "interests": [{"category": p.category, "style": p.style, "library": ids(p.library)} for p in r.profiles],
            "pools": [ids(rows) for rows in r.pools]} for r in readers]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=None) + "\n", encoding="utf-8")


# -- picking --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one method picked for one reader and pool."""

    method: str
    reader: int  # index in the readers
    pool: int
    picks: int
    relevant: tuple[int, ...]  # relevant picks per interest
    filed: int = 0  # relevant picks the digest filed under their own interest
    sections: int = 0  # the digest's sections

    @property
    def precision(self) -> float | None:
        return sum(self.relevant) / self.picks if self.picks else None

    @property
    def coverage(self) -> float:
        return float(min(self.relevant) >= 1)

    @property
    def weakest(self) -> float:
        return float(min(self.relevant))


def owners(sample: ranking.Sample, reader: Reader, rows: np.ndarray) -> np.ndarray:
    """For each paper of a pool, the interest it is relevant to (-1: none)."""
    out = np.full(len(rows), -1, dtype=np.int64)
    for i, category in enumerate(reader.categories):
        out[[category in sample.categories[n] for n in rows.tolist()]] = i
    return out


def round_robin(scores: Sequence[np.ndarray], k: int = MAX_PAPERS) -> list[int]:
    """Interests take turns, each taking its best paper not picked yet, until k are picked (pool positions)."""
    orders = [ranking.best(s, len(s)).tolist() for s in scores]
    at = [0] * len(orders)
    picked: list[int] = []
    taken: set[int] = set()
    while len(picked) < min(k, len(scores[0])):
        for i, order in enumerate(orders):
            while order[at[i]] in taken:
                at[i] += 1
            picked.append(order[at[i]])
            taken.add(order[at[i]])
            if len(picked) == k:
                break
    return picked


def counted(positions: Sequence[int], owner: np.ndarray, interests: int) -> tuple[int, ...]:
    found = owner[list(positions)]
    return tuple(int((found == i).sum()) for i in range(interests))


class Product:
    """The product's digests for a reader: one Subscriber with an Interest per profile, the libraries' seeds."""

    def __init__(self, sample: ranking.Sample, policies: dict[str, SelectSettings], oracle: bool = True) -> None:
        self.sample, self.policies, self.oracle = sample, policies, oracle
        self.ours = ranking.Ours(sample, SelectSettings())  # the store's statistics and the text model, shared

    def subscriber(self, reader: Reader) -> tuple[Subscriber, Signals]:
        interests, seeds = [], {}
        for profile in reader.profiles:
            refs: tuple[str, ...] = ()
            if profile.style == "library":
                papers = [self.sample.papers[n] for n in profile.library.tolist()]
                refs = tuple(p.arxiv_id or p.title for p in papers)
                seeds.update(zip(refs, papers, strict=True))
            interests.append(Interest(profile.category, profile.keywords, description=profile.description,
                                      seed_papers=refs))
        return (Subscriber(email=f"{reader.name}@example.org", max_papers=MAX_PAPERS, interests=tuple(interests)),
                Signals(seeds=seeds))

    def outcomes(self, reader: Reader, index: int, at: int, rows: np.ndarray, owner: np.ndarray) -> list[Outcome]:
        pool = self.ours.pool(ranking.Case("", rows, owner >= 0))
        subscriber, signals = self.subscriber(reader)
        position = {p.store_id: j for j, p in enumerate(pool.papers)}  # type: ignore[attr-defined]
        out = []
        for name, settings in self.policies.items():
            digest = select_digest(pool, subscriber, day=ranking.DAY, settings=settings,  # type: ignore[arg-type]
                                   signals=signals)
            filed = [(position[item.paper.store_id], section.name) for section in digest.sections
                     for item in section.items]
            picks = [j for j, _ in filed]
            own = sum(1 for j, name_ in filed if owner[j] >= 0 and reader.categories[owner[j]] == name_)
            out.append(Outcome(name, index, at, len(picks), counted(picks, owner, len(reader.profiles)), own,
                               len(digest.sections)))
        if self.oracle:
            out.append(self._oracle(pool, subscriber, signals, reader, index, at, owner))
        return out

    def _oracle(self, pool: object, subscriber: Subscriber, signals: Signals, reader: Reader, index: int, at: int,
                owner: np.ndarray) -> Outcome:
        """The ceiling of any sharing of the places over the product's candidates: each interest, in turns, takes
        the next paper of its own category among those its own relevance puts above the floor (best first), until
        the places are filled or no interest has one left. Knowing the labels, it takes no irrelevant paper."""
        from digest.select.scores import Scores
        from digest.select.shares import own_relevance

        settings = next(iter(self.policies.values()))
        scores = Scores(pool, subscriber, settings, signals)  # type: ignore[arg-type]
        lists = []
        for n in range(len(reader.profiles)):
            relevance = own_relevance(scores, n)
            found = [j for j in np.argsort(-relevance, kind="stable").tolist()
                     if relevance[j] >= settings.min_relevance and owner[j] == n]
            lists.append(found)
        picks: list[int] = []
        while len(picks) < MAX_PAPERS and any(lists):
            for found in lists:
                if found and len(picks) < MAX_PAPERS:
                    picks.append(found.pop(0))
        return Outcome("oracle", index, at, len(picks), counted(picks, owner, len(reader.profiles)))


class Anchors:
    """The text-only anchors: each interest scored on its own, then a round robin, or one order by the best score."""

    def __init__(self, sample: ranking.Sample) -> None:
        self.bm25s, self.neural = ranking.Bm25s(sample), ranking.Neural(sample)

    def outcomes(self, reader: Reader, index: int, at: int, rows: np.ndarray, owner: np.ndarray,
                 wanted: Sequence[str]) -> list[Outcome]:
        case = ranking.Case("", rows, owner >= 0)
        k = len(reader.profiles)
        words = [self.bm25s.score(case, p) for p in reader.profiles] if {"bm25s-rr", "bm25s-max"} & set(wanted) else []
        picks: dict[str, Callable[[], list[int]]] = {
            "bm25s-rr": lambda: round_robin(words),
            "neural-rr": lambda: round_robin([self.neural.cosine(case, p) for p in reader.profiles]),
            "bm25s-max": lambda: ranking.best(np.max(np.vstack(words), axis=0), MAX_PAPERS).tolist(),
        }
        out = []
        for name in wanted:
            chosen = picks[name]()
            out.append(Outcome(name, index, at, len(chosen), counted(chosen, owner, k)))
        return out


def run(sample: ranking.Sample, readers: Sequence[Reader], product: Product, anchors: Anchors,
        wanted: Sequence[str]) -> list[Outcome]:
    outcomes: list[Outcome] = []
    start = time.perf_counter()
    for index, reader in enumerate(readers):
        for at, rows in enumerate(reader.pools):
            owner = owners(sample, reader, rows)
            outcomes += product.outcomes(reader, index, at, rows, owner)
            outcomes += anchors.outcomes(reader, index, at, rows, owner, wanted)
        if (index + 1) % 10 == 0 or index + 1 == len(readers):
            done = [o for o in outcomes if o.method == "today" and o.precision is not None]
            print(f"  {index + 1}/{len(readers)} readers, {time.perf_counter() - start:.0f} s; today so far: "
                  f"precision {np.mean([o.precision for o in done]):.3f}, coverage "
                  f"{np.mean([o.coverage for o in outcomes if o.method == 'today']):.2f}",
                  file=sys.stderr, flush=True)
    return outcomes


# -- the report ------------------------------------------------------------------------------------------------


def per_reader(outcomes: Sequence[Outcome], value: Callable[[Outcome], float | None]) -> np.ndarray:
    """The mean of `value` over each reader's pools (undefined values left out; a reader with none, left out)."""
    by: dict[int, list[float]] = {}
    for o in outcomes:
        v = value(o)
        if v is not None:
            by.setdefault(o.reader, []).append(v)
    return np.array([np.mean(v) for v in by.values()])


def cell(values: np.ndarray, digits: int = 3, signed: bool = False) -> str:
    if not len(values):
        return "-"
    sign = "+" if signed else ""
    return f"{values.mean():{sign}.{digits}f} ±{ranking.se(values):.{digits}f}"


def select(outcomes: Sequence[Outcome], method: str, readers: Sequence[Reader], count: int | None) -> list[Outcome]:
    return [o for o in outcomes if o.method == method and (count is None or len(readers[o.reader].profiles) == count)]


def report_methods(outcomes: Sequence[Outcome], readers: Sequence[Reader], methods: Sequence[str]) -> None:
    print("\n### per method: mean over readers (± standard error; a reader's pools averaged first)\n")
    print(f"{'method':<12} {'interests':>9} {'readers':>7} {'precision':>15} {'coverage':>13} {'weakest':>13} "
          f"{'picks':>13} {'empty':>6}")
    for method in methods:
        for count in (*INTEREST_COUNTS, None):
            chosen = select(outcomes, method, readers, count)
            empty = sum(o.picks == 0 for o in chosen)
            print(f"{method:<12} {count or 'all':>9} {len({o.reader for o in chosen}):>7} "
                  f"{cell(per_reader(chosen, lambda o: o.precision)):>15} "
                  f"{cell(per_reader(chosen, lambda o: o.coverage), 2):>13} "
                  f"{cell(per_reader(chosen, lambda o: o.weakest), 2):>13} "
                  f"{cell(per_reader(chosen, lambda o: o.picks), 2):>13} {empty:>6}")
        print()


def paired(outcomes: Sequence[Outcome], readers: Sequence[Reader], policy: str, count: int | None,
           value: Callable[[Outcome], float | None]) -> np.ndarray:
    """Per reader, the mean over pools of value(policy) − value(today) (pools where both are defined)."""
    base = {(o.reader, o.pool): o for o in select(outcomes, "today", readers, count)}
    by: dict[int, list[float]] = {}
    for o in select(outcomes, policy, readers, count):
        a, b = value(o), value(base[(o.reader, o.pool)])
        if a is not None and b is not None:
            by.setdefault(o.reader, []).append(a - b)
    return np.array([np.mean(v) for v in by.values()])


def report_paired(outcomes: Sequence[Outcome], readers: Sequence[Reader], methods: Sequence[str]) -> None:
    others = [m for m in methods if m != "today"]
    if not others:
        return
    print("### paired differences against today (method − today, per reader, ± standard error)\n")
    print(f"{'method':<12} {'interests':>9} {'precision':>16} {'coverage':>14} {'weakest':>14}")
    for method in others:
        for count in (*INTEREST_COUNTS, None):
            print(f"{method:<12} {count or 'all':>9} "
                  f"{cell(paired(outcomes, readers, method, count, lambda o: o.precision), signed=True):>16} "
                  f"{cell(paired(outcomes, readers, method, count, lambda o: o.coverage), 2, True):>14} "
                  f"{cell(paired(outcomes, readers, method, count, lambda o: o.weakest), 2, True):>14}")
        print()


def report_targets(outcomes: Sequence[Outcome], readers: Sequence[Reader], methods: Sequence[str],
                   policies: Sequence[str]) -> None:
    print(f"### target: {TARGET_INTERESTS} interests, {MAX_PAPERS} slots: coverage ≥ {TARGET_COVERAGE}, weakest ≥ "
          f"{TARGET_WEAKEST:g} (mean), precision within {TARGET_PRECISION_LOSS} of today (no more than that below)\n")
    print(f"{'method':<20} {'coverage':>14} {'weakest':>13} {'precision − today':>22} {'verdict':>8}")
    for method in methods:
        chosen = select(outcomes, method, readers, TARGET_INTERESTS)
        if not chosen:
            continue
        coverage = per_reader(chosen, lambda o: o.coverage).mean()
        weakest = per_reader(chosen, lambda o: o.weakest).mean()
        loss = paired(outcomes, readers, method, TARGET_INTERESTS, lambda o: o.precision)
        checks = (coverage >= TARGET_COVERAGE, weakest >= TARGET_WEAKEST,
                  len(loss) > 0 and loss.mean() >= -TARGET_PRECISION_LOSS)
        mark = ["PASS" if c else "FAIL" for c in checks]
        label = method if method in policies else f"{method} (anchor)"
        print(f"{label:<20} {coverage:>9.3f} {mark[0]} {weakest:>8.2f} {mark[1]} {cell(loss, signed=True):>17} "
              f"{mark[2]} {'PASS' if all(checks) else 'FAIL':>8}")
    print()


def report_styles(outcomes: Sequence[Outcome], readers: Sequence[Reader], methods: Sequence[str], skew: bool) -> None:
    """Relevant picks per interest by its style (and by its place: first, the broad one with --skew, or the rest)."""
    print("### relevant picks per interest, by the interest's style and place (mean over interests × pools)\n")
    first = "broad" if skew else "first"
    rest = "narrow" if skew else "others"
    print(f"{'method':<12} " + " ".join(f"{s:>11}" for s in (*STYLES, first, rest)))
    for method in methods:
        by: dict[str, list[int]] = {}
        for o in select(outcomes, method, readers, None):
            for i, (profile, hits) in enumerate(zip(readers[o.reader].profiles, o.relevant, strict=True)):
                by.setdefault(profile.style, []).append(hits)
                by.setdefault(first if i == 0 else rest, []).append(hits)
        print(f"{method:<12} " + " ".join(f"{np.mean(by[s]) if s in by else float('nan'):>11.2f}"
                                          for s in (*STYLES, first, rest)))
    print()


def report_digests(outcomes: Sequence[Outcome], readers: Sequence[Reader], policies: Sequence[str]) -> None:
    """What the product's digests do with the places (shares of digests, pooled over readers and pools)."""
    print("### the product's digests (shares of reader-pools)\n")
    print(f"{'policy':<12} {'interests':>9} {'empty':>6} {'<10':>6} {'one takes all':>14} {'an interest 0':>14} "
          f"{'filed right':>12} {'sections':>9} {'1 section':>10}")
    for policy in policies:
        for count in (*INTEREST_COUNTS, None):
            chosen = select(outcomes, policy, readers, count)
            hit = [o for o in chosen if sum(o.relevant)]
            alone = np.mean([max(o.relevant) == sum(o.relevant) for o in hit]) if hit else math.nan
            print(f"{policy:<12} {count or 'all':>9} {np.mean([o.picks == 0 for o in chosen]):>6.3f} "
                  f"{np.mean([o.picks < MAX_PAPERS for o in chosen]):>6.3f} {alone:>14.3f} "
                  f"{np.mean([min(o.relevant) == 0 for o in chosen]):>14.3f} "
                  f"{sum(o.filed for o in chosen) / max(sum(sum(o.relevant) for o in chosen), 1):>12.3f} "
                  f"{np.mean([o.sections for o in chosen]):>9.2f} {np.mean([o.sections == 1 for o in chosen]):>10.3f}")
        print()
    print("(one takes all: of the digests with a relevant pick, those whose relevant picks all belong to one interest;"
          "\n an interest 0: digests where some interest has no relevant pick; filed right: relevant picks filed under"
          "\n the interest whose category they are in; sections: mean sections per digest; 1 section: digests whose"
          "\n picks are all filed under one interest)\n")


def commit() -> str:
    def git(*args: str) -> str:
        found = subprocess.run(["git", "--no-optional-locks", *args], cwd=ROOT, capture_output=True, text=True)
        return found.stdout.strip() if found.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = len(git("status", "--porcelain", "--untracked-files=no").splitlines())
    return f"{head} (+{changed} files changed in the work tree)" if changed else head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=ranking.DEFAULT_DATA, required=not ranking.DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--readers", type=int, default=60, help="readers per count of interests (2, 3, 4, 5)")
    parser.add_argument("--pools", type=int, default=2, help="pools per reader")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--skew", action="store_true",
                        help=f"the first interest broad ({SKEW_BROAD} relevant papers), the others {SKEW_NARROW} each")
    parser.add_argument("--positives", type=int, default=POSITIVES_PER_INTEREST,
                        help="relevant papers per interest in each pool (without --skew)")
    parser.add_argument("--policies", nargs="*", choices=list(POLICIES), default=None, help="default: all")
    parser.add_argument("--anchors", nargs="*", choices=ANCHORS, default=None, help="default: all")
    parser.add_argument("--max-tokens", type=int, default=256)
    args = parser.parse_args()
    policies = args.policies if args.policies is not None else list(POLICIES)
    if "today" not in policies:
        policies = ["today", *policies]  # the paired baseline
    wanted = args.anchors if args.anchors is not None else list(ANCHORS)
    print("command: " + shlex.join(["bench/interests.py", *sys.argv[1:]]))
    print(f"commit: {commit()}")
    start = time.perf_counter()
    sample = ranking.load(args.data)
    ranking.load_vectors(sample, args.max_tokens)
    readers = make_readers(sample, args.readers, args.pools, args.seed, args.skew, args.positives)
    shape = "-skew" if args.skew else f"-k{args.positives}"
    path = OUT / f"interests-readers-s{args.seed}-n{args.readers}-p{args.pools}{shape}.json"
    write_readers(sample, readers, path)
    sizes = f"first {SKEW_BROAD}, others {SKEW_NARROW}" if args.skew else f"{args.positives} each"
    print(f"{len(readers)} readers ({args.readers} per count of interests {INTEREST_COUNTS}), seed {args.seed}, "
          f"{args.pools} pools of {POOL_SIZE} each, relevant papers per interest: {sizes}; profiles of set R; "
          f"max_papers {MAX_PAPERS}; readers written to bench/out/{path.name}")
    settings = {name: replace(SelectSettings(), **POLICIES[name]) for name in policies}  # type: ignore[arg-type]
    for name in policies:
        print(f"policy {name}: {POLICIES[name] or 'the defaults'}")
    product, anchors = Product(sample, settings), Anchors(sample)
    print(f"  loaded in {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    outcomes = run(sample, readers, product, anchors, wanted)
    methods = [*policies, "oracle", *wanted]
    report_methods(outcomes, readers, methods)
    report_paired(outcomes, readers, methods)
    report_targets(outcomes, readers, methods, [*policies, "oracle"])
    report_styles(outcomes, readers, methods, args.skew)
    report_digests(outcomes, readers, policies)
    print(f"run time: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
