"""Shared places: a reader with several interests gets each of them in the digest, not only the loudest.

Relevance is calibrated within an interest, not across a broad one and a narrow one: a broad interest puts
dozens of papers near a relevance of 1, so one order over all interests gives it every place. Instead each
interest ranks the papers by its own relevance (its own log-odds, with the reader's learned model blended in
as for the digest's order), and the places are shared:

    SHARES  each interest with a paper above the floor gets a share of the recent places, proportional to its
            weight (largest remainders; each at least one while there are places), and takes its best papers
            in turn (an interest whose next paper is better goes first in a round; a paper counts for the one
            interest that took it), beyond its first only good matches (FURTHER); what an interest cannot use
            goes to the best of the rest, in the digest's own order.
    XQUAD   a greedy diversification that rewards covering interests (Santos et al., xQuAD): each place goes to
            the paper with the best (1 - LAMBDA) × relevance + LAMBDA × Σ_i share_i × relevance_i ×
            Π_{picked s} (1 - relevance_i(s)); measured beside SHARES (`bench/interests.py`).

A reader whose papers above the floor all belong to one interest gets the one order, as before. Each
interest looks at its best `candidate_window` papers only, so every ranking path (one reader over the
whole pool, a batch's candidates, stored matches) holds the same candidates and gives the same digest.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from digest.select.explain import GOOD_MATCH
from digest.select.scores import NO_MATCH, XQUAD, Scored, SelectSettings, blend, boosted, sigmoid

LAMBDA = 0.5  # XQUAD: the weight of covering interests against the paper's own relevance
# Beyond its best paper, an interest takes a place only with a good match (its boosted relevance at least this: "good
# match" in a pick's reasons, seven papers in ten on the topic); weaker ones leave the place to the best of the rest.
# On bench/interests.py (3 interests): coverage 0.40 -> 0.51, precision -0.017; without it 0.53 and -0.035.
FURTHER = GOOD_MATCH
Diversify = Callable[[np.ndarray, np.ndarray, int], list[int]]  # (pool indices, values, wanted) -> positions


@dataclass(frozen=True)
class Allocation:
    """How a digest's recent places were shared: each interest's share and how many it filled, and the places
    that went to the best of the rest because some interest had too few papers."""

    shares: dict[int, int]  # interest (its row in the Scored) -> places it was given
    taken: dict[int, int]  # interest -> places it filled
    rest: tuple[int, ...]  # the picks (positions) that filled places from the best of the rest


def own_relevance(scores: Scored, n: int) -> np.ndarray:
    """Interest n's relevance of every paper `scores` covers: its log-odds, the learned model blended in."""
    logit = scores.logits[n]
    if scores.model_logit is not None:
        logit = blend(logit, scores.model_logit, scores.share, extra=scores.rocchio)
    return sigmoid(logit)


