"""The `digest` command as a user runs it: a real process, real files, exit codes and messages."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from digest.delivery.message import message_id
from digest.store import Store
from digest.tokens import Signer

from .conftest import DAY, FIXTURES, cli_env, sample_site
from .smtpd import Recorder, free_port, smtp_server

ARXIV = FIXTURES / "arxiv_sample_head.jsonl.gz"


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=cli_env())


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A working folder whose digest.toml points at the seeds and a copy of the subscribers."""
    return sample_site(tmp_path, '[newsletter]\nname = "Test Digest"\n')


@pytest.mark.slow
def test_run_ingests_and_delivers_to_outbox(site):
    """`digest run --date` ingests the seeds and writes one .eml per due subscriber, with a summary line; exit 0,
    and the run log says ok."""
    import sqlite3

    result = run(site, "run", "--date", "2026-06-12")
    assert result.returncode == 0, result.stderr
    with sqlite3.connect(site / "digest.db") as conn:
        assert conn.execute("SELECT command, status FROM runs").fetchall() == [("run", "ok")]
    lines = result.stdout.strip().splitlines()
    assert "314 records from 6 files: 227 distinct papers" in lines[0]  # the five seed pages and the API day
    assert lines[-1].startswith("2026-06-12: sent 4, skipped 1, failed 0")
    assert len(list((site / "outbox" / "2026-06-12").glob("*.eml"))) == 4
    again = run(site, "send", "--date", "2026-06-12")
    assert again.stdout.strip().splitlines()[-1].startswith("2026-06-12: sent 0, skipped 5, failed 0")


@pytest.mark.slow
def test_preview_prints_paths(site):
    """`digest preview` prints the subject and the three files it wrote for the subscriber."""
    run(site, "ingest", "--date", "2026-06-12")
    result = run(site, "preview", "--subscriber", "ada@example.org", "--date", "2026-06-12", "--out", "pv")
    assert result.returncode == 0, result.stderr
    paths = [Path(line.strip()) for line in result.stdout.splitlines() if line.startswith("  ")]
    assert [p.suffix for p in paths] == [".html", ".txt", ".eml"]
    assert all((site / p).exists() for p in paths)
    assert result.stdout.startswith("ada@example.org: ") and " more\n" in result.stdout.splitlines(True)[0]


@pytest.mark.slow
def test_subscribers_check_reports_file_and_line(site):
    """`subscribers check` prints file:line problems and exits 1; other commands skip the bad file (and exit 1)."""
    bad = site / "subscribers" / "zz.toml"
    bad.write_text('email = "zz@example.org"\ntimezone = "Nowhere/Land"\n')
    result = run(site, "subscribers", "check")
    assert result.returncode == 1
    assert f"{bad}:2: timezone 'Nowhere/Land' is not an IANA time zone" in result.stdout
    listed = run(site, "subscribers", "list")
    assert listed.returncode == 1 and "ada@example.org" in listed.stdout and "zz.toml" in listed.stderr


@pytest.mark.slow
def test_errors_are_one_line_without_traceback(site):
    """An unknown subscriber is a one-line error with exit 2; --debug shows the traceback."""
    result = run(site, "send", "--subscriber", "nobody@example.org")
    assert result.returncode == 2
    assert result.stderr.strip().startswith("digest: error: no valid subscriber 'nobody@example.org'")
    assert "Traceback" not in result.stderr
    debug = run(site, "--debug", "send", "--subscriber", "nobody@example.org")
    assert "Traceback" in debug.stderr


def test_bad_setting_fails_at_start(site):
    """A typo in digest.toml stops the command before anything runs, naming the file and a hint (exit 2)."""
    (site / "digest.toml").write_text('[newsletter]\nnmae = "x"\n')
    result = run(site, "send")
    assert result.returncode == 2
    assert "did you mean 'name'?" in result.stderr and "digest.toml" in result.stderr


def test_bad_date_is_a_usage_error(site):
    """A malformed --date is refused by the argument parser with exit 2."""
    result = run(site, "send", "--date", "12/06/2026")
    assert result.returncode == 2 and "is not a date like 2026-06-12" in result.stderr


