"""A send's candidates from stored matches: the window's papers scored once per interest, not once per send.

`batch.candidates` scores every paper of the window for every subscriber: by the seventh day of a 7-day window
that is seven days of papers, six of them scored against the same interests the days before. Here each distinct
interest's log-odds are read from its stored `matches.Matches` (the papers new since are scored now, for the
distinct interests of the batch, and stored), each subscriber's shortlist is taken from them (their best
interest's stored log-odds with today's boosts, what they received left out), and the exact scores are worked out
on the shortlists only, row by row, with the same arithmetic as `batch.candidates` on the whole pool. The
shortlist reaches 2 × DRIFT + TIE_MARGIN below the k-th best and DRIFT + TIE_MARGIN below the floor, so the
candidates, and so the digest, are the full re-rank's while stored log-odds stay within DRIFT of today's.

Subscribers with a learned model ("more / less" marks) are not served here: their model can raise any paper of
the window above the floor, so `select_many` ranks them on the whole pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date

import numpy as np
import scipy.sparse as sp

from digest.memory import held
from digest.models import Interest, Subscriber
from digest.select import matches
from digest.select.batch import (
    DETAIL_CHUNK,
    TIE_MARGIN,
    _best,
    _best_interest,
    _chunk_rows,
    _floor,
    _Kept,
    _Run,
    _run,
    _scored,
    _top_near,
)
from digest.select.dense import InterestVectors
from digest.select.matches import DRIFT, MARGIN, CacheStore, Matches
from digest.select.pool import Index, Pool
from digest.select.profile import Signals
from digest.select.rank import candidate_window
from digest.select.scores import (
    AUTHOR_LOGIT,
    LEXICAL_FLOOR,
    NO_MATCH,
    ONE_ORDER,
    Scored,
    SelectSettings,
    calibrate,
    directions,
    interest_logits,
    library_words,
    section_keys,
)

PROFILE_BLOCK = 256  # profiles whose papers' codes are gathered at once (256 × 50 papers × 384 floats: 20 MB)
# Stored matches kept in memory between batches (papers × 2 values, 16 bytes a paper: 16 MB), for the next batch's
# readers who share an interest; beyond it the memory's matches are let go and read from the store when asked again.
# Without a budget a run kept every distinct interest's (a week's window of 10,000 readers with interests of their
# own: 50 MiB more peak memory than the full re-rank).
MEMO_MATCHES = 1_000_000


def usable(pool: Pool, settings: SelectSettings) -> bool:
    """Whether a send can use stored matches on this pool: every paper is in the store, in the store's order (as
    `Store.candidates` hands a window out), and the floor is a floor."""
    ids = pool.store_ids
    return 0 < settings.min_relevance < 1 and ids is not None and bool(np.all(ids[1:] > ids[:-1]))


SHARED = 0.5  # `shared`: at most this many distinct interests per interest of the batch


def shared(subscribers: Sequence[Subscriber]) -> bool:
    """Whether these readers share their interests enough for stored matches to pay: at most SHARED distinct
    interests per interest (readers who ticked catalogue topics share them whole). Measured: 3,000 readers over 50
    interests, a 7,000-paper window: 9.4 -> 5.0 s of ranking CPU; 10,000 generated readers with 17,935 distinct
    interests: 3-6 % less on a steady-state day, 14-18 % more on the first, and 52 MB of lists rewritten a day."""
    interests = [i for s in subscribers for i in s.interests]
    distinct = {(i.keywords, i.description, i.seed_papers, i.authors, i.library_key, i.weight) for i in interests}
    return bool(interests) and len(distinct) <= SHARED * len(interests)


def without_model(signals: Signals | None) -> bool:
    """Whether a subscriber's relevance is their interests' alone (no learned model to raise other papers)."""
    return signals is None or (signals.model is None and not signals.liked and not signals.disliked)


@held()
def candidates(pool: Pool, subscribers: Sequence[Subscriber], *, day: date, settings: SelectSettings, k: int,
               signals: Mapping[str, Signals], store: CacheStore, chunk: int = DETAIL_CHUNK) -> list[Scored | None]:
    """`batch.candidates` for subscribers without a learned model, from stored matches (see the module doc)."""
    run = _run(pool, subscribers, day, settings, signals, local=True)  # units scored on the papers needed only
    out: list[Scored | None] = [None] * len(subscribers)
    ids = pool.store_ids
    assert ids is not None  # (`usable`)
    for start in range(0, len(subscribers), chunk):
        _chunk(run, start, min(start + chunk, len(subscribers)), min(k, len(pool)), ids, signals, store, out)
    return out


def _chunk(run: _Run, start: int, end: int, k: int, ids: np.ndarray, signals: Mapping[str, Signals],
           store: CacheStore, out: list[Scored | None]) -> None:
    lo, hi, first, counts, rows = _chunk_rows(run, start, end)
    if hi == lo:
        return
    vectors = run.plan.vectors(run.pool, lo, hi) if run.dense else None
    stored = _stored(run, lo, hi, vectors, ids, store)
    columns, valid = _shortlists(run, stored, first, counts, rows, k)
    by_interest = np.repeat(np.arange(len(rows)), counts)
    raw = _raw(run, lo, hi, columns[by_interest])
    logit = _logits(run, lo, hi, raw, columns[by_interest], valid[by_interest].sum(axis=1), vectors)
    logit[~valid[by_interest]] = -np.inf
    best = _best(logit, first, counts)
    which = _best_interest(section_keys(logit, raw, run.plan.refs[lo:hi]), first, counts)[1]
    key = best + run.log_boost[columns]
    floor = _floor(run.settings)
    sure = np.where(best >= floor + TIE_MARGIN, key, -np.inf)
    near = np.where(best >= floor - TIE_MARGIN, key, -np.inf)
    for n, r in enumerate(rows.tolist()):
        if len(run.blocked[r]):
            hit = np.isin(columns[n], run.blocked[r])
            sure[n, hit] = -np.inf
            near[n, hit] = -np.inf
    if run.old is None:
        kept = _top_near(sure, near, k)
    else:
        old = run.old[columns]
        old_k = min(candidate_window(int(run.settings.trending_again)), len(run.pool))
        kept = (_top_near(np.where(old, -np.inf, sure), np.where(old, -np.inf, near), k)
                | _top_near(np.where(old, sure, -np.inf), np.where(old, near, -np.inf), old_k))
    if run.settings.allocation != ONE_ORDER and bool(np.any(counts >= 2)):
        kept |= _interest_tops(run, logit, columns, by_interest, first, counts, rows, k)
    none = (np.zeros((0, columns.shape[1])), np.zeros((0, columns.shape[1])))
    _scored(run, lo, rows, first, counts, kept, _Kept(raw, logit, None, vectors or [], best.copy(), best, which, none),
            {}, signals, out, columns=columns)


def _interest_tops(run: _Run, logit: np.ndarray, columns: np.ndarray, by_interest: np.ndarray, first: np.ndarray,
                   counts: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """`batch._interest_tops` on each subscriber's own columns: for readers with several interests, each interest's
    best k recent eligible papers by its own log-odds and boost, and those within TIE_MARGIN (subscribers ×
    columns)."""
    own = logit.copy()
    own[logit <= NO_MATCH] = -np.inf
    cols = columns[by_interest]
    if run.old is not None:
        own[run.old[cols]] = -np.inf
    for n, r in enumerate(rows.tolist()):
        if len(run.blocked[r]) and counts[n] >= 2:
            own[first[n]:first[n] + counts[n]][:, np.isin(columns[n], run.blocked[r])] = -np.inf
    floor = _floor(run.settings)
    key = own + run.log_boost[cols]
    kept = _top_near(np.where(own >= floor + TIE_MARGIN, key, -np.inf), np.where(own >= floor - TIE_MARGIN, key,
                                                                                   -np.inf), k)
    out = np.zeros(columns.shape, dtype=bool)
    several = np.flatnonzero(counts >= 2)
    out[several] = np.logical_or.reduceat(kept, first, axis=0)[several]
    return out


def _stored(run: _Run, lo: int, hi: int, vectors: list[InterestVectors] | None, ids: np.ndarray,
            store: CacheStore) -> list[tuple[np.ndarray, np.ndarray]]:
    """Interests lo..hi's kept papers (pool indices) and log-odds: read from the store, the papers it has not scored
    scored now (for each distinct interest once) and stored."""
    settings = run.settings
    config = (settings.min_relevance, settings.title_weight, settings.description_weight, settings.seed_weight,
              run.dense)
    memo = run.index.memo
    keys = [matches.interest_key(run.plan.interests[n], vectors[n - lo] if vectors else None,
                                 (*config, sorted((ref, p.store_id) for ref, p in run.plan.seeds[n].items()
                                                  if ref in run.plan.interests[n].seed_papers)))
            for n in range(lo, hi)]
    first_of: dict[str, int] = {}
    for n, key in enumerate(keys, lo):
        first_of.setdefault(key, n)
    todo = [key for key in first_of if ("matches", key) not in memo]
    fresh: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    if todo:
        found = matches.read(store, todo)
        by_columns: dict[bytes, list[str]] = {}  # the papers to score → the keys that need them
        by_runs: dict[bytes, bytes] = {}  # (most keys were last written from the same pool: the same runs)
        everything = np.arange(len(ids)).tobytes()
        for key in todo:
            old = found.get(key)
            if old is None:
                missing = everything
            else:
                scored = old.runs.tobytes()
                if scored not in by_runs:
                    by_runs[scored] = np.flatnonzero(~old.covers(ids)).tobytes()
                missing = by_runs[scored]
            by_columns.setdefault(missing, []).append(key)
        threshold = _floor(settings) - MARGIN
        runs = matches.runs_of(ids)  # (the pool's ids ascending: the store hands the window out by id)
        written: dict[str, Matches] = {}
        for packed, group in by_columns.items():
            columns = np.frombuffer(packed, dtype=np.int64)
            logits = _score(run, lo, [first_of[key] for key in group], columns, vectors) if len(columns) else None
            for j, key in enumerate(group):
                old = found.get(key)
                if old is None or logits is not None:
                    old = written[key] = matches.merged(old, ids, ids[columns], logits[j] if logits is not None
                                                        else np.zeros(0), threshold, runs)
                at = np.searchsorted(ids, old.ids)  # (pool ids ascending: the store hands the window out by id)
                inside = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == old.ids)
                fresh[key] = (at[inside], old.logits[inside].astype(np.float64))
        matches.write(store, written)
    out = [fresh[key] if key in fresh else memo[("matches", key)] for key in keys]
    _keep(memo, fresh)  # (after: keeping may let go of what this batch read from memory)
    return out


def _keep(memo: dict, found: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    """Keep these interests' matches in the index's memo for later batches, at most MEMO_MATCHES papers in all: past
    it, the matches kept before are let go first (a long run's batches bring new interests, rarely old ones back)."""
    size = sum(len(at) for at, _ in found.values())
    kept = memo.get(("matches-held",), 0)
    if kept + size > MEMO_MATCHES:
        for key in [k for k in memo if isinstance(k, tuple) and k[:1] == ("matches",)]:
            del memo[key]
        kept = 0
    if kept + size <= MEMO_MATCHES:
        memo.update((("matches", key), value) for key, value in found.items())
        memo[("matches-held",)] = kept + size


def _score(run: _Run, lo: int, interests: list[int], columns: np.ndarray,
           vectors: list[InterestVectors] | None) -> np.ndarray:
    """These interests' (plan numbers) log-odds of these papers, as `batch` computes them on the whole pool."""
    plan = run.plan
    rows = plan.map[interests]
    used = np.unique(rows.indices)  # the units these interests use, their scores of these papers only
    local = sp.csr_matrix((rows.data, np.searchsorted(used, rows.indices), rows.indptr), shape=(len(interests),
                                                                                               len(used)))
    raw = np.asarray(local @ plan.unit_scores_on(run.index, used, columns))
    chosen = [plan.interests[n] for n in interests]
    found = [vectors[n - lo] for n in interests] if vectors is not None else None
    return interest_logits(run.pool, run.index, chosen, raw, plan.refs[interests], found, columns)


def _shortlists(run: _Run, stored: list[tuple[np.ndarray, np.ndarray]], first: np.ndarray, counts: np.ndarray,
                rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each subscriber's papers worth scoring exactly (rows of pool indices, ascending, padded) and which are real.

    From the stored log-odds: the best interest's per paper, what the subscriber cannot get left out; kept, the
    papers within DRIFT + TIE_MARGIN of the floor and within 2 × DRIFT + TIE_MARGIN of the k-th best of those
    surely above it (old papers and recent ones apart, as `batch` keeps them). The whole chunk at once: every
    (subscriber, paper) pair in one array, sorted."""
    floor, size = _floor(run.settings), len(run.pool)
    old_k = min(candidate_window(int(run.settings.trending_again)), size)
    lists = [stored[a + j] for a, count in zip(first.tolist(), counts.tolist(), strict=True) for j in range(count)]
    lengths = np.array([len(p) for p, _ in lists], dtype=np.int64)
    owner = np.repeat(np.repeat(np.arange(len(rows)), counts), lengths)
    papers = np.concatenate([p for p, _ in lists]) if lists else np.zeros(0, dtype=np.int64)
    logits = np.concatenate([v for _, v in lists]) if lists else np.zeros(0)
    also = _interest_shortlists(run, owner, papers, logits, lengths, counts, rows, k) * size + papers
    order = np.lexsort((-logits, papers, owner))  # the best interest's per (subscriber, paper) first
    owner, papers, logits = owner[order], papers[order], logits[order]
    pair = owner * size + papers
    keep = np.ones(len(pair), dtype=bool)
    keep[1:] = pair[1:] != pair[:-1]
    keep &= logits >= floor - DRIFT - TIE_MARGIN
    blocked = [n * size + run.blocked[r] for n, r in enumerate(rows.tolist()) if len(run.blocked[r])]
    if blocked:
        keep &= ~np.isin(pair, np.concatenate(blocked))
    owner, papers, logits = owner[keep], papers[keep], logits[keep]
    key = logits + run.log_boost[papers]
    if run.old is None:
        chosen = _near_best(owner, key, logits, floor, k, len(rows))
    else:
        old = run.old[papers]
        chosen = (_near_best(owner, np.where(old, -np.inf, key), logits, floor, k, len(rows))
                  | _near_best(owner, np.where(old, key, -np.inf), logits, floor, old_k, len(rows)))
    if len(also):
        chosen |= np.isin(owner * size + papers, also)  # what an interest of a reader with several may take
    owner, papers = owner[chosen], papers[chosen]  # (sorted by subscriber, then paper)
    sizes = np.bincount(owner, minlength=len(rows))
    width = int(sizes.max(initial=0)) or 1
    place = np.arange(len(owner)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    columns = np.zeros((len(rows), width), dtype=np.int64)
    valid = np.zeros((len(rows), width), dtype=bool)
    columns[owner, place] = papers
    valid[owner, place] = True
    return columns, valid


def _interest_shortlists(run: _Run, owner: np.ndarray, papers: np.ndarray, logits: np.ndarray, lengths: np.ndarray,
                         counts: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """Of the stored entries (`owner`: each one's subscriber), the subscriber of those an interest of a reader with
    several interests may take (`shares`): near its own k-th best recent key, as `_near_best` keeps a reader's;
    -1 for the others (so that `owner * size + papers` names no pair)."""
    out = np.full(len(owner), -1, dtype=np.int64)
    if run.settings.allocation == ONE_ORDER or not bool(np.any(counts >= 2)) or not len(owner):
        return out
    interest = np.repeat(np.arange(len(lengths)), lengths)
    key = logits + run.log_boost[papers]
    if run.old is not None:
        key = np.where(run.old[papers], -np.inf, key)
    blocked = [n * len(run.pool) + run.blocked[r] for n, r in enumerate(rows.tolist()) if len(run.blocked[r])]
    if blocked:
        key = np.where(np.isin(owner * len(run.pool) + papers, np.concatenate(blocked)), -np.inf, key)
    key = np.where(logits >= _floor(run.settings) - DRIFT - TIE_MARGIN, key, -np.inf)
    near = _near_best(interest, key, logits, _floor(run.settings), k, len(lengths)) & (counts[owner] >= 2)
    out[near] = owner[near]
    return out


def _near_best(owner: np.ndarray, key: np.ndarray, logits: np.ndarray, floor: float, k: int,
               subscribers: int) -> np.ndarray:
    """Of each subscriber's papers (`owner`), those whose exact key may reach the k-th best exact key among the
    papers surely above the floor (all of them when fewer than k are sure)."""
    real = np.isfinite(key)
    sure = np.flatnonzero(real & (logits >= floor + TIE_MARGIN + DRIFT))
    kth = np.full(subscribers, -np.inf)
    if k and len(sure):
        order = sure[np.lexsort((-key[sure], owner[sure]))]  # each subscriber's sure papers, best first
        starts = np.searchsorted(owner[order], np.arange(subscribers))
        ends = np.searchsorted(owner[order], np.arange(subscribers), side="right")
        full = ends - starts >= k
        kth[full] = key[order[starts[full] + k - 1]]
    return real & (key >= kth[owner] - 2 * DRIFT - TIE_MARGIN)


def _raw(run: _Run, lo: int, hi: int, columns: np.ndarray) -> np.ndarray:
    """Interests lo..hi's raw scores, each row on its own papers (`columns`, interests × papers), summed as the
    sparse product `_Plan.raw` sums them (each interest's parts in order)."""
    rows = run.plan.map[lo:hi]
    used, at = np.unique(rows.indices, return_inverse=True)  # the chunk's units, scored on its papers only
    papers, where = np.unique(columns, return_inverse=True)
    units = run.plan.unit_scores_on(run.index, used, papers)
    run.index.keep_scores([run.plan.units[u] for u in used.tolist()], papers, units)  # what the reasons read
    columns = where.reshape(columns.shape)
    rows = sp.csr_matrix((rows.data, at.ravel(), rows.indptr), shape=(rows.shape[0], len(used)))
    raw = np.zeros(columns.shape)
    sizes = np.diff(rows.indptr)
    for j in range(int(sizes.max(initial=0))):
        has = np.flatnonzero(sizes > j)
        at = rows.indptr[has] + j
        raw[has] += rows.data[at][:, None] * units[rows.indices[at][:, None], columns[has]]
    return raw


def _logits(run: _Run, lo: int, hi: int, raw: np.ndarray, columns: np.ndarray, widths: np.ndarray,
            vectors: list[InterestVectors] | None) -> np.ndarray:
    """`scores.interest_logits` with each row on its own papers (`columns`, the first `widths` of each real), the
    same arithmetic."""
    interests: list[Interest] = run.plan.interests[lo:hi]
    refs = run.plan.refs[lo:hi][:, None]
    weights = run.plan.weights[lo:hi][:, None]
    if vectors is None:
        logits = calibrate(raw, refs, weights)
    else:
        logits = np.maximum(_fuse(run.pool, run.index, calibrate(raw, refs), interests, vectors, columns, widths)
                            + np.log(weights),
                            NO_MATCH)
    for n, interest in enumerate(interests):  # `scores.followed`
        if interest.authors:
            found = run.pool.by_authors(interest.authors)[columns[n]]
            np.maximum(logits[n], np.where(found, AUTHOR_LOGIT, -np.inf), out=logits[n])
    return logits


def _fuse(pool: Pool, index: Index, lexical: np.ndarray, interests: Sequence[Interest],
          vectors: Sequence[InterestVectors], columns: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """`scores.fuse` with each row on its own papers: each profile's dot products with its row's papers' codes
    (profiles taken widest first, a block at a time, each block as wide as its widest row)."""
    out = np.full(lexical.shape, -np.inf)
    (found, scales), consts, weights, text, library = directions(interests, vectors)
    if len(consts):
        codes, code_scales = pool.dense_codes()
        owners = np.array(text + library, dtype=np.int64)
        papers = columns[owners]  # each profile's row's papers
        dots = np.zeros(papers.shape, dtype=np.float32)
        order = np.argsort(-widths[owners], kind="stable")
        for start in range(0, len(order), PROFILE_BLOCK):  # exact: sums of integers below 2**24, in any order
            block = order[start:start + PROFILE_BLOCK]
            wide = int(widths[owners[block[0]]])
            dots[block, :wide] = np.einsum("pkd,pd->pk", codes[papers[block, :wide]], found[block])
        dense = dots.astype(np.float64)  # × scales × the papers' scales + consts, in place (the same order)
        dense *= scales[:, None]
        dense *= code_scales[papers]
        dense += consts[:, None]
        if library:
            dense[len(text):] += library_words(pool, index, [vectors[n] for n in library], papers[len(text):])
        if text:
            out[text] = dense[:len(text)] + weights[:, None] * np.maximum(lexical[text], LEXICAL_FLOOR)
        if library:
            out[library] = np.maximum(out[library], dense[len(text):])
    none = [n for n, v in enumerate(vectors) if v.text is None and v.library is None]
    if none:
        out[none] = lexical[none]
    return out
