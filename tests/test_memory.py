"""The garbage collector and the allocator during long runs (`memory.held`): set and undone once, however
runs nest."""

import ctypes
import gc
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from digest.memory import YOUNG_OBJECTS, held


def test_a_run_freezes_what_is_alive_and_the_outermost_one_thaws_it():
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    with held():
        frozen = gc.get_freeze_count()
        assert frozen > 0  # (a test process always has objects alive)
        assert gc.get_threshold() == (YOUNG_OBJECTS, *before[1:])
        with held():  # a ranking run inside a send
            assert gc.get_threshold()[0] == YOUNG_OBJECTS
        assert gc.get_freeze_count() >= frozen  # the inner run's end thaws nothing
        assert gc.get_threshold()[0] == YOUNG_OBJECTS
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_a_failing_run_leaves_the_collector_as_it_found_it():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError, match="broke"), held(), held():
        raise RuntimeError("broke")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo2() -> _MallInfo2 | None:
    libc = ctypes.CDLL(None)
    if platform.libc_ver()[0] != "glibc" or not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    return libc.mallinfo2()  # type: ignore[no-any-return]


@pytest.mark.skipif(_mallinfo2() is None, reason="the allocator's thresholds are glibc's (mallinfo2: 2.33 on)")
def test_a_run_keeps_freed_arrays_memory_for_the_next_and_gives_it_back_at_the_end():
    """Within a run an array of megabytes comes from the heap and its memory stays there when it is freed (the next
    array of its size touches no fresh pages, one page fault each otherwise); at the run's end the heap's free memory
    goes back to the system and such an array is mapped on its own again, as glibc does by default. In a process of
    its own, as `digest run` is: a test worker may hold a run open in a thread another test left behind."""
    done = subprocess.run([sys.executable, "-c", "from tests.test_memory import _keeps_and_gives_back; "
                           "_keeps_and_gives_back()"], cwd=Path(__file__).parent.parent, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _keeps_and_gives_back() -> None:
    size = 16 * 2**20

    def mapped_while_alive() -> int:
        before = _mallinfo2().hblkhd  # type: ignore[union-attr]
        block = np.ones(size // 8)
        during = _mallinfo2().hblkhd  # type: ignore[union-attr]
        del block
        return during - before

    with held():
        assert mapped_while_alive() == 0  # from the heap
        assert _mallinfo2().fordblks >= size  # type: ignore[union-attr]  # ... and still there, free, for the next
        with held():  # an inner run's end changes nothing
            pass
        assert _mallinfo2().fordblks >= size  # type: ignore[union-attr]
        assert mapped_while_alive() == 0
        kept = resident()  # the freed array's pages still the process's
    # given back: the pages leave the process (malloc_trim releases free pages anywhere in the heap; mallinfo would
    # still count those below a block allocated meanwhile as free)
    assert resident() < kept - size // 2
    assert mapped_while_alive() >= size


def resident() -> int:
    """The process's resident memory in bytes (/proc/self/statm)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_runs_in_threads_thaw_when_the_last_one_ends():
    """Two sends of a scheduler daemon may overlap in its threads: the first to end must not thaw the other's."""
    before = gc.get_threshold()
    started, first_done, second_done = threading.Event(), threading.Event(), threading.Event()
    seen: list[int] = []

    def second() -> None:
        with held():
            started.set()
            first_done.wait(10)
            seen.append(gc.get_threshold()[0])  # the first has ended: still this run's setting
        second_done.set()

    thread = threading.Thread(target=second)
    with held():
        thread.start()
        assert started.wait(10)
    first_done.set()
    thread.join(10)
    assert second_done.is_set() and seen == [YOUNG_OBJECTS]
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_ranking_many_readers_holds_the_collector_for_the_run(corpus_and_pool, monkeypatch):
    """`rank_many` and `candidates` run with the collector held (the ranking benchmark calls them directly), and
    leave it as they found it."""
    from digest.select import batch

    pool, subscribers, settings, day = corpus_and_pool
    seen = []
    real = batch._top_chunk

    def spy(*args, **kwargs):
        seen.append((gc.get_freeze_count() > 0, gc.get_threshold()[0]))
        return real(*args, **kwargs)

    before = gc.get_threshold()
    monkeypatch.setattr(batch, "_top_chunk", spy)
    batch.rank_many(pool, subscribers, day=day, settings=settings, k=3)
    assert seen and all(frozen and young == YOUNG_OBJECTS for frozen, young in seen)
    batch.candidates(pool, subscribers, day=day, settings=settings, k=3, signals={})
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


@pytest.fixture
def corpus_and_pool():
    from datetime import date

    from digest.models import Interest, Paper, Subscriber
    from digest.select import CorpusStats, Pool, SelectSettings

    papers = [Paper(title=f"Paper {n} on {topic}", abstract=f"We study {topic} with method {n}.", store_id=n + 1)
              for n, topic in enumerate(["graph neural networks", "protein folding", "speech recognition"] * 4)]
    corpus = CorpusStats()
    corpus.add_texts((p.store_id, p.title, p.abstract) for p in papers)
    subscribers = [Subscriber(email=f"r{n}@example.org", interests=(Interest("T", (topic,)),))
                   for n, topic in enumerate(["protein folding", "speech", "graph"])]
    return Pool(papers, corpus), subscribers, SelectSettings(text_model=0.0), date(2026, 7, 1)


def test_the_package_sets_how_blas_threads_wait_before_numpy_loads():
    """OpenBLAS reads OPENBLAS_THREAD_TIMEOUT once, when numpy loads it: importing the package (the command line's
    first import) must set it without loading numpy itself, and an operator's own value must win."""
    import os
    import subprocess
    import sys

    probe = "import sys, os, digest; print('numpy' in sys.modules, os.environ['OPENBLAS_THREAD_TIMEOUT'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    ours = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert ours.stdout.split() == ["False", "4"]
    theirs = subprocess.run([sys.executable, "-c", probe], env={**env, "OPENBLAS_THREAD_TIMEOUT": "12"},
                            capture_output=True, text=True, check=True)
    assert theirs.stdout.split() == ["False", "12"]
