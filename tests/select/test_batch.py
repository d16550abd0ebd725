"""The batch API a send run calls: the same digests as one subscriber at a time, candidates found for all at once."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from digest.models import Interest, Subscriber
from digest.select import Signals, select_digest, select_many

from ..conftest import DAY

WORDS = ["LLM", "inference", "KV cache", "speculative decoding", "CUDA", "kernel", "quantization", "diffusion",
         "video generation", "Gaussian splatting", "reinforcement learning", "reasoning", "agent", "robot",
         "retrieval", "benchmark", "compression", "attention", "training", "GPU", "3D", "mixture of experts"]


def subscribers(n: int, papers: list, rng: random.Random) -> tuple[list[Subscriber], dict[str, Signals]]:
    """Generated profiles (some trending-only, some with seeds, exclusions, history and feedback)."""
    subs, signals = [], {}
    for i in range(n):
        interests = tuple(Interest(f"topic {j}", tuple(rng.sample(WORDS, rng.randint(1, 4))),
                                   weight=rng.choice([0.5, 1.0, 2.0]),
                                   seed_papers=(rng.choice(papers).title,) if rng.random() < 0.2 else ())
                          for j in range(rng.randint(0, 3)))
        sub = Subscriber(email=f"s{i}@example.org", max_papers=rng.choice([3, 5, 10]), interests=interests,
                         exclude=tuple(rng.sample(["autonomous driving", "medical", "video"], rng.randint(0, 1))))
        marked = rng.sample(papers, rng.choice([0, 0, 2, 5]))
        liked = tuple(p for p in marked if rng.random() < 0.6)
        signals[sub.email] = Signals(
            received=frozenset(p.store_id for p in rng.sample(papers, rng.choice([0, 5, 30]))),
            liked=liked, disliked=tuple(p for p in marked if p not in liked),
            seeds={r: next(p for p in papers if p.title == r) for i in interests for r in i.seed_papers})
        subs.append(sub)
    return subs, signals


def picks(digest) -> list[tuple[str, int, str, tuple[str, ...]]]:
    return [(s.name, i.paper.store_id, f"{i.score:.6f}", i.reasons) for s in digest.sections for i in s.items]


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_select_many_equals_select_digest(app, seed):
    """On 60 generated subscribers, with and without feedback, history and exclusions, `select_many`
    gives each exactly the digest `select_digest` gives them one at a time."""
    rng = random.Random(seed)
    pool = app.composer.pool(DAY)
    subs, signals = subscribers(60, pool.papers, rng)
    assert sum(bool(s.liked or s.disliked) for s in signals.values()) >= 15
    batch = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals)
    assert len(batch) == len(subs)
    for sub, digest in zip(subs, batch, strict=True):
        one = select_digest(pool, sub, day=DAY, settings=app.settings, signals=signals[sub.email])
        assert picks(digest) == picks(one), sub.email
        assert digest.trending == (not sub.interests)
    assert sum(d.count for d in batch) > 100


@pytest.mark.slow
def test_a_batch_works_out_the_text_models_features_only_where_a_reason_reads_them(app, monkeypatch):
    """`select_many` leaves each reader's text-model features for later (`Scored.dense_of`), worked out when a
    reason reads them: readers who wrote a sentence ("close in meaning to your words") or listed a few papers ("like
    … in your library") get `select_digest`'s digests, reasons and all, and readers whose words explain their picks
    do not have them worked out at all."""
    from digest.select import batch as batch_module

    pool = app.composer.pool(DAY)
    rng = random.Random(9)
    described = [Subscriber(email=f"d{n}@example.org", max_papers=5,
                            interests=(Interest("said", description=f"methods in the spirit of {p.title}"),))
                 for n, p in enumerate(rng.sample(pool.papers, 8))]
    listed = [Subscriber(email=f"l{n}@example.org", max_papers=5,
                         interests=(Interest("kept", seed_papers=tuple(p.title for p in rng.sample(pool.papers, 3))),))
              for n in range(6)]
    worded, signals = subscribers(40, pool.papers, rng)
    subs = described + listed + worded
    for sub in described + listed:
        signals[sub.email] = Signals(seeds={r: next(p for p in pool.papers if p.title == r)
                                            for i in sub.interests for r in i.seed_papers})
    made = []  # the interests whose rows were worked out
    real = batch_module.dense_parts
    monkeypatch.setattr(batch_module, "dense_parts", lambda *a: made.extend(a[2]) or real(*a))
    batch = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals)
    reasons = [r for d in batch for s in d.sections for i in s.items for r in i.reasons]
    assert any(r == "close in meaning to your words" for r in reasons)
    assert any(r.startswith("like “") and r.find("” in your library (") > 0 for r in reasons)
    interests = sum(len(s.interests) for s, d in zip(subs, batch, strict=True) if d.count)
    assert 0 < len(made) < interests  # worked out for some interests, not for every interest of a reader with picks
    for sub, digest in zip(subs, batch, strict=True):
        one = select_digest(pool, sub, day=DAY, settings=app.settings, signals=signals[sub.email])
        assert picks(digest) == picks(one), sub.email


@pytest.mark.slow
def test_the_text_models_features_read_the_words_log_odds_only_for_a_library(app):
    """`dense_parts` reads the interests' words' log-odds only to weigh a library's fusion against the words': without
    them (None, as a reader's row without a library is worked out, its calibration skipped) the features of
    interests without a library are the same to the last bit, and an interest with words and a library is refused
    rather than weighed against nothing."""
    from digest.select.scores import calibrate, dense_parts

    pool = app.composer.pool(DAY)
    index = pool.index(app.settings.title_weight)
    rng = random.Random(5)
    library = tuple(rng.sample(pool.papers, 3))
    interests = [Interest("words", ("LLM", "inference")), Interest("said", description="faster attention kernels"),
                 Interest("kept", ("GPU",), seed_papers=tuple(p.title for p in library))]
    vectors = pool.dense.interests(interests, lambda i: library if i.seed_papers else ())
    assert [v.library is not None for v in vectors] == [False, False, True]
    columns = np.array(sorted(rng.sample(range(len(pool)), 40)))
    lexical = calibrate(np.random.default_rng(5).random((3, 40)) * 3, np.ones((3, 1)))
    given = dense_parts(pool, index, interests, vectors, lexical, columns)
    alone = dense_parts(pool, index, interests[:2], vectors[:2], None, columns)
    for name in ("query", "model", "neighbours", "library"):
        assert np.array_equal(getattr(alone, name), getattr(given, name)[:2]), name
    assert given.neighbours[2].any()  # (the library's row was worked out)
    with pytest.raises(ValueError, match="words' log-odds"):
        dense_parts(pool, index, interests[2:], vectors[2:], None, columns)


@pytest.mark.slow
def test_select_many_with_an_age_split_equals_select_digest(app):
    """With old papers taking their own quota ("Trending again": `max_age_days`, `trending_again`), the batch finds
    each subscriber's best recent and best old candidates apart and still gives each exactly `select_digest`'s
    digest, old papers among the picks."""
    from digest.models import is_old

    rng = random.Random(4)
    pool = app.composer.pool(DAY)
    settings = replace(app.settings, max_age_days=3.0, trending_again=2.0)
    old = sum(is_old(p, DAY, settings.max_age_days) for p in pool.papers)
    assert 0 < old < len(pool.papers)  # both kinds in the pool
    subs, signals = subscribers(60, pool.papers, rng)
    batch = select_many(pool, subs, day=DAY, settings=settings, signals=signals)
    shown_old = 0
    for sub, digest in zip(subs, batch, strict=True):
        one = select_digest(pool, sub, day=DAY, settings=settings, signals=signals[sub.email])
        assert picks(digest) == picks(one), sub.email
        shown_old += sum(is_old(i.paper, DAY, settings.max_age_days) for s in digest.sections for i in s.items)
    assert shown_old > 0 and sum(d.count for d in batch) > 100


def test_select_many_respects_the_floor_and_blocks(app):
    """A raised floor, received papers and exclusions hold in the batch as in one digest."""
    pool = app.composer.pool(DAY)
    grace = app.profiles.roster().find("grace@example.org")
    top = select_digest(pool, grace, day=DAY, settings=app.settings).items
    sig = Signals(received=frozenset({top[0].paper.store_id}))
    strict = replace(app.settings, min_relevance=0.9)
    [batch] = select_many(pool, [replace(grace, exclude=("FPGA",))], day=DAY, settings=strict,
                          signals={grace.email: sig})
    assert top[0].paper.store_id not in {i.paper.store_id for i in batch.items}
    assert all("fpga" not in f"{i.paper.title} {i.paper.abstract}".lower() for i in batch.items)
    one = select_digest(pool, replace(grace, exclude=("FPGA",)), day=DAY, settings=strict, signals=sig)
    assert picks(batch) == picks(one)


@pytest.mark.slow
def test_memory_is_trimmed_between_batches_and_picks_do_not_change(app, monkeypatch):
    """With tiny budgets every batch starts from a trimmed memo and unit table: the memo never holds more than its
    budget plus one batch's worth, and each digest is still exactly `select_digest`'s."""
    from digest.select import pool as pool_module

    monkeypatch.setattr(pool_module, "MEMO_ENTRIES", 20)
    rng = random.Random(3)
    pool = app.composer.pool(DAY)
    monkeypatch.setattr(pool_module, "MAX_UNIT_FLOATS", 5 * len(pool))  # five units' rows
    subs, signals = subscribers(60, pool.papers, rng)
    index = pool.index(app.settings.title_weight)
    sizes = []
    for first in range(0, len(subs), 10):
        part = subs[first:first + 10]
        batch = select_many(pool, part, day=DAY, settings=app.settings, signals=signals)
        sizes.append((len(index.memo), index._n_units))
        for sub, digest in zip(part, batch, strict=True):
            one = select_digest(pool, sub, day=DAY, settings=app.settings, signals=signals[sub.email])
            assert picks(digest) == picks(one), sub.email
    select_many(pool, subs[:1], day=DAY, settings=app.settings, signals=signals)
    assert len(index.memo) < max(m for m, _ in sizes)  # trimmed at the start of the last call
    assert index._n_units <= max(u for _, u in sizes)


@pytest.mark.slow
def test_similarity_of_a_large_pool_is_the_full_products_to_the_last_bit(app, monkeypatch):
    """Above SIMILARITY_MATRIX_LIMIT each digest's candidates are compared on their own renumbered terms, or read
    from the pairs a batch's candidates were held with (`hold_similarity`, up to the limit, the most repeated
    first): the values are exactly those of the pool-wide product (kept as float32 on every path), and the digests
    exactly those of a small pool's path."""
    from digest.select import pool as pool_module

    pool = app.composer.pool(DAY)
    index = pool.index(app.settings.title_weight)
    from digest.select.corpus import unit_length

    every = unit_length(index._paper_rows)  # the pool's rows scaled all at once, as the index once kept them
    assert (index.unit_length_rows(np.arange(len(pool))) != every).nnz == 0
    exact = (every @ every.T).toarray()
    full = exact.astype(np.float32)  # as kept and handed out (pool.SIMILARITY)
    rng = np.random.default_rng(5)
    assert np.array_equal(exact, exact.T)  # each pair summed in one order whichever paper is the row
    def cross(left, right):  # in float64, as summed
        return index._cross(left, right, out=np.empty((len(left), len(right))))

    for size in (0, 1, 2, 7, 40, len(pool)):
        picks_ = rng.choice(len(pool), size, replace=False)
        assert np.array_equal(cross(picks_, picks_), exact[picks_[:, None], picks_])
        assert np.array_equal(index._cross(picks_, picks_), full[picks_[:, None], picks_])
        others = rng.choice(len(pool), 9, replace=False)  # (`hold_similarity`'s blocks, a digest's papers not held)
        assert np.array_equal(cross(picks_, others), exact[picks_[:, None], others])
        assert np.array_equal(cross(others, picks_), exact[others[:, None], picks_])
    with monkeypatch.context() as patched:  # a few rows at a time; a scipy without the C routines `_cross_product` uses
        patched.setattr(pool_module, "CROSS_ROWS", 3)
        assert np.array_equal(cross(picks_, others), exact[picks_[:, None], others])
        patched.setattr(pool_module, "_sparsetools", None)
        assert np.array_equal(cross(picks_, others), exact[picks_[:, None], others])
    subs, signals = subscribers(30, pool.papers, random.Random(7))
    small = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals)
    monkeypatch.setattr(pool_module, "SIMILARITY_MATRIX_LIMIT", 10)
    large = app.composer.pool(DAY)
    assert [picks(d) for d in select_many(large, subs, day=DAY, settings=app.settings, signals=signals)] == \
        [picks(d) for d in small]
    held = large.index(app.settings.title_weight)
    assert held._held.dtype == np.float32 and pool.index(app.settings.title_weight)._similarity.dtype == np.float32
    assert len(held._members) == 10  # the batch's candidates filled what may be held
    assert np.array_equal(held._held[:10, :10], full[held._members[:, None], held._members])

    monkeypatch.setattr(pool_module, "SIMILARITY_MATRIX_LIMIT", 25)
    monkeypatch.setattr(pool_module, "CROSS_ROWS", 4)  # the new papers compared a few at a time
    index = app.composer.pool(DAY).index(app.settings.title_weight)
    index.hold_similarity(np.array([3, 3, 3, 9, 9, 1]))  # the most repeated first
    assert index._members.tolist() == [3, 9, 1]
    index.hold_similarity(np.arange(len(pool)))  # more than the room left: 22 more
    members = index._members
    assert len(members) == 25 and len(set(members.tolist())) == 25
    assert np.array_equal(index._held[:25, :25], full[members[:, None], members])
    for size in (1, 5, 12):
        inside = rng.choice(members, size, replace=False)
        assert np.array_equal(index.similarity_among(inside), full[inside[:, None], inside])
        outside = np.setdiff1d(np.arange(len(pool)), members)
        mixed = rng.permutation(np.concatenate([inside, outside[:3]]))  # held and not, in any order
        assert np.array_equal(index.similarity_among(mixed), full[mixed[:, None], mixed])
        assert np.array_equal(index.similarity_among(outside[:size]), full[outside[:size, None], outside[:size]])
    fresh = app.composer.pool(DAY).index(app.settings.title_weight)  # nothing held yet
    assert np.array_equal(fresh.similarity_among(mixed), full[mixed[:, None], mixed])


