"""Several days in a row for bench/e2e.py (`--days N`): what the second, seventh, thirtieth send costs.

Every benchmark before this started from a fresh store, so none saw a second day: a send log with
history, statistics the database gathered on it (PostgreSQL once claimed a whole day
at once), a selection window holding several days of papers. Here one store lives through N
successive days: each day `digest ingest` brings 1,000 new real arXiv papers (the sample's newest
N × 1,000 up to --day, oldest first, one block per day) and `digest send --date D` delivers to every
subscriber (all on a daily schedule, so all are due every day) over SMTP to the sink. Between two
days PostgreSQL is analysed and vacuumed, as autovacuum does over a day; SQLite is left as it is.

Per day: the send's wall time, CPU of its process tree per digest, the database server's CPU, the
largest process's peak RSS, the compose benchmark around it (the ratio is taken against the mean of
the measurements just before and after), and the claims: the most digests one process held at once
(the store polled every 20 ms during the send), how many each process claimed (the `workers` table),
and on PostgreSQL the number of claim statements and their rows (pg_stat_statements). With
--message-ids the sink keeps every message and the Message-IDs are counted: duplicates are received
messages minus distinct Message-IDs.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Protocol

import e2e_infra as infra
import e2e_site as sites
from e2e_report import Variant

from digest.store.schema import HEAD

DAYS_VERSION = 1  # bump when what a days site holds changes, so cached ones are rebuilt
POLL_SECONDS = 0.02
# The claim statement's RETURNING clause (both the old `IN (SELECT …)` form and the CTE), without the takeover kind.
CLAIM_SQL = "RETURNING deliveries.subscriber, deliveries.message_id, deliveries.attempts"
TAKEOVER_SQL = "deliveries.lease_until <"


@dataclass(frozen=True)
class DaysSpec:
    subscribers: int
    last: date  # the last day; the first is days - 1 before it
    days: int
    per_day: int
    seed: int

    @property
    def name(self) -> str:
        return f"days-site-{self.subscribers}-{self.last}-{self.days}x{self.per_day}-s{self.seed}"

    @property
    def dates(self) -> list[date]:
        return [self.last - timedelta(days=self.days - 1 - k) for k in range(self.days)]


@dataclass(frozen=True)
class DaysSite:
    """A built multi-day site: a papers file a day, the subscriber list, a SQLite store with it imported."""

    spec: DaysSpec
    folder: Path

    def papers(self, day: date) -> Path:
        return self.folder / f"papers-{day}.jsonl"

    @property
    def subscribers_csv(self) -> Path:
        return self.folder / "subscribers.csv"

    @property
    def subscribers_dir(self) -> Path:
        return self.folder / "subscribers"  # empty: everyone is in the store

    @property
    def database(self) -> Path:
        return self.folder / "base.db"


def day_blocks(sample: Path, spec: DaysSpec) -> list[list[dict[str, object]]]:
    """The sample's newest days × per_day papers listed up to the last day, in blocks of per_day, oldest first."""
    newest = sites.day_papers(sample, spec.last, spec.days * spec.per_day)
    if len(newest) < spec.days * spec.per_day:
        raise SystemExit(f"--days {spec.days}: the sample has {len(newest)} papers up to {spec.last}")
    newest.reverse()  # day_papers lists the newest listing day first
    return [newest[k * spec.per_day:(k + 1) * spec.per_day] for k in range(spec.days)]


def build(spec: DaysSpec, root: Path, sample: Path, digest: list[str]) -> DaysSite:
    """The cached days site of `spec` under `root`, built first when missing or incomplete."""
    site = DaysSite(spec, root / spec.name)
    wanted = {**asdict(spec), "last": spec.last.isoformat(), "version": DAYS_VERSION, "schema": HEAD}
    if sites.cached(site.folder, wanted):
        return site
    site.subscribers_dir.mkdir(parents=True)
    for day, block in zip(spec.dates, day_blocks(sample, spec), strict=True):
        site.papers(day).write_text("".join(json.dumps(p) + "\n" for p in block), encoding="utf-8")
    rows = sites.profiles(spec.subscribers, sites.title_vocabulary(sample), spec.last, spec.seed)
    sites.write_csv(site.subscribers_csv, ({**p, "frequency": "daily"} for p in rows))
    import_subscribers(digest, site, f"sqlite:///{site.database}", site.folder / "setup.toml")
    (site.folder / "site.json").write_text(json.dumps(wanted))  # last: a site interrupted while building is rebuilt
    return site


