"""Parser for the text of a huggingface.co/papers page (the `seeds/*.txt` format)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from itertools import chain

from digest.models import Paper, ParseResult, RecordError
from digest.sources._fields import (
    MAX_TITLE_CHARS,
    BadRecord,
    Reading,
    checked,
    collapse,
    require_title,
    shown,
    split_lines,
)

HEADER_LINES = frozenset(
    {
        "new",
        "Get trending papers in your email inbox!",
        "Subscribe",
        "Daily Papers",
        "byAK and the research community",
    }
)
MIDDLE_DOT = "·"
BULLET = "•"
_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_DAY = re.compile(r"^(?P<month>[A-Za-z]{3,9})\.? (?P<day>\d{1,2})(?:, (?P<year>\d{4}))?(?: (?P<upvotes>\d+))?$")
_AUTHORS = re.compile(rf"^{BULLET}\s*(\d+)\s+authors?$")
# How the errors about the page date begin (a source with such an error has no date to trust).
PAGE_DATE_ERRORS = ("page date ", "no page date ")
# The last Feb 29 can be 8 years back (century years skip a leap day); nothing implied is older.
_YEARS_BACK = 8


# Lines kept of a block (an entry's blocks have one to three): a page of junk with no blank line is not held whole.
_BLOCK_LINES = 10


@dataclass(frozen=True)
class _Block:
    """A run of non-blank lines (the first _BLOCK_LINES of them), the file line number of its first line and how
    many lines it has."""

    line: int
    lines: tuple[str, ...]
    size: int

    @property
    def is_meta(self) -> bool:
        return MIDDLE_DOT in self.lines or self.lines[0].startswith(BULLET)


@dataclass(frozen=True)
class _Meta:
    """What an entry's meta block says (all optional: some entries have no meta block)."""

    n_authors: int | None = None
    organization: str | None = None
    published: date | None = None
    upvotes: int | None = None


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of one Daily Papers page text; a malformed entry becomes a RecordError and is skipped."""
    blocks = _Ahead(_blocks(text))
    _skip_header(blocks)
    page_date, errors = _page_date(blocks, source, seen_on)
    reading = Reading(source, errors=errors)
    while (head := blocks.peek(0)) is not None:
        entry = blocks.take(_extent(blocks))
        try:
            reading.papers.append(_entry(entry, page_date))
        except BadRecord as bad:
            reading.refuse(head.line, str(bad))
            if reading.swamped(head.line):
                break
    return reading.result()


def _blocks(text: str) -> Iterator[_Block]:
    """The non-blank lines of `text` grouped into blocks separated by blank lines."""
    current: list[str] = []
    size = 0
    for number, raw in enumerate(chain(split_lines(text), [""]), start=1):
        if raw.strip():
            if size < _BLOCK_LINES:
                current.append(raw.strip())
            size += 1
        elif current:
            yield _Block(number - size, tuple(current), size)
            current, size = [], 0


class _Ahead:
    """The blocks of a page, read as the parser asks for them (an entry looks three blocks ahead at most)."""

    def __init__(self, blocks: Iterator[_Block]) -> None:
        self._blocks = blocks
        self._ahead: list[_Block] = []

    def peek(self, offset: int) -> _Block | None:
        """The block `offset` places ahead, or None past the last one."""
        while len(self._ahead) <= offset:
            block = next(self._blocks, None)
            if block is None:
                return None
            self._ahead.append(block)
        return self._ahead[offset]

    def take(self, count: int) -> list[_Block]:
        taken, self._ahead = self._ahead[:count], self._ahead[count:]
        return taken


def _skip_header(blocks: _Ahead) -> None:
    """Drop the page header lines."""
    while (block := blocks.peek(0)) is not None and block.size == 1 and block.lines[0] in HEADER_LINES:
        blocks.take(1)


def _page_date(blocks: _Ahead, source: str, seen_on: date) -> tuple[date, list[RecordError]]:
    """The page date, taken from the blocks (or seen_on, with an error, when there is none)."""
    block = blocks.peek(0)
    match = _DAY.match(block.lines[0]) if block is not None and block.size == 1 else None
    if block is not None and match and not match["year"] and not match["upvotes"]:
        blocks.take(1)
        month, day = _month(match["month"]), int(match["day"])
        found = _latest(month, day, seen_on) if month else None
        if found:
            return found, []
        reason = f"page date {block.lines[0]!r} is not a real day; using {seen_on.isoformat()}"
        return seen_on, [RecordError(source, block.line, reason)]
    reason = f"no page date (like 'Jan 5') after the header; using {seen_on.isoformat()}"
    return seen_on, [RecordError(source, block.line if block else None, reason)]


def _extent(blocks: _Ahead) -> int:
    """How many blocks the entry at the head spans: title, abstract and an optional meta block."""

    def meta_at(at: int) -> bool:
        block = blocks.peek(at)
        return block is not None and block.is_meta

    head = blocks.peek(0)
    assert head is not None
    if head.is_meta:
        return 1
    # A "title" over the limit is most likely an abstract whose title line is missing:
    # it ends the entry so the next title starts a fresh one.
    if len(head.lines[0]) > MAX_TITLE_CHARS or meta_at(1) or blocks.peek(1) is None:
        return 2 if meta_at(1) else 1
    return 3 if meta_at(2) else 2


def _entry(blocks: list[_Block], page_date: date) -> Paper:
    """The paper of one entry's blocks (title, abstract, optional meta); BadRecord when malformed."""
    head, *rest = blocks
    if head.is_meta:
        raise BadRecord(f"authors/date block {shown(head.lines[0])} has no title and abstract before it")
    title = _single(head, "title")
    if len(title) > MAX_TITLE_CHARS:
        raise BadRecord(f"title is {len(title)} characters long (over {MAX_TITLE_CHARS}): is the title line missing?")
    title = require_title(title)
    if not rest or rest[0].is_meta:
        raise BadRecord("no abstract line after the title")
    abstract = collapse(_single(rest[0], "abstract"))
    meta = _meta(rest[1], page_date) if len(rest) > 1 else _Meta()
    return checked(Paper(
        title=title,
        abstract=abstract,
        n_authors=meta.n_authors,
        organization=meta.organization,
        published=meta.published,
        listed_on=page_date,
        upvotes=meta.upvotes,
    ))