@pytest.mark.slow
def test_an_index_numbers_the_pools_columns_as_sorting_them_does(app):
    """`Index` finds the pool's hashed columns and each entry's number among them through a table over every
    hashed column: the columns np.unique gives, the numbers a binary search gives, and its lookup table the same."""
    import scipy.sparse as sp

    from digest.select.corpus import bm25_weights
    from digest.select.text import N_FEATURES

    pool = app.composer.pool(DAY)
    index = pool.index(app.settings.title_weight)
    weights = bm25_weights(pool.fields, pool.corpus, app.settings.title_weight)
    cols = np.unique(weights.indices)
    assert np.array_equal(index.cols, cols) and index.cols.dtype == cols.dtype
    rows = sp.csr_matrix((weights.data, np.searchsorted(cols, weights.indices), weights.indptr),
                         shape=(weights.shape[0], len(cols)))
    rows.sort_indices()  # (each paper's terms ascending: `Index._cross`)
    assert (index._paper_rows != rows).nnz == 0 and np.array_equal(index._paper_rows.indices, rows.indices)
    assert np.array_equal(index._paper_rows.data, rows.data)
    assert (index.matrix != rows.tocsc()).nnz == 0
    table = np.full(N_FEATURES, -1, dtype=np.int32)
    table[cols] = np.arange(len(cols))
    assert np.array_equal(index.lookup(), table)


