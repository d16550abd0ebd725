"""Clicks on fresh pools: does a reader's learned model help when no paper comes back from one day to the next?

    .venv/bin/python bench/clicks.py [--set R2|R|T] [--style keywords|description] [--days 8] [--positives 30]
        [--override feedback_clicks=30 ...] [--patch digest.select.learn.ROCCHIO_LESS=6 ...]

`bench/ranking.py --feedback` draws each day's pool from the category's papers afresh, so a small category's
pools share papers: a paper marked *less* has near-copies in later pools. Here each reader (one per category of
`relevance_profiles.CATEGORIES` with enough papers for `--days` disjoint pools) gets pools of 300 papers
(`--positives` of the category) that share no paper across days; each day the digest's top 10 is ranked, a random
half of it marked (*more* when of the category, *less* when not), and the next day ranks with every mark so far; the
same pools ranked with no clicks are the paired baseline (each side with what it sent before counted as received).
Profiles: set R2's keyword lists and set R's sentences were never used to fit a constant; set T is the tuning set.
Prints P@10 on days 4 to --days with and without clicks, their paired difference (± standard error over readers)
and each day's difference.
"""

from __future__ import annotations

import argparse
import importlib
import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ranking as R  # noqa: E402
import relevance_profiles as written  # noqa: E402

from digest.select import SelectSettings, Signals  # noqa: E402


def profile(category: str, chosen: str, style: str) -> R.Profile:
    if chosen == "R2":
        return R.Profile(category, "keywords", tuple(written.SET_R2_KEYWORDS[category]))
    table = (written.SET_T if chosen == "T" else written.SET_R)[category]
    if style == "description":
        return R.Profile(category, "description", description=table["description"])
    return R.Profile(category, "keywords", tuple(table["keywords"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=R.DEFAULT_DATA, required=not R.DEFAULT_DATA,
                        help="the arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--set", default="R2", choices=("R2", "R", "T"))
    parser.add_argument("--style", default="keywords", choices=("keywords", "description"))
    parser.add_argument("--days", type=int, default=8)
    parser.add_argument("--positives", type=int, default=30)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--override", nargs="*", default=[], help="SelectSettings fields, NAME=VALUE")
    parser.add_argument("--patch", nargs="*", default=[], help="module constants, MODULE.NAME=VALUE (experiments)")
    args = parser.parse_args()
    settings = replace(SelectSettings(), **{k: float(v) for k, v in (o.split("=") for o in args.override)})
    for item in args.patch:
        name, value = item.split("=")
        module, attr = name.rsplit(".", 1)
        setattr(importlib.import_module(module), attr, float(value))
    sample = R.load(args.data)
    R.load_vectors(sample)
    ours = R.Ours(sample, settings)
    rng = random.Random(args.seed)
    with_clicks, without = [], []
    for category in written.CATEGORIES:
        inside = sample.drawable & np.array([category in c for c in sample.categories])
        positives, negatives = list(np.flatnonzero(inside)), list(np.flatnonzero(sample.drawable & ~inside))
        if len(positives) < args.days * args.positives:
            continue
        rng.shuffle(positives)
        rng.shuffle(negatives)
        reader = profile(category, args.set, args.style)
        liked: list = []
        disliked: list = []
        sent_with: set[int] = set()
        sent_without: set[int] = set()
        row_with, row_without = [], []
        others = R.POOL_SIZE - args.positives
        for day in range(args.days):
            rows = np.array(positives[day * args.positives:(day + 1) * args.positives]
                            + negatives[day * others:(day + 1) * others])
            rng.shuffle(rows)
            labels = np.array([category in sample.categories[n] for n in rows.tolist()])
            case = R.Case(category, rows, labels)
            base = ours.score(case, reader, Signals(received=frozenset(sent_without)))
            row_without.append(R.precision_ndcg(base, labels)[0])
            scores = ours.score(case, reader, Signals(received=frozenset(sent_with), liked=tuple(liked),
                                                      disliked=tuple(disliked)))
            row_with.append(R.precision_ndcg(scores, labels)[0])
            top = R.best(scores)
            sent_with.update(int(sample.papers[int(rows[j])].store_id) for j in top.tolist())
            sent_without.update(int(sample.papers[int(rows[j])].store_id) for j in R.best(base).tolist())
            for j in rng.sample(top.tolist(), 5):
                (liked if labels[j] else disliked).append(sample.papers[int(rows[j])])
        with_clicks.append(row_with)
        without.append(row_without)
        print(f"  {category}: with {np.mean(row_with[3:]):.3f}, without {np.mean(row_without[3:]):.3f}",
              file=sys.stderr, flush=True)
    clicked, plain = np.array(with_clicks), np.array(without)
    diff = clicked - plain
    late = diff[:, 3:].mean(axis=1)
    print(f"set {args.set} {args.style}, {len(clicked)} readers, {args.days} days of disjoint pools "
          f"({args.positives} of the category in 300); settings {args.override or 'the defaults'} {args.patch or ''}")
    print(f"days 4-{args.days}: with clicks {clicked[:, 3:].mean():.3f}, without {plain[:, 3:].mean():.3f}, "
          f"difference {late.mean():+.3f} ±{late.std(ddof=1) / np.sqrt(len(late)):.3f} (paired over readers)")
    print("by day: " + " ".join(f"{d + 1}:{diff[:, d].mean():+.3f}" for d in range(args.days)))


if __name__ == "__main__":
    main()
