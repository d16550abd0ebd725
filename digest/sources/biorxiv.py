"""bioRxiv and medRxiv: the details API of api.biorxiv.org, read a page at a time for a range of days.

`GET {api}/details/{server}/{start}/{end}/{cursor}/json` answers

    {"messages": [{"status": "ok", "interval": "2026-06-11:2026-06-12", "cursor": 0, "count": 30,
                   "total": "109", ...}],
     "collection": [{"doi": "10.1101/2026.06.10.123456", "version": "2", "title": ..., "abstract": ...,
                     "authors": "Last, F.; Last, F.", "date": "2026-06-11", "category": "neuroscience",
                     "type": ..., "license": ..., "published": "NA", "server": "bioRxiv", ...}]}

one version of a preprint per record. The walk asks for the next cursor (this one plus the records given) until
`total` is reached or a page comes back empty ("no posts found"), at most MAX_PAGES pages. A paper is known by
its DOI and keeps the latest version posted in the range: the paper's `doi` and `version` are the record's, its URL
is `https://www.biorxiv.org/content/{doi}v{version}` (medrxiv.org for medRxiv). A source's `categories` keep the
records whose `category` is one of them (case and `_` for a space ignored). A record that cannot be read is refused
naming its number in the walk and its DOI; a page that is not a details response fails the whole source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from digest.models import Paper, ParseResult
from digest.numbers import whole
from digest.sources._fields import (
    BadRecord,
    PageError,
    Reading,
    Spec,
    checked,
    collapse,
    iso_date,
    json_kind,
    page_json,
    page_text,
    require_title,
    shown,
)

if TYPE_CHECKING:
    from digest.sources.fetch import Fetched, Fetcher

BIORXIV = "biorxiv"
MEDRXIV = "medrxiv"
KINDS = (BIORXIV, MEDRXIV)
API = "https://api.biorxiv.org"
SITES = {BIORXIV: "https://www.biorxiv.org", MEDRXIV: "https://www.medrxiv.org"}
MAX_DAYS = 31  # a source's `days`
# Pages of one walk: the API gives 30 or 100 records a page, so 1,000 pages hold 30,000 records at least; a server
# whose `total` is never reached is stopped there.
MAX_PAGES = 1_000
_DOI = re.compile(r"10\.\d{4,9}/[^\s/][^\s]{0,199}")
_NO_POSTS = "no posts found"
JSON_TYPES = ("application/json",)



@dataclass(frozen=True)
class Page:
    """One details response: its papers and refused records, and where the walk goes next."""

    parsed: ParseResult
    records: int  # how many records the collection held, read or not
    total: int | None  # how many the whole range holds, as the API says


def details_url(spec: Spec, day: date, cursor: int = 0) -> str:
    """The URL of the page at `cursor` of `spec`'s range of days, which ends on `day`."""
    start = day - timedelta(days=max(spec.days, 1) - 1)
    base = (spec.url or API).rstrip("/")
    return f"{base}/details/{spec.kind}/{start.isoformat()}/{day.isoformat()}/{cursor}/json"