@pytest.mark.slow
def test_memory_follows_budgets_not_the_window(app, monkeypatch):
    """What a run keeps between batches is bounded in floats and entries, whatever the pool's size: the unit
    table never grows past its budget (plus the batch in hand). Shown papers' terms are searched in the pool's
    own arrays (no set kept per paper), with the answers a set of the paper's terms gives."""
    from digest.select import pool as pool_module

    pool = app.composer.pool(DAY)
    budget = 8 * len(pool)
    monkeypatch.setattr(pool_module, "MAX_UNIT_FLOATS", budget)
    subs, signals = subscribers(80, pool.papers, random.Random(11))
    index = pool.index(app.settings.title_weight)
    compose = app.composer.batch(pool)
    most_units = 0
    for first in range(0, len(subs), 10):
        list(compose(subs[first:first + 10], DAY))
        most_units = max(most_units, index._unit_scores.size)
    per_batch = 10 * 3 * 4  # at most 3 interests of at most 4 keywords each per subscriber
    assert most_units <= budget + per_batch * len(pool)
    present = pool.fields.present()
    rng = np.random.default_rng(3)
    for i in range(len(pool)):
        own = present.indices[present.indptr[i]:present.indptr[i + 1]]
        cols = np.concatenate([rng.choice(own, min(3, len(own)), replace=False), rng.integers(0, 2**20, 4)])
        assert pool.has_terms(i, cols).tolist() == [int(c) in set(own.tolist()) for c in cols]


