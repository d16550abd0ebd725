"""What `/metrics` reports, read from the store at scrape time, so every process and worker is counted once (reads
only; it owns no table)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

import sqlalchemy as sa

from digest.store.engine import Base
from digest.store.tables import bounces, deliveries, fetches, mail_reports, runs, suppressions, workers

DATES = 2  # digest dates counted: the latest (up to tomorrow, as local dates run ahead of UTC) and the one before


@dataclass(frozen=True)
class Snapshot:
    """The counts behind the metrics, as of `now` (UTC, naive)."""

    now: datetime
    digests: dict[tuple[date, str], int]  # send-log rows of the latest DATES digest dates, by (date, state)
    reports: dict[tuple[str, str], int]  # bounce-report events by (kind, status), lifts left out
    report_outcomes: dict[str, int]  # reports (mailbox messages and webhook events) by outcome
    suppressions: dict[str, int]  # suppressed addresses by the first word of their reason
    last_runs: dict[str, datetime]  # command -> when its last successful run finished
    last_fetches: dict[str, datetime]  # source -> its last successful fetch
    sent_recently: int  # digests of those dates marked sent within `window` before `now`
    window: timedelta
    workers: list[dict[str, object]]  # workers heard from within a day, as plain rows


class MetricsStore(Base):
    """The few grouped counts `/metrics` reads (mixed into Store); each one indexed query or a small table."""

    def metrics_snapshot(self, now: datetime, window: timedelta) -> Snapshot:
        """The counts as of `now`. The send log is read for its latest DATES digest dates only (a range of its
        queue index), so a scrape costs what a day's send holds, not what the log has gathered over the years."""
        with self.engine.connect() as conn:
            latest = conn.execute(sa.select(sa.func.max(deliveries.c.digest_date)).where(
                deliveries.c.digest_date <= (now + timedelta(days=1)).date())).scalar()  # a timezone ahead of UTC
            since = (latest or now.date()) - timedelta(days=DATES - 1)
            recent = deliveries.c.digest_date >= since
            digests = {(day, status): int(n) for day, status, n in conn.execute(
                sa.select(deliveries.c.digest_date, deliveries.c.status, sa.func.count()).where(recent)
                .group_by(deliveries.c.digest_date, deliveries.c.status))}
            reports = {(kind, status): n for kind, status, n in conn.execute(
                sa.select(bounces.c.kind, bounces.c.status, sa.func.count()).where(bounces.c.kind != "lifted")
                .group_by(bounces.c.kind, bounces.c.status))}
            outcomes = dict(conn.execute(sa.select(mail_reports.c.outcome, sa.func.count())
                                         .group_by(mail_reports.c.outcome)).all())
            reasons: dict[str, int] = {}
            for reason, n in conn.execute(sa.select(suppressions.c.reason, sa.func.count())
                                          .group_by(suppressions.c.reason)):
                word = reason.partition(":")[0].split()[0] if reason.strip() else "unknown"
                reasons[word] = reasons.get(word, 0) + n
            last_runs = dict(conn.execute(sa.select(runs.c.command, sa.func.max(runs.c.finished_at))
                                          .where(runs.c.status == "ok").group_by(runs.c.command)).all())
            last_fetches = dict(conn.execute(sa.select(fetches.c.source, fetches.c.last_ok_at)
                                             .where(fetches.c.last_ok_at.is_not(None))).all())
            sent = conn.execute(sa.select(sa.func.count()).select_from(deliveries).where(
                recent & (deliveries.c.status == "sent") & (deliveries.c.updated_at >= now - window))).scalar_one()
            rows = [dict(r._mapping) for r in conn.execute(
                sa.select(workers).where(workers.c.heartbeat_at >= now - timedelta(days=1)))]
        return Snapshot(now, digests, reports, {k: int(v) for k, v in outcomes.items()}, reasons, last_runs,
                        last_fetches, int(sent), window, rows)
