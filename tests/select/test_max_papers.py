"""`max_papers` is a maximum, everything included: "Trending again" takes its places from within it."""

from __future__ import annotations

import pytest

from digest.models import Interest, Subscriber
from digest.select.ages import AGAIN_SECTION
from digest.select.rank import age_quota
from digest.signup.signups import MAX_PAPERS

from .test_ages import batch_and_single


@pytest.mark.parametrize(("max_papers", "again", "recent", "old", "expected"), [
    (10, 3, 20, 20, (7, 3)),    # the usual day: three old ones within the ten, not on top of them
    (8, 3, 20, 20, (5, 3)),
    (50, 3, 100, 20, (47, 3)),
    (10, 3, 20, 1, (9, 1)),     # fewer old ones: recent papers fill their places
    (10, 3, 4, 20, (4, 3)),     # fewer recent ones: old ones still at most trending_again
    (10, 3, 0, 20, (0, 3)),     # nothing recent: old ones alone
    (1, 3, 5, 5, (1, 0)),       # one place: a recent paper keeps it (old ones take at most half)
    (1, 3, 0, 5, (0, 1)),       # ... unless nothing recent is there
    (4, 3, 9, 9, (2, 2)),       # at most half the places old
    (3, 50, 0, 9, (0, 3)),      # trending_again past max_papers: still max_papers in all
    (10, 0, 20, 20, (10, 0)),   # trending_again 0: never any old paper
])
def test_age_quota_never_passes_max_papers(max_papers, again, recent, old, expected):
    """The split of max_papers places between recent and old papers, at its limits."""
    got = age_quota(max_papers, again, recent, old)
    assert got == expected and sum(got) <= max_papers


@pytest.mark.slow
def test_web_readers_promised_ten_at_most_get_ten_at_most(make_config):
    """Varied profiles of every size, trending-only included, over the seed pages (mostly old papers): no digest
    holds more than max_papers papers, Trending again included, in a send run's batch ranking or a preview's, and the
    two agree; a full web reader's digest (signup.MAX_PAPERS, ten) with a Trending again section has ten."""
    words = [("LLM inference", "KV cache"), ("diffusion", "video generation"), ("agent", "reasoning"),
             ("quantization",), ("Gaussian splatting",), ("mixture of experts", "retrieval")]
    subscribers = [Subscriber(email=f"r{n}@example.org", max_papers=size,
                              interests=(Interest("Topic", keywords),) if keywords else ())
                   for n, (size, keywords) in enumerate((size, keywords) for size in (1, 2, 8, MAX_PAPERS, 50)
                                                       for keywords in words + [()])]
    batch = batch_and_single(make_config, subscribers, max_age_days=30, trending_again=3)
    for digest, subscriber in zip(batch, subscribers, strict=True):
        assert digest.count <= subscriber.max_papers, (subscriber.email, subscriber.max_papers, digest.count)
    web = [d for d, s in zip(batch, subscribers, strict=True)
           if s.max_papers == MAX_PAPERS and d.sections and d.sections[-1].name == AGAIN_SECTION]
    assert any(d.count == MAX_PAPERS for d in web)  # full, Trending again within: before, up to 13
