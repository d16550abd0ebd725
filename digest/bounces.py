"""`digest bounces`: read a mailbox of delivery reports and complaints, match each to a digest, suppress.

Each report is matched to the digest it is about by, in order: the tagged return path it was sent
back to (`delivery.return_path`), the original's Message-ID (both found in the send log), the
subscriber named by the original's List-Unsubscribe link (an authenticated token), and at last the
failed recipient's address if it is a subscriber's. A hard bounce suppresses the address at once,
soft bounces of `bounces.soft_limit` digests within `bounces.soft_window_days` do, and a complaint
unsubscribes. Every report is recorded with what it did in one transaction, so reading the same
mailbox again changes nothing and counts nothing twice.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from .errors import DigestError
from .mailboxes import Item
from .reports import Failure, Report, Unreadable, parse_report
from .returnpath import message_id_of
from .store import BounceEvent, SoftPolicy, Store, forgotten_key
from .tokens import BadToken, Signer

if TYPE_CHECKING:
    from .pipeline import App

log = logging.getLogger("digest.bounces")
SEVERITY = ("complaint", "hard", "soft")  # a report's outcome is its most severe matched event
OUTCOMES = ("hard", "soft", "complaint", "unmatched", "ignored")


@dataclass
class BounceSummary:
    """What one read of a mailbox found and did."""

    counts: Counter[str] = field(default_factory=Counter)
    suppressed: list[tuple[str, str]] = field(default_factory=list)  # (address, reason) newly suppressed
    problems: list[str] = field(default_factory=list)  # "where: why" of each message that could not be read
    notes: list[str] = field(default_factory=list)  # reports that match no digest or subscriber
    stopped: str = ""  # the mailbox failed part way (the messages before were processed)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.stopped

    def line(self) -> str:
        c = self.counts
        reports = sum(c[k] for k in ("hard", "soft", "complaint", "unmatched"))
        return (f"{sum(c.values())} messages, {reports} reports: hard {c['hard']}, soft {c['soft']}, complaints "
                f"{c['complaint']}, unmatched {c['unmatched']}, unreadable {c['unreadable']}; other mail "
                f"{c['ignored']}, already processed {c['seen']}; suppressed {len(self.suppressed)}")


@dataclass(frozen=True)
class Matcher:
    """Finds the digest (subscriber, date) a report is about."""

    store: Store
    signer: Signer
    return_path: str
    from_address: str

    def strong(self, report: Report) -> tuple[str, date | None] | None:
        """The digest named by the report's return path or the original's Message-ID or unsubscribe link."""
        ids = list(report.message_ids)
        if self.return_path:
            ids = [m for a in report.addresses if (m := message_id_of(a, self.return_path, self.from_address))] + ids
        found = self.store.sent_digest(ids)
        if found:
            return found
        for link in report.unsubscribe_links:
            try:
                token = self.signer.check("unsubscribe", urlsplit(link).path.rstrip("/").rpartition("/")[2])
            except BadToken:
                continue
            return token.email, _day(report.digest_dates) or token.issued
        return None

    def recipient(self, failure: Failure) -> str | None:
        """The subscriber (or erased address, as its key) the failed recipient is, if any."""
        if not failure.recipient:
            return None
        known = self.store.known_address(failure.recipient)
        if known:
            return known
        return forgotten_key(failure.recipient) if self.store.is_forgotten(failure.recipient) else None


def _day(values: Iterable[str]) -> date | None:
    for value in values:
        try:
            return date.fromisoformat(value)
        except ValueError:
            continue
    return None


def _events(report: Report, matcher: Matcher) -> list[BounceEvent]:
    """The report's failures that are about our digests, each with its subscriber and digest date."""
    strong = matcher.strong(report) if report.failures else None
    events = []
    for failure in report.failures:
        email, day = None, None
        if strong and (len(report.failures) == 1 or failure.recipient in ("", strong[0].lower())):
            email, day = strong
        else:
            email = matcher.recipient(failure)
        if email is None:
            continue
        if email.startswith("sha256:"):  # a digest of an address erased since
            key = email
        else:
            key = forgotten_key(email) if matcher.store.is_forgotten(email) else email.lower()
        events.append(BounceEvent(key, failure.kind, failure.status, failure.detail, day, report.arrived))
    return events


def _outcome(report: Report, events: list[BounceEvent]) -> str:
    if not report.failures:
        return "ignored"
    kinds = {e.kind for e in events}
    return next((k for k in SEVERITY if k in kinds), "unmatched")


def process(store: Store, items: Iterable[Item], matcher: Matcher, soft: SoftPolicy) -> BounceSummary:
    """Read every message, match and record each report; one bad message never stops the others."""
    summary = BounceSummary()
    try:
        for item in items:
            _one(store, item, matcher, soft, summary)
    except DigestError as exc:  # the mailbox itself failed part way (an IMAP connection lost)
        summary.stopped = str(exc)
    return summary


def _one(store: Store, item: Item, matcher: Matcher, soft: SoftPolicy, summary: BounceSummary) -> None:
    if item.data is None:
        summary.counts["unreadable"] += 1
        summary.problems.append(f"{item.where}: {item.error}")
        return
    try:
        report = parse_report(item.data)
    except Unreadable as exc:
        summary.counts["unreadable"] += 1
        summary.problems.append(f"{item.where}: {exc}")
        return
    if store.seen_reports([report.key]):
        summary.counts["seen"] += 1
        return
    events = _events(report, matcher)
    outcome = _outcome(report, events)
    made = store.record_report(report.key, outcome, events, soft)
    if made is None:  # another process recorded it meanwhile
        summary.counts["seen"] += 1
        return
    summary.counts[outcome] += 1
    summary.suppressed += made
    if outcome == "unmatched":
        who = ", ".join(f.recipient or "(recipient hidden)" for f in report.failures)
        ids = ", ".join(report.message_ids) or "none quoted"
        summary.notes.append(f"{item.where}: a {report.failures[0].kind} report about {who} matches no digest or "
                             f"subscriber (original Message-ID: {ids})")
    for email, reason in made:
        log.info("suppressed %s: %s", email, reason)


def read_mailbox(app: App, *, maildir: Path | None = None, mbox: Path | None = None, imap: str | None = None,
                 environ: Mapping[str, str] | None = None) -> BounceSummary:
    """`digest bounces`: the named mailbox read, matched and recorded with the app's settings and store."""
    from . import mailboxes

    config = app.config
    if maildir is not None:
        items = mailboxes.maildir(maildir)
    elif mbox is not None:
        items = mailboxes.mbox(mbox)
    else:
        items = mailboxes.imap(imap or "", os.environ if environ is None else environ,
                               config.bounces.imap_password_env)
    matcher = Matcher(app.store, app.signer, config.delivery.return_path, config.newsletter.from_address)
    soft = SoftPolicy(config.bounces.soft_limit, timedelta(days=config.bounces.soft_window_days))
    return process(app.store, items, matcher, soft)
