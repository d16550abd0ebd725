"""Parser for papers JSONL: one paper object per line (`id`, `title`, `abstract`, `authors`, `doi`, ...); an id with
a version ('2401.01234v2') gives the paper's `version`."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import date
from typing import Any

from digest.models import Paper, ParseResult, arxiv_version, clean_arxiv_id, clean_doi
from digest.sources._fields import (
    BadRecord,
    Reading,
    checked,
    collapse,
    count,
    iso_date,
    require_title,
    split_lines,
    text_or_none,
)
from digest.sources._json import loads

ABS_URL = "https://arxiv.org/abs/{}"
MAX_RECORD_BYTES = 1_000_000  # one line; the largest of 45,256 real arXiv records is 3,786 bytes
# arXiv subject tags ("cs.CL", "hep-th"); drops the MSC/ACM codes some rows carry ("68T45", "I.2.7").
CATEGORY = re.compile(r"^[a-z-]+(\.[A-Za-z-]+)?$")
_ID_PREFIX = re.compile(r"^(?:arxiv:|https?://arxiv\.org/(?:abs|pdf)/)", re.IGNORECASE)


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of a JSONL text; a bad line gives a RecordError with its line number, blank lines are skipped (too
    many of them refuse the text whole: SourceError)."""
    return parse_lines(enumerate(split_lines(text), start=1), Reading(source), seen_on=seen_on)


def parse_lines(lines: Iterable[tuple[int, str]], reading: Reading, *, seen_on: date) -> ParseResult:
    """Papers of numbered JSONL lines (a text's, or a large file's read one at a time) added to `reading`."""
    # A line seen before is the same paper: not parsed again (repeated input is cheap). Keyed by a digest of
    # the line, so that a large file's lines are not all kept.
    read: dict[bytes, Paper] = {}
    for number, line in lines:
        if not line.strip():
            reading.skip_blank(number)
            continue
        key = hashlib.blake2b(line.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        if key in read:
            reading.papers.append(read[key])
            continue
        try:
            reading.papers.append(read.setdefault(key, paper_of_object(_object(line), seen_on=seen_on)))
        except BadRecord as bad:
            reading.refuse(number, str(bad))
            if reading.swamped(number):
                break
    return reading.result()


def record_too_long(size: int) -> str:
    """Why a line of `size` bytes is refused."""
    return f"a record of {size:,} bytes (over {MAX_RECORD_BYTES:,}): skipped"


def _object(line: str) -> dict[str, Any]:
    """The JSON object on one line; BadRecord when it is too long, too deep, not valid JSON or not an object."""
    if len(line) * 4 > MAX_RECORD_BYTES and (size := len(line.encode("utf-8", "surrogatepass"))) > MAX_RECORD_BYTES:
        raise BadRecord(record_too_long(size))
    try:
        data = loads(line)
    except json.JSONDecodeError as error:
        raise BadRecord(f"invalid JSON: {error.msg} (column {error.colno})") from None
    if not isinstance(data, dict):
        raise BadRecord(f"expected a JSON object, found {type(data).__name__}")
    return data


def paper_of_object(data: dict[str, Any], *, seen_on: date) -> Paper:
    """The Paper of one JSONL object; BadRecord when it has no title or no abstract."""
    title = require_title(data.get("title"))
    abstract = text_or_none(data.get("abstract"))
    if abstract is None:
        raise BadRecord("no abstract")
    arxiv_id = _arxiv_id(data.get("id"))
    authors = _authors(data.get("authors"))
    return checked(Paper(
        title=title,
        abstract=collapse(abstract),
        arxiv_id=arxiv_id,
        authors=authors,
        n_authors=len(authors) or None,
        published=iso_date(data.get("published")),
        listed_on=iso_date(data.get("listing_date")) or seen_on,
        upvotes=count(data.get("upvotes"), "upvotes"),
        url=text_or_none(data.get("url")) or (ABS_URL.format(arxiv_id) if arxiv_id else None),
        categories=_categories(data.get("categories"), data.get("primary_category")),
        doi=clean_doi(data["doi"]) if isinstance(data.get("doi"), str) else None,
        version=arxiv_version(_ID_PREFIX.sub("", data["id"].strip())) if isinstance(data.get("id"), str) else None,
    ))


def _arxiv_id(value: object) -> str | None:
    """The version-less arXiv id of an 'id' field ('2401.01234v2', 'arXiv:2401.01234', an abs URL)."""
    if not isinstance(value, str):
        return None
    return clean_arxiv_id(_ID_PREFIX.sub("", value.strip()))


def _authors(value: object) -> tuple[str, ...]:
    """Author names from a list of strings or a comma-separated string ('A, B, and C')."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return ()
    names = (collapse(name).removeprefix("and ") for name in value if isinstance(name, str))
    return tuple(name for name in names if name)


def _categories(value: object, primary: object) -> tuple[str, ...]:
    """arXiv tags from a list (or a space-separated string), primary category first, others dropped."""
    tags = value.split() if isinstance(value, str) else value if isinstance(value, list) else []
    ordered = [primary] + tags if isinstance(primary, str) else tags
    kept = (tag.strip() for tag in ordered if isinstance(tag, str))
    return tuple(dict.fromkeys(tag for tag in kept if CATEGORY.fullmatch(tag)))
