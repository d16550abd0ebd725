"""The roster: profile files and imported lists brought into the store, and the subscribers a command works with.

`sync` reads only the profile files whose size or time stamp changed since the last run (a hash
tells a touched file from an edited one), so a run over many files parses almost none of them.
`import_path` adds a CSV list or a folder of profiles to the store (they are then read from the
store, not from files); `export_csv` writes every subscriber out in the same CSV shape. One address
has one source: a file and an import (or two files) naming the same address is an error that names
both, and the one that had the address first keeps it.
"""

from __future__ import annotations

import csv
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from digest.errors import ProfileError, UsageError
from digest.models import Paper, Subscriber
from digest.schedule import Slot
from digest.store import FileState, Store
from digest.subscribers.profiles import (
    MAX_INTERESTS,
    MAX_PROFILE_BYTES,
    Problem,
    Roster,
    library_paths,
    parse_profile,
    shown,
    validate,
)

log = logging.getLogger("digest")
Imported = tuple[Subscriber, str, int]  # a subscriber, and the file and line it came from
CSV_FIELDS = ("email", "name", "timezone", "send_at", "frequency", "max_papers", "exclude",
              "interest", "keywords", "description", "seed_papers", "weight", "library", "authors")
LIST_SEPARATOR = ";"  # within a cell: keywords, seed papers, exclusions
IMPORT_BATCH = 2000  # subscribers written per transaction
# Limits of an import file (each subscriber's rows are then checked as a profile file is; see `subscribers`).
MAX_CSV_LINE = 262_144  # bytes of one line (a longer one is skipped, with its line number)
MAX_CSV_ROWS = 10_000_000  # rows of one file (a million subscribers of a few interests each fit)
MAX_SUBSCRIBER_ROWS = MAX_INTERESTS + 1  # one row an interest, and perhaps a row of settings alone
ERASED = ("this address was erased at its owner's request (`digest subscribers forget`) and is never mailed "
          "again: take it out of this file")


@dataclass
class SyncReport:
    """What a sync read: files parsed, unchanged, removed, and the problems of invalid ones."""

    parsed: int = 0
    unchanged: int = 0
    removed: int = 0
    problems: list[Problem] = field(default_factory=list)


@dataclass
class ImportReport:
    """What an import stored, and the problems of the rows or files it could not."""

    imported: int = 0
    problems: list[Problem] = field(default_factory=list)


def _conflict(email: str, owner: tuple[str, str | None]) -> str:
    source, path = owner
    where = {"file": f"the profile file {path}", "web": "a subscriber who signed up on the web page"}.get(
        source, "an imported subscriber")
    hint = "" if source == "file" else f" (remove it with `digest subscribers remove {email}` to use this file)"
    return f"email {email} is already used by {where}{hint}"


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    found = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".toml") and entry.is_file():
                stat = entry.stat()
                found[str(Path(folder) / entry.name)] = (stat.st_mtime_ns, stat.st_size)
    return found


def _libraries(path: str, subscriber: Subscriber | None) -> tuple[tuple[str, int, int], ...]:
    """The library files a profile names, with their time stamp and size as read ((-1, -1): missing). A refused
    profile's are read from its TOML, so that fixing its library file is seen like fixing the profile."""
    if subscriber is not None:
        sources = [i.library_source for i in subscriber.interests if i.library_source]
    else:
        sources = library_paths(Path(path))
    return tuple((source, *_stamp(source)) for source in dict.fromkeys(sources))


def _stamp(source: str) -> tuple[int, int]:
    try:
        found = os.stat(source)
    except OSError:
        return -1, -1
    return found.st_mtime_ns, found.st_size


def _file_digest(path: str) -> str:
    """The SHA-256 of a profile file's first MAX_PROFILE_BYTES + 1 bytes (a larger file is refused unread, whatever
    follows), or "" when it cannot be read (`parse_profile` says why, and the other files go on)."""
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read(MAX_PROFILE_BYTES + 1)).hexdigest()
    except OSError:
        return ""


def _same_libraries(state: FileState) -> bool:
    """Whether every library file the profile named is as it was when the profile was read."""
    return all(_stamp(source) == (mtime, size) for source, mtime, size in state.libraries)


Stored = Callable[[Sequence[Subscriber]], None]  # told of each batch of subscribers a sync or an import stored


