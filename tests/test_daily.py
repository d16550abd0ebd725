"""End to end through the real store: ingest, preview, send, and what a rerun does."""

from __future__ import annotations

import email
import json
import logging
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email import policy
from functools import partial
from pathlib import Path

import numpy as np
import pytest

from digest import daily
from digest.app import App
from digest.compose import preview
from digest.config import build_config
from digest.delivery.owners import Owner

from .conftest import DAY, SEEDS
from .http_server import Reply, ScriptedServer

API_JSON = Path(__file__).resolve().parent / "fixtures" / "hf_daily_papers_2026-06-12.json"


def outbox_files(app: App) -> list[Path]:
    return sorted(Path(app.config.delivery.outbox).rglob("*.eml"))


def test_seed_pages_hold_197_distinct_papers(make_config):
    """Ingesting the five seed pages reports 284 records of 197 distinct papers, and a rerun adds none; the whole
    sample (the pages and the Daily Papers API day) adds that day's 30 papers, none of them on the pages."""
    app = App(make_config())
    pages = sorted(SEEDS.glob("*.txt"))
    first = app.ingest(pages, seen_on=DAY)
    assert (first.files, first.records, first.distinct, first.new) == (5, 284, 197, 197)
    assert "197 distinct papers (197 new" in first.summary()
    again = app.ingest(pages, seen_on=DAY)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 197)
    assert app.store.count_papers() == 197
    whole = app.ingest([SEEDS], seen_on=DAY)
    assert (whole.files, whole.records, whole.distinct, whole.new, whole.unchanged) == (6, 314, 227, 30, 197)
    assert app.store.count_papers() == 227
    app.close()


def test_same_paper_from_two_sources_is_one_paper(make_config, tmp_path):
    """A seed paper seen again in JSONL with its arXiv id merges into one paper that gains the id."""
    app = App(make_config())
    app.ingest([SEEDS], seen_on=DAY)
    line = {"id": "2404.14469v2", "title": "SnapKV:  LLM knows what you are looking for before generation",
            "abstract": "Updated abstract.", "authors": ["Yuhong Li", "Yingbing Huang"], "upvotes": 7}
    extra = tmp_path / "more.jsonl"
    extra.write_text(json.dumps(line) + "\n")
    report = app.ingest([extra], seen_on=DAY + timedelta(days=1))
    assert (report.new, report.updated) == (0, 1)
    snap = [p for p in app.store.all_papers() if p.title.startswith("SnapKV")]
    assert len(snap) == 1 and snap[0].arxiv_id == "2404.14469" and snap[0].upvotes == 7
    assert snap[0].authors == ("Yuhong Li", "Yingbing Huang")
    assert [u for _, u in app.store.upvote_history(snap[0].store_id)][-1] == 7
    app.close()


@pytest.mark.slow
def test_preview_writes_three_files_per_subscriber_and_records_nothing(app, tmp_path):
    """Preview writes .html, .txt and .eml for every subscriber and leaves the send log empty."""
    results = preview(app.composer, app.profiles.roster().subscribers, DAY, tmp_path / "preview")
    assert len(results) == 5
    for composed, files in results:
        assert [f.suffix for f in files] == [".html", ".txt", ".eml"]
        assert all(f.exists() and f.stat().st_size > 0 for f in files)
        assert files[0].stem == composed.digest.subscriber.email
        message = email.message_from_bytes(files[2].read_bytes(), policy=policy.default)
        assert message["Subject"] == composed.rendered.subject
    assert app.store.deliveries_on(DAY) == []


@pytest.mark.slow
def test_send_writes_outbox_and_second_send_sends_nothing(app):
    """The first send writes one .eml per due subscriber; sending the same date again sends nothing."""
    first = daily.send(app, DAY)
    assert first.count("failed") == 0
    sent = {o.subscriber for o in first.outcomes if o.status == "sent"}
    assert "ada@example.org" in sent and "katherine@example.org" not in sent  # 2026-06-12 is a Friday
    files = outbox_files(app)
    assert len(files) == len(sent)
    stamps = {f: f.stat().st_mtime_ns for f in files}
    second = daily.send(app, DAY)
    assert second.count("sent") == 0
    assert {o.reason for o in second.outcomes if o.subscriber in sent} == {"already sent"}
    assert {f: f.stat().st_mtime_ns for f in outbox_files(app)} == stamps


