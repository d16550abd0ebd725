"""The floor target of issue 11 (recall 0.70 at precision 0.75): what each further attempt reaches.

    .venv/bin/python bench/floor_attempts.py            # about four minutes on this machine

Every figure is on the report pools (profile set B, seed 2, 30 pools of 300 papers per category, the 8 main
categories pooled, as `ranking.py --floor-ceiling`); every constant is fitted on the tuning pools (set A,
seed 1, 15 pools per category, all 13 categories, as `calibrate.py`). For each paper of each pool, the
features are the ones the product computes: x = log(raw / unit) of the keywords (`profile.reference`),
whether any keyword matches, and z, the interest's dense similarity standardised over the pool (`dense.py`).
The attempts add:

  zp  pool feedback: the mean embedding of the pool's 5 best papers by the shipped relevance, minus the pool's
      mean embedding, as a second dense query (standardised over the pool): pseudo-relevance feedback;
  zc  corpus feedback: the same with the 300 papers of the whole sample (the store of a year's install) that
      score highest on the keywords, the evaluation pools' own papers left out: distant supervision;
  EM  the prior of each interest in each pool re-estimated from the pool (Saerens, Latinne and Decaestecker,
      2002: the mean of the posteriors, iterated), the log-odds shifted by the change of prior; "raise-only"
      never lowers an interest below the tuning prior;
  oracle: the log-odds shifted by each pool's true share of relevant papers (which no floor can know): the most
      that any estimate of the prior could add to these scores.

Reported per attempt: (a) recall / precision of the best single threshold at precision >= 0.75 (what a floor
is), (d) the same with one threshold per category chosen knowing the labels (a perfect calibration of each
interest), nDCG@10 and P@10 of the ranking; then, for the shipped scores and the best attempt that does not
read the labels, recall and precision per category at their global threshold.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from profiles import MAIN, SETS  # noqa: E402
from ranking import DEFAULT_DATA, best_cut, cuts, load, make_pools, oracle_pooled, sample_corpus  # noqa: E402

from digest.models import Interest, Subscriber  # noqa: E402
from digest.select import Pool, SelectSettings, Signals  # noqa: E402
from digest.select.dense import DenseEmbedder  # noqa: E402
from digest.select.rank import Scores  # noqa: E402
from digest.select.scores import DENSE_CALIBRATION_A, DENSE_CALIBRATION_B, NO_MATCH  # noqa: E402

PRECISION = 0.75
POOL_TOP = 5  # zp: the pool's best papers averaged
CORPUS_TOP = 300  # zc: the sample's best papers averaged
SHIPPED_DENSE_WEIGHT = 0.5


def standardise(v: np.ndarray) -> np.ndarray:
    return (v - v.mean(axis=1, keepdims=True)) / (v.std(axis=1, keepdims=True) + 1e-9)


def features(sample, corpus, embeddings: np.ndarray, name: str, seed: int, count: int):  # type: ignore[no-untyped-def]
    """Per pool (rows) and paper (columns): x, match, z, zp, zc, the shipped log-odds, labels, category."""
    rng = random.Random(seed)
    settings = SelectSettings(dense_weight=0.0)
    dense = DenseEmbedder()
    whole = Pool(sample.papers, corpus, dense=None)
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("x", "match", "z", "zp", "zc", "shipped", "labels")}
    cats: list[str] = []
    mean = embeddings.mean(axis=0)
    for category, keywords in SETS[name].items():
        subscriber = Subscriber(email="bench@example.org", interests=(Interest(category, tuple(keywords)),))
        everywhere = Scores(whole, subscriber, settings, Signals())
        strength = everywhere.raw(0) / everywhere.units[0]
        pools = make_pools(sample, category, count, 300, 20, rng)
        strength[[p.store_id - 1 for pool in pools for p in pool]] = -1.0  # never the evaluation papers
        top = np.argsort(-strength, kind="stable")[:CORPUS_TOP]
        corpus_query = embeddings[top[strength[top] > 0]].mean(axis=0) - mean
        for papers in pools:
            pool = Pool(papers, corpus, dense=dense)
            scores = Scores(pool, subscriber, settings, Signals())
            with np.errstate(divide="ignore"):
                x = np.log(np.maximum(scores.raw(0), 0.0) / scores.units[0])
            match = np.isfinite(x)
            x = np.where(match, x, 0.0)
            z = pool.dense_interest(subscriber.interests[0], ())
            shipped = np.where(match, np.maximum(DENSE_CALIBRATION_A + DENSE_CALIBRATION_B * x, NO_MATCH), NO_MATCH)
            shipped = shipped + SHIPPED_DENSE_WEIGHT * z
            vectors = embeddings[[p.store_id - 1 for p in papers]]
            best = np.argsort(-shipped, kind="stable")[:POOL_TOP]
            zp = standardise((vectors @ (vectors[best].mean(axis=0) - vectors.mean(axis=0)))[None, :])[0]
            zc = standardise((vectors @ corpus_query)[None, :])[0]
            for key, value in (("x", x), ("match", match.astype(float)), ("z", z), ("zp", zp), ("zc", zc),
                               ("shipped", shipped), ("labels", np.array([category in p.categories for p in papers]))):
                out[key].append(value)
            cats.append(category)
        print(f"  {name} {category}", file=sys.stderr, flush=True)
    return {k: np.array(v) for k, v in out.items()} | {"category": np.array(cats)}


def prior_shift(logit: np.ndarray, prior: float, raise_only: bool, rounds: int = 30) -> np.ndarray:
    """Each row's log-odds with its prior re-estimated from the row itself (EM on the mean posterior)."""
    base = np.log(prior / (1 - prior))
    estimate = np.full(len(logit), prior)
    shift = np.zeros(len(logit))
    for _ in range(rounds):
        shift = np.log(estimate / (1 - estimate)) - base
        if raise_only:
            shift = np.maximum(shift, 0.0)
        posterior = 1 / (1 + np.exp(-(logit + shift[:, None])))
        estimate = np.clip(posterior.mean(axis=1), 1e-4, 1 - 1e-4)
    return logit + shift[:, None]  # type: ignore[no-any-return]


