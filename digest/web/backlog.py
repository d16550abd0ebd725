"""The background work of library uploads, bounded: a few worker threads, at most one job waiting per reader, and at
most QUEUE jobs waiting in all.

A library given on the library page or with a signup is stored before the page answers; what is left for later is
the work on it (the text model's profile of the library, the lookup of the ids the store lacks: `uploads`). An upload
first reserves a place (`reserve`) while it is stored; then the reader's job already waiting takes the new library
too (one job a reader waits, however many uploads it carries), else it becomes a new job. Waiting jobs and
reservations together are at most QUEUE: a full queue, or a reader whose other upload is being stored, gets no
place, and the page says so (429) and changes nothing. WORKERS threads take
the jobs in order (started when there is work, gone after IDLE_SECONDS without), so a burst of uploads costs queued
jobs, never threads. A job lost with the server (a restart) is made good later: a send makes a missing profile, and
the library page asks again the ids never looked up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from digest.models import Interest

log = logging.getLogger("digest")

WORKERS = 2  # jobs worked on at once (a job's CPU-heavy part, the text model, runs one at a time: `uploads`)
QUEUE = 16  # jobs waiting in all (each a reader's); past it an upload is refused (429) until one is taken
IDLE_SECONDS = 5.0  # a worker with nothing to do this long goes; the next job starts one again


@dataclass
class Job:
    """One reader's waiting work: their libraries (interests, by library key) and which need their ids looked up."""

    owner: str
    interests: dict[str, Interest] = field(default_factory=dict)
    look_up: set[str] = field(default_factory=set)

    def add(self, interests: list[Interest], look_up: bool) -> None:
        for interest in interests:
            if interest.library_key:
                self.interests[interest.library_key] = interest
                if look_up:
                    self.look_up.add(interest.library_key)


class Ticket:
    """A reader's reserved place: what the upload gives it (`add`) is queued when the reservation ends."""

    def __init__(self, owner: str) -> None:
        self.job = Job(owner)

    def add(self, interests: list[Interest], look_up: bool = False) -> None:
        """Libraries just stored, to be prepared (and, with `look_up`, their ids looked up) in the background."""
        self.job.add(interests, look_up)


class Backlog:
    """The bounded queue of library jobs and its workers; `run` does one job."""

    def __init__(self, run: Callable[[Job], None], *, workers: int = WORKERS, size: int = QUEUE,
                 idle: float = IDLE_SECONDS) -> None:
        self.run, self.workers, self.size, self.idle_seconds = run, workers, size, idle
        self.cond = threading.Condition()
        self.waiting: OrderedDict[str, Job] = OrderedDict()  # owner → job, in the order they came
        self.reserved: set[str] = set()  # owners whose upload is being stored
        self.running: dict[str, int] = {}  # owner → jobs of theirs being worked on
        self.alive = 0  # worker threads
        self.idle = 0  # of them, waiting for a job

    @contextmanager
    def reserve(self, owner: str) -> Iterator[Ticket | None]:
        """A place for one upload of `owner` (None: their other upload is being stored, or the queue is full): what
        the ticket is given is queued when the block ends, even if it ends with an error (the library is stored)."""
        key = owner.lower()
        with self.cond:
            if key in self.reserved or len(self.waiting) + len(self.reserved) >= self.size:
                ticket = None
            else:
                self.reserved.add(key)
                ticket = Ticket(key)
        try:
            yield ticket
        finally:
            if ticket is not None:
                self._queue(ticket.job)

    def _queue(self, job: Job) -> None:
        with self.cond:
            self.reserved.discard(job.owner)
            if not job.interests:
                return
            waiting = self.waiting.get(job.owner)
            if waiting is not None:  # not yet taken: one job a reader waits, with all their libraries
                waiting.interests.update(job.interests)
                waiting.look_up |= job.look_up
                return
            self.waiting[job.owner] = job  # (room was reserved for it)
            if self.alive < self.workers and self.idle < len(self.waiting):
                self.alive += 1
                threading.Thread(target=self._work, name="library-work", daemon=True).start()
            self.cond.notify()

    def _work(self) -> None:
        while True:
            with self.cond:
                self.idle += 1
                deadline = time.monotonic() + self.idle_seconds
                while not self.waiting:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self.idle -= 1
                        self.alive -= 1
                        return
                    self.cond.wait(left)
                self.idle -= 1
                owner, job = self.waiting.popitem(last=False)
                self.running[owner] = self.running.get(owner, 0) + 1
                self.cond.notify_all()
            try:
                self.run(job)
            except Exception:  # noqa: BLE001 - one reader's job must not stop the others'
                log.exception("the background work on a library failed; a send makes its profile, and its ids are "
                              "asked again from its page or by `digest subscribers lookup`")
            finally:
                with self.cond:
                    self.running[owner] -= 1
                    if not self.running[owner]:
                        del self.running[owner]
                    self.cond.notify_all()

    def busy(self, owner: str) -> bool:
        """Whether `owner` has a job waiting or being worked on (or an upload being stored)."""
        key = owner.lower()
        with self.cond:
            return key in self.waiting or key in self.running or key in self.reserved

    def wait(self, timeout: float = 60.0) -> bool:
        """Until no job waits or runs (tests, and a server that stops); False if `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.waiting or self.running or self.reserved:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True
