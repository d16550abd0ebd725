"""Provider webhooks on a real `digest serve`: the providers' documented payloads, signed with keys made here,
matched and recorded as `digest bounces` records a mailbox; a bad or missing signature is 401 and changes nothing."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import NameOID
from standardwebhooks.webhooks import Webhook

from digest.bounces.webhooks import sns_url_ok
from digest.store.tables import bounces, deliveries, mail_reports, webhook_tokens

from .. import mailsamples as ms
from ..conftest import DAY
from ..http_server import Reply, ScriptedServer
from ..web.test_metrics import scrape, value
from ..web_server import Server
from .test_intake import ADA, ALAN, GRACE, KATHERINE, app_with_digests, mid

MAILGUN_KEY = "key-" + "3" * 32
POSTMARK_PASSWORD = "postmark-hook-password"
RESEND_SECRET = "whsec_" + base64.b64encode(b"resend-test-secret-32-bytes-long").decode()
SENDGRID_KEY = ec.generate_private_key(ec.SECP256R1())
SENDGRID_PUBLIC = base64.b64encode(SENDGRID_KEY.public_key().public_bytes(
    serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)).decode()


def serving(make_config, subscribers_dir, monkeypatch, store: dict[str, str]):
    """`digest serve` over the example subscribers, their digests of DAY sent, every provider's secret set."""
    for name, secret in (("DIGEST_MAILGUN_SIGNING_KEY", MAILGUN_KEY), ("DIGEST_POSTMARK_WEBHOOK_PASSWORD",
                         POSTMARK_PASSWORD), ("DIGEST_SENDGRID_VERIFICATION_KEY", SENDGRID_PUBLIC),
                         ("DIGEST_RESEND_WEBHOOK_SECRET", RESEND_SECRET)):
        monkeypatch.setenv(name, secret)
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}, store=store))
    server = Server(app)
    yield server
    server.close()
    app.close()


@pytest.fixture
def hooked(make_config, subscribers_dir, monkeypatch):
    """The server on SQLite."""
    yield from serving(make_config, subscribers_dir, monkeypatch, {})


@pytest.fixture
def hooked_both(make_config, subscribers_dir, monkeypatch, store_url):
    """The server on SQLite and on PostgreSQL."""
    yield from serving(make_config, subscribers_dir, monkeypatch, {"url": store_url})


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
    the same event again under a fresh signature (Mailgun retries) answers 200 and records nothing more."""
    event = mailgun_failed(hooked.app, ADA, "G9Bn5sl1TC6nu79C8C0bwg")
    first = hooked.client.post("/webhooks/mailgun", content=mailgun_body(event),
                               headers={"Content-Type": "application/json"})
    assert first.status_code == 200 and "recorded 1" in first.text
    suppressed, rows, log = state(hooked)
    assert suppressed[ADA].startswith("bounced: hard bounce 5.1.1") and log[ADA] == "bounced"
    assert rows == [("mailgun:G9Bn5sl1TC6nu79C8C0bwg", ADA, "hard", "5.1.1")]
    again = hooked.client.post("/webhooks/mailgun", content=mailgun_body(event))
    assert again.status_code == 200 and "already recorded 1" in again.text
    assert state(hooked) == (suppressed, rows, log)


def tokens(server: Server) -> list[tuple[str, datetime]]:
    with server.app.store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(sa.select(webhook_tokens.c.key, webhook_tokens.c.expires_at))]


def test_a_mailgun_signature_is_taken_once(hooked):
    """Mailgun signs the timestamp and token, not the event. A correctly signed request sent twice: the second is
    refused (406: Mailgun retries nothing it got 406 for) and records nothing; the same signature carrying other
    event-data, a complaint naming Grace's real digest, is refused the same way and suppresses nobody."""
    body = mailgun_body(mailgun_failed(hooked.app, KATHERINE, "t-once", severity="temporary"))
    assert hooked.client.post("/webhooks/mailgun", content=body).status_code == 200
    before, recorded = state(hooked), reports(hooked)
    assert recorded == {"mailgun:t-once": "soft"}
    again = hooked.client.post("/webhooks/mailgun", content=body)
    assert again.status_code == 406 and "used already" in again.text
    signature = json.loads(body)["signature"]
    other = {**mailgun_failed(hooked.app, GRACE, "replayed-1"), "event": "complained", "severity": None}
    replayed = hooked.client.post("/webhooks/mailgun", content=json.dumps({"signature": signature,
                                                                           "event-data": other}).encode())
    assert replayed.status_code == 406
    assert state(hooked) == before and reports(hooked) == recorded and GRACE not in before[0]
    [(key, expires)] = tokens(hooked)  # kept by its hash, until the signature would be stale anyway
    assert signature["token"] not in key and expires > datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=15)
    fresh = mailgun_body(other)  # the same complaint under a signature of its own is Mailgun's: taken
    assert hooked.client.post("/webhooks/mailgun", content=fresh).status_code == 200
    assert state(hooked)[0][GRACE].startswith("complaint:")


