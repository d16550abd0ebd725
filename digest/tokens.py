"""Signed link tokens: each names one subscriber and one action, and cannot be forged or altered."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from itsdangerous import BadSignature, URLSafeSerializer

ACTIONS = ("unsubscribe", "preferences", "feedback")


class BadToken(Exception):
    """A token that was forged, altered, truncated or made for another action."""


@dataclass(frozen=True)
class Signer:
    """Makes and checks tokens with one secret; unsubscribe tokens never expire (CAN-SPAM)."""

    secret: str

    @cached_property
    def _serializers(self) -> dict[str, URLSafeSerializer]:
        return {action: URLSafeSerializer(self.secret, salt=f"paper-digest.{action}") for action in ACTIONS}

    def _serializer(self, action: str) -> URLSafeSerializer:
        if action not in ACTIONS:
            raise ValueError(f"unknown token action {action!r}")
        return self._serializers[action]

    def make(self, action: str, email: str, **extra: str) -> str:
        return str(self._serializer(action).dumps({"e": email, **extra}))

    def check(self, action: str, token: str) -> dict[str, str]:
        """The payload of a valid token for `action`; BadToken otherwise."""
        try:
            payload = self._serializer(action).loads(token)
        except BadSignature as exc:
            raise BadToken("invalid or altered link") from exc
        if not isinstance(payload, dict) or not isinstance(payload.get("e"), str):
            raise BadToken("invalid link")
        return payload
