"""Subscribers (tables `subscribers`, `profile_files`, `preferences`): every subscriber whatever their source, what
was last read from each profile file, and the choices a reader made on the preferences page.

A run reads subscribers from here a batch at a time, by address, or grouped into delivery slots, so
a million of them never have to be parsed, or held in memory, at once. The files stay the way
operators edit subscribers by hand; `digest.subscribers.roster` brings their changes in.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from digest.models import Interest, LibraryEntry, Subscriber
from digest.store.engine import Base
from digest.store.records import Preference
from digest.store.tables import CHUNK, _chunks, _now, preferences, profile_files, subscribers
from digest.store.tables import libraries as libraries_table

preferences_table = preferences


@dataclass(frozen=True)
class FileState:
    """What the store remembers of one profile file."""

    path: str
    mtime_ns: int
    size: int
    sha256: str
    email_key: str | None
    problems: tuple[tuple[int, str], ...]
    libraries: tuple[tuple[str, int, int], ...] = ()  # library files it names: (path, mtime_ns, size) when read


@dataclass(frozen=True)
class SlotCount:
    """A delivery slot (timezone, local time, frequency) and how many subscribers it has."""

    timezone: str
    send_at: time
    frequency: str
    subscribers: int

_UNSET: Any = object()  # a preference not given (None clears one)


def profile_json(subscriber: Subscriber) -> str:
    data = {"email": subscriber.email, "name": subscriber.name, "timezone": subscriber.timezone,
            "send_at": f"{subscriber.send_at:%H:%M}", "frequency": subscriber.frequency,
            "max_papers": subscriber.max_papers, "exclude": list(subscriber.exclude),
            "interests": [_interest_json(i) for i in subscriber.interests]}
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def _interest_json(interest: Interest) -> dict[str, Any]:
    data: dict[str, Any] = {"name": interest.name, "keywords": list(interest.keywords), "weight": interest.weight,
                            "description": interest.description, "seed_papers": list(interest.seed_papers)}
    if interest.authors:
        data["authors"] = list(interest.authors)
    if interest.library_key:  # the entries themselves are kept once, in the libraries table
        data.update(library_key=interest.library_key, library_source=interest.library_source)
    return data


def subscriber_of(text: str, path: str | None) -> Subscriber:
    data = json.loads(text)
    interests = tuple(Interest(i["name"], tuple(i["keywords"]), i["weight"], i["description"],
                               tuple(i["seed_papers"]), authors=tuple(i.get("authors", ())),
                               library_source=i.get("library_source", ""), library_key=i.get("library_key", ""))
                      for i in data["interests"])
    return Subscriber(email=data["email"], name=data["name"], timezone=data["timezone"],
                      send_at=time.fromisoformat(data["send_at"]), frequency=data["frequency"],
                      max_papers=data["max_papers"], interests=interests, exclude=tuple(data["exclude"]),
                      path=path)


def subscriber_row(subscriber: Subscriber, source: str, path: str | None) -> dict[str, Any]:
    """The subscribers table's row (and, under "libraries", the entries of the libraries it names, for `_put`)."""
    row = {"email_key": subscriber.email.lower(), "email": subscriber.email, "source": source, "path": path,
           "timezone": subscriber.timezone, "send_at": f"{subscriber.send_at:%H:%M}",
           "frequency": subscriber.frequency, "profile": profile_json(subscriber), "updated_at": _now()}
    libraries = {i.library_key: i.library for i in subscriber.interests if i.library_key and i.library}
    if libraries:
        row["libraries"] = libraries
    return row


def put_libraries(conn: Connection, libraries: dict[str, Sequence[LibraryEntry]]) -> None:
    """Keep libraries' entries under their digests (a digest already kept is left as it is: same entries)."""
    keys = list(libraries)
    have = {r[0] for part in _parts(keys) for r in conn.execute(sa.select(libraries_table.c.key).where(
        libraries_table.c.key.in_(part)))}
    rows = [{"key": key, "entries": library_json(libraries[key]), "updated_at": _now()} for key in keys
            if key not in have]
    for part in _parts(rows):
        conn.execute(libraries_table.insert(), part)


