"""Hostile messages in the bounce mailbox: each limit refuses one message in one line, and the others are read.

The limits (`digest.bounces.reports`): the message's size, its header section, its MIME parts and how deeply they nest,
and the recipients one report names; a huge message is read only up to the size limit, whatever the mailbox.
A refused message is reported once (it is recorded by the hash of its bytes) and never again.
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from digest.bounces import reports
from digest.bounces.intake import read_mailbox
from digest.bounces.reports import Unreadable, parse_report

from .. import mailsamples as ms
from .test_intake import ADA, GRACE, app_with_digests, mid


def nested_multipart(levels: int, *, padding: int = 0) -> bytes:
    """`levels` multiparts each holding the next, then a text part: `levels + 1` deep, `levels` Content-Type lines."""
    head = "".join(f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n{"x" * padding}\r\n--b{i}\r\n'
                   for i in range(levels))
    return ("From: mailer@example.net\r\nSubject: deep\r\nMIME-Version: 1.0\r\n" + head + "\r\nhi\r\n").encode()


def nested_rfc822(levels: int) -> bytes:
    """`levels` message/rfc822 parts each holding the next."""
    return ("From: mailer@example.net\r\n" + "Content-Type: message/rfc822\r\n\r\n" * levels
            + "Subject: inner\r\n\r\nhi\r\n").encode()


def many_parts(count: int) -> bytes:
    """A multipart/mixed of `count - 1` text parts: `count` Content-Type lines, 2 deep."""
    parts = "".join(f"--p\r\nContent-Type: text/plain\r\n\r\npart {n}\r\n" for n in range(count - 1))
    return (f'From: mailer@example.net\r\nContent-Type: multipart/mixed; boundary="p"\r\n\r\n{parts}--p--\r\n'
            ).encode()


def sized(total: int) -> bytes:
    """A person's reply padded to exactly `total` bytes."""
    head = ms.reply()
    lines, rest = divmod(total - len(head), 80)
    return head + b"y" * 78 + b"\r\n" + (b"y" * 78 + b"\r\n") * (lines - 1) + b"z" * rest


def with_header(total: int) -> bytes:
    """A reply whose header section is exactly `total` bytes (an X-Pad header fills it)."""
    head = b"From: mailer@example.net\r\nSubject: wide\r\nX-Pad: "
    return head + b"p" * (total - len(head)) + b"\r\n\r\nhello\r\n"


def recipients(count: int) -> bytes:
    """A Postfix DSN naming `count` failed recipients."""
    extra = b"".join(b"Final-Recipient: rfc822; r%d@example.net\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n" % n
                     for n in range(count - 1))
    return ms.postfix_dsn("r-last@example.net", report_id="<many@x>").replace(b"Final-Recipient", extra
                                                                               + b"Final-Recipient", 1)


LIMITS = [  # (what, a message at the limit, one just past it, the reason given)
    ("size", sized(reports.MAX_MESSAGE_BYTES), sized(reports.MAX_MESSAGE_BYTES + 1),
     "larger than 1,000,000 bytes"),
    ("header section", with_header(reports.MAX_HEADER_BYTES), with_header(reports.MAX_HEADER_BYTES + 1),
     "a header section over 100,000 bytes"),
    ("MIME parts", many_parts(reports.MAX_MIME_PARTS), many_parts(reports.MAX_MIME_PARTS + 1),
     "101 MIME parts, more than 100"),
    ("MIME depth", nested_multipart(reports.MAX_MIME_DEPTH - 1), nested_multipart(reports.MAX_MIME_DEPTH),
     "MIME parts nested more than 20 deep"),
    ("recipients", recipients(reports.MAX_RECIPIENTS), recipients(reports.MAX_RECIPIENTS + 1),
     "names 101 recipients, more than 100"),
]


