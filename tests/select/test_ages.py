"""Honest dates: a paper published long before the digest date appears only under "Trending again", or not at all."""

from __future__ import annotations

import pytest

from digest.app import App
from digest.select.ages import AGAIN_SECTION, is_old

from ..conftest import DAY, SEEDS

# The five seed pages without the API day, whose recent papers top any trending list and mention drones.
PAGES = sorted(SEEDS.glob("*.txt"))


def compose(make_config, email: str, paths=(SEEDS,), **select):
    app = App(make_config(select=select))
    app.ingest(list(paths), seen_on=DAY)
    composed = app.composer.compose(app.profiles.roster().find(email), DAY, app.composer.pool(DAY))
    app.close()
    return composed


@pytest.mark.slow
def test_old_papers_only_in_their_own_small_section(make_config):
    """With max_age_days 30 no paper published over 30 days before the digest is among the new ones; at most
    trending_again of them follow, in the last section; the intro counts them apart."""
    composed = compose(make_config, "ada@example.org", max_age_days=30, trending_again=2)
    *new, last = composed.digest.sections
    assert last.name == AGAIN_SECTION and 0 < len(last.items) <= 2
    assert all(is_old(item.paper, DAY, 30) for item in last.items)
    assert new and not any(is_old(item.paper, DAY, 30) for section in new for item in section.items)
    assert sum(len(s.items) for s in new) + len(last.items) <= 10
    assert "older papers trending again" in " ".join(composed.rendered.text.split())
    assert AGAIN_SECTION in composed.rendered.text


@pytest.mark.slow
def test_trending_again_zero_leaves_old_papers_out_and_the_digest_full(make_config):
    """With trending_again 0 no old paper shows, and recent papers take their places (they are blocked before
    ranking, not cut after): on the seed pages, where old papers are the most upvoted."""
    shown = compose(make_config, "katherine@example.org", PAGES, max_age_days=30, trending_again=0)
    assert shown.digest.count == 10 and all(s.name != AGAIN_SECTION for s in shown.digest.sections)
    assert not any(is_old(item.paper, DAY, 30) for item in shown.digest.items)
    everything = compose(make_config, "katherine@example.org", PAGES, max_age_days=0)
    assert any(is_old(item.paper, DAY, 30) for item in everything.digest.items)  # the seed pages' old favourites


@pytest.mark.slow
def test_a_trending_profile_gets_recent_papers_and_old_ones_apart(make_config):
    """A trending-only profile gets its most upvoted recent papers, then the most upvoted old ones apart, ten in
    all (max_papers)."""
    composed = compose(make_config, "katherine@example.org", max_age_days=30, trending_again=3)
    *new, last = composed.digest.sections
    assert sum(len(s.items) for s in new) == 7 and last.name == AGAIN_SECTION and len(last.items) == 3
    votes = [item.paper.upvotes or 0 for item in last.items]
    assert votes == sorted(votes, reverse=True)


@pytest.mark.slow
def test_a_day_with_only_old_papers_on_the_topics_gets_them_as_trending_again(make_config, tmp_path):
    """Nothing recent matched (on the seed pages), old papers did: they come alone under "Trending again", said so
    in the intro and the subject, rather than no digest at all."""
    import json

    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "k.toml").write_text('email = "k@example.org"\n[[interests]]\nname = "Herding"\n'
                                   'keywords = ["sheep herding", "herding drones"]\n', encoding="utf-8")
    old = tmp_path / "old.jsonl"
    topics = ("flocks across windy hills", "lambs in crowded pens at night", "goats and cattle on open range")
    old.write_text("".join(json.dumps({"id": f"2001.0000{n}", "title": f"Sheep herding with drones, part {n}",
                                       "abstract": f"Herding drones used for sheep herding of {topic}.",
                                       "published": f"2020-01-0{n}"}) + "\n" for n, topic in enumerate(topics, 1)))
    app = App(make_config(subscribers={"dir": str(folder)}, select={"max_age_days": 30, "trending_again": 2}))
    app.ingest([*PAGES, old], seen_on=DAY)
    pool = app.composer.pool(DAY)
    composed = app.composer.compose(app.profiles.roster().find("k@example.org"), DAY, pool)
    app.close()
    [section] = composed.digest.sections
    assert section.name == AGAIN_SECTION and len(section.items) == 2
    assert all(item.paper.title.startswith("Sheep herding") for item in section.items)
    assert composed.rendered.subject.startswith("Trending again: Sheep herding")
    assert "Nothing new matched your interests today, but 2 older papers" in " ".join(composed.rendered.text.split())


@pytest.mark.slow
def test_old_papers_take_the_places_of_the_last_recent_ones(make_config):
    """The new papers of a digest with a "Trending again" section are among those it has when old papers are not
    shown at all: the old ones take places of max_papers from within it, none on top."""
    with_again = compose(make_config, "ada@example.org", max_age_days=30, trending_again=3)
    without = compose(make_config, "ada@example.org", max_age_days=30, trending_again=0)
    *new, last = with_again.digest.sections
    assert last.name == AGAIN_SECTION
    recent = {item.paper.key for section in new for item in section.items}
    assert recent < {item.paper.key for item in without.digest.items}
    assert len(recent) + len(last.items) == with_again.digest.subscriber.max_papers


@pytest.mark.slow
def test_a_send_run_and_a_preview_pick_the_same_new_and_old_papers(make_config):
    """With the age split, the batch ranking of a send run and the one-subscriber ranking of a preview agree, paper
    for paper, for varied profiles over the seed pages (most of whose dated papers are old)."""
    import random

    from digest.models import Interest, Subscriber

    rng = random.Random(5)
    words = ["LLM inference", "KV cache", "quantization", "CUDA", "diffusion", "video generation", "agent",
             "reasoning", "retrieval", "Gaussian splatting", "mixture of experts", "compiler", "FPGA", "speculative"]
    subscribers = [Subscriber(email=f"r{n}@example.org", max_papers=rng.choice((3, 5, 10)),
                              interests=(Interest("Topic", tuple(rng.sample(words, rng.randint(1, 4)))),))
                   for n in range(40)]
    batch = batch_and_single(make_config, subscribers, max_age_days=30, trending_again=2)
    agains = [d for d in batch if d.sections and d.sections[-1].name == AGAIN_SECTION]
    assert len(agains) >= 10  # the split is at work in most of them
    for digest, subscriber in zip(batch, subscribers, strict=True):
        recent = [i for s in digest.sections if s.name != AGAIN_SECTION for i in s.items]
        assert not any(is_old(i.paper, DAY, 30) for i in recent)
        assert digest.count <= subscriber.max_papers


def batch_and_single(make_config, subscribers, **select):
    """The subscribers' digests over the seed pages from a send run's batch ranking, checked to be paper for paper
    those of one-subscriber rankings (previews)."""
    app = App(make_config(select=select))
    app.ingest([SEEDS], seen_on=DAY)
    pool = app.composer.pool(DAY)
    batch = [c.digest for c in app.composer.batch(pool)(subscribers, DAY)]
    single = [app.composer.compose(s, DAY, pool).digest for s in subscribers]
    app.close()
    shown = [[(section.name, [item.paper.key for item in section.items]) for section in d.sections] for d in batch]
    assert shown == [[(section.name, [item.paper.key for item in section.items]) for section in d.sections]
                     for d in single]
    return batch
