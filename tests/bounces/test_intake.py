"""`digest bounces`: real DSNs and ARF reports in a real Maildir or mbox, matched to digests, suppressing once."""

from __future__ import annotations

import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from digest import daily
from digest.app import App
from digest.bounces.intake import read_mailbox
from digest.bounces.reports import Unreadable, parse_report
from digest.delivery.message import message_id
from digest.delivery.returnpath import tagged_sender
from digest.store import Store
from digest.tokens import Signer

from .. import mailsamples as ms
from ..conftest import DAY, cli_env, sample_site
from ..smtpd import Recorder, smtp_server

ADA, GRACE, KATHERINE, ALAN = "ada@example.org", "grace@example.org", "katherine@example.org", "alan@example.org"
FROM = "digest@example.org"


def mid(app: App, email: str, day: date = DAY) -> str:
    """The Message-ID of `email`'s digest of `day`, as `app` makes it (keyed with its store's secret)."""
    return message_id(email, day, FROM, app.signer.message_key)


@pytest.fixture
def bounce_app(make_config, subscribers_dir, store_url):
    """The example subscribers on SQLite and PostgreSQL, with digests of several days recorded as sent."""
    application = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}, store={"url": store_url}))
    yield application
    application.close()


def app_with_digests(config) -> App:
    """An App whose subscribers were sent digests on DAY and the two days before (in the send log)."""
    application = App(config)
    application.profiles.sync()
    for day in (DAY - timedelta(days=2), DAY - timedelta(days=1), DAY):
        application.store.enqueue(day, [ADA, GRACE, KATHERINE, ALAN],
                                  message_id=lambda e, d=day: mid(application, e, d), transport="smtp")
        for email in (ADA, GRACE, KATHERINE, ALAN):
            assert application.store.mark_sent(email, day, [], message_id=mid(application, email, day))
    return application


def mailbox_messages(app: App) -> list[bytes]:
    """One of each: a hard bounce, a complaint, three soft bounces, a reply, an unmatched bounce, an unreadable one."""
    unsubscribe = app.links(GRACE, DAY).unsubscribe
    return [
        ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(app, ADA)), report_id="<hard-1@mx.example.net>"),
        ms.arf(ms.original_headers("(redacted)", mid(app, GRACE), unsubscribe=unsubscribe),
               report_id="<arf-1@example.com>"),
        *[ms.rfc3464_dsn(KATHERINE, ms.original_headers(KATHERINE, mid(app, KATHERINE, DAY - timedelta(days=n))),
                         report_id=f"<soft-{n}@relay.example.com>") for n in range(3)],
        ms.reply(),
        ms.postfix_dsn("stranger@example.net", report_id="<stray-1@mx.example.net>"),
        ms.damaged_dsn(report_id="<broken-1@mx.example.net>"),
    ]


def table_rows(app: App, name: str) -> int:
    with app.store.engine.connect() as conn:
        return conn.execute(sa.text(f"SELECT count(*) FROM {name}")).scalar_one()


def test_the_formats_are_read_as_hard_soft_complaint_or_other():
    """Postfix and RFC 3464 DSNs, ARF, Exim's plain bounce, a reply and a positive DSN are each told apart."""
    hard = parse_report(ms.postfix_dsn(ADA, original=ms.original_headers(ADA, "<m1@example.org>"), report_id="<r1@x>"))
    assert (hard.kind, [(f.recipient, f.kind, f.status) for f in hard.failures]) == ("dsn", [(ADA, "hard", "5.1.1")])
    assert hard.message_ids == ("<m1@example.org>",) and hard.key == "message-id:<r1@x>"
    assert "User unknown" in hard.failures[0].detail
    delayed = parse_report(ms.rfc3464_dsn(ADA, ms.original_headers(ADA, "<m2@example.org>"), report_id="<r2@x>"))
    assert [(f.kind, f.status) for f in delayed.failures] == [("soft", "4.4.7")] and delayed.message_ids == (
        "<m2@example.org>",)
    full = parse_report(ms.postfix_dsn(ADA, status="5.2.2", report_id="<r3@x>"))
    assert [f.kind for f in full.failures] == ["soft"]  # a full mailbox is not a bad address
    complaint = parse_report(ms.arf(ms.original_headers(ADA, "<m4@example.org>"), report_id="<r4@x>"))
    assert (complaint.kind, [(f.recipient, f.kind, f.status) for f in complaint.failures]) == (
        "arf", [(ADA, "complaint", "abuse")])
    old = parse_report(ms.exim_bounce(ADA, report_id="<r5@x>"))
    assert (old.kind, [(f.recipient, f.kind) for f in old.failures]) == ("bounce", [(ADA, "hard")])
    assert parse_report(ms.reply()).kind == "other" and not parse_report(ms.reply()).failures
    assert not parse_report(ms.postfix_dsn(ADA, action="delivered", status="2.0.0", report_id="<r6@x>")).failures
    damaged = parse_report(ms.postfix_dsn(ADA, status="bogus", report_id="<r7@x>"))  # read as the detectors read it
    assert (damaged.kind, [(f.recipient, f.kind) for f in damaged.failures]) == ("bounce", [(ADA, "hard")])
    with pytest.raises(Unreadable, match="without a message/delivery-status part"):
        parse_report(ms.damaged_dsn(report_id="<r8@x>"))
    with pytest.raises(Unreadable, match="empty message"):
        parse_report(b"")