def walk(spec: Spec, day: date, fetcher: Fetcher, *, limit: int) -> tuple[ParseResult, Fetched]:
    """Every page of `spec`'s range fetched and read; the papers (one per DOI, its latest version) and the refused
    records, with what the fetches cost. FetchError or SourceError when a page cannot be had or read."""
    from digest.sources.fetch import Fetched, Validators

    wanted = frozenset(folded(category) for category in spec.categories)
    reading = Reading(spec.label)
    first, cursor, attempts = details_url(spec, day), 0, 0
    for _ in range(MAX_PAGES):
        url = details_url(spec, day, cursor)
        fetched = fetcher.get(url, accept=JSON_TYPES, limit=limit)
        attempts += fetched.attempts
        page = read_page(page_text(fetched.body, spec.label, url), spec.label, seen_on=day, server=spec.kind,
                         wanted=wanted, start=cursor, url=url)
        reading.papers.extend(page.parsed.papers)
        reading.errors.extend(page.parsed.errors)
        cursor += page.records
        if not page.records or (page.total is not None and cursor >= page.total) or reading.swamped(None):
            break
    else:
        raise PageError(spec.label, first, f"over {MAX_PAGES:,} pages ({cursor:,} records) and the API says there "
                                           "are more: not a range this source reads; nothing from it was stored")
    return (ParseResult(latest(reading.papers), tuple(reading.errors)),
            Fetched(first, b"", False, Validators(), attempts))


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of one saved details response (a file `digest ingest` reads); SourceError when it is not one."""
    return read_page(text, source, seen_on=seen_on).parsed


def is_details(data: object) -> bool:
    """Whether parsed JSON is a details response: an object with a 'collection' list and a 'messages' list."""
    return isinstance(data, dict) and isinstance(data.get("collection"), list) and isinstance(data.get("messages"),
                                                                                              list)


def read_page(text: str, source: str, *, seen_on: date, server: str = BIORXIV, wanted: frozenset[str] = frozenset(),
              start: int = 0, url: str | None = None) -> Page:
    """The papers of one details response whose first record is number `start` + 1 of the walk; records whose
    category is not `wanted` (when any is) are passed over. PageError when the text is not a details response."""
    where = url or source
    data = page_json(text, source, where, "a details response")
    if not isinstance(data, dict):
        raise PageError(source, where, f"expected a details response (an object with 'messages' and 'collection'), "
                                       f"found {json_kind(data)}; nothing from it was stored")
    message = _message(data.get("messages"))
    status = message.get("status")
    collection = data.get("collection")
    if not collection and isinstance(status, str) and status.strip().lower().startswith(_NO_POSTS):
        return Page(ParseResult(()), 0, 0)
    if status != "ok":
        raise PageError(source, where, f"the API's status is {shown(status)}, not 'ok'; nothing from it was stored")
    if not isinstance(collection, list):
        raise PageError(source, where, f"'collection' is {json_kind(collection)}, not a list of records; nothing "
                                       "from it was stored")
    reading = Reading(source)
    for number, record in enumerate(collection, start=start + 1):
        if wanted and not _wanted(record, wanted):
            continue
        try:
            reading.papers.append(paper_of(record, seen_on=seen_on, server=server))
        except BadRecord as bad:
            reading.refuse(None, f"record {number}{_doi_shown(record)}: {bad}")
    total = message.get("total")
    return Page(reading.result(), len(collection), total if _is_count(total) else whole(total))


def paper_of(record: object, *, seen_on: date, server: str = BIORXIV) -> Paper:
    """The Paper of one details record; BadRecord when it is not an object, lacks a DOI, title or abstract, or
    holds a field of the wrong type."""
    if not isinstance(record, dict):
        raise BadRecord(f"expected an object, found {json_kind(record)}")
    doi = _doi(record.get("doi"))
    version = _version(record.get("version"))
    abstract = collapse(_text_field(record, "abstract") or "")
    if not abstract:
        raise BadRecord("no abstract")
    authors = _authors(_text_field(record, "authors") or "")
    category = collapse(_text_field(record, "category") or "")
    posted = _text_field(record, "date")
    published = iso_date(posted)
    if posted and published is None:
        raise BadRecord(f"date {shown(posted)} is not a date (YYYY-MM-DD)")
    site = SITES.get(str(record.get("server", "")).lower(), SITES.get(server, SITES[BIORXIV]))
    return checked(Paper(
        title=require_title(record.get("title")),
        abstract=abstract,
        authors=authors,
        n_authors=len(authors) or None,
        published=published,
        listed_on=seen_on,
        url=f"{site}/content/{doi}" + (f"v{version}" if version else ""),
        categories=(category,) if category else (),
        doi=doi,
        version=version,
    ))


def latest(papers: list[Paper]) -> tuple[Paper, ...]:
    """`papers` with one paper per DOI: the latest version (records come oldest first, so a later record of the same
    version replaces an earlier one)."""
    chosen: dict[str, tuple[int, Paper]] = {}
    for paper in papers:
        key, number = paper.doi or paper.url or "", paper.version or 0
        if key not in chosen or number >= chosen[key][0]:
            chosen[key] = (number, paper)
    return tuple(paper for _, paper in chosen.values())


def folded(category: str) -> str:
    """A category as it is compared: case folded, '_' a space, whitespace collapsed."""
    return collapse(category.replace("_", " ")).casefold()


def _wanted(record: object, wanted: frozenset[str]) -> bool:
    """Whether a record's category is one of `wanted`; a record that is not an object or whose category is not text
    is kept, to be refused as it is read."""
    if not isinstance(record, dict) or not isinstance(record.get("category"), str):
        return True
    return folded(record["category"]) in wanted



def _message(messages: object) -> dict[str, Any]:
    """The first object of 'messages' (where the API says how the page went), else {}."""
    if isinstance(messages, list):
        return next((m for m in messages if isinstance(m, dict)), {})
    return {}


def _doi(value: object) -> str:
    if value is None or value == "":
        raise BadRecord("no DOI")
    if not isinstance(value, str) or not _DOI.fullmatch(value.strip()):
        raise BadRecord(f"doi {shown(value)} is not a DOI")
    return value.strip().lower()


def _version(value: object) -> int | None:
    """The record's version number ("2" or 2); None when it has none; BadRecord when it is anything else."""
    if value is None or value == "":
        return None
    number = value if _is_count(value) else whole(value, 1, 9_999)
    if number is None or not 1 <= number <= 9_999:
        raise BadRecord(f"version {shown(value)} is not a version number")
    return number


def _text_field(record: dict[str, Any], name: str) -> str | None:
    """Field `name` when it is text, None when it is missing or null; BadRecord when it is anything else."""
    value = record.get(name)
    if value is None or isinstance(value, str):
        return value
    raise BadRecord(f"{name} is {json_kind(value)}, not text")


def _authors(line: str) -> tuple[str, ...]:
    """'Sinha, A. K.; Lee, C.' as ('A. K. Sinha', 'C. Lee'); a name without a comma as it is."""
    names = []
    for part in line.split(";"):
        last, _, first = part.partition(",")
        name = collapse(f"{first} {last}" if first.strip() else last)
        if name:
            names.append(name)
    return tuple(names)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)



def _doi_shown(record: object) -> str:
    doi = record.get("doi") if isinstance(record, dict) else None
    return f" ({doi.strip()})" if isinstance(doi, str) and _DOI.fullmatch(doi.strip()) else ""
