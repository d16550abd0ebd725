"""Products of int8 codes (`vectors.codes`) by onnxruntime's integer kernel, the same integers as float32 BLAS.

A batch's scores are its interests' codes times the pool's codes: integers below 2**24, which float32 BLAS sums
exactly. onnxruntime (already here for the text model) multiplies 8-bit integers with the processor's dot-product
instructions (VNNI on x86, SDOT on ARM), 4-5.5 times float32 BLAS's speed on one core of this machine for the
shapes a send makes (70-256 interests × 1,000-7,000 papers; bench/integer_products.py), and sums in int32: the same
integers again. Its `MatMulInteger` takes the left side as uint8 (codes + 128, with 128 as the zero point) and the
right as int8, the form those instructions multiply.

Some kernels are not exact: on x86 without VNNI, u8 × s8 pairs are summed in 16 bits and saturate (onnxruntime's
quantisation notes), so each process checks the kernel once on extreme and random codes against float32 BLAS
(`available`) and uses it only when every value is the same; otherwise, and for products too small to gain or of a
single row, products are made by BLAS as before. Either way the caller gets the same values.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from functools import cached_property, partial
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

ZERO = 128  # the left side's zero point: codes -127..127 as uint8 1..255
# products with fewer multiply-adds than this, or of a single row (BLAS's matrix-vector product), go to BLAS: one row
# × 1,000 papers costs 1.7 times as much on the kernel (its call and conversions), one × 7,000 1.1 times, while 3 ×
# 2,000 (2.3 million) costs an eighth (bench/integer_products.py)
MIN_WORK = 2_000_000

_UINT8, _INT8, _INT32 = 2, 3, 6  # onnx TensorProto data types


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, value: int | bytes) -> bytes:
    """One protobuf field: an integer (varint) or bytes (length-delimited, for strings and messages)."""
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _tensor_info(name: str, data_type: int, dims: tuple[str, str]) -> bytes:
    """onnx ValueInfoProto: a name (1) and a type (2) whose tensor_type (1) has an elem_type (1) and a shape (2) of
    named dimensions (TensorShapeProto's dims (1), each a dim_param (2))."""
    shape = b"".join(_field(1, _field(2, d.encode())) for d in dims)
    return _field(1, name.encode()) + _field(2, _field(1, _field(1, data_type) + _field(2, shape)))


def model_bytes() -> bytes:
    """The onnx model Y = MatMulInteger(A, B, 128): A uint8 (rows × dims), B int8 (dims × columns), Y int32, written
    out field by field (onnx.proto's numbers) rather than with the `onnx` package, which is not a dependency."""
    node = (_field(1, b"A") + _field(1, b"B") + _field(1, b"A_zero") + _field(2, b"Y")  # NodeProto: inputs, output,
            + _field(4, b"MatMulInteger"))  # its operator
    zero = _field(2, _UINT8) + _field(8, b"A_zero") + _field(9, bytes([ZERO]))  # TensorProto: type, name, raw data
    graph = (_field(1, node) + _field(2, b"codes") + _field(5, zero)  # GraphProto: node, name, initializer,
             + _field(11, _tensor_info("A", _UINT8, ("rows", "dims")))  # inputs
             + _field(11, _tensor_info("B", _INT8, ("dims", "columns")))
             + _field(12, _tensor_info("Y", _INT32, ("rows", "columns"))))  # and output
    return _field(1, 8) + _field(7, graph) + _field(8, _field(2, 13))  # ir_version 8, the graph, opset 13


class _Kernel:
    """This process's session (a forked worker makes its own) and whether it was found exact."""

    def __init__(self) -> None:
        self.pid = -1
        self.session: Any = None
        self.lock = threading.Lock()

    def get(self) -> Any:
        """The checked session, or None where the kernel is not exact (or onnxruntime cannot run it)."""
        if self.pid != os.getpid():
            with self.lock:
                if self.pid != os.getpid():
                    self.session = _checked_session()
                    self.pid = os.getpid()
        return self.session


_KERNEL = _Kernel()


def _checked_session() -> Any:
    try:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one core, as BLAS in a send (`threadpoolctl`)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.enable_cpu_mem_arena = False  # (it would keep the largest product's buffers; `_multiply`)
        session = ort.InferenceSession(model_bytes(), options, providers=["CPUExecutionProvider"])
        found = exact(partial(_multiply, session))
    except Exception as exc:  # noqa: BLE001 - any failure leaves the products to BLAS, which gives the same values
        log.debug("integer products by BLAS: onnxruntime's kernel could not be used (%s)", exc)
        return None
    if not found:
        log.debug("integer products by BLAS: onnxruntime's integer kernel is not exact on this processor")
        return None
    return session


def exact(multiply: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> bool:
    """Whether a kernel (the product of the two forms, `_multiply`'s arguments) multiplies codes as float32 BLAS does,
    on `_checks`' codes."""
    return all(np.array_equal(multiply(_shifted(a), _columns(b)), (a @ b.T).astype(np.int32)) for a, b in _checks())


def _checks() -> list[tuple[np.ndarray, np.ndarray]]:
    """Codes to check the kernel on (float32, as `codes` holds them): the extremes, whose u8 × s8 pairs overflow 16
    bits (255 × 127 × 2), of each sign and mixed, in shapes of one row and of many, and random codes."""
    rng = np.random.default_rng(29)
    dims = 384
    top = np.full((3, dims), 127.0, dtype=np.float32)
    low = -top
    mixed = np.where(np.arange(dims) % 2, 127.0, -127.0).astype(np.float32)[None, :].repeat(3, axis=0)
    pairs = [(top, top), (top, low), (low, top), (low, low), (top[:1], mixed), (mixed, top), (mixed, mixed)]
    for rows, columns in ((1, 40), (37, 53), (256, 300)):
        pairs.append((rng.integers(-127, 128, (rows, dims)).astype(np.float32),
                      rng.integers(-127, 128, (columns, dims)).astype(np.float32)))
    return pairs


def _shifted(codes: np.ndarray) -> np.ndarray:
    """Codes as the kernel's left side: uint8, codes + ZERO."""
    return (codes.astype(np.int16) + ZERO).astype(np.uint8)  # type: ignore[no-any-return]


def _columns(codes: np.ndarray) -> np.ndarray:
    """Codes as the kernel's right side: int8, transposed (dims × rows)."""
    return np.ascontiguousarray(codes.astype(np.int8).T)


def _multiply(session: Any, shifted: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """The kernel's product of the two forms, written into an array of numpy's (int32): onnxruntime's own output
    would be one more array as large, copied (and, without its memory arena, left the heap fragmented: 110 MB more
    resident after 20 products of a week's window, against 14 MB for BLAS or for this)."""
    out = np.empty((shifted.shape[0], columns.shape[1]), dtype=np.int32)
    binding = session.io_binding()
    binding.bind_cpu_input("A", shifted)
    binding.bind_cpu_input("B", columns)
    binding.bind_output("Y", "cpu", 0, np.int32, out.shape, out.ctypes.data)
    session.run_with_iobinding(binding)
    return out


class Held:
    """Codes multiplied by many products (a pool's, by every batch of a send): their forms for the kernel made once,
    when first needed (2.7 MB each at a week's 7,000 papers; converting them per product cost a fifth of it)."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes)

    def prepare(self) -> None:
        """Make the right side's form now (before a send's workers fork, to share it): the kernel's where it is used
        here, else BLAS's (the left side's serves only readers' learned models, and is made where one needs it)."""
        _ = self.columns if available() else self.floats

    @cached_property
    def shifted(self) -> np.ndarray:
        return _shifted(self.codes)

    @cached_property
    def columns(self) -> np.ndarray:
        return _columns(self.codes)

    @cached_property
    def floats(self) -> np.ndarray:
        """The codes in float32, for BLAS where the kernel is not used."""
        return np.asarray(self.codes, dtype=np.float32)


def _floats(codes: np.ndarray | Held) -> np.ndarray:
    return codes.floats if isinstance(codes, Held) else np.asarray(codes, dtype=np.float32)


def available() -> bool:
    """Whether this process multiplies codes with onnxruntime's integer kernel (it was found exact here)."""
    return _KERNEL.get() is not None


def product(left: np.ndarray | Held, right: np.ndarray | Held) -> np.ndarray:
    """left @ rightᵀ for codes (`vectors.codes`' first part, float32 or int8; `Held` for codes multiplied often): the
    exact integers, int32 from the integer kernel or float32 from BLAS (the same values)."""
    a = left.codes if isinstance(left, Held) else left
    b = right.codes if isinstance(right, Held) else right
    many = min(a.shape[0], b.shape[0]) > 1 and a.shape[0] * b.shape[0] * a.shape[1] >= MIN_WORK
    session = _KERNEL.get() if many else None
    if session is None:
        return _floats(left) @ _floats(right).T  # type: ignore[no-any-return]
    return _multiply(session, left.shifted if isinstance(left, Held) else _shifted(a),
                     right.columns if isinstance(right, Held) else _columns(b))
