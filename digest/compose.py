"""Compose: one date's pool of papers, what the store knows of each reader, and their digest selected, rendered and
built into a message.

Preview, dry run, test send and send all go through `Composer.compose` (one reader) or `Composer.batch` (many,
ranked together), so what is previewed is what is sent.
"""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from digest import summaries
from digest.delivery.handover import safe_name, write_atomic
from digest.delivery.message import build_message
from digest.filemodes import make_folder
from digest.models import Composed, Digest, Newsletter, Paper, Subscriber
from digest.render.renderer import Renderer
from digest.select import Pool, Ranked, SelectSettings, Signals, matches, rank, select_digest, select_many
from digest.select.ages import Ages
from digest.select.analysis import Analysis
from digest.select.corpus import Fields
from digest.select.learn import with_models
from digest.select.profile import seed_papers
from digest.store import Store
from digest.tokens import LinkMaker

log = logging.getLogger("digest")
QUIET_DAY_PAPERS = 3
# A pool's term counts are kept in the store's cache per block of this many store ids: a window's papers are the same
# blocks from one day to the next, so a day's send tokenises its new papers (and a block the window's start cuts
# into), not the whole window. Blocks not written for window_days + FIELDS_KEPT_DAYS days are deleted.
FIELD_BLOCK = 256
FIELDS_KEPT_DAYS = 7


@dataclass(frozen=True)
class Window:
    """Which papers a date's pool holds and how a batch is ranked (the `select` settings that are not weights)."""

    days: int = 7  # select.window_days
    max_age_days: int = 0  # select.max_age_days
    trending_again: int = 0  # select.trending_again
    stored_matches: str = "auto"  # select.stored_matches: never | auto | always
    quiet_days: str = "skip"  # delivery.quiet_days: skip | trending


