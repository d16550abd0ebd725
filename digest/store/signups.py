"""Signups (tables `signups`, `consents`, `rate_limits`): pending signups, their confirmation (the subscriber
made, the consent recorded, in one transaction), and the rate-limit counters every `digest serve` process shares."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from digest.models import LibraryEntry, Subscriber
from digest.store.engine import Base
from digest.store.subscribers import (
    SubscriberStore,
    drop_unused_libraries,
    library_keys_of,
    put_libraries,
    subscriber_of,
    subscriber_row,
)
from digest.store.tables import _now, consents, rate_limits, signups, subscribers, suppressions

KEEP_WINDOWS = 2 * 86400  # rate-limit windows older than this are deleted (the longest window is a day)


@dataclass(frozen=True)
class SignupRecord:
    """One signup as the store keeps it."""

    email: str
    status: str  # pending | held
    nonce: str
    profile: str  # JSON, as the subscribers table keeps profiles
    requested_at: datetime
    form_version: str
    ip_hash: str
    detail: str


@dataclass(frozen=True)
class Confirmation:
    """What following a confirmation link did."""

    outcome: str  # confirmed (a new subscriber) | updated (a web subscriber's profile replaced) | used | void | held
    subscriber: Subscriber | None = None
    holder: str = ""  # for held: the profile file or import that has the address


class SignupStore(Base):
    """Signups, consents and rate limits (mixed into Store)."""

    def hit(self, key: str, period: int, *, now: float | None = None) -> int:
        """Count one hit on `key` in the current window of `period` seconds; the hits of that window so far."""
        now = time.time() if now is None else now
        start = int(now) - int(now) % period
        with self.write(serial=False) as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            upsert = dialect.insert(rate_limits).values(key=key, window_start=start, hits=1)
            upsert = upsert.on_conflict_do_update(index_elements=["key", "window_start"],
                                                  set_={"hits": rate_limits.c.hits + 1})
            hits = int(conn.execute(upsert.returning(rate_limits.c.hits)).scalar_one())
            if hits == 1:  # a new window: the first hit of each clears out old ones
                conn.execute(rate_limits.delete().where(rate_limits.c.window_start < int(now) - KEEP_WINDOWS))
        return hits

    def put_signup(self, record: SignupRecord, *, expired_before: datetime,
                   libraries: Mapping[str, Sequence[LibraryEntry]] | None = None) -> None:
        """Record a signup (replacing the address's earlier open one, whose link is then void) with the entries of
        the libraries its profile names; pending signups asked for before `expired_before` are deleted, and so are
        the libraries only they named."""
        row = {"email_key": record.email.lower(), "email": record.email, "status": record.status,
               "nonce": record.nonce, "profile": record.profile, "requested_at": record.requested_at,
               "form_version": record.form_version, "ip_hash": record.ip_hash, "detail": record.detail}
        with self.write() as conn:
            if libraries:
                put_libraries(conn, dict(libraries))
            gone = (signups.c.email_key == row["email_key"]) | (signups.c.requested_at < expired_before)
            named = library_keys_of(conn, gone, signups)
            conn.execute(signups.delete().where(gone))
            conn.execute(signups.insert().values(**row))
            if named:
                drop_unused_libraries(conn, named)

    def signup(self, email: str) -> SignupRecord | None:
        """The open signup of an address (any case)."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(signups).where(signups.c.email_key == email.lower())).first()
        return _record(row) if row else None

    def held_signups(self, limit: int = 50) -> list[SignupRecord]:
        """Signups for addresses a profile file or an import has, newest first (for the operator)."""
        query = sa.select(signups).where(signups.c.status == "held").order_by(
            signups.c.requested_at.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [_record(row) for row in conn.execute(query)]

    def consents_of(self, email: str) -> list[dict[str, Any]]:
        """Every consent recorded for an address, oldest first."""
        query = sa.select(consents).where(consents.c.email_key == email.lower()).order_by(consents.c.confirmed_at)
        with self.engine.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def confirm_signup(self, email: str, nonce: str, confirm_ip_hash: str) -> Confirmation:
        """Follow a confirmation link, in one transaction: the pending signup it names becomes a web subscriber
        (replacing a web subscriber's profile, never a profile file's or an import's), its consent is recorded,
        and an unsubscribe of the address is lifted. A link already followed is `used`; one replaced by a newer
        signup, or whose signup was deleted, is `void`. Of two confirmations at once, one wins."""
        key = email.lower()
        with self.write() as conn:
            row = conn.execute(sa.select(signups).where(
                (signups.c.email_key == key) & (signups.c.nonce == nonce) & (signups.c.status == "pending"))).first()
            if row is None:
                used = conn.execute(sa.select(consents.c.nonce).where(consents.c.nonce == nonce)).first()
                return Confirmation("used" if used else "void")
            owner = conn.execute(sa.select(subscribers.c.source, subscribers.c.path).where(
                subscribers.c.email_key == key)).first()
            if owner is not None and owner.source != "web":  # came after the signup: the operator's word wins
                holder = f"the profile file {owner.path}" if owner.source == "file" else "an imported subscriber"
                conn.execute(signups.update().where(signups.c.email_key == key).values(status="held", detail=holder))
                return Confirmation("held", holder=holder)
            conn.execute(signups.delete().where(signups.c.email_key == key))
            conn.execute(consents.insert().values(
                nonce=nonce, email_key=key, requested_at=row.requested_at, confirmed_at=_now(),
                form_version=row.form_version, ip_hash=row.ip_hash, confirm_ip_hash=confirm_ip_hash))
            subscriber = subscriber_of(row.profile, None)
            _put_web(conn, subscriber)
            conn.execute(suppressions.delete().where(
                (suppressions.c.email == key) & (suppressions.c.reason == "unsubscribed")))
        return Confirmation("updated" if owner is not None else "confirmed", subscriber)


def _put_web(conn: Connection, subscriber: Subscriber) -> None:
    conn.execute(subscribers.delete().where(subscribers.c.email_key == subscriber.email.lower()))
    SubscriberStore._put(conn, [subscriber_row(subscriber, "web", None)])


def _record(row: Any) -> SignupRecord:
    return SignupRecord(email=row.email, status=row.status, nonce=row.nonce, profile=row.profile,
                        requested_at=row.requested_at, form_version=row.form_version, ip_hash=row.ip_hash,
                        detail=row.detail)


def expiry(hours: int) -> datetime:
    """The request time before which a pending signup's link has expired."""
    return _now() - timedelta(hours=hours)
