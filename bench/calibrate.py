"""Fit the relevance calibration (`rank.CALIBRATION_A`, `CALIBRATION_B`, `DENSE_WEIGHT`) on labelled arXiv papers.

    .venv/bin/python bench/calibrate.py [--profiles A] [--seed 1] [--pools 15]

For every category of the profile set, pools are cut as in `ranking.py`; each paper's raw score for the
category's profile is read in the interest's unit (`profile.reference`), and a logistic regression
of "arXiv lists it in the category" on log(raw / unit) and the standardised dense similarity
(`pool.dense_interest`) gives the three constants (papers that match nothing are left out: the
calibration gives them NO_MATCH). Also printed: the floor's pooled
precision and recall at several levels of the fitted scale, from which `select.min_relevance` is
chosen. Run it on the tuning set only (A, seed 1); `ranking.py` reports on the other.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profiles import SETS  # noqa: E402
from ranking import DEFAULT_DATA, load, make_pools, sample_corpus  # noqa: E402

from digest.models import Interest, Subscriber  # noqa: E402
from digest.select import Pool, SelectSettings, Signals  # noqa: E402
from digest.select.dense import DenseEmbedder  # noqa: E402
from digest.select.rank import Scores  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=DEFAULT_DATA)
    parser.add_argument("--profiles", default="A", choices=sorted(SETS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pools", type=int, default=15)
    args = parser.parse_args()
    from sklearn.linear_model import LogisticRegression

    sample = load(args.data)
    corpus = sample_corpus(sample)
    rng = random.Random(args.seed)
    settings = SelectSettings(dense_weight=0.0)  # the raw lexical score; the dense part is a feature here
    dense = DenseEmbedder()
    xs, zs, ys, zero_relevant, relevant = [], [], [], 0, 0
    for category, keywords in SETS[args.profiles].items():
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(keywords)),))
        for papers in make_pools(sample, category, args.pools, 300, 20, rng):
            pool = Pool(papers, corpus, dense=dense)
            scores = Scores(pool, subscriber, settings, Signals())
            raw, unit = scores.raw(0), scores.units[0]
            z = pool.dense_interest(subscriber.interests[0], ())
            labels = np.array([category in p.categories for p in papers])
            relevant += int(labels.sum())
            zero_relevant += int(labels[raw <= 0].sum())
            xs.append(np.log(raw[raw > 0] / unit))
            zs.append(z[raw > 0])
            ys.append(labels[raw > 0])
    x, z, y = np.concatenate(xs), np.concatenate(zs), np.concatenate(ys)
    alone = LogisticRegression(C=1e4).fit(x[:, None], y)
    print(f"keywords alone: CALIBRATION_A, CALIBRATION_B = {alone.intercept_[0]:.3f}, {alone.coef_[0, 0]:.3f}")
    model = LogisticRegression(C=1e4).fit(np.column_stack([x, z]), y)
    a, (b, w) = float(model.intercept_[0]), model.coef_[0].tolist()
    print(f"with dense similarity: DENSE_CALIBRATION_A, DENSE_CALIBRATION_B = {a:.3f}, {b:.3f}; "
          f"select.dense_weight = {w:.3f}")
    print(f"{len(x)} matching papers; {zero_relevant} of {relevant} relevant papers match nothing")
    p = 1 / (1 + np.exp(-(a + b * x + w * z)))
    for level in (0.3, 0.4, 0.5, 0.6, 0.7):
        passed = p >= level
        print(f"min_relevance {level}: precision {y[passed].mean():.3f}, recall {y[passed].sum() / relevant:.3f}")


if __name__ == "__main__":
    main()
