"""The orchestrator: ingest → select → render → mail → deliver, one short function per job.

Preview, dry run and send all go through `App.compose`, so what is previewed is what is sent.
"""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from functools import cached_property
from pathlib import Path

from digest import catalogue, dating, sources
from digest.config import Config
from digest.deliver import Outcome, RetryPolicy, Transport, safe_name, send_test, write_atomic
from digest.dispatch import Dispatch
from digest.errors import ProfileError, UsageError
from digest.mail import build_message
from digest.models import Digest, Links, Paper, RecordError, Subscriber
from digest.render import Renderer
from digest.schedule import Slot
from digest.select import CorpusStats, Pool, Ranked, SelectSettings, Signals, matches, rank, select_digest, select_many
from digest.select.corpus import Fields, background
from digest.select.dense import DenseEmbedder
from digest.select.learn import with_models
from digest.select.profile import seed_papers
from digest.sending import (
    Composed,
    Composer,
    SendReport,
    make_transport,
)
from digest.signing import DkimSigner
from digest.store import Store
from digest.subscribers import Problem, Roster, is_email, parse_profile
from digest.tokens import Signer

log = logging.getLogger("digest")
SELECT_KEYS = [f.name for f in fields(SelectSettings)]
QUIET_DAY_PAPERS = 3
# A pool's term counts are kept in the store's cache per block of this many store ids: a window's papers are the same
# blocks from one day to the next, so a day's send tokenises its new papers (and a block the window's start cuts
# into), not the whole window. Blocks not written for window_days + FIELDS_KEPT_DAYS days are deleted.
FIELD_BLOCK = 256
FIELDS_KEPT_DAYS = 7


