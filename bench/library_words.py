"""Would a library's own words help its fusion? An experiment (issue 26), not the product's scoring.

    .venv/bin/python bench/library_words.py

A library's relevance is fused from the text model alone (`scores.LIBRARY_FUSION`: its model's and its nearest
papers' z-scores). Here the library's words join it: the lexical log-odds of the library papers' BM25F centroid
(what `select.text_model = false` ranks a library by) as a third feature. Each fusion is fitted by logistic
regression on set T's library profiles (seed 1) and scored on set R's (seed 2), 10 pools a category, P@10 of the
fused score itself (no diversity step, so the figures are a little below bench/ranking.py's).
"""

import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import ranking as bench  # noqa: E402

from digest.select import SelectSettings  # noqa: E402
from digest.select.scores import LEXICAL_FLOOR, Scores  # noqa: E402


def feats(sample, set_name, seed, categories, npools):  # type: ignore[no-untyped-def]
    """(category, features: model z, nearest-papers z, words' log-odds; labels) of every pool's papers."""
    rng = random.Random(seed)
    pools = {c: bench.make_pools(sample, c, npools, rng) for c in categories}
    libs = {c: bench.make_library(sample, c, pools[c], rng) for c in categories}
    words = bench.Ours(sample, replace(SelectSettings(), text_model=0.0), dense=None)
    emb = bench.sample_embedder(sample)
    out = []
    for c in categories:
        prof = bench.profiles_for(c, set_name, "library", libs[c])
        sub, sig = words.subscriber(prof)
        interest = sub.interests[0]
        library = [sample.papers[n] for n in prof.library.tolist()]
        dense = emb.interests([interest], lambda _, papers=library: papers)[0].library
        for rows in pools[c]:
            pool = words.pool(bench.Case(c, rows, np.zeros(0)))
            pool.dense = emb
            _, model, centre = dense.z_scores(pool.dense_codes())
            lex = Scores(pool, sub, words.settings, sig).lexical_logit
            y = np.array([c in sample.categories[n] for n in rows.tolist()])
            out.append((c, np.c_[model, centre, np.maximum(lex, LEXICAL_FLOOR)], y))
    return out


def p10(score, y):  # type: ignore[no-untyped-def]
    return y[np.argsort(-score, kind="stable")[:10]].mean()


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    sample = bench.load()
    bench.load_vectors(sample)
    tuning = feats(sample, "T", 1, bench.TUNING_CATEGORIES, 10)
    report = feats(sample, "R", 2, bench.written.CATEGORIES, 10)
    x = np.vstack([f for _, f, _ in tuning])
    y = np.concatenate([labels for _, _, labels in tuning])
    for cols, name in (([0, 1], "text model (shipped)"), ([0, 1, 2], "text model + words"), ([2], "words")):
        fitted = LogisticRegression(C=10, max_iter=2000).fit(x[:, cols], y)
        print(f"{name}: intercept {fitted.intercept_[0]:.3f}, coefficients {np.round(fitted.coef_.ravel(), 3)}")
        for set_name, data in (("T", tuning), ("R", report)):
            scores = [p10(f[:, cols] @ fitted.coef_.ravel(), labels) for _, f, labels in data]
            by_category: dict[str, list[float]] = {}
            for (category, _, _), value in zip(data, scores, strict=True):
                by_category.setdefault(category, []).append(value)
            detail = " ".join(f"{c} {np.mean(v):.2f}" for c, v in by_category.items()) if set_name == "R" else ""
            print(f"  set {set_name}: P@10 {np.mean(scores):.3f}  {detail}")


if __name__ == "__main__":
    main()
