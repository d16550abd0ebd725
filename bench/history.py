"""History: a send costs the same whether the store holds 0 or 90 earlier days of digests.

    nice -n 5 .venv/bin/python bench/history.py [--subscribers 10000] [--days 0 30 90] [--repeat 2]

A send reads only the history it needs: the papers each subscriber received within the selection
window (`select.window_days`), never the whole send log. This runs the real `digest send --date D`
(SQLite, one worker, Postfix's `smtp-sink`, as bench/e2e.py does) on copies of the e2e benchmark's
site whose store also holds H earlier days of that site's sends, all before the window: a `sent`
row in `deliveries` per subscriber and day, and ten `received` papers per digest (drawn from the
site's papers, each paper once per subscriber as the table allows, so H is at most 100). Every H
runs --repeat times, alternating; the figures are medians, with the ratio to the first H. The last
lines are `name: value` figures.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sqlite3
import statistics
import sys
from datetime import date, timedelta
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

import e2e_infra as infra  # noqa: E402
import e2e_site as sites  # noqa: E402
from e2e import DEFAULT_SAMPLE, SECRET, parse_summary, write_config  # noqa: E402

PER_DIGEST = 10  # papers in each earlier digest


def with_history(site: sites.Site, days: int, window: int, out: Path) -> Path:
    """A copy of the site's store holding `days` earlier days of sends, dated before the window (kept under out/)."""
    path = out / f"{site.folder.name}-history-{days}.db"
    if path.exists() and path.stat().st_mtime >= site.database.stat().st_mtime:  # else the site was rebuilt
        return path
    partial = path.with_suffix(".partial")
    for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
        leftover.unlink(missing_ok=True)
    shutil.copyfile(site.database, partial)
    with contextlib.closing(sqlite3.connect(partial)) as db, db:
        emails = [row[0] for row in db.execute("SELECT email FROM subscribers ORDER BY email")]
        papers = [row[0] for row in db.execute("SELECT id FROM papers ORDER BY id")]
        if PER_DIGEST * days > len(papers):
            raise SystemExit(f"--days {days}: the site has {len(papers)} papers, enough for "
                             f"{len(papers) // PER_DIGEST} days of {PER_DIGEST} distinct papers")
        rng = random.Random(days)
        dated = [(site.spec.day - timedelta(days=window + 1 + d)).isoformat() for d in range(days)]
        for email in emails:
            picks = rng.sample(papers, PER_DIGEST * days)
            db.executemany("INSERT INTO received (subscriber, paper_id, digest_date) VALUES (?, ?, ?)",
                           [(email, paper, dated[n // PER_DIGEST]) for n, paper in enumerate(picks)])
            db.executemany("INSERT INTO deliveries (subscriber, digest_date, message_id, status, attempts, transport, "
                           "detail, updated_at) VALUES (?, ?, ?, 'sent', 1, 'smtp', '', ?)",
                           [(email, day, f"<{day}.{email}>", f"{day} 06:00:00.000000") for day in dated])
    with contextlib.closing(sqlite3.connect(partial)) as db:
        db.execute("PRAGMA journal_mode=DELETE")  # one file, nothing left in a WAL beside it
        db.execute("VACUUM")
    partial.rename(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, default=10_000)
    parser.add_argument("--days", type=int, nargs="+", default=[0, 30, 90])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--day", type=date.fromisoformat, default=date(2026, 6, 30))
    parser.add_argument("--sample", type=Path, default=Path(DEFAULT_SAMPLE) if DEFAULT_SAMPLE else None,
                        required=not DEFAULT_SAMPLE, help="arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "e2e")
    args = parser.parse_args()

    from digest.config import build_config

    window = build_config({}, base=args.out).select.window_days
    digest = infra.digest_command()
    sink_program = infra.postfix_sink(BENCH / "out")
    site = sites.build(sites.SiteSpec(args.subscribers, args.day, 1, "csv"), args.out, args.sample, digest)
    stores = {days: with_history(site, days, window, args.out) for days in args.days}
    runs: dict[int, list[infra.Measured]] = {days: [] for days in args.days}
    print(f"{args.subscribers:,} subscribers, SQLite, 1 worker, sink: "
          f"{'postfix smtp-sink' if sink_program else 'aiosmtpd'}; window {window} days", flush=True)
    for round_ in range(args.repeat):
        for days, store in stores.items():
            folder = args.out / "runs" / f"history-{days}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            shutil.copyfile(store, folder / "digest.db")
            url = f"sqlite:///{folder / 'digest.db'}"
            sink = infra.Sink(sink_program, folder / "sink").start()
            config = write_config(folder / "digest.toml", url=url, site=site, port=sink.port, dkim=False)
            try:
                measured = infra.measure([*digest, "--config", str(config), "send", "--date", args.day.isoformat()],
                                         {"DIGEST_SECRET": SECRET}, folder / "send")
            finally:
                received = sink.stop()
            sent = parse_summary(measured.stdout)[0]
            if measured.code or sent != received or not sent:
                raise SystemExit(f"history {days}: exit {measured.code}, sent {sent}, sink {received}: "
                                 f"{measured.stderr.strip()[-500:]}")
            runs[days].append(measured)
            print(f"  {days:3d} days, round {round_ + 1}: {sent:,} sent in {measured.wall:.1f} s, "
                  f"{measured.cpu * 1000 / sent:.2f} CPU ms/digest, {measured.peak_rss_mib:.0f} MiB, "
                  f"store {store.stat().st_size / 2**20:.0f} MiB, load {measured.load:.1f}", flush=True)

    first = args.days[0]
    cpu = {d: statistics.median(m.cpu * 1000 / args.subscribers for m in runs[d]) for d in args.days}
    rss = {d: max(m.peak_rss_mib for m in runs[d]) for d in args.days}
    print("\n| days of history | store MiB | CPU ms/digest (median) | vs first | peak RSS MiB (largest) | vs first |")
    print("|---:|---:|---:|---:|---:|---:|")
    for d in args.days:
        print(f"| {d} | {stores[d].stat().st_size / 2**20:.0f} | {cpu[d]:.3f} | {cpu[d] / cpu[first]:.2f} | "
              f"{rss[d]:.0f} | {rss[d] / rss[first]:.2f} |")
    print()
    for d in args.days:
        print(f"history_{d}_days_cpu_ms_per_digest: {cpu[d]:.3f}")
        print(f"history_{d}_days_peak_rss_mib: {rss[d]:.0f}")


if __name__ == "__main__":
    main()
