"""Each interest's matches kept in the store: a week of sends reads them instead of re-ranking the window, and every
digest is the one a full re-rank gives, through new papers every day, clicks, and profiles edited mid-window."""

from __future__ import annotations

import gzip
import itertools
import random
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
import sqlalchemy as sa

from digest.models import Interest, Subscriber
from digest.select import Signals, matches, select_digest, select_many, stored

from ..conftest import DAY, FIXTURES, SEEDS
from .test_batch import WORDS, picks, subscribers

SENTENCES = ["making large language model inference faster on GPUs", "robots that learn from human video",
             "3D scene reconstruction from a few photos", "evaluating the reasoning of language model agents",
             "compressing neural networks for phones"]


def readers(n: int, rng: random.Random, authors: list[str], library: list[str] = ()) -> list[Subscriber]:
    """Keywords, sentences, both, a followed author, a library of papers (`library`: titles to draw from); some
    readers share interests (one key scored for many)."""
    out = []
    for i in range(n):
        interests = []
        for j in range(rng.randint(1, 3)):
            style = rng.random()
            keywords = tuple(rng.sample(WORDS, rng.randint(1, 3))) if style < 0.7 else ()
            description = rng.choice(SENTENCES) if style > 0.5 else ""
            interests.append(Interest(f"topic {j}", keywords, weight=rng.choice([0.5, 1.0, 2.0]),
                                      description=description,
                                      authors=(rng.choice(authors),) if rng.random() < 0.1 else (),
                                      seed_papers=tuple(rng.sample(library, 3)) if library and rng.random() < 0.15
                                      else ()))
        out.append(Subscriber(email=f"r{i}@example.org", max_papers=rng.choice([3, 5, 10]),
                              interests=tuple(interests),
                              exclude=("video",) if rng.random() < 0.1 else ()))
    return out


def day_files(tmp_path, days: int) -> list:
    """The 300 real arXiv papers of the fixture as `days` files of new papers."""
    lines = gzip.decompress((FIXTURES / "arxiv_sample_head.jsonl.gz").read_bytes()).decode().splitlines()
    size = len(lines) // days
    out = []
    for d in range(days):
        path = tmp_path / f"day{d + 1}.jsonl"
        path.write_text("\n".join(lines[d * size:(d + 1) * size]) + "\n")
        out.append(path)
    return out


def stored_drift(app, subs: list[Subscriber], day, library: dict | None = None) -> float:
    """The largest difference between a stored log-odds and today's, over these readers' interests' kept papers."""
    from digest.select import batch

    pool = app.composer.pool(day)
    quiet = [s for s in subs if s.interests]
    run = batch._run(pool, quiet, day, app.settings, {s.email: Signals(seeds=library or {}) for s in quiet})
    hi = int(run.plan.first_interest[len(quiet)])
    ids = np.array([p.store_id for p in pool.papers])
    kept = stored._stored(run, 0, hi, run.plan.vectors(pool, 0, hi), ids, app.store)
    exact = batch._interest_logits(run, 0, hi, run.prepared(0, len(quiet)))[1]
    return float(max(np.abs(exact[n][papers] - logits).max(initial=0.0) for n, (papers, logits) in enumerate(kept)))