def library_keys_of(conn: Connection, where: Any, table: sa.Table = subscribers) -> set[str]:
    """The library digests the stored profiles (of `table`: subscribers, or signups) matching `where` name (read
    before they are replaced or deleted)."""
    query = sa.select(table.c.profile).where(where, table.c.profile.contains('"library_key"'))
    return {i["library_key"] for (text,) in conn.execute(query) for i in json.loads(text)["interests"]
            if i.get("library_key")}


def drop_unused_libraries(conn: Connection, keys: Iterable[str]) -> int:
    """Delete these libraries but those a remaining profile (a subscriber's of any source, a signup's) names."""
    from digest.store.tables import signups

    dropped = 0
    for key in sorted(keys):
        # A digest is 40 hex digits: one that turns up anywhere else in a profile (a false match) keeps the
        # library, which errs the safe way; a profile naming it is never missed.
        named = sa.or_(*(sa.exists().where(table.c.profile.contains(key, autoescape=True))
                         for table in (subscribers, signups)))
        if not conn.execute(sa.select(named)).scalar():
            dropped += int(conn.execute(libraries_table.delete().where(libraries_table.c.key == key)).rowcount or 0)
    return dropped


def library_json(entries: Sequence[LibraryEntry]) -> str:
    return json.dumps([{"title": e.title, "abstract": e.abstract, "arxiv_id": e.arxiv_id, "doi": e.doi,
                        "authors": list(e.authors), "added": e.added.isoformat() if e.added else None,
                        "line": e.line} for e in entries], ensure_ascii=False)


def _frequency() -> Any:
    """A subscriber's frequency: the one chosen on the preferences page, else the profile's."""
    return sa.func.coalesce(preferences.c.frequency, subscribers.c.frequency)


def _with_preferences() -> Any:
    return subscribers.outerjoin(preferences, preferences.c.email == subscribers.c.email_key)


