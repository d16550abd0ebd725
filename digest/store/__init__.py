"""All database I/O (SQLAlchemy Core): one repository per concern, each owning its tables, held by one `Store`.

    papers       PaperStore       papers, upvotes            ingest with merging, the day's candidates, lookups
    subscribers  SubscriberStore  subscribers, profile_files, preferences
    queue        QueueStore       deliveries (claims), workers   what is due, who holds it
    sendlog      SendLogStore     deliveries (outcomes), received, suppressions
    feedback     FeedbackStore    feedback, libraries
    caches       CacheStore       cache, embeddings          what the selector computes once (all of it can go)
    bounces      BounceStore      mail_reports, bounces
    signups      SignupStore      signups, consents, rate_limits
    runs         RunStore         fetches, runs, locks
    privacy      PrivacyStore     (every table: one address's data, exported or erased)
    metrics      MetricsStore     (reads for /metrics)
    console      ConsoleStore     (reads for the operator console)

`Store` itself keeps `meta` (the link-signing key, first days). The schema and row helpers are in
`tables`, the records handed out in `records`, opening the database in `engine`, migrations in `schema`.
"""

from __future__ import annotations

import secrets
from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from digest.errors import StoreError
from digest.store import schema
from digest.store.bounces import BounceEvent, BounceStore, SoftPolicy
from digest.store.caches import CacheStore
from digest.store.console import ConsoleStore
from digest.store.engine import explain, make_engine, shown
from digest.store.feedback import FeedbackStore
from digest.store.metrics import MetricsStore, Snapshot
from digest.store.papers import PaperStore
from digest.store.privacy import PrivacyStore, forgotten_key
from digest.store.queue import Claim, Queue, QueueStore
from digest.store.records import DeliveryRecord, FetchRecord, IngestCounts, Preference, RunRecord
from digest.store.runs import RunStore
from digest.store.sendlog import SendLogStore
from digest.store.signups import Confirmation, SignupRecord, SignupStore
from digest.store.subscribers import FileState, SlotCount, SubscriberStore
from digest.store.tables import meta

__all__ = ["BounceEvent", "BounceStore", "CacheStore", "Claim", "Confirmation", "DeliveryRecord", "FeedbackStore",
           "FetchRecord", "FileState", "IngestCounts", "Preference", "PrivacyStore", "Queue", "QueueStore",
           "SubscriberStore",
           "RunRecord", "SignupRecord", "SignupStore", "SlotCount", "Snapshot", "SoftPolicy", "Store", "forgotten_key"]


class Store(PaperStore, SubscriberStore, QueueStore, SendLogStore, FeedbackStore, CacheStore, BounceStore, SignupStore,
            RunStore, PrivacyStore, MetricsStore, ConsoleStore):
    """The database: open it with a SQLAlchemy URL; a new database is made at the current schema."""

    def __init__(self, url: str, *, check_schema: bool = True, durable_sends: bool = False) -> None:
        """`durable_sends`: every `sent` mark is flushed to disk before `mark_sent` returns (see the setting)."""
        self.url = url
        self.durable_sends = durable_sends
        self.engine: Engine = make_engine(url, durable=durable_sends)
        if not check_schema:
            return
        try:
            schema.prepare(self.engine)
        except sa.exc.SQLAlchemyError as exc:
            self.engine.dispose()
            raise StoreError(f"cannot open database {shown(url)}: {explain(exc)}") from exc
        except StoreError:
            self.engine.dispose()
            raise

    @property
    def shared_by_threads(self) -> bool:
        """Whether every thread of the process reads the same database: not an in-memory SQLite one, which is a
        database of its own on each thread's connection."""
        return not isinstance(self.engine.pool, sa.pool.SingletonThreadPool)

    def close(self) -> None:
        """Close every connection (the store stays usable: the next query opens one; so also before a fork)."""
        self.release_marks_connections()
        self.engine.dispose()

    def first_day(self, name: str, today: date) -> date:
        """The day recorded under `name`: `today` on the first call, the same day ever after."""
        key = f"first_day.{name}"
        with self.write() as conn:
            value = conn.execute(sa.select(meta.c.value).where(meta.c.key == key)).scalar()
            if value is None:
                conn.execute(meta.insert().values(key=key, value=today.isoformat()))
                return today
            return date.fromisoformat(value)

    def secret(self) -> str:
        """The link-signing key kept in the database, made on first use."""
        with self.write() as conn:
            value = conn.execute(sa.select(meta.c.value).where(meta.c.key == "secret")).scalar()
            if value is None:
                value = secrets.token_urlsafe(32)
                conn.execute(meta.insert().values(key="secret", value=value))
            return str(value)
