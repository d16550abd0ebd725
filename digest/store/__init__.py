"""All database I/O: papers and their upvote history, the send log, suppressions, feedback, caches (SQLAlchemy Core).

The schema and row helpers are in `tables`, the records handed out in `records`, and Store's
methods in one mixin per concern: `papers`, `sendlog`, `runs`, `feedback`.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..errors import StoreError
from .feedback import FeedbackStore
from .papers import PaperStore
from .records import DeliveryRecord, FetchRecord, IngestCounts, Preference, RunRecord
from .runs import RunStore
from .sendlog import SendLogStore
from .tables import meta, metadata

__all__ = ["DeliveryRecord", "FeedbackStore", "FetchRecord", "IngestCounts", "Preference", "RunRecord",
           "Store"]


class Store(PaperStore, SendLogStore, RunStore, FeedbackStore):
    """The database: open it with a SQLAlchemy URL; tables are created on first use."""

    def __init__(self, url: str) -> None:
        self.url = url
        if url.startswith("sqlite:///"):
            folder = Path(url.removeprefix("sqlite:///")).parent
            if str(folder) not in ("", ".") and not folder.exists():
                raise StoreError(f"database folder {folder} does not exist")
        try:
            self.engine: Engine = sa.create_engine(url)
            if self.engine.dialect.name == "sqlite":
                sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            metadata.create_all(self.engine)
        except sa.exc.SQLAlchemyError as exc:
            reason = getattr(exc, "orig", None) or exc
            raise StoreError(f"cannot open database {url}: {reason}") from exc

    def close(self) -> None:
        self.engine.dispose()

    def secret(self) -> str:
        """The link-signing key kept in the database, made on first use."""
        with self.engine.begin() as conn:
            value = conn.execute(sa.select(meta.c.value).where(meta.c.key == "secret")).scalar()
            if value is None:
                value = secrets.token_urlsafe(32)
                conn.execute(meta.insert().values(key="secret", value=value))
            return str(value)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (preview, status) never block a send
    cursor.execute("PRAGMA synchronous=FULL")  # the send log must survive a power cut
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()
