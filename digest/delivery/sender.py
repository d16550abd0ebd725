"""The sender: one worker's loop over a date's queue, claiming due digests a batch at a time and delivering each.

Any number of runs and workers may share a date: a digest is claimed in the store before it is
composed, so each one is composed and sent by exactly one of them (see `store.queue`). A sender
takes everything it needs as arguments: the store, a batch composer (subscribers → messages), the
transport and the policy; `delivery.dispatch` starts the senders.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol

from digest.delivery.handover import NotRecorded, Outcome, RetryPolicy, Transport, deliver_one
from digest.delivery.journal import Journal
from digest.delivery.message import stored_header
from digest.delivery.owners import Owner, dead
from digest.logs import progress
from digest.models import Composed, Subscriber
from digest.store import Claim, Queue, Store
from digest.store.engine import database_errors, explain
from digest.store.tables import _now

log = logging.getLogger("digest")
NOT_ATTEMPTED = "not attempted"  # the reason of digests left for the next run because the transport stopped
KEEP_OUTCOMES = 10_000  # a report keeps every outcome up to this many, then only the ones that need a look


class ComposeBatch(Protocol):
    """Builds the digests of a batch of subscribers: one `Composed` (or the error that stopped it) each."""

    def __call__(self, subscribers: Sequence[Subscriber], day: date) -> Iterator[Composed | Exception]: ...


@dataclass
class SendReport:
    """The outcome of every digest of one send run (counted; the outcomes themselves kept up to a bound)."""

    day: date
    outcomes: list[Outcome] = field(default_factory=list)
    invalid_profiles: int = 0
    halted: str = ""  # why the transport stopped taking messages, if it did
    not_attempted: int = 0  # digests left queued because the transport stopped
    others: int = 0  # digests of the date that other send runs and workers claimed while this one ran
    claimed: int = 0  # digests this run claimed and attempted (claims given back unsent do not count)
    left: int = 0  # digests of the date still queued when this run ended
    counts: Counter[str] = field(default_factory=Counter)
    retried: int = 0  # digests that needed more than one try
    suppressed: int = 0  # addresses suppressed by this run's bounces
    # Each other send run's or worker's claims of the date when this run queued its digests (what `others` counts
    # from; None until then).
    claims_before: dict[str, int] | None = field(default=None, repr=False)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome.status] += 1
        self.retried += bool(outcome.retries)
        self.suppressed += outcome.suppressed
        if len(self.outcomes) < KEEP_OUTCOMES or outcome.status not in ("sent", "skipped"):
            self.outcomes.append(outcome)

    def merge(self, other: SendReport) -> None:
        """Add another worker's report of the same date to this one."""
        for outcome in other.outcomes:
            if len(self.outcomes) < KEEP_OUTCOMES or outcome.status not in ("sent", "skipped"):
                self.outcomes.append(outcome)
        self.counts.update(other.counts)
        self.retried += other.retried
        self.suppressed += other.suppressed
        self.claimed += other.claimed
        self.not_attempted = max(self.not_attempted, other.not_attempted)
        self.left = max(self.left, other.left)
        self.halted = self.halted or other.halted

    def count(self, status: str) -> int:
        return self.counts[status] + (self.not_attempted if status == "deferred" else 0)

    @property
    def ok(self) -> bool:
        return not (self.count("failed") or self.count("deferred") or self.halted)

    def summary(self) -> str:
        verb = "would send" if self.count("dry-run") else "sent"
        sent = self.count("dry-run") or self.count("sent")
        text = (f"{self.day}: {verb} {sent}, skipped {self.count('skipped')}, failed {self.count('failed')}, "
                f"deferred {self.count('deferred')}, retried {self.retried}, suppressed {self.suppressed}")
        if self.others:
            text += f", {self.others} taken by other workers"
        return text + (f", {self.invalid_profiles} invalid profiles" if self.invalid_profiles else "")


@dataclass(frozen=True)
class SendPolicy:
    """How a run claims and delivers: batch size, lease, retries, bounces."""

    batch: int = 100
    lease: timedelta = timedelta(minutes=10)
    retry: RetryPolicy = RetryPolicy()
    suppress_after: int = 1
    max_run: timedelta | None = None  # a run stops claiming and sending after this long


RECHECK_SECONDS = 0.5  # suppressions and pauses are read again when the last look is older than this
RUN_HEARTBEAT_SECONDS = 60  # how often a sender says that the run it works for is still under way


@dataclass(frozen=True)
class Blocked:
    """Why some subscribers get nothing now: suppressed, paused (checked again for every batch)."""

    reasons: Mapping[str, str]  # lower-case address → reason

    def why(self, email: str) -> str | None:
        return self.reasons.get(email.lower())


