"""The schedule: digests go out at each subscriber's local time, across DST, once, on their days only.

The daemon runs for real (APScheduler, its SQLAlchemy job store in the test's SQLite file, the
outbox transport); only the clock is controlled, with time-machine, and the scheduler's loop is
stepped by hand (`Daemon.tick`) every 15 simulated minutes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
import time_machine

from digest.app import App
from digest.daily import make_daemon, run
from digest.models import Subscriber
from digest.schedule import AlreadyRunning, Slot, due

from .conftest import SEEDS

PROFILES = {
    "london": ('email = "london@example.org"\ntimezone = "Europe/London"\nsend_at = "07:30"\n'
               'frequency = "daily"\nmax_papers = 1\n'),
    "newyork": ('email = "ny@example.org"\ntimezone = "America/New_York"\nsend_at = "08:00"\n'
                'frequency = "weekdays"\nmax_papers = 1\n'),
    "tokyo": ('email = "tokyo@example.org"\ntimezone = "Asia/Tokyo"\nsend_at = "06:45"\n'
              'frequency = "weekly:mon"\nmax_papers = 1\n'),
}


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_due_follows_local_time_across_dst():
    """A 07:30 London slot is 07:30 UTC before the EU clock change and 06:30 UTC after it."""
    london = Subscriber(email="a@example.org", timezone="Europe/London", send_at=time(7, 30))
    grace = timedelta(minutes=10)
    assert due([london], utc(2026, 3, 28, 7, 29), grace) == {}
    assert due([london], utc(2026, 3, 28, 7, 30), grace) == {date(2026, 3, 28): [london]}
    assert due([london], utc(2026, 3, 30, 6, 29), grace) == {}
    assert due([london], utc(2026, 3, 30, 6, 30), grace) == {date(2026, 3, 30): [london]}


def test_a_missed_slot_stays_due_for_its_local_day_and_the_grace():
    """Today's slot is still due at noon; yesterday's is due only within the grace after it."""
    late = Subscriber(email="b@example.org", timezone="Europe/Berlin", send_at=time(23, 50))
    grace = timedelta(minutes=30)
    assert due([late], utc(2026, 6, 10, 21, 55), grace) == {date(2026, 6, 10): [late]}  # 23:55 local
    assert due([late], utc(2026, 6, 10, 22, 10), grace) == {date(2026, 6, 10): [late]}  # 00:10 next day
    assert due([late], utc(2026, 6, 10, 22, 30), grace) == {}  # 00:30: yesterday's slot is left alone


def test_digest_date_is_the_local_date_of_the_slot():
    """Tokyo's Monday 06:45 is Sunday 21:45 UTC; its digest is dated Monday."""
    tokyo = Subscriber(email="t@example.org", timezone="Asia/Tokyo", send_at=time(6, 45), frequency="weekly:mon")
    assert due([tokyo], utc(2026, 6, 14, 21, 50), timedelta(hours=1)) == {date(2026, 6, 15): [tokyo]}
    assert Slot.of(tokyo).next(utc(2026, 6, 14, 12, 0)) == utc(2026, 6, 14, 21, 45)


@pytest.fixture
def site(tmp_path: Path, make_config):
    """Settings over three scheduled profiles, seed papers new for 60 days, a fresh database and outbox."""
    folder = tmp_path / "subscribers"
    folder.mkdir()
    for name, text in PROFILES.items():
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return make_config(subscribers={"dir": str(folder)}, select={"window_days": 60},
                       schedule={"grace_minutes": 60, "fetch_cron": ""})


def sent_files(config) -> set[tuple[str, str]]:
    """(digest date, file name) of every message in the outbox."""
    outbox = Path(config.delivery.outbox)
    return {(p.parent.name, p.name) for p in outbox.glob("*/*.eml")}


def step(daemon, traveller, start: datetime, end: datetime, config) -> list[tuple[datetime, str, str]]:
    """Tick every 15 minutes from start to end; return (when, digest date, file) for each new message."""
    seen, log, now = sent_files(config), [], start
    while now <= end:
        traveller.move_to(now)
        daemon.tick()
        for day, name in sorted(sent_files(config) - seen):
            log.append((now, day, name))
        seen = sent_files(config)
        now += timedelta(minutes=15)
    return log


