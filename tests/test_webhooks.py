"""Provider webhooks on a real `digest serve`: the providers' documented payloads, signed with keys made here,
matched and recorded as `digest bounces` records a mailbox; a bad or missing signature is 401 and changes nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from standardwebhooks.webhooks import Webhook

from digest.store.tables import bounces, deliveries, mail_reports

from . import mailsamples as ms
from .conftest import DAY
from .test_bounces import ADA, ALAN, GRACE, KATHERINE, app_with_digests, mid
from .web_server import Server

MAILGUN_KEY = "key-" + "3" * 32
POSTMARK_PASSWORD = "postmark-hook-password"
RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-secret-32-bytes-long").decode()
SENDGRID_KEY = ec.generate_private_key(ec.SECP256R1())
SENDGRID_PUBLIC = base64.b64encode(SENDGRID_KEY.public_key().public_bytes(
    serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()


@pytest.fixture
def hooked(make_config, subscribers_dir, monkeypatch):
    """`digest serve` over the example subscribers, their digests of DAY sent, every provider's secret set."""
    for name, value in (("DIGEST_MAILGUN_SIGNING_KEY", MAILGUN_KEY), ("DIGEST_POSTMARK_WEBHOOK_PASSWORD",
                        POSTMARK_PASSWORD), ("DIGEST_SENDGRID_VERIFICATION_KEY", SENDGRID_PUBLIC),
                        ("DIGEST_RESEND_WEBHOOK_SECRET", RESEND_SECRET)):
        monkeypatch.setenv(name, value)
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}))
    server = Server(app)
    yield server
    server.close()
    app.close()


def state(server: Server) -> tuple[dict[str, str], list[tuple], dict[str, str]]:
    """Suppressions, bounce rows and the send log of DAY: what a webhook may change."""
    store = server.app.store
    with store.engine.connect() as conn:
        rows = sorted(tuple(r) for r in conn.execute(
            sa.select(bounces.c.report, bounces.c.email, bounces.c.kind, bounces.c.status)))
        log = {r.subscriber: r.status for r in conn.execute(sa.select(deliveries).where(
            deliveries.c.digest_date == DAY))}
    return store.suppressed(), rows, log


def reports(server: Server) -> dict[str, str]:
    with server.app.store.engine.connect() as conn:
        return dict(conn.execute(sa.select(mail_reports.c.key, mail_reports.c.outcome)).all())


# -- Mailgun (documentation: "Securing Webhooks", the `failed` / `complained` event samples) ---------------------

def mailgun_body(event: dict, *, key: str = MAILGUN_KEY, at: float | None = None) -> bytes:
    timestamp, token = str(int(at or time.time())), secrets.token_hex(25)
    signature = hmac.new(key.encode(), (timestamp + token).encode(), hashlib.sha256).hexdigest()
    return json.dumps({"signature": {"timestamp": timestamp, "token": token, "signature": signature},
                       "event-data": event}).encode()


def mailgun_failed(app, recipient: str, event_id: str, *, severity: str = "permanent") -> dict:
    return {"id": event_id, "timestamp": 1781254800.375624, "log-level": "error", "event": "failed",
            "severity": severity, "reason": "bounce",
            "delivery-status": {"attempt-no": 1, "code": 550, "session-seconds": 0.4,
                                "message": "5.1.1 The email account that you tried to reach does not exist",
                                "description": ""},
            "envelope": {"sender": "digest@example.org", "transport": "smtp", "targets": recipient},
            "message": {"headers": {"to": recipient, "message-id": mid(app, recipient)[1:-1],
                                    "from": "Paper Digest <digest@example.org>", "subject": "Your papers"},
                        "attachments": [], "size": 4111},
            "recipient": recipient, "recipient-domain": recipient.split("@")[1], "tags": [], "campaigns": [],
            "user-variables": {}, "flags": {"is-routed": False, "is-authenticated": True, "is-test-mode": False}}


