"""Bounces (tables `mail_reports`, `bounces`): reports read from a mailbox or a webhook, what each said, and the
suppressions they call for.

A report is recorded with everything it causes in one transaction, under its key (the report's
Message-ID, else a hash of its bytes): reading the same mailbox twice finds every report recorded
and changes nothing. A message that could not be read is recorded too (by the hash of its bytes), so
that it is reported once. An operator's lift of a bounce or complaint is kept beside the reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from digest.store.engine import Base
from digest.store.privacy import forgotten_key, is_hashed
from digest.store.tables import _now, bounces, deliveries, mail_reports, subscribers, suppressions

REPLACEABLE = ("unsubscribed",)  # reasons a bounce or complaint overrides: a resubscribe must not lift those
LIFTABLE = ("bounced", "complaint")  # reasons (their first word) the operator may lift: reports made them
LIFTED = "lifted"  # the `bounces.kind` of an operator's lift; soft bounces before it no longer count


@dataclass(frozen=True)
class BounceEvent:
    """What one report says about one of our addresses."""

    email: str  # lower-case, or the forgotten key of an erased address
    kind: str  # hard | soft | complaint
    status: str  # DSN status code (5.1.1), or the complaint's feedback type (abuse)
    detail: str  # the diagnostic, one line
    digest_date: date | None  # the digest the report is about, when it could be told
    reported_at: datetime  # UTC, naive


@dataclass(frozen=True)
class SoftPolicy:
    """Soft bounces suppress an address once `limit` digests soft-bounced within `window`."""

    limit: int = 3
    window: timedelta = timedelta(days=14)


class BounceStore(Base):
    """Reports, bounces and complaints (mixed into Store)."""

    def seen_reports(self, keys: Sequence[str]) -> set[str]:
        """Which of these report keys were recorded already."""
        found: set[str] = set()
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):
                query = sa.select(mail_reports.c.key).where(mail_reports.c.key.in_(keys[start:start + 500]))
                found.update(conn.execute(query).scalars())
        return found

    def sent_digests(self, message_ids: Sequence[str]) -> list[tuple[str, date, str]]:
        """(subscriber, digest date, Message-ID) of the send-log rows carrying one of these Message-IDs."""
        if not message_ids:
            return []
        query = sa.select(deliveries.c.subscriber, deliveries.c.digest_date, deliveries.c.message_id).where(
            deliveries.c.message_id.in_(list(message_ids)))
        with self.engine.connect() as conn:
            return [(r.subscriber, r.digest_date, r.message_id) for r in conn.execute(query)]

    def subscribed_among(self, emails: Sequence[str]) -> set[str]:
        """Which of these addresses (lower-case) are subscribers'."""
        keys = list({e.strip().lower() for e in emails})
        with self.engine.connect() as conn:
            return set(conn.execute(sa.select(subscribers.c.email_key).where(subscribers.c.email_key.in_(keys)))
                       .scalars())

    def lift_suppression(self, email: str) -> str | None:
        """Lift a bounce or complaint suppression (the operator checked the address) and record the lift.

        Returns the reason lifted, or None when the address has no suppression of those kinds (an
        unsubscribe is the reader's to undo, an erasure nobody's).
        """
        key, now = email.strip().lower(), _now()
        with self.write() as conn:
            row = conn.execute(sa.select(suppressions.c.reason).where(suppressions.c.email == key)).first()
            if row is None or row.reason.partition(":")[0] not in LIFTABLE:
                return None
            conn.execute(suppressions.delete().where(suppressions.c.email == key))
            conn.execute(bounces.insert().values(report=f"lifted:{now.isoformat()}", email=key, kind=LIFTED,
                                                 status="operator", detail=row.reason[:2000], digest_date=None,
                                                 reported_at=now))
            return str(row.reason)

    def record_report(self, key: str, outcome: str, events: Sequence[BounceEvent],
                      soft: SoftPolicy) -> list[tuple[str, str]] | None:
        """Record a report and what it says, suppressing what it calls for, in one transaction.

        Returns the (address, reason) of each suppression made, or None when the report was recorded
        already (by an earlier read, or another process reading the same mailbox at the same time).
        """
        with self.write() as conn:
            if conn.execute(sa.select(mail_reports.c.key).where(mail_reports.c.key == key)).first():
                return None
            conn.execute(mail_reports.insert().values(key=key, outcome=outcome, processed_at=_now()))
            made = []
            for event in events:
                conn.execute(bounces.insert().values(report=key, email=event.email, kind=event.kind,
                                                     status=event.status, detail=event.detail[:2000],
                                                     digest_date=event.digest_date, reported_at=event.reported_at))
                reason = self._reason(conn, event, soft)
                if reason and self._suppress(conn, event.email, reason):
                    made.append((event.email, reason))
                if event.kind == "hard" and event.digest_date is not None:
                    conn.execute(deliveries.update().where(
                        (sa.func.lower(deliveries.c.subscriber) == event.email)
                        & (deliveries.c.digest_date == event.digest_date) & (deliveries.c.status == "sent")).values(
                        status="bounced", detail=f"bounce report: {event.status} {event.detail}"[:2000],
                        updated_at=_now()))
            return made

    @staticmethod
    def _reason(conn: Connection, event: BounceEvent, soft: SoftPolicy) -> str | None:
        """Why this event suppresses its address, if it does."""
        when = f"{event.reported_at:%Y-%m-%d}"
        detail = f" ({event.detail})" if event.detail else ""
        if event.kind == "hard":
            return f"bounced: hard bounce {event.status or '(no status)'} on {when}{detail}"
        if event.kind == "complaint":
            return f"complaint: marked as spam ({event.status} report) on {when}"
        since = event.reported_at - soft.window
        lifted = conn.execute(sa.select(sa.func.max(bounces.c.reported_at)).where(
            (bounces.c.email == event.email) & (bounces.c.kind == LIFTED))).scalar()
        if lifted is not None and lifted > since:  # the operator lifted a suppression: count from there on
            since = lifted
        rows = conn.execute(sa.select(bounces.c.report, bounces.c.digest_date).where(
            (bounces.c.email == event.email) & (bounces.c.kind == "soft")
            & (bounces.c.reported_at > since) & (bounces.c.reported_at <= event.reported_at))).all()
        digests = {row.digest_date or row.report for row in rows}  # several delay notices of one digest count once
        if len(digests) < soft.limit:
            return None
        days = soft.window.days
        return (f"bounced: {len(digests)} soft bounces in {days} days, the last {event.status or '(no status)'} "
                f"on {when}{detail}")

    @staticmethod
    def _suppress(conn: Connection, email: str, reason: str) -> bool:
        """Suppress (or make a plain unsubscribe a bounce or complaint); False when already suppressed so."""
        if is_hashed(email):
            return False  # erased: its hash is on the list already
        keys = [email, forgotten_key(email)]
        row = conn.execute(sa.select(suppressions.c.email, suppressions.c.reason).where(
            suppressions.c.email.in_(keys))).first()
        if row is None:
            conn.execute(suppressions.insert().values(email=email, reason=reason, created_at=_now()))
            return True
        if row.reason in REPLACEABLE:
            conn.execute(suppressions.update().where(suppressions.c.email == email).values(
                reason=reason, created_at=_now()))
            return True
        return False

    def soft_bounce_counts(self, since: datetime) -> dict[str, int]:
        """Digests that soft-bounced since then (and since the operator's last lift), by address (`digest status`)."""
        query = (sa.select(bounces.c.email, bounces.c.report, bounces.c.digest_date, bounces.c.reported_at)
                 .where((bounces.c.kind == "soft") & (bounces.c.reported_at > since)))
        lifts = (sa.select(bounces.c.email, sa.func.max(bounces.c.reported_at))
                 .where((bounces.c.kind == LIFTED) & (bounces.c.reported_at > since)).group_by(bounces.c.email))
        seen: dict[str, set[object]] = {}
        with self.engine.connect() as conn:
            lifted = dict(conn.execute(lifts).all())
            for row in conn.execute(query):
                if row.email not in lifted or row.reported_at > lifted[row.email]:
                    seen.setdefault(row.email, set()).add(row.digest_date or row.report)
        return {email: len(found) for email, found in seen.items()}