def _id_blocks(papers: Sequence[Paper]) -> list[tuple[int, int]]:
    """The papers (in store id order) cut where their store id enters a new block of FIELD_BLOCK, as slices."""
    cuts = [n for n in range(1, len(papers))
            if (papers[n].store_id or 0) // FIELD_BLOCK != (papers[n - 1].store_id or 0) // FIELD_BLOCK]
    edges = [0, *cuts, len(papers)]
    return list(zip(edges, edges[1:], strict=False))


class Composer:
    """Selects, renders and builds the digests of a date from one pool: one reader at a time, or a batch at once."""

    def __init__(self, store: Store, analysis: Analysis, settings: SelectSettings, window: Window, *,
                 renderer: Renderer, newsletter: Newsletter, links: LinkMaker, message_key: bytes) -> None:
        self.store, self.analysis, self.settings, self.window = store, analysis, settings, window
        self.renderer, self.newsletter, self.links, self.message_key = renderer, newsletter, links, message_key
        self.dense = analysis.dense
        self.ages = Ages(window.max_age_days, window.trending_again)
        self._summaries: tuple[Pool, dict[int, str]] | None = None  # the last pool's, read once

    def summaries(self, pool: Pool) -> dict[int, str]:
        """The TL;DRs a model made of the pool's papers (`digest.summaries`, kept in the store), by store id: read
        once a pool, not once a digest."""
        if self._summaries is None or self._summaries[0] is not pool:
            self._summaries = (pool, summaries.kept(self.store, pool.papers))
        return self._summaries[1]

    # -- the day's papers and what the store knows of each reader ----------------------------------------------

    def pool(self, day: date, papers: Sequence[Paper] | None = None) -> Pool:
        """The day's candidates (or the given papers) analysed once for every subscriber."""
        fields = None
        if papers is None:
            papers = self.store.candidates(day, self.window.days)
            fields = self.pool_fields(papers)
            now = datetime.now(UTC).replace(tzinfo=None)
            # interests' stored matches not written for KEEP_DAYS: an edited interest's old key, a leaver's
            self.store.purge_caches(matches.PREFIX, now - timedelta(days=matches.KEEP_DAYS))
            self.store.purge_caches(Fields.CACHE_PREFIX, now - timedelta(days=self.window.days + FIELDS_KEPT_DAYS))
        return Pool(papers, self.analysis.corpus(), dense=self.dense, fields=fields)

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

    def signals(self, subscribers: Sequence[Subscriber], day: date,
                received: dict[str, set[int]] | None = None) -> dict[str, Signals]:
        """What the store knows about each subscriber: received papers, feedback, seed papers (few queries)."""
        emails = [s.email for s in subscribers]
        if received is None:  # only papers still in the window can come up again
            since = day - timedelta(days=max(self.window.days, 1))
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

    # -- one reader --------------------------------------------------------------------------------------------

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
        """A selected digest with its old papers apart, under "Trending again" (see `select.ages`)."""
        again = self.ages.again_reader(subscriber, pool, day, signals)
        extra = select_digest(pool, again[0], day=day, settings=self.settings, signals=again[1]) if again else None
        return self.ages.split(digest, subscriber, extra)

    def finish(self, digest: Digest, pool: Pool, signals: Signals, *, test_to: str | None = None) -> Composed:
        """Render a selected digest and build its message (the quiet-day email when it is empty and asked for)."""
        subscriber, day = digest.subscriber, digest.date
        if not digest.count and subscriber.interests and self.window.quiet_days == "trending":
            digest = self._quiet_day(pool, subscriber, day, signals)
        if test_to is not None:
            digest = replace(digest, subscriber=replace(subscriber, email=test_to))
        rendered = self.renderer.render(digest, self.newsletter, self.links(digest.subscriber.email, day),
                                        self.summaries(pool))
        message = build_message(rendered, digest.subscriber, self.newsletter, day, id_key=self.message_key,
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

    # -- a batch of readers ------------------------------------------------------------------------------------

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

    def batch(self, pool: Pool) -> BatchComposer:
        """A composer of batches of subscribers' digests from one pool (what a sender calls)."""
        return BatchComposer(self, pool)

    def select_batch(self, pool: Pool, subscribers: Sequence[Subscriber], day: date,
                     signals: dict[str, Signals]) -> list[Digest | Exception]:
        """The batch's digests, ranked together; if that fails, one by one, so only the broken one fails."""
        try:
            mode = self.window.stored_matches
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


class BatchComposer:
    """Composes a batch of subscribers' digests from one pool: their signals read in a few queries, the pool ranked
    for the whole batch at once (`select_many`), then each digest rendered; one `Composed` (or the error that
    stopped it) each, in order."""

    def __init__(self, composer: Composer, pool: Pool) -> None:
        self.composer, self.pool = composer, pool

    def __call__(self, subscribers: Sequence[Subscriber], day: date) -> Iterator[Composed | Exception]:
        composer, pool = self.composer, self.pool
        try:
            signals = composer.signals(subscribers, day)
        except Exception as exc:  # noqa: BLE001 - every digest of the batch fails with it, the run goes on
            yield from (exc for _ in subscribers)
            return
        ranked_with = {s.email: composer.ages.ranked_with(s, pool, day, signals[s.email]) for s in subscribers}
        for subscriber, digest in zip(subscribers, composer.select_batch(pool, subscribers, day, ranked_with),
                                      strict=True):
            try:
                if isinstance(digest, Exception):
                    raise digest
                digest = composer._aged(digest, subscriber, pool, day, signals[subscriber.email])
                yield composer.finish(digest, pool, ranked_with[subscriber.email])
            except Exception as exc:  # noqa: BLE001 - one broken digest must not stop the others
                yield exc


def preview(composer: Composer, subscribers: Sequence[Subscriber], day: date,
            out: Path) -> list[tuple[Composed, list[Path]]]:
    """`digest preview`: write `.html`, `.txt` and `.eml` files of each subscriber's digest under `out/<day>/`."""
    pool = composer.pool(day)
    results = []
    folder = out / day.isoformat()
    make_folder(folder)  # 0700: readers' digests are their owner's alone
    with composer.renderer.pinned():
        for subscriber in subscribers:
            composed = composer.compose(subscriber, day, pool)
            stem = safe_name(subscriber.email)
            files = [folder / f"{stem}.{ext}" for ext in ("html", "txt", "eml")]
            payloads = [composed.rendered.html.encode(), composed.rendered.text.encode(),
                        composed.message.as_bytes()]
            for path, data in zip(files, payloads, strict=True):
                write_atomic(path, data)
            results.append((composed, files))
    return results
