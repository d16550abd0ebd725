"""Scoring one subscriber against a pool: calibrated relevance, boosts, floor, diversity, sections, reasons.

For paper d and interest i, the words' raw score is in BM25 units:

    raw_i(d) = Σ_keywords BM25F(keyword, d) + description_weight × BM25F(description, d)

and is read in the interest's own unit, ref_i (what one mention of a typical one of its keywords in
an abstract scores, from the same term statistics: `profile.reference`), as log-odds:

    L_i(d) = A + B × log(raw_i(d) / ref_i)                       (no word matched: NO_MATCH)

With the text model (the default) the interest's words and library are also vectors (`vectors.py`),
and the log-odds fuse the words' with the text model's z-scores, with constants fitted per style of
interest (`scores.FUSION`, `bench/calibrate.py`):

    words_i(d)   = A_s + Q_s × z_query + M_s × z_model + W_s × max(L_i(d), LEXICAL_FLOOR)
    library_i(d) = A + M × z_model(library) + K × z_neighbours
    logit_i(d)   = max(words_i(d), library_i(d)) + log(weight_i)  (AUTHOR_LOGIT for a followed author's paper)

Without it, logit_i(d) = L_i(d) + log(weight_i). Then, L(d) = max_i logit_i(d):

    relevance(d) = sigmoid(L(d) + s × (model(d) − min(L(d), MODEL_A))),  s = clicks / (clicks + feedback_clicks)
    score(d)     = relevance(d) with its odds × (1 + upvote_weight × trend(d)) × (1 + recency_weight × recency(d))

model(d) is the log-odds of the subscriber's learned model (`learn.py`), when they have clicked: it adds
to the interests' evidence where they found the paper, and takes the share s where they did not (`scores.blend`).
trend(d) = log(1 + upvotes + comment_weight × comments + star_weight × GitHub stars + citation_weight × citations),
scaled to 1 for the pool's top paper; the counts no source reported count as none, and a paper with no count
at all counts as one upvote, a weak signal, not none (`pool.trend`);
recency(d) = 0.5 ** (age in days / recency_half_life_days).
A paper is eligible when it is not excluded, not already received, not marked *less*, and its
relevance reaches `min_relevance`. Eligible papers are taken best score first, re-ranked for
diversity (maximal marginal relevance in one vectorised pass): (1 - diversity) × score / best
score - diversity × (its highest similarity to a better-scored candidate); a near-duplicate
(cosine >= NEAR_DUPLICATE) of a better candidate is left out, so one story in five versions does
not fill a digest. Each pick goes to the section of the interest it matches best; sections are
ordered by their best pick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from functools import lru_cache

import numpy as np

from digest.models import Item, Paper, Section, Subscriber, is_old
from digest.select.explain import Explainer
from digest.select.pool import Index, Pool
from digest.select.profile import Signals
from digest.select.scores import (
    CALIBRATION_A,
    CALIBRATION_B,
    LIKED_SECTION,
    NO_MATCH,
    ONE_ORDER,
    Scored,
    Scores,
    SelectSettings,
    boosted,
    calibrate,
    calibration,
    feedback_model,
    sigmoid,
)
from digest.select.shares import Allocation, allocate

__all__ = ["CALIBRATION_A", "CALIBRATION_B", "LIKED_SECTION",
           "MMR_WINDOW", "NEAR_DUPLICATE", "NO_MATCH", "TRENDING_SECTION", "Ranked", "Scored",
           "Scores", "SelectSettings", "blocked_papers", "boost", "boosted", "calibrate", "calibration", "diversify",
           "age_quota", "choose", "feedback_model", "rank", "sections", "sigmoid"]

TRENDING_SECTION = "Trending"
MMR_WINDOW = 2  # diversity re-ranks the best (window × wanted) candidates
NEAR_DUPLICATE = 0.75  # cosine similarity above which a paper repeats one already picked (goes last)


@dataclass(frozen=True)
class Ranked:
    """One candidate paper as ranked for one subscriber, with the parts of its score."""

    paper: Paper
    rank: int
    score: float
    relevance: float
    passes_floor: bool
    section: str
    reasons: tuple[str, ...]
    parts: dict[str, float] = field(default_factory=dict)
    place: str = ""  # when the reader's interests shared the places (`shares`): "share" (its interest's), "rest"
    share: int = 0  # ... and how many places its interest was given


def boost(pool: Pool, day: date, settings: SelectSettings) -> np.ndarray:
    """Every paper's trending × recency factor."""
    return _boost(pool, day, settings)[2]


