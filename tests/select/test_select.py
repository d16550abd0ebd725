"""Selection: relevant first, exclusions, the relevance floor, grouping, reasons, history, diversity."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import numpy as np
import pytest

from digest.models import Interest, Paper, Subscriber
from digest.select import CorpusStats, Pool, SelectSettings, rank, select_digest, tokens
from digest.select.profile import keyword_unit
from digest.select.text import stems

from ..conftest import SEEDS, background_papers

DAY = date(2026, 6, 12)
SETTINGS = SelectSettings()


# Real abstracts run to about 150 words; BM25 would overrate a keyword in a one-line abstract.
FILLER = (" We propose a method, describe its design, and evaluate it in experiments on standard benchmarks"
          " against strong baselines; results show consistent improvements, and we discuss limitations,"
          " ablations and future work in detail.") * 5


def paper(n: int, title: str, abstract: str, upvotes: int | None = None, published: date = DAY) -> Paper:
    return Paper(title=title, abstract=abstract + FILLER, upvotes=upvotes, published=published, store_id=n)


POOL = [
    paper(1, "Fused CUDA Kernels for Attention", "We write CUDA kernels that fuse attention on GPUs.", 5),
    paper(2, "A Survey of Sheep Herding", "Sheep are herded by dogs in the Scottish highlands.", 500),
    paper(3, "KV Cache Compression for LLM Serving", "We compress the KV cache to speed up LLM serving.", 3),
    paper(4, "Triton kernel autotuning", "Autotuning Triton kernels; kernel fusion helps.", 40),
    paper(5, "Autonomous Driving with CUDA kernels", "CUDA kernels for autonomous driving perception.", 90),
    paper(6, "Graph neural networks", "A model for graphs. We mention a kernel once.", 1),
    paper(7, "Serving systems", "How to schedule requests; an LLM answers them.", 2),
]
ADA = Subscriber(email="ada@example.org", max_papers=10, interests=(
    Interest("GPU kernels", ("CUDA", "kernel", "Triton", "kernel fusion")),
    Interest("LLM serving", ("KV cache", "LLM serving")),
), exclude=("autonomous driving",))


@pytest.fixture(scope="module")
def corpus() -> CorpusStats:
    """Term statistics of 300 real arXiv papers, as a store would hold, plus the test pool."""
    return CorpusStats.of([*background_papers(), *POOL])


def titles(digest) -> list[str]:
    return [item.paper.title for item in digest.items]


def test_word_forms_match():
    """Plurals match exactly (kernels/kernel, LLMs/LLM); Snowball stems link caching to cache."""
    assert tokens("Kernels LLMs") == tokens("kernel LLM")
    assert stems("caching") == stems("cache")
    assert tokens("distribution") != tokens("distributed")


def test_relevant_first_unrelated_and_excluded_dropped(corpus):
    """Matching papers are picked best first; unrelated, excluded and barely matching papers are not."""
    digest = select_digest(Pool(POOL, corpus), ADA, day=DAY, received=set(), settings=SETTINGS)
    picked = titles(digest)
    assert {POOL[0].title, POOL[2].title, POOL[3].title} <= set(picked)
    assert not {POOL[1].title, POOL[4].title, POOL[6].title} & set(picked)  # sheep, excluded, two stray words
    for section in digest.sections:
        section_scores = [i.score for i in section.items]
        assert section_scores == sorted(section_scores, reverse=True)


def test_relevance_floor_holds(corpus):
    """One passing mention of a keyword in an abstract sits near the middle of the calibrated scale:
    min_relevance 0.5 admits it, 0.7 does not, while papers matching keywords in their titles pass both."""
    ranked = {r.paper.store_id: r.relevance for r in rank(Pool(POOL, corpus), ADA, day=DAY, settings=SETTINGS,
                                                           limit=7)}
    assert 0.5 <= ranked[6] < 0.7
    assert min(ranked[1], ranked[3], ranked[4]) >= 0.8
    assert ranked[2] < 0.01  # nothing in common: near zero, never negative
    strict = select_digest(Pool(POOL, corpus), ADA, day=DAY, settings=replace(SETTINGS, min_relevance=0.7))
    assert set(titles(strict)) == {POOL[0].title, POOL[2].title, POOL[3].title}
    loose = select_digest(Pool(POOL, corpus), ADA, day=DAY, settings=SETTINGS)
    assert "Graph neural networks" in titles(loose)


def test_groups_follow_interests_with_reasons(corpus):
    """Each paper sits in its best interest's section and carries the keywords it matched."""
    digest = select_digest(Pool(POOL, corpus), ADA, day=DAY, received=set(), settings=SETTINGS)
    sections = {s.name: s for s in digest.sections}
    assert [i.paper.store_id for i in sections["LLM serving"].items] == [3]
    assert set(sections["LLM serving"].items[0].reasons) == {"KV cache", "LLM serving"}
    triton = next(i for i in sections["GPU kernels"].items if i.paper.store_id == 4)
    assert "Triton" in triton.reasons and "kernel fusion" in triton.reasons
    assert "CUDA" not in triton.reasons


