"""Running unattended: quiet days, `digest status`, JSON logs, exit codes, SIGTERM, cron and systemd files."""

from __future__ import annotations

import configparser
import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.cron import CronTrigger

from digest import daily
from digest.app import App

from .conftest import DAY, ROOT, SEEDS, cli_env
from .http_server import Reply, ScriptedServer

NOWHERE = 'email = "{email}"\nmax_papers = {n}\n\n[[interests]]\nname = "Basket weaving"\nkeywords = ["{kw}"]\n'


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=cli_env())


def write_profiles(folder: Path, texts: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in texts.items():
        (folder / f"{name}.toml").write_text(text, encoding="utf-8")
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["skip", "trending"])
def test_quiet_day_policy(make_config, tmp_path, policy):
    """With nothing above the floor, `skip` sends nothing (and says why); `trending` sends three trending papers.
    (An interest off every topic of the seeds, under a floor of 0.9: the text model always finds some paper
    loosely close to any words.)"""
    folder = write_profiles(tmp_path / "subs", {"q": NOWHERE.format(email="q@example.org", n=10,
                                                                   kw="underwater basket weaving")})
    app = App(make_config(subscribers={"dir": str(folder)}, delivery={"quiet_days": policy},
                          select={"min_relevance": 0.9}))
    app.ingest([SEEDS], seen_on=DAY)
    report = daily.send(app, DAY)
    app.close()
    (outcome,) = report.outcomes
    if policy == "skip":
        assert outcome.status == "skipped" and "nothing new above the relevance floor" in outcome.reason
        return
    assert outcome.status == "sent"
    eml = (Path(app.config.delivery.outbox) / DAY.isoformat() / "q@example.org.eml").read_bytes()
    assert b"Nothing new matched your interests today" in eml.replace(b"=\r\n", b"")
    other = App(app.config)
    composed = other.composer.compose(app.profiles.roster().find("q@example.org"), DAY, other.composer.pool(DAY))
    assert composed.digest.quiet and composed.digest.count == 3 and "a quiet day" in composed.rendered.subject


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A working folder with two profiles and a digest.toml whose sources are filled in by each test."""
    write_profiles(tmp_path / "subscribers", {
        "a": 'email = "a@example.org"\nmax_papers = 2\n',
        "b": 'email = "b@example.org"\ntimezone = "Asia/Tokyo"\nsend_at = "06:45"\nfrequency = "weekly:mon"\n',
    })
    return tmp_path


@pytest.mark.slow
def test_run_with_a_failing_source_still_sends_and_exits_1(site):
    """One source down: the other's papers are delivered, the failure is printed, and cron sees exit 1."""
    api = (ROOT / "tests" / "fixtures" / "hf_daily_papers_2026-06-12.json").read_bytes()
    with ScriptedServer({"/api": [Reply(body=api)], "/down": [Reply(status=503, content_type="text/plain")]}) as s:
        (site / "digest.toml").write_text(
            f'[fetch]\nretries = 1\nbackoff = 0.01\n\n[[sources]]\nkind = "hf_daily"\nname = "daily"\n'
            f'url = "{s.url("/api?date={date}")}"\n\n[[sources]]\nkind = "arxiv"\nname = "arxiv"\n'
            f'url = "{s.url("/down")}"\n', encoding="utf-8")
        result = cli(site, "run", "--date", "2026-06-12")
    assert result.returncode == 1
    assert f"arxiv: failed: {s.url('/down')}: HTTP 503" in result.stdout  # the source's URL, to look into
    assert "daily: 30 records, 30 new" in result.stdout
    assert "2026-06-12: sent 1, skipped 1, failed 0" in result.stdout
    assert (site / "outbox" / "2026-06-12" / "a@example.org.eml").exists()
    status = cli(site, "status", "--date", "2026-06-12")
    assert status.returncode == 1 and "the last run (#1 run) failed" in status.stderr
    text = status.stdout
    assert re.search(r"#1\s+run\s.*failed", text)
    assert re.search(r"arxiv\s+\S+ \S+ UTC\s+failed\s+HTTP 503", text)
    assert re.search(r"daily\s+\S+ \S+ UTC\s+ok\s+30 papers", text)
    assert "Deliveries for 2026-06-12: 1 not due, 1 sent" in text
    assert re.search(r"not due\s+b@example.org\s+\(frequency weekly:mon\)", text)
    assert re.search(r"\d{4}-\d\d-\d\d 06:45 JST\s+weekly:mon\s+1 subscriber\b", text)


@pytest.mark.slow
def test_json_logs_are_one_object_per_line(site):
    """With --log-format json every stderr line is a JSON object with time, level and message."""
    (site / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n', encoding="utf-8")
    result = cli(site, "--log-format", "json", "-v", "run", "--date", "2026-06-12")
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in result.stderr.splitlines()]
    assert entries and all({"time", "level", "message"} <= set(e) for e in entries)
    assert any(e["level"] == "info" and "b@example.org" in e["message"] for e in entries)


