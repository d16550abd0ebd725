"""Each interest's matches, scored once and kept in the store: a send scores the papers new since, and reads the rest.

An interest's log-odds for a paper (`scores.interest_logits`: its words and the text model fused, its weight in,
followed authors raised) do not change from one day to the next; only the boosts (trending, recency) and what a
reader has received do, and those are cheap. So a send keeps, per distinct interest, the papers of the window
whose log-odds reach the floor less MARGIN, and which papers it scored (as runs of store ids); the next send
scores only the papers it has not seen yet and takes the others' log-odds from the store. A digest's candidates
are then found among a few dozen papers per reader instead of the whole window (`batch.stored_candidates`), and
its scores worked out exactly on those, so a digest is the one a full re-rank gives as long as stored log-odds
are within DRIFT of today's (the term statistics move a little as the store grows).

What is kept lives in the store's cache table (derived data: deleting it costs one slower send), under a key
made of everything the log-odds depend on: the interest's words, library profile, authors and weight, the
scoring settings and MATCHES_VERSION; an edited interest is a new key, scored over the window once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from digest.models import Interest
from digest.select.dense import InterestVectors
from digest.select.pool import in_sorted

PREFIX = "matches/"
MATCHES_VERSION = 3  # bump when the scoring changes: every interest's matches are made again
# log-odds: a paper is kept when its interest's log-odds reach the floor less this. A send's shortlists reach
# DRIFT + TIE_MARGIN below the floor, so anything above that is slack: 1.0 kept 2.1 times as many papers (7.4 M
# matches, 89 MB, for 10,000 generated readers at a week's window), each list rewritten every day.
MARGIN = 0.25
# log-odds: how far a stored value is trusted to be from today's. The candidates a send takes from stored values
# reach this far (twice, and TIE_MARGIN) below what the exact scores would need, so a digest is the full re-rank's
# unless the term statistics moved a paper's log-odds by more (measured: at most 0.018 over a week in which
# each day's new papers were a tenth of the store, tests/test_stored_matches.py; a real store's day is a fortieth).
DRIFT = 0.1
KEEP_DAYS = 30  # matches not written for this many days are forgotten (an edited interest's old key, a leaver's)


class CacheStore(Protocol):
    """Where matches are kept (the store's cache table)."""

    def get_caches(self, keys: Sequence[str]) -> dict[str, bytes]: ...

    def put_caches(self, values: dict[str, bytes]) -> None: ...


@dataclass(frozen=True)
class Matches:
    """One interest's kept papers: the store ids scored (inclusive ranges), and of those, the ones kept with their
    log-odds (ids ascending)."""

    runs: np.ndarray  # (n, 2) int64
    ids: np.ndarray  # int64
    logits: np.ndarray  # float32

    def covers(self, ids: np.ndarray) -> np.ndarray:
        """Which of these store ids were scored."""
        if not len(self.runs):
            return np.zeros(len(ids), dtype=bool)
        at = np.searchsorted(self.runs[:, 0], ids, side="right") - 1
        inside = at >= 0
        out = np.zeros(len(ids), dtype=bool)
        out[inside] = ids[inside] <= self.runs[at[inside], 1]
        return out

    def to_bytes(self) -> bytes:
        head = np.array([MATCHES_VERSION, len(self.runs), len(self.ids)], dtype="<i8")
        return (head.tobytes() + self.runs.astype("<i8").tobytes() + self.ids.astype("<i8").tobytes()
                + self.logits.astype("<f4").tobytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> Matches:
        """Read back `to_bytes`; ValueError for anything else (another version: scored again)."""
        if len(data) < 24:
            raise ValueError("too short")
        version, runs, count = (int(v) for v in np.frombuffer(data, dtype="<i8", count=3))
        if version != MATCHES_VERSION or runs < 0 or count < 0 or len(data) != 24 + 16 * runs + 12 * count:
            raise ValueError("not this version's matches")
        body = np.frombuffer(data, dtype="<i8", count=2 * runs + count, offset=24)
        return cls(body[:2 * runs].reshape(runs, 2), body[2 * runs:],
                   np.frombuffer(data, dtype="<f4", count=count, offset=24 + 8 * (2 * runs + count)))


def runs_of(ids: np.ndarray) -> np.ndarray:
    """Ascending store ids as inclusive ranges of consecutive ids ((n, 2) int64)."""
    if not len(ids):
        return np.zeros((0, 2), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(ids) != 1)
    starts = np.concatenate([[ids[0]], ids[breaks + 1]])
    ends = np.concatenate([ids[breaks], [ids[-1]]])
    return np.stack([starts, ends], axis=1).astype(np.int64)


def interest_key(interest: Interest, vectors: InterestVectors | None, settings: tuple[object, ...]) -> str:
    """The key of an interest's matches: everything its log-odds depend on, hashed."""
    digest = hashlib.sha256(json.dumps([MATCHES_VERSION, sorted(interest.keywords), interest.description,
                                        list(interest.seed_papers), list(interest.authors), interest.library_key,
                                        interest.weight, [repr(s) for s in settings]]).encode())
    if vectors is not None:
        for profile in (vectors.text, vectors.library):
            digest.update(profile.to_bytes() if profile is not None else b"-")
    return PREFIX + digest.hexdigest()[:32]


def read(store: CacheStore, keys: Sequence[str]) -> dict[str, Matches]:
    """The stored matches of these keys (those missing or unreadable left out: scored again)."""
    out = {}
    for key, data in store.get_caches(list(keys)).items():
        try:
            out[key] = Matches.from_bytes(data)
        except ValueError:
            continue
    return out


def merged(old: Matches | None, pool_ids: np.ndarray, scored: np.ndarray, logits: np.ndarray,
           threshold: float, runs: np.ndarray | None = None) -> Matches:
    """The matches after scoring the pool papers `scored` (their store ids, ascending, as `pool_ids`) anew: the old
    ones still in the pool kept, the new ones added, those reaching `threshold`; scored: every pool paper (`runs`:
    `runs_of` the pool's ids, when the caller has them)."""
    keep = logits >= threshold
    ids, values = scored[keep], logits[keep].astype(np.float32)
    if old is not None and len(old.ids):
        still = in_sorted(old.ids, pool_ids) & ~in_sorted(old.ids, scored) & (old.logits >= threshold)
        ids, values = np.concatenate([old.ids[still], ids]), np.concatenate([old.logits[still], values])
    order = np.argsort(ids, kind="stable")
    return Matches(runs_of(np.sort(pool_ids)) if runs is None else runs, ids[order].astype(np.int64), values[order])


def write(store: CacheStore, found: Mapping[str, Matches]) -> None:
    store.put_caches({key: m.to_bytes() for key, m in found.items()})