def test_mailgun_hard_bounce_suppresses_once_and_a_retry_changes_nothing(hooked):
    """A signed `failed` (permanent, 5.1.1) event naming Ada's digest: suppressed, the digest marked bounced;
    the same event again (Mailgun retries) answers 200 and records nothing more."""
    body = mailgun_body(mailgun_failed(hooked.app, ADA, "G9Bn5sl1TC6nu79C8C0bwg"))
    first = hooked.client.post("/webhooks/mailgun", content=body, headers={"Content-Type": "application/json"})
    assert first.status_code == 200 and "recorded 1" in first.text
    suppressed, rows, log = state(hooked)
    assert suppressed[ADA].startswith("bounced: hard bounce 5.1.1") and log[ADA] == "bounced"
    assert rows == [("mailgun:G9Bn5sl1TC6nu79C8C0bwg", ADA, "hard", "5.1.1")]
    again = hooked.client.post("/webhooks/mailgun", content=body)
    assert again.status_code == 200 and "already recorded 1" in again.text
    assert state(hooked) == (suppressed, rows, log)


def test_mailgun_complaint_and_temporary_failure(hooked):
    """`complained` unsubscribes as a complaint; a temporary failure is a soft bounce that suppresses nobody yet."""
    complaint = {**mailgun_failed(hooked.app, GRACE, "c-1"), "event": "complained", "severity": None}
    temporary = mailgun_failed(hooked.app, KATHERINE, "t-1", severity="temporary")
    for event in (complaint, temporary):
        assert hooked.client.post("/webhooks/mailgun", content=mailgun_body(event)).status_code == 200
    suppressed, rows, _ = state(hooked)
    assert suppressed[GRACE].startswith("complaint:") and KATHERINE not in suppressed
    assert ("mailgun:t-1", KATHERINE, "soft", "5.1.1") in rows


@pytest.mark.parametrize("tamper", ["other key", "stale", "no signature", "not json"])
def test_mailgun_bad_signature_is_401_and_changes_nothing(hooked, tamper):
    """Signed with another key, signed an hour ago (Mailgun signs the timestamp and token, not the event, so an
    old signature could carry any event), unsigned, or not JSON at all: refused, nothing recorded."""
    event = mailgun_failed(hooked.app, ADA, "forged-1")
    body = {"other key": lambda: mailgun_body(event, key="key-attacker"),
            "stale": lambda: mailgun_body(event, at=time.time() - 3600),
            "no signature": lambda: json.dumps({"event-data": event}).encode(),
            "not json": lambda: b"signature=abc"}[tamper]()
    before = state(hooked)
    response = hooked.client.post("/webhooks/mailgun", content=body)
    assert response.status_code == (400 if tamper == "not json" else 401), response.text
    assert state(hooked) == before and reports(hooked) == {}


def test_an_event_naming_a_subscriber_by_address_alone_suppresses_nobody(hooked):
    """A validly signed event whose Message-ID is not one of our digests' (anyone can name an address): recorded
    as unmatched, nobody suppressed."""
    event = mailgun_failed(hooked.app, ALAN, "unmatched-1")
    event["message"]["headers"]["message-id"] = "20260612.abc@mailgun.example.net"
    assert hooked.client.post("/webhooks/mailgun", content=mailgun_body(event)).status_code == 200
    assert ALAN not in state(hooked)[0] and reports(hooked) == {"mailgun:unmatched-1": "unmatched"}


# -- Postmark (documentation: "Bounce webhook" and "Spam complaint webhook" samples) -----------------------------

def postmark_bounce(app, recipient: str, record_id: int, *, record: str = "Bounce", kind: str = "HardBounce") -> dict:
    dsn = ms.postfix_dsn(recipient, original=ms.original_headers(recipient, mid(app, recipient)))
    return {"RecordType": record, "MessageStream": "outbound", "ID": record_id, "Type": kind, "TypeCode": 1,
            "Name": "Hard bounce", "Tag": "digest", "MessageID": "883953f4-6105-42a2-a16a-77a8eac79483",
            "Metadata": {}, "ServerID": 23,
            "Description": "The server was unable to deliver your message (ex: unknown user, mailbox not found).",
            "Details": "smtp;550 5.1.1 The email account that you tried to reach does not exist.",
            "Email": recipient, "From": "digest@example.org", "BouncedAt": "2026-06-12T16:33:54.9070259Z",
            "DumpAvailable": True, "Inactive": True, "CanActivate": True, "Subject": "Your papers",
            "Content": dsn.decode()}


