"""The orchestrator: ingest → select → render → mail → deliver, one short function per job.

Preview, dry run and send all go through `App.compose`, so what is previewed is what is sent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from email.message import EmailMessage
from pathlib import Path

from . import sources
from .config import Config
from .deliver import OutboxTransport, Outcome, Transport, deliver_one, safe_name, write_atomic
from .errors import UsageError
from .logs import progress
from .mail import build_message
from .models import Digest, Links, RecordError, Rendered, Subscriber
from .render import Renderer
from .select import Pool, SelectSettings, select_digest
from .store import Store
from .subscribers import Roster, is_delivery_day, load_subscribers
from .tokens import Signer

log = logging.getLogger("digest")
QUIET_DAY_PAPERS = 3


@dataclass
class IngestReport:
    """What an ingest read and what it changed."""

    files: int = 0
    records: int = 0
    distinct: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    errors: list[RecordError] = field(default_factory=list)

    def summary(self) -> str:
        return (f"ingested {self.records} records from {self.files} files: {self.distinct} distinct papers "
                f"({self.new} new, {self.updated} updated, {self.unchanged} unchanged), "
                f"{len(self.errors)} errors")


@dataclass
class SendReport:
    """The outcome of every digest of one send run."""

    day: date
    outcomes: list[Outcome] = field(default_factory=list)
    invalid_profiles: int = 0

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    def summary(self) -> str:
        verb = "would send" if self.count("dry-run") else "sent"
        sent = self.count("dry-run") or self.count("sent")
        text = (f"{self.day}: {verb} {sent}, skipped {self.count('skipped')}, "
                f"failed {self.count('failed')}")
        return text + (f", {self.invalid_profiles} invalid profiles" if self.invalid_profiles else "")


@dataclass(frozen=True)
class Composed:
    """One subscriber's digest for one date, at every stage."""

    digest: Digest
    rendered: Rendered
    message: EmailMessage

    @property
    def paper_ids(self) -> list[int]:
        return [i.paper.store_id for i in self.digest.items if i.paper.store_id is not None]


