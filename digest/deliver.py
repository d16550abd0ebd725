"""Delivery: hand messages to a transport, recording each in the send log before and after."""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from datetime import date
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol

from .errors import DeliveryError
from .store import Store

_UNSAFE = re.compile(r"[^A-Za-z0-9@._+-]")


def safe_name(email: str) -> str:
    """A file name for an address: nothing that could climb out of a folder."""
    return _UNSAFE.sub("_", email).lstrip(".") or "_"


class Transport(Protocol):
    """Something that takes a finished message for one recipient."""

    name: str

    def send(self, message: EmailMessage, recipient: str, day: date) -> None: ...

    def close(self) -> None: ...


class OutboxTransport:
    """Writes one `.eml` file per message under `<folder>/<date>/`, atomically."""

    name = "outbox"

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path_for(self, recipient: str, day: date) -> Path:
        return self.folder / day.isoformat() / f"{safe_name(recipient)}.eml"

    def send(self, message: EmailMessage, recipient: str, day: date) -> None:
        target = self.path_for(recipient, day)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, message.as_bytes())
        except OSError as exc:
            raise DeliveryError(f"cannot write {target}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        pass


def write_atomic(target: Path, data: bytes) -> None:
    """Write a file so that a reader (or a crash) never sees it half-written."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-", suffix=target.suffix)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class Outcome:
    """What happened to one digest."""

    subscriber: str
    status: str  # sent | skipped | failed | dry-run
    reason: str = ""


def deliver_one(store: Store, transport: Transport, message: EmailMessage, recipient: str, day: date,
                paper_ids: list[int]) -> Outcome:
    """Send one digest: mark pending → hand over → mark sent (or failed); each step committed."""
    store.mark_pending(recipient, day, str(message["Message-ID"]), transport.name)
    try:
        transport.send(message, recipient, day)
    except DeliveryError as exc:
        store.mark_failed(recipient, day, str(exc))
        return Outcome(recipient, "failed", str(exc))
    store.mark_sent(recipient, day, paper_ids)
    return Outcome(recipient, "sent")