def test_postmark_needs_its_password_then_records_bounces_and_complaints(hooked):
    """Without the basic-auth password, or with another: 401, nothing changes. With it: the hard bounce
    (matched through the bounce dump's quoted Message-ID) suppresses Ada, the spam complaint Grace."""
    body = json.dumps(postmark_bounce(hooked.app, ADA, 4323372036854775807)).encode()
    for auth in (None, ("postmark", "wrong")):
        response = hooked.client.post("/webhooks/postmark", content=body, auth=auth)
        assert response.status_code == 401 and reports(hooked) == {}
    complaint = postmark_bounce(hooked.app, GRACE, 4323372036854775808, record="SpamComplaint",
                                kind="SpamComplaint")
    for payload in (body, json.dumps(complaint).encode()):
        assert hooked.client.post("/webhooks/postmark", content=payload,
                                  auth=("postmark", POSTMARK_PASSWORD)).status_code == 200
    suppressed, _, log = state(hooked)
    assert suppressed[ADA].startswith("bounced: hard bounce 5.1.1") and log[ADA] == "bounced"
    assert suppressed[GRACE].startswith("complaint:")


# -- SendGrid (documentation: "Event Webhook" sample events; "Signed Event Webhook Requests") --------------------

def sendgrid_post(server: Server, events: list[dict], *, key: ec.EllipticCurvePrivateKey = SENDGRID_KEY,
                  alter: bytes = b""):
    body = json.dumps(events).encode()
    timestamp = str(int(time.time()))
    signature = base64.b64encode(key.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))).decode()
    return server.client.post("/webhooks/sendgrid", content=body + alter, headers={
        "Content-Type": "application/json", "X-Twilio-Email-Event-Webhook-Signature": signature,
        "X-Twilio-Email-Event-Webhook-Timestamp": timestamp})


def sendgrid_events(app) -> list[dict]:
    return [
        {"email": KATHERINE, "timestamp": 1781254800, "smtp-id": mid(app, KATHERINE), "event": "bounce",
         "category": ["digest"], "sg_event_id": "6g4ZI7SA-xmRDv57GoPIPw==",
         "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",
         "reason": "500 unknown recipient", "status": "5.0.0", "type": "bounce"},
        {"email": GRACE, "timestamp": 1781254801, "smtp-id": mid(app, GRACE), "event": "spamreport",
         "sg_event_id": "37nvH5QBz858KGVYCM4uOA==", "sg_message_id": "14c5d75ce93.dfd.64b469.filter0001"},
        {"email": ALAN, "timestamp": 1781254802, "smtp-id": mid(app, ALAN), "event": "delivered",
         "response": "250 OK", "sg_event_id": "rWVYmVk90MjZJ9iohOBa3w==", "sg_message_id": "14c5d75ce93.dfd"},
    ]


def test_sendgrid_signed_batch_records_each_event_once(hooked):
    """An ECDSA-signed batch: the bounce suppresses Katherine, the spam report Grace, the delivery is dropped;
    the batch again records nothing more."""
    assert sendgrid_post(hooked, sendgrid_events(hooked.app)).status_code == 200
    suppressed, rows, log = state(hooked)
    assert suppressed[KATHERINE].startswith("bounced: hard bounce 5.0.0") and log[KATHERINE] == "bounced"
    assert suppressed[GRACE].startswith("complaint:") and ALAN not in suppressed
    assert sorted(reports(hooked)) == ["sendgrid:37nvH5QBz858KGVYCM4uOA==", "sendgrid:6g4ZI7SA-xmRDv57GoPIPw=="]
    assert "already recorded 2" in sendgrid_post(hooked, sendgrid_events(hooked.app)).text
    assert state(hooked) == (suppressed, rows, log)


