"""Onboarding by rating: a dozen of the day's and recent papers spanning a new reader's interests, each to mark
"more / less like this", so that their first digest is ranked by a model that already knows them.

Entered by `choices` (the papers to rate, with the marks already given) and `rate` (one mark, recorded as the
same signal as an email's feedback link: `Store.add_feedback`, which the learned model, `select/learn.py`, reads
at the next compose). Nothing here knows HTTP: `digest.web.welcome` shows the list and takes the marks.

The papers are the selector's own picks, interest by interest (`select.rank` on the reader with that one
interest, its diversity re-ranking included), taken in turn across the interests, so a reader of three topics
sees about four of each; trending papers of the window fill what the interests leave, and are the whole list
for a reader without interests. The picks do not read the reader's marks, so the list stays the same while they
rate it (a mark would otherwise move the papers about under their cursor).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Protocol

from digest.models import Paper, Subscriber
from digest.select import Signals, rank

if TYPE_CHECKING:
    from digest.compose import Composer
    from digest.select import SelectSettings
    from digest.store import Store


class Parts(Protocol):
    """What onboarding needs of a command: the store, the composer (its pools) and the ranking's settings."""

    store: Store
    composer: Composer
    settings: SelectSettings

log = logging.getLogger("digest")

COUNT = 12  # papers offered to rate
TRENDING = ""  # the interest a trending pick is for (the reader's interests left places, or there are none)


@dataclass(frozen=True)
class Choice:
    """A paper to rate: what it was picked for (an interest's name, or TRENDING), and the reader's mark so far
    (+1 more like this, -1 less, 0 none yet)."""

    paper: Paper
    interest: str
    mark: int = 0


def choices(app: Parts, subscriber: Subscriber, day: date, *, count: int = COUNT) -> list[Choice]:
    """The papers `subscriber` is offered to rate on `day`, with their marks; [] when the window holds no paper."""
    pool = app.composer.pool(day)
    if not len(pool):
        return []
    seeds = app.store.find_papers(r for i in subscriber.interests for r in i.seed_papers)
    # Their own papers (seeds, library) are not offered: there is nothing to learn from rating what they keep.
    signals = Signals(received=app.composer.kept_papers(subscriber, seeds), seeds=seeds)

    def top(reader: Subscriber) -> list[Paper]:
        return [r.paper for r in rank(pool, reader, day=day, settings=app.settings, signals=signals, limit=count,
                                      parts=False)]

    lists = [(i.name, top(replace(subscriber, interests=(i,)))) for i in subscriber.interests]
    lists.append((TRENDING, top(replace(subscriber, interests=()))))
    marks = app.store.feedback_by_subscriber(subscriber.email).get(subscriber.email, {})
    return [Choice(paper, name, marks.get(paper.store_id or 0, 0)) for name, paper in interleave(lists, count)]


def offered(app: Parts, subscriber: Subscriber, day: date) -> list[Choice] | None:
    """`choices`, or None (logged) when they could not be picked: the page around them goes on without them (a
    confirmation, already done, must not end on an error page)."""
    try:
        return choices(app, subscriber, day)
    except Exception:  # noqa: BLE001 - the welcome page says so instead
        log.exception("onboarding: could not pick the papers to rate for %s", subscriber.email)
        return None


def interleave(lists: Sequence[tuple[str, Sequence[Paper]]], count: int) -> list[tuple[str, Paper]]:
    """Up to `count` distinct papers taken in turn from each list but the last (its first untaken paper each
    round), then from the last (the fill) for the places left."""
    taken: dict[int | str, tuple[str, Paper]] = {}

    def take(name: str, papers: Iterable[Paper]) -> bool:
        for paper in papers:
            key = paper.store_id if paper.store_id is not None else paper.key
            if key not in taken:
                taken[key] = (name, paper)
                return True
        return False

    *rounds, (fill_name, fill) = lists
    going = True
    while going and len(taken) < count:
        going = False
        for name, papers in rounds:
            going = (len(taken) < count and take(name, papers)) or going
    while len(taken) < count and take(fill_name, fill):
        pass
    return list(taken.values())


def rate(app: Parts, email: str, paper_id: int, more: bool) -> Paper | None:
    """Record `email`'s mark on the store's paper `paper_id` (the latest mark counts); None when there is no such
    paper (nothing recorded)."""
    paper = app.store.paper(paper_id)
    if paper is None:
        return None
    app.store.add_feedback(email, paper_id, 1 if more else -1)
    return paper
