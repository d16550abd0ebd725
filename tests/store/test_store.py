"""The store on SQLite and PostgreSQL alike: schema versions and migrations, the claim queue, leases, takeovers."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from digest.delivery.owners import Owner
from digest.errors import StoreError
from digest.store import Store, schema
from digest.store.console import SEARCH_INDEXES, SEARCH_TABLE
from digest.store.engine import make_engine
from digest.store.tables import metadata

DAY = date(2026, 6, 12)


def later(**delta: float) -> datetime:
    return datetime.now(UTC).replace(tzinfo=None) + timedelta(**delta)


def dead_owner() -> str:
    """The owner id of a process of this machine that has exited."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return Owner(Owner.current().host, int(gone.stdout), "1", "gone").id


def queue(store: Store, emails: list[str]) -> None:
    store.enqueue(DAY, emails, message_id=lambda e: f"<{e}>", transport="outbox")


def test_head_constant_is_the_newest_migration():
    """schema.HEAD names the last migration in migrations/versions, so new databases are stamped right."""
    from alembic.script import ScriptDirectory

    from digest.store.schema import MIGRATIONS

    assert ScriptDirectory(str(MIGRATIONS)).get_current_head() == schema.HEAD


def test_migrations_build_exactly_the_declared_schema(store_url):
    """Upgrading an empty database through every migration gives the tables the code declares, no more, no less."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(store_url)
    with engine.begin() as conn:
        command.upgrade(schema.alembic_config(conn), "head")
    with engine.connect() as conn:
        # (the search indexes are made only where the database can have them: not declared, so left out)
        declared = {"include_object": lambda _o, name, kind, *_: not (kind == "index" and name in SEARCH_INDEXES
                                                                      or str(name).startswith(SEARCH_TABLE))}
        diff = compare_metadata(MigrationContext.configure(conn, opts=declared), metadata)
        assert schema.current(conn) == schema.HEAD
    engine.dispose()
    assert diff == []


@pytest.mark.slow
def test_a_database_from_before_migrations_must_be_upgraded_and_keeps_its_data(tmp_path):
    """An old database is refused with the command to run; `digest db upgrade` migrates it with its rows intact."""
    from alembic import command

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        command.upgrade(schema.alembic_config(conn), schema.BASELINE)
        conn.execute(sa.text("DROP TABLE alembic_version"))  # as made by create_all, before migrations
        conn.execute(sa.text("INSERT INTO deliveries VALUES ('ada@example.org', '2026-06-11', '<m>', 'sent', 1, "
                             "'outbox', '', '2026-06-11 07:00:00')"))
        for email in ("Grace@Example.org", "grace@example.org", "Alan@Example.org", "ALAN@example.org"):
            conn.execute(sa.text("INSERT INTO suppressions VALUES (:e, 'unsubscribed', '2026-06-11 07:00:00')"),
                         {"e": email})
    engine.dispose()
    with pytest.raises(StoreError, match=rf"revision 0001.*needs {schema.HEAD}: run `digest db upgrade`"):
        Store(url)
    (tmp_path / "digest.toml").write_text('[store]\nurl = "sqlite:///old.db"\n')
    upgrade = subprocess.run([sys.executable, "-m", "digest", "db", "upgrade"], cwd=tmp_path, text=True,
                             capture_output=True, timeout=60)
    assert upgrade.returncode == 0, upgrade.stderr
    assert f"schema upgraded from 0001 to {schema.HEAD}" in upgrade.stdout
    store = Store(url)
    [record] = store.deliveries_on(date(2026, 6, 11))
    assert record.status == "sent" and record.claimed_by is None
    assert store.suppressed() == {"grace@example.org": "unsubscribed", "alan@example.org": "unsubscribed"}
    store.close()


def test_a_newer_schema_is_refused(store_url):
    """A database upgraded by a newer paper-digest is not touched by an older one."""
    Store(store_url).close()
    engine = make_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    with pytest.raises(StoreError, match="newer than this version of paper-digest"):
        Store(store_url)


def test_claims_are_disjoint_and_settled_digests_are_not_queued_again(store_url):
    """Two workers claiming one date get different digests; a sent one is never queued or claimed again."""
    store = Store(store_url)
    emails = [f"r{i:02}@example.org" for i in range(30)]
    queue(store, emails)
    first = store.claim(DAY, "a/1/1/x", limit=20, lease_until=later(minutes=5))
    second = store.claim(DAY, "b/2/2/y", limit=20, lease_until=later(minutes=5))
    assert len(first) == 20 and len(second) == 10
    assert not {c.subscriber for c in first} & {c.subscriber for c in second}
    assert store.mark_sent(first[0].subscriber, DAY, [], owner="a/1/1/x")
    assert store.release("a/1/1/x") == 19
    queue(store, emails)
    again = store.claim(DAY, "c/3/3/z", limit=100, lease_until=later(minutes=5))
    assert first[0].subscriber not in {c.subscriber for c in again} and len(again) == 19
    assert {c.message_id for c in again} == {f"<{c.subscriber}>" for c in again}
    store.close()


def test_an_expired_lease_or_a_dead_owner_is_taken_over(store_url):
    """A claim whose lease ran out, or whose owner died on this machine, is taken over; a live one is not."""
    store = Store(store_url)
    queue(store, ["a@example.org", "b@example.org", "c@example.org"])
    gone = dead_owner()
    store.claim(DAY, "far/8/8/y", limit=1, lease_until=later(hours=1))  # a: alive elsewhere, lease running
    store.claim(DAY, gone, limit=1, lease_until=later(hours=1))  # b: its process is gone
    store.claim(DAY, "far/9/9/x", limit=1, lease_until=later(seconds=-1))  # c: its lease has run out
    from digest.delivery.owners import dead

    assert dead(store.holders(DAY)) == [gone]
    taken = store.claim(DAY, "me/1/1/z", limit=10, lease_until=later(minutes=5), dead=dead(store.holders(DAY)))
    assert [c.subscriber for c in taken] == ["b@example.org", "c@example.org"]
    assert all(c.attempts == 2 for c in taken)
    assert not store.mark_sent("c@example.org", DAY, [], owner="far/9/9/x")  # the old owner lost it
    assert store.mark_sent("c@example.org", DAY, [], owner="me/1/1/z")
    store.close()


def test_a_sent_mark_records_the_papers_once_and_flushes_as_the_setting_says(store_url, request):
    """`mark_sent` records the Message-ID and each paper once (one statement on PostgreSQL), says whether the
    claim was still held, and commits the way `store.durable_sends` asks: on PostgreSQL with
    `synchronous_commit = off` for the marks' own session unless durable (seen in the server's own statement
    log), on SQLite with synchronous NORMAL or FULL."""
    from digest.models import Paper

    logged = None
    if store_url.startswith("postgresql"):  # the server logs every statement of this test's database
        server = request.getfixturevalue("postgres")
        name = store_url.rsplit("/", 1)[1]
        with sa.create_engine(server.url()).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(sa.text(f"ALTER DATABASE {name} SET log_statement = 'all'"))
        logged = server.folder / "server.log"
    for durable in (False, True):
        store = Store(store_url, durable_sends=durable)
        day = DAY + timedelta(days=int(durable))
        store.add_papers([Paper(title=f"Paper {i}", abstract="x", arxiv_id=f"2606.0000{i}") for i in range(3)],
                         seen_on=day)
        ids = sorted(p.store_id for p in store.all_papers())
        who = f"durable-{durable}@example.org"
        store.enqueue(day, [who], message_id=lambda e: "<old@x>", transport="smtp")
        store.claim(day, "me/1/1/z", limit=1, lease_until=later(minutes=5))
        start = logged.stat().st_size if logged else 0
        assert store.mark_sent(who, day, [ids[0], ids[1], ids[0]], owner="me/1/1/z",
                               message_id="<new@x>")
        assert store.received_before(who, day + timedelta(days=1)) == {ids[0], ids[1]}
        assert store.delivery(who, day).message_id == "<new@x>"
        assert store.delivery(who, day).status == "sent"
        assert not store.mark_sent(who, day, [ids[2]], owner="someone/2/2/else")  # not held: False,
        assert store.received_before(who, day + timedelta(days=1)) == set(ids)  # papers kept all the same
        if logged:
            text = logged.read_bytes()[start:].decode()
            assert "WITH u AS (UPDATE deliveries" in text
            assert ("SET synchronous_commit = off" in text) is (not durable)
        else:
            with store.engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == (2 if durable else 1)
        store.close()


def test_marks_keep_one_connection_and_a_failed_mark_leaves_nothing_half_done(store_url):
    """`mark_sent` keeps one driver connection for the run instead of a pool round trip per digest; a mark
    that fails (here a paper the store does not have) is rolled back whole (the digest stays claimed, no
    paper recorded), its connection is dropped, the next mark works, and `close` gives every one back."""
    from digest.models import Paper
    from digest.store.engine import database_errors

    store = Store(store_url)
    store.add_papers([Paper(title=f"Paper {i}", abstract="x", arxiv_id=f"2606.0010{i}") for i in range(2)], seen_on=DAY)
    ids = sorted(p.store_id for p in store.all_papers())
    queue(store, ["a@example.org", "b@example.org", "c@example.org"])
    store.claim(DAY, "me/1/1/z", limit=3, lease_until=later(minutes=5))
    assert store.mark_sent("a@example.org", DAY, ids, owner="me/1/1/z", message_id="<a>")
    kept = store._marks_connection()
    assert store.mark_sent("b@example.org", DAY, ids[:1], owner="me/1/1/z", message_id="<b>")
    assert store._marks_connection() is kept  # the one kept for marks, not one per digest

    with pytest.raises(database_errors()):
        store.mark_sent("c@example.org", DAY, [ids[0], max(ids) + 1000], owner="me/1/1/z", message_id="<c>")
    assert store.delivery("c@example.org", DAY).status == "claimed"
    assert store.received_before("c@example.org", DAY + timedelta(days=1)) == set()
    assert not kept.is_valid  # closed

    assert store.mark_sent("c@example.org", DAY, ids, owner="me/1/1/z", message_id="<c>")
    assert [store.delivery(e, DAY).status for e in ("a@example.org", "b@example.org", "c@example.org")] == ["sent"] * 3
    again = store._marks_connection()
    store.close()
    assert not again.is_valid and store.engine.pool.checkedout() == 0
    assert store.mark_sent("a@example.org", DAY, ids, message_id="<a>")  # still usable after close (as after a fork)
    store.close()


def test_a_mark_waits_for_another_writer_in_short_steps_and_gives_up_at_the_busy_timeout(tmp_path, monkeypatch):
    """SQLite: a mark that finds the write lock held waits for it (in steps of 50 µs to 2 ms, not SQLite's
    1, 2, 5, 10 … ms) and is recorded once it is free; held past the busy timeout, the mark fails."""
    import sqlite3

    import digest.store.engine as engine

    url = f"sqlite:///{tmp_path / 'd.db'}"
    store = Store(url)
    queue(store, ["a@example.org", "b@example.org"])
    store.claim(DAY, "me/1/1/z", limit=2, lease_until=later(minutes=5))
    assert store.mark_sent("a@example.org", DAY, [], owner="me/1/1/z")  # the marks' connection is open
    blocker = sqlite3.connect(tmp_path / "d.db", isolation_level=None, check_same_thread=False)
    blocker.execute("BEGIN IMMEDIATE")
    threading.Timer(0.15, blocker.rollback).start()
    assert store.mark_sent("b@example.org", DAY, [], owner="me/1/1/z")  # waited, then marked
    assert store.delivery("b@example.org", DAY).status == "sent"

    queue(store, ["c@example.org"])
    store.claim(DAY, "me/1/1/z", limit=1, lease_until=later(minutes=5))
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 100)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        store.mark_sent("c@example.org", DAY, [], owner="me/1/1/z")
    blocker.rollback()
    assert store.delivery("c@example.org", DAY).status == "claimed"
    blocker.close()
    store.close()


def test_concurrent_claimers_never_share_a_digest(store_url):
    """Eight threads with their own connections claiming 400 digests in batches of 7: each claimed exactly once."""
    store = Store(store_url)
    emails = [f"r{i:03}@example.org" for i in range(400)]
    queue(store, emails)
    got: list[list[str]] = [[] for _ in range(8)]

    ready = threading.Barrier(8)

    def worker(n: int) -> None:
        mine = Store(store_url)
        ready.wait(60)  # all connected before the first claim, so that they race
        while batch := mine.claim(DAY, f"w/{n}/0/t", limit=7, lease_until=later(minutes=5)):
            got[n] += [c.subscriber for c in batch]
            threading.Event().wait(0.002)  # a worker composes its batch before claiming the next
        mine.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    everything = [e for part in got for e in part]
    assert sorted(everything) == emails  # none twice, none lost
    assert sum(1 for part in got if part) >= 2
    store.close()


def test_postgres_urls_from_managed_services_use_psycopg(postgres):
    """`postgresql://` and `postgres://` URLs (as hosting providers give them) work without naming the driver."""
    plain = postgres.new_database().replace("postgresql+psycopg://", "postgres://")
    store = Store(plain)
    assert store.engine.dialect.driver == "psycopg"
    assert store.count_papers() == 0
    store.close()


def test_unreachable_postgres_is_one_clear_error():
    """A PostgreSQL URL nobody answers on gives a StoreError naming the database, not a traceback."""
    from ..pg import free_port

    with pytest.raises(StoreError, match="cannot open database"):
        Store(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing?connect_timeout=2")


def test_sqlite_folder_must_exist(tmp_path: Path):
    with pytest.raises(StoreError, match="does not exist"):
        Store(f"sqlite:///{tmp_path / 'missing' / 'digest.db'}")


def test_slots_select_exactly_their_subscribers_whatever_their_number(store_url):
    """Hundreds of slots due at once: each subscriber is queued when their (time zone, time, frequency) is
    among them, a frequency chosen on the preferences page counting over the profile's."""
    from digest.models import Subscriber

    store = Store(store_url)
    zones = ["UTC", "Europe/London", "America/New_York", "Asia/Tokyo"]
    people = [Subscriber(email=f"p{i:03}@example.org", timezone=zones[i % 4], send_at=time(i % 24, 30 * (i % 2)),
                         frequency="weekly" if i % 5 == 0 else "daily") for i in range(240)]
    store.put_subscribers(people, "csv")
    store.set_preference("p001@example.org", frequency="weekly")  # daily in its profile
    slots = sorted({(s.timezone, s.send_at, s.frequency) for s in people} | {("UTC", time(7), "weekly")})
    due = set(slots[::2])
    chosen = {s.email: s.frequency for s in people} | {"p001@example.org": "weekly"}
    expected = {s.email for s in people if (s.timezone, s.send_at, chosen[s.email]) in due}
    assert 0 < len(expected) < len(people)
    found = store.enqueue_slots(DAY, sorted(due), "outbox")
    queued = {c.subscriber for c in store.claim(DAY, "a/1/1/x", limit=1000, lease_until=later(minutes=5))}
    assert found.queued == len(queued) and queued == expected
    emails, total = store.emails_in_slots([s for s in slots if s not in due], limit=5)
    assert total == len(people) - len(expected) and len(emails) == 5
    store.close()