def test_expired_mailgun_tokens_are_pruned(hooked):
    """A token is held until its expiry (a second take is a replay); past it, the next request that takes a token
    prunes it, so the table holds only the signatures that could still be replayed."""
    store = hooked.app.store
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
    assert store.take_webhook_token("mailgun:old", later) and not store.take_webhook_token("mailgun:old", later)
    with store.engine.begin() as conn:
        conn.execute(webhook_tokens.update().values(expires_at=datetime(2026, 1, 1)))
    assert hooked.client.post("/webhooks/mailgun", content=mailgun_body(
        mailgun_failed(hooked.app, KATHERINE, "t-2", severity="temporary"))).status_code == 200
    assert [key for key, _ in tokens(hooked)] != ["mailgun:old"] and len(tokens(hooked)) == 1


def test_mailgun_complaint_and_temporary_failure(hooked):
    """`complained` unsubscribes as a complaint; a temporary failure is a soft bounce that suppresses nobody yet."""
    complaint = {**mailgun_failed(hooked.app, GRACE, "c-1"), "event": "complained", "severity": None}
    temporary = mailgun_failed(hooked.app, KATHERINE, "t-1", severity="temporary")
    for event in (complaint, temporary):
        assert hooked.client.post("/webhooks/mailgun", content=mailgun_body(event)).status_code == 200
    suppressed, rows, _ = state(hooked)
    assert suppressed[GRACE].startswith("complaint:") and KATHERINE not in suppressed
    assert ("mailgun:t-1", KATHERINE, "soft", "5.1.1") in rows


@pytest.mark.slow
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


def test_sendgrid_signed_batch_records_each_event_once(hooked_both):
    """An ECDSA-signed batch: the bounce suppresses Katherine, the spam report Grace, the delivery is dropped;
    the batch again records nothing more (SQLite and PostgreSQL)."""
    hooked = hooked_both
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
    """A signed batch of 1,001 events is refused whole (400); a body over 1 MiB is 413 (an SNS message may be
    256 KB: webhooks take more than the other routes' 64 KiB); nothing recorded."""
    many = [{"event": "open", "sg_event_id": str(i)} for i in range(1001)]  # 1,001 fit in 64 KiB
    assert sendgrid_post(hooked, many).status_code == 400
    assert sendgrid_post(hooked, many[:1000]).status_code == 200  # at the limit: read (opens: nothing to record)
    big = [{**sendgrid_events(hooked.app)[0], "event": "open", "reason": "x" * 300_000}]
    assert sendgrid_post(hooked, big).status_code == 200  # over the forms' 64 KiB, within a webhook's 1 MiB
    huge = [{**sendgrid_events(hooked.app)[0], "reason": "x" * 1_100_000}]
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
        for provider in ("mailgun", "sendgrid", "postmark", "resend", "ses", "nosuch"):
            assert server.client.post(f"/webhooks/{provider}", content=b"{}").status_code == 404
    finally:
        server.close()
        app.close()


# -- Amazon SES via SNS (documentation: "Verifying the signatures of Amazon SNS messages", the SES bounce and
# complaint notification examples) ----------------------------------------------------------------------------------

TOPIC = "arn:aws:sns:us-east-1:123456789012:digest-bounces"
SNS_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
SNS_CERT = "/SimpleNotificationService-01d088a6f77103d0fe307c0069e40ed6.pem"


def certificate(key: rsa.RSAPrivateKey) -> bytes:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sns.amazonaws.com")])
    now = datetime.now(UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=1)).sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