def import_subscribers(digest: list[str], site: DaysSite, url: str, config: Path) -> None:
    """`digest subscribers import` of the site's list into the store at `url` (no papers yet)."""
    config.write_text(settings(url, site), encoding="utf-8")
    done = subprocess.run([*digest, "--config", str(config), "subscribers", "import", str(site.subscribers_csv)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        raise RuntimeError(f"digest subscribers import failed (exit {done.returncode}): {done.stderr.strip()}")


STORED_MATCHES = False  # e2e.py --stored-matches: every day's send ranks from stored matches (select.stored_matches)


def settings(url: str, site: DaysSite, port: int | None = None, dkim: bool = False) -> str:
    """The operator's digest.toml: the store, and for a send SMTP to the sink (DKIM when asked, stored matches when
    `STORED_MATCHES`)."""
    text = f'[store]\nurl = "{url}"\n\n[subscribers]\ndir = "{site.subscribers_dir}"\n'
    if port is not None:
        text += f'\n[delivery]\ntransport = "smtp"\n\n[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n'
    if STORED_MATCHES:
        text += '\n[select]\nstored_matches = "always"\n'
    return text + ('\n[dkim]\nselector = "bench"\n' if dkim else "")


# -- looking at the store during and after a send ---------------------------------------------------------------


class Store:
    """Plain queries on the run's store (sqlite3 or psycopg: the benchmark's own, not the product's)."""

    def __init__(self, url: str, postgres: infra.Postgres | None) -> None:
        self.url, self.postgres = url, postgres

    def connect(self) -> Any:
        if self.postgres is None:
            conn = sqlite3.connect(self.url.removeprefix("sqlite:///"), timeout=30)
            conn.execute("PRAGMA query_only = 1")
            return contextlib.closing(conn)
        import psycopg

        return psycopg.connect(f"host=127.0.0.1 port={self.postgres.port} user=postgres "
                               f"dbname={self.url.rsplit('/', 1)[1]}", autocommit=True)

    def sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.postgres is not None else text

    def day(self, day: date) -> object:
        return day if self.postgres is not None else day.isoformat()  # SQLite keeps dates as ISO text

    def rows(self, text: str, *params: object) -> list[tuple[Any, ...]]:
        with self.connect() as conn:
            return list(conn.execute(self.sql(text), params).fetchall())

    def execute(self, text: str) -> None:
        with self.connect() as conn:
            conn.execute(text)


HELD = ("SELECT claimed_by, count(*) FROM deliveries WHERE digest_date = ? AND status = 'claimed' "
        "GROUP BY claimed_by")


@contextlib.contextmanager
def most_held(store: Store, day: date) -> Iterator[list[int]]:
    """Polls the store while the block runs; the list it yields ends up holding the most digests one process held
    at once (a process holds one claim at a time, so this is the largest claim the polls caught)."""
    found, stop = [0], threading.Event()

    def poll() -> None:
        with store.connect() as conn:
            while not stop.wait(POLL_SECONDS):
                with contextlib.suppress(Exception):  # a busy moment is only a poll missed
                    held = conn.execute(store.sql(HELD), (store.day(day),)).fetchall()
                    found[0] = max([found[0], *(n for _, n in held)])

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        stop.set()
        thread.join(10)


def worker_split(store: Store, day: date) -> list[int]:
    """Digests each process of the day's send claimed (the `workers` table), largest first."""
    found = store.rows("SELECT claimed FROM workers WHERE digest_date = ? AND command = 'send'", store.day(day))
    return sorted((int(n) for (n,) in found), reverse=True)


def claim_statements(store: Store) -> tuple[int, int] | None:
    """(calls, rows) of the claim statement (queued digests) since the last reset; None on SQLite."""
    if store.postgres is None:
        return None
    name = store.url.rsplit("/", 1)[1]
    found = store.rows(
        "SELECT coalesce(sum(s.calls), 0), coalesce(sum(s.rows), 0) FROM pg_stat_statements s "
        "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = ? AND s.query LIKE ? AND s.query NOT LIKE ?",
        name, f"%{CLAIM_SQL}%", f"%{TAKEOVER_SQL}%")
    calls, rows = found[0]
    return int(calls), int(rows)


def heaviest(store: Store, count: int = 3) -> list[tuple[float, int, str]]:
    """The statements that took the database server the most time since the last reset: (ms, calls, text)."""
    if store.postgres is None:
        return []
    found = store.rows("SELECT s.total_exec_time, s.calls, s.query FROM pg_stat_statements s JOIN pg_database d "
                       "ON d.oid = s.dbid WHERE d.datname = ? ORDER BY s.total_exec_time DESC LIMIT ?",
                       store.url.rsplit("/", 1)[1], count)
    return [(float(ms), int(calls), " ".join(str(text).split())[:160]) for ms, calls, text in found]


def statement_stats(postgres: infra.Postgres) -> None:
    """Load pg_stat_statements (a restart with the same options) so each claim statement's rows are counted."""
    postgres.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
    infra._as_postgres([str(postgres.bin / "pg_ctl"), "-D", str(postgres.folder / "data"), "-l",
                        str(postgres.folder / "server.log"), "-m", "fast", "-w", "restart"])


# -- the sink, keeping messages when asked ---------------------------------------------------------------------


class DumpingSink(infra.Sink):
    """The benchmark's sink, also writing every message to files in a folder of its own (smtp-sink's -D)."""

    def __init__(self, program: Path | None, logs: Path) -> None:
        super().__init__(program, logs)
        self.dumps = logs / "messages"

    def command(self) -> tuple[list[str], dict[str, str]]:
        command, env = super().command()
        if self.program is None:
            raise SystemExit("--message-ids needs Postfix's smtp-sink")
        self.dumps.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.dumps, "nobody")  # the sink drops root for nobody, who must write here
        return [command[0], "-D", str(self.dumps / "dump"), *command[1:]], env

    def message_ids(self) -> tuple[int, int]:
        """(messages, distinct Message-IDs) the sink wrote; the files are removed afterwards (they are large)."""
        ids: list[str] = []
        for dump in sorted(self.dumps.iterdir()):
            with dump.open("rb") as lines:
                ids.extend(line.split(b":", 1)[1].strip().decode() for line in lines
                           if line[:11].lower() == b"message-id:")
        shutil.rmtree(self.dumps)
        return len(ids), len(set(ids))


# -- one variant over the days ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Day:
    """One day of one variant."""

    subscribers: int
    variant: Variant
    number: int  # 1-based
    day: date
    ingest: infra.Measured
    send: infra.Measured
    sent: int
    received: int
    server_cpu: float
    compose_ms: float
    most_held: int
    split: list[int]
    claims: tuple[int, int] | None  # (claim statements, rows) on PostgreSQL
    ids: tuple[int, int] | None  # (messages, distinct Message-IDs) at the sink, with --message-ids
    heaviest: list[tuple[float, int, str]]  # PostgreSQL: the statements that took its time (ms, calls, text)

    @property
    def ok(self) -> bool:
        return self.send.code == 0 and self.sent == self.received and self.sent > 0 and self.duplicates in (0, None)

    @property
    def rate(self) -> float:
        return self.sent / self.send.wall

    @property
    def cpu_ms(self) -> float:
        return self.send.cpu * 1000 / max(self.sent, 1)

    @property
    def server_cpu_ms(self) -> float:
        return self.server_cpu * 1000 / max(self.sent, 1)

    @property
    def duplicates(self) -> int | None:
        return None if self.ids is None else self.ids[0] - self.ids[1]

    @property
    def rows_per_claim(self) -> float | None:
        """Rows per claim that found any: each process's last claim finds the queue empty and ends it."""
        if not self.claims or self.claims[0] <= len(self.split):
            return None
        return self.claims[1] / (self.claims[0] - len(self.split))


class Bench(Protocol):
    """What the days need of bench/e2e.py's Bench (not imported: bench/e2e.py imports this module)."""

    out: Path
    digest: list[str]
    sink: Path | None
    postgres: infra.Postgres | None
    templates: set[str]

    def env(self, dkim: bool) -> dict[str, str]: ...

    def server_cpu(self, store: str) -> float: ...


@dataclass
class DaysRun:
    """One site's days, for each variant in turn."""

    bench: Bench
    site: DaysSite
    compose: Callable[[], float]  # the compose baseline's CPU ms per digest, measured now
    parse_summary: Callable[[str], tuple[int, int, int]]
    message_ids: bool
    composes: list[float] = field(default_factory=list)

    def fresh_store(self, variant: Variant, folder: Path) -> Store:
        """A store holding the site's subscribers and nothing else: a copy of its SQLite file, or a PostgreSQL
        database copied from a template the real `digest subscribers import` filled (once per site)."""
        if variant.store == "sqlite":
            shutil.copyfile(self.site.database, folder / "digest.db")
            return Store(f"sqlite:///{folder / 'digest.db'}", None)
        postgres = self.bench.postgres
        assert postgres is not None
        template = f"days_{self.site.spec.subscribers}"
        if template not in self.bench.templates:
            import_subscribers(self.bench.digest, self.site, postgres.create(template), folder / "setup.toml")
            self.bench.templates.add(template)
        store = Store(postgres.create(f"days_run_{self.site.spec.subscribers}", template=template), postgres)
        store.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        return store

    def run(self, variant: Variant) -> list[Day]:
        spec = self.site.spec  # the folder names the days too: two runs of different lengths must not share it
        folder = self.bench.out / "runs" / f"days-{spec.days}x{spec.per_day}-{spec.subscribers}-{variant.key}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        store = self.fresh_store(variant, folder)
        if not self.composes:
            self.composes.append(self.compose())
        return [self.one_day(variant, folder / f"day{number}", store, number, day)
                for number, day in enumerate(self.site.spec.dates, 1)]

    def one_day(self, variant: Variant, folder: Path, store: Store, number: int, day: date) -> Day:
        """Ingest the day's papers, then send the day (the sink and the polls around the send)."""
        digest, env = self.bench.digest, self.bench.env(variant.dkim)
        config = folder / "digest.toml"
        folder.mkdir(parents=True)
        if store.postgres is not None and number > 1:  # the night between two days: autovacuum's work
            store.execute("VACUUM ANALYZE")
        config.write_text(settings(store.url, self.site), encoding="utf-8")
        ingest = infra.measure([*digest, "--config", str(config), "ingest", str(self.site.papers(day)),
                                "--date", day.isoformat()], env, folder / "ingest")
        if ingest.code:
            raise RuntimeError(f"digest ingest failed on {day}: {ingest.stderr.strip()[-500:]}")
        sink = (DumpingSink if self.message_ids else infra.Sink)(self.bench.sink, folder / "sink").start()
        config.write_text(settings(store.url, self.site, sink.port, variant.dkim), encoding="utf-8")
        if store.postgres is not None:
            store.rows("SELECT pg_stat_statements_reset()")
        server = self.bench.server_cpu(variant.store)
        try:
            with most_held(store, day) as held:
                send = infra.measure([*digest, "--config", str(config), "send", "--date", day.isoformat(),
                                      "--workers", str(variant.workers)], env, folder / "send")
        finally:
            received = sink.stop()
        server = self.bench.server_cpu(variant.store) - server
        ids = sink.message_ids() if isinstance(sink, DumpingSink) else None
        self.composes.append(self.compose())
        sent, _, _ = self.parse_summary(send.stdout)
        result = Day(self.site.spec.subscribers, variant, number, day, ingest, send, sent, received, server,
                     statistics.fmean(self.composes[-2:]), held[0], worker_split(store, day),
                     claim_statements(store), ids, heaviest(store))
        print_day(result)
        return result


# -- what it prints --------------------------------------------------------------------------------------------


def print_day(d: Day) -> None:
    claims = f", {d.claims[0] - len(d.split)} claims of {d.rows_per_claim:.1f} rows" if d.rows_per_claim else ""
    ids = f", Message-IDs {d.ids[0]:,} ({d.duplicates} duplicates)" if d.ids else ""
    print(f"  {d.subscribers:,} {d.variant.key} day {d.number} ({d.day}): ingest {d.ingest.wall:.1f} s; "
          f"{d.sent:,} sent in {d.send.wall:.1f} s ({d.rate:.1f}/s, {d.cpu_ms:.2f} CPU ms/digest, "
          f"{d.send.peak_rss_mib:.0f} MiB), sink {d.received:,}{ids}{'' if d.ok else ' MISMATCH'}; most held at "
          f"once {d.most_held}, claimed per process {'/'.join(map(str, d.split))}{claims}; "
          f"compose {d.compose_ms:.3f} ms around it; load {d.send.load:.1f}", flush=True)
    for ms, calls, text in d.heaviest:
        print(f"    database: {ms / 1000:.1f} s in {calls:,} calls: {text}", flush=True)


def report(days: list[Day], compose_mean: float) -> None:
    print("\n| N | store | DKIM | workers | day | date | ingest s | sent | wall s | digests/s | CPU ms/digest "
          "| DB server CPU ms/digest | e2e / compose CPU | peak RSS MiB | most held at once | claimed per process "
          "| claims (rows each) | sink | duplicates | load |")
    print("|---:|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---:|---:|")
    for d in days:
        v = d.variant
        claims = f"{d.claims[0] - len(d.split):,} ({d.rows_per_claim:.1f})" if d.rows_per_claim else "-"
        print(f"| {d.subscribers:,} | {v.store} | {'on' if v.dkim else 'off'} | {v.workers} | {d.number} | {d.day} | "
              f"{d.ingest.wall:.1f} | {d.sent:,} | {d.send.wall:.1f} | {d.rate:.1f} | {d.cpu_ms:.2f} | "
              f"{d.server_cpu_ms:.2f} | {d.cpu_ms / d.compose_ms:.2f} | {d.send.peak_rss_mib:.0f} | {d.most_held:,} | "
              f"{'/'.join(f'{n:,}' for n in d.split)} | {claims} | {'ok' if d.ok else 'MISMATCH'} "
              f"({d.received:,}) | {'-' if d.duplicates is None else d.duplicates} | {d.send.load:.1f} |")
    print(f"\ncompose (bench/render.py): mean {compose_mean:.3f} CPU ms/digest over the measurements around the sends")
    lines = []
    for d in days:
        k = f"e2e_days_{d.subscribers}_{d.variant.key}_day{d.number}"
        lines += [f"{k}_digests_per_second: {d.rate:.1f}", f"{k}_cpu_ms_per_digest: {d.cpu_ms:.3f}",
                  f"{k}_to_compose_cpu: {d.cpu_ms / d.compose_ms:.2f}", f"{k}_peak_rss_mib: {d.send.peak_rss_mib:.0f}",
                  f"{k}_most_held_at_once: {d.most_held}", f"{k}_verified: {'yes' if d.ok else 'no'}"]
        if d.rows_per_claim:
            lines.append(f"{k}_rows_per_claim: {d.rows_per_claim:.1f}")
        if d.duplicates is not None:
            lines.append(f"{k}_duplicates: {d.duplicates}")
    print("\n" + "\n".join(lines))


def write_rows(days: list[Day], path: Path) -> None:
    """The table as CSV too (bench/out/e2e/days.csv), for plotting a month."""
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["subscribers", "store", "dkim", "workers", "day", "date", "sent", "wall_s", "cpu_ms",
                         "server_cpu_ms", "compose_ms", "peak_rss_mib", "most_held", "rows_per_claim", "duplicates"])
        for d in days:
            writer.writerow([d.subscribers, d.variant.store, d.variant.dkim, d.variant.workers, d.number, d.day, d.sent,
                             f"{d.send.wall:.2f}", f"{d.cpu_ms:.3f}", f"{d.server_cpu_ms:.3f}", f"{d.compose_ms:.3f}",
                             f"{d.send.peak_rss_mib:.0f}", d.most_held,
                             "" if d.rows_per_claim is None else f"{d.rows_per_claim:.1f}",
                             "" if d.duplicates is None else d.duplicates])
