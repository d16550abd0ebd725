"""Subscriber profiles: `subscribers/*.toml` → validated `Subscriber`s, and problems as file:line.

A profile is someone's input like any other: every limit below is checked before the profile is used, the same
way by `digest subscribers check` as by a send (both come through `parse_profile` or `validate`), and a profile
past one is refused with `file:line: what is wrong` while every other profile still goes through. The limits keep
one profile's cost to a send small: the selector's work and memory grow with the keywords and interests it reads.
"""

from __future__ import annotations

import bisect
import difflib
import itertools
import logging
import re
import reprlib
import stat
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import time
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from digest.models import WEEKDAYS, Interest, LibraryEntry, Subscriber, is_delivery_day  # noqa: F401 - imported from here too
from digest.subscribers.addresses import address_problem, is_email  # noqa: F401 - is_email: imported from here too
from digest.subscribers.libraries import LibraryError, digest_of, read_library

log = logging.getLogger("digest")

_SEND_AT = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")
_TOML_LINE = re.compile(r"at line (\d+)")
_KEY_LINE = re.compile(r"""^\s*([A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')\s*=""")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")  # tab, CR, LF: where lines may break
_LINE_BREAK = re.compile(r"[\t\n\r]")
_LONG_NUMBER = re.compile(r"[0-9_]{4000,}")
TOP_KEYS = ("email", "name", "timezone", "send_at", "frequency", "max_papers", "interests", "exclude", "authors")
# `exclude` is accepted inside an interest table too: TOML puts a key written after
# `[[interests]]` into that table, and the profile's author meant the whole profile.
INTEREST_KEYS = ("name", "keywords", "description", "seed_papers", "weight", "exclude", "library", "authors")
MAX_PAPERS_LIMIT = 50
# Limits of one profile (a file, an import's rows, a signup's topics); each is documented in docs/limits.md.
MAX_PROFILE_BYTES = 262_144  # a profile file's size; the example profiles are under 1 KB
MAX_NESTING = 8  # tables and arrays inside one another (a profile needs 4: the file, interests, a table, a list)
MAX_INTERESTS = 50
MAX_KEYWORDS = 100  # keywords of one interest
MAX_PROFILE_KEYWORDS = 300  # keywords of all the interests together
MAX_KEYWORD = 100  # characters of a keyword (and of an exclude term)
MAX_DESCRIPTION = 2_000  # characters of an interest's description (the text model reads the first ~1,000)
MAX_NAME = 100  # characters of the subscriber's name and of an interest's name
MAX_SEED_PAPERS = 100  # seed papers of one interest
MAX_SEED_PAPER = 500  # characters of one (an arXiv id or a title; arXiv titles are under 300)
MAX_PROFILE_SEED_PAPERS = 200  # seed papers of all the interests (each title costs ~10 ms of the text model)
MAX_LIBRARIES = 5  # interests naming a library file (2,000 entries are ~3 minutes of the text model, once)
MAX_EXCLUDE = 100  # exclude terms of the whole profile
MAX_AUTHORS = 200  # authors followed by one interest (or the profile)
MAX_AUTHOR_NAME = 200  # characters of one name
MAX_LIBRARY_PATH = 1_000  # characters of a `library` path (the library file has limits of its own: `libraries`)
MAX_PROBLEMS = 20  # problems reported of one profile; past them, one line says how many more there are
FOLLOWED = "Authors you follow"  # the interest a profile's own `authors` list becomes
_shown = reprlib.Repr()
_shown.maxstring, _shown.maxother, _shown.maxlist, _shown.maxdict, _shown.maxlevel = 60, 60, 4, 4, 2


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
    """Finds the line a key is written on, since tomllib does not report positions (each found by bisection in
    a table of key lines made once, so a file of many problems is not read again for each)."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.tables = [i for i, line in enumerate(self.lines) if line.strip().startswith("[[interests]]")]
        self.keys: dict[str, list[int]] = {}
        for n, line in enumerate(self.lines):
            if "=" in line and (match := _KEY_LINE.match(line)):
                self.keys.setdefault(match.group(1).strip("\"'"), []).append(n)

    def of(self, key: str, interest: int | None = None) -> int:
        tables = self.tables
        if interest is None:
            start, end = 0, tables[0] if tables else len(self.lines)
        else:
            start = tables[interest] if interest < len(tables) else 0
            end = tables[interest + 1] if interest + 1 < len(tables) else len(self.lines)
        found = self.keys.get(key, [])
        first = bisect.bisect_left(found, start)
        if first < len(found) and found[first] < end:
            return found[first] + 1
        if interest is None and found:  # a top-level key written after the interests tables is still top-level
            return found[0] + 1
        return start + 1


def shown(value: Any) -> str:
    """A value as a message quotes it: its repr, cut short (a profile's value can be a megabyte, or nested)."""
    return _shown.repr(value)


def _unknown(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(allowed)})"
    return f"unknown key {shown(key)}{hint}"


