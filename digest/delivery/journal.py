"""The sent journal: what the server accepted when the database could not record it.

Once a server has answered 250 the message is out; if recording it then fails (a full disk, a
read-only file, a lost PostgreSQL), re-sending it next run would be a duplicate. So the sender writes
it here instead, stops at once, and the next run records it in the store before anything else.

Each sending process has its own file, made at start at its full size (so writing a record needs no
new disk space even when the disk has filled up meanwhile), in the folder beside the store, readable
by its owner alone (0600: it names subscribers). A record is one JSON line followed by the file's
zero padding; a file without records belongs to a process that recorded everything in the store,
and is removed once that process is gone.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Protocol

from digest.delivery.owners import Owner, dead
from digest.errors import StoreError
from digest.filemodes import open_private

log = logging.getLogger("digest")

SIZE = 16 * 1024  # room for a dozen records; a sender stops after its first
PREFIX = "sent-journal."


class MarkSent(Protocol):
    def __call__(self, subscriber: str, day: date, paper_ids: Sequence[int], *, message_id: str) -> object: ...


@dataclass(frozen=True)
class Entry:
    subscriber: str
    day: date
    message_id: str
    paper_ids: tuple[int, ...]


class Journal:
    """One process's journal file, made full size when opened."""

    def __init__(self, folder: Path, owner: Owner) -> None:
        self.path = folder / f"{PREFIX}{owner.id.replace('/', '+')}"
        self._offset = 0
        try:
            with os.fdopen(open_private(self.path, os.O_WRONLY | os.O_TRUNC), "wb") as handle:  # written through
                handle.write(b"\0" * SIZE)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            self.path.unlink(missing_ok=True)
            raise StoreError(f"cannot write the sent journal {self.path}: {exc.strerror or exc}") from exc

    def record(self, entry: Entry) -> None:
        """Write one accepted message down, into the space made at start, and fsync it."""
        line = json.dumps({"subscriber": entry.subscriber, "day": entry.day.isoformat(),
                           "message_id": entry.message_id, "papers": list(entry.paper_ids)}).encode() + b"\n"
        if self._offset + len(line) > SIZE:
            raise StoreError(f"the sent journal {self.path} is full")
        fd = os.open(self.path, os.O_WRONLY)
        try:
            os.pwrite(fd, line, self._offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._offset += len(line)

    def close(self) -> None:
        """Remove the file if it holds nothing (everything went to the store)."""
        if self._offset == 0:
            self.path.unlink(missing_ok=True)


def entries(path: Path) -> Iterator[Entry]:
    """The records of one journal file (a torn last line, from a crash mid-write, is left out)."""
    for line in path.read_bytes().split(b"\0", 1)[0].splitlines():
        try:
            raw = json.loads(line)
            yield Entry(raw["subscriber"], date.fromisoformat(raw["day"]), raw["message_id"],
                        tuple(int(p) for p in raw["papers"]))
        except (ValueError, KeyError, TypeError):
            log.warning("%s: skipping an unreadable journal line", path)


def journals(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"{PREFIX}*")) if folder.is_dir() else []


def owner_of(path: Path) -> str:
    return path.name.removeprefix(PREFIX).replace("+", "/")


def replay(folder: Path, mark_sent: MarkSent) -> int:
    """Record every journalled message as sent (the store must be writable again), then remove the files.

    An empty file is removed only when its process is gone; a running sender's stays.
    """
    done = 0
    for path in journals(folder):
        found = list(entries(path))
        for entry in found:
            mark_sent(entry.subscriber, entry.day, entry.paper_ids, message_id=entry.message_id)
            log.info("recorded %s's digest of %s as sent, from %s", entry.subscriber, entry.day, path.name)
        done += len(found)
        if found or dead([owner_of(path)]):
            path.unlink(missing_ok=True)
    return done