def sns_post(server: Server, message: dict, *, key: rsa.RSAPrivateKey = SNS_KEY, version: str = "2",
             alter: dict | None = None):
    """An SNS message signed as SNS signs (the listed keys, in order, as `key\\nvalue\\n`), then posted."""
    keys = (("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type") if message["Type"] == "Notification"
            else ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"))
    text = "".join(f"{k}\n{message[k]}\n" for k in keys if message.get(k) is not None)
    digest = hashes.SHA256() if version == "2" else hashes.SHA1()
    signed = {**message, "SignatureVersion": version,
              "Signature": base64.b64encode(key.sign(text.encode(), padding.PKCS1v15(), digest)).decode(),
              **(alter or {})}
    return server.client.post("/webhooks/ses", content=json.dumps(signed), headers={
        "Content-Type": "text/plain; charset=UTF-8", "x-amz-sns-message-type": message["Type"],
        "x-amz-sns-message-id": message["MessageId"], "x-amz-sns-topic-arn": message["TopicArn"]})


def ses_notification(app, certs: ScriptedServer, inner: dict, message_id: str) -> dict:
    return {"Type": "Notification", "MessageId": message_id, "TopicArn": TOPIC, "Message": json.dumps(inner),
            "Timestamp": "2026-06-12T09:00:00.000Z", "SigningCertURL": certs.url(SNS_CERT),
            "UnsubscribeURL": certs.url("/?Action=Unsubscribe")}


def ses_bounce(app, recipient: str) -> dict:
    return {"notificationType": "Bounce",
            "bounce": {"bounceType": "Permanent", "bounceSubType": "General", "timestamp": "2026-06-12T09:00:01.000Z",
                       "feedbackId": "00000137860315fd-869464a4-8680-4114-98d3-716fe35851f9-000000",
                       "bouncedRecipients": [{"emailAddress": recipient, "action": "failed", "status": "5.1.1",
                                              "diagnosticCode": "smtp; 550 5.1.1 user unknown"}]},
            "mail": {"timestamp": "2026-06-12T08:59:59.000Z", "source": "digest@example.org",
                     "messageId": "00000137860315fd-34208509-5b74-41f3-95c5-22c1edc3c924-000000",
                     "destination": [recipient], "headersTruncated": False,
                     "commonHeaders": {"from": ["Paper Digest <digest@example.org>"], "to": [recipient],
                                       "messageId": mid(app, recipient), "subject": "Your papers"}}}


@pytest.fixture
def ses_hooked(make_config, subscribers_dir):
    """`digest serve` taking TOPIC's notifications, with SNS's certificate and links served by a local server
    (the tests' stand-in for sns.<region>.amazonaws.com: only a test can point the check there)."""
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}, webhooks={"ses_topics": [TOPIC]}))
    replies = {SNS_CERT: [Reply(body=certificate(SNS_KEY), content_type="application/x-pem-file")],
               "/": [Reply(body=b"<ConfirmSubscriptionResponse/>", content_type="text/xml")]}
    with ScriptedServer(replies) as certs:
        server = Server(app)
        server.server.application.config["SNS_ORIGIN"] = ("http", re.compile(r"127\.0\.0\.1:\d+"))
        yield server, certs
        server.close()
    app.close()


def test_ses_subscription_is_confirmed_after_its_signature_verifies(ses_hooked):
    """A signed SubscriptionConfirmation: SNS's certificate fetched, the SubscribeURL followed once; a forged one
    (another key) is 401 and follows nothing."""
    server, certs = ses_hooked
    confirmation = {"Type": "SubscriptionConfirmation", "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
                    "Token": "2336412f37", "TopicArn": TOPIC, "Timestamp": "2026-06-12T08:00:00.000Z",
                    "Message": f"You have chosen to subscribe to the topic {TOPIC}.",
                    "SubscribeURL": certs.url("/?Action=ConfirmSubscription&TopicArn=x&Token=2336412f37"),
                    "SigningCertURL": certs.url(SNS_CERT)}
    forged = sns_post(server, confirmation, key=rsa.generate_private_key(public_exponent=65537, key_size=2048))
    assert forged.status_code == 401 and certs.hits("/?Action=ConfirmSubscription&TopicArn=x&Token=2336412f37") == 0
    assert sns_post(server, confirmation, version="1").status_code == 200
    assert certs.hits("/?Action=ConfirmSubscription&TopicArn=x&Token=2336412f37") == 1
    assert certs.hits(SNS_CERT) == 1  # fetched once, then kept