def test_a_phrase_is_named_only_when_the_phrase_matched(corpus):
    """A paper with the words of a phrase but not the phrase names neither the phrase nor its stray words (no
    "in part" fragments); a paper matching one keyword whole names only the whole ones."""
    sub = Subscriber(email="s@example.org", interests=(Interest("Serving", ("LLM serving",)),))
    ranked = rank(Pool(POOL, corpus), sub, day=DAY, settings=SETTINGS, limit=3)
    reasons = {r.paper.store_id: r.reasons for r in ranked}
    assert reasons[3] == ("LLM serving",)
    assert reasons[7] == ()
    both = Subscriber(email="s@example.org", interests=(Interest("Serving", ("LLM serving", "GPU")),))
    for r in rank(Pool(POOL, corpus), both, day=DAY, settings=SETTINGS, limit=5):
        assert set(r.reasons) <= {"LLM serving", "GPU"}, r.reasons
        assert not ({"LLM", "serving"} & set(r.reasons))


def test_phrase_outranks_its_words(corpus):
    """The phrase's bigram counts: the paper with "KV cache" beats one that only says cache and KV apart."""
    pool = [paper(1, "Cache design", "A cache for KV stores is a cache."), paper(2, "Compressing the KV cache", "")]
    sub = Subscriber(email="s@example.org", interests=(Interest("KV", ("KV cache",)),))
    ranked = rank(Pool(pool, corpus), sub, day=DAY, settings=SETTINGS, limit=2)
    assert [r.paper.store_id for r in ranked] == [2, 1]
    assert keyword_unit("KV cache").weights.max() == 1.0


def test_nothing_already_received_is_repeated(corpus):
    """Papers the subscriber already received are never picked again."""
    digest = select_digest(Pool(POOL, corpus), ADA, day=DAY, received={1, 4}, settings=SETTINGS)
    assert POOL[2].title in titles(digest)
    assert not {POOL[0].title, POOL[3].title} & set(titles(digest))


def test_upvotes_break_ties_between_equal_matches(corpus):
    """Between two equally relevant papers, the one with more upvotes ranks first."""
    twins = [paper(1, "Triton kernels", "Triton.", 1), paper(2, "Triton kernels!", "Triton.", 80)]
    sub = Subscriber(email="g@example.org", interests=(Interest("K", ("Triton",)),))
    digest = select_digest(Pool(twins, corpus), sub, day=DAY, received=set(),
                           settings=replace(SETTINGS, diversity=0.0))
    assert [i.paper.store_id for i in digest.items] == [2, 1]