class App:
    """Everything one command needs, opened from the settings."""

    def __init__(self, config: Config, *, transport: Transport | None = None) -> None:
        self.config = config
        self.store = Store(config.store.url)
        overrides = [config.render.templates] if config.render.templates else []
        self.renderer = Renderer(overrides)
        self.newsletter = config.newsletter_info
        secret = os.environ.get(config.newsletter.secret_env) or self.store.secret()
        self.signer = Signer(secret)
        self.settings = SelectSettings(**{k: float(getattr(config.select, k)) for k in (
            "relevance_floor", "title_weight", "upvote_weight", "recency_weight", "recency_half_life_days")})
        self.transport = transport or OutboxTransport(Path(config.delivery.outbox))

    def close(self) -> None:
        self.transport.close()
        self.store.close()

    # -- ingest -----------------------------------------------------------------

    def ingest(self, paths: Sequence[Path], *, seen_on: date) -> IngestReport:
        """Parse every file under `paths` and merge its papers into the store."""
        report = IngestReport()
        files = sources.iter_paths(list(paths))
        if not files:
            raise UsageError(f"no input files found in {', '.join(map(str, paths))}")
        papers = []
        for path in files:
            try:
                result = sources.parse_file(path, seen_on=seen_on)
            except sources.SourceError as exc:
                report.errors.append(RecordError(str(path), None, str(exc)))
                continue
            report.files += 1
            report.records += len(result.papers)
            report.errors.extend(result.errors)
            papers.extend(result.papers)
        counts = self.store.add_papers(papers, seen_on=seen_on)
        report.distinct, report.new = counts.distinct, counts.new
        report.updated, report.unchanged = counts.updated, counts.unchanged
        return report

    # -- compose ----------------------------------------------------------------

    def roster(self) -> Roster:
        """The valid subscribers; each invalid profile is logged with its file and skipped."""
        roster = load_subscribers(Path(self.config.subscribers.dir))
        for problem in roster.problems:
            log.warning("skipping profile: %s", problem)
        chosen = {e: p.frequency for e, p in self.store.preferences().items() if p.frequency}
        if not chosen:
            return roster
        # A frequency chosen on the preferences page wins over the profile's (which stays untouched).
        return replace(roster, subscribers=tuple(
            replace(s, frequency=chosen.get(s.email.lower(), s.frequency)) for s in roster.subscribers))

    def pool(self, day: date) -> Pool:
        return Pool(self.store.candidates(day, self.config.select.window_days))

    def links(self, subscriber: Subscriber) -> Links:
        return self.links_for(subscriber.email)

    def links_for(self, email: str) -> Links:
        """The signed URLs of one subscriber's emails: unsubscribe, preferences, feedback."""
        base, sign = self.newsletter.base_url, self.signer.make
        return Links(unsubscribe=f"{base}/unsubscribe/{sign('unsubscribe', email)}",
                     preferences=f"{base}/preferences/{sign('preferences', email)}",
                     unsubscribe_mailto=self.newsletter.unsubscribe_mailto or None,
                     feedback=f"{base}/feedback/{sign('feedback', email)}")

    def compose(self, subscriber: Subscriber, day: date, pool: Pool, *, received: set[int] | None = None,
                test: bool = False) -> Composed:
        """Select, render and build the message for one subscriber (shared by preview and send).

        `received` (the papers this subscriber already got) is read from the store when not given;
        a run over many subscribers reads it for all of them in one query.
        """
        if received is None:
            received = self.store.received_before(subscriber.email, day)
        digest = select_digest(pool, subscriber, day=day, received=received, settings=self.settings)
        if not digest.count and subscriber.interests and self.config.delivery.quiet_days == "trending":
            digest = self._quiet_day(pool, subscriber, day, received)
        rendered = self.renderer.render(digest, self.newsletter, self.links(subscriber))
        message = build_message(rendered, subscriber, self.newsletter, day, test=test)
        return Composed(digest, rendered, message)

    def _quiet_day(self, pool: Pool, subscriber: Subscriber, day: date, received: set[int]) -> Digest:
        """The short trending email for a subscriber with nothing new above the floor."""
        reader = replace(subscriber, interests=(), max_papers=min(QUIET_DAY_PAPERS, subscriber.max_papers))
        trending = select_digest(pool, reader, day=day, received=received, settings=self.settings)
        return replace(trending, subscriber=subscriber, quiet=True)

    def chosen(self, roster: Roster, only: str | None) -> list[Subscriber]:
        if only is None:
            return list(roster.subscribers)
        found = roster.find(only)
        if found is None:
            raise UsageError(f"no valid subscriber {only!r} in {self.config.subscribers.dir} "
                             "(see `digest subscribers list`)")
        return [found]

    # -- preview and send ---------------------------------------------------------

    def preview(self, day: date, out: Path, *, only: str | None = None) -> list[tuple[Composed, list[Path]]]:
        """Write `.html`, `.txt` and `.eml` files for each subscriber's digest."""
        pool = self.pool(day)
        results = []
        folder = out / day.isoformat()
        folder.mkdir(parents=True, exist_ok=True)
        for subscriber in self.chosen(self.roster(), only):
            composed = self.compose(subscriber, day, pool)
            stem = safe_name(subscriber.email)
            files = [folder / f"{stem}.{ext}" for ext in ("html", "txt", "eml")]
            payloads = [composed.rendered.html.encode(), composed.rendered.text.encode(),
                        composed.message.as_bytes()]
            for path, data in zip(files, payloads, strict=True):
                write_atomic(path, data)
            results.append((composed, files))
        return results

    def send(self, day: date, *, dry_run: bool = False, only: str | None = None,
             emails: Collection[str] | None = None, should_stop: Callable[[], bool] = lambda: False) -> SendReport:
        """Deliver every due digest for `day` (of `emails` when given); each subscriber independent of the others.

        `should_stop` is asked between digests: a daemon told to stop finishes the message in flight
        and leaves the rest for its next run.
        """
        roster = self.roster()
        report = SendReport(day, invalid_profiles=len(roster.invalid_files))
        pool = self.pool(day)
        suppressed = {email.lower(): f"suppressed ({reason})" for email, reason in self.store.suppressed().items()}
        suppressed.update({email: f"paused until {p.paused_until}" for email, p in self.store.preferences().items()
                           if p.paused_until and p.paused_until >= day and email not in suppressed})
        received = self.store.received_by_subscriber(day)
        sent = {r.subscriber for r in self.store.deliveries_on(day) if r.status == "sent"}
        chosen = self.chosen(roster, only)
        if emails is not None:
            wanted = {e.lower() for e in emails}
            chosen = [s for s in chosen if s.email.lower() in wanted]
        for subscriber in progress(chosen, len(chosen), f"sending {day}"):
            if should_stop():
                break
            try:
                if subscriber.email in sent:
                    outcome = Outcome(subscriber.email, "skipped", "already sent")
                else:
                    outcome = self._send_one(subscriber, day, pool, suppressed,
                                             received.get(subscriber.email, set()), dry_run)
            except Exception as exc:  # one broken digest must not stop the others
                log.exception("failed to build the digest for %s", subscriber.email)
                outcome = Outcome(subscriber.email, "failed", f"{exc.__class__.__name__}: {exc}")
            if outcome.status in ("skipped", "failed"):
                log.info("%s %s: %s", outcome.status, subscriber.email, outcome.reason)
            report.outcomes.append(outcome)
        return report

    def _send_one(self, subscriber: Subscriber, day: date, pool: Pool, suppressed: dict[str, str],
                  received: set[int], dry_run: bool) -> Outcome:
        email = subscriber.email
        if email.lower() in suppressed:
            return Outcome(email, "skipped", suppressed[email.lower()])
        if not is_delivery_day(subscriber.frequency, day):
            return Outcome(email, "skipped", f"not a delivery day for frequency {subscriber.frequency}")
        composed = self.compose(subscriber, day, pool, received=received)
        if composed.digest.count == 0:
            return Outcome(email, "skipped", "nothing new above the relevance floor")
        if dry_run:
            return Outcome(email, "dry-run", f"{composed.digest.count} papers: {composed.rendered.subject}")
        return deliver_one(self.store, self.transport, composed.message, email, day, composed.paper_ids)