def test_ses_bounce_and_complaint_are_recorded_once(ses_hooked):
    """SES's Permanent bounce for Ada's digest suppresses her and marks it bounced; its complaint for Grace
    unsubscribes her; SNS redelivering the bounce changes nothing."""
    server, certs = ses_hooked
    bounce = ses_notification(server.app, certs, ses_bounce(server.app, ADA), "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324")
    complaint = ses_notification(server.app, certs, {
        "notificationType": "Complaint",
        "complaint": {"complainedRecipients": [{"emailAddress": GRACE}], "complaintFeedbackType": "abuse",
                      "timestamp": "2026-06-12T10:00:00.000Z", "feedbackId": "0000013786031775-fea503bc-000000"},
        "mail": {**ses_bounce(server.app, GRACE)["mail"]}}, "33c80b92-fdea-4c2c-8f9d-bdfb0c7bf325")
    assert sns_post(server, bounce).status_code == 200 and sns_post(server, complaint).status_code == 200
    suppressed, rows, log = state(server)
    assert suppressed[ADA].startswith("bounced: hard bounce 5.1.1") and log[ADA] == "bounced"
    assert suppressed[GRACE].startswith("complaint:")
    assert "already recorded 1" in sns_post(server, bounce).text and state(server) == (suppressed, rows, log)
    samples = scrape(server)  # /metrics counts what the webhooks recorded, once
    assert value(samples, "digest_bounces_total", kind="hard", status="5.1.1") == 1
    assert value(samples, "digest_bounce_reports_total", outcome="complaint") == 1
    assert value(samples, "digest_suppressed_addresses", reason="complaint") == 1


@pytest.mark.slow
@pytest.mark.parametrize("tamper", ["another key", "message altered", "other topic", "certificate elsewhere",
                                    "no signature"])
def test_ses_forged_notifications_are_401_and_change_nothing(ses_hooked, tamper):
    """Signed by another key, altered after signing, from a topic not configured, with a certificate URL that is
    not SNS's, or unsigned: 401, nothing recorded."""
    server, certs = ses_hooked
    message = ses_notification(server.app, certs, ses_bounce(server.app, ADA), "forged-sns-1")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    response = {
        "another key": lambda: sns_post(server, message, key=other),
        "message altered": lambda: sns_post(server, message, alter={
            "Message": json.dumps(ses_bounce(server.app, GRACE))}),
        "other topic": lambda: sns_post(server, {**message, "TopicArn": TOPIC + "-other"}),
        "certificate elsewhere": lambda: sns_post(server, {
            **message, "SigningCertURL": "http://127.0.0.1.attacker.example" + SNS_CERT}),
        "no signature": lambda: sns_post(server, message, alter={"Signature": ""}),
    }[tamper]()
    assert response.status_code == 401 and reports(server) == {} and state(server)[0] == {}


def test_the_production_check_fetches_certificates_from_sns_alone(make_config, subscribers_dir):
    """Without the tests' override, a certificate URL on any host but sns.<region>.amazonaws.com over https is
    refused before anything is fetched."""
    app = app_with_digests(make_config(subscribers={"dir": str(subscribers_dir)}, webhooks={"ses_topics": [TOPIC]}))
    with ScriptedServer({SNS_CERT: [Reply(body=certificate(SNS_KEY))]}) as certs:
        server = Server(app)
        try:
            message = ses_notification(app, certs, ses_bounce(app, ADA), "prod-1")
            assert sns_post(server, message).status_code == 401 and certs.hits(SNS_CERT) == 0
        finally:
            server.close()
            app.close()
    for url, ok in (("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem", True),
                    ("https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-x.pem", True),
                    ("http://sns.us-east-1.amazonaws.com/SimpleNotificationService-x.pem", False),
                    ("https://sns.us-east-1.amazonaws.com.attacker.net/x.pem", False),
                    ("https://user@sns.us-east-1.amazonaws.com/x.pem", False),
                    ("https://sns.us-east-1.amazonaws.com/x.txt", False),
                    ("https://evil.com/sns.us-east-1.amazonaws.com/x.pem", False)):
        assert sns_url_ok(url, suffix=".pem") is ok, url
