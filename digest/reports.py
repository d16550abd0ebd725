"""Reading one message from the bounce mailbox: a delivery status notification, a complaint, or other mail.

- RFC 3464 DSNs (`multipart/report; report-type=delivery-status`, which Postfix, Exim, Exchange and
  the big providers send): each per-recipient block's Action and Status say hard, soft or not a
  failure at all; the original message (or its headers) names the digest.
- RFC 5965 ARF complaints (`report-type=feedback-report`): a complaint about the original message.
- Any other bounce is left to flufl.bounce's detectors (Mailman's), which find the failed
  recipients of the older, non-standard formats (without a status code).
- Anything else (an auto-reply, a person's reply) is other mail, not a report.

Parsing only: matching a report to a subscriber and recording it is `digest.bounces`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import Message
from email.parser import HeaderParser
from email.utils import getaddresses, parseaddr, parsedate_to_datetime

from .errors import DigestError

_STATUS = re.compile(r"^([245])\.(\d{1,3})\.(\d{1,3})$")
_MESSAGE_ID = re.compile(r"<[^<>\s]+@[^<>\s]+>")
# Permanent failures about the message, not the address (RFC 3463: mailbox full, too big, content,
# policy): counted as soft bounces, so a spam filter's verdict alone does not suppress an address.
_SOFT_PERMANENT = re.compile(r"^5\.(2\.2|3\.4|6\.\d+|7\.\d+)$")


class Unreadable(DigestError):
    """A message that looks like a report but cannot be understood; says what is wrong."""


@dataclass(frozen=True)
class Failure:
    """What a report says happened to one recipient."""

    recipient: str  # the address as the report names it (lower-case; "" when the report hides it)
    kind: str  # hard | soft | complaint
    status: str  # 5.1.1, 4.2.2 … for a bounce (empty when the format has none); the feedback type for a complaint
    detail: str  # the diagnostic or the reporter, on one line


@dataclass(frozen=True)
class Report:
    """One message of the mailbox, read."""

    key: str  # message-id:<…> of the report, else sha256:<hex> of its bytes
    kind: str  # dsn | arf | bounce (a non-standard bounce) | other (not a report)
    failures: tuple[Failure, ...]
    message_ids: tuple[str, ...]  # the original message's Message-ID, as the report quotes it
    addresses: tuple[str, ...]  # where the report was sent and the original's Return-Path (a tagged sender)
    unsubscribe_links: tuple[str, ...]  # the original's List-Unsubscribe URLs (they name the subscriber)
    digest_dates: tuple[str, ...]  # the original's X-Digest-Date
    arrived: datetime  # the report's Date (UTC, naive), else the time it was read


def _one_line(text: object) -> str:
    return " ".join(str(text or "").split())[:500]


def report_key(msg: Message, data: bytes) -> str:
    found = _MESSAGE_ID.search(str(msg.get("Message-ID", "")))
    return f"message-id:{found.group(0)}" if found else "sha256:" + hashlib.sha256(data).hexdigest()


def _arrived(msg: Message) -> datetime:
    try:
        when = parsedate_to_datetime(str(msg.get("Date", "")))
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None or when.tzinfo is None:
        return datetime.now(UTC).replace(tzinfo=None)
    return when.astimezone(UTC).replace(tzinfo=None)


def _original(msg: Message) -> Message | None:
    """The original message (or its headers) a report carries."""
    for part in msg.walk():
        kind = part.get_content_type()
        if kind in ("message/rfc822", "message/global") and part.is_multipart():
            inner = part.get_payload()
            return inner[0] if isinstance(inner, list) and inner else None
        if kind in ("text/rfc822-headers", "message/global-headers"):
            text = part.get_payload(decode=True) or b""
            return HeaderParser(policy=policy.compat32).parsestr(text.decode("utf-8", "replace"))
    return None


def _address(value: object) -> str:
    """The address of a DSN recipient field (`rfc822; ada@example.org`) or an address header."""
    text = str(value or "").strip()
    kind, sep, rest = text.partition(";")
    if sep and "@" not in kind:
        text = rest.strip()
    return parseaddr(text)[1].strip().lower()


def _headers(msg: Message | None, *names: str) -> list[str]:
    if msg is None:
        return []
    return [str(v) for name in names for v in msg.get_all(name, [])]


def _failure(block: Message) -> Failure | None:
    """One per-recipient block of a DSN: a failure, or None for a delivered / relayed / expanded one."""
    action = str(block.get("Action", "")).strip().lower().split(" ")[0]
    recipient = _address(block.get("Original-Recipient") or block.get("Final-Recipient"))
    if action not in ("failed", "delayed", "error"):
        return None
    if not recipient:
        raise Unreadable(f"a {action} recipient block without Final-Recipient")
    status = str(block.get("Status", "")).strip().split(" ")[0]
    if status and not _STATUS.match(status):
        raise Unreadable(f"Status {status!r} of {recipient} is not a delivery status code like 5.1.1")
    detail = _one_line(block.get("Diagnostic-Code", ""))
    if action == "delayed" or status.startswith("4") or _SOFT_PERMANENT.match(status):
        return Failure(recipient, "soft", status, detail)
    return Failure(recipient, "hard", status, detail)


def _dsn(msg: Message) -> tuple[Failure, ...]:
    parts = [p for p in msg.walk() if p.get_content_type() == "message/delivery-status"]
    if not parts or not parts[0].is_multipart():
        raise Unreadable("a delivery-status report without a message/delivery-status part")
    blocks = [b for p in parts for b in (p.get_payload()[1:] if isinstance(p.get_payload(), list) else [])]
    if not blocks:
        raise Unreadable("a delivery-status report without any recipient block")
    return tuple(f for f in map(_failure, blocks) if f is not None)


def _arf(msg: Message, original: Message | None) -> tuple[Failure, ...]:
    part = next((p for p in msg.walk() if p.get_content_type() == "message/feedback-report"), None)
    if part is None:
        raise Unreadable("a feedback report without a message/feedback-report part")
    payload = part.get_payload()
    fields = payload[0] if isinstance(payload, list) and payload else None
    if fields is None or not fields.get("Feedback-Type"):
        raise Unreadable("a feedback report without Feedback-Type")
    kind = str(fields["Feedback-Type"]).strip().lower()
    if original is None:
        raise Unreadable("a feedback report without the original message or its headers")
    recipients = [_address(v) for v in fields.get_all("Original-Rcpt-To", [])]
    recipients += [a.lower() for _, a in getaddresses(_headers(original, "To"))]
    recipient = next((r for r in recipients if "@" in r), "")
    who = _one_line(fields.get("User-Agent") or fields.get("Reported-Domain") or "")
    if kind == "not-spam":
        return ()
    return (Failure(recipient, "complaint", kind, who),)


def _other_bounce(msg: Message) -> tuple[Failure, ...]:
    """Bounces in the older formats, as flufl.bounce's detectors read them (no status codes)."""
    from flufl.bounce import all_failures

    try:
        temporary, permanent = all_failures(msg)
    except Exception as exc:  # noqa: BLE001 - a detector choking on a strange message: that message is unreadable
        raise Unreadable(f"the bounce detectors failed on it: {exc}") from exc
    out = [Failure(a.decode("ascii", "replace").lower(), "hard", "", "non-standard bounce") for a in sorted(permanent)]
    out += [Failure(a.decode("ascii", "replace").lower(), "soft", "", "non-standard bounce (temporary)")
            for a in sorted(temporary - permanent)]
    return tuple(out)