def test_units_scored_on_some_papers_are_the_whole_pools_values_to_the_last_bit(app):
    """`Index.scores_on` (the stored path's units and the reasons' keywords, scored on a few papers with their terms
    renumbered) gives exactly the values of the whole pool's unit table, for any subset, a unit matching nothing
    included."""
    from digest.select.profile import keyword_part

    pool = app.composer.pool(DAY)
    index = pool.index(app.settings.title_weight)
    units = [keyword_part(k).unit for k in ["LLM", "KV cache", "video generation", "zzzz nothing", "attention"]]
    rows = index.unit_rows(units)  # (may grow the table: read it after)
    full = index.unit_scores[rows]
    fresh = app.composer.pool(DAY).index(app.settings.title_weight)  # its unit table empty: the renumbered product
    rng = np.random.default_rng(1)
    for size in (1, 3, 40, len(pool)):
        papers = np.sort(rng.choice(len(pool), size, replace=False))
        assert np.array_equal(fresh.scores_on(units, papers), full[:, papers])
        assert np.array_equal(index.scores_on(units, papers), full[:, papers])  # read from the table
    assert fresh._n_units == 0
    assert np.count_nonzero(full[3]) == 0 and np.count_nonzero(full) > 20


def test_store_ids_map_to_pool_positions_as_the_dictionary_does(app):
    """`Pool.positions` (a table over the pool's store ids) answers what `index_by_id` answers, in the order asked,
    ids outside the pool (below, above, negative) left out."""
    pool = app.composer.pool(DAY)
    ids = sorted(pool.index_by_id)
    rng = random.Random(4)
    asked = [*rng.sample(ids, 5), -3, 0, ids[0] - 1, ids[-1] + 1, ids[-1] + 10**9, *rng.sample(ids, 3)]
    assert pool.positions(asked).tolist() == [pool.index_by_id[i] for i in asked if i in pool.index_by_id]
    assert pool.positions([]).tolist() == []


