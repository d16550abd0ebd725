"""Products of int8 codes: float32 BLAS against onnxruntime's integer kernel (`digest/select/integer.py`), one core.

    .venv/bin/python bench/integer_products.py

For each shape a send multiplies (interests' directions × the window's papers), the best of five rounds of many
products each, both made from codes prepared once (as a pool's are), and whether the two give the same values.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_limits

from digest.select import integer

SHAPES = ((1, 1000), (1, 7000), (3, 2000), (20, 1000), (70, 1000), (70, 7000), (256, 7000))


def best_us(run: Callable[[], object], calls: int) -> float:
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        times.append((time.perf_counter() - start) / calls)
    return min(times) * 1e6


def main() -> None:
    if not integer.available():
        print("onnxruntime's integer kernel is not exact on this processor: every product is BLAS's")
        return
    rng = np.random.default_rng(0)
    session = integer._KERNEL.get()  # noqa: SLF001 - the kernel itself, whatever MIN_WORK says
    print("| interests × papers | float32 BLAS µs | integer kernel µs | ratio | same values |")
    print("|---|---:|---:|---:|---|")
    with threadpool_limits(1, user_api="blas"):
        for rows, columns in SHAPES:
            left = rng.integers(-127, 128, (rows, 384)).astype(np.float32)
            held = integer.Held(rng.integers(-127, 128, (columns, 384)).astype(np.int8))
            held.prepare()
            floats = held.floats
            calls = max(5, 20_000_000 // (rows * columns * 384))
            def on_kernel(left: np.ndarray = left, held: integer.Held = held) -> np.ndarray:
                return integer._multiply(session, integer._shifted(left), held.columns)  # noqa: SLF001

            blas = best_us(lambda left=left, floats=floats: left @ floats.T, calls)
            kernel = best_us(on_kernel, calls)
            same = np.array_equal(on_kernel(), left @ floats.T)
            print(f"| {rows} × {columns:,} | {blas:,.1f} | {kernel:,.1f} | {blas / kernel:.2f} | {same} |")


if __name__ == "__main__":
    main()
