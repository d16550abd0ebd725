"""The queue (the claim columns of `deliveries`, and `workers`): due digests queued, claimed in batches with a lease.

A row of `deliveries` is one digest (subscriber, date). `enqueue_slots` (everyone of some delivery slots) and
`enqueue` (some addresses) add the due ones as `queued` (and
puts back those a previous run left `pending`, `failed` or `empty`); `claim` hands a batch of queued
rows to one worker, atomically: on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so workers never wait
for each other; on SQLite under the write lock that `BEGIN IMMEDIATE` takes. A claim held past its
lease, or by a process of this machine that has died, can be claimed again; its digest goes out with
the same Message-ID. Nothing here reads or writes files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time
from functools import lru_cache
from itertools import islice
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from digest.store.engine import Base
from digest.store.subscribers import _in_slots, _with_preferences, insert_from_select
from digest.store.tables import CHUNK, _now, deliveries, papers, preferences, subscribers, suppressions, workers

KEEP = 10_000  # settled rows listed by name (beyond this, only counted)
REQUEUED = ("pending", "failed", "empty")  # left by an earlier run: a new run tries them again
SETTLED = ("sent", "bounced")  # never sent again


@dataclass(frozen=True)
class Claim:
    """A digest a worker holds: it composes and sends it, then marks it."""

    subscriber: str
    message_id: str
    attempts: int


@dataclass
class Queue:
    """What enqueueing found for the due digests of a run: how many wait, and why the others do not."""

    queued: int = 0  # ready for a worker, new or put back
    sent: int = 0  # already sent on this date
    bounced: int = 0  # bounced on this date
    held: int = 0  # claimed by another worker right now
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (subscriber, why) of those not queued, up to KEEP
    unlisted: int = 0  # skipped beyond KEEP: counted, not named

    def skip(self, rows: Iterable[tuple[str, str]], count: int) -> None:
        """Note `count` skipped subscribers, naming those of `rows` while there is room."""
        named = list(islice(rows, max(0, KEEP - len(self.skipped))))
        self.skipped += named
        self.unlisted += count - len(named)


def settled_reason(status: str, detail: str) -> str:
    return "already sent" if status == "sent" else f"bounced on this date: {detail}"


def insert_ignoring(conn: Connection, table: sa.Table, rows: Sequence[dict[str, object]]) -> None:
    """Insert rows, skipping those whose primary key exists (no error, no race)."""
    if rows:
        conn.execute(_ignoring(conn.dialect.name, table), list(rows))


@lru_cache(maxsize=32)
def _ignoring(dialect: str, table: sa.Table) -> Any:
    return (postgresql if dialect == "postgresql" else sqlite).insert(table).on_conflict_do_nothing()


class QueueStore(Base):
    """The queue of due digests, claims and leases, and each worker's progress (mixed into Store)."""

    def enqueue(self, day: date, emails: Iterable[str], *, message_id: Callable[[str], str],
                transport: str) -> Queue:
        """Queue the digests of `day` for these subscribers; leave alone what is sent, bounced or held."""
        found = Queue()
        with self.engine.connect() as conn:
            changed = conn.execute(sa.select(sa.func.max(papers.c.updated_at))).scalar()
        chunk: list[str] = []
        for email in emails:
            chunk.append(email)
            if len(chunk) == CHUNK:
                self._enqueue(day, chunk, message_id, transport, changed, found)
                chunk = []
        self._enqueue(day, chunk, message_id, transport, changed, found)
        return found

    def _enqueue(self, day: date, emails: list[str], message_id: Callable[[str], str], transport: str,
                 changed: datetime | None, found: Queue) -> None:
        if not emails:
            return
        now = _now()
        mine = (deliveries.c.digest_date == day) & deliveries.c.subscriber.in_(emails)
        # An empty digest is tried again only once new papers have arrived since it was composed.
        stale_empty = (deliveries.c.status == "empty") & (deliveries.c.updated_at < changed) if changed else sa.false()
        with self.write(serial=False) as conn:
            insert_ignoring(conn, deliveries, [
                {"subscriber": e, "digest_date": day, "message_id": message_id(e), "status": "queued", "attempts": 0,
                 "transport": transport, "detail": "", "updated_at": now} for e in emails])
            conn.execute(deliveries.update().where(
                mine & (deliveries.c.status.in_(("pending", "failed")) | stale_empty)).values(
                status="queued", claimed_by=None, lease_until=None, transport=transport))
            counts = Counter(dict(conn.execute(sa.select(deliveries.c.status, sa.func.count()).where(mine)
                                               .group_by(deliveries.c.status)).all()))
            if counts["sent"] or counts["bounced"]:
                query = sa.select(deliveries.c.subscriber, deliveries.c.status, deliveries.c.detail).where(
                    mine & deliveries.c.status.in_(SETTLED))
                found.skip(((r.subscriber, settled_reason(r.status, r.detail)) for r in conn.execute(query)),
                           counts["sent"] + counts["bounced"])
        found.queued += counts["queued"]
        found.sent += counts["sent"]
        found.bounced += counts["bounced"]
        found.held += counts["claimed"]

    def claim(self, day: date, owner: str, *, limit: int, lease_until: datetime, dead: Collection[str] = (),
              only: str | None = None) -> list[Claim]:
        """Take up to `limit` digests of `day` for `owner`: first any whose claim expired or whose owner died,
        then queued ones.

        Each kind is found by the (digest_date, status) index without sorting, so a claim costs the
        same with a hundred digests queued or a million.
        """
        now = _now()
        takeover = deliveries.c.lease_until < now
        if dead:
            takeover = takeover | deliveries.c.claimed_by.in_(list(dead))
        kinds = [(deliveries.c.status == "claimed") & takeover, deliveries.c.status == "queued"]
        claimed: list[Claim] = []
        with self.write(serial=False) as conn:
            for kind in kinds:
                if len(claimed) < limit:
                    claimed += self._claim(conn, day, owner, kind, limit - len(claimed), lease_until, now, only)
        return sorted(claimed, key=lambda c: c.subscriber)

    @staticmethod
    def _claim(conn: Connection, day: date, owner: str, kind: Any, limit: int, lease_until: datetime,
               now: datetime, only: str | None) -> list[Claim]:
        where = (deliveries.c.digest_date == day) & kind
        if only is not None:
            where = where & (deliveries.c.subscriber == only)
        # The batch is chosen once, in a CTE the planner must materialise, and the update finds its rows by primary
        # key. Under `IN (SELECT … LIMIT n)`, PostgreSQL, once its statistics put a new date at about one row,
        # re-ran the limited subquery for every row of the date, so one claim took the whole date;
        # joining on the constant date instead of the batch's own made it scan the whole date for every claim.
        batch = (sa.select(deliveries.c.subscriber, deliveries.c.digest_date).where(where).limit(limit)
                 .with_for_update(skip_locked=True).cte("batch").prefix_with("MATERIALIZED"))
        statement = (deliveries.update()
                     .where((deliveries.c.subscriber == batch.c.subscriber)
                            & (deliveries.c.digest_date == batch.c.digest_date))
                     .values(status="claimed", claimed_by=owner, lease_until=lease_until,
                             attempts=deliveries.c.attempts + 1, updated_at=now)
                     .returning(deliveries.c.subscriber, deliveries.c.message_id, deliveries.c.attempts))
        return [Claim(r.subscriber, r.message_id, r.attempts) for r in conn.execute(statement)]

    def holders(self, day: date | None = None) -> list[str]:
        """The owners of live-looking claims (of one date, or any), to check which have died."""
        query = sa.select(deliveries.c.claimed_by).where(deliveries.c.status == "claimed").distinct()
        if day is not None:
            query = query.where(deliveries.c.digest_date == day)
        with self.engine.connect() as conn:
            return [owner for owner in conn.execute(query).scalars() if owner]

    def queued_dates(self) -> list[date]:
        """Dates with digests waiting for a worker (or held by one), oldest first."""
        query = (sa.select(deliveries.c.digest_date).where(deliveries.c.status.in_(("queued", "claimed")))
                 .distinct().order_by(deliveries.c.digest_date))
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def count_queued(self, day: date) -> int:
        query = sa.select(sa.func.count()).select_from(deliveries).where(
            (deliveries.c.digest_date == day) & (deliveries.c.status == "queued"))
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar_one())

    def renew(self, owner: str, lease_until: datetime) -> set[tuple[str, date]]:
        """Extend the lease of every claim `owner` still holds; returns those claims."""
        statement = (deliveries.update()
                     .where((deliveries.c.claimed_by == owner) & (deliveries.c.status == "claimed"))
                     .values(lease_until=lease_until)
                     .returning(deliveries.c.subscriber, deliveries.c.digest_date))
        with self.write(serial=False) as conn:
            held = {(r.subscriber, r.digest_date) for r in conn.execute(statement)}
            conn.execute(workers.update().where(workers.c.owner == owner).values(heartbeat_at=_now()))
        return held

    def release(self, owner: str, subscribers: Collection[str] | None = None) -> int:
        """Give claims back to the queue unsent (a run told to stop, a transport that went down)."""
        where = (deliveries.c.claimed_by == owner) & (deliveries.c.status == "claimed")
        if subscribers is not None:
            where = where & deliveries.c.subscriber.in_(list(subscribers))
        with self.write(serial=False) as conn:
            result = conn.execute(deliveries.update().where(where).values(
                status="queued", claimed_by=None, lease_until=None, attempts=deliveries.c.attempts - 1))
        return int(result.rowcount)

    # -- workers' progress ---------------------------------------------------------

    def start_worker(self, owner: str, command: str, day: date | None) -> None:
        now = _now()
        with self.write(serial=False) as conn:
            conn.execute(workers.delete().where(workers.c.owner == owner))
            conn.execute(workers.insert().values(owner=owner, command=command, digest_date=day, started_at=now,
                                                 heartbeat_at=now, claimed=0, sent=0, failed=0, deferred=0,
                                                 skipped=0))

    def worker_progress(self, owner: str, *, finished: bool = False, **counts: int) -> None:
        values: dict[str, object] = {"heartbeat_at": _now(), **counts}
        if finished:
            values["finished_at"] = values["heartbeat_at"]
        with self.write(serial=False) as conn:
            conn.execute(workers.update().where(workers.c.owner == owner).values(**values))

    def workers(self, since: datetime) -> list[dict[str, object]]:
        """Workers heard from since `since`, newest first, as plain rows."""
        query = sa.select(workers).where(workers.c.heartbeat_at >= since).order_by(workers.c.started_at.desc())
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def enqueue_slots(self, day: date, slots: Sequence[tuple[str, time, str]], transport: str) -> Queue:
        """Queue the digests of `day` for every subscriber of these slots, in the database.

        Suppressed and paused subscribers are left out, and what is sent, bounced or held by a
        worker is left alone; each of those is counted (and named, up to a bound) as skipped.
        """
        found = Queue()
        if not slots:
            return found
        in_slots = _in_slots(slots)
        suppressed = sa.select(suppressions.c.reason).where(
            suppressions.c.email == subscribers.c.email_key).limit(1).scalar_subquery()
        paused = sa.func.coalesce(preferences.c.paused_until >= day, False)
        due = (sa.select(subscribers.c.email, sa.literal(day, sa.Date), sa.literal("", sa.String),
                         sa.literal("queued", sa.String), sa.literal(0, sa.Integer), sa.literal(transport, sa.String),
                         sa.literal("", sa.Text), sa.literal(_now(), sa.DateTime))
               .select_from(_with_preferences()).where(in_slots & suppressed.is_(None) & ~paused))
        columns = ["subscriber", "digest_date", "message_id", "status", "attempts", "transport", "detail", "updated_at"]
        # The slots' subscribers are listed once (a CTE the planner must materialise) and their digests found by
        # primary key. Under `subscriber IN (SELECT …)`, PostgreSQL, with statistics that put the new date at about
        # one row, ran the list again for every digest of the date: 13 s at 10,000 subscribers.
        of_slots = (sa.select(subscribers.c.email.label("subscriber"), sa.literal(day, sa.Date).label("digest_date"))
                    .select_from(_with_preferences()).where(in_slots).cte("of_slots").prefix_with("MATERIALIZED"))
        mine = (deliveries.c.subscriber == of_slots.c.subscriber) & (deliveries.c.digest_date == of_slots.c.digest_date)
        with self.write(serial=False) as conn:
            insert_from_select(conn, deliveries, columns, due)
            changed = conn.execute(sa.select(sa.func.max(papers.c.updated_at))).scalar()
            again = deliveries.c.status.in_(("pending", "failed"))
            if changed is not None:  # an empty digest is composed again once new papers have arrived
                again = again | ((deliveries.c.status == "empty") & (deliveries.c.updated_at < changed))
            conn.execute(deliveries.update().where(mine & again).values(
                status="queued", claimed_by=None, lease_until=None, transport=transport))
            counts = dict(conn.execute(sa.select(deliveries.c.status, sa.func.count()).where(mine)
                                       .group_by(deliveries.c.status)).all())
            settled = sa.select(deliveries.c.subscriber, deliveries.c.status, deliveries.c.detail).where(
                mine & deliveries.c.status.in_(SETTLED)).limit(KEEP)
            found.skip(((r.subscriber, settled_reason(r.status, r.detail)) for r in conn.execute(settled)),
                       counts.get("sent", 0) + counts.get("bounced", 0))
            # (one whose digest of the day is settled was counted above: suppressed after it went, not skipped twice)
            settled_today = sa.exists().where((deliveries.c.subscriber == subscribers.c.email)
                                              & (deliveries.c.digest_date == day) & deliveries.c.status.in_(SETTLED))
            blocked = (sa.select(subscribers.c.email, suppressed.label("suppressed"), preferences.c.paused_until)
                       .select_from(_with_preferences())
                       .where(in_slots & (suppressed.is_not(None) | paused) & ~settled_today))
            total = conn.execute(sa.select(sa.func.count()).select_from(blocked.subquery())).scalar_one()
            found.skip(((r.email, f"suppressed ({r.suppressed})" if r.suppressed else f"paused until {r.paused_until}")
                        for r in conn.execute(blocked.limit(KEEP))), total)
        found.queued, found.held = counts.get("queued", 0), counts.get("claimed", 0)
        found.sent, found.bounced = counts.get("sent", 0), counts.get("bounced", 0)
        return found

    def emails_in_slots(self, slots: Sequence[tuple[str, time, str]], limit: int) -> tuple[list[str], int]:
        """Up to `limit` addresses of the subscribers of these slots, and how many there are in all."""
        if not slots:
            return [], 0
        query = sa.select(subscribers.c.email).select_from(_with_preferences()).where(_in_slots(slots))
        with self.engine.connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(query.subquery())).scalar_one()
            return list(conn.execute(query.order_by(subscribers.c.email_key).limit(limit)).scalars()), int(total)
