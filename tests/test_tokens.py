"""Link tokens: opaque, dated, one action each, never forged; the old itsdangerous kind still read."""

from __future__ import annotations

from datetime import date

import pytest
from itsdangerous import URLSafeSerializer

from digest.tokens import BadToken, Signer, Token

DAY = date(2026, 6, 12)


@pytest.mark.parametrize("email", ["ada@example.org", "a.very.long.address+tag@mail.sub.example.org", "é@x.org"])
def test_a_token_gives_back_its_address_and_day(email):
    """make → check round-trips the address and the day; the same inputs give the same token (a resend is equal)."""
    token = Signer("k").make("preferences", email, DAY)
    assert Signer("k").check("preferences", token) == Token(email, DAY)
    assert Signer("k").make("preferences", email, DAY) == token and "." not in token


def test_a_token_works_for_its_action_and_key_only():
    """A preferences token is refused as an unsubscribe token, and by another key."""
    token = Signer("k").make("preferences", "ada@example.org", DAY)
    for signer, action in ((Signer("k"), "unsubscribe"), (Signer("other"), "preferences")):
        with pytest.raises(BadToken):
            signer.check(action, token)


def test_old_tokens_are_still_read_as_undated():
    """A token mailed before (itsdangerous' URLSafeSerializer of {"e": address}) checks out, with no day."""
    old = URLSafeSerializer("k", salt="paper-digest.unsubscribe").dumps({"e": "ada@example.org"})
    assert Signer("k").check("unsubscribe", old) == Token("ada@example.org", None)
    assert Signer("k").make_legacy("unsubscribe", "ada@example.org") == old
    with pytest.raises(BadToken):
        Signer("k").check("preferences", old)


@pytest.mark.parametrize("token", ["", "!!!", "AAAA", "x" * 300])
def test_garbage_is_a_bad_token(token):
    """Anything that is not a token made with the key is BadToken, never another exception."""
    with pytest.raises(BadToken):
        Signer("k").check("unsubscribe", token)