def test_a_mailbox_read_twice_suppresses_once_and_counts_nothing_twice(bounce_app, tmp_path):
    """Hard bounce and complaint suppress at once, three soft bounces do; the second read changes nothing and
    does not report the unreadable message again (it was recorded)."""
    box = ms.write_maildir(tmp_path / "Maildir", mailbox_messages(bounce_app))
    first = read_mailbox(bounce_app, maildir=box)
    assert first.line() == ("8 messages, 6 reports: hard 1, soft 3, complaints 1, unmatched 1, unreadable 1; "
                            "other mail 1, already processed 0; suppressed 3")
    assert not first.ok and len(first.problems) == 1 and "without a message/delivery-status" in first.problems[0]
    assert str(box) in first.problems[0] and "stranger@example.net" in first.notes[0]
    reasons = bounce_app.store.suppressed()
    assert set(reasons) == {ADA, GRACE, KATHERINE}
    assert reasons[ADA].startswith("bounced: hard bounce 5.1.1 on 2026-06-12")
    assert reasons[GRACE] == ("complaint: marked as spam (abuse report) on 2026-06-12; the digest of 2026-06-12, "
                              "matched by its Message-ID")
    assert reasons[KATHERINE].startswith("bounced: 3 soft bounces in 14 days, the last 4.4.7")
    assert bounce_app.store.delivery(ADA, DAY).status == "bounced"  # the send log says what became of it
    rows = table_rows(bounce_app, "bounces"), table_rows(bounce_app, "suppressions")

    again = read_mailbox(bounce_app, maildir=box)
    assert again.line() == ("8 messages, 0 reports: hard 0, soft 0, complaints 0, unmatched 0, unreadable 0; "
                            "other mail 0, already processed 8; suppressed 0")
    assert again.ok and not again.problems
    assert (table_rows(bounce_app, "bounces"), table_rows(bounce_app, "suppressions")) == rows
    assert bounce_app.store.suppressed() == reasons


def test_soft_bounces_suppress_only_past_the_limit_within_the_window(make_config, subscribers_dir, tmp_path):
    """Two delays of one digest count once; a bounce older than the window does not count."""
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, bounces={"soft_limit": 2,
                                                                              "soft_window_days": 7}))
    app.profiles.sync()
    early = DAY - timedelta(days=10)
    for day in (early, DAY - timedelta(days=1), DAY):
        app.store.enqueue(day, [ADA], message_id=lambda e, d=day: mid(app, e, d), transport="smtp")
        app.store.mark_sent(ADA, day, [], message_id=mid(app, ADA, day))
    old = ms.postfix_dsn(ADA, status="4.2.2", action="failed", original=ms.original_headers(ADA, mid(app, ADA, early)),
                         report_id="<old@x>", date="Tue, 02 Jun 2026 09:00:00 +0000")
    twice = [ms.rfc3464_dsn(ADA, ms.original_headers(ADA, mid(app, ADA)), report_id=f"<delay-{n}@x>")
             for n in range(2)]
    summary = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "box", [old, *twice]))
    assert summary.counts["soft"] == 3 and summary.suppressed == [] and app.store.suppressed() == {}
    yesterday = mid(app, ADA, DAY - timedelta(days=1))
    late = ms.postfix_dsn(ADA, status="4.2.2", original=ms.original_headers(ADA, yesterday), report_id="<late@x>")
    summary = read_mailbox(app, mbox=ms.write_mbox(tmp_path / "box.mbox", [late]))
    assert [email for email, _ in summary.suppressed] == [ADA]
    assert app.store.suppressed()[ADA].startswith("bounced: 2 soft bounces in 7 days")
    app.close()


def test_a_complaint_turns_an_unsubscribe_into_a_complaint(bounce_app, tmp_path):
    """An address unsubscribed by link that then complains is suppressed as a complaint (no longer a plain
    unsubscribe)."""
    bounce_app.store.suppress(ADA, "unsubscribed")
    report = ms.arf(ms.original_headers(ADA, mid(bounce_app, ADA)), report_id="<arf-2@x>", rcpt=ADA)
    read_mailbox(bounce_app, maildir=ms.write_maildir(tmp_path / "box", [report]))
    assert bounce_app.store.suppressed()[ADA].startswith("complaint:")
    assert not bounce_app.store.unsuppress(ADA, "unsubscribed")