def _at(n: int | None) -> str:
    return f"interest {n + 1}: " if n is not None else ""


def _text_problem(text: str, longest: int, *, one_line: bool = True) -> str | None:
    """What is wrong with one text of a profile (too long, control characters), or None."""
    if len(text) > longest:
        return f"is {len(text):,} characters long; at most {longest:,}"
    if _CONTROL.search(text) or (one_line and _LINE_BREAK.search(text)):
        return "has control characters" + (" or line breaks (write it on one line)" if one_line else "")
    return None


Locate = Callable[[str, "int | None"], int]  # (key, interest number or None) → the line it is written on


class _Validator:
    """Checks one parsed profile and collects its problems: the first MAX_PROBLEMS, and how many more.

    `base`: the folder a `library` path is relative to (the profile's; None where no file may be named)."""

    def __init__(self, path: str, locate: Locate, base: Path | None = None) -> None:
        self.path, self.locate, self.base = path, locate, base
        self.problems: list[Problem] = []
        self.count = 0  # problems found, reported or not
        self.more_at: int | None = None  # the line of the first problem not reported

    def fail(self, key: str, message: str, interest: int | None = None) -> None:
        self.count += 1
        if self.count <= MAX_PROBLEMS:
            self.problems.append(Problem(self.path, self.locate(key, interest), message))
        elif self.more_at is None:
            self.more_at = self.locate(key, interest)

    def reported(self) -> list[Problem]:
        """The problems kept, and one line for the others (a file of 10,000 mistakes is not 10,000 lines)."""
        more = self.count - len(self.problems)
        if not more:
            return self.problems
        return [*self.problems, Problem(self.path, self.more_at or 1, f"… and {more:,} more problems in this profile "
                                                                      "(fix these first)")]

    def unknown(self, table: dict[str, Any], allowed: tuple[str, ...], n: int | None = None) -> None:
        for key in table:
            if key not in allowed:  # the hint (difflib) only for problems that are reported
                self.fail(key, _at(n) + _unknown(key, allowed) if self.count < MAX_PROBLEMS else "", n)

    def subscriber(self, data: dict[str, Any]) -> Subscriber | None:
        self.unknown(data, TOP_KEYS)
        email = self._email(data.get("email"))
        name = self._text(data.get("name", ""), "name", None, MAX_NAME, required=False)
        zone = self._timezone(data.get("timezone", "UTC"))
        send_at = self._send_at(data.get("send_at", "07:00"))
        frequency = self._frequency(data.get("frequency", "daily"))
        max_papers = self._max_papers(data.get("max_papers", 10))
        interests = self._interests(data.get("interests", []))
        followed = self._authors(data.get("authors", []), None)
        if followed:
            interests = (*interests, Interest(FOLLOWED, authors=followed))
        exclude = self._exclude(data)
        if self.count:
            return None
        return Subscriber(email=email, name=name, timezone=zone, send_at=send_at, frequency=frequency,
                          max_papers=max_papers, interests=interests, exclude=exclude, path=self.path)

    def _exclude(self, data: dict[str, Any]) -> tuple[str, ...]:
        tables = data.get("interests", []) if isinstance(data.get("interests"), list) else []
        found: list[str] = []
        for n, table in [(None, data), *enumerate(tables[:MAX_INTERESTS])]:
            value = table.get("exclude", []) if isinstance(table, dict) else []
            found.extend(self._strings(value, "exclude", n, MAX_EXCLUDE, MAX_KEYWORD,
                                       "exclude must be a list of non-empty strings", at=""))
        if len(found) > MAX_EXCLUDE:
            self.fail("exclude", f"exclude lists {len(found)} terms in all; at most {MAX_EXCLUDE}")
        return tuple(found)

    def _strings(self, value: Any, key: str, n: int | None, most: int, longest: int, wrong: str,
                 at: str | None = None) -> tuple[str, ...]:
        """A list of texts (keywords, seed papers, authors, exclusions), stripped; () and a problem when it is not
        one, or is longer than `most`, or an item is longer than `longest` (`wrong`: the message for a wrong type;
        `at`: the message's prefix, "interest N: " by default)."""
        at = _at(n) if at is None else at
        if not isinstance(value, list):
            self.fail(key, at + wrong, n)
            return ()
        if len(value) > most:
            self.fail(key, f"{at}{key} lists {len(value):,} items; at most {most}", n)
            return ()
        if not all(isinstance(v, str) and v.strip() for v in value):
            self.fail(key, at + wrong, n)
            return ()
        for item in value:
            if problem := _text_problem(item, longest):
                self.fail(key, f"{at}{key}: {shown(item)} {problem}", n)
                return ()
        return tuple(v.strip() for v in value)

    def _text(self, value: Any, key: str, n: int | None, longest: int, *, required: bool,
              one_line: bool = True) -> str:
        """A name or a description: a string (non-empty when `required`) within `longest` characters."""
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(key, f"{_at(n)}{key} must be a {'non-empty ' if required else ''}string", n)
            return ""
        if problem := _text_problem(value, longest, one_line=one_line):
            self.fail(key, f"{_at(n)}{key} {problem}", n)
            return ""
        return value

    def _email(self, value: Any) -> str:
        if value is None:
            self.fail("email", "missing required key 'email'")
        elif problem := address_problem(value.strip() if isinstance(value, str) else value):
            self.fail("email", f"email {shown(value)} is not a valid address (like ada@example.org): {problem}")
        else:
            return str(value).strip()
        return ""

    def _timezone(self, value: Any) -> str:
        try:
            if not isinstance(value, str) or len(value) > MAX_NAME:
                raise ValueError(value)
            ZoneInfo(value)
            return value
        except (ZoneInfoNotFoundError, ValueError, OSError):
            self.fail("timezone", f"timezone {shown(value)} is not an IANA time zone (like Europe/London)")
            return "UTC"

    def _send_at(self, value: Any) -> time:
        match = _SEND_AT.match(value) if isinstance(value, str) else None
        if not match:
            self.fail("send_at", f"send_at {shown(value)} must be a 24-hour time HH:MM (like \"07:30\")")
            return time(7, 0)
        return time(int(match.group(1)), int(match.group(2)))

    def _frequency(self, value: Any) -> str:
        ok = value in ("daily", "weekdays") or (
            isinstance(value, str) and value.startswith("weekly:") and value[7:] in WEEKDAYS)
        if not ok:
            self.fail("frequency", f"frequency {shown(value)} must be daily, weekdays or weekly:mon … weekly:sun")
        return str(value) if ok else "daily"

    def _max_papers(self, value: Any) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_PAPERS_LIMIT:
            self.fail("max_papers", f"max_papers must be a whole number from 1 to {MAX_PAPERS_LIMIT}")
            return 10
        return value

    def _interests(self, value: Any) -> tuple[Interest, ...]:
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            self.fail("interests", "interests must be [[interests]] tables")
            return ()
        if len(value) > MAX_INTERESTS:  # the first one past the limit is where the operator looks
            self.fail("interests", f"{len(value):,} interests; a profile has at most {MAX_INTERESTS} (interest "
                                   f"{MAX_INTERESTS + 1} is the first one too many)", MAX_INTERESTS)
            return ()
        libraries = [n for n, table in enumerate(value) if "library" in table]
        if len(libraries) > MAX_LIBRARIES:  # before any is read: each costs minutes on the first send
            self.fail("library", f"interest {libraries[MAX_LIBRARIES] + 1}: {len(libraries)} interests name a "
                                 f"library; a profile has at most {MAX_LIBRARIES}", libraries[MAX_LIBRARIES])
            return ()
        interests = [(n, i) for n, table in enumerate(value) if (i := self._interest(n, table))]
        self._total(interests, "keywords", MAX_PROFILE_KEYWORDS)
        self._total(interests, "seed_papers", MAX_PROFILE_SEED_PAPERS)
        return tuple(i for _, i in interests)

    def _total(self, interests: list[tuple[int, Interest]], key: str, most: int) -> None:
        """A problem, on the interest that passes it, when the interests' `key` lists hold more than `most` items."""
        counts = [len(getattr(interest, key)) for _, interest in interests]
        if sum(counts) > most:
            n = next(n for (n, _), upto in zip(interests, itertools.accumulate(counts), strict=True) if upto > most)
            self.fail(key, f"interest {n + 1}: {sum(counts):,} {key} in all the interests; a profile has at most "
                           f"{most} (this interest passes the limit)", n)

    def _interest(self, n: int, table: dict[str, Any]) -> Interest | None:
        before = self.count
        self.unknown(table, INTEREST_KEYS, n)
        name = self._text(table.get("name"), "name", n, MAX_NAME, required=True)
        raw_keywords, raw_seeds = table.get("keywords", []), table.get("seed_papers", [])
        keywords = self._strings(raw_keywords, "keywords", n, MAX_KEYWORDS, MAX_KEYWORD,
                                 "keywords must be a list of non-empty strings")
        description = self._text(table.get("description", ""), "description", n, MAX_DESCRIPTION, required=False,
                                 one_line=False)
        seeds = self._strings(raw_seeds, "seed_papers", n, MAX_SEED_PAPERS, MAX_SEED_PAPER,
                              "seed_papers must be a list of arXiv ids or titles")
        authors = self._authors(table.get("authors", []), n)
        library = self._library(table.get("library"), n)
        raw_description = table.get("description", "")
        if not raw_keywords and not (isinstance(raw_description, str) and raw_description.strip()) \
                and not raw_seeds and not table.get("authors") and not library and "library" not in table:
            self.fail("keywords", f"interest {n + 1}: give keywords, a description, seed_papers, a library or "
                                  "authors", n)
        weight = table.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight <= 10:
            self.fail("weight", f"interest {n + 1}: weight must be a number above 0 and at most 10", n)
        if self.count > before:
            return None
        entries, source = library or ((), "")
        return Interest(name=name.strip(), keywords=keywords, weight=float(weight),
                        description=" ".join(description.split()), seed_papers=seeds, authors=authors,
                        library=entries, library_source=source, library_key=digest_of(entries) if entries else "")

    def _authors(self, value: Any, n: int | None) -> tuple[str, ...]:
        at = _at(n)
        if isinstance(value, list) and len(value) > MAX_AUTHORS:
            self.fail("authors", f"{at}authors lists {len(value):,} names; at most {MAX_AUTHORS}", n)
            return ()
        if isinstance(value, list) and any(isinstance(a, str) and len(a) > MAX_AUTHOR_NAME for a in value):
            self.fail("authors", f"{at}an author's name is longer than {MAX_AUTHOR_NAME} characters", n)
            return ()
        found = self._strings(value, "authors", n, MAX_AUTHORS, MAX_AUTHOR_NAME,
                              "authors must be a list of names (like [\"Tri Dao\"])")
        return tuple(" ".join(a.split()) for a in found)

    def _library(self, value: Any, n: int) -> tuple[tuple[LibraryEntry, ...], str] | None:
        """The interest's library file read (its unusable entries logged with file:line), or None."""
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or _text_problem(value, MAX_LIBRARY_PATH):
            self.fail("library", f"interest {n + 1}: library must be the path of a library file (BibTeX, RIS, "
                                 f"CSL-JSON or a list of arXiv ids / DOIs), relative to this file, on one line of at "
                                 f"most {MAX_LIBRARY_PATH:,} characters", n)
            return None
        if self.base is None:
            self.fail("library", f"interest {n + 1}: a library file can only be named in a profile file or an "
                                 "import", n)
            return None
        path, refused = library_file(self.base, value.strip())
        if refused:
            self.fail("library", f"interest {n + 1}: library {shown(value.strip())} {refused}", n)
            return None
        try:
            library = read_library(path.resolve())  # the file the check above saw, not a link swapped in since
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


