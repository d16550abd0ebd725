"""The day, as `digest run` does it: fetch → sync profiles → what is due → queue → compose → deliver.

`run` reads top to bottom as that sequence; `send` is its last three steps for one date (what `digest send`
and the scheduler's slot jobs do); `drain` is the deliver step alone (`digest worker`). Each step is a call
that gets its inputs from the composition root (`app.App`) and returns what the next one needs. Every job
is recorded in the store's run log (what, when, outcome) for `digest status`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from time import sleep as time_sleep
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from digest import summaries
from digest.delivery import dispatch
from digest.delivery.handover import Outcome
from digest.delivery.message import message_id
from digest.delivery.sender import SendReport
from digest.errors import UsageError
from digest.models import Composed, Paper, Subscriber
from digest.schedule import Daemon, Slot, due_slots
from digest.sources import lookup, signals
from digest.sources.collect import CollectReport, collect
from digest.sources.fetch import Fetcher, FetchPolicy
from digest.sources.ingest import IngestReport
from digest.sources.lookup import Looked, bare, look_up
from digest.sources.signals import SignalPolicy, SignalReport
from digest.store import Queue, Store
from digest.subscribers.profiles import Problem, is_email
from digest.subscribers.roster import SyncReport
from digest.summaries import SummaryReport

if TYPE_CHECKING:
    from digest.app import App

log = logging.getLogger("digest")


@dataclass
class RunReport:
    """What `digest run` did: the fetch (or ingest) and one send report per digest date."""

    fetched: CollectReport | None = None
    ingested: IngestReport | None = None
    sends: list[SendReport] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # of the subscriber profiles
    summaries: SummaryReport | None = None  # with `[summaries]`: never fails the run, one line in it
    signals: SignalReport | None = None  # with `[signals]`: never fails the run, one line in it

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
        if self.signals is not None:
            out.append(self.signals.line())
        if self.summaries is not None:
            out.append(self.summaries.line())
        out += [s.summary() for s in self.sends] or ["nothing due now"]
        return out


@dataclass
class RunLog:
    """What a job tells the run log: summary lines, and whether anything in it failed."""

    lines: list[str] = field(default_factory=list)
    failed: bool = False


@contextmanager
def recorded(store: Store, command: str) -> Iterator[RunLog]:
    """Record a job in the run log; an exception escaping the job marks it failed and is re-raised."""
    run_id = store.start_run(command)
    entry = RunLog()
    try:
        yield entry
    except BaseException as exc:
        store.finish_run(run_id, "failed", "; ".join([*entry.lines, f"{exc.__class__.__name__}: {exc}"]))
        raise
    store.finish_run(run_id, "failed" if entry.failed else "ok", "; ".join(entry.lines))


# -- the day ---------------------------------------------------------------------------------------------------


def run(app: App, now: datetime, day: date | None = None, *, dry_run: bool = False) -> RunReport:
    """`digest run`: fetch, then send every digest due at `now` (each subscriber's slot, within the grace), or all
    of `day`."""
    report = RunReport()
    with recorded(app.store, "run") as entry:
        report.fetched, report.ingested = fetch(app, day or now.date())
        report.signals, report.summaries = enrich(app, day or now.date())
        synced = app.profiles.sync()
        report.problems = synced.problems
        for digest_day, slots in due(app, synced, now, day):
            report.sends.append(send(app, digest_day, synced=synced, slots=slots, dry_run=dry_run, command="run"))
        entry.lines += report.lines()
        entry.failed = report.failed
    return report


def fetch(app: App, day: date) -> tuple[CollectReport | None, IngestReport | None]:
    """Fetch the configured sources; with none configured, ingest `[ingest] paths` (the sample)."""
    if not app.config.sources:
        return None, app.ingest([Path(p) for p in app.config.ingest.paths], seen_on=day)
    fetcher = Fetcher(FetchPolicy.of(app.config.fetch))
    try:
        report = collect(app.store, app.config.sources, fetcher, day)
    finally:
        fetcher.close()
    if report.new_papers:  # analysed here, as an ingest does, not by every send reading them
        app.analysis.papers(report.new_papers)
    return report, None


def enrich(app: App, day: date) -> tuple[SignalReport | None, SummaryReport | None]:
    """After the fetch, what outside services add to the window's papers, each where its settings ask (None where
    not): trend signals (`[signals]`), then TL;DRs (`[summaries]`). The window is read once for both."""
    window: list[Paper] = []
    wanted = SignalPolicy.of(app.config.signals).wanted or bool(app.config.summaries.endpoint and
                                                                app.config.summaries.model)
    if wanted:
        window = app.store.candidates(day, app.config.select.window_days)
    return trend_signals(app, day, window), summarise(app, day, window)


def trend_signals(app: App, day: date, window: Sequence[Paper]) -> SignalReport | None:
    """GitHub stars and citation counts of the window's papers where `[signals]` asks for them (see
    `digest.sources.signals`); None without. Whatever fails is the report's one line, never the run's end."""
    policy = SignalPolicy.of(app.config.signals)
    if not policy.wanted:
        return None
    fetcher = Fetcher(FetchPolicy.of(app.config.fetch))
    try:
        return signals.refresh(app.store, policy, window, fetcher, day)
    except Exception as exc:  # noqa: BLE001 - the digests go out with the counts the papers had
        log.warning("trend signals failed", exc_info=True)
        return SignalReport(problems=[_unexpected(exc)])
    finally:
        fetcher.close()


def summarise(app: App, day: date, window: Sequence[Paper]) -> SummaryReport | None:
    """TL;DRs of the window's papers where `[summaries]` names a model (see `digest.summaries`); None without it.
    Bounded in time (summaries.deadline); whatever fails is the report's one line, never the run's end."""
    settings = app.config.summaries
    try:
        return summaries.make(app.store, settings, window if settings.endpoint and settings.model else (), day)
    except Exception as exc:  # noqa: BLE001 - the digests go out with the sentences from the abstracts
        log.warning("summaries failed", exc_info=True)
        return SummaryReport(failure=_unexpected(exc))


def _unexpected(exc: Exception) -> str:
    """An error no step expected, as its one line in the run's report."""
    return f"an unexpected error ({exc.__class__.__name__}: {' '.join(str(exc).split())[:200]})"


