"""A reader's several interests share the digest's places: each interest with papers above the floor gets its share,
a paper counts for one interest, what an interest cannot use goes to the rest, and the digest says so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from digest.models import Interest, Subscriber
from digest.select import select_digest
from digest.select.scores import ONE_ORDER, SHARES, XQUAD
from digest.select.shares import quotas

from ..conftest import DAY

# The four interests of a reader of the built-in sample (keywords and a sentence each), as a new reader writes them.
FOUR = (
    Interest("LLM inference", ("LLM inference", "KV cache", "speculative decoding", "LLM serving"),
             description="Making large language models cheaper and faster to serve."),
    Interest("Robot learning", ("robot learning", "manipulation", "imitation learning", "embodied"),
             description="Robots that learn skills from demonstrations."),
    Interest("Video generation", ("video generation", "video diffusion", "text-to-video"),
             description="Models that generate and edit video."),
    Interest("Agents", ("LLM agents", "tool use", "web agents", "agentic"),
             description="Language-model agents that use tools and act on the web."),
)


@pytest.mark.parametrize(("places", "weights", "expected"), [
    (10, [1, 1, 1], [4, 3, 3]),  # equal: largest remainders, ties to the first
    (10, [2, 1], [7, 3]),  # one each, then 8 by weight: 5.33 and 2.67
    (7, [1, 0.8], [4, 3]),
    (2, [1, 1, 1], [1, 1, 0]),  # fewer places than interests: the first ones get one
    (3, [5, 1, 1], [1, 1, 1]),  # each at least one while there are places for all
    (0, [1, 1], [0, 0]),
])
def test_quotas_share_the_places_by_weight(places, weights, expected):
    """Places in proportion to the weights, each interest at least one while there are enough, summing to the places."""
    found = quotas(places, weights)
    assert found == expected and sum(found) == min(places, places)


def papers_of(digest) -> list[int]:
    return [item.paper.store_id for item in digest.items]


def test_the_four_interest_reader_gets_every_interest_with_a_paper(app):
    """On the built-in sample, a reader of four interests gets a section for every interest that has a paper above the
    floor, at least two picks for each that has two good matches, and no paper twice; in one order over all interests
    the loudest takes nearly every place."""
    reader = Subscriber("four@example.org", interests=FOUR, max_papers=10)
    pool = app.composer.pool(DAY)
    one = select_digest(pool, reader, day=DAY, settings=replace(app.settings, allocation=ONE_ORDER))
    shared = select_digest(pool, reader, day=DAY, settings=replace(app.settings, allocation=SHARES))
    from digest.select.scores import Scores
    from digest.select.shares import FURTHER, own_relevance

    scores = Scores(pool, reader, app.settings, app.composer.signals([reader], DAY)[reader.email])
    above = {c.interest.name: own_relevance(scores, n) for n, c in enumerate(scores.interests)}
    active = [name for name, r in above.items() if (r >= app.settings.min_relevance).any()]
    good = [name for name, r in above.items() if (r >= FURTHER).sum() >= 2]
    assert len(active) >= 3 and len(good) >= 2  # the sample gives the test something to share
    sections = {s.name: len(s.items) for s in shared.sections}
    assert all(name in sections for name in active)
    assert all(sections[name] >= 2 for name in good)
    assert len(papers_of(shared)) == len(set(papers_of(shared))) == shared.count <= 10
    loudest = max(one.sections, key=lambda s: len(s.items))
    assert len(loudest.items) >= 7 and len(one.sections) < len(active)


def test_an_interest_with_too_few_good_papers_leaves_its_places_and_says_so(app):
    """An interest with one good match takes one place; the rest go to the other interest, and both sections say
    how their places were filled."""
    reader = Subscriber("two@example.org", max_papers=8, interests=(
        Interest("LLM inference", ("KV cache", "LLM inference", "speculative decoding", "LLM serving")),
        Interest("Super-resolution", ("image super-resolution",)),
    ))
    digest = select_digest(app.composer.pool(DAY), reader, day=DAY, settings=app.settings)
    by_name = {s.name: s for s in digest.sections}
    assert set(by_name) == {"LLM inference", "Super-resolution"}
    narrow, broad = by_name["Super-resolution"], by_name["LLM inference"]
    assert len(narrow.items) < 4 < len(broad.items) and len(narrow.items) + len(broad.items) == 8
    assert narrow.note.startswith(f"{len(narrow.items)} of the 4 places it was given")
    assert "your other interests could not fill" in broad.note


def test_weights_set_the_shares(app):
    """An interest weighted twice as much gets about twice the places, when both have the papers."""
    one, two = FOUR[0], FOUR[2]
    reader = Subscriber("w@example.org", max_papers=9, interests=(one, replace(two, weight=2.0)))
    digest = select_digest(app.composer.pool(DAY), reader, day=DAY, settings=app.settings)
    counts = {s.name: len(s.items) for s in digest.sections}
    flipped = Subscriber("w@example.org", max_papers=9, interests=(replace(one, weight=2.0), two))
    again = {s.name: len(s.items) for s in select_digest(app.composer.pool(DAY), flipped, day=DAY,
                                                           settings=app.settings).sections}
    assert again["LLM inference"] > counts["LLM inference"]


def test_one_interest_keeps_the_one_order(app):
    """A reader of one interest gets the same digest whatever the allocation: there is nothing to share."""
    reader = Subscriber("one@example.org", interests=(FOUR[0],), max_papers=10)
    pool = app.composer.pool(DAY)
    digests = [select_digest(pool, reader, day=DAY, settings=replace(app.settings, allocation=a))
               for a in (ONE_ORDER, SHARES, XQUAD)]
    assert papers_of(digests[0]) == papers_of(digests[1]) == papers_of(digests[2]) and digests[0].count == 10


def test_the_diversification_covers_more_interests_than_one_order(app):
    """xQuAD, measured beside the shares, covers at least the interests one order covers."""
    reader = Subscriber("four@example.org", interests=FOUR, max_papers=10)
    pool = app.composer.pool(DAY)
    one = select_digest(pool, reader, day=DAY, settings=replace(app.settings, allocation=ONE_ORDER))
    xquad = select_digest(pool, reader, day=DAY, settings=replace(app.settings, allocation=XQUAD))
    assert len(xquad.sections) >= len(one.sections) and xquad.count == one.count
