"""Dispatching a send: queue a date's due digests, then deliver them in one or more worker processes.

`Dispatch` is what `digest send`, `run`, `schedule` and `worker` do once the digests are composable:
it queues the due digests in the store (all of a date, some delivery slots, or one subscriber),
starts the workers (`workers.in_processes`), each of which claims and delivers batches (`sending.Sender`),
and merges their reports. A dry run composes the same digests and queues nothing. It works on any
object that composes digests (`Composing`, which `pipeline.App` is), so it does not import the app.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import date, time, timedelta
from email.message import EmailMessage
from itertools import islice
from pathlib import Path
from time import sleep as time_sleep
from typing import Any, Protocol

from digest import journal
from digest.catalogue import SyncReport
from digest.collector import held
from digest.config import Config
from digest.deliver import Outcome, RetryPolicy, Transport
from digest.errors import StoreError
from digest.logs import progress
from digest.mail import message_id
from digest.models import Newsletter, Subscriber
from digest.schedule import Slot
from digest.select import Pool
from digest.sending import (
    KEEP_OUTCOMES,
    Blocked,
    Composed,
    Composer,
    Sender,
    SendPolicy,
    SendReport,
    queue_outcomes,
    skip,
)
from digest.store import Queue, Store
from digest.store.engine import database_errors, explain
from digest.subscribers import is_delivery_day
from digest.workers import Died, in_processes

log = logging.getLogger("digest")
UNSIGNED = ("sending over SMTP without a DKIM signature: Gmail and Yahoo require bulk senders to sign, and may "
            "reject or junk these digests; set dkim.selector (see the README, section \"DKIM\"), or "
            "dkim.relay_signs = true when the relay signs them")


class Composing(Protocol):
    """What a dispatch needs of the app: the store, settings, profiles, pools, a composer and the transport."""

    store: Store
    config: Config
    newsletter: Newsletter
    retry: RetryPolicy
    workers: int
    warned: set[str]  # warnings this app gave already (each is given once per command)

    @property
    def renderer(self) -> Any: ...

    @property
    def transport(self) -> Transport: ...

    @property
    def dkim(self) -> Any: ...

    def wire(self, message: EmailMessage) -> bytes: ...

    def sync(self) -> SyncReport: ...

    def slots(self) -> list[Slot]: ...

    def pool(self, day: date) -> Pool: ...

    def warm(self, pool: Pool) -> None: ...

    def composer(self, pool: Pool) -> Composer: ...

    def subscriber(self, email: str) -> Subscriber: ...


class Dispatch:
    """One send, dry run or drain over an app's store and composer."""

    def __init__(self, app: Composing) -> None:
        self.app = app

    def blocked(self, day: date) -> Callable[[Sequence[str]], Blocked]:
        """Who of some subscribers gets nothing on `day`: suppressed, or paused on the preferences page."""
        def check(emails: Sequence[str]) -> Blocked:
            reasons = {e: f"suppressed ({why})" for e, why in self.app.store.suppressed_among(emails).items()}
            for email, pref in self.app.store.preferences_among(emails).items():
                if pref.paused_until and pref.paused_until >= day:
                    reasons.setdefault(email, f"paused until {pref.paused_until}")
            return Blocked(reasons)
        return check

    def policy(self) -> SendPolicy:
        d = self.app.config.delivery
        return SendPolicy(batch=d.batch_size, lease=timedelta(seconds=d.lease_seconds), retry=self.app.retry,
                          suppress_after=d.suppress_after,
                          max_run=timedelta(minutes=d.max_run_minutes) if d.max_run_minutes else None)

    def sender(self, pool: Pool, day: date, command: str = "send") -> Sender:
        """A sender of `day`'s digests drawn from `pool`."""
        return Sender(self.app.store, compose=self.app.composer(pool), profiles=self.app.store.subscribers_by_email,
                      transport=lambda: self.app.transport, wire=self.app.wire, blocked=self.blocked(day),
                      policy=self.policy(), command=command, journal_folder=self.journal_folder())

    def journal_folder(self) -> Path:
        """Where the sent journal lives: beside a SQLite file, else beside the settings file."""
        url = self.app.store.engine.url
        if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            return Path(url.database).parent
        return self.app.config.base

    def warn_unsigned(self) -> None:
        """One warning per command (a daemon: its first send) when it sends over SMTP unsigned and nobody said the
        relay signs, however many dates or looks it sends (a `digest run` near midnight sends two dates)."""
        unsigned = self.app.transport.name == "smtp" and self.app.dkim is None and not self.app.config.dkim.relay_signs
        if unsigned and UNSIGNED not in self.app.warned:
            self.app.warned.add(UNSIGNED)
            log.warning(UNSIGNED)

    def replay_journal(self) -> None:
        """Record what an earlier run's server accepted and its database could not, before anything else."""
        try:
            done = journal.replay(self.journal_folder(), self.app.store.mark_sent)
        except database_errors() as exc:
            raise StoreError(f"cannot record the messages kept in the sent journal ({self.journal_folder()}): "
                             f"{explain(exc)}") from exc
        if done:
            log.warning("recorded %d sent digests from the sent journal", done)

    def send(self, day: date, *, dry_run: bool = False, only: str | None = None, slots: Sequence[Slot] | None = None,
             should_stop: Callable[[], bool] = lambda: False, command: str = "send") -> SendReport:
        """Deliver the digests of `day`: everyone's (or one subscriber's, or those of some delivery slots).

        The due digests are queued in the store, then claimed a batch at a time: any other run or
        worker on the same store takes its share and none is sent twice. `should_stop` is asked
        between digests: a daemon told to stop finishes the message in flight and leaves the rest.
        """
        if not dry_run:
            self.replay_journal()
        synced = self.app.sync()
        if not dry_run:
            # a settings error (no password, bad key) stops the run before it starts
            _ = self.app.transport, self.app.dkim
            self.warn_unsigned()
        report = SendReport(day, invalid_profiles=len({p.path for p in synced.problems}))
        if only is not None:
            return self._send_one(day, self.app.subscriber(only), report, dry_run)
        wanted = self.app.slots() if slots is None else list(slots)
        on_day = [_slot(s) for s in wanted if is_delivery_day(s.frequency, day)]
        resting: dict[str, list[tuple[str, time, str]]] = {}  # frequency -> its slots with no digest today
        for slot in wanted:
            if not is_delivery_day(slot.frequency, day):
                resting.setdefault(slot.frequency, []).append(_slot(slot))
        for frequency, its_slots in resting.items():
            emails, total = self.app.store.emails_in_slots(its_slots, KEEP_OUTCOMES)
            why = f"not a delivery day for frequency {frequency}"
            for email in emails:
                report.add(Outcome(email, "skipped", why))
                log.info("skipped %s: %s", email, why)
            report.counts["skipped"] += total - len(emails)
        with self.app.renderer.pinned():
            if dry_run:
                return self._dry_run(self.app.pool(day), self.app.store.iter_subscribers(slots=on_day), day, report)
            queue = self.app.store.enqueue_slots(day, on_day, self.app.transport.name)
            return self._work(day, queue, report, should_stop, command)

    def _send_one(self, day: date, subscriber: Subscriber, report: SendReport, dry_run: bool) -> SendReport:
        """`digest send --subscriber`: that one digest, through the same queue and claims."""
        blocked = self.blocked(day)([subscriber.email])
        due = skip(report, [subscriber], lambda s: blocked.why(s.email) or (
            None if is_delivery_day(s.frequency, day) else f"not a delivery day for frequency {s.frequency}"))
        with self.app.renderer.pinned():
            if dry_run:
                return self._dry_run(self.app.pool(day), iter(due), day, report)
            queue = self.app.store.enqueue(day, [s.email for s in due], transport=self.app.transport.name,
                                       message_id=lambda e: message_id(e, day, self.app.newsletter.from_address,
                                                                       self.app.signer.message_key))
            return self._work(day, queue, report, lambda: False, "send", only=subscriber.email)

    def _work(self, day: date, queue: Queue, report: SendReport, should_stop: Callable[[], bool],
              command: str, only: str | None = None) -> SendReport:
        queue_outcomes(queue, report)
        if queue.queued or queue.held:  # nothing due (all sent already): no pool to analyse, no ranking to load
            self._deliver(self.app.pool(day), day, report, should_stop, command, only, queue.queued)
        # what was due and neither attempted here nor still queued went to another run or worker
        report.others = max(0, queue.queued + queue.held - report.claimed - report.left)
        return report

    def _deliver(self, pool: Pool, day: date, report: SendReport, should_stop: Callable[[], bool], command: str,
                 only: str | None = None, total: int | None = None) -> None:
        """Claim and deliver the queued digests of `day`, in `delivery.workers` processes."""
        workers = max(1, min(self.app.workers, total if total is not None else self.app.workers))

        def job(stop: Callable[[], bool]) -> SendReport:
            from threadpoolctl import threadpool_limits

            mine = SendReport(day)
            if workers > 1:
                self.app.transport.share(workers)  # the rate limits are for the run, not for each process
            # A batch's matrix products are small: BLAS threads would spin idle on the cores other workers use.
            with threadpool_limits(limits=1, user_api="blas"):
                return self.sender(pool, day, command).work(day, mine, only=only, should_stop=stop,
                                                            total=total if workers == 1 else None)

        if workers > 1:
            self.app.warm(pool)  # once, before the fork: the children share it
        # What the run holds from here on (the pool, its index, the settings, the modules) lives until it ends: out of
        # the collector's full passes (`collector.held`). Day-8 send of 10,000 readers: 1.75 -> 0.56 s of collection.
        with held():
            results = in_processes(workers, job, should_stop=should_stop, before_fork=self.app.store.close)
        if any(isinstance(r, Died) for r in results) and not should_stop():
            results.append(job(should_stop))  # take over what a dead worker held (its claims are free at once)
        for result in results:
            if isinstance(result, Died):
                report.add(Outcome("(worker)", "failed", str(result)))
            else:
                report.merge(result)

    def drain(self, *, day: date | None = None, follow: bool = False, poll: float = 10.0,
              should_stop: Callable[[], bool] = lambda: False, wait: Callable[[float], bool] | None = None,
              ) -> list[SendReport]:
        """`digest worker`: deliver whatever is queued (of `day`, else of the last two days) until none is left.

        With `follow`, look again every `poll` seconds until told to stop (a worker on another machine).
        """
        reports, pools = [], {}
        sleep = wait or (lambda seconds: time_sleep(seconds) or False)
        self.replay_journal()
        self.warn_unsigned()
        while not should_stop():
            recent = date.today() - timedelta(days=2)
            days = [day] if day else [d for d in self.app.store.queued_dates() if d >= recent]
            for current in days:
                if current not in pools:
                    pools[current] = self.app.pool(current)
                report = SendReport(current)
                with self.app.renderer.pinned():
                    self._deliver(pools[current], current, report, should_stop, "worker")
                if report.claimed or report.outcomes:
                    reports.append(report)
            if not follow or sleep(poll):
                break
        return reports

    def _dry_run(self, pool: Pool, due: Iterator[Subscriber], day: date, report: SendReport) -> SendReport:
        """Compose the digests of `due` a batch at a time; nothing is queued, claimed or sent."""
        compose, size, check = self.app.composer(pool), self.app.config.delivery.batch_size, self.blocked(day)
        with progress(self.app.store.count_subscribers(), f"sending {day}") as bar:
            while batch := list(islice(due, size)):
                blocked = check([s.email for s in batch])
                ready = skip(report, batch, lambda s, blocked=blocked: blocked.why(s.email))
                self._dry_batch(ready, compose(ready, day), report)
                bar(len(batch))
        return report

    @staticmethod
    def _dry_batch(batch: Sequence[Subscriber], results: Iterator[Composed | Exception], report: SendReport) -> None:
        for subscriber, result in zip(batch, results, strict=True):
            if isinstance(result, Exception):
                report.add(Outcome(subscriber.email, "failed", f"{result.__class__.__name__}: {result}"))
            elif result.digest.count == 0:
                report.add(Outcome(subscriber.email, "skipped", "nothing new above the relevance floor"))
            else:
                report.add(Outcome(subscriber.email, "dry-run",
                                   f"{result.digest.count} papers: {result.rendered.subject}"))


def _slot(slot: Slot) -> tuple[str, time, str]:
    return slot.timezone, slot.send_at, slot.frequency