def sync(store: Store, folder: Path, on_stored: Stored | None = None) -> SyncReport:
    """Bring the profile files of `folder` into the store, parsing only those that changed."""
    report = SyncReport()
    if not folder.is_dir():  # a mistyped path or another machine's copy: not a reason to forget anyone
        report.problems.append(Problem(str(folder), 0, "subscribers folder not found (the store's subscribers "
                                                       "are kept as they are)"))
        return report
    known = store.file_states()
    seen = _listing(folder)
    removed = [path for path in known if path not in seen]
    touched, todo = [], []
    for path, (mtime, size) in sorted(seen.items()):
        old = known.get(path)
        conflicted = old is not None and old.problems and old.email_key  # its address may be free now
        if old and (old.mtime_ns, old.size) == (mtime, size) and not conflicted and _same_libraries(old):
            report.unchanged += 1
            continue
        digest = _file_digest(path)
        if old and old.sha256 == digest and not conflicted and _same_libraries(old):
            touched.append(FileState(path, mtime, size, digest, old.email_key, old.problems, old.libraries))
            report.unchanged += 1
        else:
            todo.append((path, mtime, size, digest))
    parsed = [(path, mtime, size, digest, *parse_profile(Path(path))) for path, mtime, size, digest in todo]
    parsed += _rivals(parsed, seen, known, removed)
    if touched:
        store.touch_files(touched)
    report.removed = len(removed)
    report.parsed = len(parsed)
    if parsed or removed:
        stored = _apply(store, parsed, removed, known, report)
        if on_stored is not None and stored:
            on_stored(stored)
    report.problems += [Problem(path, line, message) for path, line, message in store.profile_problems()]
    return report


Parsed = tuple[str, int, int, str, Subscriber | None, list[Problem]]  # path, mtime, size, sha256, what it says


def _rivals(parsed: list[Parsed], seen: dict[str, tuple[int, int]], known: dict[str, FileState],
            removed: list[str]) -> list[Parsed]:
    """Unchanged files whose address a changed file now names too: read again, so that both are refused."""
    claimed = {subscriber.email.lower() for *_, subscriber, _ in parsed if subscriber is not None}
    queued = {path for path, *_ in parsed}
    rivals: list[Parsed] = []
    for path, state in known.items():
        if state.email_key in claimed and path not in queued and path not in removed and path in seen:
            digest = _file_digest(path)
            rivals.append((path, *seen[path], digest, *parse_profile(Path(path))))
    return rivals


def _apply(store: Store, parsed: list[Parsed], removed: list[str], known: dict[str, FileState],
           report: SyncReport) -> list[Subscriber]:
    keys = [sub.email.lower() for *_, sub, _ in parsed if sub is not None]
    # Two files naming one address: neither is sent (which one is right is for the operator to say).
    files_of: dict[str, list[str]] = {}
    for path, *_, subscriber, _problems in parsed:
        if subscriber is not None:
            files_of.setdefault(subscriber.email.lower(), []).append(path)
    going = set(removed) | {path for path, *_ in parsed}
    owners = {k: o for k, o in store.owners(keys).items() if not (o[0] == "file" and o[1] in going)}
    # Among the files read now, one that had the address before keeps it; otherwise the first by name.
    before = {state.email_key: path for path, state in known.items() if state.email_key and not state.problems}
    forgotten = store.forgotten_among(keys)
    states, valid = [], []
    for path, mtime, size, digest, subscriber, problems in parsed:
        key = subscriber.email.lower() if subscriber else None
        if key is not None and key in forgotten:  # the address is kept nowhere, this file's state included
            problems, key = [Problem(path, 1, ERASED)], None
        elif subscriber is not None and key is not None and len(files_of[key]) > 1:
            others = ", ".join(p for p in files_of[key] if p != path)
            problems = [Problem(path, 1, f"email {subscriber.email} is also the address of the profile file "
                                         f"{others}: one address, one profile; neither is sent until one goes")]
        elif subscriber is not None and key is not None:
            holder = owners.get(key)
            if holder is None and before.get(key) not in (None, path) and before[key] in going:
                holder = ("file", before[key]) if any(p == before[key] for p, *_ in parsed) else None
            if holder is not None and holder != ("file", path):
                problems = [Problem(path, 1, _conflict(subscriber.email, holder))]
            else:
                owners[key] = ("file", path)
                valid.append((subscriber, path))
        states.append(FileState(path, mtime, size, digest, key,
                                tuple((p.line, p.message) for p in problems), _libraries(path, subscriber)))
    stored = [(s, p) for s, p in valid if s is not None]
    store.apply_files(removed, states, stored)
    return [s for s, _ in stored]


def roster(store: Store, problems: Iterable[Problem] = ()) -> Roster:
    """Every subscriber in the store, with the problems of the invalid profiles (for the small-scale tools)."""
    found = tuple(problems)
    return Roster(tuple(store.iter_subscribers()), found, tuple(dict.fromkeys(p.path for p in found)))


