"""Link tokens: the same bytes as itsdangerous' URLSafeSerializer makes, one action each, never forged."""

from __future__ import annotations

import pytest
from itsdangerous import URLSafeSerializer

from digest.tokens import BadToken, Signer


@pytest.mark.parametrize("email", ["ada@example.org", "a.very.long.address+tag@mail.sub.example.org", "é@x.org"])
def test_tokens_are_standard_itsdangerous_tokens(email):
    """Our faster signer makes exactly the token URLSafeSerializer makes, and reads its tokens back."""
    standard = URLSafeSerializer("k", salt="paper-digest.unsubscribe").dumps({"e": email})
    assert Signer("k").make("unsubscribe", email) == standard
    assert Signer("k").check("unsubscribe", standard) == {"e": email}


def test_a_token_works_for_its_action_and_key_only():
    """A preferences token is refused as an unsubscribe token, and by another key."""
    token = Signer("k").make("preferences", "ada@example.org")
    assert Signer("k").check("preferences", token)["e"] == "ada@example.org"
    for signer, action in ((Signer("k"), "unsubscribe"), (Signer("other"), "preferences")):
        with pytest.raises(BadToken):
            signer.check(action, token)