def test_sendgrid_bad_signature_is_401_and_changes_nothing(hooked):
    """Signed by another key, a body altered after signing, or no signature header: 401, nothing recorded."""
    other = ec.generate_private_key(ec.SECP256R1())
    assert sendgrid_post(hooked, sendgrid_events(hooked.app), key=other).status_code == 401
    assert sendgrid_post(hooked, sendgrid_events(hooked.app), alter=b" ").status_code == 401
    unsigned = hooked.client.post("/webhooks/sendgrid", content=json.dumps(sendgrid_events(hooked.app)))
    assert unsigned.status_code == 401 and reports(hooked) == {} and state(hooked)[0] == {}


def test_sendgrid_limits_events_and_body(hooked):
    """A signed batch of 1,001 events is refused whole (400); a body over 64 KiB is 413; nothing recorded."""
    many = [{"event": "open", "sg_event_id": str(i)} for i in range(1001)]  # 1,001 fit in 64 KiB
    assert sendgrid_post(hooked, many).status_code == 400
    assert sendgrid_post(hooked, many[:1000]).status_code == 200  # at the limit: read (opens: nothing to record)
    huge = [{**sendgrid_events(hooked.app)[0], "reason": "x" * 70_000}]
    assert sendgrid_post(hooked, huge).status_code == 413
    assert state(hooked)[0] == {}


# -- Resend (documentation: "email.bounced" event; Svix signatures) ------------------------------------------------

def resend_post(server: Server, event: dict, *, secret: str = RESEND_SECRET, at: datetime | None = None):
    body = json.dumps(event)
    msg_id, when = f"msg_{secrets.token_hex(8)}", at or datetime.now(UTC)
    signature = Webhook(secret).sign(msg_id, when, body)
    return server.client.post("/webhooks/resend", content=body.encode(), headers={
        "svix-id": msg_id, "svix-timestamp": str(int(when.timestamp())), "svix-signature": signature})


def resend_bounced(app, recipient: str) -> dict:
    return {"type": "email.bounced", "created_at": "2026-06-12T23:41:12.126Z",
            "data": {"created_at": "2026-06-12T23:41:11.894719+00:00",
                     "email_id": "56761188-7520-42d8-8898-ff6fc54ce618", "from": "Paper Digest <digest@example.org>",
                     "to": [recipient], "subject": "Your papers",
                     "headers": [{"name": "Message-ID", "value": mid(app, recipient)}],
                     "bounce": {"message": "The recipient's email provider sent a hard bounce message: 550 5.1.1 "
                                "user unknown", "subType": "Suppressed", "type": "Permanent"}}}


def test_resend_svix_signed_bounce_suppresses(hooked):
    """A Svix-signed `email.bounced` naming Alan's digest: suppressed as a hard bounce."""
    assert resend_post(hooked, resend_bounced(hooked.app, ALAN)).status_code == 200
    assert state(hooked)[0][ALAN].startswith("bounced: hard bounce 5.1.1")


def test_resend_bad_or_stale_signature_is_401(hooked):
    """Another secret, or a signature made an hour ago (Svix allows five minutes): 401, nothing recorded."""
    other = "whsec_" + base64.b64encode(b"another-secret-another-secret-32").decode()
    assert resend_post(hooked, resend_bounced(hooked.app, ALAN), secret=other).status_code == 401
    stale = datetime.fromtimestamp(time.time() - 3600, UTC)
    assert resend_post(hooked, resend_bounced(hooked.app, ALAN), at=stale).status_code == 401
    assert reports(hooked) == {} and state(hooked)[0] == {}


def test_a_provider_without_its_secret_is_not_served(make_config, subscribers_dir, monkeypatch):
    """With no secret in the environment (or an empty one) the endpoint is 404, whatever is posted."""
    monkeypatch.delenv("DIGEST_MAILGUN_SIGNING_KEY", raising=False)
    monkeypatch.setenv("DIGEST_SENDGRID_VERIFICATION_KEY", " ")
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}))
    server = Server(app)
    try:
        for provider in ("mailgun", "sendgrid", "postmark", "resend", "nosuch"):
            assert server.client.post(f"/webhooks/{provider}", content=b"{}").status_code == 404
    finally:
        server.close()
        app.close()
