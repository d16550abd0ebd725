"""Parser for a huggingface.co/papers HTML page: the rows are JSON in the DailyPapers div's data-props."""

from __future__ import annotations

import importlib.util
import json
from datetime import date
from typing import TYPE_CHECKING

from digest.models import ParseResult, RecordError
from digest.sources import hfjson
from digest.sources._fields import MAX_MARKUP
from digest.sources._json import loads

if TYPE_CHECKING:
    from bs4 import Tag

TARGET = "DailyPapers"
_MARKER = f'data-target="{TARGET}"'


def parse(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of the rows embedded in the page; a RecordError when the page does not embed them."""
    from bs4 import BeautifulSoup  # loaded when a page is parsed, not by every command

    tags = text.count("<")
    if tags > MAX_MARKUP:
        return _failed(source, None, f"{tags:,} '<' (over {MAX_MARKUP:,}): not a Daily Papers page")
    div = BeautifulSoup(text, _parser()).select_one(f"[{_MARKER}]")
    if div is None:
        return _failed(source, None, f"no <div {_MARKER}> in the page: is it a huggingface.co/papers page?")
    line = _line_of(div, text)
    props = div.get("data-props")
    if not isinstance(props, str):
        return _failed(source, line, f"the {TARGET} div has no data-props attribute")
    try:
        data = loads(props)
    except json.JSONDecodeError as error:
        return _failed(source, line, f"data-props is not valid JSON: {error.msg} (column {error.colno})")
    rows = hfjson.find_rows(data)
    if rows is None:
        return _failed(source, line, f"data-props holds no {hfjson.ROWS_KEY!r} list of rows")
    # Row lines inside an attribute mean nothing to a reader: every row points at the div.
    return hfjson.parse_rows(((row, line) for row in rows), source, seen_on=seen_on)


def _parser() -> str:
    """'lxml' when it is installed (faster, lenient), else the standard library's parser."""
    return "lxml" if importlib.util.find_spec("lxml") else "html.parser"


def _line_of(div: Tag, text: str) -> int | None:
    """The file line of the DailyPapers div (lxml does not record source lines, so search the text)."""
    if div.sourceline is not None:
        return div.sourceline
    offset = text.find(_MARKER)
    return text.count("\n", 0, offset) + 1 if offset >= 0 else None


def _failed(source: str, line: int | None, reason: str) -> ParseResult:
    """A result with no papers and one error."""
    return ParseResult((), (RecordError(source, line, reason),))
