"""The per-subscriber model learned from clicks: more of what was liked, never a whole interest lost to one dislike."""

from __future__ import annotations

from digest.select.learn import FeedbackModel

from .conftest import DAY


def about(paper, word: str) -> bool:
    return word in f"{paper.title} {paper.abstract}".lower()


def written_by_llms(paper) -> bool:
    return "kernel" in paper.title.lower() and (about(paper, "llm") or about(paper, "agent"))


def test_liking_three_papers_on_a_sub_topic_brings_more_of_it(app):
    """Grace likes three papers on kernels written by LLM agents: the next digest holds more of them than before."""
    grace = app.roster().find("grace@example.org")
    before = app.rank(grace, DAY)
    candidates = app.rank(grace, DAY, limit=60)
    liked = [r.paper for r in candidates if written_by_llms(r.paper)][-3:]
    assert len(liked) == 3
    for paper in liked:
        app.feedback(grace.email, f"#{paper.store_id}", more=True)
    after = app.rank(grace, DAY)
    skip = {p.store_id for p in liked}
    count = [sum(written_by_llms(r.paper) for r in ranked if r.paper.store_id not in skip)
             for ranked in (before, after)]
    assert count[1] > count[0]
    assert any(r.parts["feedback_share"] > 0 for r in after)


def test_disliking_one_paper_never_removes_an_interest(app):
    """Marking less the best paper of each of Grace's interests in turn leaves every interest in her digest."""
    grace = app.roster().find("grace@example.org")
    sections = {r.section for r in app.rank(grace, DAY)}
    assert len(sections) >= 2
    for section in sorted(sections):
        top = next(r for r in app.rank(grace, DAY) if r.section == section)
        app.feedback(grace.email, f"#{top.paper.store_id}", more=False)
        after = app.rank(grace, DAY)
        assert section in {r.section for r in after}
        assert top.paper.store_id not in {r.paper.store_id for r in after}


def test_many_clicks_dominate(app):
    """After twenty likes of one topic, the learned model outweighs the keywords and fills the digest with it."""
    ada = app.roster().find("ada@example.org")
    quant = [p for p in app.store.all_papers() if about(p, "quantiz")]
    assert len(quant) >= 12
    for paper in quant[:20]:
        app.feedback(ada.email, f"#{paper.store_id}", more=True)
    after = app.rank(ada, DAY)
    assert after[0].parts["feedback_share"] > 0.6
    assert sum(about(r.paper, "quantiz") for r in after) >= 6


def test_model_is_stored_and_learned_again_when_clicks_change(app):
    """The learned model is kept in the store's cache, reused while the clicks are the same, replaced when not."""
    ada = app.roster().find("ada@example.org")
    papers = app.store.all_papers()
    app.feedback(ada.email, f"#{papers[0].store_id}", more=True)
    first = app.signals([ada], DAY)[ada.email].model
    saved = app.store.get_cache(f"feedback-model/{ada.email}")
    assert first is not None and saved is not None
    again = app.signals([ada], DAY)[ada.email].model
    assert app.store.get_cache(f"feedback-model/{ada.email}") == saved
    assert isinstance(again, FeedbackModel) and (again.cols == first.cols).all()
    app.feedback(ada.email, f"#{papers[1].store_id}", more=False)
    changed = app.signals([ada], DAY)[ada.email].model
    assert changed.clicks == 2 and app.store.get_cache(f"feedback-model/{ada.email}") != saved