def _single(block: _Block, what: str) -> str:
    """The one line of a title or abstract block; BadRecord when it spans several."""
    if block.size != 1:
        raise BadRecord(f"{what} at line {block.line} spans {block.size:,} lines; expected one")
    return block.lines[0]


def _meta(block: _Block, page_date: date) -> _Meta:
    """Authors or organisation, date and upvotes of a meta block ('• 9 authors' / '·' / 'Apr 22, 2024 2')."""
    lines = block.lines
    if MIDDLE_DOT not in lines:
        raise BadRecord(f"{shown(lines[0])} is not followed by a '{MIDDLE_DOT}' line and a date")
    dot = lines.index(MIDDLE_DOT)
    if dot > 1:
        raise BadRecord(f"expected one authors or organisation line before '{MIDDLE_DOT}', found {dot}")
    if dot + 1 == len(lines):
        raise BadRecord(f"'{MIDDLE_DOT}' is not followed by a date")
    if dot + 2 < len(lines):
        raise BadRecord(f"unexpected line after the date: {shown(lines[dot + 2])}")
    n_authors, organization = _byline(lines[0] if dot == 1 else None)
    published, upvotes = _dated(lines[dot + 1], page_date)
    return _Meta(n_authors, organization, published, upvotes)


def _byline(line: str | None) -> tuple[int | None, str | None]:
    """(author count, organisation) from a '• N authors' line or an organisation line."""
    if line is None:
        return None, None
    if line.startswith(BULLET):
        match = _AUTHORS.match(line)
        if not match:
            raise BadRecord(f"authors line {shown(line)} has no author count")
        return int(match[1]), None
    # The organisation line is "<slug> <Display Name>"; the display name is what readers know.
    slug, _, display = line.partition(" ")
    return None, display.strip() or slug


def _dated(line: str, page_date: date) -> tuple[date, int | None]:
    """(date, upvotes) of a date line; a date without a year is the latest such day on or before the page date."""
    match = _DAY.match(line)
    month = _month(match["month"]) if match else None
    if not match or not month:
        raise BadRecord(f"'{MIDDLE_DOT}' is not followed by a date like 'Jun 20, 2024' (found {shown(line)})")
    day = int(match["day"])
    found = _exact(int(match["year"]), month, day) if match["year"] else _latest(month, day, page_date)
    if found is None:
        raise BadRecord(f"date {line!r} is not a real day")
    return found, int(match["upvotes"]) if match["upvotes"] else None


def _month(name: str) -> int | None:
    """Month number of an English month name or abbreviation ('Jun', 'June', 'Sept'), else None."""
    key = name.lower()
    for number, month in enumerate(_MONTHS, start=1):
        if month.startswith(key):
            return number
    return None


def _exact(year: int, month: int, day: int) -> date | None:
    """date(year, month, day), or None when there is no such day."""
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _latest(month: int, day: int, anchor: date) -> date | None:
    """The latest month/day on or before `anchor` (None when no recent year has that day, e.g. Feb 30)."""
    for year in range(anchor.year, anchor.year - _YEARS_BACK - 1, -1):
        found = _exact(year, month, day)
        if found and found <= anchor:
            return found
    return None
