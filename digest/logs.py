"""Logging for people and for machines: readable text by default, JSON lines with `--log-format json`,
and a progress bar on long runs when a person is watching (stderr is a terminal)."""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

PROGRESS_FROM = 50  # items; shorter runs finish before a bar would help
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, any `extra=` fields, and the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update({k: v for k, v in vars(record).items() if k not in _STANDARD})
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


# A password in a URL's user part (`scheme://user:PASSWORD@host`) or in a `password=` parameter.
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/?#@]*:)[^\s/?#]*(?=@)")
_PASSWORD_PARAMETER = re.compile(r"(\bpassword=)[^\s&;'\"]*", re.IGNORECASE)


def masked(text: str) -> str:
    """`text` with every password in a URL (store.url, an IMAP or source URL) shown as `***`."""
    return _PASSWORD_PARAMETER.sub(r"\1***", _URL_PASSWORD.sub(r"\1***", text))


class _Masking(logging.Formatter):
    """Another formatter's lines (tracebacks included) with their passwords masked."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return masked(self.inner.format(record))


class _LibraryTracebacks(logging.Filter):
    """A library's logged traceback (SQLAlchemy's pool, when PostgreSQL restarts under it) as one line, its
    error after its message: the traceback is for `--debug`. The digest's own logs keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None and not record.name.startswith("digest"):
            error = record.exc_info[1]
            said = " ".join(str(error).split()) or type(error).__name__
            record.msg, record.args = f"{record.getMessage()}: {said}", None
            record.exc_info = record.exc_text = None
        return True


def setup_logging(level: int, fmt: str = "text") -> None:
    """Route every `digest` log to stderr in the chosen format (replacing earlier handlers), passwords masked."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Masking(JsonFormatter() if fmt == "json" else
                                  logging.Formatter("digest: %(levelname)s: %(message)s")))
    if level > logging.DEBUG:
        handler.addFilter(_LibraryTracebacks())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


@contextmanager
def progress(total: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """A function to call with each step done: it moves a bar on stderr when that is a terminal and the run is long."""
    if total is None or total < PROGRESS_FROM or not sys.stderr.isatty():
        yield lambda _n: None
        return
    from tqdm import tqdm  # imported only when a bar is shown

    with tqdm(total=total, desc=label, unit="digest", file=sys.stderr, leave=False) as bar:
        yield bar.update