def test_max_papers_and_trending_profile(corpus):
    """A profile without interests gets the top papers by upvotes, capped at max_papers, minus exclusions."""
    reader = Subscriber(email="k@example.org", max_papers=3, exclude=("autonomous driving",))
    digest = select_digest(Pool(POOL, corpus), reader, day=DAY, received=set(), settings=SETTINGS)
    assert digest.trending
    assert [i.paper.store_id for i in digest.items] == [2, 4, 1]
    assert digest.items[0].reasons == ("trending: 500 upvotes",)
    four = select_digest(Pool(POOL, corpus), replace(reader, max_papers=4), day=DAY, received=set(), settings=SETTINGS)
    after = select_digest(Pool(POOL, corpus), reader, day=DAY, received={2}, settings=SETTINGS)  # received: skipped
    assert [i.paper.store_id for i in after.items] == [i.paper.store_id for i in four.items if i.paper.store_id != 2]


def test_weights_order_sections(corpus):
    """An interest's weight scales its papers' scores, so sections come out in order of strength."""
    heavy = Subscriber(email="w@example.org", interests=(
        Interest("GPU kernels", ("CUDA", "kernel", "Triton"), weight=0.1),
        Interest("LLM serving", ("KV cache", "LLM serving"), weight=5.0)))
    digest = select_digest(Pool(POOL, corpus), heavy, day=DAY, received=set(),
                           settings=replace(SETTINGS, min_relevance=0.05))
    assert digest.sections[0].name == "LLM serving"


def test_near_duplicates_do_not_fill_the_digest(corpus):
    """With diversity, four copies of one paper leave room for the other relevant ones; without, they fill it."""
    copy = "Speculative decoding with draft trees speeds up speculative decoding of LLMs."
    dups = [paper(n, f"Speculative decoding with draft trees v{n}", copy, 50) for n in range(1, 5)]
    others = [paper(5, "Speculative decoding on phones", "Speculative decoding for mobile devices, memory bound."),
              paper(6, "Verification in speculative decoding", "Lossless speculative decoding acceptance rules.")]
    sub = Subscriber(email="d@example.org", max_papers=3, interests=(Interest("SD", ("speculative decoding",)),))
    pool = Pool(dups + others, corpus)
    plain = select_digest(pool, sub, day=DAY, settings=replace(SETTINGS, diversity=0.0))
    assert {i.paper.store_id for i in plain.items} <= {1, 2, 3, 4}
    diverse = select_digest(pool, sub, day=DAY, settings=SETTINGS)
    assert len({i.paper.store_id for i in diverse.items} & {1, 2, 3, 4}) == 1


def test_limit_ignores_floor_and_marks_it(corpus):
    """`limit` returns the top N in rank order past max_papers and the floor, saying which pass it."""
    sub = replace(ADA, max_papers=1)
    ranked = rank(Pool(POOL, corpus), sub, day=DAY, settings=SETTINGS, limit=5)
    assert len(ranked) == 5 and [r.rank for r in ranked] == [1, 2, 3, 4, 5]
    assert [r.passes_floor for r in ranked] == [True, True, True, True, False]
    assert all(a.score >= b.score for a, b in zip(ranked, ranked[1:], strict=False) if b.score > 0)
    assert {"keywords", "trend", "recency", "boost"} <= set(ranked[0].parts)


def test_store_statistics_change_the_weights():
    """A keyword that is everywhere in the store counts less than a rare one, whatever today's pool holds."""
    pool = [paper(1, "Diffusion models", "diffusion"), paper(2, "Pruning", "pruning")]
    sub = Subscriber(email="x@example.org", interests=(Interest("t", ("diffusion", "pruning")),))
    common = [paper(100 + n, f"Diffusion study {n}", "diffusion model") for n in range(50)]
    stats = CorpusStats.of(common + pool)
    ranked = rank(Pool(pool, stats, background=False), sub, day=DAY, settings=SETTINGS, limit=2)
    assert [r.paper.store_id for r in ranked] == [2, 1]
    assert ranked[0].relevance > 0.8 and ranked[1].relevance < 0.5


