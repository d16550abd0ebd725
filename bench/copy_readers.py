"""A store's readers copied N times with their history: a million readers in a steady state without sending for days.

    .venv/bin/python bench/copy_readers.py SOURCE.db OUT.db --copies 9 --resend 2026-06-30
    (then `digest send --date 2026-06-30` on OUT.db, and)
    .venv/bin/python bench/copy_readers.py --check OUT.db --copies 9 --date 2026-06-30

Sending a week to a million readers takes hours here, so the million-reader steady-state figure (BENCHMARKS.md,
"A million readers on a steady-state day") starts from a week store of `bench/e2e.py --days 7` (100,000 readers,
SQLite) and copies each reader N more times under a new address (`c1.` ... `cN.` before it), with their profile,
their deliveries and every paper they received. The interests' text-model profiles are stored under their text, so
the copies share them. `--resend DATE` first removes DATE's `received` and `deliveries` rows, so that DATE is due
again. Copies are not added to the operator console's search index (a send does not read it). Batches are formed in
address order, so a batch still holds different readers.

`--check` compares, after the send, every copy's papers received on DATE with its original's: they must be the same
(each reader's digest depends only on their own profile and history, not on who else is in the batch).
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sqlite3
import sys
import time
from pathlib import Path

SUBSCRIBER_COLUMNS = "email_key, email, source, path, timezone, send_at, frequency, profile, updated_at"
DELIVERY_COLUMNS = "digest_date, message_id, status, attempts, transport, detail, updated_at, claimed_by, lease_until"


def copy(source: Path, out: Path, copies: int, resend: str | None) -> None:
    start = time.perf_counter()
    shutil.copyfile(source, out)
    db = sqlite3.connect(out, isolation_level=None)
    db.execute("PRAGMA journal_mode = OFF")
    db.execute("PRAGMA synchronous = OFF")
    if resend:
        for table in ("received", "deliveries"):
            gone = db.execute(f"DELETE FROM {table} WHERE digest_date = ?", (resend,)).rowcount
            print(f"{table}: {gone} rows of {resend} removed")
    trigger = db.execute("SELECT sql FROM sqlite_master WHERE name = 'subscribers_search_insert'").fetchone()
    index = db.execute("SELECT sql FROM sqlite_master WHERE name = 'ix_received_by_date'").fetchone()
    if trigger:
        db.execute("DROP TRIGGER subscribers_search_insert")
    if index:
        db.execute("DROP INDEX ix_received_by_date")  # (made again once, after the copies: faster than kept)
    originals = db.execute("SELECT count(*) FROM subscribers").fetchone()[0]
    db.execute("BEGIN")
    for n in range(1, copies + 1):
        prefix = f"c{n}."
        db.execute(f"INSERT INTO subscribers ({SUBSCRIBER_COLUMNS}) SELECT ?1 || email_key, ?1 || email, source, path, "
                   "timezone, send_at, frequency, json_set(profile, '$.email', ?1 || email), updated_at "
                   "FROM subscribers WHERE email_key NOT GLOB 'c[0-9]*.*' ORDER BY email_key", (prefix,))
        db.execute("INSERT INTO received SELECT ?1 || subscriber, paper_id, digest_date FROM received "
                   "WHERE subscriber NOT GLOB 'c[0-9]*.*' ORDER BY subscriber, paper_id", (prefix,))
        db.execute(f"INSERT INTO deliveries SELECT ?1 || subscriber, {DELIVERY_COLUMNS} FROM deliveries "
                   "WHERE subscriber NOT GLOB 'c[0-9]*.*' ORDER BY subscriber, digest_date", (prefix,))
        print(f"copy {n} made ({time.perf_counter() - start:.0f} s)", flush=True)
    db.execute("COMMIT")
    if index:
        db.execute(index[0])
    if trigger:
        db.execute(trigger[0])
    tables = ("subscribers", "received", "deliveries")
    counts = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}
    db.execute("PRAGMA journal_mode = WAL")
    db.close()
    print(f"{originals} readers copied {copies} times: {counts} ({time.perf_counter() - start:.0f} s)")


def check(out: Path, copies: int, day: str) -> bool:
    """Whether every copy received on `day` exactly the papers its original did."""
    db = sqlite3.connect(out)
    query = ("SELECT substr(subscriber, ?), paper_id FROM received WHERE digest_date = ? AND subscriber GLOB ? "
             "ORDER BY 1, 2")
    originals = db.execute("SELECT subscriber, paper_id FROM received WHERE digest_date = ? AND subscriber NOT GLOB "
                           "'c[0-9]*.*' ORDER BY 1, 2", (day,)).fetchall()
    digest = hashlib.sha256(repr(originals).encode()).hexdigest()[:16]
    print(f"originals: {len(originals)} papers received on {day}, hash {digest}")
    same = True
    for n in range(1, copies + 1):
        prefix = f"c{n}."
        rows = db.execute(query, (len(prefix) + 1, day, prefix + "*")).fetchall()
        same &= rows == originals
        print(f"{prefix}: {len(rows)} papers, {'the same' if rows == originals else 'DIFFERENT'}")
    return same


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="SOURCE OUT to copy; OUT with --check")
    parser.add_argument("--copies", type=int, default=9)
    parser.add_argument("--resend", help="remove this date's received and deliveries rows first (YYYY-MM-DD)")
    parser.add_argument("--check", action="store_true", help="compare the copies' received papers on --date")
    parser.add_argument("--date", help="the date --check compares")
    args = parser.parse_args()
    if args.check:
        if len(args.paths) != 1 or not args.date:
            parser.error("--check takes OUT and --date")
        sys.exit(0 if check(args.paths[0], args.copies, args.date) else 1)
    if len(args.paths) != 2:
        parser.error("give SOURCE and OUT")
    copy(args.paths[0], args.paths[1], args.copies, args.resend)


if __name__ == "__main__":
    main()