@pytest.mark.slow
def test_sigterm_finishes_the_message_in_flight_and_exits_cleanly(tmp_path):
    """`digest schedule` told to stop mid-send exits 0 with no digest half-sent: every file is logged as sent."""
    now = datetime.now(UTC)
    profile = 'email = "r{i}@example.org"\nsend_at = "{t}"\nmax_papers = 3\n'
    write_profiles(tmp_path / "subscribers",
                   {f"r{i}": profile.format(i=i, t=f"{now:%H:%M}") for i in range(600)})
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n[schedule]\nfetch_cron = ""\n')
    assert cli(tmp_path, "ingest").returncode == 0
    daemon = subprocess.Popen([sys.executable, "-m", "digest", "schedule"], cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=cli_env())
    outbox = tmp_path / "outbox" / now.date().isoformat()
    deadline = time.monotonic() + 60
    while not (outbox.exists() and any(outbox.glob("*.eml"))) and time.monotonic() < deadline:
        time.sleep(0.01)
    daemon.send_signal(signal.SIGTERM)
    _, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert "stopping after the message in flight" in err
    rows = dict(sqlite3.connect(tmp_path / "digest.db").execute(
        "select status, count(*) from deliveries group by status").fetchall())
    files = len(list(outbox.glob("*.eml")))
    # the rest stay queued for the next run (or any worker): none half-sent, none claimed by the dead daemon
    assert 0 < files < 600 and rows == {"sent": files, "queued": 600 - files}
    locks = sqlite3.connect(tmp_path / "digest.db").execute("select count(*) from locks").fetchone()[0]
    assert locks == 0  # released: the next daemon can start at once


@pytest.mark.slow
def test_sigterm_with_many_slots_due_exits_at_once(tmp_path):
    """Sixty slots due at once (a daemon back after a long stop queues a send for each): SIGTERM during the first
    one ends the daemon within seconds; the slots not yet started are not started."""
    now = datetime.now(UTC)
    profile = 'email = "r{i}@example.org"\nsend_at = "{t}"\nmax_papers = 3\n'
    write_profiles(tmp_path / "subscribers", {
        f"r{i}": profile.format(i=i, t=f"{now - timedelta(minutes=1 + i // 5):%H:%M}") for i in range(300)})
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n[schedule]\nfetch_cron = ""\n'
                                          'grace_minutes = 600\n[smtp]\nmax_per_second = 20\n')
    assert cli(tmp_path, "ingest").returncode == 0
    daemon = subprocess.Popen([sys.executable, "-m", "digest", "schedule"], cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={"PATH": "/usr/bin:/bin", "DIGEST_SECRET": "test-secret"})
    deadline = time.monotonic() + 60
    while not any((tmp_path / "outbox").glob("*/*.eml")) and time.monotonic() < deadline:
        time.sleep(0.01)
    daemon.send_signal(signal.SIGTERM)
    told = time.monotonic()
    _, err = daemon.communicate(timeout=120)
    took = time.monotonic() - told
    assert daemon.returncode == 0, err
    assert took < 10, f"the daemon took {took:.1f} s to stop"
    started = sqlite3.connect(tmp_path / "digest.db").execute("select count(*) from deliveries").fetchone()[0]
    assert started < 300  # slots whose turn had not come were left for the next start


def readme_block(title: str) -> str:
    """A fenced block of the operating page, by its info string."""
    text = (ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    return re.search(rf"```{title}\n(.*?)```", text, flags=re.S).group(1)


def test_readme_crontab_line_is_valid_and_runs_digest_run():
    """The operating page's crontab line has a valid schedule and calls `digest run`."""
    line = readme_block("crontab").strip().splitlines()[-1]
    fields = line.split()
    CronTrigger.from_crontab(" ".join(fields[:5]))
    assert "digest" in line and " run" in line


def test_readme_systemd_units_verify(tmp_path):
    """The operating page's service and timer units pass `systemd-analyze verify` (or parse as unit files)."""
    units = {"paper-digest.service": readme_block("ini paper-digest.service"),
             "paper-digest.timer": readme_block("ini paper-digest.timer"),
             "paper-digest-schedule.service": readme_block("ini paper-digest-schedule.service")}
    venv_bin = Path(sys.executable).parent
    for name, text in units.items():
        text = text.replace("/srv/paper-digest/.venv/bin", str(venv_bin)).replace("/srv/paper-digest", str(tmp_path))
        (tmp_path / name).write_text(text, encoding="utf-8")
        parsed = configparser.ConfigParser(strict=True, interpolation=None)
        parsed.read_string(text)
        assert "Unit" in parsed
    if shutil.which("systemd-analyze"):
        result = subprocess.run(["systemd-analyze", "verify", *(str(tmp_path / n) for n in units)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_progress_bar_on_a_terminal_only(tmp_path):
    """A long send shows a progress bar when stderr is a terminal (a real pty) and none when it is a file."""
    import fcntl
    import pty
    import struct
    import termios

    write_profiles(tmp_path / "subscribers", {f"p{i}": f'email = "p{i}@example.org"\nmax_papers = 1\n'
                                              for i in range(60)})
    (tmp_path / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n', encoding="utf-8")
    assert cli(tmp_path, "ingest", "--date", "2026-06-12").returncode == 0
    env = cli_env()
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # a terminal 100 columns wide
    process = subprocess.Popen([sys.executable, "-m", "digest", "send", "--date", "2026-06-12", "--dry-run"],
                               cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    with contextlib.suppress(OSError):  # EIO once the process has closed the terminal
        while chunk := os.read(leader, 4096):
            seen += chunk
    process.wait(timeout=60)
    os.close(leader)
    assert b"sending 2026-06-12:" in seen and b"/60 [" in seen
    to_file = cli(tmp_path, "send", "--date", "2026-06-12", "--dry-run")
    assert "sending 2026-06-12" not in to_file.stderr
