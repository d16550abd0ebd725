"""Sources: read Daily Papers page text, API JSON and HTML pages, arXiv feeds, bioRxiv and medRxiv API JSON, OpenReview
notes JSON and papers JSONL into Papers."""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import re
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import BinaryIO, Protocol

from digest.models import ParseResult, RecordError, mangled
from digest.sources import arxivfeed, biorxiv, hfhtml, hfjson, jsonl, openreview, pagetext
from digest.sources._fields import MAX_REFUSED, Reading, SourceError, pieces
from digest.sources._json import loads

log = logging.getLogger("digest")

HF_PAGE_TEXT = "hf_page_text"
HF_API_JSON = "hf_api_json"
HF_PAGE_HTML = "hf_page_html"
JSONL = "jsonl"
ARXIV_FEED = "arxiv_feed"
BIORXIV_JSON = "biorxiv_json"  # the details API of bioRxiv and medRxiv, one page
OPENREVIEW_JSON = "openreview_json"  # the notes of OpenReview's API v2, one page
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
    BIORXIV_JSON: biorxiv.parse,
    OPENREVIEW_JSON: openreview.parse,
}

_GZIP_MAGIC = b"\x1f\x8b"
# A page, an API response or a feed (a file after gunzip, or a fetched body) is parsed whole, so it is read only up
# to this size; a papers JSONL file past it is read one line at a time. The real ones are 30 KB to 5 MB.
MAX_DOCUMENT_BYTES = 20_000_000
# What a gzip file may expand to: this many times its own size, and at least MAX_DOCUMENT_BYTES. Real ones expand
# 2.5 to 5 times (the arXiv sample: 22.8 MB to 74 MB); gzip can reach 1,030 times (50 million blank lines in 48 KB).
MAX_GUNZIP_RATIO = 100
_HEAD_BYTES = 1_000_000  # what a large file's format is judged by
_CHUNK = 1_000_000  # how much of an over-long line is read at a time, to be skipped
# Enough lines to judge a JSONL file by without reading all of a large one.
_SAMPLE_LINES = 100
_PAGE_TEXT = re.compile(
    r"^[ \t]*(?:Daily Papers|byAK and the research community|• *\d+ authors?)[ \t]*\r?$"
    r"|^·[ \t]*\r?\n[ \t]*[A-Z][a-z]{2,8} \d{1,2}\b",
    re.MULTILINE,
)


class UnknownFormat(SourceError):
    """The content is none of the formats the sources read."""

    def __init__(self, source: str, hint: str) -> None:
        super().__init__(source, f"unknown format: {hint}")
        self.hint = hint


def parse_file(path: Path, *, seen_on: date) -> ParseResult:
    """Papers of one file, whatever its format (gzip is undone first); SourceError when it cannot be read.

    A file over MAX_DOCUMENT_BYTES is read only when it is papers JSONL, and then one line at a time: memory holds
    a line (up to jsonl.MAX_RECORD_BYTES) and the papers read, never the file. Any other such file is refused.
    """
    source = str(path)
    with _open(path) as (stream, safely):
        head = safely(stream.read, MAX_DOCUMENT_BYTES + 1)
        if len(head) <= MAX_DOCUMENT_BYTES:
            return parse_bytes(head, source, seen_on=seen_on)
        if detect_format(head[:_HEAD_BYTES].decode("utf-8", "ignore"), source) != JSONL:
            raise SourceError(source, f"larger than {MAX_DOCUMENT_BYTES:,} bytes, and only papers JSONL is read past "
                                      "that size; nothing from it was stored")
        del head
        stream.seek(0)
        reading = Reading(source)
        return _guarded(lambda: jsonl.parse_lines(_lines(stream, safely, reading), reading, seen_on=seen_on), source)


def parse_text(text: str, source: str, *, seen_on: date) -> ParseResult:
    """Papers of text in any supported format; `source` names it in errors. UnknownFormat when unrecognised."""
    parser = PARSERS[detect_format(text, source)]
    return _guarded(lambda: parser(text, source, seen_on=seen_on), source)