def due(app: App, synced: SyncReport, now: datetime, day: date | None) -> list[tuple[date, list[Slot] | None]]:
    """The digest dates to send and their slots: every slot due at `now` (within the grace), or all of `day`."""
    if day is not None:
        return [(day, None)]
    grace = timedelta(minutes=app.config.schedule.grace_minutes)
    return sorted(due_slots(app.profiles.slots(synced), now, grace).items())


def send(app: App, day: date, *, synced: SyncReport | None = None, slots: Sequence[Slot] | None = None,
         only: str | None = None, dry_run: bool = False, should_stop: Callable[[], bool] = lambda: False,
         command: str = "send") -> SendReport:
    """One date's digests: queue the due ones (everyone's, some slots', or one subscriber's), compose, deliver.

    The due digests are queued in the store, then claimed a batch at a time: any other run or worker on the
    same store takes its share and none is sent twice. `should_stop` is asked between digests: a daemon told
    to stop finishes the message in flight and leaves the rest. The profile files are synced unless `synced`
    says how they were.
    """
    store, mailer = app.store, app.mailer
    if not dry_run:
        dispatch.replay_journal(store, app.senders().journal)
    synced = synced or app.profiles.sync()
    if not dry_run:
        mailer.check()  # a settings error (no password, bad key) stops the run before it starts
    report = SendReport(day, invalid_profiles=len({p.path for p in synced.problems}))
    if only is not None:
        return _send_one(app, day, app.profiles.subscriber(only), report, dry_run)
    wanted = app.profiles.slots(synced) if slots is None else list(slots)
    with app.renderer.pinned():
        if dry_run:
            dispatch.resting(store, day, wanted, report)
            return dispatch.dry_run(store, app.composer.batch(app.composer.pool(day)),
                                    store.iter_subscribers(slots=dispatch.on_day(wanted, day)), day, report,
                                    batch=app.config.delivery.batch_size)
        queue = dispatch.queue_date(store, day, wanted, mailer.transport.name, report)
        return _compose_and_deliver(app, day, queue, report, should_stop, command)


def _send_one(app: App, day: date, subscriber: Subscriber, report: SendReport, dry_run: bool) -> SendReport:
    """`digest send --subscriber`: that one digest, through the same queue and claims."""
    due = dispatch.due_one(app.store, day, subscriber, report)
    with app.renderer.pinned():
        if dry_run:
            return dispatch.dry_run(app.store, app.composer.batch(app.composer.pool(day)), iter(due), day, report,
                                    batch=app.config.delivery.batch_size)
        from_address, key = app.newsletter.from_address, app.signer.message_key
        queue = dispatch.queue_one(app.store, day, due, transport=app.mailer.transport.name, report=report,
                                   message_id=lambda e: message_id(e, day, from_address, key))
        return _compose_and_deliver(app, day, queue, report, lambda: False, "send", only=subscriber.email)


def _compose_and_deliver(app: App, day: date, queue: Queue, report: SendReport, should_stop: Callable[[], bool],
                         command: str, only: str | None = None) -> SendReport:
    """The queued digests of `day` composed from the day's pool and delivered (no pool is made when nothing is
    due: all sent already, or held by others)."""
    if queue.queued or queue.held:
        pool = app.composer.pool(day)
        app.senders().deliver(app.composer.batch(pool), day, report, should_stop=should_stop, command=command,
                              warm=lambda: app.composer.warm(pool), only=only, total=queue.queued)
    return report


