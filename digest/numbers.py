"""Numbers read from outside (headers, form fields, query strings, files, the command line), read one strict way.

Python's `str.isdigit()` is true of "²", "٣" and "𝟓", and `int()` accepts "+5", " 5 ", "٣" and "1_000"; a
value that passes one and fails the other ends in a traceback, or a 500. `whole` takes ASCII digits only
(surrounding spaces allowed; no sign, no separator, no exponent), at most `MAX_DIGITS` of them, and answers
None for anything else or for a value outside its bounds, so every caller has one place that says no.
"""

from __future__ import annotations

MAX_DIGITS = 18  # beyond any count, size or number of seconds we read, and far below int()'s 4,300-digit limit
ASCII_DIGITS = frozenset("0123456789")


def whole(text: object, low: int = 0, high: int | None = None) -> int | None:
    """The whole number `text` spells in ASCII digits, when `low` <= it <= `high` (no upper bound: None); else
    None (not a string, empty, another script's digits, a sign, a fraction, too many digits, out of bounds)."""
    if not isinstance(text, str):
        return None
    text = text.strip(" \t")
    if not text or len(text) > MAX_DIGITS or not ASCII_DIGITS.issuperset(text):
        return None
    value = int(text)
    if value < low or (high is not None and value > high):
        return None
    return value