@pytest.mark.slow
def test_a_send_leaves_the_garbage_collector_as_it_found_it(app, monkeypatch):
    """A send freezes what it holds for the whole run out of the collector's full passes and collects young objects
    less often; a scheduler daemon sends every day in one process, so both must be undone when the send ends (a
    frozen heap would never be freed), also when it fails."""
    import gc

    before = gc.get_threshold()
    report = daily.send(app, DAY)
    assert report.count("sent") > 0
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before
    from digest.delivery.dispatch import Senders

    def broken(*args, **kwargs):
        raise RuntimeError("the sender could not be made")

    monkeypatch.setattr(Senders, "sender", broken)  # the next send breaks inside the run
    with pytest.raises(RuntimeError, match="could not be made"):
        daily.send(app, DAY + timedelta(days=1))
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


@pytest.mark.slow
def test_next_day_repeats_no_paper(app):
    """Papers sent on one day are not sent to the same subscriber the next day."""
    daily.send(app, DAY, only="ada@example.org")
    app.ingest([SEEDS], seen_on=DAY + timedelta(days=1))
    first_ids = set(app.store.received_before("ada@example.org", DAY + timedelta(days=1)))
    assert first_ids
    composed = app.composer.compose(app.profiles.roster().find("ada@example.org"), DAY + timedelta(days=1),
                           app.composer.pool(DAY + timedelta(days=1)))
    assert not first_ids & set(composed.paper_ids)


@pytest.mark.slow
def test_sent_message_is_the_preview(app, tmp_path):
    """The .eml in the outbox has the same subject and text as the preview of that digest."""
    [(composed, files)] = preview(app.composer, [app.profiles.roster().find("ada@example.org")], DAY, tmp_path / "p")
    daily.send(app, DAY, only="ada@example.org")
    [sent] = outbox_files(app)
    msg = email.message_from_bytes(sent.read_bytes(), policy=policy.default)
    assert msg["Subject"] == composed.rendered.subject
    text = msg.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert text.rstrip("\n") == files[1].read_text().rstrip("\n")


@pytest.mark.slow
def test_invalid_profile_and_suppressed_address_do_not_stop_others(make_config, subscribers_dir):
    """A broken profile is skipped with a count, a suppressed address gets nothing, the rest are sent."""
    (subscribers_dir / "broken.toml").write_text('email = "nope"\n')
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}))
    app.ingest([SEEDS], seen_on=DAY)
    app.store.suppress("grace@example.org", "unsubscribed")
    report = daily.send(app, DAY)
    by = {o.subscriber: o for o in report.outcomes}
    assert report.invalid_profiles == 1
    assert by["grace@example.org"].status == "skipped" and "unsubscribed" in by["grace@example.org"].reason
    assert by["ada@example.org"].status == "sent"
    assert "1 invalid profiles" in report.summary()
    app.close()


@pytest.mark.slow
def test_dry_run_sends_nothing(app):
    """A dry run composes every digest but writes no file and no send-log row."""
    report = daily.send(app, DAY, dry_run=True)
    assert report.count("dry-run") >= 3
    assert outbox_files(app) == [] and app.store.deliveries_on(DAY) == []


@pytest.mark.slow
def test_digest_claimed_by_a_dead_process_is_resent_with_same_message_id(app):
    """A digest a killed process had claimed is taken over at once by the next run, with the Message-ID it had."""
    subscriber = app.profiles.roster().find("ada@example.org")
    composed = app.composer.compose(subscriber, DAY, app.composer.pool(DAY))
    app.store.enqueue(DAY, [subscriber.email], message_id=lambda _: str(composed.message["Message-ID"]),
                      transport="outbox")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    owner = Owner(socket.gethostname(), int(gone.stdout), "1", "killed").id  # that process has exited
    far = datetime.now(UTC).replace(tzinfo=None) + timedelta(hours=1)
    assert [c.subscriber for c in app.store.claim(DAY, owner, limit=5, lease_until=far)] == [subscriber.email]
    report = daily.send(app, DAY, only=subscriber.email)
    assert report.count("sent") == 1
    [sent] = outbox_files(app)
    msg = email.message_from_bytes(sent.read_bytes(), policy=policy.default)
    assert msg["Message-ID"] == composed.message["Message-ID"]
    record = app.store.delivery(subscriber.email, DAY)
    assert record.status == "sent" and record.attempts == 2