def test_many_units_at_once_equal_one_at_a_time(corpus):
    """Scoring every keyword in one sparse product gives the same scores as one keyword at a time."""
    units = [keyword_unit(k) for k in ("CUDA", "KV cache", "kernel fusion", "sheep")]
    one = Pool(POOL, corpus).index(3.0)
    batch = Pool(POOL, corpus).index(3.0)
    batch.prepare(units)
    for unit in units:
        assert np.array_equal(batch.scores(unit), one.scores(unit))  # to the last bit: digests must not differ


def test_keywords_with_the_same_words_but_other_stems_are_other_units(corpus):
    """"poses" and "POS" share their light-stemmed word but not their stems: the index scores each as itself."""
    poses, pos = keyword_unit("poses"), keyword_unit("POS")
    assert tokens("poses") == tokens("POS") and poses.key != pos.key
    index = Pool(POOL, corpus).index(3.0)
    index.prepare([pos])
    fresh = Pool(POOL, corpus).index(3.0)
    assert np.array_equal(index.scores(poses), fresh.scores(poses))


def test_many_subscribers_at_once_agree_with_one_at_a_time(corpus):
    """The vectorised ranking of many subscribers picks the same top papers as `rank` does for each."""
    from digest.select.batch import rank_many

    subs = [ADA, Subscriber(email="b@example.org", interests=(Interest("S", ("LLM serving", "sheep"), weight=2.0),)),
            Subscriber(email="c@example.org"),
            Subscriber(email="d@example.org", interests=(Interest("D", description="Herding sheep with dogs."),))]
    pool = Pool(POOL, corpus)
    top = rank_many(pool, subs, day=DAY, settings=SETTINGS, k=3, chunk=2)
    plain = replace(SETTINGS, diversity=0.0)
    for row, sub in enumerate(subs):
        if not sub.interests:
            assert not top.passes[row].any()
            continue
        one = [r for r in rank(pool, replace(sub, exclude=()), day=DAY, settings=plain, limit=3) if r.score > 0]
        assert one  # every profile here matches something
        n = len(one)  # papers scoring 0 tie, in any order
        assert [pool.papers[i].store_id for i in top.papers[row][:n]] == [r.paper.store_id for r in one]
        assert np.allclose(top.scores[row][:n], [r.score for r in one], rtol=1e-4, atol=1e-6)
        assert list(top.passes[row][:n]) == [r.passes_floor for r in one]


def test_hashed_columns_are_scikit_learns():
    """Terms hash to the columns scikit-learn's FeatureHasher gives them (the shipped and cached statistics were
    made with it), and the stop words and unit-length rows are scikit-learn's too."""
    import random

    from sklearn.feature_extraction import FeatureHasher
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS
    from sklearn.preprocessing import normalize

    from digest.select.corpus import unit_length
    from digest.select.text import N_FEATURES, STOP_WORDS, count_matrix, hashed_columns, terms

    hasher = FeatureHasher(N_FEATURES, input_type="string", alternate_sign=False)
    texts = [f"{p.title}. {p.abstract}" for p in background_papers()]
    rng = random.Random(0)
    odd = ["", "a", "ab", "abc", "abcd", "abcde", "ü", "naïve Bayes", "日本語の論文", "x" * 101, "~stem", "kv cache",
           *("".join(chr(rng.randint(1, 0x2FFF)) for _ in range(rng.randint(0, 30))) for _ in range(2000))]
    vocabulary = list(dict.fromkeys(t for text in texts for t in terms(text))) + odd
    assert np.array_equal(hashed_columns(vocabulary), hasher.transform([[t] for t in vocabulary]).indices)
    for n in range(0, 200, 7):  # a few keys at a time go another way
        assert np.array_equal(hashed_columns(odd[n:n + 7]), hasher.transform([[t] for t in odd[n:n + 7]]).indices)
    ours, theirs = count_matrix([*texts, ""]), hasher.transform([terms(t) for t in [*texts, ""]])
    assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
    assert np.array_equal(ours.data, theirs.data)
    assert STOP_WORDS == ENGLISH_STOP_WORDS
    rows = unit_length(ours)
    expected = normalize(ours)
    assert np.array_equal(rows.indices, expected.indices) and np.array_equal(rows.data, expected.data)