def interest_lists(scores: Scored, eligible: np.ndarray, boost: np.ndarray, settings: SelectSettings,
                   window: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each interest's candidates (positions in `scores`) best first, at most `window`, with their boosted own
    relevance: eligible papers on the interest's topic at or above the floor (not the learned model's finds
    alone, which no interest named); beyond its best, only good matches (FURTHER). Every interest at once."""
    logits = scores.logits
    own = logits if scores.model_logit is None else blend(logits, scores.model_logit[None, :], scores.share,
                                                            extra=None if scores.rocchio is None
                                                            else scores.rocchio[None, :])
    relevance = sigmoid(own)
    values = boosted(relevance, boost[None, :])
    ok = eligible[None, :] & (relevance >= settings.min_relevance) & (logits > NO_MATCH)
    masked = np.where(ok, values, -np.inf)
    order = np.argsort(-masked, axis=1, kind="stable")[:, :window]  # ties in the papers' order, as `scores` has them
    best = np.take_along_axis(masked, order, axis=1)
    keep = best >= FURTHER
    keep[:, :1] = True  # its best paper above the floor, whatever it is; further ones only good matches
    keep &= np.arange(order.shape[1])[None, :] < ok.sum(axis=1)[:, None]
    return [(order[n][keep[n]], best[n][keep[n]]) for n in range(len(logits))]


def quotas(places: int, weights: Sequence[float]) -> list[int]:
    """`places` shared in proportion to `weights` (largest remainders, ties to the first), each at least one while
    there are places for all (taken from the largest shares); with fewer places than interests, the first `places`
    get one each."""
    return list(_quotas(places, tuple(weights)))


@lru_cache(maxsize=1024)  # readers' interests come in a handful of weightings
def _quotas(places: int, weights: tuple[float, ...]) -> tuple[int, ...]:
    count = len(weights)
    if places <= 0 or not count:
        return (0,) * count
    if places <= count:
        return (1,) * places + (0,) * (count - places)
    total = sum(weights)
    exact = [places * w / total for w in weights] if total > 0 else [places / count] * count
    given = [int(e) for e in exact]
    for k in sorted(range(count), key=lambda k: (-(exact[k] - given[k]), k))[: places - sum(given)]:
        given[k] += 1
    for k in range(count):
        if not given[k]:
            largest = max(range(count), key=lambda m: (given[m], -m))
            given[largest] -= 1
            given[k] = 1
    return tuple(given)


def shared(lists: Sequence[tuple[np.ndarray, np.ndarray]], weights: Sequence[float], places: int,
           rest: Sequence[int], diversify: Diversify,
           papers: np.ndarray) -> tuple[list[int], dict[int, int], Allocation] | None:
    """SHARES: the picks (positions) and the interest each was filed under, or None when fewer than two interests
    have a paper (the one order stands). `rest`: the digest's own order (diversified) of its recent candidates,
    for the places an interest cannot use; `papers`: the pool indices of the positions (diversity's pairs)."""
    active = [n for n, (found, _) in enumerate(lists) if len(found)]
    if len(active) < 2:
        return None
    # interests with a better best paper first: they are the ones to keep when places are fewer than interests
    active.sort(key=lambda n: (-float(lists[n][1][0]), n))
    given = dict(zip(active, quotas(places, [weights[n] for n in active]), strict=True))

    sequences, worth = {}, {}
    for n in active:
        found, values = lists[n]
        ids, scores = found.tolist(), values.tolist()
        if given[n] > 1:  # its first places diversified as a digest of that many would be, then the rest in order
            head = diversify(papers[found], values, given[n])
            order = head + sorted(set(range(len(ids))).difference(head))
            ids, scores = [ids[k] for k in order], [scores[k] for k in order]
        sequences[n], worth[n] = ids, scores
    filed = _turns(active, sequences, worth, given)
    taken = dict.fromkeys(active, 0)
    for n in filed.values():
        taken[n] += 1
    spare = places - len(filed)
    extra = [j for j in rest if j not in filed][:max(spare, 0)]
    allocation = Allocation(given, taken, tuple(extra))
    return list(filed) + extra, filed, allocation


def _turns(active: list[int], sequences: dict[int, list[int]], worth: dict[int, list[float]],
           given: dict[int, int]) -> dict[int, int]:
    """The interests take their papers in turn (in a round, the one whose next paper is better first), each up to
    its share, a paper for the first to take it: paper -> interest, in the order taken. When the interests' first
    papers do not overlap, that is each interest's first `given` papers, taken round by round."""
    heads = {n: sequences[n][:given[n]] for n in active}
    if len({j for head in heads.values() for j in head}) == sum(len(head) for head in heads.values()):
        rounds = [(k, -worth[n][k], n) for n in active for k in range(len(heads[n]))]
        return {sequences[n][k]: n for k, _, n in sorted(rounds)}
    filed: dict[int, int] = {}
    taken = dict.fromkeys(active, 0)
    at = dict.fromkeys(active, 0)
    while True:
        ready = []
        for n in active:
            sequence = sequences[n]
            while at[n] < len(sequence) and sequence[at[n]] in filed:
                at[n] += 1
            if taken[n] < given[n] and at[n] < len(sequence):
                ready.append((-worth[n][at[n]], n))
        if not ready:
            break
        for _, n in sorted(ready):  # a round: the best next paper first
            sequence = sequences[n]
            while at[n] < len(sequence) and sequence[at[n]] in filed:
                at[n] += 1
            if at[n] < len(sequence):
                filed[sequence[at[n]]] = n
                taken[n] += 1
                at[n] += 1
    return filed


def xquad(lists: Sequence[tuple[np.ndarray, np.ndarray]], weights: Sequence[float], places: int,
          rest: Sequence[int], final: np.ndarray) -> tuple[list[int], dict[int, int], Allocation] | None:
    """XQUAD: the picks, greedily, and the interest each mostly served; None with fewer than two interests."""
    active = [n for n, (found, _) in enumerate(lists) if len(found)]
    if len(active) < 2:
        return None
    total = sum(weights[n] for n in active) or 1.0
    share = {n: weights[n] / total for n in active}
    own = {n: dict(zip(lists[n][0].tolist(), lists[n][1].tolist(), strict=True)) for n in active}
    pool = list(dict.fromkeys([*rest, *(j for n in active for j in lists[n][0].tolist())]))
    unserved = dict.fromkeys(active, 1.0)  # Π (1 - relevance_i(s)) over the picks so far
    picks: list[int] = []
    filed: dict[int, int] = {}
    while len(picks) < places and pool:
        def gain(j: int) -> tuple[float, int]:
            parts = {n: share[n] * own[n].get(j, 0.0) * unserved[n] for n in active}
            best = max(parts, key=lambda n: (parts[n], -n))
            value = (1 - LAMBDA) * float(final[j]) + LAMBDA * sum(parts.values())
            return value, best if parts[best] > 0 else -1
        scored = [(gain(j), j) for j in pool]
        (value, served), j = max(scored, key=lambda s: (s[0][0], -pool.index(s[1])))
        picks.append(j)
        pool.remove(j)
        if served >= 0:
            filed[j] = served
        for n in active:
            unserved[n] *= 1 - own[n].get(j, 0.0)
    taken = {n: sum(1 for v in filed.values() if v == n) for n in active}
    return picks, filed, Allocation({}, taken, tuple(j for j in picks if j not in filed))


def allocate(scores: Scored, eligible: np.ndarray, boost: np.ndarray, final: np.ndarray, settings: SelectSettings,
             places: int, window: int, rest: Sequence[int], weights: Sequence[float],
             diversify: Diversify) -> tuple[list[int], dict[int, int], Allocation] | None:
    """The recent picks of a reader's several interests by `settings.allocation` (SHARES or XQUAD), or None when
    the one order stands (fewer than two interests with a paper above the floor)."""
    lists = interest_lists(scores, eligible, boost, settings, window)
    if settings.allocation == XQUAD:
        return xquad(lists, weights, places, rest, final)
    return shared(lists, weights, places, rest, diversify, scores.papers)