@pytest.mark.slow
def test_candidates_are_the_same_however_the_batch_is_chunked(app, monkeypatch):
    """`candidates` scores a batch in chunks of subscribers sized to DETAIL_FLOATS; each row is computed alone, so
    chunks of 1, 7 or the whole batch (and the default, here forced small) give the same candidates and scores; so
    do the exact products' blocks of rows, wherever they fall between the words' rows and the libraries', and
    the text model's products made for several chunks at once (PRODUCT_INTERESTS) or for each alone."""
    from digest.select import batch

    pool = app.composer.pool(DAY)
    subs, signals = subscribers(40, pool.papers, random.Random(12))

    def found(**chunking: int) -> list:
        out = batch.candidates(pool, subs, day=DAY, settings=app.settings, k=15, signals=signals, **chunking)
        return [None if c is None else (c.papers.tolist(), c.logits.tolist(), c.relevance.tolist()) for c in out]

    whole = found(chunk=len(subs))
    assert [c is not None for c in whole] == [bool(s.interests) for s in subs]  # every reader with interests
    assert sum(c is not None for c in whole) > 25
    assert found(chunk=1) == whole and found(chunk=7) == whole
    together = []
    made_together = batch._made_together
    monkeypatch.setattr(batch, "_made_together", lambda run, group: together.append(len(group))
                        or made_together(run, group))
    for most in (1, 10, 30):  # each chunk's own product; groups of a few chunks, split where they would pass it
        monkeypatch.setattr(batch, "PRODUCT_INTERESTS", most)
        together.clear()
        assert found(chunk=3) == whole
        assert (max(together) > 1) == (most > 1) and len(together) > 1, (most, together)
    monkeypatch.undo()
    monkeypatch.setattr(batch, "DETAIL_FLOATS", 1)  # the default: chunks of 8
    assert found() == whole
    from digest.select import vectors

    assert sum(bool(i.seed_papers) for s in subs for i in s.interests) >= 5  # libraries' rows follow the words'
    monkeypatch.setattr(vectors, "EXACT_BLOCK", 3 * len(pool))  # the fusion finished three rows at a time
    assert found(chunk=len(subs)) == whole


