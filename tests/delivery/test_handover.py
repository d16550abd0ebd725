"""Delivery failures as RFC 5321 sorts them, against real servers: 4xx retried, 5xx bounced, drops survived."""

from __future__ import annotations

import hashlib
from collections import Counter
from datetime import timedelta

import pytest

from digest import daily
from digest.delivery.message import message_id

from ..conftest import DAY, SEEDS, SUBSCRIBERS
from ..smtpd import Recorder, free_port, smtp_server

DUE = {"ada@example.org", "alan@example.org", "grace@example.org", "margaret@example.org"}  # on DAY, a Friday
NEXT = DAY + timedelta(days=3)  # the Monday after: every example subscriber is due


def first(n: int, reply: str, only: str | None = None):
    """A hook answering `reply` to the first `n` attempts (for one address, or for any)."""
    seen: Counter[str] = Counter()

    def hook(address: str) -> str | None:
        if only and address != only:
            return None
        seen[address] += 1
        return reply if seen[address] <= n else None

    return hook


def always(reply: str, *addresses: str):
    return lambda address: reply if address in addresses else None


@pytest.mark.slow
def test_4xx_and_421_are_retried_within_the_run(smtp_app):
    """451 to RCPT twice and 421 to MAIL once are retried with backoff; each digest arrives exactly once."""
    server = Recorder(rcpt=first(2, "451 4.7.1 Greylisted, try again", only="ada@example.org"),
                      mail=first(1, "421 4.3.2 Service shutting down"))
    with smtp_server(server) as port:
        app = smtp_app(port, delivery={"attempts": 4})
        report = daily.send(app, DAY)
    by = {o.subscriber: o for o in report.outcomes}
    assert report.count("sent") == 4 and report.ok
    assert by["ada@example.org"].retries == 3  # 421 once, then 451 twice
    assert server.per_recipient() == {address: 1 for address in DUE}
    assert server.rcpt_attempts["ada@example.org"] == 3
    assert "retried 1," in report.summary()
    record = app.store.delivery("ada@example.org", DAY)
    assert (record.status, record.attempts) == ("sent", 4)


@pytest.mark.slow
def test_lasting_4xx_leaves_the_digest_pending_for_the_next_run(smtp_app):
    """After `attempts` 4xx replies the digest stays pending with the reply; the next run sends it once."""
    with smtp_server(Recorder(rcpt=always("452 4.2.2 Mailbox full", "grace@example.org"))) as port:
        app = smtp_app(port, delivery={"attempts": 2})
        report = daily.send(app, DAY)
    by = {o.subscriber: o for o in report.outcomes}
    assert (by["grace@example.org"].status, by["grace@example.org"].retries) == ("deferred", 1)
    assert report.count("sent") == 3 and not report.ok
    assert "deferred 1, retried 1, suppressed 0" in report.summary()
    record = app.store.delivery("grace@example.org", DAY)
    assert record.status == "pending" and "452 4.2.2 Mailbox full" in record.detail
    healthy = Recorder()
    with smtp_server(healthy) as port:
        again = daily.send(smtp_app(port, ingest=False), DAY)
    assert healthy.per_recipient() == {"grace@example.org": 1} and again.count("sent") == 1
    assert healthy.messages[0].message["Message-ID"] == message_id("grace@example.org", DAY, "digest@example.org",
                                                                   app.signer.message_key)


@pytest.mark.slow
def test_550_fails_one_recipient_suppresses_it_and_leaves_its_profile_alone(smtp_app):
    """A 550 for two recipients records the server's reply and suppresses them; the others are delivered."""
    profiles = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SUBSCRIBERS.glob("*.toml")}
    reply = "550 5.1.1 <{}>: Recipient address rejected: User unknown"
    server = Recorder(rcpt=lambda a: reply.format(a) if a in ("grace@example.org", "alan@example.org") else None)
    with smtp_server(server) as port:
        app = smtp_app(port)
        report = daily.send(app, DAY)
        by = {o.subscriber: o for o in report.outcomes}
        assert report.summary().startswith("2026-06-12: sent 2, skipped 1, failed 2, deferred 0, retried 0, "
                                           "suppressed 2")
        assert by["grace@example.org"].reason == "RCPT TO: " + reply.format("grace@example.org")
        assert server.per_recipient() == {"ada@example.org": 1, "margaret@example.org": 1}
        assert app.store.delivery("grace@example.org", DAY).status == "bounced"
        assert app.store.suppressed()["grace@example.org"].startswith("bounced: RCPT TO: 550 5.1.1")
        app.ingest([SEEDS], seen_on=NEXT)
        later = daily.send(app, NEXT)
    by = {o.subscriber: o for o in later.outcomes}
    assert by["grace@example.org"].status == "skipped" and "suppressed (bounced" in by["grace@example.org"].reason
    assert server.rcpt_attempts["grace@example.org"] == 1
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SUBSCRIBERS.glob("*.toml")} == profiles


