"""Logging for people and for machines: readable text by default, JSON lines with `--log-format json`,
and a progress bar on long runs when a person is watching (stderr is a terminal)."""

from __future__ import annotations

import json
import logging
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


def setup_logging(level: int, fmt: str = "text") -> None:
    """Route every `digest` log to stderr in the chosen format (replacing earlier handlers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("digest: %(levelname)s: %(message)s"))
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