def test_purging_cache_entries_by_prefix_takes_the_prefix_literally(store_url):
    """`purge_caches(prefix, before)` forgets the entries under the prefix written before `before` (a `%` or `_` in
    the prefix is literal) and never touches other keys."""
    from datetime import UTC, datetime, timedelta

    store = Store(store_url)
    store.put_cache("stats", b"s")
    store.put_cache("poolsx", b"other kind")  # `pool_` would match it in an unescaped LIKE
    store.put_cache("pool_a", b"a")
    store.put_cache("pool_b", b"b")
    later = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=5)
    assert store.purge_caches("pool_", later - timedelta(days=1)) == 0  # written since: kept
    assert store.purge_caches("pool_", later) == 2
    assert [store.get_cache(k) for k in ("stats", "poolsx", "pool_a", "pool_b")] == [b"s", b"other kind", None, None]
    store.close()


def test_reading_many_cache_entries_at_once_gives_each_its_own_bytes(store_url):
    """`get_caches` (a ranking reads a profile for every interest this way): over its statements' bounds, keys in
    any order and repeated, missing ones left out, binary values byte for byte (nul bytes, invalid UTF-8)."""
    import random

    store = Store(store_url)
    values = {f"k/{n:05}/{'x' * (n % 7)}": bytes([n % 256, 0, 255]) + n.to_bytes(4, "little") * (n % 5)
              for n in range(1_234)}
    store.put_caches(values)
    keys = [*values, *[f"missing/{n}" for n in range(40)], *list(values)[:30]]
    random.Random(7).shuffle(keys)
    assert store.get_caches(keys) == values
    assert store.get_caches(["missing/1"]) == {} and store.get_caches([]) == {}
    assert store.get_caches([key for key in values if key.endswith("/")]) == {
        key: value for key, value in values.items() if key.endswith("/")}
    store.close()


