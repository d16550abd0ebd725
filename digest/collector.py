"""The garbage collector during a long run: what the run holds is left out of its full passes.

A send or a ranking run holds the pool, its index, the settings and the modules until it ends, and makes hundreds
of thousands of short-lived objects a batch. With the collector's defaults every 700 of them set off a young pass
and every few of those a full pass over everything alive, the held objects included. `held()` freezes what is alive
when the run starts (`gc.freeze()`: full passes skip it, and a forked worker does not write to those pages to mark
them) and collects young objects when 10,000 more are alive than at the last pass instead of 700; both are undone
when the outermost `held()` ends, also when it fails (a scheduler daemon runs every day in one process, and a frozen
heap would never be freed). Runs may nest and run in threads: only the outermost one freezes and thaws.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_OBJECTS = 10_000  # young objects between the collector's passes during a run (its default: 700)

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
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                gc.set_threshold(*_thresholds)
                gc.unfreeze()
