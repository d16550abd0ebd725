"""`digest bounces`: read a mailbox of delivery reports and complaints, match each to a digest, suppress.

Each report is matched to the digest it is about by what only a real digest carries: the tagged
return path it was sent back to (`delivery.return_path`) or the original's Message-ID, both made
with the store's key, found on a row of the send log whose digest was sent (the row names the
subscriber and the date). Nothing else names a digest. The original's List-Unsubscribe link is
authentic, but every digest's footer carries it and anyone a digest was forwarded to holds it (and
its date): a report quoting it, with or without an X-Digest-Date, matches nothing. Nor does one
naming a subscriber by address alone, or by a Message-ID of the unkeyed kind earlier versions sent
(which anyone can compute) for a digest older than `web.link_days`, nor one quoting the Message-ID
of a digest that was never sent. Such a report is recorded, counted as unmatched with why, and
suppresses nobody. A hard bounce suppresses the address at once, soft bounces of
`bounces.soft_limit` digests within `bounces.soft_window_days` do, and a complaint unsubscribes.
Every report is recorded with what it did and its evidence (the sent digest it matched and by what,
or why it matched none) in one transaction, so reading the same mailbox again changes nothing and
counts nothing twice; a message that cannot be read is recorded too, so it is reported once.
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


MAX_IDS = 20  # Message-IDs and tags of one report looked up (a report quotes one of each)
MAX_QUOTED = 3  # unsubscribe links and X-Digest-Dates of one report read for its evidence (a digest has one of each)


@dataclass(frozen=True)
class Match:
    """The sent digest a report is about, and what in the report named it."""

    subscriber: str  # as the send log has it
    day: date  # the digest's date, from the send log (never from the report)
    by: str  # "Message-ID" | "return path"
    quoted: str  # the Message-ID or the return-path address the report carried (a MAC: they name nobody)

    @property
    def evidence(self) -> str:
        """As the report's record keeps it (no address: the bounce rows name the subscriber, and erasing an address
        rewrites those)."""
        return f"matched by the {self.by} {self.quoted}: the digest of {self.day} the send log has as sent"

    @property
    def short(self) -> str:
        """As the suppression's reason ends."""
        return f"the digest of {self.day}, matched by its {self.by}"


@dataclass(frozen=True)
class Finding:
    """What the matcher made of a report: the sent digest it names, or why it names none."""

    match: Match | None
    why: str = ""  # why no digest (names no address: it is kept with the report)
    named: tuple[str, ...] = ()  # subscribers the report names by their unsubscribe links (for the operator's note)


@dataclass(frozen=True)
class Matcher:
    """Finds the sent digest (subscriber, date) a report is about, from identifiers only a real digest carries."""

    store: Store
    signer: Signer
    return_path: str
    from_address: str
    old_ids_until: date  # an unkeyed Message-ID (earlier versions') names a digest dated on or after this

    def find(self, report: Report) -> Finding:
        """The sent digest named by the report's return path or the original's Message-ID; else why none is."""
        tags: dict[str, str] = {}
        if self.return_path:
            for address in report.addresses:
                if found := message_id_of(address, self.return_path, self.from_address):
                    tags.setdefault(found, address)
        ids = list(dict.fromkeys([*tags, *report.message_ids]))[:MAX_IDS]
        rows = {message_id: (subscriber, day, status)
                for subscriber, day, message_id, status in self.store.sent_digests(ids)}
        why = []
        for message_id in ids:
            quoted = f"return path {tags[message_id]}" if message_id in tags else f"Message-ID {message_id}"
            if message_id not in rows:
                why.append(f"the {quoted} is no digest in the send log")
                continue
            subscriber, day, status = rows[message_id]
            if status != "sent":
                why.append(f"the {quoted} is a digest of {day} never sent (the send log has it {status})")
            elif not is_keyed(message_id) and day < self.old_ids_until:
                why.append(f"the {quoted} is of the unkeyed kind (anyone can compute it) and its digest of {day} is "
                           f"older than web.link_days")
            else:
                by = "return path" if message_id in tags else "Message-ID"
                return Finding(Match(subscriber, day, by, tags.get(message_id, message_id)))
        links, named = self._links(report)
        return Finding(None, "; ".join(why + links) or "it quotes no Message-ID, return path or link of ours", named)

    def _links(self, report: Report) -> tuple[list[str], tuple[str, ...]]:
        """What the report's List-Unsubscribe links and X-Digest-Date say, and why they name no digest; the
        subscribers the links name."""
        said, named = [], []
        dates = [d for d in report.digest_dates if d][:MAX_QUOTED]
        for link in report.unsubscribe_links[:MAX_QUOTED]:
            try:
                token = self.signer.check("unsubscribe", urlsplit(link).path.rstrip("/").rpartition("/")[2])
            except BadToken:
                said.append("it quotes an unsubscribe link that is not ours (altered, or made without our key)")
                continue
            named.append(token.email.lower())
            sent = [f"{d}: {self._sent(token.email, d)}" for d in dates]
            said.append("it quotes a subscriber's unsubscribe link"
                        + (f" and X-Digest-Date {', '.join(sent)}" if sent else "")
                        + "; a link names no digest: every digest's footer carries it, so anyone a digest was "
                          "forwarded to holds it")
        return said, tuple(dict.fromkeys(named))

    def _sent(self, email: str, value: str) -> str:
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            return "not a date"
        status = self.store.digest_status(email, day)
        if status is None:
            return "no digest of that date was sent to them"
        return "a digest of that date was sent to them" if status == "sent" else f"never sent ({status})"


