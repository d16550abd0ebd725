"""Fit the fusion of words and the text model (`scores.FUSION`, `scores.LIBRARY_FUSION`) on labelled arXiv papers.

    .venv/bin/python bench/calibrate.py [--pools 10]        # profile set T, seed 1: the tuning run only

For every category of profile set T (`relevance_profiles.py`) and every style (keywords, a
description, both, a library of ten papers), pools are cut as in `ranking.py` (seed 1; the report
uses set R with seed 2). Each paper gets the product's own features for the profile: the words'
calibrated log-odds (`scores.calibrate`, floored at LEXICAL_FLOOR) and the text model's z-scores
(`vectors.DenseProfile.z_scores`). A logistic regression per style of "arXiv lists it in the category" on them
gives the constants; the script prints them as the source holds them, with the pooled precision
and recall of the fitted relevance at several levels (what `select.min_relevance` is chosen from).
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ranking as bench  # noqa: E402

from digest.select import SelectSettings  # noqa: E402
from digest.select.scores import LEXICAL_FLOOR, Scores, library_words_feature  # noqa: E402

LEVELS = (0.3, 0.4, 0.5, 0.6, 0.7)
# A library's fusion is fitted on libraries of these sizes (the report measures ten papers): a reader's library may
# be a handful of papers or hundreds, and its words' unit (`corpus.PaperTerms.centroid_and_score`) is worked out
# from the papers themselves, so the fit should see small ones too.
LIBRARY_SIZES = (3, 5, 10, 20)


def features(sample: bench.Sample, pools: dict[str, list[np.ndarray]], profiles: dict[tuple[str, str], bench.Profile],
             style: str) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of every paper of every pool for the style's profiles."""
    words = bench.Ours(sample, replace(SelectSettings(), text_model=0.0), dense=None)
    embedder = bench.sample_embedder(sample)
    rows, labels = [], []
    for category, cat_pools in pools.items():
        profile = profiles[(category, style)]
        subscriber, signals = words.subscriber(profile)
        interest = subscriber.interests[0]  # type: ignore[attr-defined]
        library = [sample.papers[n] for n in profile.library.tolist()]
        found = embedder.interests([interest], lambda _, papers=library: papers)  # type: ignore[attr-defined]
        dense = found[0].library if style == "library" else found[0].text
        for pool_rows in cat_pools:
            pool = words.pool(bench.Case(category, pool_rows, np.zeros(0)))
            pool.dense = embedder  # type: ignore[attr-defined]
            query, model, centre = dense.z_scores(pool.dense_codes())  # type: ignore[attr-defined]
            if style == "library":  # its words: `scores.library_words_feature`, as a send computes it
                index = pool.index(words.settings.title_weight)  # type: ignore[attr-defined]
                own = library_words_feature(pool, index, found, None)[0]  # type: ignore[arg-type]
                rows.append(np.c_[model, centre, own])
            else:
                lexical = Scores(pool, subscriber, words.settings, signals).lexical_logit  # type: ignore[arg-type]
                rows.append(np.c_[query, model, np.maximum(lexical, LEXICAL_FLOOR)])
            labels.append([category in sample.categories[n] for n in pool_rows.tolist()])
    return np.vstack(rows), np.concatenate(labels).astype(int)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    from sklearn.linear_model import LogisticRegression

    sample = bench.load()
    bench.load_vectors(sample)
    rng = random.Random(args.seed)
    categories = bench.TUNING_CATEGORIES
    pools = {c: bench.make_pools(sample, c, args.pools, rng) for c in categories}
    libraries = {c: bench.make_library(sample, c, pools[c], rng) for c in categories}
    profiles = {(c, s): bench.profiles_for(c, "T", s, libraries[c]) for c in categories for s in bench.STYLES}
    sized = {size: {(c, "library"): bench.profiles_for(c, "T", "library", bench.make_library(sample, c, pools[c], rng,
                                                                                          size))
                    for c in categories} for size in LIBRARY_SIZES if size != bench.LIBRARY_SIZE}
    fitted, relevance, truth = {}, [], []
    for style in bench.STYLES:
        x, y = features(sample, pools, profiles, style)
        if style == "library":  # and on libraries of the other sizes
            more = [features(sample, pools, chosen, style) for chosen in sized.values()]
            x, y = np.vstack([x, *(m for m, _ in more)]), np.concatenate([y, *(labels for _, labels in more)])
        model = LogisticRegression(C=10.0, max_iter=1000).fit(x, y)
        fitted[style] = (float(model.intercept_[0]), *(float(c) for c in model.coef_.ravel()))
        p = model.predict_proba(x)[:, 1]
        relevance.append(p)
        truth.append(y)
        print(f"{style}: {len(y)} papers, {int(y.sum())} relevant; " + ", ".join(
            f"≥{level}: {y[p >= level].mean():.2f} / {(p[y == 1] >= level).mean():.2f}" for level in LEVELS),
            flush=True)
    print("\nFUSION = {")
    for style in ("keywords", "description", "both"):
        print(f'    "{style}": ({", ".join(f"{v:.3f}" for v in fitted[style])}),')
    print("}")
    print(f"LIBRARY_FUSION = ({', '.join(f'{v:.3f}' for v in fitted['library'])})")
    p, y = np.concatenate(relevance), np.concatenate(truth)
    print("\npooled precision / recall of the fitted relevance over every style: " + ", ".join(
        f"≥{level}: {y[p >= level].mean():.2f} / {(p[y == 1] >= level).mean():.2f}" for level in LEVELS))


if __name__ == "__main__":
    main()
