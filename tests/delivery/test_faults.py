"""Runs that end: a server that stalls or drips is cut off at `smtp.deadline`, and a run of such failures stops.

Also the run's own time limit, and an unsubscribe that lands while a run is under way.
"""

from __future__ import annotations

import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from digest import daily
from digest.app import App
from digest.config import load_config

from ..badsmtp import bad_smtp, elapsed
from ..conftest import DAY, SEEDS, SUBSCRIBERS
from ..smtpd import Recorder, smtp_server

DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}  # on DAY, a Friday
QUICK = {"timeout": 30, "deadline": 1.5}  # a per-read timeout far longer than the message's deadline


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stall-rcpt", "stall-data", "drip"])
def test_a_stalling_or_dripping_server_is_cut_off_and_the_run_stops(smtp_app, mode):
    """Each try ends at the deadline although every read is within its timeout; three tries in a row end the run,
    the rest stay queued, and the next run (to a working server) sends each digest once."""
    with bad_smtp(mode) as server:
        app = smtp_app(server.port, smtp=QUICK, delivery={"attempts": 3})
        start = time.monotonic()
        report = daily.send(app, DAY)
        took = elapsed(start)
    assert took < 3 * 1.5 + 4, f"{mode}: the run took {took:.1f} s"
    assert "smtp.deadline" in report.halted and "delivery.max_connection_failures" in report.halted
    assert report.count("sent") == 0 and report.count("deferred") == 4 and not report.ok
    assert server.connections == 3  # one connection per try: a cut-off connection is never reused
    statuses = sorted(r.status for r in app.store.deliveries_on(DAY))
    assert statuses == ["pending", "queued", "queued", "queued"]
    good = Recorder()
    with smtp_server(good) as port:
        again = daily.send(smtp_app(port, ingest=False), DAY)
    assert again.count("sent") == 4 and good.per_recipient() == {address: 1 for address in DUE}


@pytest.mark.slow
def test_without_a_breaker_each_digest_still_ends_at_its_deadline(smtp_app):
    """max_connection_failures = 0: every digest is tried, each try bounded by the deadline."""
    with bad_smtp("stall-rcpt") as server:
        app = smtp_app(server.port, smtp={"timeout": 30, "deadline": 1}, delivery={"attempts": 1,
                                                                                  "max_connection_failures": 0})
        start = time.monotonic()
        report = daily.send(app, DAY)
        took = elapsed(start)
    assert report.count("deferred") == 4 and not report.halted
    assert 4 * 1 <= took < 4 * 1 + 5
    assert all("did not finish the message within 1 s" in o.reason for o in report.outcomes if o.status == "deferred")


@pytest.mark.slow
def test_the_command_exits_1_with_one_line_when_the_server_stalls(tmp_path: Path):
    """`digest send` against a stalling server: exit 1, one line saying why, no traceback."""
    with bad_smtp("stall-rcpt") as server:
        (tmp_path / "digest.toml").write_text(
            f'[store]\nurl = "sqlite:///digest.db"\n[subscribers]\ndir = "{SUBSCRIBERS}"\n'
            f'[ingest]\npaths = ["{SEEDS}"]\n[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
            f'[smtp]\nhost = "127.0.0.1"\nport = {server.port}\nsecurity = "none"\ntimeout = 30\ndeadline = 1\n')
        subprocess.run([sys.executable, "-m", "digest", "ingest", "--date", DAY.isoformat()], cwd=tmp_path,
                       check=True, capture_output=True)
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "digest", "send", "--date", DAY.isoformat()], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        took = elapsed(start)
    assert done.returncode == 1 and took < 20
    errors = [line for line in done.stderr.splitlines() if line.startswith("digest: error:")]
    assert len(errors) == 1 and "smtp.deadline" in errors[0] and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_run_stops_at_its_time_limit_and_leaves_the_rest_queued(smtp_app):
    """delivery.max_run_minutes: past it no digest is claimed or sent; what is left waits for the next run."""
    server = Recorder()
    with smtp_server(server) as port:
        # one message a second: the limit (1.8 s from the start) leaves at most two messages sent
        app = smtp_app(port, smtp={"max_per_second": 1}, delivery={"max_run_minutes": 0.03, "batch_size": 1})
        report = daily.send(app, DAY)
    assert "delivery.max_run_minutes" in report.halted and not report.ok
    sent = report.count("sent")
    assert sent <= 2 and sum(server.per_recipient().values()) == sent
    assert report.not_attempted == 4 - sent
    with smtp_server(server) as port:
        again = daily.send(smtp_app(port, ingest=False), DAY)
    assert again.count("sent") == 4 - sent and server.per_recipient() == {address: 1 for address in DUE}


