"""The operator console's reads (it owns no table): one page of subscribers at a time, found by address or name and
filtered by state.

A page is the addresses of one slice of the list in address order (LIMIT/OFFSET over the primary
key, joined only to what the filter needs), then the few rows of those addresses; so a page costs
the same whether the list holds a hundred subscribers or a million, and nothing is loaded whole.

A filter or a search counts its matches only up to `COUNT_AHEAD` past the page's start and says
"more than N" beyond (an exact count would read every match, a third of a million for "sent", on
every page); the whole list is counted exactly. On PostgreSQL a search reads two pg_trgm indexes
(the address, the profile's name) when the extension could be created (`make_search_indexes`);
without them, and on SQLite, it scans the profiles (about 0.4 s a million on SQLite).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from digest.models import WEEKDAYS
from digest.store.engine import Base
from digest.store.records import DeliveryRecord
from digest.store.signups import SignupRecord
from digest.store.signups import _record as _signup
from digest.store.tables import _record, deliveries, preferences, signups, subscribers, suppressions

# The console's filters: a state of a digest of the date, or of the subscriber (see `_where`).
STATES = ("all", "due", "sent", "failed", "bounced", "suppressed", "paused", "pending signup")
UNSENT = ("queued", "pending", "claimed")  # in the send log, not sent yet: the next send or run sends them
COUNT_AHEAD = 1_000  # a filter's or search's matches counted past the page's start; beyond, "more than N"
FEW_MATCHES = 20_000  # a search matching fewer is read through its index; more, in address order (`_search`)
# PostgreSQL's trigram indexes for a search by any part of the address or name (made when pg_trgm can be)
# (over lower(email_key), not the column: PostgreSQL would read a trigram index of the column for its equality
# too, and chose it for `email_key IN (…)` of a thousand addresses: 3 s an import batch instead of 10 ms)
SEARCH_INDEXES = {"ix_subscribers_email_trgm": "(lower(email_key)) gin_trgm_ops",
                  "ix_subscribers_name_trgm": "((profile::jsonb ->> 'name')) gin_trgm_ops"}
ADDRESS = sa.func.lower(subscribers.c.email_key, type_=sa.String)  # the expressions the indexes hold
NAME = sa.literal_column("(subscribers.profile::jsonb ->> 'name')")
SEARCH_TABLE = "subscribers_search"  # SQLite's: FTS5 with trigrams, rowid = the subscriber's


@dataclass(frozen=True)
class Slice:
    """One page of a filtered list: its addresses (or pending signups) and how many match in all (`exact`), or
    at least (more than `total` when not `exact`)."""

    keys: tuple[str, ...]
    total: int
    signups: tuple[SignupRecord, ...] = ()
    exact: bool = True


def due_frequencies(day: date) -> list[str]:
    """The frequencies whose subscribers get a digest dated `day` (as `subscribers.is_delivery_day` says)."""
    weekday = WEEKDAYS[day.weekday()]
    return ["daily", f"weekly:{weekday}"] + (["weekdays"] if day.weekday() < 5 else [])


def name_pattern(text: str) -> str:
    """A LIKE pattern matching profiles whose top-level name contains `text`, whatever the interests are called: a
    stored profile begins `{"email":…,"name":…,"timezone":`, and no value can hold those keys unescaped (JSON
    escapes their quotes)."""
    inner = json.dumps(text, ensure_ascii=False)[1:-1]
    escaped = inner.replace("/", "//").replace("%", "/%").replace("_", "/_")
    return '{"email":"%","name":"%' + escaped + '%","timezone":"%'


def make_search_indexes(conn: Connection) -> bool:
    """The indexes a search by any part of an address or name reads, made and filled; False (nothing changed) when
    this database cannot have them, and a search then scans the profiles.

    PostgreSQL: pg_trgm's GIN indexes over the address and the profile's name, when the extension is there or
    may be created (Debian's postgresql package ships it; CREATE EXTENSION needs the rights). SQLite: an FTS5
    table with the trigram tokenizer (SQLite 3.34 and later) holding each subscriber's address and name under its
    rowid, kept by triggers on the subscribers table (every write to it is a plain insert, update or delete)."""
    if conn.dialect.name == "postgresql":
        try:
            with conn.begin_nested():
                conn.execute(sa.text("CREATE EXTENSION IF NOT EXISTS pg_trgm"))
        except sa.exc.DBAPIError:
            return False
        for name, column in SEARCH_INDEXES.items():
            conn.execute(sa.text(f"CREATE INDEX IF NOT EXISTS {name} ON subscribers USING gin ({column})"))
        return True
    if conn.dialect.name != "sqlite":
        return False
    try:
        with conn.begin_nested():
            conn.execute(sa.text(f"CREATE VIRTUAL TABLE {SEARCH_TABLE} USING fts5(email_key, name, "
                                 "tokenize='trigram', columnsize=0)"))  # (no ranking: no sizes to keep)
    except sa.exc.OperationalError:  # (no FTS5, or no trigram tokenizer)
        return False
    row = "(rowid, email_key, name) VALUES (new.rowid, new.email_key, json_extract(new.profile, '$.name'))"
    conn.execute(sa.text(f"CREATE TRIGGER {SEARCH_TABLE}_insert AFTER INSERT ON subscribers BEGIN "
                         f"INSERT INTO {SEARCH_TABLE} {row}; END"))
    conn.execute(sa.text(f"CREATE TRIGGER {SEARCH_TABLE}_delete AFTER DELETE ON subscribers BEGIN "
                         f"DELETE FROM {SEARCH_TABLE} WHERE rowid = old.rowid; END"))
    conn.execute(sa.text(f"CREATE TRIGGER {SEARCH_TABLE}_update AFTER UPDATE ON subscribers BEGIN "
                         f"DELETE FROM {SEARCH_TABLE} WHERE rowid = old.rowid; INSERT INTO {SEARCH_TABLE} {row}; END"))
    conn.execute(sa.text(f"INSERT INTO {SEARCH_TABLE} (rowid, email_key, name) "
                         "SELECT rowid, email_key, json_extract(profile, '$.name') FROM subscribers"))
    return True


def drop_search_indexes(conn: Connection) -> None:
    """Undo `make_search_indexes` (a search then scans the profiles)."""
    if conn.dialect.name == "postgresql":
        for name in SEARCH_INDEXES:
            conn.execute(sa.text(f"DROP INDEX IF EXISTS {name}"))
    elif conn.dialect.name == "sqlite":
        for change in ("insert", "delete", "update"):
            conn.execute(sa.text(f"DROP TRIGGER IF EXISTS {SEARCH_TABLE}_{change}"))
        conn.execute(sa.text(f"DROP TABLE IF EXISTS {SEARCH_TABLE}"))


def _scanned(needle: str, dialect: str) -> Any:
    """Subscribers whose address or name contains `needle` (lower-case), read row by row: one LIKE over the stored
    profile for the name (SQLite's LIKE ignores the case of ASCII letters by itself, PostgreSQL's ILIKE any case;
    lower() over every profile made a scan of a million four times slower)."""
    pattern = name_pattern(needle)
    profile = subscribers.c.profile
    by_name = profile.like(pattern, escape="/") if dialect == "sqlite" else profile.ilike(pattern, escape="/")
    return subscribers.c.email_key.contains(needle, autoescape=True) | by_name


def _indexed(needle: str, dialect: str) -> Any:
    """The same subscribers found through the search indexes (`make_search_indexes`; a needle of three characters
    or more): PostgreSQL's ILIKE over the address and the name the trigram indexes hold, SQLite's FTS5 trigram
    phrase, which is exactly "contains", in any case."""
    if dialect == "postgresql":
        inner = needle.replace("/", "//").replace("%", "/%").replace("_", "/_")
        return ADDRESS.contains(needle, autoescape=True) | NAME.ilike(f"%{inner}%", escape="/")
    return sa.literal_column("subscribers.rowid").in_(_phrase_rows(needle))


def _phrase_rows(needle: str) -> sa.Select[Any]:
    """SQLite: the rowids of the subscribers whose address or name holds `needle`, from the FTS5 trigram table."""
    phrase = '"' + needle.replace('"', '""') + '"'
    return (sa.select(sa.literal_column("rowid")).select_from(sa.table(SEARCH_TABLE))
            .where(sa.literal_column(SEARCH_TABLE).op("MATCH")(phrase)))


def _logged(day: date, *states: str) -> Any:
    """Subscribers (by key) whose digest of `day` is in one of these states: read from the send log's (date, status)
    index, so a filter costs the digests in that state, not a probe of the log for every subscriber."""
    return subscribers.c.email_key.in_(sa.select(sa.func.lower(deliveries.c.subscriber)).where(
        (deliveries.c.digest_date == day) & deliveries.c.status.in_(states)))


def _suppressed(*reasons: str) -> Any:
    """Subscribers suppressed (for a reason starting with one of `reasons`, when given)."""
    query = sa.select(suppressions.c.email)
    if reasons:
        query = query.where(sa.or_(*(suppressions.c.reason.startswith(r) for r in reasons)))
    return subscribers.c.email_key.in_(query)


def _due(day: date) -> Any:
    """Subscribers whose digest of `day` is not sent yet and will be: queued, or no send-log row on a delivery day of
    theirs with no suppression or pause holding it back.

    Each test is a subquery probing one key (not outer joins of the whole list), so in address order the
    database walks the key index and stops at the page's count; with joins PostgreSQL hashed all four tables
    (1.5 s at a million subscribers, 15 ms this way)."""
    logged = sa.select(deliveries.c.subscriber).where((deliveries.c.subscriber == subscribers.c.email)
                                                      & (deliveries.c.digest_date == day))
    own = preferences.c.email == subscribers.c.email_key
    frequency = sa.func.coalesce(sa.select(preferences.c.frequency).where(own).scalar_subquery(),
                                 subscribers.c.frequency)
    waiting = (~logged.exists() & ~_suppressed() & ~subscribers.c.email_key.in_(
        sa.select(preferences.c.email).where(preferences.c.paused_until >= day)) & frequency.in_(due_frequencies(day)))
    return waiting | logged.where(deliveries.c.status.in_(UNSENT)).exists()


def _where(state: str, day: date) -> tuple[Any, Any]:
    """What to join subscribers to, and the condition, for a state of the date."""
    if state in ("sent", "failed"):
        return subscribers, _logged(day, state)
    if state == "bounced":
        return subscribers, _logged(day, "bounced") | _suppressed("bounced")
    if state == "suppressed":
        return subscribers, _suppressed()
    if state == "paused":
        return subscribers, subscribers.c.email_key.in_(sa.select(preferences.c.email).where(
            preferences.c.paused_until >= day))
    if state == "due":  # not sent yet and will be: in the queue, or a delivery day with nothing holding it back
        return subscribers, _due(day)
    return subscribers, sa.true()


class ConsoleStore(Base):
    """The operator console's pages (mixed into Store)."""

    def console_slice(self, day: date, *, search: str = "", state: str = "all", offset: int = 0,
                      limit: int = 50) -> Slice:
        """The addresses (lower-case) of one page of subscribers matching `search` in `state` on `day`, in address
        order, and how many match; for "pending signup", the open signups instead."""
        if state == "pending signup":
            return self._signup_slice(search, offset, limit)
        joined, condition = _where(state, day)
        with self.engine.connect() as conn:
            if search.strip():
                found, many = self._search(conn, search.strip().lower())
                if many and state != "all":  # a filter few match: its addresses first, then the search among them
                    few = conn.execute(sa.select(subscribers.c.email_key).select_from(joined).where(condition)
                                       .limit(FEW_MATCHES)).scalars().all()
                    if len(few) < FEW_MATCHES:
                        joined, condition = subscribers, subscribers.c.email_key.in_(few)
                condition = condition & found
            keys = sa.select(subscribers.c.email_key).select_from(joined).where(condition)
            if state == "all" and not search.strip():  # the whole list: counted exactly (the key index's count)
                total = conn.execute(sa.select(sa.func.count()).select_from(subscribers)).scalar_one()
                page = conn.execute(keys.order_by(subscribers.c.email_key).limit(limit).offset(offset)).scalars()
                return Slice(tuple(page), int(total))
            # the matches up to COUNT_AHEAD past the page's start, in address order: the page and the count from
            # one read that stops there (in key order, a filter as dense as "due" stops after a few thousand)
            cap = offset + COUNT_AHEAD
            capped = keys.order_by(subscribers.c.email_key).limit(cap + 1).subquery()
            rows = conn.execute(sa.select(capped.c.email_key, sa.func.count().over())
                                .order_by(capped.c.email_key).limit(limit).offset(offset)).all()
            if rows:
                counted = int(rows[0][1])
            else:  # (an empty page past the end says no count: counted apart, fewer than `offset`)
                counted = int(conn.execute(sa.select(sa.func.count()).select_from(capped)).scalar_one())
            return Slice(tuple(r[0] for r in rows), min(counted, cap), exact=counted <= cap)

    def _search(self, conn: Connection, needle: str) -> tuple[Any, bool]:
        """Subscribers whose address or name contains `needle`, and whether many may (read in address order).

        Through the search indexes when fewer than `FEW_MATCHES` match (their matches then sorted:
        milliseconds), else read in address order (so many match that a page's worth comes within the first
        rows). Either way alone fails one case: in address order a needle no one matches reads every profile
        (10 s at a million on PostgreSQL), and through the index a needle everyone matches sorts the whole
        list. A filter few match is read first when many may match (`console_slice`): in address order,
        PostgreSQL tested the search on every address before the filter (3.4 s for failed and `reader00`)."""
        dialect = self.engine.dialect.name
        if len(needle) < 3 or not self._search_indexed():
            return _scanned(needle, dialect), True
        found = _indexed(needle, dialect)
        if dialect == "postgresql":  # (its planner walks the key index hoping for early matches: not here)
            conn.execute(sa.text("SET LOCAL enable_indexscan = off"))
            conn.execute(sa.text("SET LOCAL enable_seqscan = off"))
        few = (sa.select(sa.literal(1)).select_from(subscribers).where(found) if dialect == "postgresql" else
               _phrase_rows(needle)).limit(FEW_MATCHES).subquery()  # (SQLite: the search table's rows alone)
        if conn.execute(sa.select(sa.func.count()).select_from(few)).scalar_one() < FEW_MATCHES:
            return found, False
        if dialect == "postgresql":
            conn.execute(sa.text("SET LOCAL enable_indexscan = on"))
            conn.execute(sa.text("SET LOCAL enable_seqscan = on"))
        return _scanned(needle, dialect), True

    def compact_search_index(self) -> None:
        """SQLite: merge the search table's segments, so that a deleted subscriber's letter triples leave its pages
        (a deleted row's stay in the index until its segments merge); after an erasure (`digest forget`). About 2 s
        at a million subscribers. PostgreSQL's indexes drop dead entries when VACUUM runs."""
        if self.engine.dialect.name == "sqlite" and self._search_indexed():
            with self.write() as conn:
                conn.execute(sa.text(f"INSERT INTO {SEARCH_TABLE}({SEARCH_TABLE}) VALUES('optimize')"))

    def _search_indexed(self) -> bool:
        """Whether the store has the search indexes (`make_search_indexes`), asked once."""
        if not hasattr(self, "_indexed"):
            postgresql = self.engine.dialect.name == "postgresql"
            names = list(SEARCH_INDEXES) if postgresql else [SEARCH_TABLE]
            catalogue, column = ("pg_indexes", "indexname") if postgresql else ("sqlite_master", "name")
            with self.engine.connect() as conn:
                found = conn.execute(sa.select(sa.func.count()).select_from(sa.table(catalogue, sa.column(column)))
                                     .where(sa.column(column).in_(names))).scalar_one()
            self._indexed = found == len(names)
        return self._indexed

    def _signup_slice(self, search: str, offset: int, limit: int) -> Slice:
        condition = signups.c.status == "pending"
        if search.strip():
            condition = condition & signups.c.email_key.contains(search.strip().lower(), autoescape=True)
        query = sa.select(signups).where(condition)
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
            rows = conn.execute(query.order_by(signups.c.email_key).limit(limit).offset(offset))
            found = tuple(_signup(row) for row in rows)
        return Slice(tuple(s.email.lower() for s in found), int(total), found)

    def deliveries_among(self, day: date, emails: Sequence[str]) -> list[DeliveryRecord]:
        """The send-log rows of `day` of these addresses (as the subscribers table writes them)."""
        query = sa.select(deliveries).where((deliveries.c.digest_date == day)
                                            & deliveries.c.subscriber.in_(list(emails)))
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def last_sent(self, emails: Sequence[str]) -> dict[str, date]:
        """The date of the newest digest sent to each of these addresses that had one."""
        query = (sa.select(deliveries.c.subscriber, sa.func.max(deliveries.c.digest_date))
                 .where(deliveries.c.subscriber.in_(list(emails)) & (deliveries.c.status == "sent"))
                 .group_by(deliveries.c.subscriber))
        with self.engine.connect() as conn:
            return {r[0]: r[1] for r in conn.execute(query)}

    def deliveries_of(self, email: str, limit: int) -> list[DeliveryRecord]:
        """A subscriber's newest `limit` send-log rows, newest first."""
        query = (sa.select(deliveries).where(deliveries.c.subscriber == email)
                 .order_by(deliveries.c.digest_date.desc()).limit(limit))
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def suppression_of(self, email: str) -> tuple[str, datetime] | None:
        """An address's suppression (reason, since), if it has one under its own address."""
        query = sa.select(suppressions.c.reason, suppressions.c.created_at).where(
            suppressions.c.email == email.lower())
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (row.reason, row.created_at) if row else None

    def count_pending_signups(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(signups).where(
                signups.c.status == "pending")).scalar_one())
