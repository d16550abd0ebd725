"""The operator console's speed at scale: how long /admin/ takes to answer, and how big it is, with N subscribers.

    .venv/bin/python bench/console.py [--subscribers 100000] [--store URL | --postgres] [--runs 5]

Fills a throwaway store (SQLite under a temporary folder, the empty PostgreSQL database --store
names, or a throwaway PostgreSQL server with --postgres, started as the tests start one) with N
imported subscribers, each with a name and one or two interests; a third of them have the day's
digest sent, 1% failed, 1% suppressed (half by bounces), 1% paused, 100 signups pending.
Then times each console request through the real web application (Flask's test client: the routing,
the password and the page rendering, without a socket): the first, a middle and the last page, a
search by address and by name, each state filter, a subscriber's page. Prints min and median of
--runs requests, and the page size.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import tempfile
import time
from datetime import date, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.models import Interest, Subscriber  # noqa: E402
from digest.store.signups import SignupRecord  # noqa: E402
from digest.store.tables import deliveries  # noqa: E402
from digest.web import create_app  # noqa: E402

DAY = date(2026, 7, 1)
BATCH = 10_000
TOPICS = ("LLM inference", "GPU kernels", "Robotics", "Diffusion models", "Retrieval")


def people(start: int, stop: int) -> list[Subscriber]:
    return [Subscriber(email=email(i), name=f"Reader Number {i}",
                       interests=tuple(Interest(TOPICS[(i + k) % len(TOPICS)], ("kv cache", "speculative decoding"))
                                       for k in range(1 + i % 2))) for i in range(start, stop)]


def email(i: int) -> str:
    return f"reader{i:07d}@example.net"


def fill(app: App, n: int) -> None:
    """N subscribers and the day's send log, suppressions, pauses and signups, a batch at a time."""
    store = app.store
    for start in range(0, n, BATCH):
        stop = min(n, start + BATCH)
        store.put_subscribers(people(start, stop), "import")
        store.enqueue(DAY, [email(i) for i in range(start, stop) if i % 3 == 0 or i % 100 == 1],
                      message_id=lambda e: f"<{e}>", transport="outbox")
    with store.write() as conn:  # (a bench's shortcut: mark the queued digests as a send would have)
        conn.execute(deliveries.update().where(deliveries.c.digest_date == DAY).values(status="sent"))
        conn.execute(deliveries.update().where(deliveries.c.subscriber.like("reader%01@example.net")).values(
            status="failed", detail="550 refused"))
    for i in range(5, n, 100):
        store.suppress(email(i), "bounced: 550 5.1.1 no such user" if i % 200 == 5 else "unsubscribed")
    for i in range(7, n, 100):
        store.set_preference(email(i), paused_until=DAY + timedelta(days=7))
    for i in range(100):
        store.put_signup(SignupRecord(f"signup{i:03d}@example.org", "pending", f"n{i}", "{}", datetime.now(),
                                      "v1", "h", ""), expired_before=datetime(2000, 1, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subscribers", type=int, default=100_000)
    parser.add_argument("--store", default="", help="an empty database's URL (default: SQLite in a temporary folder)")
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL server (tests/pg.py)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", type=Path, help="a folder for the SQLite store, kept: a second run reuses the list")
    args = parser.parse_args()
    if args.postgres:
        from tests.pg import start

        server = start()
        try:
            run(args, server.new_database())
        finally:
            server.stop()
    else:
        run(args, args.store)


def run(args: argparse.Namespace, store: str) -> None:
    folder = args.keep or Path(tempfile.mkdtemp(prefix="console-bench-"))
    (folder / "subscribers").mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("DIGEST_SECRET", "bench")
    url = store or f"sqlite:///{folder / 'digest.db'}"
    app = App(build_config({"store": {"url": url}, "subscribers": {"dir": str(folder / "subscribers")}},
                           base=folder))
    started = time.perf_counter()
    if app.store.count_subscribers() != args.subscribers:
        fill(app, args.subscribers)
    print(f"{app.store.count_subscribers():,} subscribers on {url.split(':')[0]}: filled in "
          f"{time.perf_counter() - started:.0f} s")
    client = create_app(app, operator_password="pw").test_client()
    login = {"Authorization": "Basic " + base64.b64encode(b"operator:pw").decode()}
    last = -(-args.subscribers // 50)
    requests = [("first page", "/admin/", {}), ("middle page", "/admin/", {"page": last // 2}),
                ("last page", "/admin/", {"page": last}), ("200 a page", "/admin/", {"size": 200}),
                ("search address", "/admin/", {"q": "reader0054321"}),
                ("search name", "/admin/", {"q": "number 54321"}),
                *[(f"state {s}", "/admin/", {"state": s}) for s in ("due", "sent", "failed", "bounced", "suppressed",
                                                                     "paused", "pending signup")],
                ("subscriber page", "/admin/subscriber", {"email": "reader0000003@example.net"})]
    print(f"{'request':<22} {'min ms':>8} {'median ms':>10} {'KiB':>7}")
    for name, path, params in requests:
        times, size = [], 0
        for _ in range(args.runs):
            began = time.perf_counter()
            response = client.get(path, query_string={"date": DAY.isoformat(), **params}, headers=login)
            times.append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, (name, response.status_code, response.text[:300])
            size = len(response.data)
        print(f"{name:<22} {min(times):8.0f} {statistics.median(times):10.0f} {size / 1024:7.1f}")
    app.close()


if __name__ == "__main__":
    main()
