"""More than one process: `digest send --workers N` forks worker processes that share the send through the store.

Each worker claims its own batches (see `store.queue`), so they need no coordination beyond the
database; this module only starts them, collects what each did, and says when one died. The
children are forked after the day's pool is built, so they share its memory and do not rank it
again; the parent closes its database connections first, so no connection crosses the fork.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Died(Generic[T]):
    """A worker process that ended without reporting (killed, or crashed)."""

    exitcode: int | None
    error: str = ""

    def __str__(self) -> str:
        if self.error:
            return self.error
        if self.exitcode is not None and self.exitcode < 0:
            return f"a worker process was killed by signal {signal.Signals(-self.exitcode).name}"
        return f"a worker process ended with exit code {self.exitcode}"


Job = Callable[[Callable[[], bool]], T]  # given "should I stop?", does the work and says what it did


def _child(job: Job[T], writer: multiprocessing.connection.Connection) -> None:
    stop = threading.Event()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it asks us by SIGTERM
    signal.signal(signal.SIGTERM, lambda *_: stop.set())  # finish the message in flight, then report
    try:
        writer.send(job(stop.is_set))
    except BaseException as exc:  # reported to the parent as this worker's failure
        writer.send(Died(1, f"a worker process failed: {exc.__class__.__name__}: {exc}"))
    finally:
        writer.close()


def in_processes(count: int, job: Job[T], *, should_stop: Callable[[], bool] = lambda: False,
                 before_fork: Callable[[], None] = lambda: None) -> list[T | Died[T]]:
    """Run `job` in this process and in `count - 1` forked ones; each one's result (this process's first).

    If this process is interrupted, the others are asked to stop after their message in flight.
    """
    if count <= 1:
        return [job(should_stop)]
    before_fork()
    context = multiprocessing.get_context("fork")
    children = []
    for _ in range(count - 1):
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(target=_child, args=(job, writer), daemon=True)
        process.start()
        writer.close()
        children.append((process, reader))
    results: list[T | Died[T]] = []
    try:
        results.append(job(should_stop))
    except BaseException:
        for process, _ in children:
            if process.is_alive():
                process.terminate()  # SIGTERM: the child finishes its message in flight
        raise
    finally:
        for process, reader in children:
            try:
                results.append(reader.recv())
            except (EOFError, OSError):
                process.join()
                results.append(Died(process.exitcode))
            process.join()
    return results
