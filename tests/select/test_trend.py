"""A paper's trend: every count its sources report (upvotes, comments, GitHub stars, citations) in one number, with
the weights in settings; a paper no source reports a count for is not taken for one nobody follows."""

from __future__ import annotations

from dataclasses import replace
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from digest.config import build_config
from digest.models import Interest, Paper, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, select_digest
from digest.select.pool import UNKNOWN_ATTENTION, attention, trend
from digest.select.rank import trending_reason

from ..conftest import background_papers
from .test_select import FILLER

DAY = date(2026, 6, 12)
SETTINGS = SelectSettings()
WEIGHTS = (SETTINGS.comment_weight, SETTINGS.star_weight, SETTINGS.citation_weight)


def paper(n: int, title: str, **counts: int | None) -> Paper:
    return Paper(title=title, abstract="Sparse attention kernels for long context." + FILLER, published=DAY,
                 store_id=n, **counts)


@pytest.fixture(scope="module")
def corpus() -> CorpusStats:
    return CorpusStats.of(background_papers())


def test_attention_adds_every_reported_count_in_upvotes():
    p = paper(1, "p", upvotes=10, comments=2, stars=100, citations=3)
    assert attention(p, *WEIGHTS) == pytest.approx(10 + 2.0 * 2 + 0.2 * 100 + 1.0 * 3)
    assert attention(paper(2, "q", stars=50), *WEIGHTS) == pytest.approx(10.0)  # only stars reported
    assert attention(paper(3, "r"), *WEIGHTS) is None


def test_the_trend_is_log_scaled_to_the_pools_most_followed_paper():
    papers = [paper(1, "a", upvotes=99), paper(2, "b", upvotes=9), paper(3, "c", upvotes=0)]
    assert trend(papers, *WEIGHTS).tolist() == pytest.approx([1.0, np.log(10) / np.log(100), 0.0])


def test_a_paper_without_any_count_counts_as_one_upvote_never_below_a_weak_signal():
    """A feed's paper (no count) is level with one upvote, above a Daily Papers paper nobody upvoted, below one
    with two; with no count in the whole pool every trend is 0 (nothing to tell apart)."""
    papers = [paper(1, "feed"), paper(2, "one", upvotes=1), paper(3, "none", upvotes=0), paper(4, "two", upvotes=2),
              paper(5, "top", upvotes=50)]
    values = trend(papers, *WEIGHTS)
    assert UNKNOWN_ATTENTION == 1.0
    assert values[0] == pytest.approx(values[1]) and values[2] < values[0] < values[3] < values[4] == 1.0
    assert trend([paper(1, "x"), paper(2, "y")], *WEIGHTS).tolist() == [0.0, 0.0]


def test_stars_and_citations_move_a_paper_and_their_weights_are_settings():
    """A paper with 20 upvotes and 1,000 stars outranks one with 60 upvotes at star_weight 0.2 (220 against 60);
    with star_weight 0 the upvotes decide."""
    starred, upvoted = paper(1, "starred", upvotes=20, stars=1000), paper(2, "upvoted", upvotes=60)
    weighted = trend([starred, upvoted], *WEIGHTS)
    assert weighted[0] > weighted[1]
    plain = trend([starred, upvoted], SETTINGS.comment_weight, 0.0, SETTINGS.citation_weight)
    assert plain[0] < plain[1]
    cited = trend([paper(1, "cited", upvotes=5, citations=40), upvoted], *WEIGHTS)
    assert cited[0] < cited[1]
    assert trend([paper(1, "cited", upvotes=5, citations=40), upvoted], 2.0, 0.2, 2.0)[0] > \
        trend([paper(1, "cited", upvotes=5, citations=40), upvoted], 2.0, 0.2, 2.0)[1]


def test_the_weights_are_read_from_the_settings_file():
    config = build_config({"select": {"star_weight": 0.5, "citation_weight": 3}}, base=Path("."))
    assert (config.select.star_weight, config.select.citation_weight) == (0.5, 3)


def test_a_reader_without_interests_gets_the_papers_of_highest_trend_and_why(corpus):
    """The trending digest is ordered by trend, not upvotes alone: the repository with 2,000 stars comes first,
    and its "Why" line says the counts."""
    pool = Pool([paper(1, "Upvoted", upvotes=80, comments=1), paper(2, "Starred", upvotes=10, stars=2000),
                 paper(3, "Quiet", upvotes=3), paper(4, "Feed")], corpus)
    reader = Subscriber(email="t@example.org", max_papers=4)
    digest = select_digest(pool, reader, day=DAY, received=set(), settings=SETTINGS)
    assert digest.trending
    assert [i.paper.title for i in digest.items] == ["Starred", "Upvoted", "Quiet", "Feed"]
    assert digest.items[0].reasons == ("trending: 10 upvotes, 2,000 GitHub stars",)
    assert digest.items[3].reasons == ("new today",)
    unstarred = select_digest(pool, reader, day=DAY, received=set(), settings=replace(SETTINGS, star_weight=0.0))
    assert [i.paper.title for i in unstarred.items][:2] == ["Upvoted", "Starred"]


def test_the_trend_breaks_ties_between_equal_matches_for_readers_with_interests(corpus):
    """Two equally relevant papers: the one whose code has the stars ranks first, whichever has more upvotes."""
    twins = [paper(1, "Sparse attention kernels", upvotes=5), paper(2, "Sparse attention kernels!", upvotes=2,
                                                                    stars=500)]
    sub = Subscriber(email="g@example.org", interests=(Interest("K", ("sparse attention",)),))
    digest = select_digest(Pool(twins, corpus), sub, day=DAY, received=set(),
                           settings=replace(SETTINGS, diversity=0.0, min_relevance=0.0))
    assert [i.paper.store_id for i in digest.items] == [2, 1]


def test_reasons_name_only_the_counts_reported():
    assert trending_reason(paper(1, "a", upvotes=1)) == "trending: 1 upvote"
    assert trending_reason(paper(1, "a", stars=1, citations=2)) == "trending: 1 GitHub star, 2 citations"
    assert trending_reason(paper(1, "a", upvotes=0)) == "new today"



@pytest.mark.slow
def test_trending_again_is_ordered_by_the_trend_too(make_config):
    """The real Daily Papers day two months on, every paper old: the reader without interests gets them under
    "Trending again" in the order of their trend, MiniMax Sparse Attention (103 upvotes, 251 stars) before EvoArena
    (118 upvotes, 9 stars)."""
    from datetime import timedelta

    from digest.app import App
    from digest.select.ages import AGAIN_SECTION

    from ..conftest import FIXTURES

    later = DAY + timedelta(days=60)
    app = App(make_config(select={"max_age_days": 30, "trending_again": 3}))
    app.ingest([FIXTURES / "hf_daily_papers_2026-06-12.json"], seen_on=later)
    reader = app.profiles.roster().find("katherine@example.org")
    digest = app.composer.compose(reader, later, app.composer.pool(later)).digest
    app.close()
    assert [s.name for s in digest.sections] == [AGAIN_SECTION]
    assert [i.paper.title[:24] for i in digest.sections[0].items] == [
        "MiniMax Sparse Attention", "EvoArena: Tracking Memor", "Robust-U1: Can MLLMs Sel"]