@pytest.mark.slow
def test_suppress_after_counts_bounced_digests_in_a_row(smtp_app):
    """With suppress_after = 2 one bounce is not enough; a rerun does not repeat it; a second digest's is."""
    server = Recorder(rcpt=always("550 5.1.1 No such user", "grace@example.org"))
    with smtp_server(server) as port:
        app = smtp_app(port, delivery={"suppress_after": 2})
        assert daily.send(app, DAY, only="grace@example.org").suppressed == 0
        rerun = daily.send(app, DAY, only="grace@example.org")
        assert rerun.outcomes[0].reason.startswith("bounced on this date: RCPT TO: 550")
        assert server.rcpt_attempts["grace@example.org"] == 1
        app.ingest([SEEDS], seen_on=NEXT)
        assert daily.send(app, NEXT, only="grace@example.org").suppressed == 1
    assert "grace@example.org" in app.store.suppressed()


def test_policy_rejection_fails_without_suppressing(smtp_app):
    """554 5.7.1 (relay denied) is a permanent failure of that digest, not a bad address: no suppression."""
    server = Recorder(rcpt=always("554 5.7.1 Relay access denied", *DUE))
    with smtp_server(server) as port:
        app = smtp_app(port)
        report = daily.send(app, DAY)
    assert report.count("failed") == 4 and report.suppressed == 0
    assert app.store.suppressed() == {}
    assert {r.status for r in app.store.deliveries_on(DAY)} == {"failed"}


@pytest.mark.slow
def test_connection_dropped_in_the_middle_of_data_is_retried(smtp_app):
    """A server hanging up during the message body: the digest is resent on a new connection, once complete."""
    server = Recorder(drop_in_data=1)
    with smtp_server(server) as port:
        app = smtp_app(port)
        report = daily.send(app, DAY)
    assert report.count("sent") == 4 and report.retried == 1
    dropped = next(o for o in report.outcomes if o.retries)
    assert dropped.subscriber == "ada@example.org"
    assert server.per_recipient() == {address: 1 for address in DUE}
    ada = next(m for m in server.messages if m.rcpt_tos == ("ada@example.org",))
    assert ada.message.get_body(("html",)).get_content().rstrip().endswith("</html>")
    assert app.mailer.transport.connections == 2


@pytest.mark.slow
def test_unreachable_server_defers_everything_and_loses_nothing(smtp_app):
    """With nothing listening, the run stops after the retries; every due digest is sent by the next run."""
    port = free_port()
    app = smtp_app(port, delivery={"attempts": 2, "batch_size": 2})
    report = daily.send(app, DAY)
    assert report.halted.startswith(f"cannot connect to 127.0.0.1:{port}")
    assert report.count("deferred") == 4 and report.count("sent") == 0
    assert report.others == 0 and "other workers" not in report.summary()  # the rest wait; nobody else took them
    # the one tried waits as pending; the others were never claimed and stay queued for the next run
    assert sorted(r.status for r in app.store.deliveries_on(DAY)) == ["pending", "queued", "queued", "queued"]
    server = Recorder()
    with smtp_server(server) as port:
        again = daily.send(smtp_app(port, ingest=False), DAY)
    assert again.count("sent") == 4 and server.per_recipient() == {address: 1 for address in DUE}


def test_a_message_that_cannot_be_signed_fails_alone(smtp_app, monkeypatch):
    """Serialising or signing one message raises: that digest fails with the reason, every other one is sent."""
    server = Recorder()
    with smtp_server(server) as port:
        app = smtp_app(port)
        wire = app.mailer.wire

        def wire_or_fail(message):
            if message["To"].addresses[0].addr_spec == "grace@example.org":
                raise ValueError("the signing key went away")
            return wire(message)

        monkeypatch.setattr(app.mailer, "wire", wire_or_fail)
        report = daily.send(app, DAY)
    by = {o.subscriber: o for o in report.outcomes}
    assert server.per_recipient() == {address: 1 for address in DUE - {"grace@example.org"}}
    assert by["grace@example.org"].status == "failed" and "the signing key went away" in by["grace@example.org"].reason
    assert app.store.delivery("grace@example.org", DAY).status == "failed"
    assert report.count("sent") == 3 and not report.ok


def test_a_rerun_counts_each_subscriber_once_when_sent_and_suppressed_since(smtp_app):
    """Sent today, then unsubscribed: a second send of the day skips each subscriber once (it counted a digest
    both settled and suppressed twice: 'skipped 6' of 5 subscribers)."""
    server = Recorder()
    with smtp_server(server) as port:
        app = smtp_app(port)
        first = daily.send(app, DAY)
        sent = {o.subscriber for o in first.outcomes if o.status == "sent"}
        assert len(sent) >= 2
        unsubscribed = sorted(sent)[0]
        app.store.suppress(unsubscribed.lower(), "unsubscribed")
        again = daily.send(app, DAY)
    skipped = [o.subscriber for o in again.outcomes if o.status == "skipped"]
    assert sorted(skipped) == sorted(set(skipped))  # nobody named twice
    assert again.count("skipped") == first.count("sent") + first.count("skipped") == len(skipped)
    assert again.count("sent") == 0 and len(server.messages) == len(sent)
