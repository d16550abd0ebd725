"""The send log, the papers each subscriber received, suppressions and subscribers' preferences."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .records import DeliveryRecord, Preference
from .tables import _now, _record, deliveries, preferences, received, suppressions


class SendLogStore:
    """The send log, received papers, suppressions and preferences (mixed into Store)."""

    engine: Engine

    # -- history, send log, suppressions ---------------------------------------

    def received_before(self, subscriber: str, day: date) -> set[int]:
        """Ids of papers this subscriber got in digests dated before `day`."""
        query = sa.select(received.c.paper_id).where(
            received.c.subscriber == subscriber, received.c.digest_date < day)
        with self.engine.connect() as conn:
            return set(conn.execute(query).scalars())

    def received_by_subscriber(self, day: date) -> dict[str, set[int]]:
        """For every subscriber at once, the ids of papers received in digests dated before `day`."""
        query = sa.select(received.c.subscriber, received.c.paper_id).where(received.c.digest_date < day)
        out: dict[str, set[int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                out.setdefault(row.subscriber, set()).add(row.paper_id)
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

    def mark_pending(self, subscriber: str, day: date, message_id: str, transport: str) -> None:
        """Record, before handing over, that this digest is about to be sent (committed at once)."""
        with self.engine.begin() as conn:
            key = (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            if conn.execute(sa.select(deliveries.c.status).where(key)).first():
                conn.execute(deliveries.update().where(key).values(
                    status="pending", attempts=deliveries.c.attempts + 1, updated_at=_now()))
            else:
                conn.execute(deliveries.insert().values(
                    subscriber=subscriber, digest_date=day, message_id=message_id, status="pending",
                    attempts=1, transport=transport, detail="", updated_at=_now()))

    def mark_sent(self, subscriber: str, day: date, paper_ids: Sequence[int]) -> None:
        """Record a handed-over digest and the papers it carried, in one transaction."""
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(
                (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            ).values(status="sent", detail="", updated_at=_now()))
            # One read and one batch insert rather than two statements per paper: this runs per digest.
            have = set(conn.execute(sa.select(received.c.paper_id).where(received.c.subscriber == subscriber))
                       .scalars())
            rows = [{"subscriber": subscriber, "paper_id": paper_id, "digest_date": day}
                    for paper_id in dict.fromkeys(paper_ids) if paper_id not in have]
            if rows:
                conn.execute(received.insert(), rows)

    def mark_failed(self, subscriber: str, day: date, detail: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(
                (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
            ).values(status="failed", detail=detail[:2000], updated_at=_now()))

    def note_temporary(self, subscriber: str, day: date, detail: str, *, retrying: bool) -> None:
        """Keep a digest pending with the server's reply; `retrying` counts the attempt about to follow."""
        key = (deliveries.c.subscriber == subscriber) & (deliveries.c.digest_date == day)
        attempts = deliveries.c.attempts + (1 if retrying else 0)
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(key).values(
                status="pending", attempts=attempts, detail=detail[:2000], updated_at=_now()))

    def mark_bounced(self, subscriber: str, day: date, detail: str, suppress_after: int) -> bool:
        """Record a hard bounce; suppress the address once it has bounced `suppress_after` digests in a row.

        In a row means since the last digest it accepted. One transaction, so the bounce and the
        suppression it causes are never half-recorded. True when this bounce suppressed the address.
        """
        mine = deliveries.c.subscriber == subscriber
        with self.engine.begin() as conn:
            conn.execute(deliveries.update().where(mine & (deliveries.c.digest_date == day)).values(
                status="bounced", detail=detail[:2000], updated_at=_now()))
            last_sent = conn.execute(sa.select(sa.func.max(deliveries.c.digest_date)).where(
                mine & (deliveries.c.status == "sent"))).scalar()
            since = (deliveries.c.digest_date > last_sent) if last_sent else sa.true()
            bounces = conn.execute(sa.select(sa.func.count()).select_from(deliveries).where(
                mine & (deliveries.c.status == "bounced") & since)).scalar_one()
            known = conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email == subscriber)).first()
            if bounces < suppress_after or known:
                return False
            conn.execute(suppressions.insert().values(email=subscriber, reason=f"bounced: {detail}"[:2000],
                                                      created_at=_now()))
            return True

    def suppress(self, email: str, reason: str) -> None:
        with self.engine.begin() as conn:
            if not conn.execute(sa.select(suppressions.c.email).where(suppressions.c.email == email)).first():
                conn.execute(suppressions.insert().values(email=email, reason=reason, created_at=_now()))

    def suppressed(self) -> dict[str, str]:
        """Suppressed addresses (unsubscribed, bounced) with the reason."""
        with self.engine.connect() as conn:
            return {r.email: r.reason for r in conn.execute(sa.select(suppressions))}

    def unsuppress(self, email: str, reason: str) -> bool:
        """Lift a suppression made for `reason` (a resubscribe never lifts a bounce); True if one was."""
        with self.engine.begin() as conn:
            result = conn.execute(suppressions.delete().where(
                (sa.func.lower(suppressions.c.email) == email.lower()) & (suppressions.c.reason == reason)))
            return bool(result.rowcount)

    # -- preferences -------------------------------------------------------------------

    def preference(self, email: str) -> Preference | None:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(preferences).where(preferences.c.email == email.lower())).first()
        return Preference(row.email, row.frequency, row.paused_until) if row else None

    def preferences(self) -> dict[str, Preference]:
        """Every subscriber's preferences, by lower-case address."""
        with self.engine.connect() as conn:
            return {r.email: Preference(r.email, r.frequency, r.paused_until)
                    for r in conn.execute(sa.select(preferences))}

    _UNSET: Any = object()

    def set_preference(self, email: str, *, frequency: Any = _UNSET, paused_until: Any = _UNSET) -> None:
        """Change the given fields of a subscriber's preferences (None clears one)."""
        changes = {k: v for k, v in (("frequency", frequency), ("paused_until", paused_until))
                   if v is not SendLogStore._UNSET}
        key = email.lower()
        with self.engine.begin() as conn:
            if conn.execute(sa.select(preferences.c.email).where(preferences.c.email == key)).first():
                conn.execute(preferences.update().where(preferences.c.email == key).values(
                    updated_at=_now(), **changes))
            else:
                conn.execute(preferences.insert().values(email=key, updated_at=_now(), **changes))
