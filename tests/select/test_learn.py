"""The per-subscriber model learned from clicks: more of what was liked, never a whole interest lost to one dislike."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from digest.select import select_digest
from digest.select.learn import FeedbackModel
from digest.select.scores import ONE_ORDER, SHARES

from ..conftest import DAY


def about(paper, word: str) -> bool:
    return word in f"{paper.title} {paper.abstract}".lower()


def written_by_llms(paper) -> bool:
    title = paper.title.lower()
    return ("kernel" in title or "cuda" in title) and (about(paper, "llm") or about(paper, "agent"))


def digest_of(app, subscriber, received=frozenset()) -> list:
    """The digest's papers, the given ones already received (as liked papers were: they came in a digest)."""
    signals = replace(app.composer.signals([subscriber], DAY)[subscriber.email], received=frozenset(received))
    digest = select_digest(app.composer.pool(DAY), subscriber, day=DAY, settings=app.settings, signals=signals)
    return [item.paper for item in digest.items]


@pytest.mark.slow
def test_liking_three_papers_on_a_sub_topic_brings_more_of_it(app):
    """Grace likes three papers on kernels written by LLM agents: her next digest holds more of them than before."""
    grace = app.profiles.roster().find("grace@example.org")
    candidates = app.composer.rank(grace, DAY, limit=60)
    liked = [r.paper for r in candidates if written_by_llms(r.paper)][-3:]
    assert len(liked) == 3
    skip = {p.store_id for p in liked}
    before = sum(written_by_llms(p) for p in digest_of(app, grace, skip))
    for paper in liked:
        app.profiles.feedback(grace.email, f"#{paper.store_id}", more=True)
    after = sum(written_by_llms(p) for p in digest_of(app, grace, skip))
    assert after > before
    assert any(r.parts["feedback_share"] > 0 for r in app.composer.rank(grace, DAY))


@pytest.mark.slow
def test_disliking_one_paper_never_removes_an_interest(app):
    """Grace has liked two GPU-kernel papers; marking less the best paper of each of her interests in turn
    (each with at least two papers in its section: the seeds hold a single compiler paper) leaves every interest
    with papers that pass the floor, their relevance barely moved."""
    grace = app.profiles.roster().find("grace@example.org")
    for paper in [r.paper for r in app.composer.rank(grace, DAY) if r.section == "GPU kernels"][:2]:
        app.profiles.feedback(grace.email, f"#{paper.store_id}", more=True)
    checked = 0
    for name in [i.name for i in grace.interests]:
        ranked = app.composer.rank(grace, DAY, limit=200)
        section = [r for r in ranked if r.section == name and r.passes_floor]
        if len(section) < 2:
            continue
        checked += 1
        app.profiles.feedback(grace.email, f"#{section[0].paper.store_id}", more=False)
        after = {r.paper.store_id: r for r in app.composer.rank(grace, DAY, limit=200)}
        rest = [after[r.paper.store_id] for r in section[1:]]
        assert section[0].paper.store_id not in after or not after[section[0].paper.store_id].passes_floor
        assert sum(r.passes_floor for r in rest) >= len(rest) // 2 + 1, name
        assert np.mean([r.relevance for r in rest]) > np.mean([r.relevance for r in section[1:]]) - 0.1, name
    assert checked >= 2