def use_smtp(site: Path, port: int) -> None:
    with (site / "digest.toml").open("a") as config:
        config.write(f'[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
                     f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')


@pytest.mark.slow
def test_send_to_sends_a_marked_test_and_leaves_the_send_log_alone(site):
    """`send --to` delivers the subscriber's digest to that address as a [TEST]; the real send still follows."""
    server = Recorder()
    with smtp_server(server) as port:
        use_smtp(site, port)
        run(site, "ingest", "--date", "2026-06-12")
        result = run(site, "send", "--date", "2026-06-12", "--subscriber", "ada@example.org",
                     "--to", "tester@example.net")
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("test sent to tester@example.net: [TEST] ")
        assert "ada@example.org's digest" in result.stdout
        [test] = server.messages
        msg = test.message
        assert test.rcpt_tos == ("tester@example.net",) and msg["To"] == "Ada Lovelace <tester@example.net>"
        assert msg["Subject"].startswith("[TEST] ") and msg["X-Digest-Test"] == "yes"
        key = Signer(cli_env()["DIGEST_SECRET"]).message_key  # the key the command's digests are made with
        assert msg["Message-ID"] != message_id("ada@example.org", DAY, "digest@example.org", key)
        assert Store(f"sqlite:///{site / 'digest.db'}").deliveries_on(DAY) == []
        real = run(site, "send", "--date", "2026-06-12", "--subscriber", "ada@example.org")
    assert real.stdout.startswith("2026-06-12: sent 1,"), real.stderr
    assert server.per_recipient() == {"tester@example.net": 1, "ada@example.org": 1}


@pytest.mark.slow
def test_test_send_to_the_outbox_goes_to_its_test_folder(site):
    """With the outbox transport a test send is written under outbox/test/, never over a real digest."""
    run(site, "ingest", "--date", "2026-06-12")
    result = run(site, "send", "--date", "2026-06-12", "--subscriber", "ada@example.org", "--to", "ada@example.org")
    assert result.returncode == 0, result.stderr
    assert [p.relative_to(site).as_posix() for p in (site / "outbox").rglob("*.eml")] == [
        "outbox/test/2026-06-12/ada@example.org.eml"]


@pytest.mark.slow
@pytest.mark.parametrize("args, message", [
    (["--to", "tester@example.net"], "give --subscriber EMAIL"),
    (["--to", "tester@example.net\r\nBcc: x@evil.example", "--subscriber", "ada@example.org"],
     "is not an email address"),
])
def test_send_to_usage_errors(site, args, message):
    """--to needs --subscriber and a plain address (no header injection); both are usage errors, exit 2."""
    result = run(site, "send", "--date", "2026-06-12", *args)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_unreachable_server_is_one_error_line_and_exit_1(site):
    """With the SMTP server down the run says so once, counts the deferred digests, and exits 1."""
    use_smtp(site, free_port())
    run(site, "ingest", "--date", "2026-06-12")
    result = run(site, "send", "--date", "2026-06-12")
    assert result.returncode == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("digest: error:")]
    assert len(errors) == 1 and "cannot connect to 127.0.0.1" in errors[0]
    assert "3 more digests not attempted" in errors[0] and "Traceback" not in result.stderr
    assert result.stdout.strip().endswith("sent 0, skipped 1, failed 0, deferred 4, retried 1, suppressed 0")
@pytest.mark.slow
def test_rank_json_explains_the_picks(site):
    """`digest rank --json --limit` prints the top N best first with score parts, floor marks and reasons."""
    run(site, "ingest", "--date", "2026-06-12")
    result = run(site, "rank", "--subscriber", "ada@example.org", "--date", "2026-06-12", "--limit", "40", "--json")
    assert result.returncode == 0, result.stderr
    ranked = json.loads(result.stdout)
    assert len(ranked) == 40 and [r["rank"] for r in ranked] == list(range(1, 41))
    assert {"id", "title", "score", "passes_floor", "section", "reasons", "parts"} <= set(ranked[0])
    assert ranked[0]["passes_floor"] and ranked[0]["reasons"]
    assert ranked[0]["section"] in {"LLM inference & serving", "Quantization"}
    digest = run(site, "rank", "--subscriber", "ada@example.org", "--date", "2026-06-12", "--json")
    # without --limit: the digest's picks, max_papers (10) in all, trending_again (3) of them old
    assert len(json.loads(digest.stdout)) == 10


@pytest.mark.slow
def test_rank_profile_file_and_papers_file(site, tmp_path):
    """`digest rank --profile F --papers F` ranks exactly that file's papers for that profile, as text."""
    run(site, "ingest", "--date", "2026-06-12")
    profile = tmp_path / "p.toml"
    profile.write_text('email = "p@example.org"\n[[interests]]\nname = "Vision"\n'
                       'keywords = ["sparse representation", "video"]\n')
    papers = tmp_path / "papers.jsonl"
    papers.write_text(gzip.decompress(ARXIV.read_bytes()).decode().splitlines()[0] + "\n")
    result = run(site, "rank", "--profile", str(profile), "--papers", str(papers), "--limit", "5")
    assert result.returncode == 0, result.stderr
    assert "the top 1 candidates" in result.stdout.splitlines()[0]
    assert "1904.11093" in result.stdout and "matched: sparse representation" in result.stdout


@pytest.mark.slow
def test_feedback_command_records_and_checks(site):
    """`digest feedback` records a vote and says so; an unknown paper is a usage error (exit 2)."""
    run(site, "ingest", "--date", "2026-06-12")
    ok = run(site, "feedback", "--subscriber", "ada@example.org", "--paper", "#3", "--more")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ada@example.org: more like “")
    bad = run(site, "feedback", "--subscriber", "ada@example.org", "--paper", "9999.99999", "--less")
    assert bad.returncode == 2 and "no paper '9999.99999'" in bad.stderr


@pytest.mark.slow
def test_status_of_a_large_list_counts_and_lists_only_what_needs_a_look(site, monkeypatch, capsys):
    """Past status.LIST_LIMIT subscribers, status gives counts per state and names only the digests needing a look."""
    import digest.status
    from digest.cli import main
    from digest.store import Store

    assert run(site, "run", "--date", "2026-06-12").returncode == 0
    store = Store(f"sqlite:///{site / 'digest.db'}")
    store.mark_failed("ada@example.org", DAY, "554 5.7.1 policy")
    store.close()
    monkeypatch.setattr(digest.status, "LIST_LIMIT", 2)
    monkeypatch.chdir(site)
    main(["status", "--date", "2026-06-12"])
    text = capsys.readouterr().out
    assert "Deliveries for 2026-06-12: 1 failed, 3 sent, 1 waiting or not due" in text
    assert re.search(r"failed\s+ada@example.org\s+\(554 5.7.1 policy\)", text)
    assert "grace@example.org" not in text  # sent: counted, not listed
