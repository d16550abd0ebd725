"""OpenReview: a venue's submissions from the notes endpoint of API v2, read a page at a time.

`GET {api}/notes?content.venueid={venue}&offset={offset}&limit=1000` answers

    {"notes": [{"id": "4aMedv0ONH", "forum": "4aMedv0ONH", "number": 23, "cdate": 1755815957278,
                "odate": 1759973047222, "pdate": 1758606093305, "invitations": [...], "readers": ["everyone"], ...,
                "content": {"title": {"value": ...}, "abstract": {"value": ...}, "authors": {"value": [names]},
                            "keywords": {"value": [...]}, "venue": {"value": "RegML 2025 Poster"},
                            "venueid": {"value": ...}, "pdf": {"value": "/pdf/<hash>.pdf"}, "TLDR": {"value": ...}}}],
     "count": 5}

each `content` field an object holding its `value` (a field the reader may not see, such as the authors of a
submission under blind review, is left out); dates are milliseconds since 1970. Accepted papers carry the venue id
itself (ICLR.cc/2025/Conference), submissions under review `{venue}/Submission`. The walk asks for the next offset
(this one plus the notes given) until `count` is reached or a page comes back empty (with no `count`: short of the
limit), at most MAX_PAGES pages. A paper is known by its note id (a note seen twice in one walk is one paper): its
URL is its forum page, `https://openreview.net/forum?id={forum}`, which links its PDF (`/pdf?id={id}`); its date
is the day it was accepted (`pdate`), else the day it became public (`odate`), else the day it was posted
(`cdate`); its keywords are the note's keywords and its category the `primary_area` where the venue has one. A
note that cannot be read is refused naming its number in the walk and its id; a page that is not a notes response
fails the whole source.

The authors' own `TLDR` is the paper's summary, shown to readers as "TL;DR (authors)" (`Paper.summary_by`); a model
is not asked for one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING
from urllib.parse import quote

from digest.models import Paper, ParseResult
from digest.sources._fields import (
    BadRecord,
    PageError,
    Reading,
    Spec,
    checked,
    collapse,
    json_kind,
    page_json,
    page_text,
    require_title,
    shown,
)

if TYPE_CHECKING:
    from digest.sources.fetch import Fetched, Fetcher

KIND = "openreview"
API = "https://api2.openreview.net"
FORUM_URL = "https://openreview.net/forum?id={}"
PAGE_SIZE = 1_000  # the most notes the API gives a page
# Pages of one walk: a million notes, where the largest venues have about 30,000 submissions; a server whose
# `count` is never reached is stopped there.
MAX_PAGES = 1_000
MAX_VENUE_CHARS = 200
JSON_TYPES = ("application/json",)
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # API v2 ids are 10 letters and digits, API v1's 7 to 14 with - and _
_DATES = ("pdate", "odate", "cdate")  # accepted, made public, posted: the first a note has is its date
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
_LISTS = re.compile(r"[,;]")



@dataclass(frozen=True)
class Page:
    """What one notes response held, and whether the walk goes on."""

    notes: int  # how many notes the page held, read or not
    count: int | None  # how many the venue has, as the API says
    swamped: bool = False  # too many refused: stop reading

    def last(self, offset: int) -> bool:
        """Whether the walk ends after this page, the next one being at `offset`."""
        if self.swamped or not self.notes:
            return True
        return offset >= self.count if self.count is not None else self.notes < PAGE_SIZE


def notes_url(spec: Spec, offset: int = 0) -> str:
    """The URL of the page at `offset` of `spec`'s venue."""
    base = (spec.url or API).rstrip("/")
    return f"{base}/notes?content.venueid={quote(spec.venue, safe='')}&offset={offset}&limit={PAGE_SIZE}"


def venue_problem(venue: str) -> str | None:
    """What is wrong with a source's `venue`, or None."""
    if not venue:
        return "an `openreview` source needs `venue`, a venue id such as ICLR.cc/2025/Conference"
    if len(venue) > MAX_VENUE_CHARS or any(char.isspace() for char in venue):
        return f"`venue` must be a venue id such as ICLR.cc/2025/Conference, not {shown(venue)}"
    return None


