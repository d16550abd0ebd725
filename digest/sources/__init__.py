"""Sources: read Daily Papers page text, API JSON and HTML pages, arXiv feeds and papers JSONL into Papers."""

from __future__ import annotations

import gzip
import json
import re
import zlib
from datetime import date
from pathlib import Path
from typing import Protocol

from digest.models import ParseResult, RecordError, mangled
from digest.sources import arxivfeed, hfhtml, hfjson, jsonl, pagetext

HF_PAGE_TEXT = "hf_page_text"
HF_API_JSON = "hf_api_json"
HF_PAGE_HTML = "hf_page_html"
JSONL = "jsonl"
ARXIV_FEED = "arxiv_feed"
SUFFIXES = (".txt", ".json", ".jsonl", ".html", ".htm", ".gz", ".xml", ".atom", ".rss")


class Parser(Protocol):
    """What every format module's `parse` is."""

    def __call__(self, text: str, source: str, *, seen_on: date) -> ParseResult: ...


PARSERS: dict[str, Parser] = {
    HF_PAGE_TEXT: pagetext.parse,
    HF_API_JSON: hfjson.parse,
    HF_PAGE_HTML: hfhtml.parse,
    JSONL: jsonl.parse,
    ARXIV_FEED: arxivfeed.parse,
}

_GZIP_MAGIC = b"\x1f\x8b"
# Enough lines to judge a JSONL file by without reading all of a large one.
_SAMPLE_LINES = 100
_PAGE_TEXT = re.compile(
    r"^[ \t]*(?:Daily Papers|byAK and the research community|• *\d+ authors?)[ \t]*\r?$"
    r"|^·[ \t]*\r?\n[ \t]*[A-Z][a-z]{2,8} \d{1,2}\b",
    re.MULTILINE,
)


class SourceError(Exception):
    """A whole source cannot be read (one bad record in it is a RecordError instead)."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class UnknownFormat(SourceError):
    """The content is none of the formats the sources read."""

    def __init__(self, source: str, hint: str) -> None:
        super().__init__(source, f"unknown format: {hint}")
        self.hint = hint


def parse_file(path: Path, *, seen_on: date) -> ParseResult:
    """Papers of one file, whatever its format (gzip is undone first); SourceError when it cannot be read."""
    return parse_bytes(_read(path), str(path), seen_on=seen_on)


def parse_text(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of text in any supported format; `source` names it in errors. UnknownFormat when unrecognised."""
    return PARSERS[detect_format(text, source)](text, source, seen_on=seen_on)


def parse_bytes(data: bytes, source: str, *, seen_on: date, parser: Parser | None = None) -> ParseResult:
    """Papers of bytes that should be UTF-8 (in any format, or with `parser`).

    A line that is not UTF-8 is reported as `source:line` and the record on it is skipped: nothing
    read with replacement characters reaches the store. When such a line is where a page's date
    should be, every date on the page would be a guess, so the whole source is refused (SourceError).
    """
    text, bad = _decode(data, source)
    result = (parser or PARSERS[detect_format(text, source)])(text, source, seen_on=seen_on)
    if not bad:
        return result
    if any(error.reason.startswith(pagetext.PAGE_DATE_ERRORS) for error in result.errors):
        raise SourceError(source, f"line {bad[0].line} is not valid UTF-8 and the page date cannot be read, so no "
                                  "date on the page can be trusted; nothing from it was stored")
    lines = {error.line for error in bad}
    errors = [*bad, *(error for error in result.errors if error.line not in lines)]
    return ParseResult(tuple(paper for paper in result.papers if not mangled(paper)),
                       tuple(sorted(errors, key=lambda error: error.line or 0)))


def vet(result: ParseResult, source: str) -> ParseResult:
    """`result` unless most of its records are invalid: such a source is refused whole (SourceError), since
    what could be read from it is more likely misread than right (a wrong format, a wrong encoding)."""
    bad, total = len(result.errors), len(result.errors) + len(result.papers)
    if bad and bad * 2 > total:
        first = result.errors[0]
        raise SourceError(source, f"{bad} of {total} records are invalid (the first: "
                                  f"{f'line {first.line}: ' if first.line else ''}{first.reason}); "
                                  "nothing from it was stored")
    return result


def _decode(data: bytes, source: str) -> tuple[str, list[RecordError]]:
    """The text of `data` with each undecodable line kept as U+FFFD (to be dropped) and an error per such line."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    lines, errors = [], []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            errors.append(RecordError(source, number, f"not valid UTF-8 (byte {raw[error.start]:#04x} at column "
                                                      f"{error.start + 1}): the record on this line is skipped"))
            lines.append(raw.decode("utf-8", errors="replace"))
    return "\n".join(lines), errors


def detect_format(text: str, source: str = "<text>") -> str:
    """The format of `text`, judged from its content: one of the keys of PARSERS."""
    head = text.lstrip("\ufeff \t\r\n")
    if not head:
        raise UnknownFormat(source, "the file is empty")
    if head.startswith("["):
        return HF_API_JSON
    if head.startswith("{"):
        return _json_object_format(head)
    if head.startswith("<") or f'data-target="{hfhtml.TARGET}"' in text:
        return _markup_format(head, source)
    if _PAGE_TEXT.search(text):
        return HF_PAGE_TEXT
    raise UnknownFormat(
        source,
        "expected Daily Papers page text, Daily Papers API JSON or HTML, an arXiv feed, or papers JSONL;"
        f" the text starts with {head[:40]!r}",
    )


def iter_paths(paths: list[Path]) -> list[Path]:
    """`paths` with each directory replaced by its readable files (sorted, not recursive, hidden ones skipped)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(child for child in path.iterdir() if child.is_file() and _wanted(child.name)))
        else:
            found.append(path)
    return found


def _wanted(name: str) -> bool:
    """Whether a file found in a directory is one to read."""
    return not name.startswith(".") and name.lower().endswith(SUFFIXES)


def _read(path: Path) -> bytes:
    """The bytes of `path`, gunzipped when they are gzip (whatever the extension says)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise SourceError(str(path), f"cannot read: {error.strerror or error}") from error
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        raise SourceError(str(path), f"looks gzipped but cannot be decompressed: {error}") from error


def _json_object_format(head: str) -> str:
    """API JSON for an object holding Daily Papers rows, else JSONL (one object per line)."""
    try:
        data = json.loads(head)
    except json.JSONDecodeError:
        return JSONL if _looks_like_jsonl(head) else HF_API_JSON
    return HF_API_JSON if hfjson.find_rows(data) is not None else JSONL


def _looks_like_jsonl(head: str) -> bool:
    """Whether text that is not one JSON document reads as JSON objects one per line."""
    lines = [line.strip() for line in head.split("\n", _SAMPLE_LINES)[:_SAMPLE_LINES] if line.strip()]
    try:
        if isinstance(json.loads(lines[0]), dict):
            return True
    except json.JSONDecodeError:
        pass
    # A broken first line still leaves the file JSONL when most lines are objects.
    return sum(line.startswith("{") for line in lines) * 2 >= len(lines)


def _markup_format(head: str, source: str) -> str:
    """An Atom/RSS feed (arXiv's), else a Daily Papers HTML page."""
    start = head[:1000].lower()
    if ("<feed" in start or "<rss" in start or "<rdf:rdf" in start) and "<html" not in start:
        return ARXIV_FEED
    return HF_PAGE_HTML