def test_importing_the_selector_does_not_import_scikit_learn():
    """scikit-learn takes most of a second to import: only learning a model from clicks needs it."""
    import subprocess
    import sys

    code = "import sys, digest.select, digest.select.learn; print('sklearn' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_the_fast_stemmer_gives_the_pure_python_snowball_stems():
    """Stems come from PyStemmer (C) when it is installed, as it is by default; they must be exactly those of
    snowballstemmer's pure-Python English stemmer, which built the shipped background statistics."""
    import re

    import Stemmer
    from snowballstemmer.english_stemmer import EnglishStemmer

    from digest.select import text

    assert isinstance(text._STEMMER, Stemmer.Stemmer)
    words = sorted({w for path in SEEDS.glob("*") for w in re.findall(r"[a-z]+", path.read_text().lower())})
    assert len(words) > 3000
    pure = EnglishStemmer()
    assert [text._STEMMER.stemWord(w) for w in words] == [pure.stemWord(w) for w in words]


def test_a_few_papers_centroid_on_their_own_terms_is_the_bm25f_rows_mean():
    """`PaperTerms.centroid` (a library's words, seed papers, liked papers) is the unit-length mean of the papers'
    unit-length `bm25_weights` rows, worked out on the papers' own columns; the counts read back from their bytes
    are the same, and bytes cut short, padded or forged are refused."""
    import math

    import scipy.sparse as sp

    from digest.select.corpus import ONE_PAPER_SHARE, Fields, PaperTerms, bm25_weights, unit_length

    papers = background_papers()
    stats = CorpusStats.of(papers)
    for size, start in ((1, 0), (3, 5), (10, 20), (40, 40)):
        fields = Fields.of(papers[start:start + size])
        rows = unit_length(bm25_weights(fields, stats, 2.5))
        mean = sp.csr_matrix(rows.mean(axis=0))
        expected = mean.data / math.sqrt(float(mean.multiply(mean).sum()))
        terms = PaperTerms.of(fields)
        cols, weights = terms.centroid(stats, 2.5)
        assert np.array_equal(cols, mean.indices) and np.allclose(weights, expected, rtol=0, atol=1e-12)
        bm25 = bm25_weights(fields, stats, 2.5)  # each paper on the others' centroid (itself if alone)
        bm25 = bm25[:, np.unique(bm25.indices)].toarray()  # (the papers' own columns: the rest are zeros)
        units = unit_length(sp.csr_matrix(bm25)).toarray()
        others = [units.mean(axis=0) if size == 1 else np.delete(units, n, axis=0).mean(axis=0) for n in range(size)]
        own = np.mean([max(float(bm25[n] @ (o / np.linalg.norm(o))), 0.0) for n, o in enumerate(others)])
        own *= ONE_PAPER_SHARE if size == 1 else 1.0
        assert np.isclose(terms.centroid_and_score(stats, 2.5)[2], own, rtol=1e-9)
        again = PaperTerms.from_bytes(terms.to_bytes())
        assert all(np.array_equal(getattr(again, n), getattr(terms, n)) for n in ("cols", "indptr", "local", "title",
                                                                                   "abstract"))
    data = PaperTerms.of(Fields.of(papers[:3])).to_bytes()
    forged = bytearray(data)
    at = len(PaperTerms.MAGIC) + 24 + 4 * int.from_bytes(data[8:16], "little") + 8 * int.from_bytes(data[16:24],
                                                                                                   "little")
    forged[at:at + 4] = (10**9).to_bytes(4, "little")  # the first entry's term numbered past the papers' terms
    for broken in (b"", data[:-1], data + b"\0", b"x" + data[1:], bytes(forged)):
        with pytest.raises(ValueError):
            PaperTerms.from_bytes(broken)
    empty = PaperTerms.of(Fields.of([Paper(title="", abstract="")]))
    assert len(empty.centroid(stats, 2.5)[0]) == 0