def library_file(base: Path, value: str) -> tuple[Path, str]:
    """The library file a `library` value names relative to `base` (the folder of the profile file or import list),
    made absolute as it is stored, and why it is refused ("" when it is not).

    A library is a file in that folder or below it: an absolute path, a `..` or a symbolic link that resolves
    outside the folder is refused before anything is opened, so a profile cannot have the digest read, store or
    quote any other file of the machine (its secrets, other readers' data)."""
    path = (base / value).absolute()
    if Path(value).is_absolute():
        return path, "is an absolute path: a library is a file in this file's folder, named relative to it"
    if ".." in Path(value).parts:
        return path, "goes up with '..': a library is a file in this file's folder, named relative to it"
    try:
        inside = path.resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError):  # a loop of symbolic links
        inside = False
    if not inside:
        return path, "leads outside this file's folder through a symbolic link: copy the library into the folder"
    return path, ""


def library_paths(path: Path) -> list[str]:
    """The library files a profile file names and may read (`library_file`), from its TOML whether or not the
    profile is valid; none when it cannot be read."""
    data, _text, _problem = read_profile(path)
    tables = data.get("interests", []) if data is not None else []
    values = [t.get("library") for t in tables[:MAX_INTERESTS] if isinstance(t, dict)] \
        if isinstance(tables, list) else []
    found = [library_file(path.parent, v.strip()) for v in values if isinstance(v, str) and v.strip()]
    return [str(file) for file, refused in found if not refused]