@pytest.mark.slow
def test_reading_known_papers_again_takes_a_few_statements_and_merges_as_one_by_one(store_url):
    """A cron run re-reads its sources: 600 papers the store knows cost a handful of statements, not two per
    paper, and what changed (an abstract filled in, upvotes that grew, a new day's count) is merged all the same."""
    from digest.models import Paper

    store = Store(store_url)
    day = date(2026, 6, 12)
    first = [Paper(title=f"Paper {i}", abstract="" if i % 2 else "known", arxiv_id=f"2606.{i:05}", upvotes=i)
             for i in range(600)]
    assert store.add_papers(first, seen_on=day).new == 600
    statements: list[str] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    again = store.add_papers(first, seen_on=day)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 600)
    assert len(statements) <= 8, statements[:10]
    statements.clear()
    later = [Paper(title=f"Paper {i}", abstract="filled in", arxiv_id=f"2606.{i:05}", upvotes=i + (i < 3))
             for i in range(4)]
    again_0 = Paper(title="Paper 0", abstract="other", arxiv_id="2606.00000", upvotes=5)  # read back after a write
    counts = store.add_papers(later + [again_0], seen_on=day + timedelta(days=1))
    assert (counts.new, counts.updated, counts.unchanged) == (0, 4, 0)
    stored = {p.arxiv_id: p for p in store.all_papers()}
    assert [stored[f"2606.{i:05}"].abstract for i in range(4)] == ["known", "filled in", "known", "filled in"]
    assert [u for _, u in store.upvote_history(stored["2606.00001"].store_id)] == [1, 2]
    assert [u for _, u in store.upvote_history(stored["2606.00003"].store_id)] == [3, 3]
    assert [u for _, u in store.upvote_history(stored["2606.00000"].store_id)] == [0, 5]
    store.close()


