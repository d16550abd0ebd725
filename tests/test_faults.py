"""Runs that end: a server that stalls or drips is cut off at `smtp.deadline`, and a run of such failures stops.

Also the run's own time limit, and an unsubscribe that lands while a run is under way.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .badsmtp import bad_smtp, elapsed
from .conftest import DAY, SEEDS, SUBSCRIBERS
from .smtpd import Recorder, smtp_server

DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}  # on DAY, a Friday
QUICK = {"timeout": 30, "deadline": 1.5}  # a per-read timeout far longer than the message's deadline


@pytest.mark.parametrize("mode", ["stall-rcpt", "stall-data", "drip"])
def test_a_stalling_or_dripping_server_is_cut_off_and_the_run_stops(smtp_app, mode):
    """Each try ends at the deadline although every read is within its timeout; three tries in a row end the run,
    the rest stay queued, and the next run (to a working server) sends each digest once."""
    with bad_smtp(mode) as server:
        app = smtp_app(server.port, smtp=QUICK, delivery={"attempts": 3})
        start = time.monotonic()
        report = app.send(DAY)
        took = elapsed(start)
    assert took < 3 * 1.5 + 4, f"{mode}: the run took {took:.1f} s"
    assert "smtp.deadline" in report.halted and "delivery.max_connection_failures" in report.halted
    assert report.count("sent") == 0 and report.count("deferred") == 4 and not report.ok
    assert server.connections == 3  # one connection per try: a cut-off connection is never reused
    statuses = sorted(r.status for r in app.store.deliveries_on(DAY))
    assert statuses == ["pending", "queued", "queued", "queued"]
    good = Recorder()
    with smtp_server(good) as port:
        again = smtp_app(port, ingest=False).send(DAY)
    assert again.count("sent") == 4 and good.per_recipient() == {address: 1 for address in DUE}


def test_without_a_breaker_each_digest_still_ends_at_its_deadline(smtp_app):
    """max_connection_failures = 0: every digest is tried, each try bounded by the deadline."""
    with bad_smtp("stall-rcpt") as server:
        app = smtp_app(server.port, smtp={"timeout": 30, "deadline": 1}, delivery={"attempts": 1,
                                                                                  "max_connection_failures": 0})
        start = time.monotonic()
        report = app.send(DAY)
        took = elapsed(start)
    assert report.count("deferred") == 4 and not report.halted
    assert 4 * 1 <= took < 4 * 1 + 5
    assert all("did not finish the message within 1 s" in o.reason for o in report.outcomes if o.status == "deferred")


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


def test_a_run_stops_at_its_time_limit_and_leaves_the_rest_queued(smtp_app):
    """delivery.max_run_minutes: past it no digest is claimed or sent; what is left waits for the next run."""
    server = Recorder()
    with smtp_server(server) as port:
        # one message a second: the limit (3 s) comes after the third or fourth message at most
        app = smtp_app(port, smtp={"max_per_second": 1}, delivery={"max_run_minutes": 0.05, "batch_size": 1})
        report = app.send(DAY)
    assert "delivery.max_run_minutes" in report.halted and not report.ok
    sent = report.count("sent")
    assert 1 <= sent < 4 and sum(server.per_recipient().values()) == sent
    assert report.not_attempted == 4 - sent
    with smtp_server(server) as port:
        again = smtp_app(port, ingest=False).send(DAY)
    assert again.count("sent") == 4 - sent and server.per_recipient() == {address: 1 for address in DUE}


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
        report = app.send(DAY)
    assert sum(server.per_recipient().values()) == 1
    assert sorted(o.status for o in report.outcomes if o.subscriber in DUE) == ["sent", "skipped", "skipped",
                                                                                  "skipped"]
