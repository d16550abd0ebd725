"""A claim takes one batch, whatever the planner thinks: on a store with days of history and fresh statistics.

With `UPDATE … WHERE subscriber IN (SELECT … LIMIT n FOR UPDATE SKIP LOCKED)`, PostgreSQL, once
ANALYZE had seen earlier days but not the new one, re-ran the limited subquery for every row of the date, so
the first claimer took the whole date and a worker that joined the send found nothing queued. Each test
here builds that store (settled history by direct inserts, today's digests queued by `enqueue`, ANALYZE)
on SQLite and on PostgreSQL, and counts the rows each claim takes.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from digest import daily
from digest.store import Store
from digest.store.tables import deliveries

from ..conftest import DAY, SEEDS, prime

HISTORY_DAYS = 3


def later(**delta: float) -> datetime:
    return datetime.now(UTC).replace(tzinfo=None) + timedelta(**delta)


def emails(count: int) -> list[str]:
    return [f"r{i:05}@example.org" for i in range(count)]


def settle_history(store: Store, people: list[str]) -> None:
    """`HISTORY_DAYS` days before DAY, each with every digest sent (inserted directly: volume, not sends)."""
    now = later()
    rows = [{"subscriber": e, "digest_date": DAY - timedelta(days=back), "message_id": f"<{back}.{e}>",
             "status": "sent", "attempts": 1, "transport": "smtp", "detail": "", "updated_at": now}
            for back in range(1, HISTORY_DAYS + 1) for e in people]
    with store.write() as conn:
        conn.execute(deliveries.insert(), rows)


def analyze(store: Store) -> None:
    with store.engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")


def history_store(url: str, people: list[str], *, analyzed: str) -> Store:
    """A store with settled history and DAY queued for `people`; ANALYZE run `before` DAY is queued (the
    statistics a daily send meets: they know the earlier days only) or `after` (they know DAY's queue too)."""
    store = Store(url)
    settle_history(store, people)
    if analyzed == "before":
        analyze(store)
    store.enqueue(DAY, people, message_id=lambda e: f"<{e}>", transport="smtp")
    if analyzed == "after":
        analyze(store)
    return store


@pytest.mark.parametrize("analyzed", ["before", "after"])
def test_each_claim_takes_exactly_one_batch(store_url, analyzed):
    """1,050 queued over 3,150 settled rows, statistics taken before or after the day was queued: claims of
    100 take 100 each, the last takes the 50 left, then nothing; every digest once."""
    people = emails(1050)
    store = history_store(store_url, people, analyzed=analyzed)
    sizes, taken = [], []
    while batch := store.claim(DAY, "a/1/1/x", limit=100, lease_until=later(minutes=5)):
        sizes.append(len(batch))
        taken += [c.subscriber for c in batch]
    assert sizes == [100] * 10 + [50]
    assert sorted(taken) == people
    assert store.count_queued(DAY) == 0
    store.close()


def test_two_claimers_split_the_queue_without_overlap(store_url):
    """Two claimers, each with its own connection, racing over 2,000 queued digests in batches of 50: each
    takes full batches (only its last one may be short), none takes a digest the other took, none is lost."""
    people = emails(2000)
    history_store(store_url, people, analyzed="before").close()
    start = threading.Barrier(2)

    def batches(owner: str) -> list[list[str]]:
        mine, taken = Store(store_url), []
        start.wait(60)  # both connected before the first claim, so that they race
        while batch := mine.claim(DAY, owner, limit=50, lease_until=later(minutes=5)):
            taken.append([c.subscriber for c in batch])
            time.sleep(0.002)  # a worker composes its batch before claiming the next
        mine.close()
        return taken

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(batches, ["w/1/0/t", "w/2/0/t"])
    for taken in (first, second):
        sizes = [len(batch) for batch in taken]
        assert sizes and all(size == 50 for size in sizes[:-1]) and sizes[-1] <= 50, sizes
    one, other = [{e for batch in taken for e in batch} for taken in (first, second)]
    assert not one & other and sorted(one | other) == people


def test_a_claimer_joining_a_running_send_gets_batches(store_url):
    """A send holding two batches of 100 (a live owner elsewhere): a second claimer started then finds the
    date queued, 800 waiting, and claims 100 of them, not "nothing queued"."""
    people = emails(1000)
    store = history_store(store_url, people, analyzed="before")
    running = [store.claim(DAY, "far/1/1/a", limit=100, lease_until=later(minutes=5)) for _ in range(2)]
    assert [len(batch) for batch in running] == [100, 100]
    joining = Store(store_url)
    assert DAY in joining.queued_dates() and joining.count_queued(DAY) == 800
    batch = joining.claim(DAY, "near/2/2/b", limit=100, lease_until=later(minutes=5))
    assert len(batch) == 100
    assert not {c.subscriber for c in batch} & {c.subscriber for part in running for c in part}
    joining.close()
    store.close()


@pytest.mark.slow
def test_a_worker_joining_a_running_send_delivers_the_rest(make_config, store_url, model_rows, tmp_path: Path):
    """`digest worker`'s drain, started while a send holds one batch of 20 of 120 due digests on a store with
    history and statistics: it claims and delivers the other 100, in batches of 20."""
    from digest.app import App

    folder = tmp_path / "many"
    folder.mkdir()
    people = emails(120)
    for email in people:
        (folder / f"{email.split('@')[0]}.toml").write_text(f'email = "{email}"\n')
    if store_url.startswith("postgresql"):
        prime(store_url, model_rows)
    app = App(make_config(store={"url": store_url}, subscribers={"dir": str(folder)},
                          delivery={"batch_size": 20}))
    try:
        app.ingest([SEEDS], seen_on=DAY)
        app.profiles.sync()
        settle_history(app.store, people)
        analyze(app.store)
        app.store.enqueue(DAY, people, message_id=lambda e: f"<{e}.{DAY}@digest.example.org>", transport="outbox")
        held = app.store.claim(DAY, "far/1/1/a", limit=20, lease_until=later(minutes=5))
        assert len(held) == 20
        [report] = daily.drain(app, day=DAY)
        assert report.claimed == 100 and report.count("sent") == 100
        assert len(list(Path(app.config.delivery.outbox).rglob("*.eml"))) == 100
    finally:
        app.close()


def test_queueing_a_day_by_slots_costs_one_pass_whatever_the_statistics(store_url):
    """5,000 subscribers in the store, a day sent and ANALYZE run: queueing the next day by slots, and queueing it
    again once every digest of it failed, each take well under a second (PostgreSQL, listing the slots'
    subscribers again for every digest of the date, took 3 s and 10 s here, 13 s and 41 s at 10,000)."""
    from datetime import time as clock

    from digest.models import Subscriber

    store = Store(store_url)
    zones = ["UTC", "Europe/London", "America/New_York", "Asia/Tokyo"]
    people = [Subscriber(email=e, timezone=zones[i % 4], send_at=clock(5 + i % 5, 15 * (i % 4)))
              for i, e in enumerate(emails(5000))]
    store.put_subscribers(people, "csv")
    slots = sorted({(s.timezone, s.send_at, s.frequency) for s in people})
    before = DAY - timedelta(days=1)
    store.enqueue_slots(before, slots, "smtp")
    with store.write() as conn:
        conn.execute(deliveries.update().values(status="sent"))
    analyze(store)
    for attempt in ("first", "again"):
        start = time.perf_counter()
        found = store.enqueue_slots(DAY, slots, "smtp")
        took = time.perf_counter() - start
        assert found.queued == 5000 and took < 1.5, (attempt, found.queued, took)
        with store.write() as conn:
            conn.execute(deliveries.update().where(deliveries.c.digest_date == DAY).values(status="failed"))
    store.close()