def drain(app: App, *, day: date | None = None, follow: bool = False, poll: float = 10.0,
          should_stop: Callable[[], bool] = lambda: False, wait: Callable[[float], bool] | None = None,
          ) -> list[SendReport]:
    """`digest worker`: deliver whatever is queued (of `day`, else of the last two days) until none is left.

    With `follow`, look again every `poll` seconds until told to stop (a worker on another machine).
    """
    reports, pools = [], {}
    sleep = wait or (lambda seconds: time_sleep(seconds) or False)
    senders = app.senders()
    dispatch.replay_journal(app.store, senders.journal)
    app.mailer.warn_unsigned()
    while not should_stop():
        recent = date.today() - timedelta(days=2)
        days = [day] if day else [d for d in app.store.queued_dates() if d >= recent]
        for current in days:
            if current not in pools:
                pools[current] = app.composer.pool(current)
            pool = pools[current]
            report = SendReport(current)
            with app.renderer.pinned():
                senders.deliver(app.composer.batch(pool), current, report, should_stop=should_stop,
                                command="worker", warm=lambda pool=pool: app.composer.warm(pool))
            if report.claimed or report.outcomes:
                reports.append(report)
        if not follow or sleep(poll):
            break
    return reports


def send_test(app: App, day: date, only: str, to: str) -> tuple[Composed, Outcome]:
    """`digest send --to`: `only`'s digest sent to the address `to`, marked as a test; the send log is not
    touched."""
    if not is_email(to):
        raise UsageError(f"--to {to!r} is not an email address (like ada@example.org)")
    app.profiles.sync()  # one subscriber read by address: the console sends tests on lists of a million
    subscriber = app.profiles.subscriber(only)
    composed = app.composer.compose(subscriber, day, app.composer.pool(day), test_to=to)
    return composed, app.mailer.send_test(composed.message, to, day)


# -- the unattended jobs -----------------------------------------------------------------------------------------


def fetch_job(app: App, day: date) -> CollectReport | IngestReport:
    """`digest fetch` and the daemon's fetch: the fetch step alone, recorded in the run log; a failed source marks
    the run failed."""
    with recorded(app.store, "fetch") as entry:
        fetched, ingested = fetch(app, day)
        report: CollectReport | IngestReport = fetched or ingested  # type: ignore[assignment]
        entry.lines.append(report.summary())
        entry.lines += [made.line() for made in enrich(app, day) if made is not None]
        entry.failed = bool(fetched.failed) if fetched else bool(ingested and ingested.errors)
    return report


def deliver_slot(app: App, day: date, slot: Slot, should_stop: Callable[[], bool]) -> SendReport:
    """The daemon's send job for one slot (recorded in the run log)."""
    with recorded(app.store, "send") as entry:
        report = send(app, day, slots=[slot], should_stop=should_stop, command="schedule")
        entry.lines.append(report.summary())
        entry.failed = not report.ok or bool(report.invalid_profiles)
    return report


def make_daemon(app: App, *, manual: bool = False) -> Daemon:
    """The `digest schedule` daemon over this app's store, profiles and transport."""
    settings = app.config.schedule
    return Daemon(engine=app.store.engine, store=app.store, zone=settings.timezone,
                  fetch_cron=settings.fetch_cron, grace=timedelta(minutes=settings.grace_minutes),
                  slots=app.profiles.slots,
                  deliver=lambda day, slot, stop: deliver_slot(app, day, slot, stop),
                  fetch=lambda: fetch_job(app, datetime.now(ZoneInfo(settings.timezone)).date()),
                  manual=manual)


# -- libraries' ids ---------------------------------------------------------------------------------------------


def look_up_libraries(app: App) -> list[tuple[str, Looked]]:
    """`digest subscribers lookup`: every stored library naming ids the store lacks (profile files, imports, the
    web), looked up one library at a time; what each found is kept beside it (the web's library page shows it) and
    its entries filled. (where: the library's file, or the interest's name and reader), in the subscribers' order."""
    config = app.config
    fetcher = Fetcher(FetchPolicy.of(config.fetch))
    seen: set[str] = set()
    out = []
    try:
        for subscriber in app.store.iter_subscribers():
            for interest in subscriber.interests:
                key = interest.library_key
                if not key or key in seen:
                    continue
                seen.add(key)
                entries = app.store.library_entries(key)
                if not any(bare(e) for e in entries):
                    continue
                found, looked = look_up(entries, lambda refs: set(app.store.find_papers(refs)), fetcher,
                                        arxiv_api=config.libraries.arxiv_api or lookup.ARXIV_API,
                                        doi_api=config.libraries.doi_api or lookup.DOI_API)
                if looked.in_store == looked.ids:
                    continue
                if looked.from_arxiv or looked.from_doi:
                    app.store.update_library(key, found)
                    app.analysis.interests([replace(subscriber, interests=(replace(interest, library=()),))])
                app.store.put_cache(lookup.LOOKUP_KEY + key, looked.to_json().encode())
                where = interest.library_source or f"{subscriber.email}, “{interest.name}”"
                out.append((where, looked))
    finally:
        fetcher.close()
    return out