@pytest.mark.slow
def test_an_unsubscribe_during_a_run_applies_to_every_message_not_yet_sent(smtp_app):
    """The run is paced to a message a second; the addresses suppressed once the first message arrives (the
    batch long claimed and composed) get nothing."""
    from digest.store import Store

    def unsubscribe_the_rest(received) -> None:
        store = Store(app.config.store.url)
        for address in DUE - set(received.rcpt_tos):
            store.suppress(address, "unsubscribed")
        store.close()

    server = Recorder(on_message=unsubscribe_the_rest)
    with smtp_server(server) as port:
        app = smtp_app(port, smtp={"max_per_second": 1})
        report = daily.send(app, DAY)
    assert sum(server.per_recipient().values()) == 1
    assert sorted(o.status for o in report.outcomes if o.subscriber in DUE) == ["sent", "skipped", "skipped",
                                                                                  "skipped"]


def prepare(folder: Path) -> None:
    """The seeds ingested, the subscribers read and their digests composed once: the store a first run leaves."""
    app = App(load_config(folder / "digest.toml"))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        daily.send(app, DAY, dry_run=True)  # profiles read, models learned and cached
    finally:
        app.close()


def _limited(bytes_: int):
    def apply() -> None:  # the database can grow no further: what a full disk does to its writes
        resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_, bytes_))

    return apply


@pytest.mark.slow
def test_a_full_disk_never_sends_a_message_twice(tmp_path: Path):
    """The store's files can grow no more (a file size limit, as on a full disk), hit at a different point of each
    run: a message the server accepted is never sent again. The run stops at the first failed write (exit 1,
    one line); what the store could not record is kept in the sent journal and recorded by the next run."""
    server = Recorder()
    with smtp_server(server) as port:
        base = tmp_path / "base"
        base.mkdir()
        settings = (f'[store]\nurl = "sqlite:///digest.db"\n[subscribers]\ndir = "{SUBSCRIBERS}"\n'
                    f'[ingest]\npaths = ["{SEEDS}"]\n[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
                    f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')
        (base / "digest.toml").write_text(settings)
        prepare(base)
        journalled = 0
        for kb in (32, 56, 80, 104):  # room for one message's record, three, all, all but the run's end
            trial = tmp_path / f"limit-{kb}"
            shutil.copytree(base, trial)
            before = len(server.messages)
            # No bytecode written under the limit: a .pyc cut short there would break every later import of it.
            full = subprocess.run([sys.executable, "-m", "digest", "send", "--date", DAY.isoformat()], cwd=trial,
                                  capture_output=True, text=True, preexec_fn=_limited(kb * 1024),
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            if full.returncode:
                errors = [line for line in full.stderr.splitlines() if line.startswith("digest: error:")]
                assert full.returncode == 1 and len(errors) == 1 and "Traceback" not in full.stderr, full.stderr
            journalled += "sent journal" in full.stderr and len(server.messages) > before
            app = App(load_config(trial / "digest.toml"))
            try:
                assert daily.send(app, DAY).ok
            finally:
                app.close()
            assert not list(trial.glob("sent-journal.*"))  # recorded and removed
            got = Counter(r for m in server.messages[before:] for r in m.rcpt_tos)
            assert got == {address: 1 for address in DUE}, f"limit {kb} KiB: {got}"
    assert journalled >= 1  # some limit fell between a 250 and its record


@pytest.mark.slow
def test_a_damaged_database_is_one_line_with_the_way_to_recover(tmp_path: Path):
    """A page of the send log overwritten with garbage: exit 1, one line naming `.recover`, no traceback."""
    (tmp_path / "digest.toml").write_text(f'[store]\nurl = "sqlite:///digest.db"\n'
                                          f'[subscribers]\ndir = "{SUBSCRIBERS}"\n[ingest]\npaths = ["{SEEDS}"]\n')
    prepare(tmp_path)
    db = tmp_path / "digest.db"
    with sqlite3.connect(db) as conn:
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'deliveries'").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    with db.open("r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xff" * size)
    done = subprocess.run([sys.executable, "-m", "digest", "send", "--date", DAY.isoformat()], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "malformed" in lines[0] and ".recover" in lines[0]


def test_storage_faults_are_explained_with_what_to_do(tmp_path: Path):
    """Real SQLite errors (a read-only database, a lock held by another connection) each get their own advice."""
    from digest.store.engine import explain

    db = tmp_path / "x.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (x)")
    readonly = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as caught:
        readonly.execute("INSERT INTO t VALUES (1)")
    assert "read-only" in explain(caught.value).split("(", 1)[1]
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.Error) as caught:
        other.execute("BEGIN IMMEDIATE")
    assert "stuck process" in explain(caught.value)
    for conn in (readonly, holder, other):
        conn.close()