@pytest.mark.parametrize(("what", "at", "past", "reason"), LIMITS, ids=[limit[0] for limit in LIMITS])
def test_each_limit_reads_a_message_at_it_and_refuses_one_past_it(what, at, past, reason):
    """A message exactly at a limit is read; one byte, part, level or recipient more is Unreadable, saying which."""
    assert parse_report(at).kind in ("other", "dsn")
    with pytest.raises(Unreadable) as refused:
        parse_report(past)
    assert str(refused.value).startswith(reason) and "\n" not in str(refused.value)


@pytest.fixture
def mail_app(make_config, subscribers_dir):
    """The example subscribers, sent digests of DAY and the two days before (SQLite)."""
    application = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}))
    yield application
    application.close()


def test_a_deeply_nested_message_is_refused_once_and_the_others_are_read(mail_app, tmp_path):
    """The issue's case: an 80 KB message of multiparts nested 2,000 deep (and one of message/rfc822 3,000 deep)
    crashed every `digest bounces`, and the messages after it were never read. Now each is one line naming its
    file, the reports around them suppress, and the next read counts all as already processed (exit 0)."""
    deep = nested_multipart(2_000, padding=3)
    assert 80_000 < len(deep) < 130_000
    messages = [ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(mail_app, ADA)), report_id="<h@x>"),
                deep, nested_rfc822(3_000),
                ms.arf(ms.original_headers(GRACE, mid(mail_app, GRACE)), report_id="<c@x>")]
    box = ms.write_maildir(tmp_path / "box", messages)
    first = read_mailbox(mail_app, maildir=box)
    assert (first.counts["hard"], first.counts["complaint"], first.counts["unreadable"]) == (1, 1, 2), first.line()
    assert set(mail_app.store.suppressed()) == {ADA, GRACE} and not first.ok
    assert all(p.startswith(f"{box}: message ") and " MIME parts, more than 100" in p for p in first.problems)
    again = read_mailbox(mail_app, maildir=box)
    assert again.ok and again.counts["seen"] == 4 and again.counts["unreadable"] == 0, again.line()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["maildir", "mbox"])
def test_a_huge_message_is_read_only_up_to_the_limit(mail_app, tmp_path, kind):
    """A 12 MB message is refused as too large after reading at most the limit and one byte (the memory the read
    takes stays near 1 MB), and the report after it is still read."""
    huge = b"From: mailer@example.net\r\nSubject: big\r\n\r\n" + (b"y" * 78 + b"\r\n") * 150_000
    real = ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(mail_app, ADA)), report_id="<after@x>")
    path = (ms.write_maildir if kind == "maildir" else ms.write_mbox)(tmp_path / kind, [huge, real])
    tracemalloc.start()
    try:
        summary = read_mailbox(mail_app, **{kind: path})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(huge) > 10 * reports.MAX_MESSAGE_BYTES and peak < 8 * reports.MAX_MESSAGE_BYTES, peak
    [problem] = summary.problems
    assert problem.startswith(f"{path}: message ") and "larger than 1,000,000 bytes" in problem
    assert summary.counts["hard"] == 1 and ADA in mail_app.store.suppressed()


def test_a_huge_message_over_imap_is_fetched_only_up_to_the_limit(trusted, mail_app):
    """Over IMAP the message is fetched in part (BODY.PEEK[]<0.limit+1>): refused as too large, the next one read."""
    from .test_mailboxes import password

    huge = b"From: mailer@example.net\r\nSubject: big\r\n\r\n" + (b"y" * 78 + b"\r\n") * 40_000
    real = ms.postfix_dsn(ADA, original=ms.original_headers(ADA, mid(mail_app, ADA)), report_id="<imap@x>")
    url = trusted.url(trusted.fill("huge", [huge, real]))
    summary = read_mailbox(mail_app, imap=url, environ=password(trusted))
    [problem] = summary.problems
    assert problem.startswith(f"{url}: message UID ") and "larger than 1,000,000 bytes" in problem
    assert summary.counts["hard"] == 1 and ADA in mail_app.store.suppressed()


