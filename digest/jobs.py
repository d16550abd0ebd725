"""The unattended jobs: fetch, `digest run` (fetch, then send what is due now) and the daemon's wiring.

Every job is recorded in the store's run log (what, when, outcome) for `digest status`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from digest.collect import CollectReport, collect
from digest.fetch import USER_AGENT, Fetcher, FetchPolicy
from digest.pipeline import App, IngestReport
from digest.schedule import Daemon, Slot, due_slots
from digest.sending import SendReport
from digest.subscribers import Problem

log = logging.getLogger("digest")


@dataclass
class RunReport:
    """What `digest run` did: the fetch (or ingest) and one send report per digest date."""

    fetched: CollectReport | None = None
    ingested: IngestReport | None = None
    sends: list[SendReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # of the subscriber profiles

    @property
    def errors(self) -> list[str]:
        """What an operator must act on besides failed sources and digests: bad records in the files they gave
        (a live source's bad record is reported, but only a source that fails as a whole fails the run), and
        invalid profiles."""
        records = self.ingested.errors if self.ingested else []
        return [str(e) for e in records] + [str(p) for p in self.problems]

    @property
    def failed(self) -> bool:
        fetch_failed = bool(self.fetched and self.fetched.failed)
        return fetch_failed or bool(self.errors) or any(not s.ok for s in self.sends)

    def lines(self) -> list[str]:
        out = []
        if self.fetched is not None:
            out += [o.line() for o in self.fetched.outcomes] + [self.fetched.summary()]
        if self.ingested is not None:
            out.append(self.ingested.summary())
        out += [s.summary() for s in self.sends] or ["nothing due now"]
        return out


@dataclass
class RunLog:
    """What a job tells the run log: summary lines, and whether anything in it failed."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False


@contextmanager
def recorded(app: App, command: str) -> Iterator[RunLog]:
    """Record a job in the run log; an exception escaping the job marks it failed and is re-raised."""
    run_id = app.store.start_run(command)
    entry = RunLog()
    try:
        yield entry
    except BaseException as exc:
        app.store.finish_run(run_id, "failed", "; ".join([*entry.lines, f"{exc.__class__.__name__}: {exc}"]))
        raise
    app.store.finish_run(run_id, "failed" if entry.failed else "ok", "; ".join(entry.lines))


def fetcher_for(app: App) -> Fetcher:
    f = app.config.fetch
    return Fetcher(FetchPolicy(timeout=float(f.timeout), retries=f.retries, backoff=float(f.backoff),
                               max_wait=float(f.max_wait), user_agent=f.user_agent or USER_AGENT))


def refresh(app: App, day: date) -> tuple[CollectReport | None, IngestReport | None]:
    """Fetch the configured sources; with none configured, ingest `[ingest] paths` (the sample)."""
    if not app.config.sources:
        return None, app.ingest([Path(p) for p in app.config.ingest.paths], seen_on=day)
    fetcher = fetcher_for(app)
    try:
        report = collect(app.store, app.config.sources, fetcher, day)
    finally:
        fetcher.close()
    if report.new_papers:  # analysed here, as an ingest does, not by every send reading them
        app.prepare_papers(report.new_papers)
    return report, None


def fetch_job(app: App, day: date) -> CollectReport | IngestReport:
    """Fetch (recorded in the run log); a failed source marks the run failed."""
    with recorded(app, "fetch") as entry:
        fetched, ingested = refresh(app, day)
        report: CollectReport | IngestReport = fetched or ingested  # type: ignore[assignment]
        entry.lines.append(report.summary())
        entry.failed = bool(fetched.failed) if fetched else bool(ingested and ingested.errors)
    return report


def run_job(app: App, now: datetime, day: date | None = None, *, dry_run: bool = False) -> RunReport:
    """Fetch, then send: every digest due at `now` (each subscriber's slot, within the grace), or all of `day`."""
    report = RunReport()
    with recorded(app, "run") as entry:
        report.fetched, report.ingested = refresh(app, day or now.date())
        report.problems = app.sync().problems
        if day is not None:
            report.sends.append(app.send(day, dry_run=dry_run, command="run"))
        else:
            grace = timedelta(minutes=app.config.schedule.grace_minutes)
            for digest_day, slots in sorted(due_slots(app.slots(), now, grace).items()):
                report.sends.append(app.send(digest_day, dry_run=dry_run, slots=slots, command="run"))
        entry.lines += report.lines()
        entry.failed = report.failed
    return report


def deliver_slot(app: App, day: date, slot: Slot, should_stop: Callable[[], bool]) -> SendReport:
    """The daemon's send job for one slot (recorded in the run log)."""
    with recorded(app, "send") as entry:
        report = app.send(day, slots=[slot], should_stop=should_stop, command="schedule")
        entry.lines.append(report.summary())
        entry.failed = not report.ok or bool(report.invalid_profiles)
    return report


def make_daemon(app: App, *, manual: bool = False) -> Daemon:
    """The `digest schedule` daemon over this app's store, profiles and transport."""
    settings = app.config.schedule
    return Daemon(engine=app.store.engine, store=app.store, zone=settings.timezone,
                  fetch_cron=settings.fetch_cron, grace=timedelta(minutes=settings.grace_minutes),
                  slots=app.slots,
                  deliver=lambda day, slot, stop: deliver_slot(app, day, slot, stop),
                  fetch=lambda: fetch_job(app, datetime.now(ZoneInfo(settings.timezone)).date()),
                  manual=manual)