def test_the_history_a_send_reads_comes_from_the_window_alone(tmp_path):
    """A send reads the papers received within the selection window: on SQLite, from the covering index
    (subscriber, date, paper), never by walking every paper a subscriber ever received (which made a send's
    CPU grow with the days of history). And the papers returned are exactly the window's."""
    from digest.models import Paper

    store = Store(f"sqlite:///{tmp_path / 'digest.db'}")
    store.add_papers([Paper(title=f"Paper {i}", abstract="x", arxiv_id=f"2606.{i:05}") for i in range(40)],
                     seen_on=DAY - timedelta(days=40))
    ids = sorted(p.store_id for p in store.all_papers())
    for back in range(1, 21):  # twenty earlier digests of two papers each
        store.mark_sent("ada@example.org", DAY - timedelta(days=back), ids[2 * back - 2:2 * back])
    executed: list[tuple[str, object]] = []
    sa.event.listen(store.engine, "before_cursor_execute", lambda _c, _k, q, p, *_: executed.append((q, p)))
    window = store.received_by_subscriber(DAY, ["ada@example.org"], since=DAY - timedelta(days=7))
    assert window == {"ada@example.org": set(ids[:14])}
    [(sql, params)] = [(q, p) for q, p in executed if "FROM received" in q]
    with store.engine.connect() as conn:
        plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
    assert "COVERING INDEX ix_received_by_date" in plan, plan
    store.close()