def walk(spec: Spec, day: date, fetcher: Fetcher, *, limit: int) -> tuple[ParseResult, Fetched]:
    """Every page of `spec`'s venue fetched and read; the papers (one per note) and the refused notes, with what the
    fetches cost. FetchError or SourceError when a page cannot be had or read."""
    from digest.sources.fetch import Fetched, Validators

    reading = Reading(spec.label)
    offset, attempts = 0, 0
    for _ in range(MAX_PAGES):
        url = notes_url(spec, offset)
        fetched = fetcher.get(url, accept=JSON_TYPES, limit=limit)
        attempts += fetched.attempts
        page = read_page(page_text(fetched.body, spec.label, url), reading, seen_on=day, start=offset, url=url)
        offset += page.notes
        if page.last(offset):
            break
    else:
        raise PageError(spec.label, notes_url(spec), f"over {MAX_PAGES:,} pages ({offset:,} notes) and the API says "
                                                     "there are more: nothing from it was stored")
    return (ParseResult(one_per_note(reading.papers), tuple(reading.errors)),
            Fetched(notes_url(spec), b"", False, Validators(), attempts))


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of one saved notes response (a file `digest ingest` reads); SourceError when it is not one."""
    reading = Reading(source)
    read_page(text, reading, seen_on=seen_on)
    return ParseResult(one_per_note(reading.papers), tuple(reading.errors))


def is_notes(data: object) -> bool:
    """Whether parsed JSON is a notes response: an object with a 'notes' list."""
    return isinstance(data, dict) and isinstance(data.get("notes"), list)


def read_page(text: str, reading: Reading, *, seen_on: date, start: int = 0, url: str | None = None) -> Page:
    """The notes of one response, whose first is number `start` + 1 of the walk, read into `reading`. PageError
    when the text is not a notes response."""
    source, where = reading.source, url or reading.source
    data = page_json(text, source, where, "a notes response")
    if not isinstance(data, dict) or not isinstance(data.get("notes"), list):
        raise PageError(source, where, f"{_not_notes(data)}; nothing from it was stored")
    notes, count = data["notes"], data.get("count")
    page = Page(len(notes), count if _is_count(count) else None)
    for number, note in enumerate(notes, start=start + 1):
        try:
            reading.papers.append(paper_of(note, seen_on=seen_on))
        except BadRecord as bad:
            reading.refuse(None, f"record {number}{_id_shown(note)}: {bad}")
            if reading.swamped(None):
                return Page(page.notes, page.count, swamped=True)
    return page


def paper_of(note: object, *, seen_on: date) -> Paper:
    """The Paper of one note; BadRecord when it is not an object, is not a submission, lacks an id, title or
    abstract, or holds a field of the wrong type."""
    if not isinstance(note, dict):
        raise BadRecord(f"expected an object, found {json_kind(note)}")
    note_id = _note_id(note.get("id"), "id")
    forum = note_id if note.get("forum") in (None, "") else _note_id(note.get("forum"), "forum")
    if forum != note_id:
        raise BadRecord(f"a reply in forum {forum}, not a submission")
    content = note.get("content")
    if not isinstance(content, dict):
        raise BadRecord("no content" if content is None else f"content is {json_kind(content)}, not an object")
    title = require_title(_text(content, "title"))
    abstract = collapse(_text(content, "abstract") or "")
    if not abstract:
        raise BadRecord("no abstract")
    authors = _names(content, "authors")
    area = collapse(_text(content, "primary_area") or "")
    tldr = collapse(_text(content, "TLDR") or "")
    return checked(Paper(
        title=title,
        abstract=abstract,
        authors=authors,
        n_authors=len(authors) or None,
        published=_published(note),
        listed_on=seen_on,
        url=FORUM_URL.format(forum),
        categories=(area,) if area else (),
        keywords=_names(content, "keywords", split=True),
        summary=tldr or None,
        summary_by="authors" if tldr else None,
    ))


def one_per_note(papers: list[Paper]) -> tuple[Paper, ...]:
    """`papers` with one paper per forum page, the one read last (offset paging over a venue that changed between
    two requests can give a note twice)."""
    return tuple({paper.url: paper for paper in papers}.values())


def _value(content: dict[str, object], name: str) -> object:
    """The value of content field `name` (None when it is missing or hidden); BadRecord when the field is not an
    object."""
    field = content.get(name)
    if field is None:
        return None
    if not isinstance(field, dict):
        raise BadRecord(f"content.{name} is {json_kind(field)}, not an object holding its value (API v2)")
    return field.get("value")


def _text(content: dict[str, object], name: str) -> str | None:
    value = _value(content, name)
    if value is None or isinstance(value, str):
        return value
    raise BadRecord(f"content.{name} is {json_kind(value)}, not text")


def _names(content: dict[str, object], name: str, *, split: bool = False) -> tuple[str, ...]:
    """The texts of a list field, whitespace collapsed and empty ones dropped; with `split`, one text is a list
    separated by commas or semicolons (as some venues' forms take keywords)."""
    value = _value(content, name)
    if value is None:
        return ()
    if split and isinstance(value, str):
        value = _LISTS.split(value)
    if not isinstance(value, list):
        raise BadRecord(f"content.{name} is {json_kind(value)}, not a list of names")
    names = []
    for number, item in enumerate(value, start=1):
        if not isinstance(item, str):
            raise BadRecord(f"content.{name} item {number} is {json_kind(item)}, not text")
        if collapse(item):
            names.append(collapse(item))
    return tuple(names)


def _published(note: dict[str, object]) -> date | None:
    """The note's first date of _DATES, as a UTC day; BadRecord when that date is not milliseconds since 1970."""
    for name in _DATES:
        value = note.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MAX_MS:
            raise BadRecord(f"{name} {shown(value)} is not a time (milliseconds since 1970)")
        return datetime.fromtimestamp(value / 1000, UTC).date()
    return None


def _note_id(value: object, name: str) -> str:
    if value is None or value == "":
        raise BadRecord(f"no {name}")
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise BadRecord(f"{name} {shown(value)} is not a note id")
    return value


def _not_notes(data: object) -> str:
    """Why parsed JSON is not a notes response, naming the API's error where it sent one."""
    if not isinstance(data, dict):
        return f"expected a notes response (an object with a 'notes' list), found {json_kind(data)}"
    name, message = data.get("name"), data.get("message")
    if isinstance(name, str) and isinstance(message, str):
        return f"the API answered {shown(name)}: {shown(message, 200)}"
    if "notes" not in data:
        return "expected a notes response, found an object without 'notes'"
    return f"'notes' is {json_kind(data['notes'])}, not a list of notes"



def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0



def _id_shown(note: object) -> str:
    note_id = note.get("id") if isinstance(note, dict) else None
    return f" ({note_id})" if isinstance(note_id, str) and _ID.fullmatch(note_id) else ""
