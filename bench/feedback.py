"""The feedback curve (`ranking.py --feedback`): a simulated subscriber clicking for ten days.

Each simulated subscriber follows one category with its keyword profile. On each of ten days they
get the top 10 of a new pool (300 papers of the next listing days, topped up to 20 of the category
as in the quality benchmark) and mark a random half of them: *more* when the paper is in the
category, *less* when not. The next day's ranking learns from every mark so far, as a send run
does (`learn.fit`: liked papers positive; disliked papers and 200 papers sampled from the store
negative; blended with the keywords at clicks / (clicks + feedback_clicks)). Reported: P@10 per day,
mean over subscribers with its standard error, beside the supervised reference on the same pools
(logistic regression trained on the true labels of every paper outside the subscriber's ten
pools) and keywords alone.
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import date

import numpy as np

from digest.models import Interest, Paper, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, Signals, rank
from digest.select.corpus import background
from digest.select.learn import NEGATIVES, features, fit_rows

DAYS = 10
MARKS = 5  # of each day's top 10


def day_pools(sample, category: str, start: int, size: int, rng: random.Random) -> list[list[Paper]]:  # type: ignore[no-untyped-def]
    """Ten pools of consecutive listing days from `start`, each topped up to 20 papers of the category."""
    days = sorted(sample.by_day)
    everyone = [i for i in range(len(sample.papers)) if sample.has(i, category)]
    pools, cursor, used = [], start, set()
    for _ in range(DAYS):
        picked: list[int] = []
        while len(picked) < size:
            picked += sample.by_day[days[cursor % len(days)]]
            cursor += 1
        pool = [sample.papers[i] for i in picked[:size]]
        used.update(picked[:size])
        missing = 20 - sum(category in p.categories for p in pool)
        if missing > 0:
            inside = set(picked[:size])
            fresh = [i for i in everyone if i not in used]
            # a small category (cs.DC has 184 papers) runs out over ten days: reuse, never within a pool
            extra = rng.sample(fresh if len(fresh) >= missing else [i for i in everyone if i not in inside], missing)
            used.update(extra)
            slots = rng.sample([n for n, p in enumerate(pool) if category not in p.categories], missing)
            for slot, i in zip(slots, extra, strict=True):
                pool[slot] = replace(sample.papers[i], listed_on=pool[slot].listed_on)
        pools.append(pool)
    return pools


def supervised(sample, category: str, pools: Sequence[list[Paper]], matrix):  # type: ignore[no-untyped-def]
    """The reference: logistic regression on the true labels of every paper outside these pools."""
    from sklearn.linear_model import LogisticRegression

    held = {p.store_id - 1 for pool in pools for p in pool}
    outside = np.array([i not in held for i in range(len(sample.papers))])
    labels = np.array([sample.has(i, category) for i in range(len(sample.papers))])
    model = LogisticRegression(C=10, class_weight="balanced", max_iter=1000).fit(matrix[outside], labels[outside])

    def top10(pool: list[Paper]) -> list[Paper]:
        score = model.decision_function(matrix[[p.store_id - 1 for p in pool]])
        return [pool[j] for j in np.argsort(-score, kind="stable")[:10]]
    return top10


def simulate(pools: Sequence[list[Paper]], subscriber: Subscriber, category: str, corpus: CorpusStats,
             settings: SelectSettings, store: Sequence[Paper], rng: random.Random, *, learn: bool,
             dense: object = None) -> list[float]:
    """P@10 of each day for one simulated subscriber (learning from their marks, or not)."""
    liked: list[Paper] = []
    disliked: list[Paper] = []
    blended = corpus.blended(background())
    negatives = features(rng.sample(list(store), NEGATIVES), blended, settings.title_weight, dense)  # type: ignore[arg-type]
    out = []
    for pool in pools:
        model = None
        if learn and liked:
            rows = [features(group, blended, settings.title_weight, dense) if group else None  # type: ignore[arg-type]
                    for group in (liked, disliked)]
            model = fit_rows(rows[0], rows[1], negatives, clicks=len(liked) + len(disliked))
        # the subscriber who never learns gets no signals at all: with marks and no model, `rank` would learn one
        signals = Signals(liked=tuple(liked), disliked=tuple(disliked), model=model) if learn else Signals()
        ranked = rank(Pool(pool, corpus, dense=dense), subscriber, day=DAY,  # type: ignore[arg-type]
                      settings=settings, signals=signals, limit=10, parts=False)
        top = [r.paper for r in ranked]
        on_topic = [category in p.categories for p in top]
        out.append(sum(on_topic) / 10)
        for n in rng.sample(range(len(top)), MARKS):
            (liked if on_topic[n] else disliked).append(top[n])
    return out


DAY = date(2026, 7, 1)


def _se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def feedback_curve(sample, corpus: CorpusStats, settings: SelectSettings, per_category: int, seed: int,  # type: ignore[no-untyped-def]
                   categories: Sequence[str], with_supervised: bool = True) -> None:
    from ranking import PROFILES
    from sklearn.feature_extraction.text import TfidfVectorizer

    matrix = None
    if with_supervised:
        matrix = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, dtype=np.float32).fit_transform(
            f"{p.title} {p.abstract}" for p in sample.papers).tocsr()
    from digest.select.dense import DenseEmbedder

    dense = DenseEmbedder()
    rng = random.Random(seed)
    days = len(sample.by_day)
    curves: dict[str, list[list[float]]] = {"learned": [], "keywords": [], "supervised": []}
    for category in categories:
        subscriber = Subscriber(email=f"{category}@example.org",
                                interests=(Interest(category, tuple(PROFILES[category])),))
        for n in range(per_category):
            pools = day_pools(sample, category, rng.randrange(days), 300, rng)
            if matrix is not None:
                reference = supervised(sample, category, pools, matrix)
                curves["supervised"].append([sum(category in p.categories for p in reference(pool)) / 10
                                             for pool in pools])
            else:
                curves["supervised"].append([0.0] * DAYS)
            clicks = random.Random(rng.random())
            curves["learned"].append(simulate(pools, subscriber, category, corpus, settings, sample.papers,
                                              random.Random(clicks.random()), learn=True, dense=dense))
            curves["keywords"].append(simulate(pools, subscriber, category, corpus, settings, sample.papers,
                                               random.Random(0), learn=False, dense=dense))
            print(f"  {category} #{n}: learned {np.round(curves['learned'][-1], 1).tolist()} "
                  f"supervised {np.mean(curves['supervised'][-1]):.2f}", file=sys.stderr, flush=True)
    print(f"feedback curve: {len(curves['learned'])} simulated subscribers ({per_category} per category: "
          f"{', '.join(categories)}), P@10 per day, mean ± standard error")
    print(f"| day | {' | '.join(curves)} | learned − keywords (paired) |")
    print(f"|---:|{'---:|' * (len(curves) + 1)}")
    arrays = {k: np.array(v) for k, v in curves.items()}
    gain = arrays["learned"] - arrays["keywords"]  # the same pools: what learning adds, whatever the day's pool
    for d in range(DAYS):
        cells = " | ".join(f"{a[:, d].mean():.3f} ±{_se(a[:, d]):.3f}" for a in arrays.values())
        print(f"| {d + 1} | {cells} | {gain[:, d].mean():+.3f} ±{_se(gain[:, d]):.3f} |")
    late = {k: a[:, 5:].mean(axis=1) for k, a in arrays.items()}
    gap = late["learned"] - late["supervised"]
    print(f"days 6-10: learned {late['learned'].mean():.3f}, supervised {late['supervised'].mean():.3f}, "
          f"keywords {late['keywords'].mean():.3f}; learned − supervised {gap.mean():+.3f} ±{_se(gap):.3f} (paired)")
    learned = arrays["learned"]
    drops = [d + 1 for d in range(1, DAYS) if learned[:, d].mean() < learned[:, d - 1].mean() - _se(learned[:, d])]
    print(f"days more than one standard error below the day before: {drops or 'none'}")
    keywords = arrays["keywords"]
    pooled = [d + 1 for d in range(1, DAYS) if keywords[:, d].mean() < keywords[:, d - 1].mean() - _se(keywords[:, d])]
    print(f"  the same for the subscriber who never learns (the pools' own swings): {pooled or 'none'}")