@pytest.mark.slow
def test_candidates_are_the_same_with_the_integer_kernel_or_blas(app, monkeypatch):
    """The text model's products made by onnxruntime's integer kernel (here every one, however small) or by float32
    BLAS (none by the kernel) give the same candidates, scores and digests: the same integers either way."""
    from digest.select import batch, integer

    if not integer.available():
        pytest.skip("onnxruntime's integer kernel is not exact on this processor: every product is BLAS's")
    pool = app.composer.pool(DAY)
    subs, signals = subscribers(40, pool.papers, random.Random(29))
    runs = []
    real = integer._multiply  # noqa: SLF001
    monkeypatch.setattr(integer, "_multiply", lambda *a: runs.append(1) or real(*a))

    def found(min_work: int) -> tuple[list, list]:
        monkeypatch.setattr(integer, "MIN_WORK", min_work)
        out = batch.candidates(pool, subs, day=DAY, settings=app.settings, k=15, signals=signals)
        digests = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals)
        return ([None if c is None else (c.papers.tolist(), c.logits.tolist(), c.relevance.tolist()) for c in out],
                [picks(d) for d in digests])

    blas = found(10**12)
    assert not runs
    kernel = found(0)
    assert len(runs) > 5  # the pool's products, the models' and the explanations' all ran on the kernel
    assert sum(c is not None for c in blas[0]) > 30 and sum(map(len, blas[1])) > 100
    assert kernel == blas


def test_the_kth_best_of_each_row_is_the_sorted_rows_kth_however_few_are_above_minus_infinity():
    """`_kth_best` packs a row's values above -inf before partitioning when few are: each row's k-th largest must
    be what sorting the whole row gives, for rows almost all -inf (the usual week's window), half, all of them, none,
    fewer than k, with ties and +inf, for k of 0 to the row's width (past it: -inf)."""
    from digest.select.batch import _kth_best

    rng = np.random.default_rng(11)
    for _ in range(300):
        rows, cols = int(rng.integers(1, 8)), int(rng.integers(1, 300))
        values = np.round(rng.normal(size=(rows, cols)), 1)  # (rounded: ties)
        share = rng.choice([0.0, 0.02, 0.1, 0.5, 1.0])
        values = np.where(rng.random((rows, cols)) < share, values, -np.inf)
        values[rng.random((rows, cols)) < 0.01] = np.inf
        ordered = -np.sort(-values, axis=1)
        for k in {0, 1, 2, 5, 30, cols} - {n for n in (5, 30) if n > cols}:
            expected = ordered[:, k - 1] if k else np.full(rows, np.inf)
            assert np.array_equal(_kth_best(values, k), expected), (k, share)
        assert np.array_equal(_kth_best(values, cols + 1), np.full(rows, -np.inf))


