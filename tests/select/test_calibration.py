"""The calibrated relevance: a probability a person can set a floor on, the same across interests and stores."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from digest.app import App
from digest.config import build_config
from digest.errors import ConfigError
from digest.models import Interest, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, rank, select_digest
from digest.select.corpus import background

from ..conftest import DAY, SEEDS, background_papers

KERNEL_PAPERS = ("CUDA-L1", "CUDA-L2", "CUDA-LLM", "Making LLMs Optimize Multi-Scenario CUDA Kernels",
                 "CudaForge", "Towards Robust Agentic CUDA Kernel", "StitchCUDA")
GPU = Subscriber(email="gpu@example.org", interests=(Interest("GPU", ("GPU", "CUDA", "LLM", "inference", "training")),))


@pytest.fixture
def pages(make_config):
    """The five seed pages alone (without the API day, whose upvotes would set the scale of theirs)."""
    app = App(make_config())
    app.ingest(sorted(SEEDS.glob("*.txt")), seen_on=DAY)
    yield app
    app.close()


@pytest.mark.slow
def test_gpu_cuda_llm_profile_gets_the_kernel_papers(pages):
    """The five-keyword GPU/CUDA/LLM profile gets a full digest of the seed pages with a CUDA/LLM kernel paper
    among its first two (the papers at its top are all sure matches, ordered by their trend), and every kernel paper
    passes the floor at relevance 0.8 or more (the old BM25 floor of 12 gave it none); the rest of the digest is
    GPU papers of other kinds, which the profile's words also ask for."""
    app = pages
    digest = app.composer.compose(GPU, DAY, app.composer.pool(DAY)).digest
    titles = [item.paper.title for item in digest.items]
    assert len(titles) == 10
    assert any(title.startswith(KERNEL_PAPERS) for title in titles[:2])
    ranked = app.composer.rank(GPU, DAY, limit=500)  # every paper of the day: the claim is the floor, not a place
    kernels = [r for r in ranked if r.paper.title.startswith(KERNEL_PAPERS)]
    assert len(kernels) == len(KERNEL_PAPERS) and all(r.passes_floor and r.relevance >= 0.8 for r in kernels)


def test_relevance_is_a_probability_comparable_across_keyword_counts():
    """A paper matching two keywords of a twelve-keyword interest reads about as relevant as under the
    two-keyword interest alone (the unit is a typical keyword's score, not a sum); it stays within 0..1."""
    papers = background_papers()
    pool = Pool(papers[:150], CorpusStats.of(papers))
    short = Subscriber(email="s@example.org", interests=(Interest("3D", ("Gaussian splatting", "NeRF")),))
    long = replace(short, interests=(Interest("3D", ("Gaussian splatting", "NeRF", "auction", "malware",
                                                    "protein folding", "tax policy", "wind turbine", "sonar",
                                                    "supply chain", "glacier", "crop yield", "bird song")),))
    top_short = rank(pool, short, day=DAY, settings=SelectSettings(), limit=3)
    by_id = {r.paper.key: r for r in rank(pool, long, day=DAY, settings=SelectSettings(), limit=150)}
    for r in top_short:
        assert 0 < r.relevance < 1
        # (0.2: the shipped background counts 7,471 papers, so the ten unrelated words read rarer than in a store)
        assert by_id[r.paper.key].relevance == pytest.approx(r.relevance, abs=0.2)


def test_interest_weight_multiplies_the_odds():
    """An interest of weight 2 doubles each paper's odds of relevance, and weight 1 leaves them as they are."""
    papers = background_papers()
    pool = Pool(papers[:100], CorpusStats.of(papers))
    plain = Subscriber(email="w@example.org", interests=(Interest("V", ("video generation", "diffusion")),))
    heavy = replace(plain, interests=(replace(plain.interests[0], weight=2.0),))
    a = {r.paper.key: r.relevance for r in rank(pool, plain, day=DAY, settings=SelectSettings(), limit=5)}
    b = {r.paper.key: r.relevance for r in rank(pool, heavy, day=DAY, settings=SelectSettings(), limit=5)}
    for key, p in a.items():
        assert b[key] / (1 - b[key]) == pytest.approx(2 * p / (1 - p), rel=1e-3)


def test_background_statistics_rank_a_fresh_store_like_a_full_one():
    """With the shipped background, a store of a few papers weighs words as a large store does; without
    it, a word common in arXiv but rare in the tiny store looks distinctive."""
    papers = background_papers()
    tiny = CorpusStats.of(papers[:20])
    full = CorpusStats.of(papers)
    shipped = background()
    assert shipped.n_docs == 7_471  # the sample's papers that no benchmark pool draws from
    blended_tiny, blended_full = tiny.blended(shipped), full.blended(shipped)
    assert np.corrcoef(blended_tiny.idf(), blended_full.idf())[0, 1] > 0.99
    assert np.corrcoef(tiny.idf(), full.idf())[0, 1] < 0.9
    big = CorpusStats(full.df * 1000, full.n_docs * 1000, full.title_terms * 1000, full.abstract_terms * 1000)
    assert big.blended(shipped).n_docs < big.n_docs * 1.01  # a large store's own statistics take over


def test_background_is_small_package_data():
    """The background statistics ship inside the package, under 3 MB."""
    from importlib import resources

    data = resources.files("digest.data").joinpath("background.npz").read_bytes()
    assert len(data) < 3 * 2**20


@pytest.mark.parametrize("key, hint", [("relevance_floor", "select.min_relevance"),
                                       ("liked_weight", "select.feedback_clicks"),
                                       ("dense_weight", "select.text_model"),
                                       ("semantic_weight", "select.text_model")])
def test_removed_settings_name_their_replacement(tmp_path, key, hint):
    """A config that still sets a removed ranking setting fails at start, naming the setting to use."""
    with pytest.raises(ConfigError, match=rf"select\.{key} is no longer a setting.*{hint}"):
        build_config({"select": {key: 12.0}}, base=tmp_path)


def test_min_relevance_must_be_a_probability(tmp_path):
    """min_relevance outside 0..1 is rejected with the setting's name."""
    with pytest.raises(ConfigError, match="select.min_relevance must be at most 1"):
        build_config({"select": {"min_relevance": 12}}, base=tmp_path)


@pytest.mark.slow
def test_floor_is_read_on_the_calibrated_scale(app):
    """Raising min_relevance keeps only the papers whose relevance reaches it."""
    ada = app.profiles.roster().find("ada@example.org")
    pool = app.composer.pool(DAY)
    signals = app.composer.signals([ada], DAY)[ada.email]
    for level in (0.5, 0.9):
        digest = select_digest(pool, ada, day=DAY, settings=replace(app.settings, min_relevance=level),
                               signals=signals)
        picked = {i.paper.key for i in digest.items}
        ranked = app.composer.rank(ada, DAY, limit=300)
        assert picked and picked <= {r.paper.key for r in ranked if r.relevance >= level}
