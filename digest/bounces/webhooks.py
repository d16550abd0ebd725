"""Email providers' event webhooks: each request's signature checked the provider's way, its bounce and complaint
events read into the `Report`s a bounce mailbox gives (so `digest.bounces.intake` matches and records them alike).

- Mailgun: HMAC-SHA256 of timestamp + token under the webhook signing key, in the JSON body.
- Postmark: no signature; HTTP basic auth in the webhook URL, checked by the web layer.
- SendGrid: ECDSA (P-256, SHA-256) over the timestamp header + the raw body, under the verification key.
- Resend: Svix's scheme (Standard Webhooks), verified by the `standardwebhooks` library.
- Amazon SES: an SNS message, RSA-signed (SignatureVersion 1: SHA1, 2: SHA256) under the certificate its
  SigningCertURL names, which must be on sns.<region>.amazonaws.com over https; its topic must be one configured.

An event is keyed by the provider's own id (`mailgun:<id>` …), so a provider's retry finds it recorded and
changes nothing. Only failures make reports: delivered, opened or clicked events are answered and dropped.
A report matches a digest only by what a sent digest carried (its keyed Message-ID, the tagged return path),
as a mailbox's do: an address or an unsubscribe link alone suppresses nobody.

Replays. SendGrid, Resend and SES sign the whole body: a replayed request is a copy of one already taken,
whose events are found recorded under their ids (and Svix and SNS keep an event's id on their own retries,
so those ids cannot be refused as replays). Mailgun signs only a timestamp and a token, not the event: a
captured signature could carry any event for 15 minutes. So a Mailgun request names its token
(`Signed.once`), which the caller takes once in the store: a second request with it is refused.
Postmark signs nothing (its password is the whole of its check).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from digest.bounces.reports import Failure, Report, Unreadable, bounce_kind, parse_report
from digest.errors import DigestError

MAILGUN_MAX_AGE = 900  # seconds a Mailgun signature's timestamp may be from now (its signature is not of the body)
MAX_EVENTS = 1000  # events one request may carry (SendGrid batches them); more: the request is refused
_STATUS = re.compile(r"\b([245]\.\d{1,3}\.\d{1,3})\b")
_MESSAGE_ID = re.compile(r"^<?([^<>\s]+@[^<>\s]+)>?$")


class BadSignature(DigestError):
    """The request is not signed by the provider under the configured secret (answered 401)."""


class BadEvent(DigestError):
    """A signed request whose body cannot be read as the provider's events (answered 400)."""


@dataclass(frozen=True)
class Signed:
    """A request whose signature checked out: its events, and the one-use token its signature carries, if any."""

    reports: list[Report]
    once: str = ""  # provider:sha256 of the signature's token, to be taken once (Mailgun); "" when none
    once_until: datetime | None = None  # after this (UTC, naive) the signature is refused as stale anyway


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadEvent(f"the body is not JSON: {exc}") from exc


