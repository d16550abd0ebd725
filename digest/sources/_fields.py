"""Field cleaning shared by the source parsers: titles, dates, counts, lists of strings."""

from __future__ import annotations

from datetime import date

MAX_TITLE_CHARS = 500


class BadRecord(ValueError):
    """A record that cannot become a Paper; the message is the reason."""


def collapse(text: str) -> str:
    """`text` stripped, with every run of whitespace made one space."""
    return " ".join(text.split())


def require_title(value: object) -> str:
    """The title in `value`, whitespace collapsed; BadRecord when it is missing or too long."""
    title = collapse(value) if isinstance(value, str) else ""
    if not title:
        raise BadRecord("no title")
    if len(title) > MAX_TITLE_CHARS:
        raise BadRecord(f"title is {len(title)} characters long (over {MAX_TITLE_CHARS})")
    return title


def text_or_none(value: object) -> str | None:
    """`value` stripped when it is a non-empty string, else None."""
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def iso_date(value: object) -> date | None:
    """The date of an ISO date or datetime string ('2026-06-12', '2026-06-12T00:00:00.000Z'), else None."""
    if not isinstance(value, str):
        return None
    try:
        return date.fromisoformat(value.strip()[:10])
    except ValueError:
        return None


MAX_COUNT = 2**63 - 1  # what a database integer holds


def count(value: object) -> int | None:
    """`value` when it is a non-negative integer a database can hold (bool is not a count), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def strings(value: object) -> tuple[str, ...]:
    """The non-empty strings of a list, stripped; anything else gives ()."""
    if not isinstance(value, list):
        return ()
    return tuple(item.strip() for item in value if isinstance(item, str) and item.strip())


def split_lines(text: str) -> list[str]:
    """Lines split on newlines only (str.splitlines also splits on U+2028 etc., which shifts line numbers)."""
    return [line.removesuffix("\r") for line in text.split("\n")]