# -- import and export ------------------------------------------------------------------


def import_path(store: Store, path: Path, on_stored: Stored | None = None) -> ImportReport:
    """Import a CSV list or a folder of TOML profiles into the store (an imported address again is replaced)."""
    report = ImportReport()
    if path.is_dir():
        profiles = (_profile(p, report) for p in sorted(path.glob("*.toml")))
    elif path.is_file():
        profiles = _read_csv(path, report)
    else:
        report.problems.append(Problem(str(path), 0, "no such file or folder"))
        return report
    batch: list[Imported] = []
    for item in profiles:
        if item is not None:
            batch.append(item)
        if len(batch) >= IMPORT_BATCH:
            _store(store, batch, report, on_stored)
            batch = []
    _store(store, batch, report, on_stored)
    return report


def import_one(store: Store, subscriber: Subscriber, where: str, on_stored: Stored | None = None) -> list[Problem]:
    """Import one subscriber (the operator console's form) with an import's refusals: a profile file's or a web
    signup's address, an erased one."""
    report = ImportReport()
    _store(store, [(subscriber, where, 0)], report, on_stored)
    return report.problems


def _profile(path: Path, report: ImportReport) -> Imported | None:
    subscriber, problems = parse_profile(path)
    report.problems += problems
    return (subscriber, str(path), 1) if subscriber else None


def _store(store: Store, batch: list[Imported], report: ImportReport, on_stored: Stored | None) -> None:
    owners = store.owners([s.email.lower() for s, _, _ in batch])
    forgotten = store.forgotten_among([s.email for s, _, _ in batch])
    keep = []
    for subscriber, where, line in batch:
        owner = owners.get(subscriber.email.lower())
        if subscriber.email.lower() in forgotten:
            report.problems.append(Problem(where, line, ERASED))
        elif owner is not None and owner[0] == "file":
            report.problems.append(Problem(where, line, f"email {subscriber.email} is already defined by the "
                                                        f"profile file {owner[1]}; remove one of the two"))
        elif owner is not None and owner[0] == "web":
            report.problems.append(Problem(where, line, f"email {subscriber.email} signed up on the web page; "
                                                        f"`digest subscribers remove {subscriber.email}` first to "
                                                        "replace their profile"))
        else:
            keep.append(subscriber)
    store.put_subscribers(keep, "import")
    report.imported += len(keep)
    if on_stored is not None and keep:
        on_stored(keep)


def _cells(row: dict[str, str], key: str) -> list[str]:
    return [part.strip() for part in (row.get(key) or "").split(LIST_SEPARATOR) if part.strip()]


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


class _CsvLines:
    """An import file's lines for the csv module, each at most MAX_CSV_LINE bytes of UTF-8: a line that is not is
    reported and read as an empty line (so that the lines after it keep their numbers), and the file goes on."""

    def __init__(self, handle: BinaryIO, path: Path, report: ImportReport) -> None:
        self.handle, self.path, self.report = handle, path, report
        self.number = 0  # the line last read

    def __iter__(self) -> _CsvLines:
        return self

    def __next__(self) -> str:
        raw = self.handle.readline(MAX_CSV_LINE + 1)
        if not raw:
            raise StopIteration
        self.number += 1
        if len(raw) > MAX_CSV_LINE and not raw.endswith(b"\n"):
            while (rest := self.handle.readline(1 << 16)) and not rest.endswith(b"\n"):
                pass
            return self._skip(f"the line is longer than {MAX_CSV_LINE:,} bytes: skipped")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return self._skip(f"the line is not UTF-8 ({exc.reason} at byte {exc.start}): skipped")
        return text.removeprefix("\ufeff") if self.number == 1 else text  # a spreadsheet's byte-order mark

    def _skip(self, reason: str) -> str:
        self.report.problems.append(Problem(str(self.path), self.number, reason))
        return "\n"


