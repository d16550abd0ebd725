"""Reading one message from the bounce mailbox: a delivery status notification, a complaint, or other mail.

- RFC 3464 DSNs (`multipart/report; report-type=delivery-status`, which Postfix, Exim, Exchange and
  the big providers send): each per-recipient block's Action and Status say hard, soft or not a
  failure at all; the original message (or its headers) names the digest.
- RFC 5965 ARF complaints (`report-type=feedback-report`): a complaint about the original message.
- Any other bounce is left to flufl.bounce's detectors (Mailman's), which find the failed
  recipients of the older, non-standard formats (without a status code).
- Anything else (an auto-reply, a person's reply) is other mail, not a report.

A message is read within limits (its size, its header section, how many MIME parts it has and how
deeply they nest, how many recipients it names), checked before the email parser recurses into it;
a message past one, or one the parser chokes on, is `Unreadable` with the reason, never a crash.

Parsing only: matching a report to a subscriber and recording it is `digest.bounces.intake`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.errors import MessageError
from email.message import Message
from email.parser import HeaderParser
from email.utils import getaddresses, parseaddr, parsedate_to_datetime

from digest.errors import DigestError

_STATUS = re.compile(r"^([245])\.(\d{1,3})\.(\d{1,3})$")
_MESSAGE_ID = re.compile(r"<[^<>\s]+@[^<>\s]+>")
# Permanent failures about the message, not the address (RFC 3463: mailbox full, too big, content,
# policy): counted as soft bounces, so a spam filter's verdict alone does not suppress an address.
_SOFT_PERMANENT = re.compile(r"^5\.(2\.2|3\.4|6\.\d+|7\.\d+)$")

# Limits (docs/limits.md). A 50-paper digest is 149 KB; a bounce quoting it is 4 parts deep.
MAX_MESSAGE_BYTES = 1_000_000  # a larger message is not about one of our digests; refused unread
MAX_HEADER_BYTES = 100_000  # the message's own header section (Received chains and signatures take a few KB)
MAX_MIME_PARTS = 100  # Content-Type lines, counted before parsing: nesting needs one a level or two, so the
#                       email parser (which recurses once a level) never goes deeper than 201
MAX_MIME_DEPTH = 20  # parts within parts, once parsed (a forwarded bounce in flufl.bounce's samples is 8)
MAX_RECIPIENTS = 100  # recipients one report names (a digest goes to one); Final-Recipient lines counted first
MAX_HEADER_CHARS = 10_000  # of a header value, read for addresses, Message-IDs and links; the rest is ignored
_CONTENT_TYPE = re.compile(rb"^content-type[ \t]*:", re.IGNORECASE | re.MULTILINE)
_FINAL_RECIPIENT = re.compile(rb"^final-recipient[ \t]*:", re.IGNORECASE | re.MULTILINE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")
# What the standard library's parser and the bounce detectors raise on a message they cannot take apart.
_PARSER_ERRORS = (MessageError, RecursionError, LookupError, ValueError, TypeError, AttributeError)


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
    unsubscribe_links: tuple[str, ...]  # the original's List-Unsubscribe URLs (evidence only: they name no digest)
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
    return [str(v)[:MAX_HEADER_CHARS] for name in names for v in msg.get_all(name, [])]


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
    return Failure(recipient, bounce_kind(action != "delayed", status), status, detail)


def bounce_kind(permanent: bool, status: str) -> str:
    """hard or soft: a permanent failure about the address is hard; a delay, a 4.x.x or a 5.x.x about the message
    (mailbox full, too big, content, policy) is soft. Also for what providers' webhooks report."""
    if not permanent or status.startswith("4") or _SOFT_PERMANENT.match(status):
        return "soft"
    return "hard"


def _dsn(msg: Message) -> tuple[Failure, ...]:
    parts = [p for p in msg.walk() if p.get_content_type() == "message/delivery-status"]
    if not parts or not parts[0].is_multipart():
        raise Unreadable("a delivery-status report without a message/delivery-status part")
    blocks = [b for p in parts for b in (p.get_payload()[1:] if isinstance(p.get_payload(), list) else [])]
    if not blocks:
        raise Unreadable("a delivery-status report without any recipient block")
    _check_recipients(len(blocks))
    return tuple(f for f in map(_failure, blocks) if f is not None)


