"""Subscriber profiles: `subscribers/*.toml` → validated `Subscriber`s, and problems as file:line."""

from __future__ import annotations

import difflib
import logging
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .libraries import LibraryError, digest_of, read_library
from .models import Interest, LibraryEntry, Subscriber

log = logging.getLogger("digest")

_EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$")
_SEND_AT = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_TOML_LINE = re.compile(r"at line (\d+)")
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
TOP_KEYS = ("email", "name", "timezone", "send_at", "frequency", "max_papers", "interests", "exclude", "authors")
# `exclude` is accepted inside an interest table too: TOML puts a key written after
# `[[interests]]` into that table, and the profile's author meant the whole profile.
INTEREST_KEYS = ("name", "keywords", "description", "seed_papers", "weight", "exclude", "library", "authors")
MAX_PAPERS_LIMIT = 50
MAX_AUTHORS = 200  # authors followed by one interest (or the profile)
MAX_AUTHOR_NAME = 200  # characters of one name
FOLLOWED = "Authors you follow"  # the interest a profile's own `authors` list becomes


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a profile file, with the line it is on."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Roster:
    """The valid subscribers and the problems found in the rest."""

    subscribers: tuple[Subscriber, ...]
    problems: tuple[Problem, ...]
    invalid_files: tuple[str, ...]

    def find(self, email: str) -> Subscriber | None:
        return next((s for s in self.subscribers if s.email.lower() == email.lower()), None)


