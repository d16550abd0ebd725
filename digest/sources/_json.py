"""JSON read with limits: nesting depth checked before the decoder recurses, long integers never converted.

Python's decoder recurses once per level (10,000 levels raise RecursionError) and `int()` refuses 4,300 digits
or more (ValueError), so a hostile record could stop a whole ingest; here neither can happen.
"""

from __future__ import annotations

import json
import re

MAX_JSON_DEPTH = 32  # a Daily Papers response nests 6 deep, a JSONL record 2
MAX_JSON_INT_DIGITS = 20  # every count we read fits in 19 digits (a database integer)

# A string (to its closing quote, or the end of an unterminated one) or a bracket. Possessive, so a string
# is matched once, whatever it holds: the scan is linear.
_TOKEN = re.compile(r'"(?:[^"\\]++|\\.?)*+(?:"|\Z)|[\[\]{}]', re.DOTALL)


class LongNumber:
    """A JSON integer longer than MAX_JSON_INT_DIGITS, kept unconverted: a field that needs it refuses it."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits

    def __repr__(self) -> str:
        return f"a number of {self.digits:,} digits"


def _integer(text: str) -> int | LongNumber:
    return int(text) if len(text) <= MAX_JSON_INT_DIGITS else LongNumber(len(text.lstrip("-")))


DECODER = json.JSONDecoder(parse_int=_integer)  # holds no state between calls
TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"


class TooDeep(json.JSONDecodeError):
    """JSON nested past MAX_JSON_DEPTH: reported as any other invalid JSON, with its line and column."""


def loads(text: str) -> object:
    """The value of a JSON text read with the limits; JSONDecodeError (or TooDeep) when it cannot be read."""
    offset = too_deep(text)
    if offset is not None:
        raise TooDeep(TOO_DEEP, text, offset)
    return DECODER.decode(text)


def too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """The offset in `text` where JSON nesting (outside strings) passes `limit`, else None.

    Unclosed brackets count as nesting too, since the decoder recurses into them before it finds them
    unclosed. Text with few brackets is not scanned at all (most records).
    """
    if text.count("[") + text.count("{") <= limit:
        return None
    depth = 0
    for token in _TOKEN.finditer(text):
        mark = text[token.start()]
        if mark in "[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif mark in "]}":
            depth -= 1
    return None