def _ids(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for v in values for m in _MESSAGE_ID.findall(v)))


def _links(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for v in values for m in re.findall(r"<(https?://[^<>\s]+)>", v)))


def parse_report(data: bytes) -> Report:
    """Read one message; Unreadable when it looks like a report but cannot be understood."""
    if not data.strip():
        raise Unreadable("an empty message")
    msg = message_from_bytes(data, policy=policy.compat32)
    if not msg.keys():
        raise Unreadable("not an email message (no header lines)")
    report_type = str(msg.get_param("report-type", "", header="Content-Type") or "").lower()
    original = _original(msg)
    if msg.get_content_type() == "multipart/report" and report_type == "delivery-status":
        kind, failures = "dsn", _dsn(msg)
    elif msg.get_content_type() == "multipart/report" and report_type == "feedback-report":
        kind, failures = "arf", _arf(msg, original)
    else:
        failures = _other_bounce(msg)
        kind = "bounce" if failures else "other"
    addresses = [a.lower() for _, a in getaddresses(_headers(msg, "Delivered-To", "X-Original-To", "To"))]
    addresses += [a.lower() for _, a in getaddresses(_headers(original, "Return-Path"))]
    return Report(key=report_key(msg, data), kind=kind, failures=failures,
                  message_ids=_ids(_headers(original, "Message-ID")), addresses=tuple(dict.fromkeys(addresses)),
                  unsubscribe_links=_links(_headers(original, "List-Unsubscribe")),
                  digest_dates=tuple(v.strip() for v in _headers(original, "X-Digest-Date")), arrived=_arrived(msg))