def _events(report: Report, match: Match | None, store: Store) -> list[BounceEvent]:
    """The report's failures about the digest it names, each with its subscriber and digest date (none when the
    report names no sent digest of ours: an address or a link alone suppresses nobody)."""
    if match is None:
        return []
    email, day = match.subscriber, match.day
    # (a send-log row of an address erased since names it by its hash already)
    key = email if email.startswith("sha256:") else forgotten_key(email) if store.is_forgotten(email) else email.lower()
    # A digest goes to one recipient: a report about several names it among them (or hides it), and the others
    # are nobody we can tell.
    failures = [f for f in report.failures if len(report.failures) == 1 or f.recipient in ("", email.lower())]
    return [BounceEvent(key, f.kind, f.status, f.detail, day, report.arrived, match.short) for f in failures]


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
    done = record(store, report, matcher, soft)
    if done.made is None:  # another process recorded it meanwhile
        summary.counts["seen"] += 1
        return
    summary.counts[done.outcome] += 1
    summary.suppressed += done.made
    if done.outcome == "unmatched":
        summary.notes.append(f"{item.where}: {done.note}")
    for email, reason in done.made:
        log.info("suppressed %s: %s", email, reason)


@dataclass(frozen=True)
class Recorded:
    """What recording one report did."""

    outcome: str  # one of OUTCOMES
    made: list[tuple[str, str]] | None  # (address, reason) of each suppression made; None: it was recorded already
    note: str  # for the operator: the sent digest it matched and by what, or why it matched none and whom it named


def record(store: Store, report: Report, matcher: Matcher, soft: SoftPolicy) -> Recorded:
    """Match one report (a provider webhook's event, read into a Report) and record it with its evidence in one
    transaction, as a mailbox's are."""
    finding = matcher.find(report) if report.failures else Finding(None)
    events = _events(report, finding.match, store)
    outcome = _outcome(report, events)
    if finding.match is not None:
        evidence = note = finding.match.evidence
    elif outcome == "unmatched":
        evidence, note = f"unmatched: {finding.why}", _unmatched(store, report, finding)
    else:
        evidence = note = ""
    return Recorded(outcome, store.record_report(report.key, outcome, events, soft, evidence), note)


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


def _unmatched(store: Store, report: Report, finding: Finding) -> str:
    """What an operator is told of a report that names no sent digest of ours."""
    recipients = [f.recipient for f in report.failures if f.recipient]
    who = ", ".join(recipients) or "(recipient hidden)"
    kind = report.failures[0].kind
    ours = sorted(store.subscribed_among(recipients[:MAX_IDS])) if recipients else []
    ours += [e for e in finding.named if e not in ours]
    if ours:
        return (f"a {kind} report about {who} names subscriber {', '.join(ours)} but no digest sent to them "
                f"({finding.why}); an address or a link alone suppresses nobody: it could be forged")
    return f"a {kind} report about {who} matches no digest sent by us ({finding.why})"


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