def ndcg_p10(score: np.ndarray, labels: np.ndarray, k: int = 10) -> tuple[float, float]:
    discount = 1 / np.log2(np.arange(2, k + 2))
    ndcg, p10 = [], []
    for s, y in zip(score, labels, strict=True):
        gained = y[np.argsort(-s, kind="stable")[:k]]
        ndcg.append(float((gained * discount).sum() / discount[:min(k, int(y.sum()))].sum()))
        p10.append(float(gained.mean()))
    return float(np.mean(ndcg)), float(np.mean(p10))


def evaluate(score: np.ndarray, data: dict[str, np.ndarray]) -> tuple[str, float, float]:
    """The table row's cells, the recall of the one threshold, and that threshold."""
    main = np.isin(data["category"], MAIN)
    s, y, cats = score[main], data["labels"][main], data["category"][main]
    total = int(y.sum())
    passed, hits = best_cut(s.ravel(), y.ravel(), PRECISION)
    threshold = np.sort(s.ravel())[::-1][passed - 1] if passed else np.inf
    per_cat = oracle_pooled([cuts(s[cats == c].ravel(), y[cats == c].ravel()) for c in MAIN], PRECISION)
    ndcg, p10 = ndcg_p10(s, y)
    row = (f"{hits / total:.3f} / {hits / max(passed, 1):.3f} | {per_cat[1] / total:.3f} / "
           f"{per_cat[1] / max(per_cat[0], 1):.3f} | {ndcg:.3f} | {p10:.3f}")
    return row, hits / total, float(threshold)


def per_category(score: np.ndarray, threshold: float, data: dict[str, np.ndarray]) -> str:
    cells = []
    for c in MAIN:
        rows = data["category"] == c
        y, passed = data["labels"][rows], score[rows] >= threshold
        cells.append(f"{y[passed].sum() / y.sum():.2f} / {y[passed].mean() if passed.any() else 0:.2f}")
    return " | ".join(cells)


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    sample = load(DEFAULT_DATA)
    corpus = sample_corpus(sample)
    embeddings = DenseEmbedder().papers(sample.papers).astype(np.float64)
    tuning = features(sample, corpus, embeddings, "A", 1, 15)
    report = features(sample, corpus, embeddings, "B", 2, 30)
    prior = float(tuning["labels"].mean())
    attempts = {"shipped (A + B·x + 0.5·z)": None, "refit: x, match, z": ("x", "match", "z"),
                "+ zp (pool feedback)": ("x", "match", "z", "zp"), "+ zc (corpus feedback)": ("x", "match", "z", "zc"),
                "+ zp + zc": ("x", "match", "z", "zp", "zc")}
    relevant = int(report["labels"][np.isin(report["category"], MAIN)].sum())
    print(f"floor attempts: set B, seed 2, 30 pools x 8 categories ({relevant} relevant papers); constants "
          f"fitted on set A, seed 1, 15 pools x 13 categories; tuning prior {prior:.3f}")
    print("| scores | prior | (a) one threshold: recall / precision | (d) per-category oracle | nDCG@10 | P@10 |")
    print("|---|---|---:|---:|---:|---:|")
    best: tuple[float, str, np.ndarray, float] | None = None
    shipped_row: tuple[np.ndarray, float] | None = None
    for label, columns in attempts.items():
        if columns is None:
            logits = {"as shipped": report["shipped"]}
        else:
            fit_x = np.stack([tuning[c] for c in columns], axis=-1).reshape(-1, len(columns))
            model = LogisticRegression(C=1e4, max_iter=1000).fit(fit_x, tuning["labels"].ravel())
            base = np.stack([report[c] for c in columns], axis=-1) @ model.coef_[0] + model.intercept_[0]
            share = np.clip(report["labels"].mean(axis=1), 1e-3, 1 - 1e-3)
            logits = {"as fitted": base, "EM": prior_shift(base, prior, False),
                      "EM, raise-only": prior_shift(base, prior, True),
                      "oracle: each pool's true share": base + (np.log(share / (1 - share))
                                                                - np.log(prior / (1 - prior)))[:, None]}
        for how, logit in logits.items():
            row, recall, threshold = evaluate(logit, report)
            print(f"| {label} | {how} | {row} |", flush=True)
            if columns is None:
                shipped_row = (logit, threshold)
            elif how.startswith("oracle"):
                continue
            elif best is None or recall > best[0]:
                best = (recall, f"{label}, {how}", logit, threshold)
    assert shipped_row is not None and best is not None
    print(f"\nrecall / precision per category at each one's global threshold\n| scores | {' | '.join(MAIN)} |")
    print(f"|---|{'---:|' * len(MAIN)}")
    print(f"| shipped | {per_category(shipped_row[0], shipped_row[1], report)} |")
    print(f"| {best[1]} | {per_category(best[2], best[3], report)} |")


if __name__ == "__main__":
    main()