class SubscriberStore(Base):
    """The `subscribers`, `profile_files` and `preferences` tables (mixed into Store)."""

    # -- profile files --------------------------------------------------------------

    def file_states(self) -> dict[str, FileState]:
        with self.engine.connect() as conn:
            return {r.path: FileState(r.path, r.mtime_ns, r.size, r.sha256, r.email_key,
                                      tuple(map(tuple, json.loads(r.problems or "[]"))),
                                      tuple(map(tuple, json.loads(r.libraries or "[]"))))
                    for r in conn.execute(sa.select(profile_files))}

    def apply_files(self, removed: Sequence[str], states: Sequence[FileState],
                    valid: Sequence[tuple[Subscriber, str]]) -> None:
        """One transaction: forget removed files (and their subscribers), record file states, store valid profiles."""
        with self.write() as conn:
            before: set[str] = set()  # libraries the replaced profiles named: gone once nobody names them
            for part in _parts(list(removed)):
                before |= library_keys_of(conn, _from_files(part))
                conn.execute(subscribers.delete().where(_from_files(part)))
                conn.execute(profile_files.delete().where(profile_files.c.path.in_(part)))
            changed = [s.path for s in states]
            for part in _parts(changed):  # a file that changed its address gives up the old one
                before |= library_keys_of(conn, _from_files(part))
                conn.execute(subscribers.delete().where(_from_files(part)))
                conn.execute(profile_files.delete().where(profile_files.c.path.in_(part)))
            now = _now()
            rows = [{"path": s.path, "mtime_ns": s.mtime_ns, "size": s.size, "sha256": s.sha256,
                     "email_key": s.email_key, "problems": json.dumps(s.problems) if s.problems else None,
                     "checked_at": now, "libraries": json.dumps(s.libraries) if s.libraries else None}
                    for s in states]
            for part in _parts(rows):
                conn.execute(profile_files.insert(), part)
            self._put(conn, [subscriber_row(sub, "file", path) for sub, path in valid])
            if before:
                drop_unused_libraries(conn, before)

    def touch_files(self, states: Sequence[FileState]) -> None:
        """Files whose content is unchanged but whose time stamp moved: remember the new stamp."""
        with self.write() as conn:
            for s in states:
                conn.execute(profile_files.update().where(profile_files.c.path == s.path).values(
                    mtime_ns=s.mtime_ns, size=s.size))

    def profile_problems(self) -> list[tuple[str, int, str]]:
        """(file, line, message) of every invalid profile file, in file order."""
        query = sa.select(profile_files.c.path, profile_files.c.problems).where(
            profile_files.c.problems.is_not(None)).order_by(profile_files.c.path)
        with self.engine.connect() as conn:
            return [(r.path, line, message) for r in conn.execute(query) for line, message in json.loads(r.problems)]

    # -- subscribers -------------------------------------------------------------------

    def owners(self, email_keys: Sequence[str]) -> dict[str, tuple[str, str | None]]:
        """Who defines each of these (lower-case) addresses: (source, path)."""
        out: dict[str, tuple[str, str | None]] = {}
        with self.engine.connect() as conn:
            for part in _parts(list(email_keys)):
                query = sa.select(subscribers.c.email_key, subscribers.c.source, subscribers.c.path).where(
                    subscribers.c.email_key.in_(part))
                out.update({r.email_key: (r.source, r.path) for r in conn.execute(query)})
        return out

    def put_subscribers(self, rows: Sequence[Subscriber], source: str) -> None:
        """Insert or replace subscribers of one source (an import)."""
        with self.write() as conn:
            self._put(conn, [subscriber_row(s, source, None) for s in rows])

    @staticmethod
    def _put(conn: Connection, rows: list[dict[str, Any]]) -> None:
        libraries = {key: entries for row in rows for key, entries in row.pop("libraries", {}).items()}
        if libraries:
            put_libraries(conn, libraries)
        before: set[str] = set()
        for part in _parts(rows):
            emails = subscribers.c.email_key.in_([r["email_key"] for r in part])
            before |= library_keys_of(conn, emails)
            conn.execute(subscribers.delete().where(emails))
            conn.execute(subscribers.insert(), part)
        if before - set(libraries):
            drop_unused_libraries(conn, before - set(libraries))

    def profile_of(self, email: str) -> tuple[str, Subscriber] | None:
        """Where one address's profile comes from (file, import, web) and the profile as stored, no preference
        applied (what a page that edits it starts from); None for an address nobody has."""
        query = sa.select(subscribers.c.source, subscribers.c.profile, subscribers.c.path).where(
            subscribers.c.email_key == email.lower())
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (row.source, subscriber_of(row.profile, row.path)) if row else None

    def replace_web_profile(self, subscriber: Subscriber) -> bool:
        """Replace a web subscriber's profile (its delivery slot with it), as confirming a signup again does; False,
        changing nothing, when the address is not a web subscriber's (a profile file's or an import's is theirs)."""
        with self.write() as conn:
            source = conn.execute(sa.select(subscribers.c.source).where(
                subscribers.c.email_key == subscriber.email.lower())).scalar()
            if source != "web":
                return False
            self._put(conn, [subscriber_row(subscriber, "web", None)])
        return True

    def remove_subscriber(self, email: str, source: str) -> bool:
        with self.write() as conn:
            result = conn.execute(subscribers.delete().where(
                (subscribers.c.email_key == email.lower()) & (subscribers.c.source == source)))
        return bool(result.rowcount)

    def subscribers_on(self, domains: Sequence[str], limit: int = 3) -> tuple[int, list[str]]:
        """How many subscribers have an address on one of these domains or under them (x@d, x@y.d), and the first
        `limit` such addresses (`digest check`: the sample's readers on example.org still in the list)."""
        key = subscribers.c.email_key
        on = sa.or_(*(key.like(f"%@{d}") | key.like(f"%.{d}") for d in domains)) if domains else sa.false()
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(subscribers).where(on)).scalar_one()
            first = conn.execute(sa.select(subscribers.c.email).where(on).order_by(key).limit(limit)).scalars()
            return int(total), list(first)

    def count_subscribers(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(subscribers)).scalar_one())

    def subscribers_by_email(self, emails: Sequence[str]) -> dict[str, Subscriber]:
        """The subscribers with these addresses (any case), keyed by the address as given; preferences applied."""
        wanted = {e.lower(): e for e in emails}
        out: dict[str, Subscriber] = {}
        with self.engine.connect() as conn:
            for part in _parts(list(wanted)):
                query = (sa.select(subscribers.c.email_key, subscribers.c.profile, subscribers.c.path,
                                   preferences.c.frequency).select_from(_with_preferences())
                         .where(subscribers.c.email_key.in_(part)))
                for row in conn.execute(query):
                    out[wanted[row.email_key]] = _subscriber(row)
        return out

    def iter_subscribers(self, batch: int = 1000, *, preferences: bool = True,
                         slots: Sequence[tuple[str, time, str]] | None = None) -> Iterator[Subscriber]:
        """Every subscriber (of these slots) in address order, a batch at a time; with `preferences`, a chosen
        frequency applied."""
        after = ""
        chosen = _with_preferences() if preferences or slots is not None else subscribers
        frequency = preferences_table.c.frequency if preferences else sa.null().label("frequency")
        query = (sa.select(subscribers.c.email_key, subscribers.c.profile, subscribers.c.path, frequency)
                 .select_from(chosen).order_by(subscribers.c.email_key).limit(batch))
        if slots is not None:
            query = query.where(_in_slots(slots) if slots else sa.false())
        while True:
            with self.engine.connect() as conn:
                rows = conn.execute(query.where(subscribers.c.email_key > after)).all()
            yield from (_subscriber(row) for row in rows)
            if len(rows) < batch:
                return
            after = rows[-1].email_key

    def slot_counts(self) -> list[SlotCount]:
        """Every delivery slot in use, with its number of subscribers (a preferences-page frequency counts)."""
        frequency = _frequency().label("frequency")
        query = (sa.select(subscribers.c.timezone, subscribers.c.send_at, frequency, sa.func.count())
                 .select_from(_with_preferences())
                 .group_by(subscribers.c.timezone, subscribers.c.send_at, frequency))
        with self.engine.connect() as conn:
            return [SlotCount(r[0], time.fromisoformat(r[1]), r[2], int(r[3])) for r in conn.execute(query)]

    def preference(self, email: str) -> Preference | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(preferences).where(preferences.c.email == email.lower())).first()
        return Preference(row.email, row.frequency, row.paused_until) if row else None

    def preferences(self) -> dict[str, Preference]:
        """Every subscriber's preferences, by lower-case address."""
        with self.engine.connect() as conn:
            return {r.email: Preference(r.email, r.frequency, r.paused_until)
                    for r in conn.execute(sa.select(preferences))}

    def preferences_among(self, emails: Sequence[str]) -> dict[str, Preference]:
        """Of these addresses, the preferences of those who set any, by lower-case address."""
        out: dict[str, Preference] = {}
        with self.engine.connect() as conn:
            for part in _chunks([e.lower() for e in emails]):
                query = sa.select(preferences).where(preferences.c.email.in_(part))
                out.update({r.email: Preference(r.email, r.frequency, r.paused_until) for r in conn.execute(query)})
        return out

    def set_preference(self, email: str, *, frequency: Any = _UNSET, paused_until: Any = _UNSET) -> None:
        """Change the given fields of a subscriber's preferences (None clears one)."""
        changes = {k: v for k, v in (("frequency", frequency), ("paused_until", paused_until))
                   if v is not _UNSET}
        key = email.lower()
        with self.write() as conn:
            if conn.execute(sa.select(preferences.c.email).where(preferences.c.email == key)).first():
                conn.execute(preferences.update().where(preferences.c.email == key).values(
                    updated_at=_now(), **changes))
            else:
                conn.execute(preferences.insert().values(email=key, updated_at=_now(), **changes))


def _from_files(paths: list[str]) -> Any:
    return (subscribers.c.source == "file") & subscribers.c.path.in_(paths)


def _in_slots(slots: Sequence[tuple[str, time, str]]) -> Any:
    """Subscribers of these slots: one IN over a slot key, whatever the number of slots.

    The list is one expanding parameter (compiled once), which both databases look up by hash or
    sort, so a run with hundreds of slots due scans the subscribers once instead of testing each slot.
    """
    key = subscribers.c.timezone + "|" + subscribers.c.send_at + "|" + _frequency()
    return key.in_(sorted({f"{tz}|{at:%H:%M}|{frequency}" for tz, at, frequency in slots}))


def insert_from_select(conn: Connection, table: sa.Table, columns: list[str], select: Any) -> None:
    """INSERT … SELECT, skipping rows whose key exists."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    conn.execute(dialect.insert(table).from_select(columns, select).on_conflict_do_nothing())


def _subscriber(row: Any) -> Subscriber:
    found = subscriber_of(row.profile, row.path)
    if row.frequency and row.frequency != found.frequency:
        return replace(found, frequency=row.frequency)
    return found


def _parts(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start:start + CHUNK]


