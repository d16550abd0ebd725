"""Parser for the Hugging Face Daily Papers API JSON (`/api/daily_papers`), also used for the HTML page's rows.

A row names its paper by arXiv id, usually without a version (a version when it has one is the paper's `version`);
it gives no DOI."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import date
from typing import Any

from digest.models import Paper, ParseResult, RecordError, arxiv_version, clean_arxiv_id
from digest.sources._fields import (
    BadRecord,
    Reading,
    checked,
    collapse,
    count,
    iso_date,
    require_title,
    shown,
    strings,
    text_or_none,
)
from digest.sources._json import DECODER, loads

PAPER_URL = "https://huggingface.co/papers/{}"
ROWS_KEY = "dailyPapers"


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of an API response (a list of rows, or an object holding one); one RecordError per bad row."""
    try:
        data = loads(text)
    except json.JSONDecodeError as error:
        reason = f"invalid JSON: {error.msg} (column {error.colno})"
        return ParseResult((), (RecordError(source, error.lineno, reason),))
    if isinstance(data, list):
        return parse_rows(zip(data, _row_lines(text), strict=False), source, seen_on=seen_on)
    rows = find_rows(data)
    if rows is None:
        reason = f"expected a list of Daily Papers rows (or an object with a {ROWS_KEY!r} list)"
        return ParseResult((), (RecordError(source, 1, reason),))
    return parse_rows(((row, None) for row in rows), source, seen_on=seen_on)


def find_rows(data: object) -> list[Any] | None:
    """The rows list of an object: its 'dailyPapers' value, else the first list whose items have a 'paper'."""
    if not isinstance(data, dict):
        return None
    rows = data.get(ROWS_KEY)
    if isinstance(rows, list):
        return rows
    for value in data.values():
        if isinstance(value, list) and value and all(isinstance(row, dict) and "paper" in row for row in value):
            return value
    return None


def parse_rows(rows: Iterable[tuple[object, int | None]], source: str, *, seen_on: date) -> ParseResult:
    """Papers of (row, line) pairs; a row that cannot be read gives a RecordError naming its index."""
    reading = Reading(source)
    for index, (row, line) in enumerate(rows):
        try:
            reading.papers.append(paper_of_row(row, seen_on=seen_on))
        except BadRecord as bad:
            reading.refuse(line, f"row {index}: {bad}")
            if reading.swamped(line):
                break
    return reading.result()


def paper_of_row(row: object, *, seen_on: date) -> Paper:
    """The Paper of one Daily Papers row; BadRecord when it is not an object or lacks an id or title."""
    if not isinstance(row, dict):
        raise BadRecord(f"expected an object, found {type(row).__name__}")
    # Rows nest the paper under "paper"; a bare paper object (as /api/papers returns) is accepted too.
    paper = row.get("paper", row)
    if not isinstance(paper, dict):
        raise BadRecord("'paper' is not an object")
    arxiv_id = _arxiv_id(paper.get("id"))
    version = arxiv_version(paper["id"]) if isinstance(paper.get("id"), str) else None
    authors = _authors(paper.get("authors"))
    return checked(Paper(
        title=require_title(paper.get("title") or row.get("title")),
        abstract=collapse(text_or_none(paper.get("summary")) or text_or_none(row.get("summary")) or ""),
        arxiv_id=arxiv_id,
        authors=authors,
        n_authors=len(authors) or None,
        organization=_organization(row.get("organization")) or _organization(paper.get("organization")),
        published=iso_date(paper.get("publishedAt")) or iso_date(row.get("publishedAt")),
        listed_on=iso_date(paper.get("submittedOnDailyAt")) or seen_on,
        upvotes=count(paper.get("upvotes"), "upvotes"),
        comments=count(row.get("numComments"), "numComments"),
        url=PAPER_URL.format(arxiv_id),
        keywords=strings(paper.get("ai_keywords")),
        summary=text_or_none(paper.get("ai_summary")),
        github_url=text_or_none(paper.get("githubRepo")),
        stars=count(paper.get("githubStars"), "githubStars") if paper.get("githubRepo") else None,
        project_url=text_or_none(paper.get("projectPage")),
        version=version,
    ))


def _arxiv_id(value: object) -> str:
    """The version-less arXiv id of a row's paper id; BadRecord when missing or not an arXiv id."""
    if value is None or value == "":
        raise BadRecord("no paper id")
    arxiv_id = clean_arxiv_id(value) if isinstance(value, str) else None
    if arxiv_id is None:
        raise BadRecord(f"paper id {shown(value)} is not an arXiv id")
    return arxiv_id


def _authors(value: object) -> tuple[str, ...]:
    """Author names from a list of {'name': ...} objects."""
    if not isinstance(value, list):
        return ()
    names = [author.get("name") for author in value if isinstance(author, dict)]
    return tuple(collapse(name) for name in names if isinstance(name, str) and name.strip())


def _organization(value: object) -> str | None:
    """Display name of an organisation object ('fullname', else 'name'), or a plain string."""
    if isinstance(value, dict):
        return text_or_none(value.get("fullname")) or text_or_none(value.get("name"))
    return text_or_none(value)


def _row_lines(text: str) -> Iterator[int]:
    """The line on which each element of the (valid) top-level JSON array starts."""
    position = text.index("[") + 1
    line = 1 + text.count("\n", 0, position)
    while True:
        start = _skip_separators(text, position)
        if start >= len(text) or text[start] == "]":
            return
        line += text.count("\n", position, start)
        yield line
        _, end = DECODER.raw_decode(text, start)  # nesting already checked for the whole text
        line += text.count("\n", start, end)
        position = end


def _skip_separators(text: str, position: int) -> int:
    """Index of the next character that is not whitespace or a comma."""
    while position < len(text) and text[position] in " \t\r\n,":
        position += 1
    return position
