"""SMTP transport against real aiosmtpd servers on 127.0.0.1: TLS, AUTH, one reused connection, pacing."""

from __future__ import annotations

import socket
import time
from datetime import date

import pytest

from digest import daily
from digest.compose import preview as preview_files
from digest.delivery.message import message_id
from digest.delivery.smtp import Pacer, SmtpSettings, SmtpTransport
from digest.errors import ConfigError

from ..badsmtp import bad_smtp
from ..conftest import DAY
from ..smtpd import Recorder, make_tls, smtp_server

DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}  # on DAY, a Friday


@pytest.fixture
def tls(tmp_path):
    """A CA made for the test and a 127.0.0.1 certificate it signed."""
    return make_tls(tmp_path)


@pytest.mark.slow
def test_starttls_auth_delivers_each_digest_once_over_one_connection(smtp_app, tls, monkeypatch, tmp_path):
    """Over STARTTLS with AUTH, every due digest arrives once, as composed, on a single connection."""
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "s3cret")
    server = Recorder()
    with smtp_server(server, tls=tls, users={"digest": "s3cret"}) as port:
        app = smtp_app(port, smtp={"security": "starttls", "ca_file": str(tls.ca_file), "username": "digest",
                                   "password_env": "TEST_SMTP_PASSWORD"})
        report = daily.send(app, DAY)
        ada = app.profiles.roster().find("ada@example.org")
        [(preview, files)] = preview_files(app.composer, [ada], DAY, tmp_path / "pv")
    assert report.summary().startswith("2026-06-12: sent 4, skipped 1, failed 0, deferred 0, retried 0")
    assert server.per_recipient() == {address: 1 for address in DUE}
    assert server.connections() == 1
    assert all(m.tls and m.login == "digest" and m.mail_from == "digest@example.org" for m in server.messages)
    for received in server.messages:
        msg = received.message
        [rcpt] = received.rcpt_tos
        assert msg["To"].addresses[0].addr_spec == rcpt
        assert msg["Message-ID"] == message_id(rcpt, DAY, "digest@example.org", app.signer.message_key)
        assert [p.get_content_type() for p in msg.iter_parts()] == ["text/plain", "text/html"]
        assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
        assert msg["List-Unsubscribe"].startswith("<https://digest.example.org/unsubscribe/")
    ada = next(m.message for m in server.messages if m.rcpt_tos == ("ada@example.org",))
    assert ada["Subject"] == preview.rendered.subject
    text = ada.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert text.rstrip("\n") == files[1].read_text().rstrip("\n")
    assert "<html" in ada.get_body(("html",)).get_content()
    assert {r.status for r in app.store.deliveries_on(DAY)} == {"sent"}


@pytest.mark.parametrize("security", ["starttls", "ssl"])
def test_tcp_nodelay_is_set_on_the_tls_socket(tls, security):
    """The connection's socket has TCP_NODELAY, whether TLS starts with STARTTLS or at once."""
    server = Recorder()
    with smtp_server(server, tls=tls, implicit_tls=security == "ssl") as port:
        transport = SmtpTransport(SmtpSettings("127.0.0.1", port, security, ca_file=str(tls.ca_file), timeout=5),
                                  "digest@example.org")
        transport.send(b"Subject: hi\r\n\r\nhello\r\n", "ada@example.org", DAY)
        sock = transport._conn.sock
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        assert sock.version() is not None  # it is the TLS socket that carries the option
        transport.close()
    assert server.per_recipient() == {"ada@example.org": 1}


@pytest.mark.slow
def test_untrusted_certificate_stops_the_run_until_verification_is_turned_off(smtp_app, tls, tmp_path):
    """A certificate from an unknown CA sends nothing and says why; only verify_certificate = false accepts it."""
    (tmp_path / "other").mkdir()
    stranger = make_tls(tmp_path / "other")
    server = Recorder()
    with smtp_server(server, tls=tls) as port:
        app = smtp_app(port, smtp={"security": "starttls", "ca_file": str(stranger.ca_file)})
        report = daily.send(app, DAY)
        assert "certificate not trusted" in report.halted and "smtp.ca_file" in report.halted
        assert report.count("deferred") == 4 and report.count("sent") == 0 and not report.ok
        assert server.messages == []
        trusting = smtp_app(port, ingest=False, smtp={"security": "starttls", "verify_certificate": False})
        assert daily.send(trusting, DAY).count("sent") == 4
    assert server.per_recipient() == {address: 1 for address in DUE}


