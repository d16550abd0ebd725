"""The send log (tables `deliveries`, `received`, `suppressions`): how each digest ended (sent, bounced, failed,
empty), the papers each subscriber received, and the addresses never to be mailed."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa

from digest.models import Paper
from digest.store.engine import Base, begin_immediate
from digest.store.privacy import forgotten_key
from digest.store.records import DeliveryRecord
from digest.store.tables import _chunks, _from_row, _now, _record, deliveries, papers, received, suppressions

_SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy stores a DateTime in SQLite
_SENT_UPDATE = ("UPDATE deliveries SET status = 'sent', detail = '', claimed_by = NULL, lease_until = NULL, "
                "message_id = CASE WHEN {p} = '' THEN message_id ELSE {p} END, updated_at = {p} "
                "WHERE subscriber = {p} AND digest_date = {p}")
_OWNED = " AND claimed_by = {p}"
_SENT_SQL = {  # the statements of `mark_sent`, in each driver's parameter style
    "sqlite": {"any": _SENT_UPDATE.format(p="?"), "owned": (_SENT_UPDATE + _OWNED).format(p="?"),
               "received": "INSERT INTO received (subscriber, paper_id, digest_date) VALUES (?, ?, ?) "
                           "ON CONFLICT DO NOTHING"},
    # PostgreSQL: one statement, one round trip (the papers as an array); it returns how many rows the claim held
    "postgresql": {kind: "WITH u AS (" + update.format(p="%s") + " RETURNING 1), r AS (INSERT INTO received "
                   "(subscriber, paper_id, digest_date) SELECT %s, unnest(%s::int[]), %s ON CONFLICT DO NOTHING) "
                   "SELECT count(*) FROM u"
                   for kind, update in (("any", _SENT_UPDATE), ("owned", _SENT_UPDATE + _OWNED))},
}


class SendLogStore(Base):
    """The outcomes of `deliveries`, and the `received` and `suppressions` tables (mixed into Store)."""


    # -- history, send log, suppressions ---------------------------------------

    def received_before(self, subscriber: str, day: date, since: date | None = None) -> set[int]:
        """Ids of papers this subscriber got in digests dated before `day` (and on or after `since`)."""
        return self.received_by_subscriber(day, [subscriber], since).get(subscriber, set())

    def received_by_subscriber(self, day: date, subscribers: Sequence[str] | None = None,
                               since: date | None = None) -> dict[str, set[int]]:
        """Ids of papers received in digests dated before `day` (from `since`), for these subscribers or all."""
        out: dict[str, set[int]] = {}
        with self.engine.connect() as conn:
            # one row a subscriber, their ids joined by the database: a week's window is ~70 ids a reader, and
            # reading them a row each cost more than the query
            ids = sa.cast(received.c.paper_id, sa.String)
            joined = (sa.func.string_agg(ids, ",") if conn.dialect.name == "postgresql"
                      else sa.func.group_concat(ids, ","))
            query = sa.select(received.c.subscriber, joined).where(received.c.digest_date < day)
            if since is not None:
                query = query.where(received.c.digest_date >= since)
            for part in _chunks(subscribers):
                chosen = query if part is None else query.where(received.c.subscriber.in_(part))
                for subscriber, found in conn.execute(chosen.group_by(received.c.subscriber)):
                    out[subscriber] = {int(i) for i in found.split(",")}
        return out

    def delivery(self, subscriber: str, day: date) -> DeliveryRecord | None:
        query = sa.select(deliveries).where(deliveries.c.subscriber == subscriber,
                                            deliveries.c.digest_date == day)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _record(row) if row else None

    def deliveries_on(self, day: date) -> list[DeliveryRecord]:
        query = sa.select(deliveries).where(deliveries.c.digest_date == day).order_by(deliveries.c.subscriber)
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def deliveries_in(self, day: date, states: Sequence[str], limit: int) -> list[DeliveryRecord]:
        """Up to `limit` digests of `day` in these states, by subscriber."""
        query = (sa.select(deliveries).where((deliveries.c.digest_date == day) & deliveries.c.status.in_(states))
                 .order_by(deliveries.c.subscriber).limit(limit))
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def received_lately(self, subscriber: str, digests: int, limit: int) -> list[tuple[date, Paper]]:
        """The papers of this subscriber's last `digests` digests as the send log recorded them (a paper received
        before is recorded on its first day only), each with its digest's date: newest digest first, at most
        `limit`. One query, on the `received` index (a reader's feed reads this on every poll)."""
        mine = received.c.subscriber == subscriber
        days = (sa.select(received.c.digest_date).where(mine).distinct()
                .order_by(received.c.digest_date.desc()).limit(digests))
        query = (sa.select(received.c.digest_date.label("digest_day"), papers)
                 .join(papers, papers.c.id == received.c.paper_id)
                 .where(mine & received.c.digest_date.in_(days.scalar_subquery()))
                 .order_by(received.c.digest_date.desc(), received.c.paper_id).limit(limit))
        with self.engine.connect() as conn:
            return [(row.digest_day, _from_row(row)) for row in conn.execute(query)]

    def past_digests(self, subscriber: str, limit: int) -> list[tuple[date, int]]:
        """The days of this subscriber's last `limit` digests that went out, newest first, each with how many
        papers the send log recorded for it (one query)."""
        day = deliveries.c.digest_date
        # (an outer join: a digest whose papers were all received before still counts, with 0)
        query = (sa.select(day, sa.func.count(received.c.paper_id))
                 .select_from(deliveries.outerjoin(received, (received.c.subscriber == deliveries.c.subscriber)
                                                   & (received.c.digest_date == day)))
                 .where((deliveries.c.subscriber == subscriber) & (deliveries.c.status == "sent"))
                 .group_by(day).order_by(day.desc()).limit(limit))
        with self.engine.connect() as conn:
            return [(row[0], int(row[1])) for row in conn.execute(query)]

    def count_suppressed(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(suppressions)).scalar_one())

    def delivery_counts(self, day: date) -> dict[str, int]:
        """How many digests of `day` are in each state."""
        query = (sa.select(deliveries.c.status, sa.func.count()).where(deliveries.c.digest_date == day)
                 .group_by(deliveries.c.status))
        with self.engine.connect() as conn:
            return {status: int(n) for status, n in conn.execute(query)}

    @staticmethod
    def _held(subscriber: str, day: date, owner: str | None) -> Any:
        key = (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
        return key if owner is None else key & (deliveries.c.claimed_by == owner)

    def mark_sent(self, subscriber: str, day: date, paper_ids: Sequence[int], owner: str | None = None,
                  message_id: str = "") -> bool:
        """Record a handed-over digest (and its Message-ID) and the papers it carried, in one transaction.

        With `owner`, only while that worker still holds the claim; False when it no longer did (the
        papers are recorded all the same: the subscriber has them). This is the one write per digest
        sent, so it goes straight to the driver with statements written once (`_SENT_SQL`): through
        SQLAlchemy's statement machinery it cost more than composing the digest.
        """
        dialect = self.engine.dialect.name
        postgres = dialect == "postgresql"
        sql = _SENT_SQL["postgresql" if postgres else "sqlite"]
        at, when = (day, _now()) if postgres else (day.isoformat(), _now().strftime(_SQLITE_TIME))
        key = (message_id, message_id, when, subscriber, at) + ((owner,) if owner is not None else ())
        kind = "owned" if owner is not None else "any"
        unique = list(dict.fromkeys(paper_ids))  # a paper received before keeps its first date
        raw = self._marks_connection()
        try:
            cursor = raw.cursor()
            if postgres:  # one statement, committed on its own (autocommit): one round trip
                cursor.execute(sql[kind], (*key, subscriber, unique, at))
                held = cursor.fetchone()[0]
            else:
                begin_immediate(cursor)
                cursor.execute(sql[kind], key)
                held = cursor.rowcount
                if unique:
                    cursor.executemany(sql["received"], [(subscriber, paper_id, at) for paper_id in unique])
                raw.commit()  # sqlite3 commits the transaction BEGIN opened (it checks the handle, not its mode)
        except BaseException:
            self._drop_marks_connection()
            raise
        return bool(held)

    def _marks_connection(self) -> Any:
        """The driver connection `mark_sent` keeps, one per process and thread: a pool checkout and return
        per digest cost a third of the mark. Never one inherited from the process that forked this one.

        It is taken out of the pool for good (closed, not returned, when released), so that on PostgreSQL it
        can be set up for marks alone: autocommit, so that the mark's one statement is its transaction
        (no BEGIN and COMMIT round trips), and, unless `store.durable_sends`, `synchronous_commit = off`
        for this session (a killed process still loses nothing: see the setting)."""
        held = self.__dict__.setdefault("_marks", {})
        key = (os.getpid(), threading.get_ident())
        if key not in held:
            conn = self.engine.raw_connection()
            if self.engine.dialect.name == "postgresql":
                conn.driver_connection.autocommit = True
                if not self.durable_sends:
                    conn.cursor().execute("SET synchronous_commit = off")
            else:  # `begin_immediate` waits for the write lock itself, in steps finer than SQLite's
                conn.cursor().execute("PRAGMA busy_timeout = 0")
            conn.detach()
            held[key] = conn
        return held[key]

    def _drop_marks_connection(self) -> None:
        """After a failed mark: this thread's connection rolled back and closed (the next mark opens another)."""
        conn = self.__dict__.get("_marks", {}).pop((os.getpid(), threading.get_ident()), None)
        if conn is not None:
            _discard(conn)

    def release_marks_connections(self) -> None:
        """Give back every connection `mark_sent` keeps in this process. One inherited from a parent process
        is only forgotten: closing it would close the parent's."""
        for (pid, _thread), conn in self.__dict__.pop("_marks", {}).items():
            if pid == os.getpid():
                _discard(conn)

    def mark_failed(self, subscriber: str, day: date, detail: str, owner: str | None = None) -> None:
        with self.write(serial=False) as conn:
            conn.execute(deliveries.update().where(self._held(subscriber, day, owner)).values(
                status="failed", detail=detail[:2000], claimed_by=None, lease_until=None, updated_at=_now()))

    def mark_empty(self, subscriber: str, day: date, detail: str, owner: str | None = None) -> None:
        """Nothing to send today (yet): a later run composes it again once new papers arrive."""
        with self.write(serial=False) as conn:
            conn.execute(deliveries.update().where(self._held(subscriber, day, owner)).values(
                status="empty", detail=detail[:2000], claimed_by=None, lease_until=None,
                attempts=deliveries.c.attempts - 1, updated_at=_now()))

    def note_temporary(self, subscriber: str, day: date, detail: str, *, retrying: bool,
                       owner: str | None = None) -> None:
        """A temporary failure: retried now (the claim kept, the attempt counted) or left pending for the next run."""
        values: dict[str, Any] = {"detail": detail[:2000], "updated_at": _now()}
        if retrying:
            values["attempts"] = deliveries.c.attempts + 1
        else:
            values.update(status="pending", claimed_by=None, lease_until=None)
        with self.write(serial=False) as conn:
            conn.execute(deliveries.update().where(self._held(subscriber, day, owner)).values(**values))

    def mark_bounced(self, subscriber: str, day: date, detail: str, suppress_after: int,
                     owner: str | None = None) -> bool:
        """Record a hard bounce; suppress the address once it has bounced `suppress_after` digests in a row.

        In a row means since the last digest it accepted. One transaction, so the bounce and the
        suppression it causes are never half-recorded. True when this bounce suppressed the address.
        """
        mine = deliveries.c.subscriber == subscriber
        with self.write() as conn:
            conn.execute(deliveries.update().where(self._held(subscriber, day, owner)).values(
                status="bounced", detail=detail[:2000], claimed_by=None, lease_until=None, updated_at=_now()))
            last_sent = conn.execute(sa.select(sa.func.max(deliveries.c.digest_date)).where(
                mine & (deliveries.c.status == "sent"))).scalar()
            since = (deliveries.c.digest_date > last_sent) if last_sent else sa.true()
            bounces = conn.execute(sa.select(sa.func.count()).select_from(deliveries).where(
                mine & (deliveries.c.status == "bounced") & since)).scalar_one()
            known = conn.execute(sa.select(suppressions.c.email).where(
                suppressions.c.email == subscriber.lower())).first()
            if bounces < suppress_after or known:
                return False
            conn.execute(suppressions.insert().values(email=subscriber.lower(), reason=f"bounced: {detail}"[:2000],
                                                      created_at=_now()))
            return True

    def suppress(self, email: str, reason: str) -> None:
        """Suppress an address (unless it is already, or was erased: its hash suppresses it)."""
        with self.write() as conn:
            key = email.lower()  # addresses are kept lower-case here, so lookups use the key's index
            keys = [key, forgotten_key(key)]
            if not conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email.in_(keys))).first():
                conn.execute(suppressions.insert().values(email=key, reason=reason, created_at=_now()))

    def suppressed_among(self, emails: Sequence[str]) -> dict[str, str]:
        """Of these addresses, the suppressed ones (lower-case) with the reason; an erased one by its hash."""
        out: dict[str, str] = {}
        with self.engine.connect() as conn:
            for part in _chunks([e.lower() for e in emails]):
                hashed = {forgotten_key(e): e for e in part or ()}
                query = sa.select(suppressions).where(suppressions.c.email.in_([*(part or ()), *hashed]))
                out.update({hashed.get(r.email, r.email).lower(): r.reason for r in conn.execute(query)})
        return out

    def suppression_records(self, limit: int | None = None) -> list[tuple[str, str, datetime]]:
        """(address or forgotten hash, reason, since) of every suppression, newest first."""
        query = sa.select(suppressions).order_by(suppressions.c.created_at.desc(), suppressions.c.email)
        with self.engine.connect() as conn:
            rows = conn.execute(query if limit is None else query.limit(limit))
            return [(r.email, r.reason, r.created_at) for r in rows]

    def suppressed(self) -> dict[str, str]:
        """Suppressed addresses (unsubscribed, bounced) with the reason."""
        with self.engine.connect() as conn:
            return {r.email: r.reason for r in conn.execute(sa.select(suppressions))}

    def unsuppress(self, email: str, reason: str) -> bool:
        """Lift a suppression made for `reason` (a resubscribe never lifts a bounce); True if one was."""
        with self.write() as conn:
            result = conn.execute(suppressions.delete().where(
                (suppressions.c.email == email.lower()) & (suppressions.c.reason == reason)))
            return bool(result.rowcount)


def _discard(conn: Any) -> None:
    """Close a marks connection (an open transaction is rolled back with it) without the pool's own rollback:
    on a connection PostgreSQL dropped (a restart) that rollback fails and the pool logs its traceback."""
    driver = conn.dbapi_connection  # (a detached connection has no `driver_connection`: its record is gone)
    with contextlib.suppress(Exception):  # a broken connection: the mark's own error is the one to tell
        driver.rollback()  # (SQLite: the write lock goes now, not when the connection object is collected)
    with contextlib.suppress(Exception):
        driver.close()
    conn.invalidate()
