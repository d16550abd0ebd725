"""The exit-code contract, command by command, as cron sees it: 0 all good, 1 something an operator must act on,
2 usage or configuration; every error one line on stderr; a run recorded `ok` only when it was."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from digest.app import App
from digest.config import load_config

from .conftest import DAY, SEEDS, cli_env, sample_site

ADA = 'email = "ada@example.org"\nname = "Ada"\n\n[[interests]]\nname = "LLM"\nkeywords = ["LLM inference"]\n'

# Every command that needs a digest.toml, with arguments that would otherwise be valid.
COMMANDS = [
    ("ingest",), ("subscribers", "list"), ("subscribers", "import", "x.csv"), ("subscribers", "export"),
    ("subscribers", "remove", "a@example.org"), ("preview",), ("send",), ("run",), ("fetch",), ("worker",),
    ("schedule",), ("serve", "--port", "0"), ("db", "current"), ("db", "upgrade"), ("status",),
    ("rank", "--subscriber", "a@example.org"), ("feedback", "--subscriber", "a@example.org", "--paper", "x", "--more"),
    ("bounces", "--mbox", "x.mbox"), ("subscribers", "export-data", "a@example.org"),
    ("subscribers", "forget", "a@example.org"),
]


def digest(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=cli_env())


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """The stderr of a failed command, checked to be one `digest: error:` line without a traceback."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("digest: error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with a digest.toml over the seed pages and a copy of the example subscribers."""
    return sample_site(tmp_path)


def ingest(site: Path) -> None:
    """The seeds in the site's store (set-up, so in-process: the exit codes under test are the next command's)."""
    app = App(load_config(site / "digest.toml"))
    app.ingest([SEEDS], seen_on=DAY)
    app.close()


def runs(site: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(site / "digest.db") as conn:
        return conn.execute("SELECT command, status, summary FROM runs ORDER BY id").fetchall()


@pytest.mark.slow
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_every_command_without_a_config_exits_2_and_creates_nothing(tmp_path, args):
    """In a folder with no digest.toml, every command (but `subscribers check`) says so in one line, exits 2
    and leaves no digest.db behind (cron in the wrong folder must not pass for a working, empty install)."""
    result = digest(tmp_path, *args, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"no digest.toml in {tmp_path}" in one_line_error(result)
    assert list(tmp_path.iterdir()) == []


def test_subscribers_check_needs_no_config(tmp_path):
    """`subscribers check` reads only profile files, so it runs in a profiles repository with no digest.toml."""
    (tmp_path / "subscribers").mkdir()
    (tmp_path / "subscribers" / "ada.toml").write_text(ADA)
    result = digest(tmp_path, "subscribers", "check")
    assert result.returncode == 0 and "1 valid, 0 invalid profiles" in result.stdout
    assert not (tmp_path / "digest.db").exists()


@pytest.mark.slow
@pytest.mark.parametrize("text, expected", [
    ('[select]\nmin_relevance = nan\n', "select.min_relevance must be a finite number, not nan"),
    ('[select]\nrelevance_floor = nan\n', "select.relevance_floor is no longer a setting"),
    ('[select]\ndiversity = 5\n', "select.diversity must be at most 1, not 5"),
    ('[fetch]\nretries = -1\n', "fetch.retries must be at least 0, not -1"),
    ('[fetch]\ntimeout = inf\n', "fetch.timeout must be a finite number, not inf"),
    ('[newsletter]\nfrom_address = "not an email"\n', "newsletter.from_address must be an email address"),
    ('[newsletter]\nfrom_address = "a@example.org\\r\\nBcc: x@evil.test"\n',
     "newsletter.from_address must be one line of text without control characters"),
    ('[newsletter]\nreply_to = "ada@@example.org"\n', "newsletter.reply_to must be an email address"),
    ('[newsletter]\nfrom_address = "=?utf-8?b?YUBiLmM=?=@example.org"\n',
     "newsletter.from_address must be a plain email address"),
    ('[newsletter]\nbase_url = "http://x"\n', "newsletter.base_url must be an https URL with a host"),
    ('[newsletter]\nbase_url = "https://"\n', "newsletter.base_url must be an https URL with a host"),
    ('[schedule]\ntimezone = "Mars/Olympus"\n', "schedule.timezone must be an IANA time zone"),
    ('[schedule]\nfetch_cron = "every hour"\n', "schedule.fetch_cron must be a crontab expression"),
    ('[smtp]\nport = 99999\n', "smtp.port must be at most 65535, not 99999"),
    ('[store]\nurl = "not a url"\n', "store.url must be a database URL"),
    ('[[sources]]\nkind = "hf_daily"\nurl = "ftp://example.org/x"\n', "sources.url must be an http or https URL"),
])
def test_bad_settings_exit_2_naming_the_setting_and_the_file(site, text, expected):
    """A value of the right type but unusable (not finite, out of range, not an address, URL, zone or crontab)
    stops every command at start with exit 2, naming the file and the setting; nothing is created."""
    (site / "digest.toml").write_text(text)
    (site / "digest.db").unlink(missing_ok=True)  # (sample_site made one holding the model's vectors)
    result = digest(site, "run", "--dry-run")
    assert result.returncode == 2
    line = one_line_error(result)
    assert str(site / "digest.toml") in line and expected in line
    assert not (site / "digest.db").exists()


def test_config_naming_a_folder_is_a_one_line_usage_error(site):
    """--config naming a folder: one line, exit 2 (was an IsADirectoryError traceback)."""
    result = digest(site, "--config", str(site), "status")
    assert result.returncode == 2 and "is a folder; name the settings file" in one_line_error(result)


@pytest.mark.parametrize("args", [("send", "--dry-run"), ("preview",), ("rank", "--subscriber", "ada@example.org")])
def test_an_absurd_date_is_a_usage_error(site, args):
    """--date 0001-01-01 is refused by the argument parser (was an OverflowError in send, preview and rank)."""
    result = digest(site, *args, "--date", "0001-01-01")
    assert result.returncode == 2 and "is not a date from 1970-01-01 to 2999-12-31" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_port_out_of_range_is_a_usage_error(site):
    """serve --port 99999 is refused (it used to announce 99999 and listen elsewhere)."""
    result = digest(site, "serve", "--port", "99999")
    assert result.returncode == 2 and "not a port number from 0 to 65535" in result.stderr
    assert "serving on" not in result.stdout


@pytest.mark.slow
def test_serve_on_a_port_in_use_is_one_line_and_announces_nothing(site):
    """A port another process holds: one line naming it, exit 1, and no "serving on" printed before."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = digest(site, "serve", "--port", str(port))
    assert result.returncode == 1 and "serving on" not in result.stdout
    assert f"cannot listen on 127.0.0.1:{port}" in one_line_error(result)


