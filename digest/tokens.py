"""Link tokens: each names one subscriber, one action and the day it was made, and cannot be forged or altered.

A token is the subscriber's address and the day it was issued, encrypted and authenticated with
AES-SIV (RFC 5297) under a key derived from the link secret, the action as associated data: the
address cannot be read out of a link, and a token made for one action is refused for another.
AES-SIV is deterministic, so the same subscriber, action and day give the same token (a resent
digest is byte for byte the same). Tokens made before (itsdangerous-signed `{"e": address}`,
readable, no date) are still read, as `legacy`, so that links already mailed keep working.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import date
from functools import cached_property

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from itsdangerous import BadSignature, URLSafeSerializer

from digest.models import Links

ACTIONS = ("unsubscribe", "preferences", "feedback", "view", "archive", "feed")
FOREVER = date(2000, 1, 1)  # the day of a link that must read the same for good: a reader's feed address (`web.feeds`)
SEALED = ("signup-confirm",)  # sealed payloads of other rooms (`seal`), never read as link tokens
_EPOCH = date(2000, 1, 1).toordinal()  # issue days are counted from here, in three bytes (until the year 47,000)


class BadToken(Exception):
    """A token that was forged, altered, truncated or made for another action."""


@dataclass(frozen=True)
class Token:
    """What a valid token says: whose it is, and the day it was made (None: a token of the old kind)."""

    email: str
    issued: date | None

    @property
    def legacy(self) -> bool:
        return self.issued is None


@dataclass(frozen=True)
class Signer:
    """Makes and checks tokens with one secret. Whether a token is still good for its action is the caller's call."""

    secret: str

    @cached_property
    def _cipher(self) -> AESSIV:
        key = HKDF(hashes.SHA256(), 64, salt=None, info=b"paper-digest.tokens.v2").derive(self.secret.encode())
        return AESSIV(key)

    @cached_property
    def message_key(self) -> bytes:
        """The key of digests' Message-IDs and return-path tags (`message.message_id`): the links' secret, derived
        for another purpose, so that a report naming a digest can be told from a forged one (`bounces.intake`)."""
        return HKDF(hashes.SHA256(), 32, salt=None, info=b"paper-digest.message-id.v1").derive(self.secret.encode())

    @cached_property
    def _legacy(self) -> dict[str, URLSafeSerializer]:
        return {action: URLSafeSerializer(self.secret, salt=f"paper-digest.{action}")
                for action in ACTIONS}

    @staticmethod
    def _aad(action: str) -> list[bytes]:
        if action not in ACTIONS + SEALED:
            raise ValueError(f"unknown token action {action!r}")
        return [f"paper-digest.{action}".encode()]

    def make(self, action: str, email: str, issued: date) -> str:
        """The token for `email`'s `action` links made on `issued` (a digest's date, or today)."""
        day = (issued.toordinal() - _EPOCH).to_bytes(3, "big")
        sealed = self._cipher.encrypt(day + email.encode(), self._aad(action))
        return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()

    def check(self, action: str, token: str) -> Token:
        """What a valid token for `action` says; BadToken for anything else."""
        if action not in ACTIONS:
            raise ValueError(f"unknown token action {action!r}")
        aad = self._aad(action)
        if "." in token:  # base64url has no dot; the itsdangerous tokens mailed before have one
            return self._check_legacy(action, token)
        try:
            plain = self._cipher.decrypt(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)), aad)
            return Token(plain[3:].decode(), date.fromordinal(int.from_bytes(plain[:3], "big") + _EPOCH))
        except (InvalidTag, binascii.Error, ValueError, UnicodeDecodeError) as exc:
            raise BadToken("invalid or altered link") from exc

    def seal(self, purpose: str, payload: bytes) -> str:
        """`payload` encrypted and authenticated for one of SEALED's purposes, as URL-safe text."""
        if purpose not in SEALED:
            raise ValueError(f"unknown sealed purpose {purpose!r}")
        return base64.urlsafe_b64encode(self._cipher.encrypt(payload, self._aad(purpose))).rstrip(b"=").decode()

    def unseal(self, purpose: str, token: str) -> bytes:
        """The payload `seal` put in `token` for `purpose`; BadToken for anything forged, altered or truncated."""
        if purpose not in SEALED:
            raise ValueError(f"unknown sealed purpose {purpose!r}")
        try:
            return self._cipher.decrypt(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)),
                                        self._aad(purpose))
        except (InvalidTag, binascii.Error, ValueError) as exc:
            raise BadToken("invalid or altered link") from exc

    def make_legacy(self, action: str, email: str) -> str:
        """A token of the old kind (what emails sent before carry): for tests of old links."""
        return str(self._legacy[action].dumps({"e": email}))

    def _check_legacy(self, action: str, token: str) -> Token:
        try:
            payload = self._legacy[action].loads(token)
        except BadSignature as exc:
            raise BadToken("invalid or altered link") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("e"), str):
            raise BadToken("invalid link")
        return Token(payload["e"], None)


@dataclass(frozen=True)
class LinkMaker:
    """The URLs of one subscriber's emails (unsubscribe, preferences, feedback, view), their tokens signed here."""

    signer: Signer
    base_url: str
    unsubscribe_mailto: str = ""

    def __call__(self, email: str, issued: date | None = None) -> Links:
        """`email`'s links, their tokens dated `issued` (default today).

        A digest's links are dated with the digest's date (so a resend is the same message); the
        preferences and feedback links expire `web.link_days` after it.
        """
        base, day = self.base_url, issued or date.today()
        token = self.signer.make
        return Links(unsubscribe=f"{base}/unsubscribe/{token('unsubscribe', email, day)}",
                     preferences=f"{base}/preferences/{token('preferences', email, day)}",
                     unsubscribe_mailto=self.unsubscribe_mailto or None,
                     feedback=f"{base}/feedback/{token('feedback', email, day)}",
                     view=f"{base}/view/{token('view', email, day)}")
