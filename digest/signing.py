"""DKIM: sign a finished message's bytes with dkimpy and prepend the DKIM-Signature header.

Signing the bytes the transport will send (rather than a message object that is serialised again
later) is what keeps the signature valid: nothing is refolded or re-encoded after it is made.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dkim
from dkim.crypto import UnparsableKeyError, parse_pem_private_key

from .errors import ConfigError, DeliveryError

# RFC 8058 requires List-Unsubscribe and List-Unsubscribe-Post to be signed for one-click
# unsubscribe; the rest are the headers a receiver shows or relies on. A header listed here but
# absent from a message is signed as empty, so it cannot be added in transit either.
SIGNED_HEADERS = ("From", "To", "Subject", "Date", "Message-ID", "Reply-To", "List-Id", "List-Unsubscribe",
                  "List-Unsubscribe-Post", "MIME-Version", "Content-Type")
_DNS_NAME = re.compile(r"^(?!-)[A-Za-z0-9_-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9_-]{1,63}(?<!-))*$")


class DkimSigner:
    """Signs finished messages for one selector and domain (rsa-sha256, relaxed/relaxed)."""

    def __init__(self, selector: str, domain: str, key: bytes) -> None:
        for name, value in (("dkim.selector", selector), ("dkim.domain", domain)):
            if not _DNS_NAME.match(value):
                raise ConfigError(f"{name} {value!r} is not a DNS name")
        try:
            parse_pem_private_key(key)
        except (UnparsableKeyError, ValueError) as exc:
            raise ConfigError(f"the DKIM key is not a PEM RSA private key: {exc}") from exc
        self.selector, self.domain = selector.encode(), domain.encode()
        self._key = key
        self._headers = [h.encode() for h in SIGNED_HEADERS]

    def __repr__(self) -> str:
        return f"DkimSigner(selector={self.selector.decode()!r}, domain={self.domain.decode()!r})"

    def __call__(self, data: bytes) -> bytes:
        """`data` with a DKIM-Signature header in front of it."""
        try:
            signature = dkim.sign(data, self.selector, self.domain, self._key, canonicalize=(b"relaxed", b"relaxed"),
                                  include_headers=self._headers, linesep=b"\r\n")
        except dkim.DKIMException as exc:
            raise DeliveryError(f"cannot DKIM-sign the message: {exc}") from exc
        return signature + data

    @classmethod
    def from_config(cls, config: Any, environ: Mapping[str, str]) -> DkimSigner | None:
        """The signer `[dkim]` asks for, or None when no selector is set."""
        d, where = config.dkim, str(config.source or "settings")
        if not d.selector:
            return None
        domain = d.domain or config.newsletter.from_address.rpartition("@")[2]
        if d.key_file:
            try:
                key = Path(d.key_file).read_bytes()
            except OSError as exc:
                raise ConfigError(f"{where}: cannot read dkim.key_file {d.key_file}: {exc.strerror}") from exc
        elif environ.get(d.key_env):
            key = environ[d.key_env].encode()
        else:
            raise ConfigError(f"{where}: dkim.selector is set but there is no key: set dkim.key_file or the "
                              f"environment variable {d.key_env} (dkim.key_env)")
        try:
            return cls(d.selector, domain, key)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