@pytest.mark.slow
def test_ingest_of_a_mostly_invalid_file_exits_1_and_changes_nothing(site):
    """A Latin-1 page is refused whole (exit 1, one error naming it) and the store is as it was."""
    ingest(site)
    before = sqlite3.connect(site / "digest.db").execute("SELECT * FROM papers ORDER BY id").fetchall()
    latin = site / "latin.jsonl"
    latin.write_bytes(b"".join(b'{"title": "Caf\xe9 %d", "abstract": "R\xe9sum\xe9."}\n' % i for i in range(40)))
    result = digest(site, "ingest", str(latin), "--date", "2026-06-13")
    assert result.returncode == 1
    assert f"error: {latin}: 40 of 40 records are invalid (the first: line 1: not valid UTF-8" in result.stderr
    assert sqlite3.connect(site / "digest.db").execute("SELECT * FROM papers ORDER BY id").fetchall() == before


@pytest.mark.slow
def test_run_with_ingest_errors_prints_them_exits_1_and_is_recorded_failed(site):
    """`digest run` prints the text of each ingest error (not just a count), exits 1, and the run log says failed."""
    inbox = site / "inbox"
    inbox.mkdir()
    (inbox / "p.jsonl").write_text('{"title": "Fine", "abstract": "A."}\n{"title": "No abstract"}\n'
                                   '{"title": "Also fine", "abstract": "B."}\n')
    (site / "digest.toml").write_text(f'[ingest]\npaths = ["{inbox}"]\n')
    result = digest(site, "run", "--date", "2026-06-12", "--dry-run")
    assert result.returncode == 1
    assert f"error: {inbox / 'p.jsonl'}:2: no abstract" in result.stderr
    [(command, status, _summary)] = runs(site)
    assert (command, status) == ("run", "failed")


@pytest.mark.slow
@pytest.mark.parametrize("command", [("send", "--date", "2026-06-12"), ("run", "--date", "2026-06-12"),
                                     ("preview", "--date", "2026-06-12"), ("subscribers", "list")])
