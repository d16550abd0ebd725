"""Exactly once under concurrency: several real `digest` processes on one store and one SMTP server, some killed.

Every recipient must get the digest; none twice, except at most one per killed process (the message it
had handed over when it died, re-sent with the same Message-ID). On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from ..conftest import _MODEL_ROWS, SEEDS, cli_env, prime
from ..smtpd import Recorder, smtp_server

DATE = "2026-06-12"
SUBSCRIBERS = 240


def digest(site: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "digest", *args], cwd=site, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=cli_env())


def finish(proc: subprocess.Popen[str], timeout: float = 240) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request, tmp_path: Path) -> Path:
    """240 trending-digest profiles (each due, never empty) with the seeds ingested, on the chosen database."""
    url = "sqlite:///digest.db" if request.param == "sqlite" else request.getfixturevalue("postgres").new_database()
    folder = tmp_path / "subscribers"
    folder.mkdir()
    for i in range(SUBSCRIBERS):
        (folder / f"r{i:03}.toml").write_text(f'email = "reader{i}@example.org"\n')
    (tmp_path / "url").write_text(url)
    write_config(tmp_path, port=None)
    prime(url if request.param == "postgresql" else f"sqlite:///{tmp_path / 'digest.db'}", _MODEL_ROWS[0])
    code, _, err = finish(digest(tmp_path, "ingest", "--date", DATE), 120)
    assert code == 0, err
    return tmp_path


def write_config(site: Path, port: int | None) -> None:
    smtp = (f'[delivery]\ntransport = "smtp"\nretry_delay = 0.01\nbatch_size = 20\n'
            f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n') if port else ""
    (site / "digest.toml").write_text(f'[store]\nurl = "{(site / "url").read_text()}"\n'
                                      f'[ingest]\npaths = ["{SEEDS}"]\n{smtp}')


def by_recipient(server: Recorder) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = defaultdict(list)
    for received in list(server.messages):
        [recipient] = received.rcpt_tos
        ids[recipient].append(received.message["Message-ID"])
    return ids


@pytest.mark.slow
def test_four_runs_at_once_send_each_digest_once(site):
    """Three `digest send` and a `digest run` started together: one message per recipient, all exit 0."""
    server = Recorder()
    with smtp_server(server) as port:
        write_config(site, port)
        procs = [digest(site, "send", "--date", DATE) for _ in range(3)] + [digest(site, "run", "--date", DATE)]
        results = [finish(p) for p in procs]
    for code, _, err in results:
        assert code == 0 and "Traceback" not in err, err
    ids = by_recipient(server)
    assert len(ids) == SUBSCRIBERS and len(server.messages) == SUBSCRIBERS
    sent = [int(out.strip().splitlines()[-1].split("sent ")[1].split(",")[0]) for _, out, _ in results]
    assert sum(sent) == SUBSCRIBERS and sum(1 for n in sent if n) >= 2  # the work was shared


@pytest.mark.slow
def test_killed_workers_lose_nothing_and_repeat_at_most_their_message_in_flight(site):
    """Four senders, two of them killed mid-run with SIGKILL: the others (and a rerun) deliver every digest;
    a recipient gets two copies only for a killed process's message in flight, with the same Message-ID."""
    server = Recorder()
    with smtp_server(server) as port:
        write_config(site, port)
        procs = [digest(site, "send", "--date", DATE) for _ in range(4)]
        deadline = time.monotonic() + 120
        while len(server.messages) < SUBSCRIBERS // 4 and time.monotonic() < deadline:
            time.sleep(0.002)
        for victim in procs[:2]:
            os.kill(victim.pid, signal.SIGKILL)
        results = [finish(p) for p in procs]
        rerun = finish(digest(site, "send", "--date", DATE))
    assert [code for code, _, _ in results[:2]] == [-signal.SIGKILL] * 2
    for code, _, err in [*results[2:], rerun]:
        assert code == 0 and "Traceback" not in err, err
    ids = by_recipient(server)
    assert len(ids) == SUBSCRIBERS  # nothing lost
    twice = {r: i for r, i in ids.items() if len(i) > 1}
    assert len(twice) <= 2 and all(len(i) == 2 and i[0] == i[1] for i in twice.values())


@pytest.mark.slow
def test_workers_share_a_send_and_a_killed_one_is_taken_over(site):
    """`digest send --workers 3` delivers everything once; when one worker process is SIGKILLed its batch is
    taken over by the run, which reports the dead worker and exits 1."""
    server = Recorder()
    with smtp_server(server) as port:
        write_config(site, port)
        run = digest(site, "send", "--date", DATE, "--workers", "3")
        deadline = time.monotonic() + 120
        while len(server.messages) < SUBSCRIBERS // 4 and time.monotonic() < deadline:
            time.sleep(0.002)
        children = [int(p) for p in Path(f"/proc/{run.pid}/task/{run.pid}/children").read_text().split()]
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)
        code, out, err = finish(run)
    assert code == 1 and "a worker process was killed by signal SIGKILL" in err and "Traceback" not in err, err
    assert "taken by other workers" not in out, out  # what its own killed worker sent was no other worker's
    ids = by_recipient(server)
    assert len(ids) == SUBSCRIBERS
    twice = {r: i for r, i in ids.items() if len(i) > 1}
    assert len(twice) <= 1 and all(i[0] == i[1] for i in twice.values())


@pytest.mark.slow
def test_a_worker_on_another_machine_takes_its_share(site):
    """`digest worker --follow` (as on a second machine) delivers part of what `digest send` queued; none twice."""
    # 10 ms a message: the send takes seconds, not the fraction of one it needs now, so the worker (which
    # looks every second) surely finds batches to claim
    server = Recorder(on_message=lambda _message: time.sleep(0.01))
    with smtp_server(server) as port:
        write_config(site, port)
        helper = digest(site, "worker", "--date", DATE, "--follow", "--poll", "1")
        time.sleep(2)  # it is up and looking before anything is queued
        code, out, err = finish(digest(site, "send", "--date", DATE))
        deadline = time.monotonic() + 60  # the send is done when nothing is left to claim: the worker may
        while len(server.messages) < SUBSCRIBERS and time.monotonic() < deadline:  # still be on its last batch
            time.sleep(0.05)
        helper.send_signal(signal.SIGTERM)
        helper_code, helper_out, helper_err = finish(helper)
    assert code == 0 and helper_code == 0, err + helper_err
    ids = by_recipient(server)
    assert len(ids) == SUBSCRIBERS and len(server.messages) == SUBSCRIBERS
    by_worker = int(helper_out.strip().splitlines()[-1].split("sent ")[1].split(",")[0])
    by_send = int(out.strip().splitlines()[-1].split("sent ")[1].split(",")[0])
    assert by_worker > 0 and by_send > 0 and by_worker + by_send == SUBSCRIBERS
    assert f"{by_worker} taken by other workers" in out
