"""Sending: one run delivers every due digest through the transport, each subscriber on their own.

`App` (in `pipeline`) inherits these methods; they use its store, settings and `compose`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import date
from email.message import EmailMessage
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Config
from .deliver import OutboxTransport, Outcome, RetryPolicy, Transport, deliver_one, send_test
from .errors import UsageError
from .logs import progress
from .models import Subscriber
from .select import Pool, Signals
from .select.batch import prepare
from .signing import DkimSigner
from .smtp import SmtpSettings, SmtpTransport
from .store import DeliveryRecord
from .subscribers import is_delivery_day, is_email

if TYPE_CHECKING:
    from .pipeline import App, Composed

log = logging.getLogger("digest")
NOT_ATTEMPTED = "not attempted"  # the reason of digests left pending because the transport stopped


@dataclass
class SendReport:
    """The outcome of every digest of one send run."""

    day: date
    outcomes: list[Outcome] = field(default_factory=list)
    invalid_profiles: int = 0
    halted: str = ""  # why the transport stopped taking messages, if it did

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def retried(self) -> int:
        return sum(1 for o in self.outcomes if o.retries)

    @property
    def suppressed(self) -> int:
        return sum(1 for o in self.outcomes if o.suppressed)

    @property
    def ok(self) -> bool:
        return not (self.count("failed") or self.count("deferred") or self.halted)

    def summary(self) -> str:
        verb = "would send" if self.count("dry-run") else "sent"
        sent = self.count("dry-run") or self.count("sent")
        text = (f"{self.day}: {verb} {sent}, skipped {self.count('skipped')}, failed {self.count('failed')}, "
                f"deferred {self.count('deferred')}, retried {self.retried}, suppressed {self.suppressed}")
        return text + (f", {self.invalid_profiles} invalid profiles" if self.invalid_profiles else "")


@dataclass
class _Run:
    """What one send run reads once and shares across its subscribers."""

    day: date
    pool: Pool
    suppressed: dict[str, str]
    signals: dict[str, Signals]
    done: dict[str, DeliveryRecord]  # sent or bounced on this date: never sent again
    dry_run: bool
    halted: str = ""


def make_transport(config: Config, environ: Mapping[str, str], *, test: bool = False) -> Transport:
    """The transport `delivery.transport` names; test sends to the outbox go to its `test/` folder."""
    if config.delivery.transport == "smtp":
        return SmtpTransport(SmtpSettings.from_config(config, environ), config.newsletter.from_address)
    folder = Path(config.delivery.outbox)
    return OutboxTransport(folder / "test" if test else folder)


class Delivering:
    """The sending half of `App`: the transport, DKIM, and the send run."""

    _transport: Transport | None
    config: Config
    retry: RetryPolicy

    @property
    def transport(self) -> Transport:
        """Made on first use, so that previews and ingests never need the SMTP password."""
        if self._transport is None:
            self._transport = make_transport(self.config, os.environ)
        return self._transport

    @cached_property
    def dkim(self) -> DkimSigner | None:
        """The signer `[dkim]` asks for (None: no signing), read when first needed."""
        return DkimSigner.from_config(self.config, os.environ)

    def wire(self, message: EmailMessage) -> bytes:
        """The bytes that go out: the message as serialised, DKIM-signed when configured."""
        data = message.as_bytes()
        return self.dkim(data) if self.dkim else data

    def send(self: App, day: date, *, dry_run: bool = False, only: str | None = None,
             emails: Collection[str] | None = None, should_stop: Callable[[], bool] = lambda: False) -> SendReport:
        """Deliver every due digest for `day` (of `emails` when given); each subscriber independent of the others.

        `should_stop` is asked between digests: a daemon told to stop finishes the message in flight
        and leaves the rest for its next run.
        """
        roster = self.roster()
        if not dry_run:
            _ = self.transport, self.dkim  # a settings error (no password, bad key) stops the run before it starts
        report = SendReport(day, invalid_profiles=len(roster.invalid_files))
        done = {r.subscriber: r for r in self.store.deliveries_on(day) if r.status in ("sent", "bounced")}
        blocked = {email.lower(): f"suppressed ({why})" for email, why in self.store.suppressed().items()}
        blocked.update({email: f"paused until {p.paused_until}" for email, p in self.store.preferences().items()
                        if p.paused_until and p.paused_until >= day and email not in blocked})
        chosen = self.chosen(roster, only)
        if emails is not None:
            wanted = {e.lower() for e in emails}
            chosen = [s for s in chosen if s.email.lower() in wanted]
        pool = self.pool(day)
        prepare(pool, chosen, self.settings)  # every subscriber's keywords in one sparse product
        run = _Run(day, pool, blocked, self.signals(chosen, day), done, dry_run)
        with self.renderer.pinned():
            for subscriber in progress(chosen, len(chosen), f"sending {day}"):
                if should_stop():
                    break
                report.outcomes.append(self._attempt(subscriber, run, report))
        return report

    def _attempt(self: App, subscriber: Subscriber, run: _Run, report: SendReport) -> Outcome:
        """One subscriber's delivery; an error building their digest fails only theirs."""
        try:
            outcome = self._send_one(subscriber, run)
        except Exception as exc:  # one broken digest must not stop the others
            log.exception("failed to build the digest for %s", subscriber.email)
            outcome = Outcome(subscriber.email, "failed", f"{exc.__class__.__name__}: {exc}")
        if outcome.stop and not run.halted:
            run.halted = report.halted = outcome.reason
        if outcome.status != "sent":
            log.info("%s %s: %s", outcome.status, subscriber.email, outcome.reason)
        return outcome

    def _send_one(self: App, subscriber: Subscriber, run: _Run) -> Outcome:
        email = subscriber.email
        if email in run.done:
            record = run.done[email]
            return Outcome(email, "skipped", "already sent" if record.status == "sent"
                           else f"bounced on this date: {record.detail}")
        if email.lower() in run.suppressed:
            return Outcome(email, "skipped", run.suppressed[email.lower()])
        if not is_delivery_day(subscriber.frequency, run.day):
            return Outcome(email, "skipped", f"not a delivery day for frequency {subscriber.frequency}")
        composed = self.compose(subscriber, run.day, run.pool, signals=run.signals[email])
        if composed.digest.count == 0:
            return Outcome(email, "skipped", "nothing new above the relevance floor")
        if run.dry_run:
            return Outcome(email, "dry-run", f"{composed.digest.count} papers: {composed.rendered.subject}")
        if run.halted:
            return Outcome(email, "deferred", f"{NOT_ATTEMPTED}: {run.halted}")
        ident = str(composed.message["Message-ID"])
        return deliver_one(self.store, self.transport, self.wire(composed.message), ident, email, run.day,
                           composed.paper_ids, self.retry, self.config.delivery.suppress_after)

    def send_test(self: App, day: date, only: str, to: str) -> tuple[Composed, Outcome]:
        """Send `only`'s digest to the address `to`, marked as a test; the send log is not touched."""
        if not is_email(to):
            raise UsageError(f"--to {to!r} is not an email address (like ada@example.org)")
        [subscriber] = self.chosen(self.roster(), only)
        composed = self.compose(subscriber, day, self.pool(day), test_to=to)
        transport = self._transport or make_transport(self.config, os.environ, test=True)
        try:
            return composed, send_test(transport, self.wire(composed.message), to, day, self.retry)
        finally:
            if transport is not self._transport:
                transport.close()
