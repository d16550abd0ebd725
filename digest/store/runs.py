"""Runs (tables `fetches`, `runs`, `locks`): the last fetch of each source, the run log, and the lock that keeps one
scheduler running.

A run in the log that has not finished has a row in `locks` (`run/ID`) naming the process that runs it (host, pid
and its start time, so a recycled pid is not taken for it) and when it was last heard from: `digest status` tells
a run still under way from one whose process was killed (`status.recent_runs`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import sqlalchemy as sa

from digest.store.engine import Base
from digest.store.records import FetchRecord, RunRecord
from digest.store.tables import _now, fetches, locks, runs

RUN_LOCK = "run/"  # the `locks` row of an unfinished run: `run/ID`, owned by its process


def process_start(pid: int) -> str:
    """A process's start time in clock ticks since boot (Linux), or "" where /proc does not say: with the pid, it
    tells the process apart from a later one given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name in parentheses may hold spaces


def this_process() -> str:
    """This process as `host/pid/start` (the first three parts of a `delivery.owners.Owner` id)."""
    pid = os.getpid()
    return f"{socket.gethostname()}/{pid}/{process_start(pid)}"


class RunStore(Base):
    """Fetch records, the run log and the schedule lock (mixed into Store)."""


    # -- fetches and runs ---------------------------------------------------------

    def last_fetch(self, source: str) -> FetchRecord | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(fetches).where(fetches.c.source == source)).first()
        return FetchRecord(**row._mapping) if row else None

    def fetches(self) -> list[FetchRecord]:
        with self.engine.connect() as conn:
            return [FetchRecord(**r._mapping) for r in conn.execute(sa.select(fetches).order_by(fetches.c.source))]

    def record_fetch(self, record: FetchRecord) -> None:
        """Replace the source's last fetch; a failed fetch keeps the validators of the last good one."""
        values = {k: v for k, v in record.__dict__.items()}
        with self.write() as conn:
            old = conn.execute(sa.select(fetches).where(fetches.c.source == record.source)).first()
            if record.result == "failed" and old is not None:
                values.update(etag=old.etag, last_modified=old.last_modified, last_ok_at=old.last_ok_at)
            elif record.result != "failed":
                values["last_ok_at"] = record.fetched_at
            conn.execute(fetches.delete().where(fetches.c.source == record.source))
            conn.execute(fetches.insert().values(**values))

    def start_run(self, command: str, process: str | None = None) -> int:
        """Log a run as running, with its lease: `process` (this one by default, `this_process`) heard from now."""
        now = _now()
        with self.write() as conn:
            result = conn.execute(runs.insert().values(command=command, started_at=now, status="running",
                                                       summary=""))
            run_id = int(result.inserted_primary_key[0])
            conn.execute(locks.insert().values(name=f"{RUN_LOCK}{run_id}", owner=f"{process or this_process()}/run",
                                               heartbeat_at=now))
            return run_id

    def finish_run(self, run_id: int, status: str, summary: str) -> None:
        with self.write() as conn:
            conn.execute(runs.update().where(runs.c.id == run_id).values(
                finished_at=_now(), status=status, summary=summary[:4000]))
            conn.execute(locks.delete().where(locks.c.name == f"{RUN_LOCK}{run_id}"))

    def keep_running(self, process: str) -> None:
        """Say that the unfinished runs of `process` (`this_process`) are still under way: their lease starts again."""
        with self.write(serial=False) as conn:
            conn.execute(locks.update().where(locks.c.name.startswith(RUN_LOCK, autoescape=True)
                                              & (locks.c.owner == f"{process}/run")).values(heartbeat_at=_now()))

    def run_leases(self, run_ids: Iterable[int]) -> dict[int, tuple[str, datetime]]:
        """The process of each of these runs that has not finished, and when it was last heard from (none for a run
        logged before runs had leases)."""
        names = [f"{RUN_LOCK}{run_id}" for run_id in run_ids]
        if not names:
            return {}
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(locks).where(locks.c.name.in_(names))).all()
        return {int(row.name.removeprefix(RUN_LOCK)): (row.owner, row.heartbeat_at) for row in rows}

    def recent_runs(self, limit: int = 10) -> list[RunRecord]:
        query = sa.select(runs).order_by(runs.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [RunRecord(**r._mapping) for r in conn.execute(query)]

    # -- the schedule lock -----------------------------------------------------------

    def acquire_lock(self, name: str, owner: str, stale_after: float) -> bool:
        """Take the named lock unless another owner's heartbeat is fresher than `stale_after` seconds."""
        now = _now()
        try:
            with self.write() as conn:
                row = conn.execute(sa.select(locks).where(locks.c.name == name)).first()
                if row is None:
                    conn.execute(locks.insert().values(name=name, owner=owner, heartbeat_at=now))
                    return True
                if row.owner != owner and (now - row.heartbeat_at).total_seconds() < stale_after:
                    return False
                conn.execute(locks.update().where(locks.c.name == name).values(owner=owner, heartbeat_at=now))
                return True
        except sa.exc.IntegrityError:  # another process inserted the row between our read and write
            return False

    def heartbeat(self, name: str, owner: str) -> bool:
        """Refresh the lock; False when it is no longer ours."""
        with self.write() as conn:
            result = conn.execute(locks.update().where((locks.c.name == name) & (locks.c.owner == owner))
                                  .values(heartbeat_at=_now()))
            return bool(result.rowcount)

    def release_lock(self, name: str, owner: str) -> None:
        with self.write() as conn:
            conn.execute(locks.delete().where((locks.c.name == name) & (locks.c.owner == owner)))

    def lock_holder(self, name: str) -> str:
        """Who holds the lock and how long ago they were last heard from."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(locks).where(locks.c.name == name)).first()
        if row is None:
            return "nobody"
        return f"{row.owner}, last heartbeat {(_now() - row.heartbeat_at).total_seconds():.0f} s ago"