def _seconds(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _when(seconds: object) -> datetime:
    try:
        return datetime.fromtimestamp(float(seconds), UTC).replace(tzinfo=None)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        return datetime.now(UTC).replace(tzinfo=None)


def _iso(value: object) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")[:26].rstrip("+")).replace(tzinfo=None)
    except ValueError:
        return datetime.now(UTC).replace(tzinfo=None)


def _status(*texts: object) -> str:
    """The enhanced status code (5.1.1) a provider's diagnostic quotes, else ""."""
    for text in texts:
        if found := _STATUS.search(str(text or "")):
            return found.group(1)
    return ""


def _ids(values: Iterable[object]) -> tuple[str, ...]:
    """Message-IDs as the send log keeps them (in angle brackets), whatever brackets the provider kept."""
    return tuple(f"<{m.group(1)}>" for v in values if isinstance(v, str) and (m := _MESSAGE_ID.match(v.strip())))


def _line(text: object) -> str:
    return " ".join(str(text or "").split())[:500]


def _report(key: str, failure: Failure, arrived: datetime, *, message_ids: Iterable[object] = (),
            addresses: Iterable[str] = (), quoted: Report | None = None) -> Report:
    ids = _ids(message_ids) + (quoted.message_ids if quoted else ())
    return Report(key=key, kind="webhook", failures=(failure,), message_ids=ids,
                  addresses=tuple(a for a in addresses if a) + (quoted.addresses if quoted else ()),
                  unsubscribe_links=quoted.unsubscribe_links if quoted else (),
                  digest_dates=quoted.digest_dates if quoted else (), arrived=arrived)


# -- Mailgun -----------------------------------------------------------------------------------------------------

def mailgun(body: bytes, headers: Mapping[str, str], key: str) -> Signed:
    """A Mailgun webhook: {"signature": {timestamp, token, signature}, "event-data": {...}}; its token is to be
    taken once (`Signed.once`): the signature does not cover the event, so a replay could carry another."""
    data = _json(body)
    sig = data.get("signature") if isinstance(data, dict) else None
    if not isinstance(sig, dict):
        raise BadSignature("no signature in the body")
    expected = hmac.new(key.encode(), f"{sig.get('timestamp', '')}{sig.get('token', '')}".encode(),
                        hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, str(sig.get("signature", ""))):
        raise BadSignature("the signature does not match the webhook signing key")
    # The signature covers the timestamp and token, not the event: a captured request could carry another event
    # under the same signature, so only a fresh one is taken, and its token once (Mailgun's advice).
    stamp = _seconds(sig.get("timestamp"))
    if abs(time.time() - stamp) > MAILGUN_MAX_AGE:
        raise BadSignature(f"the signature's timestamp is more than {MAILGUN_MAX_AGE} s away from now")
    once = "mailgun:" + hashlib.sha256(str(sig.get("token", "")).encode()).hexdigest()
    until = _when(stamp) + timedelta(seconds=2 * MAILGUN_MAX_AGE)  # kept past the window: clocks differ a little
    return Signed(_mailgun_event(data.get("event-data")), once, until)


def _mailgun_event(event: object) -> list[Report]:
    if not isinstance(event, dict) or not event.get("id"):
        raise BadEvent("no event-data with an id")
    name, recipient = event.get("event"), str(event.get("recipient", "")).lower()
    status_block = event.get("delivery-status") if isinstance(event.get("delivery-status"), dict) else {}
    if name == "complained":
        failure = Failure(recipient, "complaint", "abuse", "Mailgun: the recipient marked it as spam")
    elif name == "failed":
        detail = _line(status_block.get("message") or status_block.get("description") or event.get("reason"))
        status = _status(status_block.get("enhanced-code"), detail, status_block.get("description"))
        failure = Failure(recipient, bounce_kind(event.get("severity") == "permanent", status), status, detail)
    else:
        return []
    message = event.get("message") if isinstance(event.get("message"), dict) else {}
    headers_ = message.get("headers") if isinstance(message.get("headers"), dict) else {}
    envelope = event.get("envelope") if isinstance(event.get("envelope"), dict) else {}
    return [_report(f"mailgun:{event['id']}", failure, _when(event.get("timestamp")),
                    message_ids=[headers_.get("message-id")], addresses=[str(envelope.get("sender", ""))])]


# -- Postmark ----------------------------------------------------------------------------------------------------

_POSTMARK_KINDS = {"HardBounce": "hard", "BadEmailAddress": "hard", "SoftBounce": "soft", "Transient": "soft",
                   "DnsError": "soft", "Blocked": "soft", "DMARCPolicy": "soft", "SpamComplaint": "complaint"}


def postmark(body: bytes, headers: Mapping[str, str], secret: str) -> Signed:
    """A Postmark bounce or spam-complaint webhook (its basic-auth password is checked by the caller).

    Postmark reports its own MessageID; the digest is found in the bounce's full dump (`Content`, sent when the
    webhook's "Include bounce content" is on), read as a mailbox's bounce is.
    """
    return Signed(_postmark_event(_json(body)))


def _postmark_event(event: object) -> list[Report]:
    if not isinstance(event, dict) or event.get("RecordType") not in ("Bounce", "SpamComplaint"):
        return []
    kind = _POSTMARK_KINDS.get(str(event.get("Type")))
    if kind is None or event.get("ID") is None:
        return []  # an auto-reply, a subscribe notice …: not a failure of the address
    detail = _line(event.get("Details") or event.get("Description"))
    status = "abuse" if kind == "complaint" else _status(event.get("Details"), event.get("Content"))
    failure = Failure(str(event.get("Email", "")).lower(), kind, status, detail)
    quoted = _quoted(event.get("Content"))
    return [_report(f"postmark:{event['RecordType']}:{event['ID']}", failure, _iso(event.get("BouncedAt")),
                    quoted=quoted)]


def _quoted(content: object) -> Report | None:
    """The bounce message a provider passes on, read for the original's Message-ID, return path and links."""
    if not isinstance(content, str) or not content.strip():
        return None
    try:
        return parse_report(content.encode("utf-8", "replace"))
    except Unreadable:
        return None


# -- SendGrid ----------------------------------------------------------------------------------------------------

SENDGRID_SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


def sendgrid(body: bytes, headers: Mapping[str, str], key: str) -> Signed:
    """A SendGrid event webhook: a JSON list of events, signed with ECDSA over the timestamp header + the body."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        public = serialization.load_der_public_key(base64.b64decode(key))
        signature = base64.b64decode(headers.get(SENDGRID_SIGNATURE, ""), validate=True)
    except (ValueError, binascii.Error) as exc:
        raise BadSignature(f"the signature or the verification key is not base64 DER: {exc}") from exc
    if not isinstance(public, ec.EllipticCurvePublicKey) or not signature:
        raise BadSignature("no signature, or the verification key is not an ECDSA key")
    try:
        public.verify(signature, headers.get(SENDGRID_TIMESTAMP, "").encode() + body, ec.ECDSA(hashes.SHA256()))
    except InvalidSignature as exc:
        raise BadSignature("the signature does not match the verification key") from exc
    events = _json(body)
    if not isinstance(events, list) or len(events) > MAX_EVENTS:
        raise BadEvent(f"not a list of at most {MAX_EVENTS} events")
    return Signed([r for e in events if isinstance(e, dict) and (r := _sendgrid_event(e)) is not None])


def _sendgrid_event(event: dict[str, Any]) -> Report | None:
    name, recipient = event.get("event"), str(event.get("email", "")).lower()
    if not event.get("sg_event_id"):
        return None
    if name == "spamreport":
        failure = Failure(recipient, "complaint", "abuse", "SendGrid: the recipient marked it as spam")
    elif name == "bounce":
        status = _status(event.get("status"), event.get("reason"))
        permanent = event.get("type", "bounce") == "bounce"  # "blocked": refused for now (a policy, a reputation)
        failure = Failure(recipient, bounce_kind(permanent, status), status, _line(event.get("reason")))
    elif name == "deferred":
        failure = Failure(recipient, "soft", _status(event.get("response")), _line(event.get("response")))
    else:
        return None  # processed, delivered, opens, clicks; "dropped" is SendGrid's own suppression list
    return _report(f"sendgrid:{event['sg_event_id']}", failure, _when(event.get("timestamp")),
                   message_ids=[event.get("smtp-id")])


# -- Resend (Svix) -----------------------------------------------------------------------------------------------

def resend(body: bytes, headers: Mapping[str, str], secret: str) -> Signed:
    """A Resend webhook: Svix-signed (svix-id, svix-timestamp, svix-signature), timestamps within 5 minutes."""
    from standardwebhooks.webhooks import Webhook, WebhookVerificationError

    lower = {k.lower(): v for k, v in headers.items()}
    standard = {f"webhook-{part}": lower.get(f"svix-{part}", "") for part in ("id", "timestamp", "signature")}
    try:
        Webhook(secret).verify(body, standard, json_parse=False)
    except (WebhookVerificationError, ValueError, binascii.Error) as exc:
        raise BadSignature(f"the Svix signature does not verify: {exc}") from exc
    return Signed(_resend_event(_json(body), standard["webhook-id"]))


def _resend_event(event: Any, event_id: str) -> list[Report]:
    data = event.get("data") if isinstance(event, dict) else None
    if not isinstance(data, dict):
        raise BadEvent("no data object")
    recipients = data.get("to") if isinstance(data.get("to"), list) else [data.get("to")]
    recipient = str(recipients[0] if recipients else "").lower()
    bounce = data.get("bounce") if isinstance(data.get("bounce"), dict) else {}
    if event.get("type") == "email.complained":
        failure = Failure(recipient, "complaint", "abuse", "Resend: the recipient marked it as spam")
    elif event.get("type") == "email.bounced":
        detail = _line(bounce.get("message"))
        status = _status(detail)
        failure = Failure(recipient, bounce_kind(bounce.get("type") == "Permanent", status), status, detail)
    elif event.get("type") == "email.delivery_delayed":
        failure = Failure(recipient, "soft", "", "Resend: delivery delayed")
    else:
        return []
    given = data.get("headers") if isinstance(data.get("headers"), list) else []
    ids = [h.get("value") for h in given if isinstance(h, dict) and str(h.get("name", "")).lower() == "message-id"]
    return [_report(f"resend:{event_id}", failure, _iso(event.get("created_at")), message_ids=ids)]


# -- Amazon SES via SNS --------------------------------------------------------------------------------------------

SNS_HOST = re.compile(r"sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?")  # where SNS signing certificates and links live
MAX_CERT_BYTES = 16_384  # an SNS signing certificate is about 2 KB
_SNS_SIGNED = {"Notification": ("Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"),
               "SubscriptionConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                                            "Type"),
               "UnsubscribeConfirmation": ("Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn",
                                           "Type")}


def sns_url_ok(url: str, *, scheme: str = "https", host: re.Pattern[str] = SNS_HOST, suffix: str = "") -> bool:
    """Whether a URL an SNS message names is SNS's own (its certificate, its subscribe link): https on
    sns.<region>.amazonaws.com, so a forged message cannot make us fetch or trust anything else."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return (parts.scheme == scheme and bool(host.fullmatch(parts.netloc)) and not parts.username
            and parts.path.endswith(suffix))