def stored_keys(store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM cache WHERE key LIKE 'matches/%'")).scalar_one())


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_week_of_stored_matches_gives_the_full_re_ranks_digests(make_config, tmp_path, request, backend,
                                                                  monkeypatch):
    """Seven days on one store: each day a file of new papers, then the day's digests for 60 readers ranked from
    stored matches and by a full re-rank of the window; every digest the same, each day. On day 3 some readers
    click (they are ranked on the whole pool from then on), on day 4 some edit an interest (a new key, scored over
    the window once), and what each received is left out the next days. From day 2 on, only the new papers are
    scored: the stored matches of the day before are read, not made again."""
    from digest.app import App

    url = "sqlite:///digest.db" if backend == "sqlite" else request.getfixturevalue("postgres").new_database()
    app = App(make_config(store={"url": url}))
    try:
        files = day_files(tmp_path, 6)
        app.ingest([SEEDS], seen_on=DAY)
        rng = random.Random(4)
        authors = sorted({a for p in app.composer.pool(DAY).papers for a in p.authors[:1]}) or ["Ada Lovelace"]
        library = {p.title: p for p in app.composer.pool(DAY).papers[:30]}  # libraries of three of these
        subs = readers(60, rng, authors, sorted(library))
        assert sum(bool(i.seed_papers) for s in subs for i in s.interests) >= 10
        received: dict[str, set[int]] = {s.email: set() for s in subs}
        drift: list[float] = []
        liked: dict[str, tuple] = {}
        scored_columns: list[int] = []
        spy_score = stored._score

        def counting(run, lo, interests, columns, vectors):
            scored_columns.append(len(columns))
            return spy_score(run, lo, interests, columns, vectors)

        monkeypatch.setattr(stored, "_score", counting)
        for d in range(7):
            day = DAY + timedelta(days=d)
            if d:
                app.ingest([files[d - 1]], seen_on=day)
            if d == 3:
                subs = [replace(s, interests=(replace(s.interests[0], keywords=("diffusion", "robot")),
                                              *s.interests[1:])) if n % 4 == 0 else s for n, s in enumerate(subs)]
            signals = {s.email: Signals(received=frozenset(received[s.email]), liked=liked.get(s.email, ()),
                                        seeds={r: library[r] for i in s.interests for r in i.seed_papers})
                       for s in subs}
            scored_columns.clear()
            fast = select_many(app.composer.pool(day), subs, day=day, settings=app.settings, signals=signals,
                               store=app.store)
            full = select_many(app.composer.pool(day), subs, day=day, settings=app.settings, signals=signals)
            assert [picks(x) for x in fast] == [picks(x) for x in full], day
            drift.append(stored_drift(app, subs, day, library))
            assert sum(x.count for x in fast) > 60
            for sub, digest in zip(subs, fast, strict=True):
                received[sub.email] |= {i.paper.store_id for i in digest.items}
                if d == 2 and sub.email.startswith("r1"):  # r1, r10..r19 click on day 3
                    liked[sub.email] = tuple(i.paper for i in digest.items[:2])
            pool_size = len(app.composer.pool(day))
            if d in (1, 2, 4, 5, 6):  # a day without edits: only that day's 50 new papers are scored
                assert scored_columns and set(scored_columns) == {50}, (d, scored_columns)
            if d == 3:  # and the edited interests' new keys on the whole window
                assert set(scored_columns) == {50, pool_size}, scored_columns
        assert stored_keys(app.store) > 50
        # each day's papers were a tenth of this small store, so term statistics moved more than a real store's (a
        # library's words weigh 1.9 in its fusion, a keyword's 0.4-0.5: the same movement moves it most); on day 1
        # the stored log-odds are today's, to float32's rounding of values up to about 16
        assert drift[0] < 4e-6 and 0 < max(drift) < matches.DRIFT / 2, drift
    finally:
        app.close()


def test_matches_round_trip_and_coverage():
    """What is kept reads back exactly; coverage follows the scored ids' runs; a merge keeps only pool papers."""
    ids = np.array([3, 4, 5, 9, 10, 20], dtype=np.int64)
    kept = matches.merged(None, ids, ids, np.array([0.1, -3.0, 2.0, 0.5, -9.0, 1.0]), threshold=0.0)
    assert kept.ids.tolist() == [3, 5, 9, 20] and kept.runs.tolist() == [[3, 5], [9, 10], [20, 20]]
    again = matches.Matches.from_bytes(kept.to_bytes())
    assert again.ids.tolist() == kept.ids.tolist() and again.logits.tolist() == kept.logits.tolist()
    assert again.covers(np.array([2, 3, 6, 10, 11, 20, 21])).tolist() == [False, True, False, True, False, True,
                                                                          False]
    later = np.array([5, 9, 10, 20, 21, 22], dtype=np.int64)  # 3 and 4 left the window; 21, 22 new
    moved = matches.merged(again, later, np.array([21, 22]), np.array([4.0, -1.0]), threshold=0.0)
    assert moved.ids.tolist() == [5, 9, 20, 21] and moved.runs.tolist() == [[5, 5], [9, 10], [20, 22]]
    for broken in (b"", b"x" * 24, kept.to_bytes()[:-1], kept.to_bytes() + b"\0"):
        with pytest.raises(ValueError):
            matches.Matches.from_bytes(broken)


@pytest.mark.slow
def test_a_broken_or_missing_store_entry_is_scored_again(app):
    """A cache entry of another version or cut short is not trusted: the interest is scored again, the digests are
    the full re-rank's, and the entry is written anew."""
    pool = app.composer.pool(DAY)
    subs = readers(20, random.Random(9), ["Nobody"])
    signals = {s.email: Signals() for s in subs}
    first = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
    with app.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE cache SET value = :v WHERE key LIKE 'matches/%'"), {"v": b"\x07" * 30})
    again = select_many(app.composer.pool(DAY), subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
    assert [picks(x) for x in again] == [picks(x) for x in first]
    found = {k: v for k, v in _all(app.store).items() if k.startswith("matches/")}
    assert found and all(len(matches.Matches.from_bytes(v).runs) for v in found.values())
    with app.store.engine.begin() as conn:  # docs/operating.md: deleting them loses nothing
        conn.execute(sa.text("DELETE FROM cache WHERE key LIKE 'matches/%'"))
    third = select_many(app.composer.pool(DAY), subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
    assert [picks(x) for x in third] == [picks(x) for x in first] and stored_keys(app.store) == len(found)


@pytest.mark.slow
def test_two_jobs_writing_the_same_matches_at_once(make_config, store_url):
    """Two sends of one day at once (two Apps, their own connections, in threads), over readers who share
    catalogue topics: both scoring and storing the same interests' matches, neither fails, every digest is the
    full re-rank's, and each interest is kept once."""
    import threading

    from digest.app import App

    apps = [App(make_config(store={"url": store_url}, select={"stored_matches": "always"})) for _ in range(2)]
    try:
        apps[0].ingest([SEEDS], seen_on=DAY)
        topics = [Interest("LLM inference", ("LLM", "inference")), Interest("Video", ("video generation",)),
                  Interest("Robots", description="robots that learn from human video"), Interest("GPU", ("CUDA",))]
        rng = random.Random(6)
        group = [Subscriber(email=f"t{i}@example.org", interests=tuple(rng.sample(topics, rng.randint(1, 3))))
                 for i in range(40)]
        results: dict[int, list] = {}
        failures: list[BaseException] = []
        start = threading.Barrier(2)

        def send(n: int) -> None:
            try:
                app = apps[n]
                pool = app.composer.pool(DAY)
                start.wait()
                results[n] = [picks(d) for d in select_many(pool, group, day=DAY, settings=app.settings,
                                                            signals=app.composer.signals(group, DAY), store=app.store)]
            except BaseException as exc:  # noqa: BLE001 - reported below
                failures.append(exc)

        threads = [threading.Thread(target=send, args=(n,)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not failures, failures
        full = select_many(apps[0].composer.pool(DAY), group, day=DAY, settings=apps[0].settings,
                           signals=apps[0].composer.signals(group, DAY))
        assert results[0] == results[1] == [picks(d) for d in full]
        assert stored_keys(apps[0].store) == len(topics)
    finally:
        for app in apps:
            app.close()


def _all(store) -> dict[str, bytes]:
    with store.engine.connect() as conn:
        return {r.key: bytes(r.value) for r in conn.execute(sa.text("SELECT key, value FROM cache"))}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_stored_matches_give_select_digests_picks(app, seed):
    """60 generated readers (seed papers, exclusions, history; a third with clicks, ranked on the whole pool): the
    batch from stored matches, made now and then read back, gives each reader `select_digest`'s digest."""
    rng = random.Random(seed)
    subs, signals = subscribers(60, app.composer.pool(DAY).papers, rng)
    signals = {e: s if rng.random() < 0.3 else Signals(received=s.received, seeds=s.seeds) for e, s in signals.items()}
    assert sum(stored.without_model(s) for s in signals.values()) >= 30
    for _ in range(2):  # the first time scored and kept, the second read
        pool = app.composer.pool(DAY)
        batch = select_many(pool, subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
        for sub, digest in zip(subs, batch, strict=True):
            one = select_digest(pool, sub, day=DAY, settings=app.settings, signals=signals[sub.email])
            assert picks(digest) == picks(one), sub.email
        assert sum(d.count for d in batch) > 100
    assert stored_keys(app.store) > 20


@pytest.mark.slow
def test_matches_kept_in_memory_between_batches_stay_within_their_budget(app, monkeypatch):
    """A run's batches keep the matches they read for later batches' readers who share an interest, but at most
    MEMO_MATCHES papers of them: a long run brings new interests batch after batch, and without a budget it kept them
    all. Past the budget the older ones are let go (read from the store when asked again); the digests stay
    `select_digest`'s."""
    rng = random.Random(3)
    subs, signals = subscribers(60, app.composer.pool(DAY).papers, rng)
    signals = {e: Signals(received=s.received, seeds=s.seeds) for e, s in signals.items()}  # no clicks: all stored

    def held(memo) -> int:
        return sum(len(v[0]) for k, v in memo.items() if isinstance(k, tuple) and k[:1] == ("matches",))

    kept, default = {}, stored.MEMO_MATCHES
    for budget in (default, 2000):  # (a batch of these readers keeps 500-1,000 papers' matches)
        monkeypatch.setattr(stored, "MEMO_MATCHES", budget)
        pool = app.composer.pool(DAY)
        memo = pool.index(app.settings.title_weight).memo
        seen = []
        for lo in range(0, len(subs), 10):  # batches of 10 readers, as a send ranks them
            batch = select_many(pool, subs[lo:lo + 10], day=DAY, settings=app.settings, signals=signals,
                                store=app.store)
            for sub, digest in zip(subs[lo:lo + 10], batch, strict=True):
                one = select_digest(pool, sub, day=DAY, settings=app.settings, signals=signals[sub.email])
                assert picks(digest) == picks(one), sub.email
            assert held(memo) <= budget
            assert held(memo) == memo.get(("matches-held",), 0)
            seen.append(held(memo))
        kept[budget] = seen
    everything = kept[default]
    assert everything == sorted(everything) and everything[-1] > 2000  # the default budget kept every batch's
    assert any(b < a for a, b in itertools.pairwise(kept[2000]))  # the small one let go of some


@pytest.mark.slow
def test_a_profile_file_edited_mid_window_gets_the_full_re_ranks_digest(make_config, subscribers_dir, tmp_path):
    """Through the send path's composer (`select.stored_matches = "always"`; with `auto`, the examples' own interests
    keep nothing): day 1 the examples' digests; then grace's profile file
    gets a new interest and one edited, and day 2 brings new papers: every digest of day 2 is the full re-rank's,
    and the two new keys are scored over the whole window."""
    from digest.app import App

    off = App(make_config(subscribers={"dir": str(subscribers_dir)}, store={"url": "sqlite:///off.db"}))
    try:  # `auto` by default: the examples' interests are their own, nothing is kept
        off.ingest([SEEDS], seen_on=DAY)
        composed = off.composer.batch(off.composer.pool(DAY))(off.profiles.roster().subscribers, DAY)
        assert all(not isinstance(c, Exception) for c in composed)
        assert stored_keys(off.store) == 0
    finally:
        off.close()
    app = App(make_config(subscribers={"dir": str(subscribers_dir)}, select={"stored_matches": "always"}))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        roster = app.profiles.roster().subscribers
        list(app.composer.batch(app.composer.pool(DAY))(roster, DAY))
        before = stored_keys(app.store)
        assert before > 5
        grace = subscribers_dir / "grace.toml"
        grace.write_text(grace.read_text().replace('keywords = ["compiler", "MLIR"', 'keywords = ["reasoning", "MLIR"')
                         + '\n[[interests]]\nname = "Image classification"\n'
                         'keywords = ["classification", "image classification"]\nweight = 3.0\n')
        day = DAY + timedelta(days=1)
        app.ingest([day_files(tmp_path, 6)[0]], seen_on=day)
        roster = app.profiles.roster().subscribers
        pool = app.composer.pool(day)
        sent = [c.digest for c in app.composer.batch(pool)(roster, day)]
        full = select_many(app.composer.pool(day), roster, day=day, settings=app.settings,
                           signals=app.composer.signals(roster, day))
        assert [picks(d) for d in sent] == [picks(d) for d in full]
        mine = next(d for d in sent if d.subscriber.email == "grace@example.org")
        assert "Image classification" in {i.name for i in mine.subscriber.interests}
        assert stored_keys(app.store) == before + 2  # the edited interest and the new one, each a key of its own
        ids = np.array(sorted(p.store_id for p in pool.papers))
        fresh = [m for m in (matches.Matches.from_bytes(v) for k, v in _all(app.store).items()
                             if k.startswith(matches.PREFIX)) if m.covers(ids).all()]
        assert len(fresh) == before + 1  # every key in use covers the window; the edited interest's old key is left
    finally:
        app.close()


@pytest.mark.slow
def test_matches_not_written_for_keep_days_are_forgotten(app):
    """A key no send has written for KEEP_DAYS (an edited interest's old one) is deleted when a send builds its pool;
    the others, and other cache entries, stay."""
    from datetime import datetime

    subs = readers(10, random.Random(2), ["Nobody"])
    select_many(app.composer.pool(DAY), subs, day=DAY, settings=app.settings,
                signals={s.email: Signals() for s in subs},
                store=app.store)
    live = stored_keys(app.store)
    app.store.put_caches({matches.PREFIX + "old": b"x", "other/old": b"y"})
    with app.store.engine.begin() as conn:
        conn.execute(sa.text("UPDATE cache SET updated_at = :t WHERE key IN ('matches/old', 'other/old')"),
                     {"t": datetime(2020, 1, 1)})
    assert stored_keys(app.store) == live + 1
    app.composer.pool(DAY)
    assert stored_keys(app.store) == live
    assert app.store.get_cache("other/old") == b"y"


@pytest.mark.slow
def test_pools_the_store_did_not_hand_out_are_ranked_in_full(app):
    """Stored matches are used only on a window as the store hands it out: papers out of the store's order, a paper
    the store does not hold, or a floor of 0 or 1 send the batch down the full re-rank, with the same digests."""
    pool = app.composer.pool(DAY)
    assert stored.usable(pool, app.settings)
    papers = list(pool.papers)
    outside = replace(papers[0], store_id=None, title="A paper from a file")
    assert not stored.usable(type(pool)(papers[::-1]), app.settings)
    assert not stored.usable(type(pool)([outside, *papers[1:]]), app.settings)
    assert not stored.usable(pool, replace(app.settings, min_relevance=0.0))
    subs = readers(15, random.Random(5), ["Nobody"])
    signals = {s.email: Signals() for s in subs}
    shuffled = app.composer.pool(DAY, papers=papers[::-1])
    batch = select_many(shuffled, subs, day=DAY, settings=app.settings, signals=signals, store=app.store)
    full = select_many(app.composer.pool(DAY, papers=papers[::-1]), subs, day=DAY, settings=app.settings,
                       signals=signals)
    assert [picks(d) for d in batch] == [picks(d) for d in full] and stored_keys(app.store) == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "never"])
def test_auto_keeps_matches_where_readers_share_interests(make_config, mode):
    """`auto`: a batch of readers over a few catalogue topics is ranked from stored matches, one of readers with
    interests of their own on the whole window; `never` keeps nothing; the digests are the full re-rank's each way."""
    from digest.app import App

    app = App(make_config(select={"stored_matches": mode}))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        own = readers(30, random.Random(8), ["Nobody"])
        topics = [Interest("LLM inference", ("LLM", "inference")), Interest("Video", ("video generation",)),
                  Interest("Robots", description="robots that learn from human video")]
        rng = random.Random(3)
        catalogue = [Subscriber(email=f"c{i}@example.org", interests=tuple(rng.sample(topics, rng.randint(1, 3))))
                     for i in range(30)]
        assert stored.shared(catalogue) and not stored.shared(own)
        compose = app.composer.batch(app.composer.pool(DAY))
        mine = [c.digest for c in compose(own, DAY)]
        assert stored_keys(app.store) == 0
        theirs = [c.digest for c in compose(catalogue, DAY)]
        assert stored_keys(app.store) == (3 if mode == "auto" else 0)
        for group, got in ((own, mine), (catalogue, theirs)):
            full = select_many(app.composer.pool(DAY), group, day=DAY, settings=app.settings,
                               signals=app.composer.signals(group, DAY))
            assert [picks(d) for d in got] == [picks(d) for d in full]
        assert sum(d.count for d in theirs) > 30
    finally:
        app.close()


def test_stored_matches_need_every_paper_from_the_store_in_its_order(app):
    """`stored.usable`: a window handed out by the store (ids ascending) can use stored matches; a pool with a paper
    the store does not hold, or out of the store's order, cannot (the pool's ids are made once and kept)."""
    from digest.select import Pool

    pool = app.composer.pool(DAY)
    assert stored.usable(pool, app.settings)
    assert pool.store_ids is pool.store_ids and pool.store_ids.tolist() == [p.store_id for p in pool.papers]
    assert not stored.usable(pool, replace(app.settings, min_relevance=0.0))  # no floor, nothing to keep
    unsaved = Pool([*pool.papers[:5], replace(pool.papers[5], store_id=None)], app.analysis.corpus())
    assert unsaved.store_ids is None and not stored.usable(unsaved, app.settings)
    backwards = Pool(pool.papers[:5][::-1], app.analysis.corpus())
    assert backwards.store_ids is not None and not stored.usable(backwards, app.settings)