def parse_bytes(data: bytes, source: str, *, seen_on: date, parser: Parser | None = None) -> ParseResult:
    """Papers of bytes that should be UTF-8 (in any format, or with `parser`).

    A line that is not UTF-8 is reported as `source:line` and the record on it is skipped: nothing
    read with replacement characters reaches the store. When such a line is where a page's date
    should be, every date on the page would be a guess, so the whole source is refused (SourceError).
    """
    text, bad = _decode(data, source)
    parse = parser or PARSERS[detect_format(text, source)]
    result = _guarded(lambda: parse(text, source, seen_on=seen_on), source)
    if not bad:
        return result
    if any(error.reason.startswith(pagetext.PAGE_DATE_ERRORS) for error in result.errors):
        raise SourceError(source, f"line {bad[0].line} is not valid UTF-8 and the page date cannot be read, so no "
                                  "date on the page can be trusted; nothing from it was stored")
    lines = {error.line for error in bad}
    errors = [*bad, *(error for error in result.errors if error.line not in lines)]
    return ParseResult(tuple(paper for paper in result.papers if not mangled(paper)),
                       tuple(sorted(errors, key=lambda error: error.line or 0)))


def _guarded(parse: Callable[[], ParseResult], source: str) -> ParseResult:
    """What `parse()` gives; an error no parser was written to expect refuses this source alone (SourceError)."""
    try:
        return parse()
    except SourceError:
        raise
    except Exception as error:  # a bug, or a library's on input nobody foresaw: the other sources still go in
        log.debug("parsing %s failed", source, exc_info=True)
        detail = " ".join(str(error).split())[:200]
        raise SourceError(source, f"the parser failed ({type(error).__name__}: {detail}); nothing from it was "
                                  "stored (--debug shows where)") from error


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
    for number, raw in enumerate(pieces(data, b"\n"), start=1):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as error:
            errors.append(RecordError(source, number, _not_utf8(raw, error)))
            lines.append(raw.decode("utf-8", errors="replace"))
            if len(errors) > MAX_REFUSED and len(errors) * 2 > number:
                raise SourceError(source, f"over {MAX_REFUSED:,} lines are not valid UTF-8, most of those read (the "
                                          f"first: line {errors[0].line}): is it in another encoding? nothing from "
                                          "it was stored") from None
    return "\n".join(lines), errors


def _not_utf8(raw: bytes, error: UnicodeDecodeError) -> str:
    return (f"not valid UTF-8 (byte {raw[error.start]:#04x} at column {error.start + 1}): the record on this line "
            "is skipped")


Reader = Callable[[Callable[[int], bytes], int], bytes]  # read(stream.read, size), failures as SourceError


def gunzip_limit(size: int) -> int:
    """The most bytes a gzip file of `size` bytes may expand to."""
    return max(MAX_GUNZIP_RATIO * size, MAX_DOCUMENT_BYTES)


class _Gunzip(gzip.GzipFile):
    """A gzip file read up to `gunzip_limit` of its size: reading more is a SourceError naming it."""

    def __init__(self, raw: BinaryIO, path: Path) -> None:
        super().__init__(fileobj=raw)
        self.path, self.size = path, os.fstat(raw.fileno()).st_size
        self.limit = gunzip_limit(self.size)

    def read(self, size: int | None = -1) -> bytes:
        return self._within(super().read(self._room(size)))

    def readline(self, size: int | None = -1) -> bytes:
        return self._within(super().readline(self._room(size)))

    def _room(self, size: int | None) -> int:
        """`size`, cut to one byte past the limit (at least one byte is left: `_within` refused the file before)."""
        room = self.limit + 1 - self.tell()
        return room if size is None or size < 0 else min(size, room)

    def _within(self, data: bytes) -> bytes:
        if self.tell() > self.limit:
            raise SourceError(str(self.path), f"gunzipped, it passes {self.limit:,} bytes: a gzip file may expand to "
                                              f"{MAX_GUNZIP_RATIO} times its {self.size:,} bytes and at least to "
                                              f"{MAX_DOCUMENT_BYTES:,} (real ones: 2.5 to 5 times); nothing from it "
                                              "was stored")
        return data