def _boost(pool: Pool, day: date, settings: SelectSettings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    memo = pool.index(settings.title_weight).memo
    key = ("boost", day, settings.upvote_weight, trend_weights(settings), settings.recency_weight,
           settings.recency_half_life_days)  # (hashing the settings themselves costs more than the lookup)
    found = memo.get(key)
    if found is None:
        trend, recency = pool.boosts(day, trend_weights(settings), settings.recency_half_life_days)
        found = memo[key] = trend, recency, ((1 + settings.upvote_weight * trend)
                                            * (1 + settings.recency_weight * recency))
    return found  # type: ignore[no-any-return]


def trend_weights(settings: SelectSettings) -> tuple[float, float, float]:
    """How many upvotes a comment, a GitHub star and a citation count as in a paper's trend (`pool.trend`)."""
    return settings.comment_weight, settings.star_weight, settings.citation_weight


def blocked_papers(pool: Pool, subscriber: Subscriber, signals: Signals) -> np.ndarray:
    """Papers never to be picked: excluded, already received, or marked (more or less: a paper a reader rated,
    at signup or on the web, is one they have seen, like a paper received)."""
    blocked = np.zeros(len(pool), dtype=bool)
    blocked[blocked_indices(pool, subscriber, signals)] = True
    return blocked


def blocked_indices(pool: Pool, subscriber: Subscriber, signals: Signals) -> np.ndarray:
    """`blocked_papers` as pool indices (often none: then no pool-sized array is made)."""
    received = signals.received  # (thousands for a trending-only reader, whose recent papers are blocked: one array)
    try:
        ids = np.fromiter(received, dtype=np.int64, count=len(received))
    except TypeError:  # a None among them
        ids = np.fromiter((i for i in received if i is not None), dtype=np.int64)
    if signals.liked or signals.disliked:
        marked = [p.store_id for p in (*signals.liked, *signals.disliked) if p.store_id is not None]
        ids = np.concatenate([ids, np.array(marked, dtype=np.int64)])
    out = pool.positions(ids)
    for phrase in subscriber.exclude:
        out = np.union1d(out, np.flatnonzero(pool.contains(phrase)))
    return out


def diversify(index: Index, order: np.ndarray, values: np.ndarray, wanted: int, diversity: float, *,
              drop_duplicates: bool = False) -> list[int]:
    """Re-rank the best candidates, relevance traded against redundancy (maximal marginal relevance in one pass).

    `order` holds pool indices best first, `values` their scores. Each of the best (MMR_WINDOW × wanted)
    candidates gets (1 - diversity) × value - diversity × (its highest similarity to a better-scored
    candidate), its value being its log-odds scaled to 0..1 over those candidates; greedy MMR compares
    with the picks instead, which needs a loop per pick. A near-duplicate of a better candidate goes
    after all the others, and with `drop_duplicates` (a digest) it is left out. Returns positions in `order`.
    """
    if diversity <= 0 or len(order) <= 1:
        return list(range(min(wanted, len(order))))
    size = min(max(MMR_WINDOW * wanted, wanted + 5), len(order))  # typically a few dozen papers
    # Values are the candidates' log-odds scaled to 0..1 over the window: the best candidate 1, the
    # window's last 0 (near-certain probabilities all sit near 1, their log-odds do not).
    clipped = np.minimum(np.maximum(values[:size], 1e-12), 1 - 1e-12)
    logit = np.log(clipped) - np.log1p(-clipped)
    low = logit.min()
    span = float(logit[0] - low)
    value = (logit - low) / span if span > 0 else np.ones(size)
    redundancy = np.where(_below(size), index.similarity_among(order[:size]), 0.0).max(axis=1)
    duplicate = redundancy >= NEAR_DUPLICATE
    gain = (1 - diversity) * value - diversity * redundancy
    gain[duplicate] = -np.inf
    ranked = np.argsort(-gain, kind="stable")
    out = ranked[: size - int(np.count_nonzero(duplicate))].tolist() + list(range(size, min(len(order), size + wanted)))
    if not drop_duplicates:
        out += np.flatnonzero(duplicate).tolist()
    return out[:wanted]


@lru_cache(maxsize=256)
def _below(size: int) -> np.ndarray:
    """Which pairs (row, column) of a size × size matrix lie below the diagonal (a better-scored candidate)."""
    return np.tri(size, size, -1, dtype=bool)


def rank(pool: Pool, subscriber: Subscriber, *, day: date, settings: SelectSettings,
         signals: Signals | None = None, limit: int | None = None, parts: bool = True) -> list[Ranked]:
    """The subscriber's candidates, best first: the digest's picks, or with `limit` the top N regardless of floor.

    `parts=False` leaves out the score breakdown (a digest does not show it).
    """
    signals = signals or Signals()
    blocked = blocked_papers(pool, subscriber, signals)
    if not subscriber.interests:
        return _trending(pool, subscriber, day, settings, blocked, limit)
    scores = Scores(pool, subscriber, settings, signals)
    picks = choose_filed(pool, scores, subscriber, day=day, settings=settings, blocked=blocked, limit=limit)
    chosen, final, passes = picks.chosen, picks.final, picks.passes
    trend, recency, boost = _boost(pool, day, settings)
    explain = Explainer(pool, pool.index(settings.title_weight), scores, chosen, filed=picks.filed)
    values = zip(chosen, scores.papers[chosen].tolist(), final[chosen].round(6).tolist(),
                 scores.relevance[chosen].round(6).tolist(), passes[chosen].tolist(), section_names(scores, picks),
                 strict=True)
    return [Ranked(pool.papers[i], n + 1, score, relevance, ok, name, explain.reasons(j),
                   explain.parts(j) | {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4),
                                       "boost": round(float(boost[i]), 4)} if parts else {},
                   *_place(picks, j))
            for n, (j, i, score, relevance, ok, name) in enumerate(values)]


