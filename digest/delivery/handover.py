"""Delivery: hand messages to a transport, recording each in the send log before and after.

Every digest goes through the same committed steps, in the same order, on every path: claimed
(with its Message-ID, by `store.claim`) → the transport → `sent`, `bounced` or `failed`; a
temporary failure leaves it `pending` for the next run. A crash at any point therefore leaves the
digests it held claimed by a dead process, which the next run takes over, and only the one in
flight may have reached the server: it goes out again with the same Message-ID.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Protocol

from digest.delivery.journal import Entry, Journal
from digest.errors import (
    ConnectionTrouble,
    DeliveryError,
    PermanentFailure,
    StoreError,
    TemporaryFailure,
    TransportUnavailable,
)
from digest.filemodes import close_to_others, make_folder
from digest.store import Store
from digest.store.engine import database_errors, explain

_UNSAFE = re.compile(r"[^A-Za-z0-9@._+-]")


def safe_name(email: str) -> str:
    """A file name for an address: nothing that could climb out of a folder."""
    return _UNSAFE.sub("_", email).lstrip(".") or "_"


class Transport(Protocol):
    """Something that takes a finished message for one recipient."""

    name: str

    def send(self, data: bytes, recipient: str, day: date) -> None: ...

    def pace(self) -> None:
        """Wait until the next message may go (a rate limit); `send` then goes at once."""

    def share(self, workers: int) -> None:
        """This process is one of `workers` sending at once: take its share of any rate limit."""

    def close(self) -> None: ...


class OutboxTransport:
    """Writes one `.eml` file per message under `<folder>/<date>/`, atomically, readable by its owner alone.

    Folders it makes are 0700 and files 0600 (their names and contents are subscribers' addresses); a folder
    it writes into that others can open is closed to them (`filemodes`). A file that cannot be written
    because of its folder or disk (full, read-only, a file size limit) stops the run, as a failing store does:
    every later message would fail the same way, and none of them is marked as sent.
    """

    name = "outbox"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._checked: set[Path] = set()  # folders already made or closed to others by this transport

    def path_for(self, recipient: str, day: date) -> Path:
        return self.folder / day.isoformat() / f"{safe_name(recipient)}.eml"

    def send(self, data: bytes, recipient: str, day: date) -> None:
        target = self.path_for(recipient, day)
        try:
            self._private(target.parent)
            write_atomic(target, data)
        except OSError as exc:
            reason = f"cannot write {target}: {exc.strerror or exc}"
            if exc.errno == errno.ENAMETOOLONG:  # this address alone: the others still fit
                raise DeliveryError(reason) from exc
            raise TransportUnavailable(f"{reason} (delivery.outbox: nothing more can be written there; "
                                       "free space or fix the folder, and run again)", retry=False) from exc

    def _private(self, folder: Path) -> None:
        if folder in self._checked:
            return
        for existing in (self.folder, folder):
            close_to_others(existing, "the outbox folder")
        make_folder(folder)
        self._checked.add(folder)

    def pace(self) -> None:
        pass

    def share(self, workers: int) -> None:
        pass

    def close(self) -> None:
        pass


def write_atomic(target: Path, data: bytes) -> None:
    """Write a file so that a reader (or a killed process) never sees it half-written.

    Written beside the target and renamed over it. Not fsync'd: like the send log's commits
    (`synchronous=NORMAL`), a file survives the process being killed but a power cut may take the
    last ones (an fsync per message cost 4 ms each, more than composing the digest).
    """
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Outcome:
    """What happened to one digest."""

    subscriber: str
    status: str  # sent | skipped | failed | deferred | dry-run
    reason: str = ""
    retries: int = 0  # temporary failures retried within this run
    suppressed: bool = False  # this failure suppressed the address
    stop: bool = False  # the transport is unusable: send nothing more in this run


@dataclass(frozen=True)
class RetryPolicy:
    """How many tries a digest gets within one run, and the backoff between them."""

    attempts: int = 3
    delay: float = 2.0  # before the first retry; doubled for each further one
    breaker: int = 3  # tries in a row with a broken or stalled connection that stop the run (0: never)
    sleep: Callable[[float], None] = time.sleep

    def pause(self, retry: int) -> None:
        self.sleep(self.delay * 2 ** (retry - 1))


def hand_over(transport: Transport, data: bytes, recipient: str, day: date, retry: RetryPolicy,
              on_retry: Callable[[TemporaryFailure], None] | None = None) -> tuple[int, DeliveryError | None]:
    """Send, retrying temporary failures with backoff: (retries made, the failure that ended it or None)."""
    retries = 0
    while True:
        try:
            transport.send(data, recipient, day)
            return retries, None
        except TemporaryFailure as exc:
            troubled = getattr(transport, "troubled", 0)
            at_connection = isinstance(exc, ConnectionTrouble | TransportUnavailable)
            if at_connection and retry.breaker and troubled >= retry.breaker:
                return retries, TransportUnavailable(f"{exc} ({troubled} tries in a row failed at the connection; "
                                                     "delivery.max_connection_failures)", retry=False)
            hopeless = isinstance(exc, TransportUnavailable) and not exc.retry
            if hopeless or retries + 1 >= retry.attempts:
                return retries, exc
            retries += 1
            if on_retry is not None:
                on_retry(exc)
            retry.pause(retries)
        except DeliveryError as exc:
            return retries, exc


class NotRecorded(StoreError):
    """The server accepted a message and the database could not record it: the run must stop at once."""

    def __init__(self, message: str, subscriber: str) -> None:
        super().__init__(message)
        self.subscriber = subscriber


def deliver_one(store: Store, transport: Transport, data: bytes, recipient: str, day: date,
                paper_ids: Sequence[int], retry: RetryPolicy, suppress_after: int = 1, *,
                owner: str | None = None, message_id: str = "", journal: Journal | None = None) -> Outcome:
    """Send one claimed digest: hand over → mark sent, bounced or failed (each committed); a temporary failure
    leaves it pending for the next run. The claim (committed before this) carries its Message-ID.

    A message the server accepted is `sent` even when the database then fails: it goes into `journal`
    (recorded in the store by the next run) and NotRecorded stops the run.
    """
    retries, error = hand_over(transport, data, recipient, day, retry,
                               lambda exc: store.note_temporary(recipient, day, str(exc), retrying=True, owner=owner))
    if error is None:
        try:
            store.mark_sent(recipient, day, paper_ids, owner=owner, message_id=message_id)
        except database_errors() as exc:
            if journal is None:
                raise
            journal.record(Entry(recipient, day, message_id, tuple(paper_ids)))
            raise NotRecorded(f"the database could not record the digest {recipient} was sent: {explain(exc)}; "
                              f"it is kept in the sent journal {journal.path} and the next run records it",
                              recipient) from exc
        return Outcome(recipient, "sent", retries=retries)
    reason = str(error)
    if isinstance(error, TemporaryFailure):  # left pending: the next run sends it, same Message-ID
        store.note_temporary(recipient, day, reason, retrying=False, owner=owner)
        return Outcome(recipient, "deferred", reason, retries, stop=isinstance(error, TransportUnavailable))
    if isinstance(error, PermanentFailure) and error.bounce:
        suppressed = store.mark_bounced(recipient, day, reason, suppress_after, owner=owner)
        return Outcome(recipient, "failed", reason, retries, suppressed=suppressed)
    store.mark_failed(recipient, day, reason, owner=owner)
    return Outcome(recipient, "failed", reason, retries)


def send_test(transport: Transport, data: bytes, recipient: str, day: date, retry: RetryPolicy) -> Outcome:
    """Send a test message with the same retries, recording nothing in the send log."""
    retries, error = hand_over(transport, data, recipient, day, retry)
    if error is None:
        return Outcome(recipient, "sent", retries=retries)
    status = "deferred" if isinstance(error, TemporaryFailure) else "failed"
    return Outcome(recipient, status, str(error), retries)