@pytest.mark.slow
def test_daemon_sends_at_local_times_across_dst_and_only_on_their_days(site):
    """Over 2026-03-26..04-01 (the EU clock change): London daily at 07:30 local, New York on weekdays at
    08:00 local, Tokyo on Monday at 06:45 local; nobody twice, nobody on another day."""
    with time_machine.travel(utc(2026, 3, 26, 0, 0), tick=False) as traveller:
        app = App(site)
        app.ingest([SEEDS], seen_on=date(2026, 3, 26))
        daemon = make_daemon(app, manual=True)
        daemon.start()
        log = step(daemon, traveller, utc(2026, 3, 26, 0, 0), utc(2026, 4, 1, 23, 45), site)
        daemon.stop()
        app.close()
    london = [(when, day) for when, day, name in log if name.startswith("london")]
    assert [day for _, day in london] == [f"2026-03-{d}" for d in range(26, 32)] + ["2026-04-01"]
    assert {when.time() for when, day in london if day < "2026-03-29"} == {time(7, 30)}  # GMT
    assert {when.time() for when, day in london if day >= "2026-03-29"} == {time(6, 30)}  # BST
    ny = [(when, day) for when, day, name in log if name.startswith("ny")]
    assert [day for _, day in ny] == ["2026-03-26", "2026-03-27", "2026-03-30", "2026-03-31", "2026-04-01"]
    assert {when.time() for when, _ in ny} == {time(12, 0)}  # EDT is UTC-4 all week
    tokyo = [(when, day) for when, day, name in log if name.startswith("tokyo")]
    assert tokyo == [(utc(2026, 3, 29, 21, 45), "2026-03-30")]


@pytest.mark.slow
def test_restart_after_a_missed_run_catches_up_exactly_once(site):
    """A daemon down over London's 07:30 slot sends it once when it comes back within the grace, not again."""
    with time_machine.travel(utc(2026, 6, 10, 6, 0), tick=False) as traveller:
        app = App(site)
        app.ingest([SEEDS], seen_on=date(2026, 6, 10))
        first = make_daemon(app, manual=True)
        first.start()
        first.tick()
        first.stop()  # down from 06:00; the 07:30 slot passes unseen
        traveller.move_to(utc(2026, 6, 10, 7, 0))  # 08:00 BST, 30 minutes late
        assert sent_files(site) == set()
        second = make_daemon(app, manual=True)
        second.start()
        log = step(second, traveller, utc(2026, 6, 10, 7, 0), utc(2026, 6, 10, 9, 0), site)
        second.stop()
        app.close()
    london = [entry for entry in log if entry[2].startswith("london")]
    assert london == [(utc(2026, 6, 10, 7, 0), "2026-06-10", "london@example.org.eml")]


def test_second_daemon_on_the_same_database_refuses_to_start(site):
    """While one daemon holds the database, another refuses with a message naming the holder."""
    app = App(site)
    first, second = make_daemon(app, manual=True), make_daemon(app, manual=True)
    first.start()
    try:
        with pytest.raises(AlreadyRunning, match="another digest schedule .*pid"):
            second.start()
    finally:
        first.stop()
    second.start()  # free again once the first has stopped
    second.stop()
    app.close()


@pytest.mark.slow
def test_run_from_cron_is_idempotent(site):
    """`digest run` every 15 minutes sends each digest once, at the first run after its slot."""
    with time_machine.travel(utc(2026, 6, 10, 6, 0), tick=False) as traveller:
        app = App(site)
        sent = []
        for minutes in range(0, 8 * 60, 15):
            traveller.move_to(utc(2026, 6, 10, 6, 0) + timedelta(minutes=minutes))
            report = run(app, datetime.now(UTC))
            sent += [(minutes, o.subscriber) for s in report.sends for o in s.outcomes if o.status == "sent"]
        app.close()
    # 06:00 UTC is 02:00 in New York: yesterday's 08:00 slot is past its day and its grace.
    assert sent == [(30, "london@example.org"), (360, "ny@example.org")]  # 07:30 BST, 08:00 EDT


@pytest.mark.slow
def test_a_long_send_keeps_the_lock_and_a_second_daemon_out(site):
    """The heartbeat has its own thread: while a send holds the daemon's one worker for many heartbeats (and longer
    than the lock's staleness), a second daemon still finds the lock fresh and refuses to start."""
    import threading
    import time as clock

    from digest.schedule import Daemon

    app = App(site)
    started, release = threading.Event(), threading.Event()
    now = datetime.now(UTC)
    slot = Slot("UTC", (now - timedelta(minutes=1)).time().replace(second=0, microsecond=0), "daily")

    def long_send(day, slot, should_stop):
        started.set()
        release.wait(10)

    def daemon() -> Daemon:
        return Daemon(engine=app.store.engine, store=app.store, zone="UTC", fetch_cron="", grace=timedelta(hours=1),
                      slots=lambda: [slot], deliver=long_send, fetch=lambda: None, heartbeat_seconds=0.2,
                      stale_after_seconds=1.0)

    first = daemon()
    first.start()
    try:
        assert started.wait(10)  # the catch-up send of the slot holds the worker from here on
        clock.sleep(2.5)  # well past the staleness: only a heartbeat on its own thread keeps the lock fresh
        with pytest.raises(AlreadyRunning):
            daemon().start()
    finally:
        release.set()
        first.stop()
    app.close()