@contextmanager
def _open(path: Path) -> Iterator[tuple[BinaryIO, Reader]]:
    """The file's bytes as a stream (gunzipped when they are gzip, whatever the extension says, and then up to
    `gunzip_limit`), and the way to read from it that turns a read failure into a SourceError naming the file."""
    def safely(read: Callable[[int], bytes], size: int) -> bytes:
        try:
            return read(size)
        except (OSError, EOFError, zlib.error) as error:
            reason = f"looks gzipped but cannot be decompressed: {error}" if gzipped else \
                f"cannot read: {getattr(error, 'strerror', None) or error}"
            raise SourceError(str(path), reason) from error

    gzipped = False
    try:
        raw = path.open("rb")
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path (a `file` source's setting can hold one)
        raise SourceError(str(path), f"cannot read: {getattr(error, 'strerror', None) or error}") from error
    with raw:
        gzipped = safely(raw.read, 2) == _GZIP_MAGIC
        raw.seek(0)
        if not gzipped:
            yield raw, safely
            return
        with _Gunzip(raw, path) as stream:
            yield stream, safely


def _lines(stream: BinaryIO, safely: Reader, reading: Reading) -> Iterator[tuple[int, str]]:
    """Each line of a large JSONL file, decoded and numbered; a line over jsonl.MAX_RECORD_BYTES or not UTF-8 is
    refused in `reading` instead."""
    for number in itertools.count(1):
        raw = safely(stream.readline, jsonl.MAX_RECORD_BYTES + 1)
        if not raw:
            return
        line = _line(raw, number, stream, safely, reading)
        if line is not None:
            yield number, line
        elif reading.swamped(number):
            return


def _line(raw: bytes, number: int, stream: BinaryIO, safely: Reader, reading: Reading) -> str | None:
    """The text of line `number` (`raw`, its first MAX_RECORD_BYTES + 1 bytes at most), or None once refused; the
    rest of a line too long is read a chunk at a time and dropped, never held whole."""
    if len(raw) > jsonl.MAX_RECORD_BYTES and not raw.endswith(b"\n"):
        size = len(raw)
        while raw and not raw.endswith(b"\n"):
            raw = safely(stream.readline, _CHUNK)
            size += len(raw)
        reading.refuse(number, jsonl.record_too_long(size - raw.endswith(b"\n")))
        return None
    try:
        text = raw.removeprefix(b"\xef\xbb\xbf" if number == 1 else b"").decode("utf-8")
    except UnicodeDecodeError as error:
        reading.refuse(number, _not_utf8(raw, error))
        return None
    return text.removesuffix("\n").removesuffix("\r")


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


def _json_object_format(head: str) -> str:
    """API JSON for an object holding Daily Papers rows, bioRxiv JSON for a details response, OpenReview JSON for a
    notes response, else JSONL (one object per line)."""
    try:
        data = loads(head)
    except json.JSONDecodeError:
        return JSONL if _looks_like_jsonl(head) else HF_API_JSON
    if biorxiv.is_details(data):
        return BIORXIV_JSON
    if openreview.is_notes(data):
        return OPENREVIEW_JSON
    return HF_API_JSON if hfjson.find_rows(data) is not None else JSONL


def _looks_like_jsonl(head: str) -> bool:
    """Whether text that is not one JSON document reads as JSON objects one per line."""
    lines = [line.strip() for line in head.split("\n", _SAMPLE_LINES)[:_SAMPLE_LINES] if line.strip()]
    try:
        if isinstance(loads(lines[0]), dict):
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
