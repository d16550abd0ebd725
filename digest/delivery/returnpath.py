"""Tagged return paths (VERP): each digest's envelope sender names it, so its bounce can be matched back.

`bounces@example.org` becomes `bounces+2026-06-12.<mac>@example.org` for one digest, the tag being
the local part of the digest's Message-ID after `digest.` (a MAC of the subscriber and the date under
the store's key, which hides the address and cannot be made without the key: `message.message_id`). A
bounce comes back to that address whatever the remote server makes of the message, so the tag finds
the digest even when the report quotes nothing of it. The tag is read from the message's own
Message-ID, so a message resent after a crash carries the same return path as its first try.
"""

from __future__ import annotations

import re

# The tags of keyed Message-IDs (24 hex digits) and of the unkeyed ones earlier versions sent (20).
_TAG = re.compile(r"^(\d{4}-\d{2}-\d{2})\.([0-9a-f]{24}|[0-9a-f]{20})$")
_DIGEST_ID = re.compile(rb"^Message-ID:[ \t]*<digest\.([^@<>\s]+)@", re.IGNORECASE | re.MULTILINE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")


def tagged_sender(base: str, data: bytes) -> str:
    """The return path of the digest `data` is: base's local part, `+`, its Message-ID's tag, base's domain.

    A message that is no digest of ours (a test send, with a Message-ID of its own) goes out with `base`.
    """
    end = _HEADER_END.search(data)
    found = _DIGEST_ID.search(data, 0, end.start() if end else len(data))
    tag = found.group(1).decode("ascii", "replace").lower() if found else ""
    if not _TAG.match(tag):
        return base
    local, _, domain = base.rpartition("@")
    return f"{local}+{tag}@{domain}"


def message_id_of(address: str, base: str, from_address: str) -> str | None:
    """The Message-ID of the digest a tagged return path names; None when `address` is not one of base's tags."""
    local, _, domain = address.strip().lower().rpartition("@")
    base_local, _, base_domain = base.strip().lower().rpartition("@")
    head, plus, tag = local.partition("+")
    if not plus or head != base_local or domain != base_domain or not _TAG.match(tag):
        return None
    return f"<digest.{tag}@{from_address.rpartition('@')[2] or 'localhost'}>"
