"""When digests are due, and the `digest schedule` daemon (APScheduler) that sends them on time.

A subscriber's *slot* is their `send_at` in their own timezone on the days their `frequency`
allows. The digest of a slot is dated with the slot's local date, so a late run (after a restart,
or a cron job that fires a few minutes after the hour) still sends the digest the reader expects,
and the send log keyed by (subscriber, date) makes every path idempotent.

The daemon keeps one job per distinct slot (timezone, time, frequency), not one per subscriber,
in the same database as everything else (APScheduler's SQLAlchemy job store): a restart finds
the jobs and their next run times, coalesces missed runs into one, and runs it if it is within
`schedule.grace_minutes`. A lock row with a heartbeat keeps a second daemon off the database.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from apscheduler.executors.debug import DebugExecutor
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.triggers.cron import CronTrigger

from digest.errors import ConfigError, DigestError
from digest.models import Subscriber, is_delivery_day

log = logging.getLogger("digest.schedule")

_CRON_DAYS = {"daily": "*", "weekdays": "mon-fri"}
LOCK_NAME = "schedule"
HEARTBEAT_SECONDS = 15
STALE_AFTER_SECONDS = 4 * HEARTBEAT_SECONDS
JOB_TABLE = "apscheduler_jobs"


class AlreadyRunning(DigestError):
    """Another `digest schedule` holds the database."""


@dataclass(frozen=True, order=True)
class Slot:
    """A delivery time shared by every subscriber with the same timezone, time and frequency."""

    timezone: str
    send_at: time
    frequency: str

    @classmethod
    def of(cls, subscriber: Subscriber) -> Slot:
        return cls(subscriber.timezone, subscriber.send_at, subscriber.frequency)

    @property
    def job_id(self) -> str:
        return f"send:{self.timezone}:{self.send_at:%H:%M}:{self.frequency}"

    def trigger(self) -> CronTrigger:
        days = _CRON_DAYS.get(self.frequency, self.frequency.removeprefix("weekly:"))
        return CronTrigger(day_of_week=days, hour=self.send_at.hour, minute=self.send_at.minute,
                           timezone=ZoneInfo(self.timezone))

    def latest(self, now: datetime) -> datetime | None:
        """The most recent occurrence of this slot at or before `now` (within the last 8 days)."""
        local = now.astimezone(ZoneInfo(self.timezone))
        for back in range(8):
            day = local.date() - timedelta(days=back)
            at = datetime.combine(day, self.send_at, ZoneInfo(self.timezone))
            if at <= local and is_delivery_day(self.frequency, day):
                return at
        return None

    def next(self, now: datetime) -> datetime:
        """The next occurrence of this slot after `now` (DST handled by the cron trigger)."""
        return self.trigger().get_next_fire_time(None, now.astimezone(ZoneInfo(self.timezone)))


def due_date(slot: Slot, now: datetime, grace: timedelta) -> date | None:
    """The local date of the slot's digest that is due at `now`, if one is.

    A slot stays due for the rest of its local day (a machine that was down at 07:30 still sends
    today's digest when it is back at noon) and for `grace` after it, so a slot just before local
    midnight is not lost to a run a few minutes after it. Older slots are left alone.
    """
    at = slot.latest(now)
    if at is None:
        return None
    if at.date() == now.astimezone(at.tzinfo).date() or now - at <= grace:
        return at.date()
    return None


def due_slots(slots: Iterable[Slot], now: datetime, grace: timedelta) -> dict[date, list[Slot]]:
    """The slots due at `now`, grouped by the local date of their digest."""
    out: dict[date, list[Slot]] = {}
    for slot in slots:
        day = due_date(slot, now, grace)
        if day is not None:
            out.setdefault(day, []).append(slot)
    return out


def due(subscribers: Iterable[Subscriber], now: datetime, grace: timedelta) -> dict[date, list[Subscriber]]:
    """Subscribers whose latest slot has passed, grouped by that slot's local date (see `due_date`)."""
    out: dict[date, list[Subscriber]] = {}
    for subscriber in subscribers:
        day = due_date(Slot.of(subscriber), now, grace)
        if day is not None:
            out.setdefault(day, []).append(subscriber)
    return out


def next_sends(counts: Mapping[Slot, int], now: datetime, limit: int = 10) -> list[tuple[datetime, Slot, int]]:
    """The next `limit` slots after `now` with how many subscribers each serves (for `digest status`)."""
    upcoming = sorted((slot.next(now), slot, n) for slot, n in counts.items())
    return upcoming[:limit]


def parse_cron(expression: str, zone: str) -> CronTrigger:
    """A crontab expression ("0 */2 * * *") as a trigger in `zone`; ConfigError naming the setting if invalid."""
    try:
        return CronTrigger.from_crontab(expression, timezone=ZoneInfo(zone))
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"schedule.fetch_cron: {expression!r} is not a crontab expression: {exc}") from exc