def test_the_best_of_each_kind_taken_apart_keeps_what_masking_the_other_kind_kept():
    """A batch with an age split finds each row's best recent and best old papers on those columns alone; it must keep
    exactly what `_top_near` over the whole row keeps with the other kind's papers set to -inf (rows with fewer
    papers of a kind than k, rows with nothing finite, ties, k of 0)."""
    from digest.select.batch import _top_near

    rng = np.random.default_rng(7)
    for _ in range(200):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 40))
        key = np.round(rng.normal(size=(rows, cols)), 1)  # (rounded: ties)
        sure = np.where(rng.random((rows, cols)) < 0.6, key, -np.inf)
        near = np.where(np.isfinite(sure) | (rng.random((rows, cols)) < 0.3), key, -np.inf)
        old = rng.random(cols) < rng.random()
        for k in (0, 1, 3, 10, 50):
            k = min(k, cols)
            for kind, wanted in ((~old, k), (old, min(2, cols))):
                masked = _top_near(np.where(kind, sure, -np.inf), np.where(kind, near, -np.inf), wanted)
                apart = np.zeros((rows, cols), dtype=bool)
                apart[:, kind] = _top_near(sure[:, kind], near[:, kind], wanted)
                assert np.array_equal(masked, apart), (k, kind)


def test_a_batchs_split_of_recent_and_old_candidates_keeps_what_each_kind_apart_keeps():
    """`_top_split` (what a batch keeps of each row: the best recent papers and, apart, the best old ones) keeps
    what `_top_near` keeps on each kind's columns alone, whichever way it takes (no old paper, a few, most, all):
    ties, rows with nothing finite, k of 0, k past the row."""
    from digest.select import SelectSettings
    from digest.select.batch import _top_near, _top_split
    from digest.select.rank import candidate_window

    settings = SelectSettings()
    rng = np.random.default_rng(11)
    ways = set()
    for _ in range(400):
        rows, cols = int(rng.integers(1, 6)), int(rng.integers(1, 60))
        key = np.round(rng.normal(size=(rows, cols)), 1)  # (rounded: ties)
        sure = np.where(rng.random((rows, cols)) < 0.6, key, -np.inf)
        near = np.where(np.isfinite(sure) | (rng.random((rows, cols)) < 0.3), key, -np.inf)
        old = rng.random(cols) < rng.choice([0.0, 0.05, 0.2, 0.6, 1.0])
        ways.add(0 if not old.any() else 1 if 4 * old.sum() <= cols else 2)
        for k in (0, 1, 3, 10, 80):
            apart = np.zeros((rows, cols), dtype=bool)
            for kind, wanted in ((~old, k), (old, min(candidate_window(int(settings.trending_again)), cols))):
                apart[:, kind] = _top_near(sure[:, kind], near[:, kind], wanted)
            assert np.array_equal(_top_split(sure.copy(), near.copy(), k, old, settings), apart), (k, old.sum())
        assert np.array_equal(_top_split(sure.copy(), near.copy(), 5, None, settings), _top_near(sure, near, 5))
    assert ways == {0, 1, 2}  # every path taken


def test_each_subscribers_best_interest_value_is_the_largest_of_their_rows_and_the_first_on_ties():
    """`_best` (the ranking's per-subscriber best log-odds) takes the same values as `_best_interest`, which also says
    which interest gives them, and as a plain max over each subscriber's rows: ties, -inf, zeros of either sign (equal
    as values: which sign a tie of zeros keeps is np.maximum's affair, and the digest only adds to, compares and
    squashes the value), one to five interests a subscriber in any order."""
    from digest.select.batch import _best, _best_interest

    rng = np.random.default_rng(11)
    for _ in range(100):
        counts = rng.integers(1, 6, size=int(rng.integers(1, 30)))
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        values = np.round(rng.normal(size=(int(counts.sum()), int(rng.integers(1, 50)))), 1)
        values[rng.random(values.shape) < 0.2] = -np.inf
        values[rng.random(values.shape) < 0.1] = -0.0
        found = _best(values, first, counts)
        expected = np.array([values[a:a + c].max(axis=0) for a, c in zip(first, counts, strict=True)])
        assert np.array_equal(found, expected)
        assert np.array_equal(found, _best_interest(values, first, counts)[0])