def test_an_invalid_profile_exits_1_while_the_others_still_go(site, command):
    """One invalid profile: the others are still sent (previewed, listed), and the command exits 1 naming the file."""
    bad = site / "subscribers" / "zz.toml"
    bad.write_text('email = "zz@example.org"\nmax_papers = 0\n')
    if command[0] == "send":
        ingest(site)
    result = digest(site, *command)
    assert result.returncode == 1
    assert f"{bad}:2: max_papers" in result.stderr
    if command[0] in ("send", "run"):
        assert "sent 4, skipped 1" in result.stdout and "1 invalid profiles" in result.stdout
    if command[0] == "run":
        assert [(c, s) for c, s, _ in runs(site)] == [("run", "failed")]


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["missing", "empty"])
def test_send_and_run_with_no_subscribers_folder_or_an_empty_one_exit_1(site, folder):
    """A subscribers folder that is not there, or holds no profile (and nobody imported): exit 1, not a warning."""
    (site / "empty").mkdir()
    (site / "digest.toml").write_text(f'[ingest]\npaths = ["{SEEDS}"]\n[subscribers]\ndir = "{folder}"\n')
    for command in ("send", "run"):
        result = digest(site, command, "--date", "2026-06-12", "--dry-run")
        assert result.returncode == 1, (command, result.stderr)
        assert ("subscribers folder not found" if folder == "missing" else "nobody to send to") in result.stderr


@pytest.mark.slow
def test_two_profiles_of_one_address_are_both_reported_neither_sent_exit_1(site):
    """A second file with Ada's address (sorted first) takes nothing over: both files named, no digest to that
    address, exit 1; the other subscribers still get theirs."""
    impostor = site / "subscribers" / "0-impostor.toml"
    impostor.write_text('email = "Ada@example.org"\nname = "Impostor"\n')
    result = digest(site, "run", "--date", "2026-06-12")
    assert result.returncode == 1
    assert f"{impostor}:1: email Ada@example.org is also the address of the profile file" in result.stderr
    assert f"{site / 'subscribers' / 'ada.toml'}:" in result.stderr
    sent = sorted(p.name for p in (site / "outbox" / "2026-06-12").glob("*.eml"))
    assert "ada@example.org.eml" not in sent and len(sent) == 3
    check = digest(site, "subscribers", "check")
    assert check.returncode == 1 and check.stdout.count("is also the address of the profile file") == 2


@pytest.mark.slow
def test_rank_with_papers_that_have_bad_records_exits_1(site):
    """`rank --papers` ranks what it could read, prints each bad record, and exits 1."""
    ingest(site)
    papers = site / "p.jsonl"
    papers.write_text('{"title": "KV cache serving", "abstract": "LLM inference."}\n{"title": "x"}\n'
                      '{"title": "Speculative decoding", "abstract": "LLM serving."}\n')
    result = digest(site, "rank", "--subscriber", "ada@example.org", "--papers", str(papers), "--limit", "2",
                    "--date", "2026-06-12")
    assert result.returncode == 1 and f"error: {papers}:2: no abstract" in result.stderr
    assert "the top 2 candidates" in result.stdout


@pytest.mark.slow
def test_rank_says_when_nothing_passes_the_floor(site, monkeypatch, capsys):
    """A profile no paper of the day reaches the floor for (off every topic of the seeds, under a floor of 0.9): rank
    says none passes and the digest would be empty, instead of "N papers" (the output, so in-process; rank's exit
    codes are checked above)."""
    from digest.cli import main

    (site / "digest.toml").write_text((site / "digest.toml").read_text() + "[select]\nmin_relevance = 0.9\n")
    ingest(site)
    monkeypatch.chdir(site)
    profile = site / "basket.toml"
    profile.write_text('email = "b@example.org"\n[[interests]]\nname = "Baskets"\n'
                       'keywords = ["underwater basket weaving"]\n')
    assert main(["rank", "--profile", str(profile), "--limit", "3", "--date", "2026-06-12"]) == 0
    head = capsys.readouterr().out.splitlines()
    assert head[0].startswith("b@example.org on 2026-06-12: the top 3 candidates, whatever the floor; 0 at or above "
                              "select.min_relevance 0.9")
    assert head[1].startswith("none passes the floor: this digest would be empty")
    assert main(["rank", "--profile", str(profile), "--date", "2026-06-12"]) == 0
    assert capsys.readouterr().out.startswith("b@example.org on 2026-06-12: 0 picks; 0 at or above")


@pytest.mark.slow
def test_the_docs_feedback_example_works_on_the_sample(site):
    """The ranking page's `digest feedback` example names a paper of the built-in sample, so it runs as written."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "ranking.md").read_text(encoding="utf-8")
    example = readme.split("## Feedback\n\n`digest ", 1)[1].split("`", 1)[0]
    import shlex

    ingest(site)
    result = digest(site, *shlex.split(example))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ada@example.org: more like “SpecMemo")