@pytest.fixture
def trusted(dovecot, monkeypatch):
    """The Dovecot server, its test CA trusted (as in test_bounces_imap)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(dovecot.ca_file))
    return dovecot


# Generated messages: MIME trees of every shape a report can take (and deeper than the limit allows), headers of
# odd sizes and bytes, then sometimes cut or spliced, so that nothing about them is well-formed by construction.
_TYPES = ["text/plain", "text/html", "message/rfc822", "message/delivery-status", "message/feedback-report",
          "text/rfc822-headers", "multipart/mixed", "multipart/report", "multipart/digest", "application/octet-stream"]
_FIELDS = ["From", "To", "Subject", "Message-ID", "Date", "Return-Path", "Delivered-To", "List-Unsubscribe",
           "X-Digest-Date", "Final-Recipient", "Original-Recipient", "Action", "Status", "Feedback-Type",
           "Original-Rcpt-To", "Diagnostic-Code", "X-Failed-Recipients", "Content-Transfer-Encoding"]
_value = st.one_of(st.text(max_size=40), st.sampled_from(["failed", "delayed", "5.1.1", "4.4.7", "abuse", "9.9",
                                                          "rfc822; ada@example.org", "<digest.2026-06-12.x@y>",
                                                          "=?utf-8?b?AA==?=", "base64", "quoted-printable"]),
                   st.builds(lambda n: "a" * n, st.integers(0, 3000)))
_headers = st.lists(st.tuples(st.sampled_from(_FIELDS), _value), max_size=6)


def _part(children: list[str], kind: str, report_type: str, headers: list[tuple[str, str]], body: str,
          boundary: str) -> str:
    fields = "".join(f"{name}: {value}\r\n" for name, value in headers)
    params = f'; boundary="{boundary}"' if kind.startswith("multipart/") else ""
    params += f"; report-type={report_type}" if kind == "multipart/report" else ""
    inner = "".join(f"--{boundary}\r\n{child}\r\n" for child in children) + f"--{boundary}--\r\n" if children else body
    return f"Content-Type: {kind}{params}\r\n{fields}\r\n{inner}"


_leaf = st.builds(_part, st.just([]), st.sampled_from(_TYPES), st.sampled_from(["delivery-status", "feedback-report"]),
                  _headers, st.text(max_size=200), st.just("x"))
_tree = st.recursive(_leaf, lambda kids: st.builds(
    _part, st.lists(kids, min_size=1, max_size=3), st.sampled_from(["multipart/mixed", "multipart/report",
                                                                    "message/rfc822", "multipart/digest"]),
    st.sampled_from(["delivery-status", "feedback-report"]), _headers, st.just(""),
    st.text("abcdefgh0123456789", min_size=1, max_size=8)), max_leaves=14)


def _message(tree: str, cut: int | None, splice: bytes) -> bytes:
    data = tree.encode("utf-8", "surrogateescape")
    if cut is not None:
        data = data[:cut]
    return data + splice


messages = st.builds(_message, _tree, st.one_of(st.none(), st.integers(0, 4000)), st.binary(max_size=50))


@pytest.mark.slow
@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(messages, min_size=1, max_size=4))
@example([nested_multipart(40), nested_rfc822(60), many_parts(120), b"\r\n\r\n", b"\x00" * 10])
def test_generated_messages_are_each_accounted_for_without_a_traceback(mail_app, tmp_path_factory, batch):
    """Any mailbox of generated messages is read to the end: every message is a report, other mail, already
    processed or unreadable with a one-line reason naming it, and the summary counts each once."""
    box = ms.write_maildir(tmp_path_factory.mktemp("fuzz") / "box", batch)
    summary = read_mailbox(mail_app, maildir=box)
    assert sum(summary.counts.values()) == len(batch), summary.line()
    assert len(summary.problems) == summary.counts["unreadable"] and not summary.stopped
    assert all(p.startswith(f"{box}: message ") and "\n" not in p for p in summary.problems)
