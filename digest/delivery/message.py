"""MIME: a rendered digest → an RFC 5322 message with one-click unsubscribe headers.

The message is a modern `EmailMessage` under the SMTP policy (CRLF). Three shortcuts keep it cheap
enough to build for every subscriber of a large list: header values that are already plain
printable ASCII are stored as they are (the policy parses them lazily if they are read back, and
folds any that are too long), the bodies skip the pure-Python encoder `set_content` uses, and
a message shaped as `build_message` makes it is serialised directly, byte for byte what the email
package's generator writes.

The HTML part goes out as 7bit: every non-ASCII character becomes an HTML character reference
(`&#183;`), which every mail client renders as the character, so the part needs no transfer
encoding at all (quoted-printable would turn each `=` of its attributes into `=3D` and cost a
sixth of the time it takes to compose a digest). A part that cannot be 7bit (a line over 998
octets, a bare CR or NUL, the boundary inside it) and the text part, which keeps its characters
as they are, are quoted-printable by the C encoder.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import re
import secrets
import sys
from datetime import UTC, date, datetime
from email.generator import BytesGenerator
from email.headerregistry import Address
from email.message import EmailMessage, MIMEPart
from email.policy import EmailPolicy
from email.utils import format_datetime
from functools import lru_cache
from io import BytesIO
from typing import Any
from urllib.parse import quote

from digest.models import Newsletter, Rendered, Subscriber
from digest.subscribers.addresses import header_address

_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")
_PLAIN_ASCII = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
_MAX_COUNT: dict[str, int | None] = {}
_FOLDED: dict[int, str] = {}
# Headers holding URLs or identifiers: folding them with encoded words (what the standard folder
# does to a long token) would break them, so they go out as written (RFC 5322 allows 998 columns).
_AS_WRITTEN = {"list-unsubscribe", "list-unsubscribe-post", "list-id", "message-id"}
_EW_CHUNK = 42  # bytes per encoded word: base64 of 42 bytes is 56 characters, "Subject: " + word 77


@lru_cache(maxsize=4096)  # subjects repeat across subscribers (same date, count and topics)
def encode_words(text: str) -> str:
    """`text` as RFC 2047 encoded words (UTF-8, base64), folded one word per line.

    Used for non-ASCII subjects: the standard folder gets the same result several times slower.
    Chunks end on character boundaries, so a mail client can decode each word on its own.
    """
    words, chunk = [], b""
    for char in text:
        encoded = char.encode("utf-8")
        if len(chunk) + len(encoded) > _EW_CHUNK:
            words.append(chunk)
            chunk = b""
        chunk += encoded
    words.append(chunk)
    return "\r\n ".join(f"=?utf-8?b?{binascii.b2a_base64(w, newline=False).decode()}?=" for w in words)


class DigestPolicy(EmailPolicy):
    """The SMTP policy, storing plain ASCII header values without running the header parser on them."""

    def header_store_parse(self, name: str, value: Any) -> tuple[str, Any]:
        if hasattr(value, "name"):  # already a parsed header object
            return super().header_store_parse(name, value)
        if isinstance(value, _Encoded):
            return (name, value)
        text = str(value) if isinstance(value, str | Address) else None
        if text is not None and _PLAIN_ASCII.fullmatch(text) and "=?" not in text and "  " not in text:
            return (name, text)
        if name.lower() == "subject" and isinstance(value, str) and value.isprintable():
            return (name, encode_words(value))
        return super().header_store_parse(name, value)

    def _fold(self, name: str, value: Any, refold_binary: bool = False) -> str:
        folded = _FOLDED.get(id(value))
        if folded is not None:
            return folded
        if (isinstance(value, str) and value.isascii() and value.isprintable()
                and len(name) + 2 + len(value) <= (self.max_line_length or sys.maxsize)):
            return name + ": " + value + self.linesep  # one short line: what the base class returns for it
        if (name.lower() in _AS_WRITTEN or isinstance(value, _Encoded)) and not hasattr(value, "name"):
            return name + ": " + self.linesep.join(value.splitlines()) + self.linesep
        return str(super()._fold(name, value, refold_binary))

    def header_max_count(self, name: str) -> int | None:
        # The registry builds a new header class on every lookup; the answer never changes.
        key = name.lower()
        if key not in _MAX_COUNT:
            _MAX_COUNT[key] = super().header_max_count(name)
        return _MAX_COUNT[key]


class _Generator(BytesGenerator):
    """BytesGenerator writing a body in one call rather than two per line (same bytes)."""

    def _write_lines(self, lines: str) -> None:
        if "\r" in lines:  # every line ending (CRLF, CR, LF) becomes the policy's, as NLCRE.split does
            lines = lines.replace("\r\n", "\n").replace("\r", "\n")
        if lines:
            self.write(lines.replace("\n", self._NL))


class DigestMessage(EmailMessage):
    """An EmailMessage whose `as_bytes` uses the faster generator above.

    Only `build_message` makes these, setting each header once, so setting a header skips the
    base class's scan of every header for a duplicate (quadratic in the number of headers).
    """

    def __setitem__(self, name: str, value: Any) -> None:
        self._headers.append(self.policy.header_store_parse(name, value))

    def as_bytes(self, unixfrom: bool = False, policy: Any = None) -> bytes:
        if not unixfrom and policy in (None, POLICY) and self._is_digest():
            return self._digest_bytes()
        return self.generated(unixfrom, policy)

    def generated(self, unixfrom: bool = False, policy: Any = None) -> bytes:
        """The message through the email package's generator (what `as_bytes` writes, byte for byte)."""
        buffer = BytesIO()
        _Generator(buffer, mangle_from_=False, policy=policy or self.policy).flatten(self, unixfrom=unixfrom)
        return buffer.getvalue()

    def _is_digest(self) -> bool:
        """Shaped as `build_message` makes it: our boundary, two text parts with plain ASCII bodies, nothing else."""
        parts = self._payload
        return (self.policy is POLICY and self.preamble is None and self.epilogue is None
                and any(value is _FIXED["Content-Type"] for _, value in self._headers)
                and isinstance(parts, list) and len(parts) == 2
                and all(isinstance(part, MIMEPart) and part.policy is POLICY and isinstance(part._payload, str)
                        and part._payload.isascii() and not part.is_multipart()
                        and part.preamble is None and part.epilogue is None
                        and any(value in _PART_TYPES.values() for _, value in part._headers) for part in parts))

    def _digest_bytes(self) -> bytes:
        """What the generator writes for this shape, without its per-part policy clones and buffers."""
        nl, out = POLICY.linesep, [_head_bytes(self)]
        for n, part in enumerate(self._payload):
            out.append(f"{nl if n else ''}--{BOUNDARY}{nl}".encode("ascii"))
            out.append(_head_bytes(part))
            body = part._payload
            if "\r" in body:
                body = body.replace("\r\n", "\n").replace("\r", "\n")
            out.append(body.replace("\n", nl).encode("ascii"))
        out.append(f"{nl}--{BOUNDARY}--{nl}".encode("ascii"))
        return b"".join(out)