def _check_recipients(count: int) -> None:
    if count > MAX_RECIPIENTS:
        raise Unreadable(f"names {count:,} recipients, more than {MAX_RECIPIENTS} (a digest goes to one)")


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


class _DetectorTracebacks(logging.Filter):
    """flufl.bounce logs a traceback when one of its detectors chokes on an odd message, then raises: the message is
    reported unreadable, in one line, so the traceback is for `--debug` alone."""

    def filter(self, record: logging.LogRecord) -> bool:
        return logging.getLogger().isEnabledFor(logging.DEBUG)


_QUIET_DETECTORS = _DetectorTracebacks()


def _other_bounce(msg: Message) -> tuple[Failure, ...]:
    """Bounces in the older formats, as flufl.bounce's detectors read them (no status codes)."""
    from flufl.bounce import all_failures

    detectors = logging.getLogger("flufl.bounce")
    if _QUIET_DETECTORS not in detectors.filters:
        detectors.addFilter(_QUIET_DETECTORS)
    try:
        temporary, permanent = all_failures(msg)
    except Exception as exc:  # noqa: BLE001 - a detector choking on a strange message: that message is unreadable
        raise Unreadable(f"the bounce detectors failed on it: {exc}") from exc
    _check_recipients(len(temporary | permanent))
    out = [Failure(a.decode("ascii", "replace").lower(), "hard", "", "non-standard bounce") for a in sorted(permanent)]
    out += [Failure(a.decode("ascii", "replace").lower(), "soft", "", "non-standard bounce (temporary)")
            for a in sorted(temporary - permanent)]
    return tuple(out)


def _ids(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for v in values for m in _MESSAGE_ID.findall(v)))


def _links(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m for v in values for m in re.findall(r"<(https?://[^<>\s]+)>", v)))


def check_limits(data: bytes) -> None:
    """Unreadable when the raw message passes a limit before the parser meets it (size, header, parts, recipients)."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise Unreadable(f"larger than {MAX_MESSAGE_BYTES:,} bytes, the limit for a bounce or complaint")
    end = _HEADER_END.search(data)
    if (end.start() if end else len(data)) > MAX_HEADER_BYTES:
        raise Unreadable(f"a header section over {MAX_HEADER_BYTES:,} bytes")
    parts = sum(1 for _ in _CONTENT_TYPE.finditer(data))
    if parts > MAX_MIME_PARTS:
        raise Unreadable(f"{parts:,} MIME parts, more than {MAX_MIME_PARTS}")
    _check_recipients(sum(1 for _ in _FINAL_RECIPIENT.finditer(data)))


def _depth(msg: Message) -> int:
    """How deeply the parts nest (1: a single part), walked without recursion; stops past MAX_MIME_DEPTH."""
    deepest, stack = 0, [(msg, 1)]
    while stack and deepest <= MAX_MIME_DEPTH:
        part, level = stack.pop()
        deepest = max(deepest, level)
        payload = part.get_payload()
        if isinstance(payload, list):
            stack += [(p, level + 1) for p in payload if isinstance(p, Message)]
    return deepest


def parse_report(data: bytes) -> Report:
    """Read one message; Unreadable when it passes a limit, or looks like a report but cannot be understood."""
    if not data.strip():
        raise Unreadable("an empty message")
    check_limits(data)
    try:
        msg = message_from_bytes(data, policy=policy.compat32)
        if _depth(msg) > MAX_MIME_DEPTH:
            raise Unreadable(f"MIME parts nested more than {MAX_MIME_DEPTH} deep")
        return _read(msg, data)
    except _PARSER_ERRORS as exc:
        raise Unreadable(f"the email parser failed on it ({type(exc).__name__}: {_one_line(exc)[:200]})") from exc


def _read(msg: Message, data: bytes) -> Report:
    if not msg.keys():
        raise Unreadable("not an email message (no header lines)")
    report_type = str(msg.get_param("report-type", "", header="Content-Type") or "").lower()
    original = _original(msg)
    if msg.get_content_type() == "multipart/report" and report_type == "delivery-status":
        kind, failures = _dsn_or_other(msg)
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


def _dsn_or_other(msg: Message) -> tuple[str, tuple[Failure, ...]]:
    """A DSN's failures; a damaged DSN that the older formats' detectors can read is read as they do."""
    try:
        return "dsn", _dsn(msg)
    except Unreadable:
        try:
            failures = _other_bounce(msg)
        except Unreadable:
            failures = ()
        if not failures:
            raise
        return "bounce", failures
