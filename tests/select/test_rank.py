"""Ranking through the real store: feedback, descriptions, seed papers, store statistics, `--papers`."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from digest.app import App
from digest.models import Interest
from digest.select import CorpusStats

from ..conftest import DAY, FIXTURES, background_papers


def topic(paper, word: str) -> bool:
    return word in f"{paper.title} {paper.abstract}".lower()


def ranks(app: App, subscriber, limit: int = 500) -> list:
    return app.composer.rank(subscriber, DAY, limit=limit)


def mean_position(ranked, word: str, skip: set[int]) -> float:
    positions = [r.rank for r in ranked if topic(r.paper, word) and r.paper.store_id not in skip]
    return sum(positions) / len(positions)


@pytest.mark.slow
def test_more_and_less_move_the_next_ranking(app):
    """Two --more on speculative-decoding papers lift the others like them; a --less paper is never picked,
    and its topic stays in the digest."""
    ada = app.profiles.roster().find("ada@example.org")
    before = ranks(app, ada)
    liked = [r.paper for r in before if "speculative decoding" in r.paper.title.lower()][:2]
    disliked = next(r.paper for r in before if "kv cache" in r.paper.title.lower())
    marked = {p.store_id for p in liked} | {disliked.store_id}
    for paper in liked:
        app.profiles.feedback(ada.email, f"#{paper.store_id}", more=True)
    app.profiles.feedback(ada.email, disliked.arxiv_id or disliked.title, more=False)
    after = ranks(app, ada)
    assert mean_position(after, "speculative", marked) < mean_position(before, "speculative", marked)
    assert disliked.store_id not in {r.paper.store_id for r in after}
    digest = app.composer.rank(ada, DAY)
    assert any(topic(r.paper, "kv cache") for r in digest)
    assert any(r.parts["feedback_share"] > 0 for r in after)
    assert any("marked more" in reason for r in after for reason in r.reasons)


def test_latest_feedback_counts(app):
    """Marking a paper less after more leaves one vote: less."""
    paper = app.store.all_papers()[0]
    app.profiles.feedback("ada@example.org", f"#{paper.store_id}", more=True)
    app.profiles.feedback("ada@example.org", f"#{paper.store_id}", more=False)
    assert app.store.feedback_by_subscriber() == {"ada@example.org": {paper.store_id: -1}}


def test_description_alone_finds_its_papers(app):
    """An interest given only as a sentence picks papers about it (every paper above the relevance floor: below it, a
    kernel for Gaussian mixtures comes next), and names the phrase of it matched, whole."""
    grace = app.profiles.roster().find("grace@example.org")
    plain = replace(grace, interests=(Interest("3D", description="Gaussian splatting for novel view synthesis."),))
    ranked = app.composer.rank(plain, DAY, limit=5)
    picked = [r for r in ranked if r.passes_floor]
    assert len(picked) >= 4
    assert all("gaussian" in r.paper.title.lower() or "view" in r.paper.abstract.lower() for r in picked)
    assert "“Gaussian splatting”" in ranked[0].reasons
    assert not {"Gaussian", "splatting", "“Gaussian”", "“splatting”"} & set(ranked[0].reasons)
    assert ranked[0].parts["description"] > 0


@pytest.mark.slow
def test_seed_papers_pull_similar_papers_up(app):
    """A seed paper named by title (a library of one) lifts papers like it above those that only share a keyword,
    and says so."""
    ada = app.profiles.roster().find("ada@example.org")
    seed = next(p for p in app.store.all_papers() if p.title.startswith("SnapKV"))
    bare = replace(ada, interests=(Interest("Serving", ("serving",)),))
    seeded = replace(ada, interests=(Interest("Serving", ("serving",), seed_papers=(seed.title,)),))
    kv = [r.paper.store_id for r in app.composer.rank(bare, DAY, limit=10) if topic(r.paper, "kv cache")]
    kv_seeded = [r for r in app.composer.rank(seeded, DAY, limit=10) if topic(r.paper, "kv cache")]
    assert len(kv_seeded) > len(kv)
    assert any(reason.startswith("like “SnapKV") and reason.find(" in your library (") > 0 for r in kv_seeded
               for reason in r.reasons)


@pytest.mark.slow
def test_corpus_statistics_are_cached_in_the_store(make_config):
    """Term statistics are computed once, stored, and only new papers are counted on the next run."""
    app = App(make_config())
    app.ingest([FIXTURES / "arxiv_sample_head.jsonl.gz"], seen_on=DAY)
    first = app.analysis.corpus()
    assert first.n_docs == 300 and first.max_id == 300
    app.close()
    again = App(make_config())
    assert CorpusStats.from_bytes(again.store.get_cache(CorpusStats.KEY)).df.sum() == first.df.sum()
    again.ingest([FIXTURES.parent.parent / "seeds"], seen_on=DAY)
    assert again.analysis.corpus().n_docs == 300 + 197 + 30  # the seed pages' papers and the API day's
    again.close()


@pytest.mark.slow
def test_papers_file_is_ranked_with_store_statistics(app, tmp_path):
    """`rank(papers=...)` ranks exactly the given papers and maps the known ones to their store ids."""
    papers = background_papers()[:20]
    grace = app.profiles.roster().find("grace@example.org")
    ranked = app.composer.rank(grace, DAY, papers=papers, limit=30)
    assert {r.paper.title for r in ranked} == {p.title for p in papers}
    assert all(r.paper.store_id is None for r in ranked)
    snap = next(p for p in app.store.all_papers() if p.title.startswith("SnapKV"))
    mixed = app.composer.rank(grace, DAY, papers=[replace(snap, store_id=None)], limit=1)
    assert mixed[0].paper.store_id == snap.store_id


@pytest.mark.parametrize("ref", ["#1", "no such paper"])
def test_feedback_needs_a_known_subscriber_and_paper(app, ref):
    """Feedback for an unknown subscriber or paper is a usage error, and nothing is stored."""
    from digest.errors import UsageError

    with pytest.raises(UsageError):
        app.profiles.feedback("nobody@example.org" if ref == "#1" else "ada@example.org", ref, more=True)
    assert app.store.feedback_by_subscriber() == {}


@pytest.mark.slow
def test_a_librarys_own_words_count_in_its_own_unit(app, monkeypatch):
    """A library's relevance (text model on) carries its papers' words: the difference they make to each paper's
    log-odds is the library coefficient times the words' calibration of its score on the library papers' centroid
    (the one `select.text_model = false` ranks the seed papers by: the same order), read in the library's own unit
    (`corpus.PaperTerms.centroid_and_score`); the library's own papers, each on a centroid that holds it, score above
    that unit; papers sharing the library's words move up. The library's term counts are kept in the store with its
    profile: a second process reads them instead of counting them again."""
    from digest.select import Signals, dense, scores
    from digest.select.corpus import Fields, PaperTerms
    from digest.select.scores import Scores

    papers = {p.title: p for p in app.store.all_papers()}
    library = tuple(t for t in papers if t.startswith(("SnapKV", "H$_2$O", "Locret", "CSKV")))[:3]
    assert len(library) >= 2
    reader = replace(app.profiles.roster().find("ada@example.org"), interests=(Interest("KV", seed_papers=library),))
    signals = Signals(seeds={t: papers[t] for t in library})
    pool = app.composer.pool(DAY)
    hybrid = Scores(pool, reader, app.settings, signals)
    words = Scores(app.composer.pool(DAY), reader, replace(app.settings, text_model=0.0), signals).lexical_logit
    coefficient = scores.LIBRARY_FUSION[3]
    monkeypatch.setattr(scores, "LIBRARY_FUSION", (*scores.LIBRARY_FUSION[:3], 0.0))
    without = Scores(app.composer.pool(DAY), reader, app.settings, signals)
    shown = (hybrid.logits[0] > scores.NO_MATCH) & (without.logits[0] > scores.NO_MATCH)
    own = (hybrid.logits[0] - without.logits[0]) / coefficient  # max(its words' log-odds, LEXICAL_FLOOR)
    assert shown.sum() > 50 and own.max() > own.min() + 1.0  # the words tell papers apart
    above = shown & (own > scores.LEXICAL_FLOOR + 1e-9) & (words > scores.LEXICAL_FLOOR)
    assert above.sum() > 20 and np.all(np.diff(own[above][np.argsort(words[above], kind="stable")]) > -1e-9)
    mine = [n for n, p in enumerate(pool.papers) if p.title in library]
    assert len(mine) == len(library) and np.all(own[mine] > scores.CALIBRATION_A)
    kv = np.array([topic(p, "kv cache") for p in pool.papers])
    lift = hybrid.relevance - without.relevance
    assert lift[kv].mean() > lift[~kv].mean()

    key = dense.words_key(hybrid.vectors[0].library_words.key)
    kept = PaperTerms.from_bytes(app.store.get_cache(key))
    again = PaperTerms.of(Fields.of([papers[t] for t in library]))  # (the profile's order: newest first)
    assert sorted(np.add.reduceat(kept.abstract, kept.indptr[:-1]).tolist()) == sorted(
        np.add.reduceat(again.abstract, again.indptr[:-1]).tolist())
    monkeypatch.setattr(Fields, "of_texts", lambda *_: pytest.fail("counted again"))
    fresh = dense.DenseEmbedder(app.store).interests(reader.interests, lambda _: [papers[t] for t in library])
    assert fresh[0].library_words is not None and np.array_equal(fresh[0].library_words.terms.cols, kept.cols)
