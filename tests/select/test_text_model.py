"""The built-in text model and the vectors made from it: shipped with its provenance, loaded with no network,
embedding each paper once, and scoring exactly the same in a batch as alone."""

from __future__ import annotations

import hashlib
import json
import socket

import numpy as np
import pytest

from digest.select import vectors
from digest.select.neural import DIM, MODEL_NAME, TextModel, load, model_dir

from ..conftest import DAY, SEEDS


def test_the_shipped_model_is_the_one_its_provenance_names():
    """The model and tokenizer files' SHA-256 are those provenance.json records (made from weights whose digest is
    the Hub's), and the licence ships beside them."""
    folder = model_dir()
    provenance = json.loads((folder / "provenance.json").read_text())
    for name, digest in provenance["built"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert provenance["source"]["sha256"]["model.safetensors"].startswith("53aa5117")
    assert "Apache License 2.0" in (folder / "LICENSE").read_text()


def test_the_model_loads_and_embeds_with_no_network(monkeypatch):
    """Loading and embedding never open a connection (a socket would raise here), and give unit vectors."""
    def refuse(*args, **kwargs):
        raise AssertionError("the text model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    model = TextModel(threads=1)
    found = model.embed(["speculative decoding for LLM serving", "Gaussian splatting for 3D scenes"])
    assert found.shape == (2, DIM) and found.dtype == np.float32
    assert np.allclose(np.linalg.norm(found, axis=1), 1.0, atol=1e-3)


def test_close_texts_are_closer_than_unrelated_ones():
    """Two phrasings of one topic are closer to each other than to another topic, however the batch is made."""
    model = load()
    texts = ["Speeding up large language model inference with speculative decoding.",
             "Draft models propose tokens that the target LLM verifies in parallel to cut decoding latency.",
             "A survey of coral reef fish populations in the Red Sea."]
    together = model.embed(texts)
    alone = np.vstack([TextModel(threads=1).embed([t]) for t in texts])
    assert np.allclose(together, alone, atol=1e-5)  # padding to the batch's longest text changes nothing
    sims = together @ together.T
    assert sims[0, 1] > sims[0, 2] + 0.3


@pytest.mark.slow
def test_an_ingest_embeds_each_paper_once_and_keeps_it(tmp_path, monkeypatch):
    """Ingesting the sample into a new store stores one vector per distinct paper (the seed pages' 197 and the API
    day's 30); ingesting it again embeds nothing."""
    from digest.app import App
    from digest.config import build_config

    app = App(build_config({"store": {"url": "sqlite:///fresh.db"}}, base=tmp_path))  # (not primed: a cold store)
    calls: list[int] = []
    original = TextModel._embed

    def counting(self, texts, batch, progress):
        calls.append(len(texts))
        return original(self, texts, batch, progress)

    monkeypatch.setattr(TextModel, "_embed", counting)
    load()._memo.clear()  # (earlier tests of this process embedded the seeds already)
    app.ingest([SEEDS], seen_on=DAY)
    keys = [p.key for p in app.store.all_papers()]
    assert len(app.store.embeddings(keys, MODEL_NAME)) == len(keys) == 197 + 30
    assert sum(calls) == 197 + 30
    load()._memo.clear()
    app.ingest([SEEDS], seen_on=DAY)
    assert sum(calls) == 197 + 30
    app.close()


def test_a_profile_is_stored_as_it_is_used():
    """A profile read back from its bytes is the profile that was made, to the last bit (so a preview made right
    after an import ranks as the send that reads it from the store)."""
    model = load()
    text = vectors.text_profile(model.embed(["KV cache compression, quantization"])[0])
    library = vectors.library_profile(model.embed(["a paper on kernels", "another on compilers", "a third"]))
    for profile in (text, library):
        again = vectors.DenseProfile.from_bytes(profile.to_bytes())
        for name in ("query", "weights", "centre", "neighbours"):
            assert np.array_equal(getattr(again, name), getattr(profile, name)), name
        assert (again.kind, again.query_stats, again.bias, again.model_stats, again.centre_stats) == \
            (profile.kind, profile.query_stats, profile.bias, profile.model_stats, profile.centre_stats)
    with pytest.raises(ValueError):
        vectors.DenseProfile.from_bytes(b"text    " + b"\x00" * 20)



def test_profiles_made_together_are_each_made_alone():
    """An import makes its interests' profiles a block at a time (`text_profiles`): each is the profile of its text
    made alone, to the last bit, whatever else shares its block and wherever it sits in it; and its model learns
    from the reference papers nearest its query."""
    model = load()
    texts = ["KV cache compression", "protein folding with diffusion", "speech enhancement", "graph neural networks",
             "KV cache compression", "robot grasping from demonstrations"]
    raw = model.embed(texts)
    together = vectors.text_profiles(raw)
    shuffled = vectors.text_profiles(raw[::-1])[::-1]
    for made in (together, shuffled):
        for profile, vector in zip(made, raw, strict=True):
            alone = vectors.text_profile(vector)
            assert np.array_equal(profile.query, alone.query) and np.array_equal(profile.weights, alone.weights)
            assert (profile.bias, profile.query_stats, profile.model_stats) == (alone.bias, alone.query_stats,
                                                                                alone.model_stats)
    rows = vectors.reference().centred
    closeness = rows.astype(np.float64) @ together[0].query.astype(np.float64)
    nearest = np.argsort(-closeness)[:vectors.PSEUDO_POSITIVES]
    weights, _ = vectors._fit(rows[np.sort(nearest)], vectors.TEXT_RIDGE)  # noqa: SLF001
    assert np.array_equal(vectors._half(weights), together[0].weights)  # noqa: SLF001


def test_the_reference_rows_are_centred_as_any_other_vector():
    """The shipped rows, centred in place when loaded, are the file's rows minus its mean over their norms, to the
    last bit (the expression `centred()` was before it worked in place), and `centred()` gives the same."""
    from importlib import resources

    with resources.files("digest.data").joinpath("reference.npz").open("rb") as f, np.load(f) as saved:
        rows, mean = saved["vectors"].astype(np.float32), saved["mean"].astype(np.float32)
    loaded = vectors.reference()
    shifted = rows - mean
    norms = np.linalg.norm(shifted, axis=-1, keepdims=True)
    expected = shifted / np.where(norms > 0, norms, 1.0)
    assert np.array_equal(loaded.mean, mean) and expected.dtype == np.float32
    assert np.array_equal(loaded.centred, expected)
    assert np.array_equal(vectors.centred(rows[:50]), expected[:50]) and not np.shares_memory(loaded.centred, rows)


def test_a_profiles_statistics_are_those_of_its_scores_over_the_reference_papers():
    """Each score's mean and spread, worked out from the reference papers' mean and covariance, are what the score
    gives over the 7,471 rows themselves (a wrong covariance or a bias left out fails it)."""
    model = load()
    rows = vectors.reference().centred.astype(np.float64)
    assert len(rows) == 7471
    text = vectors.text_profile(model.embed(["KV cache compression, quantization"])[0])
    library = vectors.library_profile(model.embed(["a paper on kernels", "another on compilers", "a third"]))
    for profile in (text, library):
        scores = {"query_stats": rows @ profile.query, "model_stats": rows @ profile.weights + profile.bias}
        if profile.kind == "library":
            scores["centre_stats"] = rows @ profile.centre
        for name, values in scores.items():
            mean, spread = getattr(profile, name)
            assert abs(mean - values.mean()) < 1e-9 * max(1.0, abs(values.mean())) + 1e-9 * values.std(), name
            assert abs(spread - 1e-6 - values.std()) < 1e-9 * values.std(), name


def test_profiles_read_together_are_each_read_alone():
    """A send decodes its chunk's stored profiles together: each is what `from_bytes` reads alone, to the last bit,
    and a broken one among them is an error of its own (the others are read)."""
    model = load()
    texts = [vectors.text_profile(v) for v in model.embed(["KV cache compression", "protein folding", "speech"])]
    library = vectors.library_profile(model.embed(["a paper on kernels", "another on compilers", "a third"]))
    good = [p.to_bytes() for p in texts]
    rows_forged = bytearray(good[1])
    rows_forged[8 + 7 * 8:8 + 8 * 8] = np.array([3.0], dtype="<f8").tobytes()  # says it has rows, has none
    stored = [good[0], library.to_bytes(), b"text    " + b"\x00" * 20, good[1], bytes(rows_forged),
              b"\xff" * len(good[2]), good[2]]
    found = vectors.profiles_from_bytes(stored)
    assert [type(f).__name__ for f in found] == ["DenseProfile", "DenseProfile", "ValueError", "DenseProfile",
                                                 "ValueError", "ValueError", "DenseProfile"]
    for data, again in zip(stored, found, strict=True):
        if isinstance(again, ValueError):
            with pytest.raises(ValueError):
                vectors.DenseProfile.from_bytes(data)
            continue
        alone = vectors.DenseProfile.from_bytes(data)
        for name in ("query", "weights", "centre", "neighbours"):
            assert getattr(again, name).dtype == getattr(alone, name).dtype, name
            assert np.array_equal(getattr(again, name), getattr(alone, name)), name
        assert (again.kind, again.query_stats, again.bias, again.model_stats, again.centre_stats) == \
            (alone.kind, alone.query_stats, alone.bias, alone.model_stats, alone.centre_stats)
        assert again.fused(0.6, 0.4, 0.0)[1:] == alone.fused(0.6, 0.4, 0.0)[1:]
        assert np.array_equal(again.fused(0.6, 0.4, 0.0)[0], alone.fused(0.6, 0.4, 0.0)[0])

def test_more_interests_than_memory_keeps_are_all_answered(tmp_path, monkeypatch):
    """A send asks for more interests than the in-memory profiles may hold: every one is answered (from memory,
    the store or made now), and memory stays within its bound (the oldest forgotten, read from the store again)."""
    from digest.models import Interest
    from digest.select import dense
    from digest.store import Store

    monkeypatch.setattr(dense, "MEMO_PROFILES", 3)
    embedder = dense.DenseEmbedder(Store(f"sqlite:///{tmp_path}/d.db"))
    interests = [Interest(f"t{n}", (f"topic number {n}",)) for n in range(6)]
    first = embedder.interests(interests[:2])  # two in memory, then asked with four others
    found = embedder.interests(interests)
    assert [v.text is not None for v in found] == [True] * 6 and len(embedder._profiles) <= 3  # noqa: SLF001
    assert found[0].text is first[0].text and found[1].text is first[1].text
    again = dense.DenseEmbedder(embedder.store).interests(interests)  # every profile was kept in the store
    assert all(np.array_equal(a.text.weights, b.text.weights) for a, b in zip(found, again, strict=True))


def test_papers_beyond_the_memory_bound_are_read_back_not_embedded_again(tmp_path, monkeypatch):
    """The embedder keeps at most MEMO_PAPERS papers' embeddings in memory (a daemon would otherwise keep every
    day's); the others come back from the store, the same vectors, without running the model again."""
    from digest.models import Paper
    from digest.select import dense
    from digest.store import Store

    monkeypatch.setattr(dense, "MEMO_PAPERS", 2)
    embedder = dense.DenseEmbedder(Store(f"sqlite:///{tmp_path}/d.db"))
    papers = [Paper(title=f"A study of topic {n}", abstract=f"We look at topic {n} closely.", url=f"https://x/{n}")
              for n in range(5)]
    first = embedder.papers(papers)
    assert len(embedder._papers) == 2  # noqa: SLF001
    monkeypatch.setattr(embedder, "_encode", lambda *a, **k: pytest.fail("embedded again"))
    again = embedder.papers(papers)
    assert np.array_equal(first, again) and len(embedder._papers) == 2  # noqa: SLF001


def test_exact_products_do_not_depend_on_the_batch():
    """`exact_dot` of a row with the papers is the same to the last bit alone and inside any batch of rows."""
    rng = np.random.default_rng(0)
    papers = vectors.codes(rng.normal(size=(300, DIM)))
    rows = rng.normal(size=(257, DIM))
    batch = vectors.exact_dot(vectors.codes(rows), papers)
    for n in (0, 1, 100, 256):
        assert np.array_equal(vectors.exact_dot(vectors.codes(rows[n]), papers)[0], batch[n])
    full = rows @ vectors.codes(rng.normal(size=(300, DIM)))[0].T
    assert full.shape == batch.shape  # (the codes stand for the rows: their product is close to the plain one)
    plain = rows @ (papers[0] * papers[1][:, None]).T
    assert np.abs(batch - plain).max() < 0.02 * np.abs(plain).max()


def test_directions_made_together_are_each_profiles_own():
    """A chunk's fused directions are made in one set of array operations (`fused_rows`): each the same to the last
    bit as its profile's own `fused` (codes, scale, constant), text and library profiles and any weights mixed, and
    what one call made the other finds (kept in the profile)."""
    model = load()
    texts = [vectors.text_profile(v) for v in model.embed(["KV cache compression", "protein folding with diffusion",
                                                           "causal inference in econometrics"])]
    library = vectors.library_profile(model.embed(["a paper on kernels", "another on compilers", "a third"]))
    rng = np.random.default_rng(5)
    wanted = [(texts[0], (1.2, 0.7, 0.0)), (library, (0.0, 1.263, -0.114)), (texts[1], (0.9, 1.1, 0.0)),
              (texts[2], (1.2, 0.7, 0.0))]
    wanted += [(profile, tuple(rng.normal(size=3).tolist())) for profile in (*texts, library) for _ in range(10)]
    rows, scales, consts = vectors.fused_rows(wanted)
    for n, (profile, weights) in enumerate(wanted):
        fresh = vectors.DenseProfile.from_bytes(profile.to_bytes())  # (no memo: made alone)
        alone, scale, const = fresh.fused(*weights)
        assert np.array_equal(rows[n], alone.astype(np.float32)) and scales[n] == scale and consts[n] == const
        assert profile.fused(*weights)[1] == scale  # kept: the profile's own call finds it
    again = vectors.fused_rows(wanted)  # (all kept now)
    assert all(np.array_equal(a, b) for a, b in zip(again, (rows, scales, consts), strict=True))


def test_explanations_z_scores_are_made_from_codes_kept_with_the_profile(monkeypatch):
    """A send explains an interest's papers in every digest that has it: the profile's own codes are made once and
    kept (as int8), and its z-scores are those of the codes made afresh, to the last bit, for text and library
    profiles alike."""
    model = load()
    profiles = [vectors.text_profile(model.embed(["KV cache compression"])[0]),
                vectors.library_profile(model.embed(["a paper on kernels", "another on compilers", "a third"]))]
    rng = np.random.default_rng(9)
    papers = vectors.codes(rng.normal(size=(40, DIM)))
    made = []
    real = vectors.codes
    monkeypatch.setattr(vectors, "codes", lambda rows: made.append(1) or real(rows))
    for profile in profiles:
        made.clear()
        first = profile.z_scores(papers)
        again = profile.z_scores(papers)
        assert len(made) == 1  # kept after the first call
        fresh = real(np.vstack([profile.query, profile.weights, profile.centre]))
        found = vectors.exact_dot(papers, fresh)
        qm, qs = profile.query_stats
        assert np.array_equal(first[0], (found[:, 0] - qm) / qs)
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_calibration_is_its_formula_to_the_last_bit():
    """`calibrate` (worked in place) is a + b log(max(raw, 0) / unit) + log(weight), at least NO_MATCH, bit for bit,
    for columns of units and weights, a scalar unit, and a weight that widens the result."""
    from digest.select.scores import CALIBRATION_A, CALIBRATION_B, NO_MATCH, calibrate

    rng = np.random.default_rng(3)
    raw = np.where(rng.random((40, 200)) < 0.4, 0.0, rng.gamma(1.0, 2.0, (40, 200)))
    unit, weight = rng.random((40, 1)) + 0.5, rng.random((40, 1)) + 0.5

    def formula(raw, unit, weight=1.0):  # type: ignore[no-untyped-def]
        with np.errstate(divide="ignore"):
            return np.maximum(CALIBRATION_A + CALIBRATION_B * np.log(np.maximum(raw, 0.0) / unit) + np.log(weight),
                              NO_MATCH)

    assert np.array_equal(calibrate(raw, unit, weight), formula(raw, unit, weight))
    assert np.array_equal(calibrate(raw, unit), formula(raw, unit))
    assert np.array_equal(calibrate(raw[0], 2.0), formula(raw[0], 2.0))
    assert np.array_equal(calibrate(raw[0], 2.0, weight), formula(raw[0], 2.0, weight))  # (40, 200)
    assert calibrate(raw[0], 2.0, weight).shape == (40, 200)

    # a chunk's size: calibrated a block of rows at a time (the last block short), each bit as the whole's
    big = np.where(rng.random((1_500, 1_000)) < 0.45, -rng.random((1_500, 1_000)), rng.gamma(1.0, 2.0, (1_500, 1_000)))
    big[::7, ::3] = -0.0
    big[::11, ::5] = 5e-324  # (below the smallest normal float: no match is taken up to it, these too)
    big[1, :3] = np.nan, np.inf, 1e-300
    units, weights = rng.random((1_500, 1)) + 0.5, rng.random((1_500, 1)) + 0.5
    huge = weights.copy()
    huge[3] = np.inf  # (log(weight) lifts the smallest float above the floor: no match is NaN, as the formula says)
    for args in ((units, weights), (units,), (2.0, weights), (2.0,), (units, huge), (units, 1e300)):
        with np.errstate(invalid="ignore"):  # (inf - inf, where the weight is infinite)
            assert calibrate(big, *args).tobytes() == formula(big, *args).tobytes()
    small = big[:300].astype(np.float32)  # (not float64: the formula as written, in its own dtype)
    assert calibrate(small, 2.0).dtype == formula(small, 2.0).dtype
    assert calibrate(small, 2.0).tobytes() == formula(small, 2.0).tobytes()


def test_a_profile_does_not_depend_on_the_store_or_the_day():
    """An interest's profile is made from its words and the shipped reference papers alone: made twice, the same."""
    model = load()
    first = vectors.text_profile(model.embed(["robot grasping"])[0])
    second = vectors.text_profile(model.embed(["robot grasping"])[0])
    assert np.array_equal(first.weights, second.weights) and first.model_stats == second.model_stats


def test_many_libraries_profiles_are_read_from_the_store_in_one_query(tmp_path, monkeypatch):
    """A batch of readers with libraries of their own: their stored profiles and words come back in one read of the
    store's cache, not one a library, and are the profiles that were made."""
    from digest.models import Interest, Paper
    from digest.select import dense
    from digest.store import Store

    store = Store(f"sqlite:///{tmp_path}/d.db")
    papers = [Paper(title=f"A study of topic {n}", abstract=f"We look at topic {n} closely.", url=f"https://x/{n}")
              for n in range(12)]
    interests = [Interest(f"lib{n}", seed_papers=(papers[n].title, papers[n + 1].title)) for n in range(0, 12, 2)]

    def seeds(interest):
        return [p for p in papers if p.title in interest.seed_papers]

    made = dense.DenseEmbedder(store).interests(interests, seeds)
    reads: list[int] = []
    real = store.get_caches
    monkeypatch.setattr(store, "get_caches", lambda keys: reads.append(len(keys)) or real(keys))
    again = dense.DenseEmbedder(store).interests(interests, seeds)
    assert [n for n in reads if n] == [2 * len(interests)]  # each library's profile and its words
    assert all(np.array_equal(a.library.weights, b.library.weights) for a, b in zip(made, again, strict=True))
