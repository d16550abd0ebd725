"""MIME: a rendered digest → an RFC 5322 message with one-click unsubscribe headers."""

from __future__ import annotations

import hashlib
import re
from datetime import date, datetime, timezone
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime
from urllib.parse import quote

from .models import Newsletter, Rendered, Subscriber

_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str) -> str:
    """Text safe for a header: control characters (CR, LF, tab …) become single spaces."""
    return " ".join(_CONTROL.sub(" ", text).split())


def _domain(address: str) -> str:
    return address.rpartition("@")[2] or "localhost"


def message_id(email: str, day: date, from_address: str) -> str:
    """Message-ID derived from (subscriber, digest date): a resend carries the same one."""
    digest = hashlib.sha256(f"{email.lower()}\n{day.isoformat()}".encode()).hexdigest()[:20]
    return f"<digest.{day.isoformat()}.{digest}@{_domain(from_address)}>"


def _address(name: str, email: str) -> Address:
    user, _, domain = email.partition("@")
    return Address(display_name=one_line(name), username=user, domain=domain)


def _list_unsubscribe(url: str, mailto: str) -> str:
    parts = [f"<{url}>"]
    if mailto:
        parts.append(f"<mailto:{mailto}?subject={quote('unsubscribe')}>")
    return ", ".join(parts)


def build_message(rendered: Rendered, subscriber: Subscriber, newsletter: Newsletter, day: date,
                  *, now: datetime | None = None, test: bool = False) -> EmailMessage:
    """multipart/alternative (text first, HTML last) with every header a bulk sender needs."""
    msg = EmailMessage(policy=SMTP)
    msg["From"] = _address(newsletter.name, newsletter.from_address)
    msg["To"] = _address(subscriber.name, subscriber.email)
    if newsletter.reply_to:
        msg["Reply-To"] = newsletter.reply_to
    msg["Subject"] = ("[TEST] " if test else "") + one_line(rendered.subject)
    msg["Date"] = format_datetime(now or datetime.now(timezone.utc))
    msg["Message-ID"] = message_id(subscriber.email, day, newsletter.from_address)
    msg["List-Id"] = f"{one_line(newsletter.name)} <digest.{_domain(newsletter.from_address)}>"
    msg["List-Unsubscribe"] = _list_unsubscribe(rendered.links.unsubscribe, newsletter.unsubscribe_mailto)
    msg["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
    msg["Auto-Submitted"] = "auto-generated"
    msg["X-Digest-Date"] = day.isoformat()
    msg.set_content(rendered.text, subtype="plain", charset="utf-8", cte="quoted-printable")
    msg.add_alternative(rendered.html, subtype="html", charset="utf-8", cte="quoted-printable")
    return msg
