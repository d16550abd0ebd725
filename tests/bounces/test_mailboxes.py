"""`digest bounces --imap`: the bounce mailbox read from a real Dovecot server, over TLS, read-only.

Skipped where Dovecot is not installed, unless DIGEST_REQUIRE_DOVECOT=1 (.ci/run installs it and sets that).
The server's certificate comes from a test CA, trusted through SSL_CERT_FILE (as an operator with a private CA
would do); the password through bounces.imap_password_env, as in production.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest

from digest.bounces.intake import read_mailbox
from digest.errors import DigestError, UsageError

from .. import mailsamples as ms
from ..conftest import cli_env, sample_site
from .test_intake import ADA, GRACE, KATHERINE, app_with_digests, mailbox_messages, table_rows

FIRST = ("8 messages, 6 reports: hard 1, soft 3, complaints 1, unmatched 1, unreadable 1; other mail 1, "
         "already processed 0; suppressed 3")
AGAIN = ("8 messages, 0 reports: hard 0, soft 0, complaints 0, unmatched 0, unreadable 0; other mail 0, "
         "already processed 8; suppressed 0")  # the unreadable message was reported once, and recorded


@pytest.fixture
def imap_app(make_config, subscribers_dir):
    """The example subscribers, sent digests of several days (SQLite: the store is not what is tested here)."""
    application = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}))
    yield application
    application.close()


@pytest.fixture
def trusted(dovecot, monkeypatch):
    """The server, its test CA trusted by this process's TLS (OpenSSL reads SSL_CERT_FILE)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.ca_file))
    return dovecot


def password(server) -> dict[str, str]:
    return {"DIGEST_IMAP_PASSWORD": server.password}


def log_since(server, offset: int, *, holding: str = "", timeout: float = 10.0) -> list[str]:
    """The server's log lines written after `offset`; with `holding`, waited for until one holds it (Dovecot writes
    a connection's line when the connection closes, a moment after the client has gone)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = server.log()[offset:].splitlines()
        if not holding or any(holding in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.mark.parametrize("scheme", ["imaps", "imap"])
def test_a_mailbox_read_over_imap_counts_like_a_maildir_suppresses_once_and_stays_unseen(trusted, imap_app, scheme):
    """Over imaps:// and over imap:// upgraded by STARTTLS: the Maildir test's counts, the unreadable message named
    by its UID; the second read changes nothing; every login went over TLS; no message is marked seen."""
    folder = trusted.fill(f"bounces-{scheme}", mailbox_messages(imap_app))
    url = trusted.url(folder, scheme=scheme)
    offset = len(trusted.log())

    first = read_mailbox(imap_app, imap=url, environ=password(trusted))
    assert first.line() == FIRST
    [problem] = first.problems
    assert re.match(rf"{re.escape(url)}: message UID \d+: .*without a message/delivery-status", problem), problem
    reasons = imap_app.store.suppressed()
    assert set(reasons) == {ADA, GRACE, KATHERINE} and reasons[ADA].startswith("bounced: hard bounce 5.1.1")
    rows = table_rows(imap_app, "bounces"), table_rows(imap_app, "suppressions")

    again = read_mailbox(imap_app, imap=url, environ=password(trusted))
    assert again.line() == AGAIN
    assert (table_rows(imap_app, "bounces"), table_rows(imap_app, "suppressions")) == rows
    assert imap_app.store.suppressed() == reasons

    logins = [line for line in log_since(trusted, offset) if "Login: user=<bounces>" in line]
    assert len(logins) == 2 and all(", TLS," in line for line in logins), logins
    flags = trusted.flags(folder)
    assert len(flags) == 8 and not [f for f in flags if "\\Seen" in f], flags


@pytest.mark.parametrize("scheme", ["imaps", "imap"])
def test_a_certificate_from_an_unknown_ca_stops_before_the_password_is_sent(dovecot, imap_app, scheme,
                                                                             monkeypatch):
    """Without the test CA trusted, both TLS ways fail on the certificate, and the server sees no login."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    folder = dovecot.fill(f"untrusted-{scheme}", [ms.reply()])
    offset = len(dovecot.log())
    with pytest.raises(DigestError, match="cannot connect: .*certificate verify failed"):
        read_mailbox(imap_app, imap=dovecot.url(folder, scheme=scheme), environ=password(dovecot))
    assert not [line for line in log_since(dovecot, offset) if "Login:" in line or "auth failed" in line]