def lock_owner() -> str:
    """Who we are, for the lock row: unique per daemon, readable for the operator."""
    return f"pid {os.getpid()} on {socket.gethostname()}, {secrets.token_hex(3)}"


class Daemon:
    """The scheduler: fetch on `fetch_cron`, send each slot on time, heartbeat the lock, reread profiles.

    `deliver(day, slot, should_stop)` and `fetch()` do the work; `slots()` reads the delivery
    slots in use from the profiles. Jobs run one at a time on one worker thread. With `manual=True` there is no thread
    at
    all: jobs run in the caller's thread when it calls `tick()` (tests drive it under a frozen clock).
    """

    def __init__(self, *, engine: object, store: object, zone: str, fetch_cron: str, grace: timedelta,
                 slots: Callable[[], Sequence[Slot]], deliver: Callable[..., object],
                 fetch: Callable[[], object], resync_minutes: int = 5, manual: bool = False,
                 heartbeat_seconds: float = HEARTBEAT_SECONDS, stale_after_seconds: float = STALE_AFTER_SECONDS,
                 ) -> None:
        self.store = store
        self.manual = manual
        self.heartbeat_seconds, self.stale_after_seconds = heartbeat_seconds, stale_after_seconds
        self._beating: threading.Thread | None = None
        self.fetch_trigger = parse_cron(fetch_cron, zone) if fetch_cron else None
        self.slots, self._deliver, self._fetch = slots, deliver, fetch
        self.resync_minutes = resync_minutes
        self.stopping = threading.Event()
        self.owner = lock_owner()
        workers = DebugExecutor() if manual else ThreadPoolExecutor(1)
        self.scheduler = (_ManualScheduler if manual else BackgroundScheduler)(
            jobstores={"default": SQLAlchemyJobStore(engine=engine, tablename=JOB_TABLE), "memory": MemoryJobStore()},
            executors={"default": workers},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": int(grace.total_seconds())},
            timezone=ZoneInfo(zone),
        )
        _DAEMONS[id(self)] = self

    def start(self) -> None:
        """Take the lock (AlreadyRunning if another daemon is alive), then schedule every job."""
        if not self.store.acquire_lock(LOCK_NAME, self.owner, self.stale_after_seconds):
            holder = self.store.lock_holder(LOCK_NAME)
            raise AlreadyRunning(f"another digest schedule ({holder}) is running on this database; "
                                 "stop it first (or wait a minute if it crashed)")
        self.scheduler.start()
        self.sync()
        if self.manual:  # driven by tick(), like every other job
            self.scheduler.add_job(_heartbeat, "interval", seconds=self.heartbeat_seconds, args=[id(self)],
                                   id="heartbeat", jobstore="memory", replace_existing=True)
        else:  # its own thread: a send that runs for hours must not let the lock go stale
            self._beating = threading.Thread(target=self._beat, name="schedule-heartbeat", daemon=True)
            self._beating.start()
        self.scheduler.add_job(_resync, "interval", minutes=self.resync_minutes, args=[id(self)],
                               id="resync", jobstore="memory", replace_existing=True)
        if self.fetch_trigger is not None:
            self.scheduler.add_job(_fetch, self.fetch_trigger, args=[id(self)], id="fetch", jobstore="memory",
                                   replace_existing=True)
        self.catch_up()

    def catch_up(self) -> None:
        """Send now any slot still due (first start, a restart after a long stop, a job store that lost a run).

        The send log makes this safe when the stored job also fires for the same missed run.
        """
        now = datetime.now(UTC)
        grace = timedelta(seconds=self.scheduler._job_defaults["misfire_grace_time"])
        slots = {slot for due in due_slots(self.slots(), now, grace).values() for slot in due}
        for slot in sorted(slots):
            self.scheduler.add_job(run_slot, "date", run_date=now, jobstore="memory", id=f"catch-up:{slot.job_id}",
                                   args=[slot.timezone, f"{slot.send_at:%H:%M}", slot.frequency],
                                   replace_existing=True)

    def sync(self) -> None:
        """Make the stored slot jobs match the profiles: add new slots, drop unused ones, keep the rest."""
        wanted = {slot.job_id: slot for slot in self.slots()}
        for job in self.scheduler.get_jobs(jobstore="default"):
            if job.id not in wanted:
                job.remove()
        existing = {job.id for job in self.scheduler.get_jobs(jobstore="default")}
        for job_id, slot in wanted.items():
            if job_id not in existing:  # an existing job keeps its next run time, so a missed run is seen
                self.scheduler.add_job(run_slot, slot.trigger(), id=job_id, jobstore="default",
                                       args=[slot.timezone, f"{slot.send_at:%H:%M}", slot.frequency])

    def tick(self) -> None:
        """Run every job due now, in this thread (manual daemons only)."""
        self.scheduler._process_jobs()

    def _beat(self) -> None:
        """Refresh the lock every `heartbeat_seconds` until the daemon stops (or loses the lock)."""
        while not self.stopping.wait(self.heartbeat_seconds):
            try:
                held = self.store.heartbeat(LOCK_NAME, self.owner)
            except Exception as exc:  # noqa: BLE001 (a database hiccup: try again at the next beat)
                log.warning("schedule: could not refresh the lock: %s", exc)
                continue
            if not held:
                log.error("lost the schedule lock to another process; stopping")
                threading.Thread(target=self.stop, daemon=True).start()
                return

    def stop(self) -> None:
        """Stop at once: no job starts any more, the send in flight ends after its current message, the lock
        is released."""
        self.stopping.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)  # jobs already queued return at once (they see `stopping`)
        if self._beating is not None and self._beating is not threading.current_thread():
            self._beating.join()
        self.store.release_lock(LOCK_NAME, self.owner)
        _DAEMONS.pop(id(self), None)

    def send_slot(self, slot: Slot) -> None:
        if self.stopping.is_set():
            return
        now = datetime.now(UTC)
        at = slot.latest(now)
        if at is None:
            return
        if slot in set(self.slots()):
            self._deliver(at.date(), slot, self.stopping.is_set)


