"""The frozen records the store hands out: ingest counts, fetches, preferences, runs, deliveries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime


@dataclass(frozen=True)
class IngestCounts:
    """What one ingest did to the store."""

    distinct: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0


@dataclass(frozen=True)
class FetchRecord:
    """The last fetch of one source."""

    source: str
    url: str
    fetched_at: datetime
    result: str
    papers: int
    errors: int
    attempts: int
    detail: str = ""
    etag: str | None = None
    last_modified: str | None = None
    last_ok_at: datetime | None = None


@dataclass(frozen=True)
class Preference:
    """What a subscriber changed on the preferences page (the profile file is never touched)."""

    email: str
    frequency: str | None = None
    paused_until: date | None = None


@dataclass(frozen=True)
class RunRecord:
    """One run of a command that changes state (fetch, send, run, a scheduled job)."""

    id: int
    command: str
    started_at: datetime
    finished_at: datetime | None
    status: str
    summary: str


@dataclass(frozen=True)
class DeliveryRecord:
    """One row of the send log."""

    subscriber: str
    digest_date: date
    message_id: str
    status: str
    attempts: int
    transport: str
    detail: str
    claimed_by: str | None = None
    lease_until: datetime | None = None
    updated_at: datetime | None = None  # when it last changed (UTC): for `sent`, when it was sent
