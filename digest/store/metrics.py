"""What `/metrics` reports, read from the store at scrape time: so every process and worker is counted once."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa

from .engine import Base
from .tables import bounces, deliveries, fetches, mail_reports, runs, suppressions, workers


@dataclass(frozen=True)
class Snapshot:
    """The counts behind the metrics, as of `now` (UTC, naive)."""

    now: datetime
    digests: dict[str, int]  # send-log rows by state (queued, claimed, pending, sent, failed, bounced, empty)
    reports: dict[tuple[str, str], int]  # bounce-report events by (kind, status), lifts left out
    report_outcomes: dict[str, int]  # reports (mailbox messages and webhook events) by outcome
    suppressions: dict[str, int]  # suppressed addresses by the first word of their reason
    last_runs: dict[str, datetime]  # command -> when its last successful run finished
    last_fetches: dict[str, datetime]  # source -> its last successful fetch
    sent_recently: int  # digests marked sent within `window` before `now`
    window: timedelta
    workers: list[dict[str, object]]  # workers heard from within a day, as plain rows


class MetricsStore(Base):
    """The few grouped counts `/metrics` reads (mixed into Store); each one indexed query or a small table."""

    def metrics_snapshot(self, now: datetime, window: timedelta) -> Snapshot:
        with self.engine.connect() as conn:
            digests = dict(conn.execute(sa.select(deliveries.c.status, sa.func.count())
                                        .group_by(deliveries.c.status)).all())
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
            recent = conn.execute(sa.select(sa.func.count()).select_from(deliveries).where(
                (deliveries.c.status == "sent") & (deliveries.c.updated_at >= now - window))).scalar_one()
            rows = [dict(r._mapping) for r in conn.execute(
                sa.select(workers).where(workers.c.heartbeat_at >= now - timedelta(days=1)))]
        return Snapshot(now, {k: int(v) for k, v in digests.items()}, reports,
                        {k: int(v) for k, v in outcomes.items()}, reasons, last_runs, last_fetches, int(recent),
                        window, rows)
