"""The garbage collector and the allocator during a long run: what the run holds is left out of the collector's full
passes, and the memory its arrays free is kept for the next ones.

A send or a ranking run holds the pool, its index, the settings and the modules until it ends, and makes hundreds
of thousands of short-lived objects a batch. With the collector's defaults every 700 of them set off a young pass
and every few of those a full pass over everything alive, the held objects included. `held()` freezes what is alive
when the run starts (`gc.freeze()`: full passes skip it, and a forked worker does not write to those pages to mark
them) and collects young objects when 10,000 more are alive than at the last pass instead of 700; both are undone
when the outermost `held()` ends, also when it fails (a scheduler daemon runs every day in one process, and a frozen
heap would never be freed). Runs may nest and run in threads: only the outermost one freezes and thaws.

A run also makes arrays of megabytes a chunk or a batch (interests × papers in float64), and glibc's allocator gives
large freed blocks back to the system (above its trim threshold, and every block from its mmap threshold up): the
next array of the same size then touches fresh pages, a page fault each (4 kB, or 2 MB where the kernel has huge
pages free, which varies from hour to hour). Within the outermost `held()` blocks up to 32 MiB (glibc's largest mmap
threshold) come from the heap and freed memory stays there for the next arrays; at the end the defaults' starting
values come back and the heap's free pages go back to the system (`malloc_trim`). 100,000 readers' `rank_many`,
processes alternated: 1.7-1.8 million page faults, 5.9-7.9 s of system time and 11.8-15.6 s wall before; 40,000-
110,000 faults, 0.8-2.0 s and 8.7-10.7 s with it. Only on glibc; elsewhere nothing changes.
"""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_OBJECTS = 10_000  # young objects between the collector's passes during a run (its default: 700)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
HEAP_BLOCKS = 32 * 2**20  # blocks up to this size from the heap during a run (glibc's largest mmap threshold)
KEPT_FREE = 2**31 - 1  # free memory at the heap's top kept during a run (mallopt takes an int)
DEFAULT_THRESHOLD = 128 * 1024  # glibc's starting mmap and trim thresholds

_lock = threading.Lock()
_depth = 0
_thresholds: tuple[int, ...] = ()


@contextmanager
def held() -> Iterator[None]:
    """Run the block with what is alive now frozen out of the collector's passes (see the module doc)."""
    global _depth, _thresholds
    with _lock:
        if _depth == 0:
            gc.freeze()
            _thresholds = gc.get_threshold()
            gc.set_threshold(YOUNG_OBJECTS, *_thresholds[1:])
            _allocator(HEAP_BLOCKS, KEPT_FREE)
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_thresholds)
                gc.unfreeze()
                _allocator(DEFAULT_THRESHOLD, DEFAULT_THRESHOLD, trim=True)


def _libc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc (which has `mallopt` and `malloc_trim`), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc's own function: musl's mallopt does nothing)
        libc.mallopt, libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_LIBC = _libc()


def _allocator(heap_blocks: int, kept_free: int, trim: bool = False) -> None:
    """glibc's mmap and trim thresholds (see the module doc); with `trim`, the heap's free pages given back."""
    if _LIBC is not None:
        _LIBC.mallopt(M_MMAP_THRESHOLD, heap_blocks)
        _LIBC.mallopt(M_TRIM_THRESHOLD, kept_free)
        if trim:
            give_back()


def give_back() -> None:
    """The heap's free pages given back to the system (glibc's `malloc_trim`; elsewhere nothing)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