@pytest.mark.slow
def test_many_clicks_dominate(app):
    """After sixteen likes of one topic, the learned model outweighs the keywords and fills the digest with the
    topic's other papers (the liked ones themselves are seen, like papers received, and do not come back). With the
    places shared among Ada's interests (the default) the topic keeps to its share and the clicks raise its papers
    within every interest's list; in one order over all interests they take the digest."""
    ada = app.profiles.roster().find("ada@example.org")
    app.settings = replace(app.settings, allocation=ONE_ORDER)
    quant = [p for p in app.store.all_papers() if about(p, "quantiz")]
    assert len(quant) >= 24
    liked, others = quant[:16], {p.store_id for p in quant[16:]}
    places = {r.paper.store_id: n for n, r in enumerate(app.composer.rank(ada, DAY, limit=500))}
    before = sum(about(r.paper, "quantiz") for r in app.composer.rank(ada, DAY))
    for paper in liked:
        app.profiles.feedback(ada.email, f"#{paper.store_id}", more=True)
    after = app.composer.rank(ada, DAY)
    assert after[0].parts["feedback_share"] > 0.6
    assert not {p.store_id for p in liked} & {r.paper.store_id for r in after}
    assert sum(about(r.paper, "quantiz") for r in after) >= max(3, before + 2)
    # (Ada has a quantization interest of her own, so the topic's papers start high: most of the others rise)
    now = {r.paper.store_id: n for n, r in enumerate(app.composer.rank(ada, DAY, limit=500))}
    assert sum(now[i] < places[i] for i in others) >= 0.8 * len(others)
    app.settings = replace(app.settings, allocation=SHARES)
    shared = app.composer.rank(ada, DAY)
    assert sum(about(r.paper, "quantiz") for r in shared) >= 3 and {r.place for r in shared} >= {"share"}


def test_model_is_stored_and_learned_again_when_clicks_change(app):
    """The learned model is kept in the store's cache, reused while the clicks are the same, replaced when not."""
    ada = app.profiles.roster().find("ada@example.org")
    papers = app.store.all_papers()
    app.profiles.feedback(ada.email, f"#{papers[0].store_id}", more=True)
    first = app.composer.signals([ada], DAY)[ada.email].model
    saved = app.store.get_cache(f"feedback-model/{ada.email}")
    assert first is not None and saved is not None
    again = app.composer.signals([ada], DAY)[ada.email].model
    assert app.store.get_cache(f"feedback-model/{ada.email}") == saved
    assert isinstance(again, FeedbackModel) and (again.weights == first.weights).all()
    app.profiles.feedback(ada.email, f"#{papers[1].store_id}", more=False)
    changed = app.composer.signals([ada], DAY)[ada.email].model
    assert changed.clicks == 2 and app.store.get_cache(f"feedback-model/{ada.email}") != saved


def test_a_send_batch_learns_each_model_as_if_alone(app):
    """A send run samples and embeds the store negatives once for all the batch's clicking subscribers: every
    model it learns is exactly the one learned for that subscriber alone (negatives that are one's liked papers
    left out for that one only)."""
    from digest.select.learn import NEGATIVES, fit, with_models, without
    from digest.select.profile import seed_papers

    negatives = app.store.sample_papers(NEGATIVES, seed=0)
    roster = app.profiles.roster()
    clickers = [roster.find(e) for e in ("grace@example.org", "ada@example.org")]
    for n, subscriber in enumerate(clickers):
        for paper in negatives[n * 3:n * 3 + 3]:  # liked papers that are also sampled negatives
            app.profiles.feedback(subscriber.email, f"#{paper.store_id}", more=True)
        app.profiles.feedback(subscriber.email, f"#{negatives[10 + n].store_id}", more=False)
    signals = app.composer.signals(clickers, DAY)

    def seeds_of(subscriber, sig):
        return [p for i in subscriber.interests for p in seed_papers(i, sig.seeds)]

    batch = with_models(signals, clickers, app.store, app.dense, seeds_of)
    vectors = app.dense.papers(negatives)
    for subscriber in clickers:
        sig = signals[subscriber.email]
        seeds = seeds_of(subscriber, sig)
        kept = without(vectors, app.dense, sig.liked, seeds)
        assert len(kept) == len(vectors) - 3  # its own liked papers are not its negatives
        alone = fit(sig.liked, sig.disliked, seeds, app.dense, kept)
        model = batch[subscriber.email].model
        assert model is not None and alone is not None
        assert np.array_equal(model.weights, alone.weights) and np.array_equal(model.direction, alone.direction)
        assert model.intercept == alone.intercept
