"""Tagged return paths (VERP): each digest's envelope sender names it, so its bounce can be matched back.

`bounces@example.org` becomes `bounces+2026-06-12.<hash>@example.org` for one digest, the tag being
the local part of the digest's Message-ID after `digest.` (a hash of the subscriber and the date,
which hides the address). A bounce comes back to that address whatever the remote server makes of
the message, so the tag finds the digest even when the report quotes nothing of it.
"""

from __future__ import annotations

import re
from datetime import date

from .mail import message_id

_TAG = re.compile(r"^(\d{4}-\d{2}-\d{2})\.([0-9a-f]{20})$")


def _tag(email: str, day: date) -> str:
    return message_id(email, day, "x@x").removeprefix("<digest.").partition("@")[0]


def tagged_sender(base: str, email: str, day: date) -> str:
    """The return path of `email`'s digest of `day`: base's local part, `+`, the tag, base's domain."""
    local, _, domain = base.rpartition("@")
    return f"{local}+{_tag(email, day)}@{domain}"


def message_id_of(address: str, base: str, from_address: str) -> str | None:
    """The Message-ID of the digest a tagged return path names; None when `address` is not one of base's tags."""
    local, _, domain = address.strip().lower().rpartition("@")
    base_local, _, base_domain = base.strip().lower().rpartition("@")
    head, plus, tag = local.partition("+")
    if not plus or head != base_local or domain != base_domain or not _TAG.match(tag):
        return None
    return f"<digest.{tag}@{from_address.rpartition('@')[2] or 'localhost'}>"
