"""`digest bounces`: read a mailbox of delivery reports and complaints, match each to a digest, suppress.

Each report is matched to the digest it is about by what only a real digest carries: the tagged
return path it was sent back to (`delivery.return_path`) or the original's Message-ID, both made
with the store's key and found in the send log, or the original's List-Unsubscribe link (an
authenticated token). A report naming one of our subscribers by address alone, or by a Message-ID
of the unkeyed kind earlier versions sent (which anyone can compute) for a digest older than
`web.link_days`, could be forged by anyone: it is recorded, counted as unmatched and suppresses
nobody. A hard bounce suppresses the address at once, soft bounces of `bounces.soft_limit` digests
within `bounces.soft_window_days` do, and a complaint unsubscribes. Every report is recorded with
what it did in one transaction, so reading the same mailbox again changes nothing and counts nothing
twice; a message that cannot be read is recorded too, so it is reported once.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

from digest.bounces.mailboxes import Item
from digest.bounces.reports import MAX_MESSAGE_BYTES, Report, Unreadable, parse_report
from digest.delivery.message import is_keyed
from digest.delivery.returnpath import message_id_of
from digest.errors import DigestError
from digest.store import BounceEvent, SoftPolicy, Store, forgotten_key
from digest.tokens import BadToken, Signer

if TYPE_CHECKING:
    from digest.config import Config


class Parts(Protocol):
    """What reading bounces needs of a command: its settings, store and link signer (`app.App` has them)."""

    config: Config
    store: Store
    signer: Signer

log = logging.getLogger("digest.bounces")
SEVERITY = ("complaint", "hard", "soft")  # a report's outcome is its most severe matched event
OUTCOMES = ("hard", "soft", "complaint", "unmatched", "ignored", "unreadable")  # as mail_reports records them


@dataclass
class BounceSummary:
    """What one read of a mailbox found and did."""

    counts: Counter[str] = field(default_factory=Counter)
    suppressed: list[tuple[str, str]] = field(default_factory=list)  # (address, reason) newly suppressed
    problems: list[str] = field(default_factory=list)  # "where: why" of each message that could not be read
    notes: list[str] = field(default_factory=list)  # reports that name no digest of ours (unmatched)
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


MAX_IDS = 20  # Message-IDs, tags and links of one report looked up (a report quotes one of each)


@dataclass(frozen=True)
class Matcher:
    """Finds the digest (subscriber, date) a report is about, from identifiers only a real digest carries."""

    store: Store
    signer: Signer
    return_path: str
    from_address: str
    old_ids_until: date  # an unkeyed Message-ID (earlier versions') names a digest dated on or after this

    def digest(self, report: Report) -> tuple[str, date | None] | None:
        """The digest named by the report's return path, the original's Message-ID or its unsubscribe link."""
        ids = list(report.message_ids)
        if self.return_path:
            ids = [m for a in report.addresses if (m := message_id_of(a, self.return_path, self.from_address))] + ids
        for subscriber, day, message_id in self.store.sent_digests(ids[:MAX_IDS]):
            if is_keyed(message_id) or day >= self.old_ids_until:
                return subscriber, day
        for link in report.unsubscribe_links[:MAX_IDS]:
            try:
                token = self.signer.check("unsubscribe", urlsplit(link).path.rstrip("/").rpartition("/")[2])
            except BadToken:
                continue
            return token.email, _day(report.digest_dates) or token.issued
        return None


def _day(values: Iterable[str]) -> date | None:
    for value in values:
        try:
            return date.fromisoformat(value)
        except ValueError:
            continue
    return None


def _events(report: Report, matcher: Matcher) -> list[BounceEvent]:
    """The report's failures about the digest it names, each with its subscriber and digest date (none when the
    report names no digest of ours: an address alone suppresses nobody)."""
    found = matcher.digest(report) if report.failures else None
    if found is None:
        return []
    email, day = found
    if email.startswith("sha256:"):  # the send log's row of an address erased since
        key = email
    else:
        key = forgotten_key(email) if matcher.store.is_forgotten(email) else email.lower()
    # A digest goes to one recipient: a report about several names it among them (or hides it), and the others
    # are nobody we can tell.
    failures = [f for f in report.failures if len(report.failures) == 1 or f.recipient in ("", email.lower())]
    return [BounceEvent(key, f.kind, f.status, f.detail, day, report.arrived) for f in failures]


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
    if item.data is None:  # could not be fetched: tried again on the next read
        summary.counts["unreadable"] += 1
        summary.problems.append(f"{item.where}: {item.error}")
        return
    try:
        report = parse_report(item.data)
    except Unreadable as exc:
        _unreadable(store, item, str(exc), summary)
        return
    if store.seen_reports([report.key]):
        summary.counts["seen"] += 1
        return
    outcome, made = record(store, report, matcher, soft)
    if made is None:  # another process recorded it meanwhile
        summary.counts["seen"] += 1
        return
    summary.counts[outcome] += 1
    summary.suppressed += made
    if outcome == "unmatched":
        summary.notes.append(f"{item.where}: {_unmatched(store, report)}")
    for email, reason in made:
        log.info("suppressed %s: %s", email, reason)


def record(store: Store, report: Report, matcher: Matcher,
           soft: SoftPolicy) -> tuple[str, list[tuple[str, str]] | None]:
    """Match one report (a provider webhook's event, read into a Report) and record it in one transaction, as
    a mailbox's are: its outcome, and the suppressions made (None when it was recorded already)."""
    events = _events(report, matcher)
    outcome = _outcome(report, events)
    return outcome, store.record_report(report.key, outcome, events, soft)


def policy(app: Parts, today: date) -> tuple[Matcher, SoftPolicy]:
    """The matcher and soft-bounce policy of the app's settings, as of `today`."""
    config = app.config
    since = today - timedelta(days=config.web.link_days)
    matcher = Matcher(app.store, app.signer, config.delivery.return_path, config.newsletter.from_address, since)
    return matcher, SoftPolicy(config.bounces.soft_limit, timedelta(days=config.bounces.soft_window_days))


def _unreadable(store: Store, item: Item, why: str, summary: BounceSummary) -> None:
    """Report an unreadable message once: it is recorded by the hash of its bytes, and found there next time."""
    key = "sha256:" + hashlib.sha256(item.data or b"").hexdigest()
    if store.seen_reports([key]) or store.record_report(key, "unreadable", [], SoftPolicy()) is None:
        summary.counts["seen"] += 1
        return
    summary.counts["unreadable"] += 1
    summary.problems.append(f"{item.where}: {why}")


def _unmatched(store: Store, report: Report) -> str:
    """What an operator is told of a report that names no digest of ours."""
    recipients = [f.recipient for f in report.failures if f.recipient]
    who = ", ".join(recipients) or "(recipient hidden)"
    ids = ", ".join(report.message_ids) or "none quoted"
    kind = report.failures[0].kind
    ours = sorted(store.subscribed_among(recipients[:MAX_IDS])) if recipients else []
    if ours:
        return (f"a {kind} report about {who} names subscriber {', '.join(ours)} but none of their digests "
                f"(original Message-ID: {ids}); an address alone suppresses nobody: it could be forged")
    return f"a {kind} report about {who} matches no digest or subscriber (original Message-ID: {ids})"


def read_mailbox(app: Parts, *, maildir: Path | None = None, mbox: Path | None = None, imap: str | None = None,
                 environ: Mapping[str, str] | None = None, today: date | None = None) -> BounceSummary:
    """`digest bounces`: the named mailbox read, matched and recorded with the app's settings and store."""
    from digest.bounces import mailboxes

    config = app.config
    if maildir is not None:
        items = mailboxes.maildir(maildir, MAX_MESSAGE_BYTES)
    elif mbox is not None:
        items = mailboxes.mbox(mbox, MAX_MESSAGE_BYTES)
    else:
        items = mailboxes.imap(imap or "", os.environ if environ is None else environ,
                               config.bounces.imap_password_env, MAX_MESSAGE_BYTES)
    matcher, soft = policy(app, today or date.today())
    return process(app.store, items, matcher, soft)