def test_plain_imap_is_read_from_loopback_only(dovecot, imap_app):
    """imap:// to a server without STARTTLS: read on a loopback address; on this machine's own outward address
    the password is never sent (the server logs no authentication attempt) and nothing is read."""
    folder = dovecot.fill("plain", [ms.reply()])
    summary = read_mailbox(imap_app, imap=dovecot.url(folder, scheme="plain", host="127.0.0.2"),
                           environ=password(dovecot))
    assert summary.line().startswith("1 messages,") and summary.counts["ignored"] == 1
    if dovecot.outward is None:
        pytest.skip("this machine has no non-loopback address to try plain IMAP on")
    offset = len(dovecot.log())
    with pytest.raises(UsageError, match="does not offer STARTTLS; not sending the password in plain text"):
        read_mailbox(imap_app, imap=dovecot.url(folder, scheme="plain", host=dovecot.outward),
                     environ=password(dovecot))
    seen = [line for line in log_since(dovecot, offset, holding=f"rip={dovecot.outward},")
            if f"rip={dovecot.outward}," in line]
    assert seen and all("no auth attempts" in line for line in seen), seen


def run_cli(folder, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=folder, text=True, capture_output=True,
                          timeout=120, env=cli_env(**env))


@pytest.mark.slow
def test_the_command_reads_imap_and_a_refused_password_is_one_line_and_exit_2(dovecot, tmp_path):
    """`digest bounces --imap`: exit 0 on a clean mailbox; a wrong password is a usage error (exit 2) in one line
    naming the mailbox and the variable to fix, without the password."""
    site = sample_site(tmp_path)
    url = dovecot.url(dovecot.fill("cli", [ms.reply()]))
    trust = {"SSL_CERT_FILE": str(dovecot.ca_file)}
    good = run_cli(site, "bounces", "--imap", url, DIGEST_IMAP_PASSWORD=dovecot.password, **trust)
    assert good.returncode == 0, good.stderr
    assert good.stdout.splitlines()[-1].startswith("1 messages, 0 reports") and "other mail 1" in good.stdout

    wrong = run_cli(site, "bounces", "--imap", url, DIGEST_IMAP_PASSWORD="not-" + dovecot.password, **trust)
    assert wrong.returncode == 2, wrong.stderr
    assert wrong.stderr.count("\n") == 1 and wrong.stderr.startswith(f"digest: error: {url}: "), wrong.stderr
    assert "Authentication failed" in wrong.stderr and "$DIGEST_IMAP_PASSWORD" in wrong.stderr
    assert "b'" not in wrong.stderr and dovecot.password not in wrong.stderr and not wrong.stdout


def test_a_folder_that_is_not_there_is_named(trusted, imap_app):
    """A mailbox the server does not have: an error naming it, not an empty read."""
    url = trusted.url("Nowhere")
    with pytest.raises(DigestError, match=f"^{re.escape(url)}: no such mailbox$"):
        read_mailbox(imap_app, imap=url, environ=password(trusted))


@pytest.mark.parametrize(("url", "expected"), [
    ("imaps://bounces:secret@imap.example.org/INBOX", "leave the password out of the URL"),
    ("imaps://imap.example.org/INBOX", "give imaps://USER@HOST[:PORT]/MAILBOX"),
    ("pop3://bounces@imap.example.org/INBOX", "give imaps://USER@HOST[:PORT]/MAILBOX"),
    ("imaps://bounces@imap.example.org:99999/INBOX", "give imaps://USER@HOST[:PORT]/MAILBOX"),
    ("imaps://bounces@imap.example.org:port/INBOX", "give imaps://USER@HOST[:PORT]/MAILBOX"),
])
def test_a_url_that_cannot_work_is_refused_before_connecting(imap_app, url, expected):
    """A password in the URL, no user, another scheme, a port that is no port: a usage error, nothing connected."""
    with pytest.raises(UsageError, match=re.escape(expected)):
        read_mailbox(imap_app, imap=url, environ={"DIGEST_IMAP_PASSWORD": "x"})