def _head_bytes(message: MIMEPart) -> bytes:
    return b"".join([*(POLICY.fold_binary(name, value) for name, value in message._headers), b"\r\n"])


POLICY = DigestPolicy(linesep="\r\n")
# "=_" never occurs in quoted-printable text, and a 7bit body holding it is quoted-printable instead,
# so one fixed boundary cannot collide with a body.
BOUNDARY = "=_paper-digest_alt"
MAX_7BIT_LINE = 998  # octets per line, RFC 5322 section 2.1.1
# Headers every message or part carries, parsed once and shared (header objects are immutable).
_FIXED = {name: POLICY.header_factory(name, value) for name, value in (
    ("Content-Type", f'multipart/alternative; boundary="{BOUNDARY}"'),
)}
_ENCODINGS = {cte: POLICY.header_factory("Content-Transfer-Encoding", cte) for cte in ("quoted-printable", "7bit")}
_PART_TYPES = {subtype: POLICY.header_factory("Content-Type", f'text/{subtype}; charset="utf-8"')
               for subtype in ("plain", "html")}
_FOLDED.update({id(h): POLICY.fold(h.name, h) for h in (*_FIXED.values(), *_ENCODINGS.values(),
                                                           *_PART_TYPES.values())})


def stored_header(message: EmailMessage, name: str) -> str | None:
    """A header's value as `build_message` stored it, without the header parser `message[name]` runs on
    every read (for a Message-ID, that parse cost a tenth of sending the digest). For a value stored as
    written (plain ASCII, as a Message-ID always is) it is the text `str(message[name])` gives."""
    key = name.lower()
    for header, value in message._headers:
        if header.lower() == key:
            return str(value)
    return None


