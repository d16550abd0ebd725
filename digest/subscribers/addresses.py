"""Subscribers' email addresses: what a profile, an import or the signup form may give, and its header form.

An address from outside is accepted only when it is one mailbox, as email-validator reads it without DNS (no
display name, no angle brackets, no quoted local part, no IP-literal domain, no special-use domain, ASCII only),
and holds no `=?`: Python's header parser (and many mail programs) decode an RFC 2047 encoded word even in a
local part, so `=?utf-8?b?...?=@attacker.example` would reach the To header as whatever the word hides, an
extra recipient included. Headers are then built from the two parts (`mailbox_parts`), never from text.

email-validator costs ~90 us an address, most of it reading the domain; the local part is the same dot-atom
check it makes, and each domain is asked about once (an import of a million addresses has few domains).
"""

from __future__ import annotations

import re
from functools import lru_cache

MAX_ADDRESS = 254  # characters of an address (RFC 5321's path less its angle brackets); email-validator's limit
MAX_LOCAL = 64  # characters before the @ (RFC 5321 4.5.3.1.1; email-validator's strict mode)
# RFC 5322's dot-atom of ASCII atext: email-validator's own check of an ASCII local part (DOT_ATOM_TEXT).
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LOCAL = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*")
_SAFE = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*@[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
ENCODED_WORD = "'=?' starts an encoded word in mail programs, which can hide another address"


def address_problem(text: object) -> str | None:
    """Why `text` is not one plain mailbox (a clause for a message), or None when it is one."""
    if not isinstance(text, str):
        return "it is not text"
    if len(text) > MAX_ADDRESS:
        return f"it is {len(text)} characters long, and an address has at most {MAX_ADDRESS}"
    if "=?" in text:
        return ENCODED_WORD
    if not text.isascii():  # mailed without SMTPUTF8: an internationalised domain is written in its xn-- form
        return "it has characters outside ASCII (write an internationalised domain in its xn-- form)"
    local, at, domain = text.rpartition("@")
    if not at or not _LOCAL.fullmatch(local):
        return _validator_says(text) or "it is not a plain address"
    if len(local) > MAX_LOCAL:
        return f"the part before the @-sign is {len(local)} characters long, and at most {MAX_LOCAL} is mailable"
    return _domain_problem(domain)


def is_email(text: object) -> bool:
    """Whether `text` is one plain mailbox like ada@example.org (see `address_problem`)."""
    return address_problem(text) is None


def header_address(address: str) -> str:
    """`address`, checked to be one recipient in a header whatever parses it; ValueError otherwise (an address kept
    from before these checks, or written into the store by hand: that subscriber's message fails, alone)."""
    if len(address) > MAX_ADDRESS or "=?" in address or not _SAFE.fullmatch(address):
        raise ValueError(f"{address[:MAX_ADDRESS]!r} is not a plain email address: no header is built for it")
    return address


def mailbox_parts(address: str) -> tuple[str, str]:
    """The local part and domain of an address, for a header built from parts (`header_address`'s check first)."""
    local, _, domain = header_address(address).rpartition("@")
    return local, domain


@lru_cache(maxsize=4096)
def _domain_problem(domain: str) -> str | None:
    return _validator_says(f"a@{domain}")


def _validator_says(text: str) -> str | None:
    from email_validator import EmailNotValidError, validate_email  # 57 ms to import: only once an address is read

    try:
        validate_email(text, check_deliverability=False, allow_smtputf8=False, allow_quoted_local=False,
                       allow_domain_literal=False, allow_display_name=False)
    except EmailNotValidError as exc:
        reason = str(exc).rstrip(".")
        return reason[:1].lower() + reason[1:]
    return None