def _read_csv(path: Path, report: ImportReport) -> Iterator[Imported | None]:
    """Subscribers from a CSV file, one row per interest; the rows of one subscriber must be together."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        report.problems.append(Problem(str(path), 0, f"cannot read file: {exc.strerror or exc}"))
        return
    with handle:
        lines = _CsvLines(handle, path, report)
        reader = csv.DictReader(lines)
        try:
            fields = reader.fieldnames
        except csv.Error as exc:
            fields = None
            report.problems.append(Problem(str(path), 1, f"cannot read the CSV: {exc}"))
        unknown = [f for f in fields or () if f not in CSV_FIELDS]
        if not fields or "email" not in fields or unknown:
            named = ", ".join(map(shown, unknown)) or "none"
            report.problems.append(Problem(str(path), 1, "the first line must name the columns: "
                                           f"{', '.join(CSV_FIELDS)} (unknown: {named})"))
            return
        yield from _groups(path, _records(reader, lines, path, report), report)


def _records(reader: csv.DictReader[str], lines: _CsvLines, path: Path,
             report: ImportReport) -> Iterator[tuple[int, dict[str, str]]]:
    """Each row with its (last) line; a row the csv module cannot read is reported and the next one read."""
    count = 0
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            report.problems.append(Problem(str(path), lines.number, f"cannot read the CSV: {exc}"))
            continue
        count += 1
        if count > MAX_CSV_ROWS:
            report.problems.append(Problem(str(path), lines.number, f"the file has more than {MAX_CSV_ROWS:,} rows: "
                                                                    "the rest is not read (split it)"))
            return
        yield lines.number, row


def _groups(path: Path, records: Iterator[tuple[int, dict[str, str]]],
            report: ImportReport) -> Iterator[Imported | None]:
    seen: set[str] = set()
    rows: list[tuple[int, dict[str, str]]] = []
    extra: list[int] = []  # the subscriber's rows past MAX_SUBSCRIBER_ROWS: how many, and the first one's line
    for line, row in records:
        email = (row.get("email") or "").strip().lower()
        if rows and email != (rows[0][1].get("email") or "").strip().lower():
            yield _subscriber(path, rows, report, seen, extra)
            rows, extra = [], []
        if len(rows) < MAX_SUBSCRIBER_ROWS:
            rows.append((line, row))
        else:
            extra = [extra[0] + 1, extra[1]] if extra else [1, line]
    if rows:
        yield _subscriber(path, rows, report, seen, extra)


def _subscriber(path: Path, rows: list[tuple[int, dict[str, str]]], report: ImportReport,
                seen: set[str], extra: list[int] | None = None) -> Imported | None:
    """One subscriber's rows as a profile table, validated with each problem on its row's line."""
    first_line, first = rows[0]
    email = (first.get("email") or "").strip()
    if email.lower() in seen:
        report.problems.append(Problem(str(path), first_line, f"email {shown(email)} appears again: keep a "
                                                               "subscriber's rows together"))
        return None
    seen.add(email.lower())
    if extra:  # refused whole: a profile cut short is not the one the operator wrote
        count, line = extra
        report.problems.append(Problem(str(path), line, f"email {shown(email)} has {len(rows) + count:,} rows; a "
                                                        f"subscriber has at most {MAX_SUBSCRIBER_ROWS} (one an "
                                                        f"interest, at most {MAX_INTERESTS})"))
        return None
    data: dict[str, Any] = {"email": email or None}
    for key in ("name", "timezone", "send_at", "frequency"):
        value = next((r[key].strip() for _, r in rows if (r.get(key) or "").strip()), None)
        if value is not None:
            data[key] = value
    max_papers = next((r["max_papers"].strip() for _, r in rows if (r.get("max_papers") or "").strip()), None)
    if max_papers is not None:
        data["max_papers"] = _number(max_papers)
    data["exclude"] = [e for _, r in rows for e in _cells(r, "exclude")]
    interests, lines = [], []
    for line, row in rows:
        if not (row.get("interest") or "").strip() and not any(_cells(row, k) for k in ("keywords", "seed_papers",
                                                                                          "library", "authors")):
            continue
        table: dict[str, Any] = {"name": (row.get("interest") or "").strip(), "keywords": _cells(row, "keywords"),
                                 "seed_papers": _cells(row, "seed_papers"), "authors": _cells(row, "authors")}
        if (row.get("library") or "").strip():
            table["library"] = row["library"].strip()
        if (row.get("description") or "").strip():
            table["description"] = row["description"].strip()
        if (row.get("weight") or "").strip():
            table["weight"] = _number(row["weight"].strip())
        interests.append(table)
        lines.append(line)
    data["interests"] = interests
    subscriber, problems = validate(data, str(path), lambda _key, n: first_line if n is None else lines[n],
                                    path.parent)
    report.problems += problems
    return (subscriber, str(path), first_line) if subscriber else None


def export_csv(store: Store, out: TextIO, folder: Path | None = None) -> int:
    """Write every subscriber as CSV rows (one per interest), the shape `import_path` reads; returns how many.

    A `library` is written relative to `folder` (where the CSV goes; the current folder by default), as an import
    reads it; one outside that folder keeps its absolute path, which an import refuses (`library_file`)."""
    folder = (folder or Path.cwd()).absolute()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    count = 0
    for subscriber in store.iter_subscribers(preferences=False):
        head = [subscriber.email, subscriber.name, subscriber.timezone, f"{subscriber.send_at:%H:%M}",
                subscriber.frequency, str(subscriber.max_papers), LIST_SEPARATOR.join(subscriber.exclude)]
        if not subscriber.interests:
            writer.writerow([*head, "", "", "", "", "", "", ""])
        for n, interest in enumerate(subscriber.interests):
            row = head if n == 0 else [subscriber.email, "", "", "", "", "", ""]
            writer.writerow([*row, interest.name, LIST_SEPARATOR.join(interest.keywords), interest.description,
                             LIST_SEPARATOR.join(interest.seed_papers), f"{interest.weight:g}",
                             _relative(interest.library_source, folder), LIST_SEPARATOR.join(interest.authors)])
        count += 1
    return count


def _relative(source: str, folder: Path) -> str:
    """A stored library path as an export writes it: relative to `folder` when inside it, else as it is."""
    if not source:
        return ""
    try:
        return str(Path(source).relative_to(folder))
    except ValueError:
        return source


# -- the profiles a command works with ----------------------------------------------------------


class Profiles:
    """The subscribers a command works with: profile files synced into the store (each problem logged once per
    process, however often a long-lived command syncs), then read from it by address, all at once or by slot."""

    def __init__(self, store: Store, folder: str | Path, on_stored: Stored | None = None) -> None:
        self.store, self.folder, self.on_stored = store, Path(folder), on_stored
        self.named = str(folder)  # as the settings give it, in messages
        self._warned: set[str] = set()

    def sync(self) -> SyncReport:
        """Bring changed profile files into the store; each invalid profile is logged with its file and skipped."""
        report = sync(self.store, self.folder, on_stored=self.on_stored)
        if not report.problems and self.folder.is_dir() and not self.store.count_subscribers():
            report.problems.append(Problem(str(self.folder), 0, "no subscriber profiles (*.toml) here and none "
                                                                "imported: nobody to send to"))
        for problem in report.problems:
            if str(problem) not in self._warned:
                self._warned.add(str(problem))
                log.warning("%s%s", "skipping profile: " if problem.line else "", problem)
        return report

    def roster(self, synced: SyncReport | None = None) -> Roster:
        """Every valid subscriber (a frequency chosen on the preferences page applied), and the invalid profiles
        (the files synced first unless `synced` says how they were)."""
        return roster(self.store, (synced or self.sync()).problems)

    def slots(self, synced: SyncReport | None = None) -> list[Slot]:
        """The delivery slots in use (the files synced first unless `synced` is given)."""
        if synced is None:
            self.sync()
        return [Slot(c.timezone, c.send_at, c.frequency) for c in self.store.slot_counts()]

    def subscriber(self, email: str) -> Subscriber:
        """One subscriber by address; UsageError naming the folder if unknown."""
        found = self.store.subscribers_by_email([email]).get(email)
        if found is None:
            raise UsageError(f"no valid subscriber {email!r} in {self.named} (see `digest subscribers list`)")
        return found

    def profile(self, email: str | None = None, path: Path | None = None) -> Subscriber:
        """A subscriber of the roster by email, or one profile file (`digest rank --profile`)."""
        if path is None:
            return self.chosen(self.roster(), email)[0]
        subscriber, problems = parse_profile(path)
        if subscriber is None:
            raise ProfileError("; ".join(str(p) for p in problems))
        return subscriber

    def chosen(self, roster: Roster, only: str | None) -> list[Subscriber]:
        """The roster's subscribers, or the one named `only` (UsageError when it has none such)."""
        if only is None:
            return list(roster.subscribers)
        found = roster.find(only)
        if found is None:
            raise UsageError(f"no valid subscriber {only!r} in {self.named} (see `digest subscribers list`)")
        return [found]

    def feedback(self, email: str, ref: str, more: bool) -> Paper:
        """`digest feedback`: record more/less-like-this for a paper named by arXiv id, `#store id` or title."""
        if self.roster().find(email) is None:
            raise UsageError(f"no valid subscriber {email!r} in {self.named}")
        found = self.store.find_papers([ref]).get(ref)
        if found is None or found.store_id is None:
            raise UsageError(f"no paper {ref!r} in the store (give an arXiv id, #id or the exact title)")
        self.store.add_feedback(email, found.store_id, 1 if more else -1)
        return found
