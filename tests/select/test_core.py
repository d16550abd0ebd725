"""The scoring core's three paths (every paper for one reader, a batch's matrix products, stored matches) give every
reader the same digest, to the last pick, score, section and reason; so a change to one path that the others do not
share fails here."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from digest.select import Signals
from digest.select.core import PATHS, digests, plan
from digest.select.scores import ONE_ORDER

from ..conftest import DAY, SEEDS
from .test_batch import picks, subscribers
from .test_stored import day_files, readers


@pytest.fixture
def world(make_config, tmp_path):
    """An app over the seeds and a day of real arXiv papers, with readers of every style (keywords, a sentence,
    both, a library, a followed author, several interests, exclusions)."""
    from digest.app import App

    app = App(make_config())
    app.ingest([SEEDS, day_files(tmp_path, 2)[0]], seen_on=DAY)
    pool = app.composer.pool(DAY)
    authors = sorted({a for p in pool.papers for a in p.authors[:1]}) or ["Ada Lovelace"]
    library = {p.title: p for p in pool.papers[:30]}
    subs = readers(40, random.Random(7), authors, sorted(library))
    signals = {s.email: Signals(seeds=library) for s in subs}
    yield app, pool, subs, signals
    app.close()


@pytest.mark.slow
def test_every_path_gives_the_same_digests(world):
    """Readers without a learned model: `each`, `batch` and `stored` give the same digests, and the plan a send
    makes (stored matches where they serve) gives them too."""
    app, pool, subs, signals = world
    made = {path: digests(pool, subs, day=DAY, settings=app.settings, signals=signals, store=app.store, path=path)
            for path in PATHS}
    made["planned"] = digests(pool, subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
    expected = [picks(d) for d in made["each"]]
    assert sum(bool(p) for p in expected) >= 30  # most readers get papers: the comparison has something to compare
    assert len({len(s.interests) for s in subs}) >= 2 and any(i.seed_papers for s in subs for i in s.interests)
    for path, found in made.items():
        assert [picks(d) for d in found] == expected, path
    # the readers' several interests share the places: the paths agree where it changes the digest too
    one = digests(pool, subs, day=DAY, settings=replace(app.settings, allocation=ONE_ORDER), signals=signals,
                  path="each")
    assert sum(picks(a) != picks(b) for a, b in zip(one, made["each"], strict=True)) >= 5


@pytest.mark.slow
def test_readers_with_clicks_take_the_batch_and_agree_with_each(app):
    """Readers who clicked have a learned model: the plan never sends them to stored matches, and the batch path
    gives them the digest the one-reader path gives."""
    pool = app.composer.pool(DAY)
    subs, signals = subscribers(40, pool.papers, random.Random(3))
    clicked = [s for s in subs if s.interests and (signals[s.email].liked or signals[s.email].disliked)]
    assert len(clicked) >= 10
    chosen = plan(pool, subs, settings=app.settings, signals=signals, store=app.store)
    assert all(chosen.paths[s.email] == "batch" for s in clicked)
    each = digests(pool, subs, day=DAY, settings=app.settings, signals=signals, path="each")
    batch = digests(pool, subs, day=DAY, settings=app.settings, signals=signals, path="batch")
    assert [picks(d) for d in batch] == [picks(d) for d in each]


@pytest.mark.slow
def test_a_path_that_drifts_is_caught(world, monkeypatch):
    """The agreement test fails when one path scores differently: the batch path's relevance nudged for one paper
    changes some reader's digest."""
    from digest.select import batch as batch_module

    app, pool, subs, signals = world
    real = batch_module.candidates

    def drifting(*args, **kwargs):
        found = real(*args, **kwargs)
        for scored in found:
            if scored is not None and len(scored.relevance) > 1:
                scored.relevance[1] = min(1.0, scored.relevance[0] + 0.01)  # the second candidate jumps ahead
        return found

    monkeypatch.setattr("digest.select.core.candidates", drifting)
    each = digests(pool, subs, day=DAY, settings=app.settings, signals=signals, path="each")
    batch = digests(pool, subs, day=DAY, settings=app.settings, signals=signals, path="batch")
    assert [picks(d) for d in batch] != [picks(d) for d in each]
