"""Parser for the text of a huggingface.co/papers page (the `seeds/*.txt` format)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from digest.models import Paper, ParseResult, RecordError
from digest.sources._fields import MAX_TITLE_CHARS, BadRecord, collapse, require_title, split_lines

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


@dataclass(frozen=True)
class _Block:
    """A run of non-blank lines and the file line number of its first line."""

    line: int
    lines: tuple[str, ...]

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
    blocks = _blocks(text)
    start = _skip_header(blocks)
    page_date, start, errors = _page_date(blocks, start, source, seen_on)
    papers: list[Paper] = []
    index = start
    while index < len(blocks):
        size = _extent(blocks, index)
        try:
            papers.append(_entry(blocks[index : index + size], page_date))
        except BadRecord as bad:
            errors.append(RecordError(source, blocks[index].line, str(bad)))
        index += size
    return ParseResult(tuple(papers), tuple(errors))


def _blocks(text: str) -> list[_Block]:
    """The non-blank lines of `text` grouped into blocks separated by blank lines."""
    blocks: list[_Block] = []
    current: list[str] = []
    for number, raw in enumerate([*split_lines(text), ""], start=1):
        if raw.strip():
            current.append(raw.strip())
        elif current:
            blocks.append(_Block(number - len(current), tuple(current)))
            current = []
    return blocks


def _skip_header(blocks: list[_Block]) -> int:
    """Index of the first block after the page header lines."""
    index = 0
    while index < len(blocks) and len(blocks[index].lines) == 1 and blocks[index].lines[0] in HEADER_LINES:
        index += 1
    return index


def _page_date(blocks: list[_Block], index: int, source: str, seen_on: date) -> tuple[date, int, list[RecordError]]:
    """The page date at blocks[index] (or seen_on, with an error, when there is none) and where entries start."""
    match = _DAY.match(blocks[index].lines[0]) if index < len(blocks) and len(blocks[index].lines) == 1 else None
    if match and not match["year"] and not match["upvotes"]:
        month, day = _month(match["month"]), int(match["day"])
        found = _latest(month, day, seen_on) if month else None
        if found:
            return found, index + 1, []
        reason = f"page date {blocks[index].lines[0]!r} is not a real day; using {seen_on.isoformat()}"
        return seen_on, index + 1, [RecordError(source, blocks[index].line, reason)]
    line = blocks[index].line if index < len(blocks) else None
    reason = f"no page date (like 'Jan 5') after the header; using {seen_on.isoformat()}"
    return seen_on, index, [RecordError(source, line, reason)]


def _extent(blocks: list[_Block], index: int) -> int:
    """How many blocks the entry at blocks[index] spans: title, abstract and an optional meta block."""

    def meta_at(at: int) -> bool:
        return at < len(blocks) and blocks[at].is_meta

    if blocks[index].is_meta:
        return 1
    # A "title" over the limit is most likely an abstract whose title line is missing:
    # it ends the entry so the next title starts a fresh one.
    if len(blocks[index].lines[0]) > MAX_TITLE_CHARS or meta_at(index + 1) or index + 1 == len(blocks):
        return 2 if meta_at(index + 1) else 1
    return 3 if meta_at(index + 2) else 2


def _entry(blocks: list[_Block], page_date: date) -> Paper:
    """The paper of one entry's blocks (title, abstract, optional meta); BadRecord when malformed."""
    head, *rest = blocks
    if head.is_meta:
        raise BadRecord(f"authors/date block {head.lines[0]!r} has no title and abstract before it")
    title = _single(head, "title")
    if len(title) > MAX_TITLE_CHARS:
        raise BadRecord(f"title is {len(title)} characters long (over {MAX_TITLE_CHARS}): is the title line missing?")
    title = require_title(title)
    if not rest or rest[0].is_meta:
        raise BadRecord("no abstract line after the title")
    abstract = collapse(_single(rest[0], "abstract"))
    meta = _meta(rest[1], page_date) if len(rest) > 1 else _Meta()
    return Paper(
        title=title,
        abstract=abstract,
        n_authors=meta.n_authors,
        organization=meta.organization,
        published=meta.published,
        listed_on=page_date,
        upvotes=meta.upvotes,
    )


def _single(block: _Block, what: str) -> str:
    """The one line of a title or abstract block; BadRecord when it spans several."""
    if len(block.lines) != 1:
        raise BadRecord(f"{what} at line {block.line} spans {len(block.lines)} lines; expected one")
    return block.lines[0]


def _meta(block: _Block, page_date: date) -> _Meta:
    """Authors or organisation, date and upvotes of a meta block ('• 9 authors' / '·' / 'Apr 22, 2024 2')."""
    lines = block.lines
    if MIDDLE_DOT not in lines:
        raise BadRecord(f"{lines[0]!r} is not followed by a '{MIDDLE_DOT}' line and a date")
    dot = lines.index(MIDDLE_DOT)
    if dot > 1:
        raise BadRecord(f"expected one authors or organisation line before '{MIDDLE_DOT}', found {dot}")
    if dot + 1 == len(lines):
        raise BadRecord(f"'{MIDDLE_DOT}' is not followed by a date")
    if dot + 2 < len(lines):
        raise BadRecord(f"unexpected line after the date: {lines[dot + 2]!r}")
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
            raise BadRecord(f"authors line {line!r} has no author count")
        return int(match[1]), None
    # The organisation line is "<slug> <Display Name>"; the display name is what readers know.
    slug, _, display = line.partition(" ")
    return None, display.strip() or slug


def _dated(line: str, page_date: date) -> tuple[date, int | None]:
    """(date, upvotes) of a date line; a date without a year is the latest such day on or before the page date."""
    match = _DAY.match(line)
    month = _month(match["month"]) if match else None
    if not match or not month:
        raise BadRecord(f"'{MIDDLE_DOT}' is not followed by a date like 'Jun 20, 2024' (found {line!r})")
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
