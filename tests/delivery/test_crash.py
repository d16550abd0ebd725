"""Crash safety for real: `digest send` to 300 subscribers, SIGKILLed mid-run, then run again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

import pytest

from digest.store import Store

from ..conftest import _MODEL_ROWS, SEEDS, cli_env, prime
from ..smtpd import Received, Recorder, smtp_server

SUBSCRIBERS = 300
DATE = "2026-06-12"


def digest(site: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "digest", *args], cwd=site, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env())


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with 300 trending-digest profiles (each due and never empty) and the seeds ingested."""
    folder = tmp_path / "subscribers"
    folder.mkdir()
    for i in range(SUBSCRIBERS):
        (folder / f"r{i:03}.toml").write_text(f'email = "reader{i}@example.org"\nname = "Reader {i}"\n')
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n')
    prime(f"sqlite:///{tmp_path / 'digest.db'}", _MODEL_ROWS[0])  # the text model's vectors, as a first run left them
    ingest = digest(tmp_path, "ingest", "--date", DATE)
    assert ingest.wait(60) == 0, ingest.stderr.read() if ingest.stderr else ""
    return tmp_path


def use_smtp(site: Path, port: int) -> None:
    (site / "digest.toml").write_text(
        f'[ingest]\npaths = ["{SEEDS}"]\n[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
        f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')


def kill_when(proc: subprocess.Popen[str], condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline, "the run never got far enough"
        time.sleep(0.001)
    proc.kill()


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["while-running", "after-the-server-took-a-message"])
def test_sigkill_then_rerun_delivers_every_digest_and_only_the_one_in_flight_twice(site, moment):
    """After kill -9 at any moment, a rerun delivers the rest; only a message in flight may arrive twice, same ID."""
    victim: list[subprocess.Popen[str]] = []

    def on_message(received: Received) -> None:
        # Kill the sender after the server has taken message 150 but before it hears "250 OK":
        # the one case where a digest is delivered and not yet marked sent.
        if moment != "while-running" and len(server.messages) == 150:
            os.kill(victim[0].pid, signal.SIGKILL)

    server = Recorder(on_message=on_message)
    with smtp_server(server) as port:
        use_smtp(site, port)
        victim.append(digest(site, "send", "--date", DATE))
        if moment == "while-running":
            kill_when(victim[0], lambda: len(server.messages) >= 100)
        assert victim[0].wait(60) == -signal.SIGKILL
        marked = sent_in_log(site)
        rerun = digest(site, "send", "--date", DATE)
        out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert 99 <= marked < SUBSCRIBERS  # killed once the server had 100: the last may be unmarked
    assert f"{DATE}: sent {SUBSCRIBERS - marked}, skipped {marked}, failed 0, deferred 0" in out
    ids: dict[str, list[str]] = defaultdict(list)
    for received in server.messages:
        [recipient] = received.rcpt_tos
        ids[recipient].append(received.message["Message-ID"])
    assert len(ids) == SUBSCRIBERS
    twice = {r: i for r, i in ids.items() if len(i) > 1}
    assert len(twice) <= 1 and all(len(i) == 2 and i[0] == i[1] for i in twice.values())
    if moment == "after-the-server-took-a-message":
        assert marked == 149 and list(twice) == [server.messages[149].rcpt_tos[0]]
    assert sent_in_log(site) == SUBSCRIBERS


def sent_in_log(site: Path) -> int:
    store = Store(f"sqlite:///{site / 'digest.db'}")
    try:
        return sum(1 for r in store.deliveries_on(date.fromisoformat(DATE)) if r.status == "sent")
    finally:
        store.close()