def _place(picks: Picks, j: int) -> tuple[str, int]:
    """Whose place pick j took when the reader's interests shared them: ("share", the places its interest was
    given) or ("rest", 0); ("", 0) otherwise (one order, or an old paper under "Trending again")."""
    if picks.allocation is None:
        return "", 0
    if j in picks.filed:
        return "share", picks.allocation.shares.get(picks.filed[j], 0)
    return ("rest", 0) if j in picks.allocation.rest else ("", 0)


def section_names(scores: Scored, picks: Picks) -> list[str]:
    """The section of each pick: the interest it was filed under when places were shared, else its best
    interest's (or the liked papers')."""
    names = scores.section_names(picks.chosen)
    return [scores.interests[picks.filed[j]].interest.name if j in picks.filed else name
            for j, name in zip(picks.chosen, names, strict=True)]


def sections(pool: Pool, scores: Scored, subscriber: Subscriber, *, day: date, settings: SelectSettings,
             blocked: np.ndarray | None = None) -> tuple[Section, ...]:
    """A digest's picks among the papers `scores` covers, grouped: sections in order of their best pick.

    `scores` covers every paper (`select_digest`) or a batch ranking's candidates (`select_many`);
    `blocked`: the pool's papers never to pick (a batch ranking has left them out already).
    """
    picks = choose_filed(pool, scores, subscriber, day=day, settings=settings, blocked=blocked)
    chosen, final = picks.chosen, picks.final
    explain = Explainer(pool, pool.index(settings.title_weight), scores, chosen, filed=picks.filed)
    grouped: dict[str, list[Item]] = {}
    names = section_names(scores, picks)
    for j, i, score, name in zip(chosen, scores.papers[chosen].tolist(), final[chosen].round(6).tolist(), names,
                                 strict=True):
        grouped.setdefault(name, []).append(Item(pool.papers[i], score, explain.reasons(j), explain.strength(j)))
    notes = share_notes(scores, picks, names)
    return tuple(Section(name, tuple(items), notes.get(name, "")) for name, items in grouped.items())