def sns_message(body: bytes, topics: Iterable[str], certificate: Callable[[str], bytes]) -> dict[str, Any]:
    """An SNS message whose signature verifies under the certificate at its SigningCertURL (fetched by
    `certificate`, which must refuse any URL that is not SNS's) and whose topic is one of `topics`."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    message = _json(body)
    if not isinstance(message, dict) or message.get("Type") not in _SNS_SIGNED:
        raise BadSignature("not an SNS message")
    if message.get("TopicArn") not in set(topics):
        raise BadSignature(f"topic {str(message.get('TopicArn'))[:200]!r} is not in webhooks.ses_topics")
    version = str(message.get("SignatureVersion", ""))
    if version not in ("1", "2"):
        raise BadSignature(f"unknown SignatureVersion {version[:20]!r}")
    signed = "".join(f"{key}\n{message[key]}\n" for key in _SNS_SIGNED[message["Type"]]
                     if message.get(key) is not None)
    try:
        signature = base64.b64decode(str(message.get("Signature", "")), validate=True)
        cert = x509.load_pem_x509_certificate(certificate(str(message.get("SigningCertURL", ""))))
    except (ValueError, binascii.Error) as exc:
        raise BadSignature(f"the signature or the signing certificate is unreadable: {exc}") from exc
    public = cert.public_key()
    if not isinstance(public, rsa.RSAPublicKey):
        raise BadSignature("the signing certificate has no RSA key")
    digest = hashes.SHA1() if version == "1" else hashes.SHA256()  # noqa: S303 (SNS's SignatureVersion 1 is SHA1)
    try:
        public.verify(signature, signed.encode(), padding.PKCS1v15(), digest)
    except InvalidSignature as exc:
        raise BadSignature("the SNS signature does not verify") from exc
    return message


def ses(message: Mapping[str, Any]) -> list[Report]:
    """The SES bounce or complaint notification an SNS Notification carries (notifications or event publishing)."""
    inner = _json(str(message.get("Message", "")).encode())
    if not isinstance(inner, dict):
        raise BadEvent("the SNS Message is not an SES notification")
    kind = inner.get("notificationType") or inner.get("eventType")
    mail = inner.get("mail") if isinstance(inner.get("mail"), dict) else {}
    common = mail.get("commonHeaders") if isinstance(mail.get("commonHeaders"), dict) else {}
    given = mail.get("headers") if isinstance(mail.get("headers"), list) else []
    ids = [common.get("messageId")] + [h.get("value") for h in given
                                      if isinstance(h, dict) and str(h.get("name", "")).lower() == "message-id"]
    if kind == "Bounce":
        block = inner.get("bounce") if isinstance(inner.get("bounce"), dict) else {}
        permanent = block.get("bounceType") == "Permanent"
        failures = tuple(Failure(str(r.get("emailAddress", "")).lower(),
                                 bounce_kind(permanent, _status(r.get("status"), r.get("diagnosticCode"))),
                                 _status(r.get("status"), r.get("diagnosticCode")), _line(r.get("diagnosticCode")))
                         for r in block.get("bouncedRecipients") or [] if isinstance(r, dict))
    elif kind == "Complaint":
        block = inner.get("complaint") if isinstance(inner.get("complaint"), dict) else {}
        feedback = str(block.get("complaintFeedbackType") or "abuse")
        if feedback == "not-spam":
            return []
        failures = tuple(Failure(str(r.get("emailAddress", "")).lower(), "complaint", feedback,
                                 "Amazon SES: the recipient marked it as spam")
                         for r in block.get("complainedRecipients") or [] if isinstance(r, dict))
    else:
        return []  # deliveries, sends, opens
    if not failures:
        return []
    return [Report(key=f"ses:{message.get('MessageId')}", kind="webhook", failures=failures[:100],
                   message_ids=_ids(ids), addresses=(str(mail.get("source", "")),), unsubscribe_links=(),
                   digest_dates=(), arrived=_iso(block.get("timestamp")))]


PROVIDERS: dict[str, Callable[[bytes, Mapping[str, str], str], Signed]] = {
    "mailgun": mailgun, "postmark": postmark, "sendgrid": sendgrid, "resend": resend}