@pytest.mark.slow
def test_rank_many_prepares_the_next_chunk_on_a_thread_of_its_own_in_order(app, monkeypatch):
    """With several chunks, `rank_many` prepares each chunk (profiles read, scores, models) on one other thread,
    chunk after chunk in order, and gives the top 10s of one chunk prepared where it is scored; a failed read
    reaches the caller and leaves no thread behind. A send's `candidates` prepares on its own thread."""
    import threading

    from digest.select import batch

    pool = app.composer.pool(DAY)
    subs, signals = subscribers(40, pool.papers, random.Random(12))
    real = batch._Plan.vectors
    reads: list[tuple[str, int, int]] = []

    def spied(self, pool, lo, hi):
        reads.append((threading.current_thread().name, lo, hi))
        return real(self, pool, lo, hi)

    monkeypatch.setattr(batch._Plan, "vectors", spied)

    def top(chunk: int) -> tuple:
        found = batch.rank_many(pool, subs, day=DAY, settings=app.settings, chunk=chunk, signals=signals)
        return found.papers.tolist(), found.scores.tolist(), found.passes.tolist()

    whole = top(len(subs))
    assert [name for name, _, _ in reads] == [threading.current_thread().name]  # one chunk: nothing to do ahead
    reads.clear()
    assert top(6) == whole
    assert len(reads) >= 5 and all(name.startswith("profiles") for name, _, _ in reads)
    assert [lo for _, lo, _ in reads] == sorted(lo for _, lo, _ in reads)
    assert all(hi == next_lo for (_, _, hi), (_, next_lo, _) in zip(reads, reads[1:], strict=False))  # each once
    reads.clear()
    batch.candidates(pool, subs, day=DAY, settings=app.settings, k=15, signals=signals, chunk=6)
    assert len(reads) >= 5 and {name for name, _, _ in reads} == {threading.current_thread().name}

    def failing(self, pool, lo, hi):
        if lo > 0:
            raise OSError("the store went away")
        return real(self, pool, lo, hi)

    monkeypatch.setattr(batch._Plan, "vectors", failing)
    with pytest.raises(OSError, match="went away"):
        top(6)
    assert not [t for t in threading.enumerate() if t.name.startswith("profiles")]


@pytest.mark.slow
def test_with_an_in_memory_store_rank_many_reads_where_the_chunk_is_scored(app, monkeypatch, tmp_path):
    """An in-memory SQLite store is a database of its own on each thread's connection, so with one the profiles
    are read on the scoring thread (a thread of their own would find an empty store); the top 10s are the same
    either way."""
    import threading

    from digest.select import batch
    from digest.store import Store

    pool = app.composer.pool(DAY)
    subs, signals = subscribers(30, pool.papers, random.Random(5))

    def top() -> tuple:
        found = batch.rank_many(pool, subs, day=DAY, settings=app.settings, chunk=6, signals=signals)
        return found.papers.tolist(), found.scores.tolist()

    memory, on_disk = Store("sqlite://"), Store(f"sqlite:///{tmp_path}/profiles.db")
    assert not memory.shared_by_threads and on_disk.shared_by_threads
    real = batch._Plan.vectors
    threads: set[str] = set()

    def spied(self, pool, lo, hi):
        threads.add(threading.current_thread().name)
        return real(self, pool, lo, hi)

    monkeypatch.setattr(batch._Plan, "vectors", spied)
    monkeypatch.setattr(pool.dense, "_profiles", type(pool.dense._profiles)())  # nothing remembered: the store is read
    monkeypatch.setattr(pool.dense, "store", on_disk)
    made = top()
    assert threads and all(name.startswith("profiles") for name in threads)
    threads.clear()
    pool.dense._profiles.clear()
    monkeypatch.setattr(pool.dense, "store", memory)
    assert top() == made
    assert threads == {threading.current_thread().name}


def test_blas_keeps_one_core_fewer_while_chunks_are_prepared_beside_it():
    """While a thread prepares chunks beside the scoring, BLAS keeps to one core fewer than the process may use, at
    least one thread and never more than it had; afterwards it has what it had."""
    import os

    from threadpoolctl import threadpool_info, threadpool_limits

    from digest.select import batch

    def blas() -> int:
        return min(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    cores = len(os.sched_getaffinity(0))
    with threadpool_limits(limits=cores, user_api="blas"):
        with batch._one_core_fewer():
            assert blas() == max(1, cores - 1)
        assert blas() == cores
    with threadpool_limits(limits=1, user_api="blas"), batch._one_core_fewer():
        assert blas() == 1  # a send's worker: one thread, not raised