class Sender:
    """Claims due digests of one date a batch at a time, composes and delivers them, marks each in the store."""

    def __init__(self, store: Store, *, compose: ComposeBatch,
                 profiles: Callable[[Sequence[str]], Mapping[str, Subscriber]],
                 transport: Callable[[], Transport], wire: Callable[[EmailMessage], bytes],
                 blocked: Callable[[Sequence[str]], Blocked], policy: SendPolicy, owner: Owner | None = None,
                 command: str = "send", journal_folder: Path | None = None, runs_of: str | None = None) -> None:
        """`journal_folder`: where a message the server accepted goes when the database cannot record it;
        `runs_of`: the process (`store.runs.this_process`) whose logged runs this sender keeps alive as it works
        (the one that started the send, when this sender is a forked worker)."""
        self.store, self.compose, self.profiles = store, compose, profiles
        self.transport, self.wire, self.blocked, self.policy = transport, wire, blocked, policy
        self.owner = owner or Owner.current()
        self.command = command
        self.journal_folder = journal_folder
        self.runs_of = runs_of
        self._heard = 0.0  # when `runs_of`'s runs were last said to be under way (monotonic)
        self._journal: Journal | None = None
        self._lease_until = datetime.min
        self._stop_at = None if policy.max_run is None else time.monotonic() + policy.max_run.total_seconds()

    def _overdue(self, report: SendReport) -> bool:
        """True (and the run halted) once the run has used its time (`delivery.max_run_minutes`)."""
        if self._stop_at is None or time.monotonic() < self._stop_at or report.halted:
            return bool(report.halted)
        minutes = self.policy.max_run.total_seconds() / 60 if self.policy.max_run else 0
        report.halted = f"the run reached its time limit of {minutes:g} minutes (delivery.max_run_minutes)"
        return True

    def work(self, day: date, report: SendReport, *, only: str | None = None,
             should_stop: Callable[[], bool] = lambda: False, total: int | None = None) -> SendReport:
        """Claim and deliver until nothing of `day` is left to claim (or the transport stops, or we are told to)."""
        me = self.owner.id
        self.store.start_worker(me, self.command, day)
        self._journal = Journal(self.journal_folder, self.owner) if self.journal_folder else None
        claimed = 0
        try:
            with progress(total, f"sending {day}") as bar:
                while not should_stop() and not self._overdue(report):
                    batch = self._claim(day, only)
                    if not batch:
                        break
                    claimed += len(batch)
                    report.claimed += len(batch)
                    self.store.worker_progress(me, claimed=claimed)  # at once: another run counts what it lost
                    self._still_running()
                    self._deliver_batch(day, batch, report, should_stop, bar)
                    self.store.worker_progress(me, claimed=claimed, sent=report.count("sent"),
                                               failed=report.count("failed"), deferred=report.count("deferred"),
                                               skipped=report.count("skipped"))
        except NotRecorded as exc:  # the one accepted message is journalled: stop before sending another
            report.add(Outcome(exc.subscriber, "sent", "recorded in the sent journal"))
            report.halted = str(exc)
        except database_errors() as exc:  # nothing more can be recorded: stop at the first failed write
            report.halted = f"the database failed: {explain(exc)}"
        finally:
            self._finish(day, report, claimed)
        return report

    def _still_running(self) -> None:
        """Renew the lease of the runs this sender works for, once a minute at most."""
        if self.runs_of and time.monotonic() - self._heard > RUN_HEARTBEAT_SECONDS:
            self.store.keep_running(self.runs_of)
            self._heard = time.monotonic()

    def _finish(self, day: date, report: SendReport, claimed: int) -> None:
        """Give back what was claimed and not attempted, and say what is left; a broken database only logs."""
        me = self.owner.id
        try:
            report.claimed -= self.store.release(me)
            report.left = self.store.count_queued(day)
            if report.halted:
                report.not_attempted = report.left
            self.store.worker_progress(me, finished=True, claimed=claimed, sent=report.count("sent"),
                                       failed=report.count("failed"), deferred=report.count("deferred"),
                                       skipped=report.count("skipped"))
        except database_errors() as exc:  # what was sent is recorded; the operator must still look
            report.halted = report.halted or f"the database failed at the end of the run: {explain(exc)}"
            log.warning("could not give back this run's claims (they are taken over once this process has "
                        "ended): %s", explain(exc))
        if self._journal is not None:
            self._journal.close()

    def _claim(self, day: date, only: str | None) -> list[Claim]:
        self._lease_until = _now() + self.policy.lease
        return self.store.claim(day, self.owner.id, limit=self.policy.batch, lease_until=self._lease_until,
                                dead=dead(self.store.holders(day)), only=only)

    def _keep_lease(self, day: date, subscriber: str) -> bool:
        """Renew our claims when half the lease has gone; False when this digest is no longer ours."""
        if _now() < self._lease_until - self.policy.lease / 2:
            return True
        self._lease_until = _now() + self.policy.lease
        return (subscriber, day) in self.store.renew(self.owner.id, self._lease_until)

    def _deliver_batch(self, day: date, batch: Sequence[Claim], report: SendReport,
                       should_stop: Callable[[], bool], bar: Callable[[int], None]) -> None:
        me = self.owner.id
        emails = [c.subscriber for c in batch]
        profiles = self.profiles(emails)
        blocked, checked = self.blocked(emails), time.monotonic()
        ready = []
        for claim in batch:
            subscriber = profiles.get(claim.subscriber)
            why = blocked.why(claim.subscriber) or (None if subscriber else "no valid profile any more")
            if why:
                self.store.mark_empty(claim.subscriber, day, why, owner=me)
                report.add(Outcome(claim.subscriber, "skipped", why))
                bar(1)
            else:
                ready.append((claim, subscriber))
        # In stages, each over the whole batch: compose every digest, serialise (and sign) every message, then
        # hand over and record one at a time. Interleaving the three per digest cost 10% more CPU (each stage's
        # code and data pushed the others' out of the caches).
        composed = [self._wired(result) for result in self.compose([s for _, s in ready], day)]
        for n, ((claim, _), result) in enumerate(zip(ready, composed, strict=True)):
            if should_stop() or report.halted:
                break
            if isinstance(result, tuple) and result[1]:
                self.transport().pace()  # a rate limit's wait comes before the last looks at the clock and
            if self._overdue(report):  # at suppressions
                break
            if time.monotonic() - checked > RECHECK_SECONDS:  # an unsubscribe or pause that landed meanwhile
                blocked, checked = self.blocked([c.subscriber for c, _ in ready[n:]]), time.monotonic()
            why = blocked.why(claim.subscriber)
            if why:
                self.store.mark_empty(claim.subscriber, day, why, owner=me)
                report.add(Outcome(claim.subscriber, "skipped", why))
                bar(1)
                continue
            outcome = self._deliver_one(day, claim, result)
            report.add(outcome)
            bar(1)
            if outcome.stop and not report.halted:
                report.halted = outcome.reason
            if outcome.status != "sent":
                log.info("%s %s: %s", outcome.status, claim.subscriber, outcome.reason)

    def _wired(self, result: Composed | Exception) -> tuple[Composed, bytes] | Exception:
        """A composed digest with the bytes that go out (none for an empty one), or why it could not be had."""
        if isinstance(result, Exception):
            return result
        try:
            return result, self.wire(result.message) if result.digest.count else b""
        except Exception as exc:  # noqa: BLE001 - one message that cannot be signed must not stop the others
            return exc

    def _deliver_one(self, day: date, claim: Claim, wired: tuple[Composed, bytes] | Exception) -> Outcome:
        me, email = self.owner.id, claim.subscriber
        if isinstance(wired, database_errors()):  # not this digest's fault: the store failed, stop the run
            raise wired
        if isinstance(wired, Exception):  # one broken digest must not stop the others
            log.error("failed to build the digest for %s: %s: %s", email, wired.__class__.__name__, wired,
                      exc_info=wired)
            reason = f"{wired.__class__.__name__}: {wired}"
            self.store.mark_failed(email, day, reason, owner=me)
            return Outcome(email, "failed", reason)
        result, data = wired
        if result.digest.count == 0:
            self.store.mark_empty(email, day, "nothing new above the relevance floor", owner=me)
            return Outcome(email, "skipped", "nothing new above the relevance floor")
        if not self._keep_lease(day, email):
            return Outcome(email, "skipped", "taken over by another worker (our lease ran out)")
        return deliver_one(self.store, self.transport(), data, email, day, result.paper_ids,
                           self.policy.retry, self.policy.suppress_after, owner=me,
                           message_id=stored_header(result.message, "Message-ID") or "", journal=self._journal)


def queue_outcomes(queue: Queue, report: SendReport) -> None:
    """Count what enqueueing left out (already sent, bounced, suppressed, paused): skipped by this run."""
    for email, why in queue.skipped:
        report.add(Outcome(email, "skipped", why))
        log.info("skipped %s: %s", email, why)
    report.counts["skipped"] += queue.unlisted


def skip(report: SendReport, subscribers: Iterable[Subscriber],
         why: Callable[[Subscriber], str | None]) -> list[Subscriber]:
    """The subscribers with no reason to be skipped; each skipped one is counted with its reason."""
    out = []
    for subscriber in subscribers:
        reason = why(subscriber)
        if reason:
            report.add(Outcome(subscriber.email, "skipped", reason))
            log.info("skipped %s: %s", subscriber.email, reason)
        else:
            out.append(subscriber)
    return out