def test_the_tagged_return_path_matches_a_bounce_that_quotes_nothing(smtp_app, tmp_path):
    """With delivery.return_path, MAIL FROM is tagged per digest (real SMTP server), and a DSN sent back to that
    address, quoting neither the Message-ID nor the recipient we know, still finds the digest."""
    recorder = Recorder()
    with smtp_server(recorder) as port:
        app = smtp_app(port, delivery={"return_path": "bounces@example.org"})
        report = next(o for o in daily.send(app, DAY, only=ADA).outcomes if o.subscriber == ADA)
    assert report.status == "sent"
    [received] = recorder.messages
    tag = mid(app, ADA).removeprefix("<digest.").partition("@")[0]  # the Message-ID's MAC names the digest
    assert received.mail_from == f"bounces+{tag}@example.org" == tagged_sender("bounces@example.org", received.data)
    assert received.mail_from.startswith("bounces+2026-06-12.") and ADA not in received.mail_from
    forwarded = ms.postfix_dsn("ada.lovelace@forward.example.net", to=received.mail_from, report_id="<fwd@x>")
    summary = read_mailbox(app, maildir=ms.write_maildir(tmp_path / "box", [forwarded]))
    assert summary.counts["hard"] == 1 and [e for e, _ in summary.suppressed] == [ADA]
    assert app.store.delivery(ADA, DAY).status == "bounced"


def test_without_a_return_path_the_envelope_sender_is_the_from_address(smtp_app):
    """Off by default: the envelope sender stays newsletter.from_address, untagged."""
    recorder = Recorder()
    with smtp_server(recorder) as port:
        app = smtp_app(port)
        daily.send(app, DAY, only=ADA)
    assert [m.mail_from for m in recorder.messages] == [FROM]


def run_cli(folder, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "digest", *args], cwd=folder, text=True, capture_output=True,
                          timeout=120, env=cli_env())


def record_sent(site: Path, email: str, day: date = DAY) -> str:
    """Record in a sample site's store that `email`'s digest of `day` went out, with the Message-ID the commands
    make there (their DIGEST_SECRET is `cli_env`'s); returns it."""
    sent = message_id(email, day, FROM, Signer(cli_env()["DIGEST_SECRET"]).message_key)
    store = Store(f"sqlite:///{site / 'digest.db'}")
    store.enqueue(day, [email], message_id=lambda _: sent, transport="outbox")
    assert store.mark_sent(email, day, [], message_id=sent)
    store.close()
    return sent


@pytest.mark.slow
def test_the_command_names_each_bad_message_and_exits_1_and_0_once_clean(tmp_path):
    """Exit 1 with `file: message: why` for an unreadable message, the rest processed; 0 for a clean mailbox;
    2 for a folder that is not a Maildir."""
    site = sample_site(tmp_path)
    assert run_cli(site, "subscribers", "list").returncode == 0
    good = ms.postfix_dsn(ADA, original=ms.original_headers(ADA, record_sent(site, ADA)), report_id="<hard-cli@x>")
    bad = ms.damaged_dsn(report_id="<bad-cli@x>")
    result = run_cli(site, "bounces", "--maildir", str(ms.write_maildir(tmp_path / "mixed", [good, bad])))
    assert result.returncode == 1, result.stderr
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert str(tmp_path / "mixed") in error and "message" in error and "without a message/delivery-status" in error
    assert "hard 1" in result.stdout and "unreadable 1" in result.stdout and f"suppressed {ADA}" in result.stdout
    clean = run_cli(site, "bounces", "--mbox", str(ms.write_mbox(tmp_path / "clean.mbox", [ms.reply()])))
    assert clean.returncode == 0, clean.stderr
    assert "other mail 1" in clean.stdout
    missing = run_cli(site, "bounces", "--maildir", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "is not a Maildir" in missing.stderr
    status = run_cli(site, "status", "--date", "2026-06-12")
    assert "Suppressed addresses (1):" in status.stdout
    assert f"  {ADA}  since {date.today():%Y-%m-%d}: bounced: hard bounce 5.1.1 on 2026-06-12" in status.stdout


def test_bounce_settings_are_checked(tmp_path):
    """bounces.soft_limit below 1, an unknown [bounces] key or a return path that is no address: exit 2, named."""
    for toml, expected in (("[bounces]\nsoft_limit = 0\n", "bounces.soft_limit must be at least 1"),
                               ("[bounces]\nsoft_windows = 3\n", "unknown setting bounces.soft_windows"),
                               ('[delivery]\nreturn_path = "nobody"\n', "delivery.return_path must be an email")):
        folder = tmp_path / str(abs(hash(toml)))
        folder.mkdir()
        result = run_cli(sample_site(folder, toml), "bounces", "--mbox", "x.mbox")
        assert result.returncode == 2 and expected in result.stderr, result.stderr



@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000) | st.builds(lambda head, body: head + body, st.sampled_from([
    ms.postfix_dsn(ADA, report_id="<f@x>")[:400], ms.arf("To: a@b\r\n", report_id="<g@x>")[:500], b""]),
    st.binary(max_size=800)))
def test_random_bytes_are_a_report_or_unreadable_never_a_crash(data):
    """Any bytes, or a real report's head with random bytes after it: a Report, or Unreadable saying why."""
    try:
        report = parse_report(data)
    except Unreadable as exc:
        assert str(exc)
    else:
        assert report.kind in ("dsn", "arf", "bounce", "other") and report.key
