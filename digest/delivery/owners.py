"""Who holds a claim on a digest: an id naming the machine and the process, and whether that process still lives.

A claim is taken over when its lease expires, or at once when its owner was a process of this
machine that is gone (killed, crashed): the next run on the machine need not wait out the lease.
A process is known by its pid and its start time, so a recycled pid is not mistaken for the owner.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from digest.numbers import whole
from digest.store.runs import process_start as _start_time


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return True


@dataclass(frozen=True)
class Owner:
    """A claiming process: `host/pid/start/nonce` (the nonce tells two runs of one process apart, and starts with
    the group of senders it belongs to, if any: the processes of one send)."""

    host: str
    pid: int
    start: str
    nonce: str

    @classmethod
    def current(cls, group: str = "") -> Owner:
        pid = os.getpid()
        token = secrets.token_hex(3)
        return cls(socket.gethostname(), pid, _start_time(pid), f"{group}.{token}" if group else token)

    def of_group(self, group: str) -> bool:
        """Whether this owner is one of the senders of `group` (`current(group)`)."""
        return bool(group) and self.nonce.startswith(f"{group}.")

    @property
    def here(self) -> bool:
        """Whether this owner is a process of this machine (whose life `gone` can tell)."""
        return self.host == socket.gethostname()

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        parts = text.split("/")
        pid = whole(parts[1]) if len(parts) == 4 else None
        if pid is None:
            return None
        return cls(parts[0], pid, parts[2], parts[3])

    @property
    def id(self) -> str:
        return f"{self.host}/{self.pid}/{self.start}/{self.nonce}"

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}"

    def gone(self) -> bool:
        """True when this owner is a process of this machine that no longer runs (unknown elsewhere: False)."""
        if not self.here:
            return False
        if not _running(self.pid):
            return True
        return bool(self.start) and _start_time(self.pid) not in ("", self.start)


def dead(holders: Iterable[str]) -> list[str]:
    """The owners among `holders` that are processes of this machine that have died."""
    out = []
    for text in holders:
        owner = Owner.parse(text)
        if owner is not None and owner.gone():
            out.append(text)
    return out
