"""Dispatch: a date's due digests queued in the store, then delivered by senders in one or more worker processes.

`queue_date` (or `queue_one`) queues the digests due on a date; `Senders.deliver` starts the workers
(`workers.in_processes`), each of which claims and delivers batches (`sender.Sender`), and merges their
reports; `dry_run` composes the same digests and queues nothing. Everything is passed in: the store, the
outgoing side (`mailer.Mailer`) and a batch composer; nothing here knows how a digest is made.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, time, timedelta
from itertools import islice
from pathlib import Path

from digest.delivery import journal
from digest.delivery.handover import Outcome
from digest.delivery.mailer import Mailer
from digest.delivery.owners import Owner
from digest.delivery.sender import KEEP_OUTCOMES, Blocked, ComposeBatch, Sender, SendReport, queue_outcomes, skip
from digest.delivery.workers import Died, in_processes
from digest.errors import StoreError
from digest.logs import progress
from digest.memory import held
from digest.models import Composed, Subscriber, is_delivery_day
from digest.schedule import Slot
from digest.store import Queue, Store
from digest.store.engine import database_errors, explain
from digest.store.runs import this_process
from digest.store.tables import _now

log = logging.getLogger("digest")


def blocked(store: Store, day: date) -> Callable[[Sequence[str]], Blocked]:
    """Who of some subscribers gets nothing on `day`: suppressed, or paused on the preferences page."""
    def check(emails: Sequence[str]) -> Blocked:
        reasons = {e: f"suppressed ({why})" for e, why in store.suppressed_among(emails).items()}
        for email, pref in store.preferences_among(emails).items():
            if pref.paused_until and pref.paused_until >= day:
                reasons.setdefault(email, f"paused until {pref.paused_until}")
        return Blocked(reasons)
    return check


def journal_folder(store: Store, base: Path) -> Path:
    """Where the sent journal lives: beside a SQLite file, else in `base` (the settings file's folder)."""
    url = store.engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        return Path(url.database).parent
    return base


def replay_journal(store: Store, folder: Path) -> None:
    """Record what an earlier run's server accepted and its database could not, before anything else."""
    try:
        done = journal.replay(folder, store.mark_sent)
    except database_errors() as exc:
        raise StoreError(f"cannot record the messages kept in the sent journal ({folder}): {explain(exc)}") from exc
    if done:
        log.warning("recorded %d sent digests from the sent journal", done)


def _slot(slot: Slot) -> tuple[str, time, str]:
    return slot.timezone, slot.send_at, slot.frequency


def on_day(slots: Sequence[Slot], day: date) -> list[tuple[str, time, str]]:
    """The slots that have a digest on `day` (their frequency's delivery day)."""
    return [_slot(s) for s in slots if is_delivery_day(s.frequency, day)]


def resting(store: Store, day: date, slots: Sequence[Slot], report: SendReport) -> None:
    """Count the subscribers of slots with no digest on `day` (a weekly slot on another day) as skipped."""
    by_frequency: dict[str, list[tuple[str, time, str]]] = {}
    for slot in slots:
        if not is_delivery_day(slot.frequency, day):
            by_frequency.setdefault(slot.frequency, []).append(_slot(slot))
    for frequency, its_slots in by_frequency.items():
        emails, total = store.emails_in_slots(its_slots, KEEP_OUTCOMES)
        why = f"not a delivery day for frequency {frequency}"
        for email in emails:
            report.add(Outcome(email, "skipped", why))
            log.info("skipped %s: %s", email, why)
        report.counts["skipped"] += total - len(emails)


def claims_elsewhere(store: Store, day: date, group: str = "") -> dict[str, int]:
    """How many digests of `day` each send run or worker has claimed, as each records it in the store, leaving out
    the senders of `group` (this send's own processes)."""
    found = {}
    for row in store.workers(_now() - timedelta(days=1)):
        owner, claimed = str(row["owner"]), row["claimed"]
        if row["digest_date"] == day and isinstance(claimed, int) and not _of_group(owner, group):
            found[owner] = claimed
    return found


def _of_group(owner: str, group: str) -> bool:
    parsed = Owner.parse(owner)
    return parsed is not None and parsed.of_group(group)


def queue_date(store: Store, day: date, slots: Sequence[Slot], transport: str, report: SendReport) -> Queue:
    """Queue the digests due on `day` for the subscribers of `slots`; what it leaves out is counted as skipped."""
    report.claims_before = claims_elsewhere(store, day)
    resting(store, day, slots, report)
    queue = store.enqueue_slots(day, on_day(slots, day), transport)
    queue_outcomes(queue, report)
    return queue


def due_one(store: Store, day: date, subscriber: Subscriber, report: SendReport) -> list[Subscriber]:
    """`digest send --subscriber`: that subscriber, unless they are blocked or it is not their delivery day (then
    counted as skipped, with the reason)."""
    check = blocked(store, day)([subscriber.email])
    return skip(report, [subscriber], lambda s: check.why(s.email) or (
        None if is_delivery_day(s.frequency, day) else f"not a delivery day for frequency {s.frequency}"))


def queue_one(store: Store, day: date, due: Sequence[Subscriber], *, transport: str,
              message_id: Callable[[str], str], report: SendReport) -> Queue:
    """The digest of one subscriber (`due_one`) queued through the same queue and claims as everyone's."""
    report.claims_before = claims_elsewhere(store, day)
    queue = store.enqueue(day, [s.email for s in due], transport=transport, message_id=message_id)
    queue_outcomes(queue, report)
    return queue


@dataclass(frozen=True)
class Senders:
    """What a date's senders share: the store, the outgoing side, where the sent journal lives, how many processes."""

    store: Store
    mailer: Mailer
    journal: Path
    workers: int = 1

    def sender(self, compose: ComposeBatch, day: date, command: str = "send", *, group: str = "",
               runs_of: str | None = None) -> Sender:
        """One sender of `day`'s digests, composed by `compose` (one of the senders of `group`, keeping the runs of
        the process `runs_of` alive)."""
        mailer = self.mailer
        return Sender(self.store, compose=compose, profiles=self.store.subscribers_by_email,
                      transport=lambda: mailer.transport, wire=mailer.wire, blocked=blocked(self.store, day),
                      policy=mailer.policy(), owner=Owner.current(group), command=command,
                      journal_folder=self.journal, runs_of=runs_of)

    def deliver(self, compose: ComposeBatch, day: date, report: SendReport, *, should_stop: Callable[[], bool],
                command: str, warm: Callable[[], None], only: str | None = None, total: int | None = None) -> None:
        """Claim and deliver the queued digests of `day` in up to `workers` processes (`warm` prepares what they
        share before they fork), and merge what each did into `report`, with how many digests of `day` other runs
        and workers claimed meanwhile (`others`: counted from what they record, never inferred)."""
        workers = max(1, min(self.workers, total if total is not None else self.workers))
        group, starter = secrets.token_hex(3), this_process()  # this send's processes; the one whose run it is
        before = report.claims_before if report.claims_before is not None else claims_elsewhere(self.store, day)

        def job(stop: Callable[[], bool]) -> SendReport:
            from threadpoolctl import threadpool_limits

            mine = SendReport(day)
            if workers > 1:
                self.mailer.transport.share(workers)  # the rate limits are for the run, not for each process
            # A batch's matrix products are small: BLAS threads would spin idle on the cores other workers use.
            with threadpool_limits(limits=1, user_api="blas"):
                sender = self.sender(compose, day, command, group=group, runs_of=starter)
                return sender.work(day, mine, only=only, should_stop=stop, total=total if workers == 1 else None)

        if workers > 1:
            warm()  # once, before the fork: the children share it
        # What the run holds from here on (the pool, its index, the settings, the modules) lives until it ends: out of
        # the collector's full passes (`memory.held`). Day-8 send of 10,000 readers: 1.75 -> 0.56 s of collection.
        with held():
            results = in_processes(workers, job, should_stop=should_stop, before_fork=self.store.close)
        if any(isinstance(r, Died) for r in results) and not should_stop():
            results.append(job(should_stop))  # take over what a dead worker held (its claims are free at once)
        for result in results:
            if isinstance(result, Died):
                report.add(Outcome("(worker)", "failed", str(result)))
            else:
                report.merge(result)
        report.others += self._claimed_since(day, before, group)

    def _claimed_since(self, day: date, before: dict[str, int], group: str) -> int:
        """The digests of `day` that runs and workers outside `group` claimed since they had claimed `before` (0 when
        the store cannot say: a failing database is no other worker)."""
        try:
            now = claims_elsewhere(self.store, day, group)
        except database_errors():
            return 0
        return sum(max(0, claimed - before.get(owner, 0)) for owner, claimed in now.items())


def dry_run(store: Store, compose: ComposeBatch, due: Iterator[Subscriber], day: date, report: SendReport, *,
            batch: int) -> SendReport:
    """Compose the digests of `due` a batch at a time; nothing is queued, claimed or sent."""
    check = blocked(store, day)
    with progress(store.count_subscribers(), f"sending {day}") as bar:
        while subscribers := list(islice(due, batch)):
            found = check([s.email for s in subscribers])
            ready = skip(report, subscribers, lambda s, found=found: found.why(s.email))
            _dry_batch(ready, compose(ready, day), report)
            bar(len(subscribers))
    return report


def _dry_batch(batch: Sequence[Subscriber], results: Iterator[Composed | Exception], report: SendReport) -> None:
    for subscriber, result in zip(batch, results, strict=True):
        if isinstance(result, Exception):
            report.add(Outcome(subscriber.email, "failed", f"{result.__class__.__name__}: {result}"))
        elif result.digest.count == 0:
            report.add(Outcome(subscriber.email, "skipped", "nothing new above the relevance floor"))
        else:
            report.add(Outcome(subscriber.email, "dry-run", f"{result.digest.count} papers: {result.rendered.subject}"))
