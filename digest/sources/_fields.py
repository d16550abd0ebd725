"""Field cleaning shared by the source parsers: titles, dates, counts, lists of strings, and the limits every
paper is checked against before it may reach the store."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date
from typing import AnyStr, Protocol

from digest.models import NOT_TEXT, Paper, ParseResult, RecordError
from digest.sources._json import LongNumber, loads
from digest.sources.latex import plain

MAX_TITLE_CHARS = 500
MAX_ABSTRACT_CHARS = 10_000  # arXiv allows 1,920; also the AI summary's limit
MAX_NAME_CHARS = 300  # an author or organisation name
MAX_AUTHORS = 10_000  # the longest real author lists have about 5,000 names
MAX_TAGS = 100  # keywords, and arXiv categories
MAX_TAG_CHARS = 200
MAX_URL_CHARS = 2_000
# '<' in an HTML page ('<' and '&' in a feed): a Daily Papers page has a few thousand, an arXiv feed of 2,000
# entries about 60,000. Each costs the parsers about 30 µs (a page of 4 million tags took 110 s and 2.2 GB).
MAX_MARKUP = 200_000
# A source stops being read once this many of its records are refused and they outnumber its papers: it will be
# refused whole (see vet), and a file of junk is not walked to its end, keeping an error for each line.
MAX_REFUSED = 1_000
# Blank lines of papers JSONL: a real file has none, or one after each record. Once they are this many more than the
# records read, the file is refused whole: each costs about a microsecond to skip, and a 48 KB gzip file holds 50
# million of them.
MAX_BLANK_LINES = 1_000

_LIMITS = {"title": MAX_TITLE_CHARS, "abstract": MAX_ABSTRACT_CHARS, "summary": MAX_ABSTRACT_CHARS,
           "organization": MAX_NAME_CHARS, "url": MAX_URL_CHARS, "github_url": MAX_URL_CHARS,
           "project_url": MAX_URL_CHARS}
_ITEMS = {"authors": ("author", MAX_AUTHORS, MAX_NAME_CHARS), "keywords": ("keyword", MAX_TAGS, MAX_TAG_CHARS),
          "categories": ("category", MAX_TAGS, MAX_TAG_CHARS)}


class BadRecord(ValueError):
    """A record that cannot become a Paper; the message is the reason."""


class SourceError(Exception):
    """A whole source cannot be read (one bad record in it is a RecordError instead)."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class Spec(Protocol):
    """What a paged API's walk reads of its `[[sources]]` entry (`live.SourceSpec` is one): the walkers take this,
    not the entry's class, so the entry may name them without their naming it back."""

    @property
    def kind(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def categories(self) -> tuple[str, ...]: ...
    @property
    def days(self) -> int: ...
    @property
    def venue(self) -> str: ...
    @property
    def label(self) -> str: ...


class PageError(SourceError):
    """A page of a paged API's walk is not the response it should be: the whole source fails, naming the page's
    URL."""

    def __init__(self, source: str, url: str, reason: str) -> None:
        super().__init__(source, reason)
        self.url = url


def page_text(body: bytes, source: str, url: str) -> str:
    """A page's body as text; PageError when it is not UTF-8 (JSON is)."""
    try:
        return body.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except UnicodeDecodeError as error:
        raise PageError(source, url, f"not UTF-8 (byte {body[error.start]:#04x} at offset {error.start:,}); nothing "
                                     "from it was stored") from None


def page_json(text: str, source: str, where: str, what: str) -> object:
    """A page's text read as JSON (with `_json`'s limits); PageError naming `where` when it is empty or not JSON
    (`what`: the response it should be, "a details response")."""
    if not text.strip():
        raise PageError(source, where, f"the body is empty, not {what}; nothing from it was stored")
    try:
        return loads(text)
    except json.JSONDecodeError as error:
        raise PageError(source, where, f"invalid JSON: {error.msg} (line {error.lineno}, column {error.colno}); "
                                       "nothing from it was stored") from None


def json_kind(value: object) -> str:
    """What a JSON value is, as an error says it: 'a list', 'a number', 'null'."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true or false"
    names = {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number"}
    return names.get(type(value), "a number")


def checked(paper: Paper) -> Paper:
    """`paper` when every text of it is within its limit and is text, its abstract and summary with LaTeX markup
    made plain text (`latex.plain`); BadRecord naming the field otherwise.

    A record holding NUL, a control character or a lone surrogate is refused rather than cleaned: it never
    reaches the store, so it can neither fill a field nor replace clean text there.
    """
    for name, limit in _LIMITS.items():
        _check(getattr(paper, name), name, limit)
    for name, (what, most, limit) in _ITEMS.items():
        items = getattr(paper, name)
        if len(items) > most:
            raise BadRecord(f"{len(items):,} {name} (over {most:,})")
        for number, item in enumerate(items, start=1):
            _check(item, f"{what} {number}", limit)
    # Titles stay as the source wrote them: a paper without an arXiv id is known by its title, in the store and in
    # readers' libraries (models.normalise_title), and "H_2O" and "H₂O" would be two papers.
    abstract = plain(paper.abstract)
    summary = plain(paper.summary) if paper.summary else paper.summary
    if (abstract, summary) == (paper.abstract, paper.summary):
        return paper
    return replace(paper, abstract=abstract, summary=summary)


def _check(text: str | None, what: str, limit: int) -> None:
    if text is None:
        return
    if len(text) > limit:
        raise BadRecord(f"{what} is {len(text):,} characters long (over {limit:,})")
    bad = NOT_TEXT.search(text)
    if bad:
        raise BadRecord(f"{what} holds {_describe(bad.group())} at character {bad.start() + 1}: not text")


def _describe(char: str) -> str:
    """'U+0000 (NUL)', 'U+001B (a control character)', 'U+D800 (a lone surrogate)'."""
    if char == "\0":
        return "U+0000 (NUL)"
    kind = "a lone surrogate" if unicodedata.category(char) == "Cs" else "a control character"
    return f"U+{ord(char):04X} ({kind})"


@dataclass
class Reading:
    """The papers and refused records of one source as it is read, and when to stop reading it."""

    source: str
    papers: list[Paper] = field(default_factory=list)
    errors: list[RecordError] = field(default_factory=list)
    blank: int = 0  # blank lines skipped

    def refuse(self, line: int | None, reason: str) -> None:
        self.errors.append(RecordError(self.source, line, reason))

    def skip_blank(self, line: int) -> None:
        """Count blank line `line`; SourceError once they are over MAX_BLANK_LINES more than the records read."""
        self.blank += 1
        if self.blank - len(self.papers) - len(self.errors) > MAX_BLANK_LINES:
            raise SourceError(self.source, f"over {MAX_BLANK_LINES:,} blank lines more than the records read, by line "
                                           f"{line:,}: not papers JSONL; nothing from it was stored")

    def swamped(self, line: int | None) -> bool:
        """Whether to stop reading (over MAX_REFUSED refused, more than read); says so in one more error when it is."""
        if len(self.errors) <= MAX_REFUSED or len(self.errors) <= len(self.papers):
            return False
        self.refuse(line, f"over {MAX_REFUSED:,} records refused and more refused than read: the rest is not read")
        return True

    def result(self) -> ParseResult:
        return ParseResult(tuple(self.papers), tuple(self.errors))


def shown(value: object, limit: int = 80) -> str:
    """`value` as an error quotes it: its repr, cut after `limit` characters (a record can hold a megabyte)."""
    if isinstance(value, str) and len(value) > limit:
        return repr(value[:limit])[:-1] + "…" + repr(value)[-1]
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


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


def count(value: object, what: str = "count") -> int | None:
    """`value` when it is a non-negative integer a database can hold (bool is not a count), else None;
    BadRecord for a JSON number too long to read."""
    if isinstance(value, LongNumber):
        raise BadRecord(f"{what} is {value!r} (over {len(str(MAX_COUNT))})")
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
        return value
    return None


def strings(value: object) -> tuple[str, ...]:
    """The non-empty strings of a list, stripped; anything else gives ()."""
    if not isinstance(value, list):
        return ()
    return tuple(item.strip() for item in value if isinstance(item, str) and item.strip())


def split_lines(text: str) -> Iterator[str]:
    """Lines split on newlines only (str.splitlines also splits on U+2028 etc., which shifts line numbers), one
    at a time: a parser that stops early never makes the lines of the rest."""
    return (line.removesuffix("\r") for line in pieces(text, "\n"))


def pieces(data: AnyStr, separator: AnyStr) -> Iterator[AnyStr]:
    """`data.split(separator)`, one piece at a time."""
    start = 0
    while (end := data.find(separator, start)) >= 0:
        yield data[start:end]
        start = end + len(separator)
    yield data[start:]