@pytest.mark.slow
def test_refused_login_stops_the_run_at_the_first_digest(smtp_app, tls, monkeypatch):
    """A wrong password is tried once, not once per digest; the rest are deferred untouched."""
    monkeypatch.setenv("TEST_SMTP_PASSWORD", "wrong")
    server = Recorder()
    with smtp_server(server, tls=tls, users={"digest": "s3cret"}) as port:
        app = smtp_app(port, smtp={"security": "starttls", "ca_file": str(tls.ca_file), "username": "digest",
                                   "password_env": "TEST_SMTP_PASSWORD"}, delivery={"attempts": 5})
        report = daily.send(app, DAY)
    assert report.halted.startswith(f"127.0.0.1:{port}: login refused: 535")
    [tried] = [o.reason for o in report.outcomes if o.status == "deferred"]
    assert "login refused" in tried and report.not_attempted == 3 and report.count("deferred") == 4
    assert report.retried == 0 and server.messages == []


def test_starttls_missing_is_never_a_fallback_to_plain_text(smtp_app):
    """A server without STARTTLS gets no message when security is starttls."""
    server = Recorder()
    with smtp_server(server) as port:
        report = daily.send(smtp_app(port, smtp={"security": "starttls"}), DAY)
    assert "does not offer STARTTLS" in report.halted
    assert server.messages == []


def test_login_needs_tls_and_a_password_from_the_environment(smtp_app, monkeypatch):
    """AUTH over plain text, or a username without its password variable, is refused before anything is sent."""
    monkeypatch.delenv("DIGEST_SMTP_PASSWORD", raising=False)
    with pytest.raises(ConfigError, match="DIGEST_SMTP_PASSWORD"):
        daily.send(smtp_app(1, smtp={"security": "starttls", "username": "digest"}), DAY)
    monkeypatch.setenv("DIGEST_SMTP_PASSWORD", "x")
    app = smtp_app(1, ingest=False, smtp={"security": "none", "username": "digest"})
    with pytest.raises(ConfigError, match="plain text"):
        daily.send(app, DAY)
    assert app.store.deliveries_on(DAY) == []


def test_new_connection_after_messages_per_connection(smtp_app):
    """With messages_per_connection = 3, four digests go over two connections."""
    server = Recorder()
    with smtp_server(server) as port:
        report = daily.send(smtp_app(port, smtp={"messages_per_connection": 3}), DAY)
    assert report.count("sent") == 4 and server.connections() == 2


def test_server_closing_the_connection_between_messages_is_not_a_failure(smtp_app):
    """When the server hangs up after each message, the next one reconnects without a retry or a delay."""
    server = Recorder(hang_up_after_each=True)
    with smtp_server(server) as port:
        app = smtp_app(port, delivery={"retry_delay": 30})
        started = time.monotonic()
        report = daily.send(app, DAY)
    assert report.count("sent") == 4 and report.retried == 0
    assert server.connections() == 4 and time.monotonic() - started < 10


def test_max_per_second_spaces_messages():
    """At max_per_second = 20, eight messages take at least 7/20 s on the server's clock."""
    arrivals: list[float] = []
    server = Recorder(on_message=lambda _: arrivals.append(time.monotonic()))
    with smtp_server(server) as port:
        transport = SmtpTransport(SmtpSettings("127.0.0.1", port, "none", max_per_second=20), "digest@example.org")
        for i in range(8):
            transport.send(b"Subject: hi\r\n\r\nhello\r\n", f"r{i}@example.org", DAY)
        transport.close()
    assert len(arrivals) == 8 and arrivals[-1] - arrivals[0] >= 0.34


def test_max_per_hour_waits_for_the_oldest_message_to_age_out():
    """With max_per_hour = 3, the fourth message waits until an hour after the first."""
    clock = FakeClock()
    pacer = Pacer(0, 3, clock=clock, sleep=clock.advance)
    for _ in range(3):
        pacer.wait()
        clock.advance(10)
    pacer.wait()
    assert clock.now == 3600


