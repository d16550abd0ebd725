"""Bounces (tables `mail_reports`, `bounces`, `webhook_tokens`): reports read from a mailbox or a webhook, what each
said, and the suppressions they call for.

A report is recorded with everything it causes in one transaction, under its key (the report's
Message-ID, else a hash of its bytes), with its evidence (which sent digest it matched and by what,
or why it matched none): reading the same mailbox twice finds every report recorded and changes
nothing. A message that could not be read is recorded too (by the hash of its bytes), so that it is
reported once. A lift of a bounce or complaint, by the operator or by the reader's own Resubscribe,
is kept beside the reports. A webhook signature's one-use token is kept until the signature expires,
so a second request carrying it is known for a replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from digest.store.engine import Base
from digest.store.privacy import forgotten_key, is_hashed
from digest.store.tables import _now, bounces, deliveries, mail_reports, subscribers, suppressions, webhook_tokens

REPLACEABLE = ("unsubscribed",)  # reasons a bounce or complaint overrides
LIFTABLE = ("bounced", "complaint")  # reasons (their first word) the operator may lift: reports made them
LIFTED = "lifted"  # the `bounces.kind` of a lift (the operator's or the reader's); soft bounces before it do not count
REPORTED = "bounce report: "  # how the send-log detail of a sent digest marked bounced by a report begins


@dataclass(frozen=True)
class BounceEvent:
    """What one report says about one of our addresses."""

    email: str  # lower-case, or the forgotten key of an erased address
    kind: str  # hard | soft | complaint
    status: str  # DSN status code (5.1.1), or the complaint's feedback type (abuse)
    detail: str  # the diagnostic, one line
    digest_date: date | None  # the digest the report is about, when it could be told
    reported_at: datetime  # UTC, naive
    evidence: str = ""  # how the report was matched to that digest (said in the suppression's reason)


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

    def sent_digests(self, message_ids: Sequence[str]) -> list[tuple[str, date, str, str]]:
        """(subscriber, digest date, Message-ID, status) of the send-log rows carrying one of these Message-IDs; the
        status is `sent` for a digest the server took (one a report has marked bounced since included), else the
        row's own (queued, pending, failed, bounced at the server: never sent)."""
        if not message_ids:
            return []
        query = sa.select(deliveries.c.subscriber, deliveries.c.digest_date, deliveries.c.message_id,
                          deliveries.c.status, deliveries.c.detail).where(
            deliveries.c.message_id.in_(list(message_ids)))
        with self.engine.connect() as conn:
            return [(r.subscriber, r.digest_date, r.message_id, _sent(r.status, r.detail)) for r in conn.execute(query)]

    def digest_status(self, email: str, day: date) -> str | None:
        """Where `email`'s digest of `day` stands, as `sent_digests` says it; None when the send log has none."""
        query = sa.select(deliveries.c.status, deliveries.c.detail).where(
            (sa.func.lower(deliveries.c.subscriber) == email.strip().lower()) & (deliveries.c.digest_date == day))
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _sent(row.status, row.detail) if row else None

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
        return self._lift(email, LIFTABLE, "operator")

    def resubscribe(self, email: str) -> str | None:
        """The reader's own Resubscribe: lift an unsubscribe, a bounce or a complaint, recording a bounce's or a
        complaint's lift as the reader's (a click in a browser on a link mailed to the address shows it works and
        wants the digest). Returns the reason lifted, or None when there was none (an erasure is nobody's to lift,
        and its page is gone)."""
        return self._lift(email, (*REPLACEABLE, *LIFTABLE), "reader")

    def unsubscribe(self, email: str) -> str:
        """The reader's unsubscribe: suppressed as `unsubscribed`. A bounce suppression becomes one (so that the
        operator's lift, once the address works, does not mail a reader who asked for nothing more); a complaint
        is one already and stays. Returns the reason the address is suppressed for now."""
        key = email.strip().lower()
        with self.write() as conn:
            row = conn.execute(sa.select(suppressions.c.reason).where(
                suppressions.c.email.in_([key, forgotten_key(key)]))).first()
            if row is None:
                conn.execute(suppressions.insert().values(email=key, reason="unsubscribed", created_at=_now()))
                return "unsubscribed"
            if row.reason.partition(":")[0] == "bounced":
                conn.execute(suppressions.update().where(suppressions.c.email == key).values(
                    reason="unsubscribed", created_at=_now()))
                return "unsubscribed"
            return str(row.reason)

    def _lift(self, email: str, reasons: Sequence[str], by: str) -> str | None:
        key, now = email.strip().lower(), _now()
        with self.write() as conn:
            row = conn.execute(sa.select(suppressions.c.reason).where(suppressions.c.email == key)).first()
            if row is None or row.reason.partition(":")[0] not in reasons:
                return None
            conn.execute(suppressions.delete().where(suppressions.c.email == key))
            if row.reason.partition(":")[0] in LIFTABLE:
                conn.execute(bounces.insert().values(report=f"lifted:{now.isoformat()}", email=key, kind=LIFTED,
                                                     status=by, detail=row.reason[:2000], digest_date=None,
                                                     reported_at=now))
            return str(row.reason)

    def record_report(self, key: str, outcome: str, events: Sequence[BounceEvent],
                      soft: SoftPolicy, evidence: str = "") -> list[tuple[str, str]] | None:
        """Record a report, its evidence and what it says, suppressing what it calls for, in one transaction.

        Returns the (address, reason) of each suppression made, or None when the report was recorded
        already (by an earlier read, or another process reading the same mailbox at the same time).
        """
        with self.write() as conn:
            if conn.execute(sa.select(mail_reports.c.key).where(mail_reports.c.key == key)).first():
                return None
            conn.execute(mail_reports.insert().values(key=key, outcome=outcome, processed_at=_now(),
                                                      evidence=evidence[:4000]))
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
                        status="bounced", detail=f"{REPORTED}{event.status} {event.detail}{_said(event)}"[:2000],
                        updated_at=_now()))
            return made

    def report_evidence(self, key: str) -> tuple[str, str] | None:
        """(outcome, evidence) of a recorded report; None when it is not recorded."""
        query = sa.select(mail_reports.c.outcome, mail_reports.c.evidence).where(mail_reports.c.key == key)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return (row.outcome, row.evidence) if row else None

    def take_webhook_token(self, key: str, expires_at: datetime) -> bool:
        """Take a webhook signature's one-use token: True the first time, False while an earlier request holds it
        (a replay). Tokens past their expiry are pruned first (their signatures are refused as stale anyway)."""
        now = _now()
        with self.write() as conn:
            conn.execute(webhook_tokens.delete().where(webhook_tokens.c.expires_at < now))
            if conn.execute(sa.select(webhook_tokens.c.key).where(webhook_tokens.c.key == key)).first():
                return False
            conn.execute(webhook_tokens.insert().values(key=key, expires_at=expires_at))
            return True

    def give_back_webhook_token(self, key: str) -> None:
        """Release a token whose request could not be recorded, so the provider's retry of it is taken."""
        with self.write() as conn:
            conn.execute(webhook_tokens.delete().where(webhook_tokens.c.key == key))

    @staticmethod
    def _reason(conn: Connection, event: BounceEvent, soft: SoftPolicy) -> str | None:
        """Why this event suppresses its address, if it does."""
        when = f"{event.reported_at:%Y-%m-%d}"
        detail = f" ({event.detail})" if event.detail else ""
        if event.kind == "hard":
            return f"bounced: hard bounce {event.status or '(no status)'} on {when}{detail}{_said(event)}"
        if event.kind == "complaint":
            return f"complaint: marked as spam ({event.status} report) on {when}{_said(event)}"
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
                f"on {when}{detail}{_said(event)}")

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


def _said(event: BounceEvent) -> str:
    """The event's evidence, as its suppression's reason ends."""
    return f"; {event.evidence}" if event.evidence else ""


def _sent(status: str, detail: str) -> str:
    """A send-log row's status as a report is matched against it: `sent` once the server took the digest (a report
    marking it bounced since does not undo that), else its own."""
    return "sent" if status == "sent" or (status == "bounced" and detail.startswith(REPORTED)) else status
