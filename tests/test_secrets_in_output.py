"""No password in a URL reaches the screen or the logs, and a PostgreSQL restart is one line, not a traceback.

The password of `store.url` or of a `digest bounces --imap` URL is shown as `***` in every error and log line;
a PostgreSQL server restarted in the middle of a send stops the run with one `digest: error:` line (what the
server took is kept in the sent journal), and SQLAlchemy's pool tracebacks are left for `--debug`.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest

from digest.cli import main
from digest.logs import masked, setup_logging

from .conftest import DAY, SEEDS, SUBSCRIBERS
from .smtpd import Recorder, smtp_server

PASSWORD = "hunter2-Secret"
DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}


@pytest.mark.parametrize("url", [
    f"postgresql://digest:{PASSWORD}@127.0.0.1:1/digest",  # nothing listens there
    f"postgres://digest:{PASSWORD}@127.0.0.1:99999/digest",  # no such port
    f"postgresql://digest:{PASSWORD}@/digest?host=/nonexistent",  # no such socket folder
    f"mysql://digest:{PASSWORD}@127.0.0.1:1/digest",  # no driver
    f"postgresql://digest:p@ss:{PASSWORD}@127.0.0.1:1/digest",  # an '@' and a ':' in the password itself
    f"postgresql://digest@127.0.0.1:1/digest?password={PASSWORD}",  # the password as a parameter
])
def test_a_store_url_password_is_masked_in_the_error(tmp_path: Path, capsys, url):
    """A store that cannot be opened (exit 1), or a URL that is not one (exit 2): one line naming the URL, with
    `***` where its password was."""
    (tmp_path / "digest.toml").write_text(f'[store]\nurl = "{url}"\n')
    assert main(["--config", str(tmp_path / "digest.toml"), "status"]) == (2 if "p@ss" in url else 1)
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err and "hunter2" not in out + err, err
    assert err.startswith("digest: error: ") and err.count("\n") == 1 and "***" in err, err


@pytest.mark.parametrize("url", [f"imaps://reader:{PASSWORD}@127.0.0.1:1/INBOX",
                                 f"imaps://reader:{PASSWORD}@127.0.0.1:99999999/INBOX",
                                 f"imap://reader:{PASSWORD}@/INBOX"])
def test_an_imap_url_password_is_masked_in_the_error(tmp_path: Path, capsys, url):
    """`digest bounces --imap` with a password in the URL (which it refuses): the message never repeats it."""
    (tmp_path / "digest.toml").write_text('[store]\nurl = "sqlite:///digest.db"\n')
    assert main(["--config", str(tmp_path / "digest.toml"), "bounces", "--imap", url]) == 2
    out, err = capsys.readouterr()
    assert PASSWORD not in out + err and err.startswith("digest: error: "), err


def test_log_lines_mask_passwords_and_keep_library_tracebacks_for_debug(capsys):
    """A log line (any logger's) masks URL passwords; a library's logged traceback is one line unless --debug."""
    try:
        raise ConnectionError(f"server closed the connection to postgresql://u:{PASSWORD}@db/x")
    except ConnectionError:
        for level in (logging.WARNING, logging.DEBUG):
            setup_logging(level)
            logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("Exception during reset", exc_info=True)
            err = capsys.readouterr().err
            assert PASSWORD not in err and "u:***@db" in err
            assert ("Traceback" in err) == (level == logging.DEBUG), err
    assert masked(f"imaps://bob:{PASSWORD}@mail.example.org/INBOX") == "imaps://bob:***@mail.example.org/INBOX"
    assert masked("https://example.org/a@b and mailto:x@y") == "https://example.org/a@b and mailto:x@y"


def test_a_postgresql_restart_mid_send_is_one_line_and_nothing_is_sent_twice(postgres, tmp_path: Path, capsys):
    """PostgreSQL restarted (fast) while the second digest is being handed over, with a password in store.url: the
    run stops with exit 1 and one `digest: error:` line, no traceback, no password; the digest the server took is
    kept in the sent journal, and the next run records it and sends the rest, each digest once in all."""
    url = postgres.new_database().replace("postgres@", f"postgres:{PASSWORD}@")  # trust auth: never asked for

    def restart(received) -> None:
        if len(server.messages) == 2:
            postgres.restart()

    server = Recorder(on_message=restart)
    with smtp_server(server) as port:
        (tmp_path / "digest.toml").write_text(
            f'[store]\nurl = "{url}"\n[subscribers]\ndir = "{SUBSCRIBERS}"\n[ingest]\npaths = ["{SEEDS}"]\n'
            f'[select]\nmax_age_days = 0\ntext_model = false\n[dkim]\nrelay_signs = true\n'
            f'[delivery]\ntransport = "smtp"\nretry_delay = 0.01\n'
            f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')
        config = ["--config", str(tmp_path / "digest.toml")]
        assert main([*config, "ingest", "--date", DAY.isoformat()]) == 0
        capsys.readouterr()
        code = main([*config, "send", "--date", DAY.isoformat()])
        out, err = capsys.readouterr()
        assert code == 1 and "Traceback" not in err and PASSWORD not in out + err, err
        errors = [line for line in err.splitlines() if line.startswith("digest: error:")]
        assert len(errors) == 1 and "sent journal" in errors[0], err
        assert [line for line in err.splitlines() if not line.startswith("digest: error:")] == [], err
        assert main([*config, "send", "--date", DAY.isoformat()]) == 0
    assert Counter(r for m in server.messages for r in m.rcpt_tos) == {address: 1 for address in DUE}
    assert not list(tmp_path.glob("sent-journal.*"))