def _id_blocks(papers: Sequence[Paper]) -> list[tuple[int, int]]:
    """The papers (in store id order) cut where their store id enters a new block of FIELD_BLOCK, as slices."""
    cuts = [n for n in range(1, len(papers))
            if (papers[n].store_id or 0) // FIELD_BLOCK != (papers[n - 1].store_id or 0) // FIELD_BLOCK]
    edges = [0, *cuts, len(papers)]
    return list(zip(edges, edges[1:], strict=False))


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


class App:
    """Everything one command needs, opened from the settings."""

    def __init__(self, config: Config, *, transport: Transport | None = None, workers: int | None = None) -> None:
        self.config = config
        self.workers = workers or config.delivery.workers
        self.store = Store(config.store.url, durable_sends=config.store.durable_sends)
        overrides = [config.render.templates] if config.render.templates else []
        self.renderer = Renderer(overrides)
        self.newsletter = config.newsletter_info
        secret = os.environ.get(config.newsletter.secret_env) or self.store.secret()
        self.signer = Signer(secret)
        self.settings = SelectSettings(**{k: float(getattr(config.select, k)) for k in SELECT_KEYS})
        self.dense = DenseEmbedder(self.store, progress=True) if self.settings.text_model else None  # loaded when used
        self._corpus: CorpusStats | None = None
        self._pool_corpus: CorpusStats | None = None
        self._warned: set[str] = set()  # profile problems logged by this process (a command syncs more than once)
        self.retry = RetryPolicy(config.delivery.attempts, float(config.delivery.retry_delay),
                                 breaker=config.delivery.max_connection_failures)
        self._transport = transport
        self.warned: set[str] = set()  # warnings given once per command, not once per date sent (Dispatch)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
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
                result = sources.vet(sources.parse_file(path, seen_on=seen_on), str(path))
            except sources.SourceError as exc:
                report.errors.append(RecordError(str(path), None, exc.reason))
                continue
            report.files += 1
            report.records += len(result.papers)
            report.errors.extend(result.errors)
            papers.extend(result.papers)
        counts = self.store.add_papers(papers, seen_on=seen_on)
        report.distinct, report.new = counts.distinct, counts.new
        report.updated, report.unchanged = counts.updated, counts.unchanged
        self.prepare_papers(papers)
        return report

    def prepare_papers(self, papers: Sequence[Paper]) -> None:
        """Analyse papers just brought in (by an ingest or a fetch) once, here, rather than in every send (and
        every worker) that reads them: the store's term statistics brought up to date, and their embeddings by
        the text model kept in the store (papers seen before are only looked up; a progress bar on a terminal)."""
        self._corpus = None
        self.corpus()
        if self.dense is not None and papers:
            self.dense.papers(list({p.key: p for p in papers}.values()))  # a file may repeat a paper many times

    # -- compose ----------------------------------------------------------------

    def sync(self) -> catalogue.SyncReport:
        """Bring changed profile files into the store; each invalid profile is logged with its file and skipped."""
        folder = Path(self.config.subscribers.dir)
        report = catalogue.sync(self.store, folder, on_stored=self.prepare_interests)
        if not report.problems and folder.is_dir() and not self.store.count_subscribers():
            report.problems.append(Problem(str(folder), 0, "no subscriber profiles (*.toml) here and none imported: "
                                                           "nobody to send to"))
        for problem in report.problems:
            if str(problem) not in self._warned:
                self._warned.add(str(problem))
                log.warning("%s%s", "skipping profile: " if problem.line else "", problem)
        return report

    def prepare_interests(self, subscribers: Sequence[Subscriber]) -> None:
        """Make the profiles of the interests of subscribers just stored (imported, or a profile file changed) in
        the text model's space and keep them in the store, so that the first send after an import reads them as
        every later send does, instead of making a million while it sends. A send still makes any it finds
        missing."""
        if self.dense is not None:
            self.dense.interests([i for s in subscribers for i in s.interests])

    def roster(self) -> Roster:
        """Every valid subscriber (a frequency chosen on the preferences page applied), and the invalid profiles."""
        return catalogue.roster(self.store, self.sync().problems)

    def slots(self) -> list[Slot]:
        """The delivery slots in use (profile files synced first)."""
        self.sync()
        return [Slot(c.timezone, c.send_at, c.frequency) for c in self.store.slot_counts()]

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
        fields = None
        if papers is None:
            papers = self.store.candidates(day, self.config.select.window_days)
            fields = self.pool_fields(papers)
            now = datetime.now(UTC).replace(tzinfo=None)
            # interests' stored matches not written for KEEP_DAYS: an edited interest's old key, a leaver's
            self.store.purge_caches(matches.PREFIX, now - timedelta(days=matches.KEEP_DAYS))
            self.store.purge_caches(Fields.CACHE_PREFIX, now - timedelta(
                days=self.config.select.window_days + FIELDS_KEPT_DAYS))
        return Pool(papers, self.corpus(), dense=self.dense, fields=fields)

    def pool_fields(self, papers: Sequence[Paper]) -> Fields | None:
        """The term counts of a day's candidates (ascending store ids), kept in the store's cache per block of
        FIELD_BLOCK store ids: analysed by the first send, preview or worker that needs a block and read back by
        every later one, on that day and the next days while its papers stay in the window (tokenising 1,000
        papers takes about half a second). None for no papers."""
        if not papers:
            return None
        blocks = _id_blocks(papers)
        keys = [Fields.cache_key(papers[a:b]) for a, b in blocks]
        saved = self.store.get_caches(keys)
        parts, new = [], {}
        for (a, b), key in zip(blocks, keys, strict=True):
            found = None
            if key in saved:
                try:
                    found = Fields.from_bytes(saved[key])
                except (ValueError, KeyError, OSError, zipfile.BadZipFile) as exc:  # analysed again, and kept again
                    log.warning("the cached analysis of the day's papers could not be read (%s); analysing them "
                                "again", exc)
            if found is None:
                found = Fields.of(papers[a:b])
                new[key] = found.to_bytes()
            parts.append(found)
        self.store.put_caches(new)
        return Fields.stacked(parts)

    @cached_property
    def ages(self) -> dating.Ages:
        """How old a paper may be to be shown as new, and how many older ones a digest may show apart."""
        return dating.Ages(self.config.select.max_age_days, self.config.select.trending_again)

    def signals(self, subscribers: Sequence[Subscriber], day: date,
                received: dict[str, set[int]] | None = None) -> dict[str, Signals]:
        """What the store knows about each subscriber: received papers, feedback, seed papers (few queries)."""
        emails = [s.email for s in subscribers]
        if received is None:  # only papers still in the window can come up again
            since = day - timedelta(days=max(self.config.select.window_days, 1))
            received = self.store.received_by_subscriber(day, emails, since)
        feedback = self.store.feedback_by_subscriber(emails)
        marked = self.store.papers_by_id(i for votes in feedback.values() for i in votes)
        seeds = self.store.find_papers(r for s in subscribers for i in s.interests for r in i.seed_papers)
        out = {}
        for sub in subscribers:
            votes = feedback.get(sub.email, {})
            kept = self.kept_papers(sub, seeds)
            out[sub.email] = Signals(
                received=frozenset(received.get(sub.email, set())) | kept,
                liked=tuple(marked[i] for i, v in sorted(votes.items()) if v > 0 and i in marked),
                disliked=tuple(marked[i] for i, v in sorted(votes.items()) if v < 0 and i in marked),
                seeds={r: seeds[r] for i in sub.interests for r in i.seed_papers if r in seeds})
        if self.dense is None:
            return out
        return with_models(out, subscribers, self.store, self.dense,
                           lambda sub, sig: [p for i in sub.interests for p in seed_papers(i, sig.seeds)])

    def kept_papers(self, subscriber: Subscriber, seeds: dict[str, Paper]) -> frozenset[int]:
        """The store ids of the papers a subscriber already keeps (their seed papers and libraries): never sent to
        them as new."""
        found = {seeds[r].store_id for i in subscriber.interests for r in i.seed_papers if r in seeds}
        if self.dense is not None:
            for interest in subscriber.interests:
                if interest.library_key:
                    found |= {p.store_id for _, _, p in self.dense.library_papers(interest, lambda _: ())
                              if p is not None}
        return frozenset(i for i in found if i is not None)

    def pool_corpus(self) -> CorpusStats:
        """The store's term statistics blended with the shipped background, as a pool sees them (once per run)."""
        if self._pool_corpus is None:
            self._pool_corpus = self.corpus().blended(background())
        return self._pool_corpus

    def links(self, subscriber: Subscriber, day: date) -> Links:
        return self.links_for(subscriber.email, day)

    def links_for(self, email: str, issued: date | None = None) -> Links:
        """The URLs of one subscriber's emails (unsubscribe, preferences, feedback), their tokens dated `issued`.

        A digest's links are dated with the digest's date (so a resend is the same message); the
        preferences and feedback links expire `web.link_days` after it.
        """
        base, day = self.newsletter.base_url, issued or date.today()
        token = self.signer.make
        return Links(unsubscribe=f"{base}/unsubscribe/{token('unsubscribe', email, day)}",
                     preferences=f"{base}/preferences/{token('preferences', email, day)}",
                     unsubscribe_mailto=self.newsletter.unsubscribe_mailto or None,
                     feedback=f"{base}/feedback/{token('feedback', email, day)}",
                     view=f"{base}/view/{token('view', email, day)}")

    def compose(self, subscriber: Subscriber, day: date, pool: Pool, *, received: set[int] | None = None,
                signals: Signals | None = None, test_to: str | None = None) -> Composed:
        """Select, render and build the message for one subscriber (shared by preview and send).

        `signals` (what the store knows about the subscriber: history, feedback, seed papers) are read
        from the store when not given; a run over many subscribers reads them for all of them in a few
        queries. `test_to` makes a test message: the subscriber's papers, addressed to that address,
        whose links act on it alone.
        """
        if signals is None:
            known = {subscriber.email: received} if received is not None else None
            signals = self.signals([subscriber], day, known)[subscriber.email]
        ranked_with = self.ages.ranked_with(subscriber, pool, day, signals)
        digest = select_digest(pool, subscriber, day=day, settings=self.settings, signals=ranked_with)
        return self.finish(self._aged(digest, subscriber, pool, day, signals), pool, ranked_with, test_to=test_to)

    def _aged(self, digest: Digest, subscriber: Subscriber, pool: Pool, day: date, signals: Signals) -> Digest:
        """A selected digest with its old papers apart, under "Trending again" (see `dating`)."""
        again = self.ages.again_reader(subscriber, pool, day, signals)
        extra = select_digest(pool, again[0], day=day, settings=self.settings, signals=again[1]) if again else None
        return self.ages.split(digest, subscriber, extra)

    def finish(self, digest: Digest, pool: Pool, signals: Signals, *, test_to: str | None = None) -> Composed:
        """Render a selected digest and build its message (the quiet-day email when it is empty and asked for)."""
        subscriber, day = digest.subscriber, digest.date
        if not digest.count and subscriber.interests and self.config.delivery.quiet_days == "trending":
            digest = self._quiet_day(pool, subscriber, day, signals)
        if test_to is not None:
            digest = replace(digest, subscriber=replace(subscriber, email=test_to))
        rendered = self.renderer.render(digest, self.newsletter, self.links(digest.subscriber, day))
        message = build_message(rendered, digest.subscriber, self.newsletter, day, id_key=self.signer.message_key,
                                test=test_to is not None)
        return Composed(digest, rendered, message)

    def _quiet_day(self, pool: Pool, subscriber: Subscriber, day: date, signals: Signals) -> Digest:
        """The short trending email for a subscriber with nothing new above the floor."""
        reader = replace(subscriber, interests=(), max_papers=min(QUIET_DAY_PAPERS, subscriber.max_papers))
        trending = select_digest(pool, reader, day=day, settings=self.settings, signals=signals)
        return replace(trending, subscriber=subscriber, quiet=True)

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
            result = sources.vet(sources.parse_file(path, seen_on=day), str(path))
        except sources.SourceError as exc:
            raise UsageError(str(exc)) from exc
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
        with self.renderer.pinned():
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

    # -- sending ---------------------------------------------------------------------

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

    def warm(self, pool: Pool) -> None:
        """Prepare what every batch of the day needs now, so that workers forked after this share it instead
        of each making it: the pool's BM25F index, the dense embeddings of its papers (read from the store,
        or computed with the model, which the workers then share as well) and their int8 codes (what scoring
        reads: 0.28 s for a week's 7,000 papers, once rather than once a worker) in the integer kernel's forms,
        and the templates (loaded and inlined; kept while the renderer is pinned)."""
        pool.index(self.settings.title_weight)
        if self.dense is not None:
            pool.dense_held().prepare()
        self.renderer.preload()

    def composer(self, pool: Pool) -> Composer:
        """Compose a batch of subscribers' digests from one pool: their signals read in a few queries, the pool
        ranked for the whole batch at once (`select_many`), then each digest rendered."""
        def compose(subscribers: Sequence[Subscriber], day: date) -> Iterator[Composed | Exception]:
            try:
                signals = self.signals(subscribers, day)
            except Exception as exc:  # noqa: BLE001 - every digest of the batch fails with it, the run goes on
                yield from (exc for _ in subscribers)
                return
            ranked_with = {s.email: self.ages.ranked_with(s, pool, day, signals[s.email]) for s in subscribers}
            for subscriber, digest in zip(subscribers, self._select(pool, subscribers, day, ranked_with), strict=True):
                try:
                    if isinstance(digest, Exception):
                        raise digest
                    digest = self._aged(digest, subscriber, pool, day, signals[subscriber.email])
                    yield self.finish(digest, pool, ranked_with[subscriber.email])
                except Exception as exc:  # noqa: BLE001 - one broken digest must not stop the others
                    yield exc
        return compose

    def _select(self, pool: Pool, subscribers: Sequence[Subscriber], day: date,
                signals: dict[str, Signals]) -> list[Digest | Exception]:
        """The batch's digests, ranked together; if that fails, one by one, so only the broken one fails."""
        try:
            mode = self.config.select.stored_matches
            return list(select_many(pool, subscribers, day=day, settings=self.settings, signals=signals,
                                    store=self.store if mode != "never" else None, shared_only=mode == "auto"))
        except Exception:  # noqa: BLE001 - found again below, subscriber by subscriber
            log.debug("ranking the batch together failed; ranking it one by one", exc_info=True)
        out: list[Digest | Exception] = []
        for subscriber in subscribers:
            try:
                out.append(select_digest(pool, subscriber, day=day, settings=self.settings,
                                         signals=signals[subscriber.email]))
            except Exception as exc:  # noqa: BLE001 - this subscriber's digest fails, the others go on
                out.append(exc)
        return out

    def subscriber(self, email: str) -> Subscriber:
        """One subscriber by address (profile files synced first); UsageError naming the folder if unknown."""
        found = self.store.subscribers_by_email([email]).get(email)
        if found is None:
            raise UsageError(f"no valid subscriber {email!r} in {self.config.subscribers.dir} "
                             "(see `digest subscribers list`)")
        return found

    def send(self, day: date, *, dry_run: bool = False, only: str | None = None, slots: Sequence[Slot] | None = None,
             should_stop: Callable[[], bool] = lambda: False, command: str = "send") -> SendReport:
        """Deliver the digests of `day` (see `Dispatch.send`)."""
        return Dispatch(self).send(day, dry_run=dry_run, only=only, slots=slots, should_stop=should_stop,
                                   command=command)

    def drain(self, *, day: date | None = None, follow: bool = False, poll: float = 10.0,
              should_stop: Callable[[], bool] = lambda: False, wait: Callable[[float], bool] | None = None,
              ) -> list[SendReport]:
        """`digest worker` (see `Dispatch.drain`)."""
        return Dispatch(self).drain(day=day, follow=follow, poll=poll, should_stop=should_stop, wait=wait)


    def send_test(self, day: date, only: str, to: str) -> tuple[Composed, Outcome]:
        """Send `only`'s digest to the address `to`, marked as a test; the send log is not touched."""
        if not is_email(to):
            raise UsageError(f"--to {to!r} is not an email address (like ada@example.org)")
        self.sync()  # one subscriber read by address: the console sends tests on lists of a million
        subscriber = self.subscriber(only)
        composed = self.compose(subscriber, day, self.pool(day), test_to=to)
        transport = self._transport or make_transport(self.config, os.environ, test=True)
        try:
            return composed, send_test(transport, self.wire(composed.message), to, day, self.retry)
        finally:
            if transport is not self._transport:
                transport.close()