def check_interest(table: dict[str, Any], number: int) -> tuple[Interest | None, list[str]]:
    """One interest table (a profile's, or a topic of the signup page's catalogue): the Interest, or what is wrong
    (each message starting "interest N:", N = `number` + 1)."""
    validator = _Validator("", lambda _key, _n: 0)
    interest = validator._interest(number, table)
    return interest, [p.message for p in validator.reported()]


def parse_profile(path: Path) -> tuple[Subscriber | None, list[Problem]]:
    """Read and validate one profile file (what `subscribers check` and every send do, so they agree)."""
    data, text, problem = read_profile(path)
    if data is None:
        return None, [problem] if problem else []
    return validate(data, str(path), _Lines(text).of, path.parent)


def read_profile(path: Path) -> tuple[dict[str, Any] | None, str, Problem | None]:
    """A profile file's TOML table and text, or the one problem that stops it being read: too large, not UTF-8,
    not TOML, nested too deep (tomllib recurses once per level: 1,000 levels would end the process's stack)."""
    where = str(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):  # a pipe would block the run, a device never end
            return None, "", Problem(where, 1, "not a regular file: a profile is a TOML file")
        with path.open("rb") as handle:
            raw = handle.read(MAX_PROFILE_BYTES + 1)
    except OSError as exc:
        return None, "", Problem(where, 1, f"cannot read file: {exc.strerror or exc}")
    if len(raw) > MAX_PROFILE_BYTES:
        return None, "", Problem(where, 1, f"the file is larger than {MAX_PROFILE_BYTES:,} bytes, the limit of a "
                                           "profile (most are under 2 KB): not read")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, "", Problem(where, raw.count(b"\n", 0, exc.start) + 1,
                                 f"cannot read file: not UTF-8 ({exc.reason} at byte {exc.start})")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_LINE.search(str(exc))
        return None, text, Problem(where, int(match.group(1)) if match else 1, f"invalid TOML: {exc}")
    except RecursionError:
        data = None
    except ValueError:  # int() refuses a number of more than 4,300 digits (tomllib does not catch it)
        match = _LONG_NUMBER.search(text)
        return None, text, Problem(where, text.count("\n", 0, match.start()) + 1 if match else 1,
                                   "invalid TOML: a number of more than 4,300 digits")
    if data is None or _depth(data, MAX_NESTING) > MAX_NESTING:
        line = _deep_line(text, MAX_NESTING - 1) or 1
        return None, text, Problem(where, line, f"tables and arrays nested more than {MAX_NESTING} deep (a profile "
                                                "needs 4): not read")
    return data, text, None


def _depth(value: Any, most: int) -> int:
    """How deep tables and lists nest in `value` (a table of plain values: 1), counted no further than `most` + 1
    and without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo and deepest <= most:
        item, level = todo.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            todo.extend((child, level + 1) for child in children)
    return deepest


# A TOML text's strings and comments (whose brackets are not nesting), its brackets and its line breaks.
_TOKENS = re.compile(r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*|[\[\]{}\n]',
                     re.DOTALL)


def _deep_line(text: str, most: int) -> int | None:
    """The line on which brackets first nest more than `most` deep, outside strings and comments (a nesting made
    with dotted keys or table headers has none: None)."""
    depth, line = 0, 1
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > most:
                return line
        elif token in ("]", "}"):
            depth -= 1
        else:
            line += token.count("\n")
    return None


def validate(data: dict[str, Any], where: str, locate: Locate,
             base: Path | None = None) -> tuple[Subscriber | None, list[Problem]]:
    """Check a profile given as a table (from TOML, CSV rows); `locate` says which line a key is on, `base` is the
    folder a `library` path is relative to."""
    validator = _Validator(where, locate, base)
    subscriber = validator.subscriber(data)
    return subscriber, validator.reported()


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
