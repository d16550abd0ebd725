"""The orchestrator: ingest → select → render → mail → deliver, one short function per job.

Preview, dry run and send all go through `App.compose`, so what is previewed is what is sent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import date
from email.message import EmailMessage
from pathlib import Path

from . import sources
from .config import Config
from .deliver import OutboxTransport, Outcome, Transport, deliver_one, safe_name, write_atomic
from .errors import ProfileError, UsageError
from .mail import build_message
from .models import Digest, Links, Paper, RecordError, Rendered, Subscriber
from .render import Renderer
from .select import CorpusStats, Pool, Ranked, SelectSettings, Signals, rank, select_digest
from .select.batch import prepare
from .store import Store
from .subscribers import Roster, is_delivery_day, load_subscribers, parse_profile
from .tokens import Signer

log = logging.getLogger("digest")
SELECT_KEYS = [f.name for f in fields(SelectSettings)]


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
        self.settings = SelectSettings(**{k: float(getattr(config.select, k)) for k in SELECT_KEYS})
        self.embedder = None
        if self.settings.semantic_weight:
            from .select.semantic import SentenceEmbedder  # the optional extra: imported only when asked for

            self.embedder = SentenceEmbedder(self.store)
        self._corpus: CorpusStats | None = None
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
        return roster

    def corpus(self) -> CorpusStats:
        """Term statistics of the whole store: cached in it, brought up to date once per run."""
        if self._corpus is None:
            saved = self.store.get_cache(CorpusStats.KEY)
            stats = CorpusStats.from_bytes(saved) if saved else CorpusStats()
            if stats.add_texts(self.store.texts_after(stats.max_id)) or saved is None:
                self.store.put_cache(CorpusStats.KEY, stats.to_bytes())
            self._corpus = stats
        return self._corpus

    def pool(self, day: date, papers: Sequence[Paper] | None = None) -> Pool:
        """The day's candidates (or the given papers) analysed once for every subscriber."""
        if papers is None:
            papers = self.store.candidates(day, self.config.select.window_days)
        return Pool(papers, self.corpus(), embedder=self.embedder)

    def signals(self, subscribers: Sequence[Subscriber], day: date,
                received: dict[str, set[int]] | None = None) -> dict[str, Signals]:
        """What the store knows about each subscriber: received papers, feedback, seed papers (few queries)."""
        emails = None if len(subscribers) != 1 else subscribers[0].email
        if received is None:
            received = ({emails: self.store.received_before(emails, day)} if emails
                        else self.store.received_by_subscriber(day))
        feedback = self.store.feedback_by_subscriber(emails)
        marked = self.store.papers_by_id(i for votes in feedback.values() for i in votes)
        seeds = self.store.find_papers(r for s in subscribers for i in s.interests for r in i.seed_papers)
        out = {}
        for sub in subscribers:
            votes = feedback.get(sub.email, {})
            out[sub.email] = Signals(
                received=frozenset(received.get(sub.email, set())),
                liked=tuple(marked[i] for i, v in sorted(votes.items()) if v > 0 and i in marked),
                disliked=tuple(marked[i] for i, v in sorted(votes.items()) if v < 0 and i in marked),
                seeds={r: seeds[r] for i in sub.interests for r in i.seed_papers if r in seeds})
        return out

    def links(self, subscriber: Subscriber) -> Links:
        base = self.newsletter.base_url
        return Links(unsubscribe=f"{base}/unsubscribe/{self.signer.make('unsubscribe', subscriber.email)}",
                     preferences=f"{base}/preferences/{self.signer.make('preferences', subscriber.email)}",
                     unsubscribe_mailto=self.newsletter.unsubscribe_mailto or None)

    def compose(self, subscriber: Subscriber, day: date, pool: Pool, *, received: set[int] | None = None,
                signals: Signals | None = None, test: bool = False) -> Composed:
        """Select, render and build the message for one subscriber (shared by preview and send).

        `signals` (what the store knows about the subscriber) are read from the store when not
        given; a run over many subscribers reads them for all of them in a few queries.
        """
        if signals is None:
            known = {subscriber.email: received} if received is not None else None
            signals = self.signals([subscriber], day, known)[subscriber.email]
        digest = select_digest(pool, subscriber, day=day, settings=self.settings, signals=signals)
        rendered = self.renderer.render(digest, self.newsletter, self.links(subscriber))
        message = build_message(rendered, subscriber, self.newsletter, day, test=test)
        return Composed(digest, rendered, message)

    def rank(self, subscriber: Subscriber, day: date, *, papers: Sequence[Paper] | None = None,
             limit: int | None = None) -> list[Ranked]:
        """The subscriber's ranked candidates with their score parts (what `digest rank` prints)."""
        if papers is not None:
            known = self.store.find_papers(p.arxiv_id or p.title for p in papers)
            papers = [replace(p, store_id=known[p.arxiv_id or p.title].store_id)
                      if (p.arxiv_id or p.title) in known else p for p in papers]
        signals = self.signals([subscriber], day)[subscriber.email]
        return rank(self.pool(day, papers), subscriber, day=day, settings=self.settings, signals=signals,
                    limit=limit)

    def profile(self, email: str | None = None, path: Path | None = None) -> Subscriber:
        """A subscriber of the roster by email, or one profile file (`digest rank --profile`)."""
        if path is None:
            return self.chosen(self.roster(), email)[0]
        subscriber, problems = parse_profile(path)
        if subscriber is None:
            raise ProfileError("; ".join(str(p) for p in problems))
        return subscriber

    def read_papers(self, path: Path, day: date) -> tuple[list[Paper], list[RecordError]]:
        """The papers of one file (any format `ingest` reads), without storing them."""
        try:
            result = sources.parse_file(path, seen_on=day)
        except sources.SourceError as exc:
            raise UsageError(f"{path}: {exc}") from exc
        return list(result.papers), list(result.errors)

    def feedback(self, email: str, ref: str, more: bool) -> Paper:
        """Record more/less-like-this for a paper named by arXiv id, `#store id` or title."""
        if self.roster().find(email) is None:
            raise UsageError(f"no valid subscriber {email!r} in {self.config.subscribers.dir}")
        found = self.store.find_papers([ref]).get(ref)
        if found is None or found.store_id is None:
            raise UsageError(f"no paper {ref!r} in the store (give an arXiv id, #id or the exact title)")
        self.store.add_feedback(email, found.store_id, 1 if more else -1)
        return found

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

    def send(self, day: date, *, dry_run: bool = False, only: str | None = None) -> SendReport:
        """Deliver every due digest for `day`; each subscriber independent of the others."""
        roster = self.roster()
        report = SendReport(day, invalid_profiles=len(roster.invalid_files))
        pool = self.pool(day)
        suppressed = {email.lower(): reason for email, reason in self.store.suppressed().items()}
        chosen = self.chosen(roster, only)
        signals = self.signals(chosen, day)
        prepare(pool, chosen, self.settings)  # every subscriber's keywords in one sparse product
        sent = {r.subscriber for r in self.store.deliveries_on(day) if r.status == "sent"}
        for subscriber in chosen:
            try:
                if subscriber.email in sent:
                    outcome = Outcome(subscriber.email, "skipped", "already sent")
                else:
                    outcome = self._send_one(subscriber, day, pool, suppressed, signals[subscriber.email], dry_run)
            except Exception as exc:  # one broken digest must not stop the others
                log.exception("failed to build the digest for %s", subscriber.email)
                outcome = Outcome(subscriber.email, "failed", f"{exc.__class__.__name__}: {exc}")
            if outcome.status in ("skipped", "failed"):
                log.info("%s %s: %s", outcome.status, subscriber.email, outcome.reason)
            report.outcomes.append(outcome)
        return report

    def _send_one(self, subscriber: Subscriber, day: date, pool: Pool, suppressed: dict[str, str],
                  signals: Signals, dry_run: bool) -> Outcome:
        email = subscriber.email
        if email.lower() in suppressed:
            return Outcome(email, "skipped", f"suppressed ({suppressed[email.lower()]})")
        if not is_delivery_day(subscriber.frequency, day):
            return Outcome(email, "skipped", f"not a delivery day for frequency {subscriber.frequency}")
        composed = self.compose(subscriber, day, pool, signals=signals)
        if composed.digest.count == 0:
            return Outcome(email, "skipped", "nothing new above the relevance floor")
        if dry_run:
            return Outcome(email, "dry-run", f"{composed.digest.count} papers: {composed.rendered.subject}")
        return deliver_one(self.store, self.transport, composed.message, email, day, composed.paper_ids)