def one_line(text: str) -> str:
    """Text safe for a header: control characters (CR, LF, tab …) become single spaces."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or "localhost"


MESSAGE_ID_MAC = 24  # hex digits (96 bits) of the keyed MAC; the unkeyed ids of earlier versions had 20
_KEYED_ID = re.compile(rf"^<digest\.\d{{4}}-\d{{2}}-\d{{2}}\.[0-9a-f]{{{MESSAGE_ID_MAC}}}@[^<>\s]+>$")


def message_id(email: str, day: date, from_address: str, key: bytes) -> str:
    """Message-ID derived from (subscriber, digest date) under the store's key (`Signer.message_key`): a resend
    carries the same one, and nobody without the key can make it, so a report quoting it names a digest we sent."""
    mac = hmac.new(key, f"{email.lower()}\n{day.isoformat()}".encode(), hashlib.sha256).hexdigest()[:MESSAGE_ID_MAC]
    return f"<digest.{day.isoformat()}.{mac}@{_domain(from_address)}>"


def is_keyed(message_id: str) -> bool:
    """Whether a Message-ID has the keyed shape `message_id` makes (an earlier version's could be computed)."""
    return bool(_KEYED_ID.match(message_id))


def test_message_id(day: date, from_address: str) -> str:
    """A fresh Message-ID for a test send, so that it can never stand in for the real digest."""
    return f"<test.{day.isoformat()}.{secrets.token_hex(10)}@{_domain(from_address)}>"


class _Encoded(str):
    """A header value already encoded here, stored and written as it is (the header parser would decode it)."""


def _address(name: str, email: str) -> Address | _Encoded:
    """`name <email>` with a display name that cannot pass for an address.

    A name holding `@`, `<` or `>` is left out (mail clients would show it where the address goes).
    A name holding `=?` is sent as encoded words of its own, so that a client decodes it once, back
    to the text as written, and never reads it as an encoded word (which could hide an address).
    """
    user, _, domain = email.partition("@")
    shown = one_line(name)
    if any(c in shown for c in "@<>"):
        shown = ""
    if "=?" in shown:
        return _Encoded(f"{encode_words(shown)} <{Address(username=user, domain=domain).addr_spec}>")
    return Address(display_name=shown, username=user, domain=domain)


def _list_unsubscribe(url: str, mailto: str) -> str:
    """RFC 2369: the https URL (for RFC 8058 one-click), then a mailto when configured."""
    parts = [f"<{url}>"]
    if mailto:
        parts.append(f"<mailto:{mailto}?subject={quote('unsubscribe')}>")
    return ", ".join(parts)


def _text_part(text: str, subtype: str) -> MIMEPart:
    """A UTF-8 text part: HTML as 7bit with character references where it can be, else quoted-printable."""
    part = MIMEPart(policy=POLICY)
    part["Content-Type"] = _PART_TYPES[subtype]
    body = text.replace("\r\n", "\n")
    if subtype == "html":
        body = body.encode("ascii", "xmlcharrefreplace").decode("ascii")
        if _fits_7bit(body):
            part["Content-Transfer-Encoding"] = _ENCODINGS["7bit"]
            part.set_payload(body)
            return part
    part["Content-Transfer-Encoding"] = _ENCODINGS["quoted-printable"]
    part.set_payload(binascii.b2a_qp(body.encode("utf-8"), istext=True).decode("ascii"))
    return part


def _fits_7bit(body: str) -> bool:
    """ASCII, no bare CR or NUL, no line over 998 octets, and not holding the MIME boundary."""
    return (body.isascii() and "\r" not in body and "\x00" not in body and BOUNDARY not in body
            and max(map(len, body.split("\n"))) <= MAX_7BIT_LINE)


def build_message(rendered: Rendered, subscriber: Subscriber, newsletter: Newsletter, day: date,
                  *, id_key: bytes, now: datetime | None = None, test: bool = False) -> EmailMessage:
    """multipart/alternative (text first, HTML last) with every header a bulk sender needs."""
    msg = DigestMessage(policy=POLICY)
    msg["From"] = _address(newsletter.name, newsletter.from_address)
    msg["To"] = _address(subscriber.name, header_address(subscriber.email))  # ValueError: this digest fails
    if newsletter.reply_to:
        msg["Reply-To"] = newsletter.reply_to
    msg["Subject"] = ("[TEST] " if test else "") + one_line(rendered.subject)
    msg["Date"] = format_datetime(now or datetime.now(UTC))
    if test:
        msg["Message-ID"] = test_message_id(day, newsletter.from_address)
        msg["X-Digest-Test"] = "yes"
    else:
        msg["Message-ID"] = message_id(subscriber.email, day, newsletter.from_address, id_key)
    msg["List-Id"] = f"{one_line(newsletter.name)} <digest.{_domain(newsletter.from_address)}>"
    msg["List-Unsubscribe"] = _list_unsubscribe(rendered.links.unsubscribe, newsletter.unsubscribe_mailto)
    msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Digest-Date"] = day.isoformat()
    msg["MIME-Version"] = "1.0"
    msg["Content-Type"] = _FIXED["Content-Type"]
    msg.set_payload([_text_part(rendered.text, "plain"), _text_part(rendered.html, "html")])
    return msg