class _ManualScheduler(BaseScheduler):
    """A scheduler without a thread: nothing runs until `Daemon.tick()` processes the due jobs."""

    def wakeup(self) -> None:
        pass

    def shutdown(self, wait: bool = True) -> None:
        super().shutdown(wait)


# APScheduler stores a job as a reference to an importable function, so a job finds its daemon
# here by id. One process runs one daemon; tests may make several in turn.
_DAEMONS: dict[int, Daemon] = {}


def _daemon() -> Daemon | None:
    return next(iter(_DAEMONS.values()), None)


def run_slot(zone: str, send_at: str, frequency: str) -> None:
    """The stored job of one slot: deliver that slot's digests (looked up by the running daemon)."""
    daemon = _daemon()
    if daemon is not None:
        daemon.send_slot(Slot(zone, time.fromisoformat(send_at), frequency))


def _heartbeat(daemon_id: int) -> None:
    daemon = _DAEMONS.get(daemon_id)
    if daemon is not None and not daemon.store.heartbeat(LOCK_NAME, daemon.owner):
        log.error("lost the schedule lock to another process; stopping")
        threading.Thread(target=daemon.stop, daemon=True).start()


def _resync(daemon_id: int) -> None:
    daemon = _DAEMONS.get(daemon_id)
    if daemon is not None and not daemon.stopping.is_set():
        daemon.sync()


def _fetch(daemon_id: int) -> None:
    daemon = _DAEMONS.get(daemon_id)
    if daemon is not None and not daemon.stopping.is_set():
        daemon._fetch()