def test_a_day_without_papers_skips_everyone_with_the_reason(make_config):
    """With an empty store every digest is skipped as having nothing new; nothing crashes on the empty pool."""
    app = App(make_config())
    report = daily.send(app, DAY)
    app.close()
    assert [o.status for o in report.outcomes] == ["skipped"] * 5
    assert {o.reason for o in report.outcomes} <= {"nothing new above the relevance floor",
                                                   "not a delivery day for frequency weekly:mon"}


def _refused_for(size: int, real: Callable[[np.ndarray], np.ndarray], codes: np.ndarray) -> np.ndarray:
    """`integer._columns` refusing a pool's codes (`size` rows: the kernel's form of the pool), not smaller ones."""
    if len(codes) == size:
        raise AssertionError("computed after the warm-up")
    return real(codes)


@pytest.mark.slow
def test_a_warmed_pool_composes_without_building_an_index_or_embedding_a_paper(make_config, monkeypatch):
    """`send --workers N` warms the pool before forking: after `warm`, composing a batch builds no index,
    embeds no paper, makes no code of the pool's embeddings (nor their form for the integer kernel, where it is
    used) and loads no template (each forked worker would otherwise do it again). Without the warm-up it does."""
    import jinja2

    import digest.select.dense as dense
    import digest.select.integer as integer
    import digest.select.pool as pool_module

    def forbidden(*_: object, **__: object) -> None:
        raise AssertionError("computed after the warm-up")

    for warmed in (True, False):
        app = App(make_config())
        app.ingest([SEEDS], seen_on=DAY)
        subscribers = [s for s in app.profiles.roster().subscribers if not any(i.seed_papers for i in s.interests)][:5]
        pool = app.composer.pool(DAY)
        with app.renderer.pinned(), monkeypatch.context() as patch:  # pinned, as `send` is
            if warmed:
                app.composer.warm(pool)
            patch.setattr(dense.DenseEmbedder, "papers", forbidden)
            patch.setattr(pool_module, "Index", forbidden)
            patch.setattr(pool_module.Pool, "dense_unit", forbidden)  # (what the codes are made from)
            patch.setattr(integer, "_columns", partial(_refused_for, len(pool), integer._columns))  # noqa: SLF001
            patch.setattr(integer, "MIN_WORK", 0)  # (every product on the kernel, as a week's window's are)
            patch.setattr(jinja2.Environment, "get_template", forbidden)
            if warmed:
                digests = [c.digest for c in app.composer.batch(pool)(subscribers, DAY)]
                assert len(digests) == 5 and all(d.count for d in digests)
            else:
                outcomes = list(app.composer.batch(pool)(subscribers, DAY))
                assert all(isinstance(o, AssertionError) for o in outcomes)
        app.close()