def share_notes(scores: Scored, picks: Picks, names: list[str]) -> dict[str, str]:
    """What each section says of its share when the places were shared: an interest that filled fewer than it was
    given, and one that also took places its neighbours left (by section name; `names`: each pick's section)."""
    if picks.allocation is None:
        return {}
    given, taken = picks.allocation.shares, picks.allocation.taken
    section = dict(zip(picks.chosen, names, strict=True))
    extra: dict[str, int] = {}
    for j in picks.allocation.rest:
        extra[section[j]] = extra.get(section[j], 0) + 1
    notes = {}
    for n, share in given.items():
        name = scores.interests[n].interest.name
        got = taken.get(n, 0)
        if share and got < share:
            notes[name] = (f"{got} of the {share} places it was given: no more good matches today, so your other "
                           "interests took the rest")
        elif extra.get(name):
            notes[name] = (f"{share} {'place' if share == 1 else 'places'} of its own and {extra[name]} your other "
                           "interests could not fill")
    return notes


def candidate_window(wanted: int) -> int:
    """How many eligible candidates a digest of `wanted` papers can draw its picks from.

    Diversity re-ranks the best max(MMR_WINDOW × wanted, wanted + 5) and drops near-duplicates
    among them, whose places are filled from the next `wanted` at most.
    """
    return max(MMR_WINDOW * wanted, wanted + 5) + wanted


def old_papers(pool: Pool, day: date, settings: SelectSettings) -> np.ndarray | None:
    """Which of the pool's papers are old on `day` (published more than max_age_days before), or None when a
    digest takes no separate quota of old papers (no age limit, or trending_again 0: they are blocked instead)."""
    if not (settings.max_age_days and settings.trending_again):
        return None
    memo = pool.index(settings.title_weight).memo
    key = ("old", day, settings.max_age_days)
    found = memo.get(key)
    if found is None:
        found = memo[key] = np.array([is_old(p, day, settings.max_age_days) for p in pool.papers], dtype=bool)
    return found  # type: ignore[no-any-return]


