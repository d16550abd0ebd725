"""Parser for papers JSONL: one paper object per line (`id`, `title`, `abstract`, `authors`, ...)."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any

from digest.models import Paper, ParseResult, RecordError, clean_arxiv_id
from digest.sources._fields import BadRecord, collapse, count, iso_date, require_title, split_lines, text_or_none

ABS_URL = "https://arxiv.org/abs/{}"
# arXiv subject tags ("cs.CL", "hep-th"); drops the MSC/ACM codes some rows carry ("68T45", "I.2.7").
CATEGORY = re.compile(r"^[a-z-]+(\.[A-Za-z-]+)?$")
_ID_PREFIX = re.compile(r"^(?:arxiv:|https?://arxiv\.org/(?:abs|pdf)/)", re.IGNORECASE)


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of a JSONL text; a bad line gives a RecordError with its line number, blank lines are skipped."""
    papers: list[Paper] = []
    errors: list[RecordError] = []
    read: dict[str, Paper] = {}  # a line seen before is the same paper: not parsed again (repeated input is cheap)
    for number, line in enumerate(split_lines(text), start=1):
        if not line.strip():
            continue
        if line in read:
            papers.append(read[line])
            continue
        try:
            papers.append(read.setdefault(line, paper_of_object(_object(line), seen_on=seen_on)))
        except BadRecord as bad:
            errors.append(RecordError(source, number, str(bad)))
    return ParseResult(tuple(papers), tuple(errors))


def _object(line: str) -> dict[str, Any]:
    """The JSON object on one line; BadRecord when it is not valid JSON or not an object."""
    try:
        data = json.loads(line)
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
    return Paper(
        title=title,
        abstract=collapse(abstract),
        arxiv_id=arxiv_id,
        authors=authors,
        n_authors=len(authors) or None,
        published=iso_date(data.get("published")),
        listed_on=iso_date(data.get("listing_date")) or seen_on,
        upvotes=count(data.get("upvotes")),
        url=text_or_none(data.get("url")) or (ABS_URL.format(arxiv_id) if arxiv_id else None),
        categories=_categories(data.get("categories"), data.get("primary_category")),
    )


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
