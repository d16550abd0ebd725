"""The feedback curve (`ranking.py --feedback`): a simulated subscriber clicking for ten days.

Each simulated subscriber follows one category with its keyword profile. On each of ten days they
get the top 10 of a new pool (300 papers of the next listing days, topped up to 20 of the category
as in the quality benchmark) and mark a random half of them: *more* when the paper is in the
category, *less* when not. The next day's ranking learns from every mark so far, as a send run
does (`learn.fit`: liked papers positive; disliked papers and `learn.NEGATIVES` papers sampled from
the store negative; blended with the keywords at clicks / (clicks + feedback_clicks)). Reported: P@10
per day, mean over subscribers with its standard error, beside the supervised reference on the same
pools (logistic regression trained on the true labels of every paper outside the subscriber's ten
pools) and keywords alone. With the reference and held-out pools, also the like-for-like reference:
the same logistic regression trained each day on the subscriber's marks so far (a mark is a true
label), which sees exactly what the learned model sees.

Held-out curve: the day's pool changes every day, so the day-to-day swings of that curve are mostly
the pools' (the subscriber who never learns swings too). Each simulated subscriber therefore also
has `held_out` (default 3) fixed evaluation pools, drawn the same way (consecutive listing days,
topped up to 20 of the category) but disjoint from its day pools: no listing day and no paper in
common, and never shown or marked. Each day the model learned from the marks so far ranks every
held-out pool; the day's held-out P@10 is the mean over them. Keywords alone and the supervised
reference (trained outside the day pools and the held-out pools) rank them too (the same each day).
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import date

import numpy as np

from digest.models import Interest, Paper, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, Signals, rank
from digest.select.corpus import background
from digest.select.learn import NEGATIVES, features, fit_rows

DAYS = 10
MARKS = 5  # of each day's top 10
HELD_OUT = 3  # fixed evaluation pools per simulated subscriber


def _spans(sample, start: int, count: int, size: int, skip: frozenset[date] = frozenset()) -> list[list[date]]:  # type: ignore[no-untyped-def]
    """The listing days each of `count` pools reads, from day index `start` on, leaving out `skip`."""
    days = sorted(sample.by_day)
    spans, cursor = [], start
    for _ in range(count):
        span: list[date] = []
        taken = 0
        while taken < size:
            if cursor - start >= len(days):
                raise ValueError("not enough listing days for these pools")
            day = days[cursor % len(days)]
            cursor += 1
            if day not in skip:
                span.append(day)
                taken += len(sample.by_day[day])
        spans.append(span)
    return spans


def draw_pools(sample, category: str, start: int, count: int, size: int, rng: random.Random, *,  # type: ignore[no-untyped-def]
               skip: frozenset[date] = frozenset(), avoid: frozenset[int] = frozenset()) -> list[list[Paper]]:
    """`count` pools of consecutive listing days from `start` (leaving out `skip`), each topped up to 20 papers
    of the category with papers outside `avoid`."""
    everyone = [i for i in range(len(sample.papers)) if sample.has(i, category) and i not in avoid]
    pools, used = [], set()
    for span in _spans(sample, start, count, size, skip):
        picked = [i for day in span for i in sample.by_day[day]]
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


def day_pools(sample, category: str, start: int, size: int, rng: random.Random,  # type: ignore[no-untyped-def]
              avoid: frozenset[int] = frozenset()) -> list[list[Paper]]:
    """Ten pools of consecutive listing days from `start`, each topped up to 20 papers of the category."""
    return draw_pools(sample, category, start, DAYS, size, rng, avoid=avoid)


def held_out_pools(sample, category: str, start: int, count: int, size: int, rng: random.Random,  # type: ignore[no-untyped-def]
                   day_start: int) -> list[list[Paper]]:
    """`count` evaluation pools drawn like the day pools from `day_start`, sharing no listing day and no paper
    with them (`day_pools` must then be given `avoid=` these pools' papers)."""
    days = frozenset(d for span in _spans(sample, day_start, DAYS, size) for d in span)
    on_those_days = frozenset(i for d in days for i in sample.by_day[d])
    return draw_pools(sample, category, start, count, size, rng, skip=days, avoid=on_those_days)


def supervised(sample, category: str, pools: Sequence[list[Paper]], matrix):  # type: ignore[no-untyped-def]
    """The reference: logistic regression on the true labels of every paper outside these pools.

    Returns its top 10 of a pool, and how many papers of the category it was trained on.
    """
    from sklearn.linear_model import LogisticRegression

    held = {p.store_id - 1 for pool in pools for p in pool}
    outside = np.array([i not in held for i in range(len(sample.papers))])
    labels = np.array([sample.has(i, category) for i in range(len(sample.papers))])
    positives = int(labels[outside].sum())
    model = None
    if positives:
        model = LogisticRegression(C=10, class_weight="balanced", max_iter=1000).fit(matrix[outside], labels[outside])
    else:
        print(f"  (supervised {category}: no paper of the category outside the pools; it ranks in pool order)",
              file=sys.stderr)

    def top10(pool: list[Paper]) -> list[Paper]:
        rows = [p.store_id - 1 for p in pool]
        score = model.decision_function(matrix[rows]) if model is not None else np.zeros(len(pool))
        return [pool[j] for j in np.argsort(-score, kind="stable")[:10]]
    return top10, positives


def marks_reference(matrix, category: str, marks, held_out: Sequence[Pool], keywords: float) -> list[float]:  # type: ignore[no-untyped-def]
    """The like-for-like reference: the supervised reference's logistic regression (tf-idf, C=10, balanced)
    trained each day on the papers marked so far (a mark is a true label: *more* exactly when the paper is
    in the category), held-out P@10 per day; `keywords` (keywords alone's held-out P@10) until both kinds
    of mark exist."""
    from sklearn.linear_model import LogisticRegression

    out = []
    for liked, disliked in marks:
        if not (liked and disliked):
            out.append(keywords)
            continue
        rows = [p.store_id - 1 for p in (*liked, *disliked)]
        labels = np.array([1] * len(liked) + [0] * len(disliked))
        model = LogisticRegression(C=10, class_weight="balanced", max_iter=1000).fit(matrix[rows], labels)
        p10 = []
        for evaluation in held_out:
            score = model.decision_function(matrix[[p.store_id - 1 for p in evaluation.papers]])
            p10.append(_p10([evaluation.papers[j] for j in np.argsort(-score, kind="stable")[:10]], category))
        out.append(float(np.mean(p10)))
    return out


def _p10(top: Sequence[Paper], category: str) -> float:
    return sum(category in p.categories for p in top) / 10


def simulate(pools: Sequence[list[Paper]], subscriber: Subscriber, category: str, corpus: CorpusStats,
             settings: SelectSettings, store: Sequence[Paper], rng: random.Random, *, learn: bool,
             dense: object = None, held_out: Sequence[Pool] = (),
             marks: list[tuple[tuple[Paper, ...], tuple[Paper, ...]]] | None = None) -> tuple[list[float], list[float]]:
    """P@10 of each day for one simulated subscriber (learning from their marks, or not): on the day's pool,
    and the mean over the held-out pools (ranked with the same model, never marked; empty without them).
    `marks` gets, for each day, the papers marked more and less before it."""
    liked: list[Paper] = []
    disliked: list[Paper] = []
    blended = corpus.blended(background())
    negatives = features(rng.sample(list(store), NEGATIVES), blended, settings.title_weight, dense)  # type: ignore[arg-type]
    out: list[float] = []
    held: list[float] = []
    for pool in pools:
        if marks is not None:
            marks.append((tuple(liked), tuple(disliked)))
        model = None
        if learn and liked:
            rows = [features(group, blended, settings.title_weight, dense) if group else None  # type: ignore[arg-type]
                    for group in (liked, disliked)]
            model = fit_rows(rows[0], rows[1], negatives, clicks=len(liked) + len(disliked))
        # the subscriber who never learns gets no signals at all: with marks and no model, `rank` would learn one
        signals = Signals(liked=tuple(liked), disliked=tuple(disliked), model=model) if learn else Signals()
        if held_out and (learn or not held):  # never learning: the same ranking every day
            held.append(float(np.mean([
                _p10([r.paper for r in rank(evaluation, subscriber, day=DAY, settings=settings, signals=signals,
                                            limit=10, parts=False)], category)
                for evaluation in held_out])))
        elif held_out:
            held.append(held[-1])
        ranked = rank(Pool(pool, corpus, dense=dense), subscriber, day=DAY,  # type: ignore[arg-type]
                      settings=settings, signals=signals, limit=10, parts=False)
        top = [r.paper for r in ranked]
        on_topic = [category in p.categories for p in top]
        out.append(sum(on_topic) / 10)
        for n in rng.sample(range(len(top)), MARKS):
            (liked if on_topic[n] else disliked).append(top[n])
    return out, held


DAY = date(2026, 7, 1)


def _se(values: np.ndarray) -> float:
    return float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0


def feedback_curve(sample, corpus: CorpusStats, settings: SelectSettings, per_category: int, seed: int,  # type: ignore[no-untyped-def]
                   categories: Sequence[str], profiles: Mapping[str, Sequence[str]], with_supervised: bool = True,
                   held_out: int = HELD_OUT) -> None:
    """The curves for `per_category` simulated subscribers of each category, each following `profiles[category]`.

    (The profiles are passed in: `from ranking import PROFILES` here would import a second copy of ranking.py
    when it runs as the script, whose PROFILES never sees --profiles; until 2026-11-25 every --feedback run
    used set B's profiles whatever --profiles said.)
    """
    from sklearn.feature_extraction.text import TfidfVectorizer

    matrix = None
    if with_supervised:
        matrix = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, dtype=np.float32).fit_transform(
            f"{p.title} {p.abstract}" for p in sample.papers).tocsr()
    from digest.select.dense import DenseEmbedder

    dense = DenseEmbedder()
    rng = random.Random(seed)
    days = len(sample.by_day)
    names = ("learned", "keywords", "supervised")
    curves: dict[str, list[list[float]]] = {k: [] for k in names}
    held: dict[str, list[list[float]]] = {k: [] for k in names}
    trained_on: dict[str, list[int]] = {c: [] for c in categories}
    wider_on: dict[str, list[int]] = {c: [] for c in categories}
    reference_wide: list[float] = []
    same_marks: list[list[float]] = []  # the like-for-like reference's held-out curve
    for category in categories:
        subscriber = Subscriber(email=f"{category}@example.org",
                                interests=(Interest(category, tuple(profiles[category])),))
        for n in range(per_category):
            start = rng.randrange(days)
            evaluation: list[list[Paper]] = []
            if held_out:  # its own random stream: the day pools and clicks draw from `rng` as without held-out pools
                other = random.Random(f"held-out {seed} {category} {n}")
                evaluation = held_out_pools(sample, category, other.randrange(days), held_out, 300, other, start)
            avoid = frozenset(p.store_id - 1 for pool in evaluation for p in pool)  # type: ignore[operator]
            pools = day_pools(sample, category, start, 300, rng, avoid=avoid)
            if matrix is not None:
                reference, positives = supervised(sample, category, [*pools, *evaluation], matrix)
                trained_on[category].append(positives)
                curves["supervised"].append([_p10(reference(pool), category) for pool in pools])
                fixed = float(np.mean([_p10(reference(pool), category) for pool in evaluation])) if evaluation else 0.0
                held["supervised"].append([fixed] * DAYS)
                if evaluation:  # a less starved reference for the held-out pools: the day pools' labels count too
                    wider, positives = supervised(sample, category, evaluation, matrix)
                    wider_on[category].append(positives)
                    reference_wide.append(float(np.mean([_p10(wider(pool), category) for pool in evaluation])))
            else:
                curves["supervised"].append([0.0] * DAYS)
                held["supervised"].append([0.0] * DAYS)
            shared = [Pool(pool, corpus, dense=dense) for pool in evaluation]  # type: ignore[arg-type]
            clicks = random.Random(rng.random())
            marks: list[tuple[tuple[Paper, ...], tuple[Paper, ...]]] = []
            for name, learn, stream in (("learned", True, random.Random(clicks.random())),
                                        ("keywords", False, random.Random(0))):
                day, fixed_pools = simulate(pools, subscriber, category, corpus, settings, sample.papers, stream,
                                            learn=learn, dense=dense, held_out=shared,
                                            marks=marks if learn else None)
                curves[name].append(day)
                held[name].append(fixed_pools)
            if matrix is not None and shared:
                same_marks.append(marks_reference(matrix, category, marks, shared, held["keywords"][-1][0]))
            print(f"  {category} #{n}: learned {np.round(curves['learned'][-1], 1).tolist()} "
                  f"held-out {np.round(held['learned'][-1], 2).tolist()} "
                  f"supervised {np.mean(curves['supervised'][-1]):.2f} / {held['supervised'][-1][0]:.2f}",
                  file=sys.stderr, flush=True)
    subscribers = (f"{len(curves['learned'])} simulated subscribers ({per_category} per category: "
                   f"{', '.join(categories)})")
    _report(f"feedback curve: {subscribers}, P@10 per day, mean ± standard error",
            {k: np.array(v) for k, v in curves.items()}, "the pools' own swings")
    if held_out:
        print()
        _report(f"held-out curve: the same {subscribers}, P@10 per day on {held_out} fixed evaluation pools each "
                "(never marked; mean over them), mean ± standard error",
                {k: np.array(v) for k, v in held.items()}, "constant by construction")
    if matrix is not None:
        print("\nsupervised reference: papers of the category it was trained on (outside the subscriber's "
              f"{'day and held-out' if held_out else 'day'} pools), mean (min) per category: "
              + ", ".join(f"{c} {np.mean(v):.0f} ({min(v)})" for c, v in trained_on.items()))
    if same_marks:
        marks_curve, learned = np.array(same_marks), np.array(held["learned"])
        print("held-out pools, the like-for-like reference (the same logistic regression trained each day on the "
              "marks so far, the only labels the subscriber gave), P@10 per day: "
              + ", ".join(f"{v:.3f}" for v in marks_curve.mean(axis=0)))
        gap = learned[:, 5:].mean(axis=1) - marks_curve[:, 5:].mean(axis=1)
        print(f"  days 6-10: it {marks_curve[:, 5:].mean():.3f}, learned {learned[:, 5:].mean():.3f}; learned − it "
              f"{gap.mean():+.3f} ±{_se(gap):.3f} (paired)")
    if reference_wide:
        wide = np.array(reference_wide)
        late = np.array(held["learned"])[:, 5:].mean(axis=1)
        print("held-out pools, supervised trained outside the held-out pools only (the day pools' labels count; "
              f"papers of the category: {', '.join(f'{c} {np.mean(v):.0f}' for c, v in wider_on.items())}): "
              f"P@10 {wide.mean():.3f} ±{_se(wide):.3f}; learned days 6-10 − it {np.mean(late - wide):+.3f} "
              f"±{_se(late - wide):.3f} (paired)")
        for c in categories:
            rows = [n for n, v in enumerate(held["learned"]) if n // per_category == categories.index(c)]
            print(f"  {c}: learned days 6-10 {late[rows].mean():.3f}, keywords "
                  f"{np.mean([held['keywords'][n][0] for n in rows]):.3f}, supervised "
                  f"{np.mean([held['supervised'][n][0] for n in rows]):.3f}, supervised (day pools' labels) "
                  f"{wide[rows].mean():.3f}")


def _drops(curve: np.ndarray) -> list[int]:
    """Days whose mean is more than one standard error (of that day's mean) below the day before."""
    return [d + 1 for d in range(1, DAYS) if curve[:, d].mean() < curve[:, d - 1].mean() - _se(curve[:, d])]


def _report(title: str, arrays: dict[str, np.ndarray], never: str) -> None:
    print(title)
    print(f"| day | {' | '.join(arrays)} | learned − keywords (paired) |")
    print(f"|---:|{'---:|' * (len(arrays) + 1)}")
    gain = arrays["learned"] - arrays["keywords"]  # the same pools: what learning adds, whatever the day's pool
    for d in range(DAYS):
        cells = " | ".join(f"{a[:, d].mean():.3f} ±{_se(a[:, d]):.3f}" for a in arrays.values())
        print(f"| {d + 1} | {cells} | {gain[:, d].mean():+.3f} ±{_se(gain[:, d]):.3f} |")
    late = {k: a[:, 5:].mean(axis=1) for k, a in arrays.items()}
    gap = late["learned"] - late["supervised"]
    print(f"days 6-10: learned {late['learned'].mean():.3f}, supervised {late['supervised'].mean():.3f}, "
          f"keywords {late['keywords'].mean():.3f}; learned − supervised {gap.mean():+.3f} ±{_se(gap):.3f} (paired)")
    learned = arrays["learned"]
    print(f"days more than one standard error below the day before: {_drops(learned) or 'none'}")
    print(f"  the same for the subscriber who never learns ({never}): {_drops(arrays['keywords']) or 'none'}")
    change = learned[:, 1:] - learned[:, :-1]  # the same subscribers: day-over-day change, paired
    paired = [d + 2 for d in range(DAYS - 1) if change[:, d].mean() < -_se(change[:, d])]
    print("  days whose paired change from the day before is more than one standard error (of the change) below 0: "
          f"{paired or 'none'}")
