"""What the operator console shows: one page of subscribers with their state, found and filtered in the store.

Each row says where the subscriber's digest of the date stands in the words of `digest status`
(`status.delivery_lines`), read for the page's addresses only; nothing here reads the whole list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from digest.models import Subscriber
from digest.status import DeliveryLine, delivery_lines, recent_runs, run_line, why_suppressed, worker_line
from digest.store.bounces import LIFTABLE
from digest.web.common import Site

PAGE_SIZES = (25, 50, 100, 200)  # rows a page may hold (the size a request may ask for)
PAGE_SIZE = 50
MAX_SEARCH = 200  # characters of a search: an address is at most 254, a name at most 100
MAX_PAGE = 10**9  # a page number past any list (a bigger one is a bad request, not a huge OFFSET)
WORKERS_SINCE = timedelta(days=1)  # workers listed, as `digest status` lists them


@dataclass(frozen=True)
class Paging:
    """Where a page is in its list; a list counted only so far (not `exact`) has more than `total` rows, and its
    pages go one past the page shown while there are more (no "last")."""

    page: int
    size: int
    total: int
    exact: bool = True

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size)) if self.exact else max(self.page, -(-self.total // self.size)) + 1

    @property
    def first_row(self) -> int:
        return min(self.total, (self.page - 1) * self.size + 1)

    @property
    def last_row(self) -> int:
        return min(self.total, self.page * self.size)


@dataclass(frozen=True)
class Row:
    """One subscriber as a row of the console."""

    email: str
    name: str
    source: str  # file (with its path) | import | web
    schedule: str
    topics: str
    state: str  # as `digest status` says it for the date
    detail: str
    suppression: str  # why, when suppressed
    liftable: bool  # suppressed by a bounce or complaint: the operator may lift it
    paused_until: date | None
    last_sent: date | None

    @property
    def source_name(self) -> str:
        """The source as the list shows it: a profile file by its name (its page shows the whole path)."""
        return f"file {Path(self.source[5:]).name}" if self.source.startswith("file ") else self.source


def rows(app: Site, keys: tuple[str, ...], day: date, now: datetime | None = None) -> list[Row]:
    """The rows of these addresses (lower-case), in their order: a handful of keyed reads, whatever the list size."""
    store = app.store
    found = store.subscribers_by_email(list(keys))
    subs = [found[k] for k in keys if k in found]
    emails = [s.email for s in subs]
    owners, suppressed = store.owners(list(keys)), store.suppressed_among(list(keys))
    paused = {k: p.paused_until for k, p in store.preferences_among(list(keys)).items() if p.paused_until}
    grace = timedelta(minutes=app.config.schedule.grace_minutes)
    lines = delivery_lines(subs, day, store.deliveries_among(day, emails), suppressed, now=now or datetime.now(UTC),
                           grace=grace, paused=paused)
    by_email = {line.email.lower(): line for line in lines}
    last = {e.lower(): d for e, d in store.last_sent(emails).items()}
    return [_row(s, by_email[s.email.lower()], owners.get(s.email.lower()), suppressed.get(s.email.lower(), ""),
                 paused.get(s.email.lower()), last.get(s.email.lower())) for s in subs]


def _row(sub: Subscriber, line: DeliveryLine, owner: tuple[str, str | None] | None, reason: str,
         paused: date | None, last: date | None) -> Row:
    source, path = owner or ("?", None)
    return Row(email=sub.email, name=sub.name, source=f"file {path}" if source == "file" and path else source,
               schedule=f"{sub.frequency} at {sub.send_at:%H:%M} {sub.timezone}",
               topics=", ".join(i.name for i in sub.interests) or "(trending)", state=line.state, detail=line.detail,
               suppression=why_suppressed(reason) if reason else "", liftable=liftable(reason),
               paused_until=paused, last_sent=last)


def liftable(reason: str) -> bool:
    """Whether a suppression is one the operator may lift (a report made it), as `digest subscribers lift` says."""
    return reason.partition(":")[0] in LIFTABLE


def activity(app: Site, now: datetime | None = None) -> tuple[list[str], list[str]]:
    """The recent runs and the send workers of the last day (manual sends included), as `digest status` lists
    them."""
    now = now or datetime.now(UTC)
    workers = app.store.workers(now.replace(tzinfo=None) - WORKERS_SINCE)
    return [run_line(r) for r in recent_runs(app.store, now, 15)], [worker_line(w, now) for w in workers]


def counts(app: Site, day: date) -> dict[str, Any]:
    """The numbers above the list: subscribers, digests of the date by state, suppressed, pending signups."""
    store = app.store
    return {"subscribers": store.count_subscribers(), "deliveries": sorted(store.delivery_counts(day).items()),
            "suppressed": store.count_suppressed(), "pending_signups": store.count_pending_signups()}