@pytest.mark.slow
def test_a_days_papers_are_analysed_once_and_read_back_by_every_later_run(make_config, monkeypatch, caplog, tmp_path):
    """A pool's term counts are kept in the store's cache per block of store ids: a later run (another App on the
    same store) reads the same matrices back without tokenising; the next day's pool tokenises only the new
    papers' blocks (what the day before analysed is read back); a changed paper makes only its block again; a
    damaged block is analysed again; blocks not written for window_days + FIELDS_KEPT_DAYS are deleted."""
    import sqlalchemy as sa

    import digest.compose as pipeline
    import digest.select.corpus as corpus
    from digest.store.tables import cache

    monkeypatch.setattr(pipeline, "FIELD_BLOCK", 8)  # the seeds span several blocks

    def same(a: corpus.Fields, b: corpus.Fields) -> bool:
        return all(x.shape == y.shape and (x != y).nnz == 0 for x, y in ((a.title, b.title), (a.abstract, b.abstract)))

    tokenised: list[str] = []
    count_matrix = corpus.count_matrix

    def counting(texts):  # type: ignore[no-untyped-def]
        texts = list(texts)
        tokenised.extend(texts)
        return count_matrix(texts)

    first = App(make_config())
    first.ingest([SEEDS], seen_on=DAY)
    papers = first.store.candidates(DAY, first.config.select.window_days)
    assert len(papers) > 3 * 8
    analysed = first.composer.pool(DAY).fields
    assert same(analysed, corpus.Fields.of(papers))
    first.close()

    later = App(make_config())
    with monkeypatch.context() as patch:
        patch.setattr(corpus, "count_matrix", lambda *_: pytest.fail("tokenised again"))
        assert same(later.composer.pool(DAY).fields, analysed)

    lines = [{"id": f"2607.{n:05d}", "title": f"Photonic quantum annealers, part {n}",
              "abstract": f"We study annealing schedule number {n} on photonic chips."} for n in range(5)]
    extra = tmp_path / "more.jsonl"
    extra.write_text("".join(json.dumps(line) + "\n" for line in lines))
    later.ingest([extra], seen_on=DAY + timedelta(days=1))
    both = later.store.candidates(DAY + timedelta(days=1), later.config.select.window_days)
    assert len(both) == len(papers) + 5
    with monkeypatch.context() as patch:
        patch.setattr(corpus, "count_matrix", counting)
        next_day = later.composer.pool(DAY + timedelta(days=1)).fields
    assert same(next_day, corpus.Fields.of(both))
    # the new papers, and the old papers of the block the first new one joins (tokenised twice: titles, abstracts)
    last_old = papers[-1].store_id // 8  # type: ignore[operator]
    shared = sum(1 for p in papers if p.store_id // 8 == last_old)  # type: ignore[operator]
    assert 2 * 5 <= len(tokenised) <= 2 * (5 + shared)

    tokenised.clear()
    changed = [replace(papers[0], abstract=papers[0].abstract + " Quantum annealing on photonic chips.")] + papers[1:]
    with monkeypatch.context() as patch:
        patch.setattr(corpus, "count_matrix", counting)
        fresh = later.composer.pool_fields(changed)
    assert same(fresh, corpus.Fields.of(changed)) and not same(fresh, analysed)
    block = sum(1 for p in papers if p.store_id // 8 == papers[0].store_id // 8)  # type: ignore[operator]
    assert len(tokenised) == 2 * block

    keys = [corpus.Fields.cache_key(papers[a:b]) for a, b in pipeline._id_blocks(papers)]
    later.store.put_cache(keys[1], b"not an analysis")
    with caplog.at_level(logging.WARNING, logger="digest"):
        assert same(later.composer.pool_fields(papers), analysed)
    assert "analysing them again" in caplog.text
    # ... and kept again
    assert later.store.get_caches(keys[1:2]) and same(later.composer.pool_fields(papers), analysed)

    stale = corpus.Fields.CACHE_PREFIX + "1/stale"
    later.store.put_cache(stale, b"old")
    long_ago = datetime.now(UTC).replace(tzinfo=None) - timedelta(
        days=later.config.select.window_days + pipeline.FIELDS_KEPT_DAYS + 1)
    with later.store.engine.begin() as conn:
        conn.execute(cache.update().where(cache.c.key == stale).values(updated_at=long_ago))
    later.composer.pool(DAY)
    with later.store.engine.connect() as conn:
        kept = set(conn.execute(sa.select(cache.c.key).where(cache.c.key.startswith(corpus.Fields.CACHE_PREFIX)))
                   .scalars())
    assert stale not in kept and set(keys) <= kept
    later.close()


@pytest.mark.slow
def test_a_send_whose_profiles_are_stored_reads_the_reference_mean_not_its_rows(make_config):
    """Centring papers needs only the shipped reference papers' mean: a run whose readers' profiles are in the store
    and who learn no model from clicks never loads the 7,471 reference rows (11 MB); one that makes a profile does."""
    from digest.select import vectors

    first = App(make_config())
    first.ingest([SEEDS], seen_on=DAY)
    subscribers = [s for s in first.profiles.roster().subscribers if s.interests][:4]
    # (their profiles made, stored)
    made = [c.digest for c in first.composer.batch(first.composer.pool(DAY))(subscribers, DAY)]
    assert vectors.reference.cache_info().currsize == 1
    first.close()
    vectors.reference.cache_clear()
    again = App(make_config())
    digests = [c.digest for c in again.composer.batch(again.composer.pool(DAY))(subscribers, DAY)]
    assert [d.count for d in digests] == [d.count for d in made] and sum(d.count for d in digests) > 0
    assert vectors.reference.cache_info().currsize == 0  # the mean alone was read
    assert vectors.reference_mean().tobytes() == vectors.reference().mean.tobytes()
    again.close()


@pytest.mark.slow
def test_a_pool_lets_its_term_counts_go_once_indexed_and_analyses_them_again_alike(app):
    """A pool keeps its papers' term counts until its first index is built (nothing reads them after); an index for
    another title weight analyses them again, to the same counts and the same index as from the kept ones."""
    from digest.select.corpus import Fields
    from digest.select.pool import Index

    pool = app.composer.pool(DAY)
    kept = pool.fields
    weight = app.settings.title_weight
    pool.index(weight)
    assert pool._fields is None  # noqa: SLF001
    for name in ("title", "abstract"):
        again = getattr(pool.fields, name)
        assert again.dtype == getattr(kept, name).dtype and (again != getattr(kept, name)).nnz == 0
    other = pool.index(weight + 1.0)
    assert (other.matrix != Index(kept, pool.corpus, weight + 1.0).matrix).nnz == 0
    assert isinstance(kept, Fields) and pool._fields is None  # noqa: SLF001


# What a Retry-After may hold that is neither ASCII seconds nor an HTTP date, and a date far in the future.
RETRY_AFTERS = {"superscript": "²", "arabic": "٣", "plus": "+5", "minus": "-1", "exponent": "1e3",
                "5000 digits": "9" * 5000, "empty": "", "year 9999": "Fri, 31 Dec 9999 23:59:59 GMT",
                "20-digit year": "Fri, 31 Dec 99999999999999999999 23:59:59 GMT"}


def test_a_source_answering_429_with_any_retry_after_fails_alone_and_every_due_digest_is_sent(make_config,
                                                                                              tmp_path):
    """`digest run` with `[[sources]]` that answer 429 forever, each with a Retry-After of its own ('²' passed
    str.isdigit() and then failed float(), the 20-digit year overflowed the date: either ended the run in a
    traceback and sent nothing): each source fails in one line naming it, the one asking to wait until 9999 at once
    without waiting, and every due digest is still sent from what the store already holds; the run is failed."""
    scripts = {f"/{n}": [Reply(status=429, body=b"slow down", content_type="text/plain",
                               headers={"Retry-After": value.encode().decode("latin-1")})]  # its UTF-8 bytes
               for n, value in enumerate(RETRY_AFTERS.values())}
    with ScriptedServer(scripts) as server:
        config = make_config(fetch={"timeout": 5, "retries": 1, "backoff": 0})  # max_wait: the default, 120 s
        config.sources = build_config({"sources": [{"kind": "hf_daily", "name": name, "url": server.url(f"/{n}")}
                                                   for n, name in enumerate(RETRY_AFTERS)]}, base=tmp_path).sources
        app = App(config)
        app.ingest([SEEDS], seen_on=DAY)
        report = daily.run(app, datetime.now(), DAY)
        hits = [server.hits(f"/{n}") for n in range(len(RETRY_AFTERS))]
    lines = [o.line() for o in report.fetched.outcomes]
    far = lines.pop(7)
    assert re.fullmatch(rf"year 9999: failed: {re.escape(server.url('/7'))}: HTTP 429 Too Many Requests; asked to "
                        r"retry after \d{12} s", far)
    assert lines == [f"{name}: failed: {server.url(f'/{n}')}: HTTP 429 Too Many Requests (gave up after 2 attempts)"
                     for n, name in enumerate(RETRY_AFTERS) if name != "year 9999"]
    assert hits == [2, 2, 2, 2, 2, 2, 2, 1, 2]
    assert report.fetched.summary() == "fetched 9 sources (9 failed): 0 records, 0 new papers, 0 record errors"
    [sent] = report.sends
    assert (sent.count("sent"), sent.count("failed")) == (4, 0)
    assert [f.name for f in outbox_files(app)] == ["ada@example.org.eml", "alan@example.org.eml",
                                                    "grace@example.org.eml", "margaret@example.org.eml"]
    assert report.failed and app.store.recent_runs(1)[0].status == "failed"  # `digest run` exits 1
    app.close()