class _Lines:
    """Finds the line a key is written on, since tomllib does not report positions."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()

    def _tables(self) -> list[int]:
        return [i for i, line in enumerate(self.lines) if line.strip().startswith("[[interests]]")]

    def of(self, key: str, interest: int | None = None) -> int:
        tables = self._tables()
        if interest is None:
            start, end = 0, tables[0] if tables else len(self.lines)
        else:
            start = tables[interest] if interest < len(tables) else 0
            end = tables[interest + 1] if interest + 1 < len(tables) else len(self.lines)
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
        for i in range(start, end):
            if pattern.match(self.lines[i]):
                return i + 1
        if interest is None:  # a top-level key written after the interests tables is still top-level
            for i, line in enumerate(self.lines):
                if pattern.match(line):
                    return i + 1
        return start + 1


def is_email(text: str) -> bool:
    """Whether `text` is a plain ASCII address like ada@example.org (nothing that could break a header)."""
    return bool(_EMAIL.match(text)) and len(text) <= 254


def is_delivery_day(frequency: str, day: date) -> bool:
    """Whether a subscriber with this frequency gets a digest on `day`."""
    if frequency == "daily":
        return True
    if frequency == "weekdays":
        return day.weekday() < 5
    return WEEKDAYS[day.weekday()] == frequency.removeprefix("weekly:")


def _unknown(keys: Any, allowed: tuple[str, ...]) -> list[tuple[str, str]]:
    out = []
    for key in keys:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"
            out.append((key, f"unknown key {key!r}{hint}"))
    return out


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)


Locate = Callable[[str, "int | None"], int]  # (key, interest number or None) → the line it is written on


class _Validator:
    """Checks one parsed profile and collects every problem, not just the first.

    `base`: the folder a `library` path is relative to (the profile's; None where no file may be named)."""

    def __init__(self, path: str, locate: Locate, base: Path | None = None) -> None:
        self.path, self.locate, self.problems = path, locate, []  # type: ignore[var-annotated]
        self.base = base

    def fail(self, key: str, message: str, interest: int | None = None) -> None:
        self.problems.append(Problem(self.path, self.locate(key, interest), message))

    def subscriber(self, data: dict[str, Any]) -> Subscriber | None:
        for key, message in _unknown(data, TOP_KEYS):
            self.fail(key, message)
        email = self._email(data.get("email"))
        name = self._name(data.get("name", ""))
        zone = self._timezone(data.get("timezone", "UTC"))
        send_at = self._send_at(data.get("send_at", "07:00"))
        frequency = self._frequency(data.get("frequency", "daily"))
        max_papers = self._max_papers(data.get("max_papers", 10))
        interests = self._interests(data.get("interests", []))
        followed = self._authors(data.get("authors", []), None)
        if followed:
            interests = (*interests, Interest(FOLLOWED, authors=followed))
        exclude = self._exclude(data)
        if self.problems:
            return None
        return Subscriber(email=email, name=name, timezone=zone, send_at=send_at, frequency=frequency,
                          max_papers=max_papers, interests=interests,
                          exclude=tuple(e.strip() for e in exclude), path=self.path)

    def _exclude(self, data: dict[str, Any]) -> list[str]:
        tables = data.get("interests", []) if isinstance(data.get("interests"), list) else []
        found: list[str] = []
        for n, table in [(None, data), *enumerate(tables)]:
            value = table.get("exclude", []) if isinstance(table, dict) else []
            if _str_list(value):
                found.extend(value)
            else:
                self.fail("exclude", "exclude must be a list of non-empty strings", n)
        return found

    def _email(self, value: Any) -> str:
        if value is None:
            self.problems.append(Problem(self.path, self.locate("email", None), "missing required key 'email'"))
        elif not isinstance(value, str) or not is_email(value.strip()):
            self.fail("email", f"email {value!r} is not a valid address (like ada@example.org)")
        else:
            return value.strip()
        return ""

    def _name(self, value: Any) -> str:
        if not isinstance(value, str):
            self.fail("name", "name must be a string")
            return ""
        return value

    def _timezone(self, value: Any) -> str:
        try:
            ZoneInfo(str(value))
            return str(value)
        except (ZoneInfoNotFoundError, ValueError):
            self.fail("timezone", f"timezone {value!r} is not an IANA time zone (like Europe/London)")
            return "UTC"

    def _send_at(self, value: Any) -> time:
        match = _SEND_AT.match(value) if isinstance(value, str) else None
        if not match:
            self.fail("send_at", f"send_at {value!r} must be a 24-hour time HH:MM (like \"07:30\")")
            return time(7, 0)
        return time(int(match.group(1)), int(match.group(2)))

    def _frequency(self, value: Any) -> str:
        ok = value in ("daily", "weekdays") or (
            isinstance(value, str) and value.startswith("weekly:") and value[7:] in WEEKDAYS)
        if not ok:
            self.fail("frequency", f"frequency {value!r} must be daily, weekdays or weekly:mon … weekly:sun")
        return str(value)

    def _max_papers(self, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PAPERS_LIMIT:
            self.fail("max_papers", f"max_papers must be a whole number from 1 to {MAX_PAPERS_LIMIT}")
            return 10
        return value

    def _interests(self, value: Any) -> tuple[Interest, ...]:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail("interests", "interests must be [[interests]] tables")
            return ()
        return tuple(i for n, table in enumerate(value) if (i := self._interest(n, table)))

    def _interest(self, n: int, table: dict[str, Any]) -> Interest | None:
        before = len(self.problems)
        for key, message in _unknown(table, INTEREST_KEYS):
            self.fail(key, f"interest {n + 1}: {message}", n)
        name = table.get("name")
        if not isinstance(name, str) or not name.strip():
            self.fail("name", f"interest {n + 1}: name must be a non-empty string", n)
        keywords = table.get("keywords", [])
        if not isinstance(keywords, list) or (keywords and not _str_list(keywords)):
            self.fail("keywords", f"interest {n + 1}: keywords must be a list of non-empty strings", n)
        description = table.get("description", "")
        if not isinstance(description, str):
            self.fail("description", f"interest {n + 1}: description must be a string", n)
        seeds = table.get("seed_papers", [])
        if not isinstance(seeds, list) or (seeds and not _str_list(seeds)):
            self.fail("seed_papers", f"interest {n + 1}: seed_papers must be a list of arXiv ids or titles", n)
        authors = self._authors(table.get("authors", []), n)
        library = self._library(table.get("library"), n)
        if not keywords and not (isinstance(description, str) and description.strip()) and not seeds \
                and not authors and not library and "library" not in table:
            self.fail("keywords", f"interest {n + 1}: give keywords, a description, seed_papers, a library or "
                                  "authors", n)
        weight = table.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 10:
            self.fail("weight", f"interest {n + 1}: weight must be a number above 0 and at most 10", n)
        if len(self.problems) > before:
            return None
        entries, source = library or ((), "")
        return Interest(name=str(name).strip(), keywords=tuple(k.strip() for k in keywords),
                        weight=float(weight), description=" ".join(description.split()),
                        seed_papers=tuple(s.strip() for s in seeds), authors=authors, library=entries,
                        library_source=source, library_key=digest_of(entries) if entries else "")

    def _authors(self, value: Any, n: int | None) -> tuple[str, ...]:
        where = f"interest {n + 1}: " if n is not None else ""
        if not isinstance(value, list) or (value and not _str_list(value)):
            self.fail("authors", f"{where}authors must be a list of names (like [\"Tri Dao\"])", n)
            return ()
        if len(value) > MAX_AUTHORS:
            self.fail("authors", f"{where}authors lists {len(value)} names; at most {MAX_AUTHORS}", n)
            return ()
        long = [a for a in value if len(a) > MAX_AUTHOR_NAME]
        if long:
            self.fail("authors", f"{where}an author's name is longer than {MAX_AUTHOR_NAME} characters", n)
            return ()
        return tuple(" ".join(a.split()) for a in value)

    def _library(self, value: Any, n: int) -> tuple[tuple[LibraryEntry, ...], str] | None:
        """The interest's library file read (its unusable entries logged with file:line), or None."""
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail("library", f"interest {n + 1}: library must be the path of a library file (BibTeX, RIS, "
                                 "CSL-JSON or a list of arXiv ids / DOIs), relative to this file", n)
            return None
        if self.base is None:
            self.fail("library", f"interest {n + 1}: a library file can only be named in a profile file or an "
                                 "import", n)
            return None
        path = (self.base / value.strip()).absolute()  # stored, exported and read again from anywhere
        try:
            library = read_library(path)
        except LibraryError as exc:
            self.fail("library", f"interest {n + 1}: {exc}", n)
            return None
        for problem in library.problems:
            log.warning("%s", problem)
        if not library.entries:
            self.fail("library", f"interest {n + 1}: {path}: no usable entry (each needs a title, an arXiv id "
                                 "or a DOI)", n)
            return None
        return library.entries, str(path)


def library_paths(path: Path) -> list[str]:
    """The library files a profile file names (resolved as `_Validator._library` resolves them), read from its TOML
    whether or not the profile is valid; none when it cannot be read."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return []
    tables = data.get("interests", [])
    values = [t.get("library") for t in tables if isinstance(t, dict)] if isinstance(tables, list) else []
    return [str((path.parent / v.strip()).absolute()) for v in values if isinstance(v, str) and v.strip()]


def check_interest(table: dict[str, Any], number: int) -> tuple[Interest | None, list[str]]:
    """One interest table (a profile's, or a topic of the signup page's catalogue): the Interest, or what is wrong
    (each message starting "interest N:", N = `number` + 1)."""
    validator = _Validator("", lambda _key, _n: 0)
    interest = validator._interest(number, table)
    return interest, [p.message for p in validator.problems]


def parse_profile(path: Path) -> tuple[Subscriber | None, list[Problem]]:
    """Read and validate one profile file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(str(path), 1, f"cannot read file: {exc}")]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_LINE.search(str(exc))
        return None, [Problem(str(path), int(match.group(1)) if match else 1, f"invalid TOML: {exc}")]
    return validate(data, str(path), _Lines(text).of, path.parent)


def validate(data: dict[str, Any], where: str, locate: Locate,
             base: Path | None = None) -> tuple[Subscriber | None, list[Problem]]:
    """Check a profile given as a table (from TOML, CSV rows); `locate` says which line a key is on, `base` is the
    folder a `library` path is relative to."""
    validator = _Validator(where, locate, base)
    subscriber = validator.subscriber(data)
    return subscriber, validator.problems


def load_subscribers(folder: Path) -> Roster:
    """Every `*.toml` profile in `folder`: the valid ones, and the problems of the others."""
    if not folder.is_dir():
        return Roster((), (Problem(str(folder), 0, "subscribers folder not found"),), (str(folder),))
    read = [(path, *parse_profile(path)) for path in sorted(folder.glob("*.toml"))]
    files_of: dict[str, list[Path]] = {}
    for path, subscriber, _found in read:
        if subscriber:
            files_of.setdefault(subscriber.email.lower(), []).append(path)
    valid: list[Subscriber] = []
    problems: list[Problem] = []
    invalid: list[str] = []
    for path, subscriber, found in read:
        rivals = [str(p) for p in files_of.get(subscriber.email.lower(), []) if p != path] if subscriber else []
        if subscriber and rivals:  # one address, two files: neither is right until the operator says which
            line = _Lines(path.read_text(encoding="utf-8")).of("email")
            found = [Problem(str(path), line, f"email {subscriber.email} is also the address of the profile file "
                                              f"{', '.join(rivals)}: one address, one profile; neither is sent "
                                              "until one goes")]
            subscriber = None
        problems.extend(found)
        if subscriber:
            valid.append(subscriber)
        else:
            invalid.append(str(path))
    return Roster(tuple(valid), tuple(problems), tuple(invalid))