class FakeClock:
    """A monotonic clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("pipelining", [True, False])
def test_bytes_arrive_exactly_as_given(pipelining):
    """The server receives the very bytes handed over: lines of dots, a lone dot, no final line break."""
    server = Recorder(pipelining=pipelining)
    messages = [b"Subject: a\r\n\r\n.leading dot\r\n", b".\r\n..\r\nx\r\n.\r\n", b"Subject: b\r\n\r\nno end"]
    with smtp_server(server) as port:
        transport = SmtpTransport(SmtpSettings("127.0.0.1", port, "none"), "digest@example.org")
        for data in messages:
            transport.send(data, "a@example.org", date(2000, 1, 1))
        transport.close()
    assert [m.data for m in server.messages] == messages[:2] + [b"Subject: b\r\n\r\nno end\r\n"]


@pytest.mark.parametrize("pipelining", [True, False])
def test_each_refusal_is_reported_at_its_stage_and_the_connection_goes_on(pipelining):
    """Pipelined or not: a refused sender, recipient or message raises for its own stage with the reply, and the
    next message on the same connection is delivered."""
    from digest.errors import PermanentFailure, TemporaryFailure

    server = Recorder(pipelining=pipelining, rcpt=lambda a: "550 5.1.1 no such user" if a.startswith("gone") else
                      "451 4.7.1 greylisted" if a.startswith("later") else None,
                      data=lambda a: "554 5.7.1 spam" if a.startswith("spam") else None)
    outcomes = {}
    with smtp_server(server) as port:
        transport = SmtpTransport(SmtpSettings("127.0.0.1", port, "none"), "digest@example.org")
        for who in ("gone", "later", "spam", "fine"):
            try:
                transport.send(b"Subject: x\r\n\r\nhi\r\n", f"{who}@example.org", date(2000, 1, 1))
                outcomes[who] = "sent"
            except (PermanentFailure, TemporaryFailure) as exc:
                outcomes[who] = f"{exc.__class__.__name__}: {exc}"
        connections = transport.connections
        assert transport._conn is not None and transport._conn.has_extn("pipelining") == pipelining
        transport.close()
    assert outcomes == {"gone": "PermanentFailure: RCPT TO: 550 5.1.1 no such user",
                        "later": "TemporaryFailure: RCPT TO: 451 4.7.1 greylisted",
                        "spam": "PermanentFailure: DATA: 554 5.7.1 spam", "fine": "sent"}
    assert connections == 1 and server.per_recipient() == {"fine@example.org": 1}


def test_a_refused_sender_is_reported_at_mail_from_when_pipelining():
    """A pipelined MAIL FROM refused (with RCPT and DATA refused in turn) is one failure at MAIL FROM."""
    from digest.errors import PermanentFailure

    server = Recorder(mail=lambda _sender: "553 5.7.1 sender not allowed")
    with smtp_server(server) as port:
        transport = SmtpTransport(SmtpSettings("127.0.0.1", port, "none"), "digest@example.org")
        with pytest.raises(PermanentFailure, match=r"^MAIL FROM: 553 5\.7\.1 sender not allowed$"):
            transport.send(b"Subject: x\r\n\r\nhi\r\n", "a@example.org", date(2000, 1, 1))
        transport.close()
    assert server.messages == []


@pytest.mark.slow
@pytest.mark.parametrize("pipelining", [False, True])
def test_a_server_that_answers_the_end_of_data_after_the_timeout_gets_the_digest_once(smtp_app, pipelining):
    """The reply to the end of the message may take up to 10 minutes (RFC 5321 §4.5.3.2.6), within smtp.deadline,
    not smtp.timeout: a server that answers it 1 s after the timeout (it scans what it took) gets the digest once,
    recorded as sent, instead of once per try."""
    with bad_smtp("slow-data", delay=1.5, pipelining=pipelining) as server:
        app = smtp_app(server.port, smtp={"timeout": 0.5, "deadline": 10})
        report = daily.send(app, DAY, only="ada@example.org")
    assert server.recipients == ["ada@example.org"]
    assert report.count("sent") == 1 and report.ok and report.retried == 0
    assert [(r.subscriber, r.status) for r in app.store.deliveries_on(DAY)] == [("ada@example.org", "sent")]
