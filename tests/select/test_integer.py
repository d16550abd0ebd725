"""Products of int8 codes by onnxruntime's integer kernel: the same integers as float32 BLAS, or BLAS itself."""

from __future__ import annotations

import multiprocessing
import os
from functools import partial

import numpy as np
import onnxruntime as ort
import pytest

from digest.select import integer

DIMS = 384


def codes(rng: np.random.Generator, rows: int, top: int = 127) -> np.ndarray:
    """Random codes as `vectors.codes` holds them (float32 integers, |code| <= top)."""
    return rng.integers(-top, top + 1, (rows, DIMS)).astype(np.float32)


def extremes() -> np.ndarray:
    """Rows of the largest codes, negative, positive and alternating: the sums that overflow 16 bits."""
    alternating = np.where(np.arange(DIMS) % 2, 127.0, -127.0)
    return np.stack([np.full(DIMS, 127.0), np.full(DIMS, -127.0), alternating, -alternating]).astype(np.float32)


def test_the_written_out_model_is_matmulinteger_of_uint8_and_int8_into_int32():
    """`model_bytes` is an onnx model onnxruntime loads: inputs A uint8 and B int8, output Y int32, Y = (A - 128) B."""
    session = ort.InferenceSession(integer.model_bytes(), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [("A", "tensor(uint8)"), ("B", "tensor(int8)")]
    assert [(o.name, o.type) for o in session.get_outputs()] == [("Y", "tensor(int32)")]
    rng = np.random.default_rng(3)
    a, b = codes(rng, 5, top=60), codes(rng, 7, top=60)  # (pairs no kernel saturates: 188 × 60 × 2 < 2**15)
    got = session.run(None, {"A": (a + 128).astype(np.uint8), "B": np.ascontiguousarray(b.astype(np.int8).T)})[0]
    assert got.dtype == np.int32
    assert np.array_equal(got, (a @ b.T).astype(np.int32))


@pytest.mark.parametrize("min_work", [0, 10**12])
def test_products_of_codes_are_blas_integers_however_they_are_made(monkeypatch, min_work):
    """With the kernel (every product, MIN_WORK 0) or without (none), codes given bare or `Held` on either side:
    the float32 BLAS product's values, extremes included."""
    monkeypatch.setattr(integer, "MIN_WORK", min_work)
    rng = np.random.default_rng(7)
    for left, right in ((codes(rng, 37), codes(rng, 501)), (codes(rng, 1), codes(rng, 64)),
                        (codes(rng, 0), codes(rng, 9)), (extremes(), np.vstack([extremes(), codes(rng, 20)])),
                        (codes(rng, 300), extremes())):
        want = left @ right.T
        for a in (left, integer.Held(left)):
            for b in (right, right.astype(np.int8), integer.Held(right)):
                got = integer.product(a, b)
                assert got.shape == want.shape
                assert np.array_equal(got, want), (type(a), type(b), got.dtype)


def test_the_kernel_is_used_for_large_products_when_it_is_exact_here(monkeypatch):
    """Where the check found the kernel exact, a product of MIN_WORK multiply-adds or more runs on it (int32), and a
    smaller one or a single row's on BLAS (float32)."""
    if not integer.available():
        pytest.skip("onnxruntime's integer kernel is not exact on this processor: every product is BLAS's")
    rng = np.random.default_rng(1)
    big = integer.product(codes(rng, 256), integer.Held(codes(rng, 7000)))
    small = integer.product(codes(rng, 3), codes(rng, 10))
    one_row = integer.product(codes(rng, 1), integer.Held(codes(rng, 7000)))
    assert big.dtype == np.int32 and small.dtype == np.float32 and one_row.dtype == np.float32


def emulated(saturate: bool):  # noqa: ANN201
    """A kernel as x86 without VNNI runs u8 × s8 (`vpmaddubsw`): each pair of products summed in 16 bits, saturating,
    then in 32 bits, the zero point taken off after (or, `saturate` False, every sum in 32 bits: exact)."""

    def multiply(shifted: np.ndarray, columns: np.ndarray) -> np.ndarray:
        a, b = shifted.astype(np.int64), columns.astype(np.int64)  # rows × dims, dims × columns
        pairs = a[:, 0::2, None] * b[None, 0::2, :] + a[:, 1::2, None] * b[None, 1::2, :]
        if saturate:
            pairs = np.clip(pairs, -(2**15), 2**15 - 1)
        return (pairs.sum(axis=1) - integer.ZERO * b.sum(axis=0)[None, :]).astype(np.int32)

    return multiply


def test_a_kernel_whose_sums_saturate_is_found_out_and_an_exact_one_is_kept():
    """The check a process makes before using the kernel fails on one that sums pairs in 16 bits (saturating on
    large codes) and passes on one that sums in 32 (and on this machine's, if onnxruntime runs it)."""
    assert not integer.exact(emulated(saturate=True))
    assert integer.exact(emulated(saturate=False))
    if integer.available():
        assert integer.exact(partial(integer._multiply, integer._KERNEL.get()))  # noqa: SLF001


def _in_child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    rng = np.random.default_rng(5)
    a, b = codes(rng, 64), codes(rng, 300)
    integer.MIN_WORK = 0
    got = integer.product(a, b)
    queue.put((integer._KERNEL.pid == os.getpid(), bool(np.array_equal(got, a @ b.T))))  # noqa: SLF001


def test_a_forked_worker_makes_its_own_session_and_the_same_products():
    """A send's workers fork after the parent may have made its session: each child makes its own (a session is not
    used across a fork) and multiplies to the same values."""
    integer.available()  # the parent's session, as a send's warm-up makes it
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(queue,))
    child.start()
    own, same = queue.get(timeout=60)
    child.join(60)
    assert child.exitcode == 0
    assert own and same