def age_quota(max_papers: int, again: int, recent: int, old: int) -> tuple[int, int]:
    """How many recent and old papers a digest shows when `recent` recent and `old` old ones are there to pick:
    max_papers in all, "Trending again" taking its places from within it. Old papers take at most `again` places
    and at most half of them, unless too few recent papers are there to fill the rest (then, alone, up to
    `again`); recent papers fill every other place."""
    old_places = min(old, again, max(max_papers // 2, max_papers - recent), max_papers)
    return min(recent, max_papers - old_places), old_places


def quota_windows(old: np.ndarray, recent_wanted: int, old_wanted: int) -> np.ndarray:
    """Positions (in score order) of the candidates diversity weighs when a digest takes `recent_wanted` recent and
    `old_wanted` old papers: the best window of each kind (`candidate_window` keeps both in a batch)."""
    recent_at, old_at = np.flatnonzero(~old), np.flatnonzero(old)
    return np.sort(np.concatenate([recent_at[:max(MMR_WINDOW * recent_wanted, recent_wanted + 5)],
                                   old_at[:max(MMR_WINDOW * old_wanted, old_wanted + 5)]]))


def choose(pool: Pool, scores: Scored, subscriber: Subscriber, *, day: date, settings: SelectSettings,
           blocked: np.ndarray | None = None, limit: int | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The picks (positions in `scores`, best first), and every covered paper's boosted score and floor verdict:
    the eligible papers best first, re-ranked for diversity; with `limit`, the top N regardless of the floor.
    With an age split (`old_papers`), max_papers in all, at most trending_again of them old (`age_quota`); with
    several interests, the recent places shared among them (`shares`)."""
    picks = choose_filed(pool, scores, subscriber, day=day, settings=settings, blocked=blocked, limit=limit)
    return picks.chosen, picks.final, picks.passes


@dataclass(frozen=True)
class Picks:
    """A digest's picks (positions in its `Scored`), every covered paper's boosted score and floor verdict, the
    interest each shared place was filed under (pick -> interest row; the others go to their best interest's
    section), and how the places were shared (None: one order)."""

    chosen: list[int]
    final: np.ndarray
    passes: np.ndarray
    filed: dict[int, int] = field(default_factory=dict)
    allocation: Allocation | None = None


def choose_filed(pool: Pool, scores: Scored, subscriber: Subscriber, *, day: date, settings: SelectSettings,
                 blocked: np.ndarray | None = None, limit: int | None = None) -> Picks:
    """`choose`, with the interest each pick was filed under when several interests share the places."""
    boost = _boost(pool, day, settings)[2]
    final = boosted(scores.relevance, boost[scores.papers])
    passes = scores.relevance >= settings.min_relevance
    eligible = passes if limit is None else np.ones(len(passes), dtype=bool)
    if blocked is not None:
        eligible = eligible & ~blocked[scores.papers]
    candidates = np.flatnonzero(eligible)  # ascending pool indices: ties keep the pool's order
    by_score = np.argsort(-final[candidates], kind="stable")
    order, ranked = candidates[by_score], final[candidates[by_score]]
    wanted = subscriber.max_papers if limit is None else limit
    positive = int(np.count_nonzero(ranked > 0))  # (a prefix of the order)
    old = old_papers(pool, day, settings) if limit is None else None
    index = pool.index(settings.title_weight)
    if old is not None:
        chosen = _quota_picks(pool, scores, order[:positive], ranked[:positive], old[scores.papers[order[:positive]]],
                              wanted, int(settings.trending_again), settings)
    else:
        picks = diversify(index, scores.papers[order[:positive]], ranked[:positive], wanted, settings.diversity,
                          drop_duplicates=limit is None)
        head = order[:positive].tolist()
        chosen = [head[n] for n in picks] + order[positive:positive + wanted - len(picks)].tolist()
    if limit is not None or settings.allocation == ONE_ORDER or len(scores.interests) < 2:
        return Picks(chosen, final, passes)
    return _shared_places(pool, scores, chosen, final, passes, eligible, boost, old, order[:positive],
                          ranked[:positive], wanted, settings)


def _shared_places(pool: Pool, scores: Scored, chosen: list[int], final: np.ndarray, passes: np.ndarray,
                   eligible: np.ndarray, boost: np.ndarray, old: np.ndarray | None, order: np.ndarray,
                   ranked: np.ndarray, wanted: int, settings: SelectSettings) -> Picks:
    """The recent places of `chosen` (the one order's picks) shared among the reader's interests (`shares`); its
    old papers ("Trending again") stay as the age split chose them."""
    index = pool.index(settings.title_weight)
    is_old = old[scores.papers] if old is not None else np.zeros(len(final), dtype=bool)
    old_picks = [j for j in chosen if is_old[j]]
    places = len(chosen) - len(old_picks)
    # the best of the rest: the one order's recent picks, then its other recent candidates in score order
    candidates = order[~is_old[order]].tolist()
    recent = set(candidates)
    first = [j for j in chosen if j in recent]
    taken = set(first)
    rest = first + [j for j in candidates[:len(first) + wanted] if j not in taken][:wanted]

    def spread(papers: np.ndarray, values: np.ndarray, count: int) -> list[int]:
        return diversify(index, papers, values, count, settings.diversity, drop_duplicates=True)

    found = allocate(scores, eligible & ~is_old, boost[scores.papers], final, settings, places,
                     candidate_window(wanted), rest, [c.interest.weight for c in scores.interests], spread)
    if found is None:
        return Picks(chosen, final, passes)
    picks, filed, allocation = found
    picks = sorted(picks, key=lambda j: (-float(final[j]), j))  # the digest's order: best first
    return Picks(picks + old_picks, final, passes, filed, allocation)


def _quota_picks(pool: Pool, scores: Scored, order: np.ndarray, ranked: np.ndarray, old: np.ndarray, recent_wanted: int,
                 old_wanted: int, settings: SelectSettings) -> list[int]:
    """`choose` with an age split: diversity over the best window of recent and of old candidates, then the picks
    taken in that order, `recent_wanted` (max_papers) in all, at most `old_wanted` of them old (`age_quota`), recent
    shortfalls filled in score order from after the window (near-duplicates left out, as in `diversify`)."""
    window = quota_windows(old, recent_wanted, old_wanted)
    ranked_window = diversify(pool.index(settings.title_weight), scores.papers[order[window]], ranked[window],
                              len(window), settings.diversity, drop_duplicates=True)
    outside = np.ones(len(order), dtype=bool)
    outside[window] = False
    sequence = np.concatenate([window[np.asarray(ranked_window, dtype=np.int64)], np.flatnonzero(outside)])
    kind = old[sequence]
    recent_at, old_at = np.flatnonzero(~kind), np.flatnonzero(kind)
    recent_n, old_n = age_quota(recent_wanted, old_wanted, len(recent_at), len(old_at))
    take = np.zeros(len(sequence), dtype=bool)
    take[recent_at[:recent_n]] = True
    take[old_at[:old_n]] = True
    return order[sequence[take]].tolist()  # type: ignore[no-any-return]


def _trending(pool: Pool, subscriber: Subscriber, day: date, settings: SelectSettings, blocked: np.ndarray,
              limit: int | None) -> list[Ranked]:
    """A profile without interests: the papers of the highest trend, the boosts breaking ties."""
    trend, recency, boost = _boost(pool, day, settings)
    memo = pool.index(settings.title_weight).memo
    key = ("trending", day, settings.upvote_weight, trend_weights(settings), settings.recency_weight,
           settings.recency_half_life_days)
    order = memo.get(key)
    if order is None:  # the same order for every trending-only subscriber
        order = memo[key] = np.array(sorted(range(len(pool)), key=lambda i: (-trend[i], -boost[i], i)),
                                     dtype=np.int64)
    wanted = limit or subscriber.max_papers
    ranked = order[~blocked[order]][:wanted].tolist()  # (a loop walked past every blocked paper in Python)
    out = []
    for n, i in enumerate(ranked):
        paper = pool.papers[i]
        out.append(Ranked(paper, n + 1, float(trend[i]), 0.0, True, TRENDING_SECTION, (trending_reason(paper),),
                          {"trend": round(float(trend[i]), 4), "recency": round(float(recency[i]), 4)}))
    return out


def trending_reason(paper: Paper) -> str:
    """Why a paper is trending, in the counts its sources reported ("trending: 103 upvotes, 251 GitHub stars")."""
    counts = [(paper.upvotes, "upvote"), (paper.stars, "GitHub star"),
              (paper.citations, "citation")]
    said = [f"{n:,} {what}{'s' if n != 1 else ''}" for n, what in counts if n]
    return "trending: " + ", ".join(said) if said else "new today"
