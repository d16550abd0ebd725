"""End to end: the real `digest send` of one day to N generated subscribers, as an operator runs it.

    nice -n 5 .venv/bin/python bench/e2e.py [--subscribers 10000 100000] [--million]
        [--stores sqlite postgresql] [--dkim off on] [--workers 1 2]

A site per N (cached in bench/out/e2e/): 1,000 real arXiv papers of the listing days up to --day,
ingested with `digest ingest --date D`, and N generated subscribers (1–3 interests from ten topics,
a random subset of each topic's keywords plus a word of their own; every tenth trending-only;
varied time zones, send times and schedules, all due on D), as one TOML profile each or, when the
product has `digest subscribers import`, one CSV imported into the store. Every timed run starts
from a fresh copy of the site's database with nothing sent and delivers over SMTP to Postfix's C
`smtp-sink` (unpacked from the Debian package; bench/sink.py with aiosmtpd when that cannot be had),
whose message count must equal the digests the command says it sent.

Measured per run (`digest send --date D`, a subprocess): wall time, CPU of its whole process tree
(workers included) per digest, the largest process's peak RSS, the store's size afterwards; for
every combination of store (SQLite, PostgreSQL), DKIM (off, on) and workers (1, 2; when the
product has `--workers`). Also, in the same run: CPU per digest by stage (the command once more
under cProfile, smallest N), the compose benchmark's CPU per digest (bench/render.py's own
function, before the first run and after each; a run's ratio is taken against the mean of the
measurements just before and after it, since this shared machine's speed drifts), `digest --help`, and
`digest run --date D` once everything of D is sent (nothing due). 1,000,000 is extrapolated from the
slope between the two largest sizes unless measured (--million). With --repeat R, every variant runs
R times, round by round (1 worker, 2 workers, 1 worker, ...), and each figure is the median over the
rounds (the two-worker gain: of each round's pair). The last lines are `name: value` figures.

    nice -n 5 .venv/bin/python bench/e2e.py --days 7 --subscribers 10000 --stores sqlite postgresql \
        --dkim off --workers 1 2 [--message-ids]

With --days N, one store per variant lives through N successive days instead (bench/e2e_days.py):
each day `digest ingest` of 1,000 new real papers, then `digest send`; per day the same figures,
with the claims each process took and, with --message-ids, the Message-IDs the sink received.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT))

import e2e_infra as infra  # noqa: E402
import e2e_site as sites  # noqa: E402
import e2e_stages as stages  # noqa: E402
from e2e_report import MILLION, Baselines, Profiled, Result, Variant, report  # noqa: E402

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.models import Subscriber  # noqa: E402

DEFAULT_DAY = date(2026, 6, 30)  # a Tuesday with 329 papers listed; the days before it make up the 1,000
DEFAULT_SAMPLE = os.environ.get("DIGEST_ARXIV_SAMPLE", "")  # the arXiv sample (gzip JSONL), or --sample
SECRET = "e2e-benchmark-link-key"  # DIGEST_SECRET: the link-signing key, as production sets it
SUMMARY = re.compile(r"sent (\d+), skipped (\d+), failed (\d+), deferred (\d+)")


@dataclass(frozen=True)
class Product:
    """What the installed `digest` can do (the benchmark uses each feature once it exists)."""

    workers: bool  # `digest send --workers N`
    import_csv: bool  # `digest subscribers import FILE.csv`

    @classmethod
    def detect(cls, digest: list[str]) -> Product:
        def help_of(*args: str) -> str:
            return subprocess.run([*digest, *args, "--help"], capture_output=True, text=True).stdout

        return cls(workers="--workers" in help_of("send"), import_csv="import" in help_of("subscribers"))


def parse_summary(stdout: str) -> tuple[int, int, int]:
    """Sent, skipped, failed from the command's summary line (the last one, if several)."""
    found = SUMMARY.findall(stdout)
    if not found:
        return 0, 0, 0
    sent, skipped, failed, _ = map(int, found[-1])
    return sent, skipped, failed


STORED_MATCHES = False  # --stored-matches: every run's digest.toml sets select.stored_matches = "always"


def write_config(path: Path, *, url: str, site: sites.Site, port: int, dkim: bool) -> Path:
    """The operator's digest.toml: this store, SMTP to the local sink without TLS, DKIM when asked."""
    text = (f'[store]\nurl = "{url}"\n\n[ingest]\npaths = ["{site.papers}"]\n\n'
            f'[subscribers]\ndir = "{site.subscribers_dir}"\n\n[delivery]\ntransport = "smtp"\n\n'
            f'[smtp]\nhost = "127.0.0.1"\nport = {port}\nsecurity = "none"\n')
    if dkim:
        text += '\n[dkim]\nselector = "bench"\n'
    if STORED_MATCHES:
        text += '\n[select]\nstored_matches = "always"\n'
    path.write_text(text, encoding="utf-8")
    return path


@dataclass
class Delivery:
    """One run's folder, store and settings, and what its sink received."""

    folder: Path
    url: str
    config: Path
    received: int = 0


@dataclass
class Bench:
    """Everything the runs share: where they write, the program, the sink, the DKIM key, the database server."""

    out: Path
    day: date
    digest: list[str]
    product: Product
    sink: Path | None
    dkim_pem: str
    postgres: infra.Postgres | None = None
    templates: set[str] = field(default_factory=set)

    def env(self, dkim: bool) -> dict[str, str]:
        env = {"DIGEST_SECRET": SECRET}
        if dkim:
            env["DIGEST_DKIM_KEY"] = self.dkim_pem
        return env

    def fresh_store(self, site: sites.Site, store: str, folder: Path) -> str:
        """A store holding the site with nothing sent: a copy of its SQLite file, or of its PostgreSQL template."""
        if store == "sqlite":
            shutil.copyfile(site.database, folder / "digest.db")
            return f"sqlite:///{folder / 'digest.db'}"
        assert self.postgres is not None
        template = f"site_{site.spec.subscribers}"
        if template not in self.templates:
            url = self.postgres.create(template)
            sites.load_site(self.digest, sites.setup_config(site, url, folder / "setup.toml"), site)
            self.templates.add(template)
        return self.postgres.create(f"run_{site.spec.subscribers}", template=template)

    def store_bytes(self, url: str) -> int:
        if url.startswith("sqlite:///"):
            return infra.sqlite_size(Path(url.removeprefix("sqlite:///")))
        assert self.postgres is not None
        return self.postgres.size(url.rsplit("/", 1)[1])

    def server_cpu(self, store: str) -> float:
        return self.postgres.cpu_seconds() if store == "postgresql" and self.postgres else 0.0

    def send_args(self, config: Path, workers: int) -> list[str]:
        args = ["--config", str(config), "send", "--date", self.day.isoformat()]
        return args + (["--workers", str(workers)] if self.product.workers else [])

    def run_folder(self, site: sites.Site, name: str) -> Path:
        folder = self.out / "runs" / f"{site.spec.subscribers}-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return folder

    @contextlib.contextmanager
    def delivering(self, site: sites.Site, name: str, store: str, dkim: bool) -> Iterator[Delivery]:
        """A fresh store and a sink for one run, with its settings file; the sink's count once the block ends."""
        folder = self.run_folder(site, name)
        url = self.fresh_store(site, store, folder)
        sink = infra.Sink(self.sink, folder / "sink").start()
        run = Delivery(folder, url, write_config(folder / "digest.toml", url=url, site=site, port=sink.port, dkim=dkim))
        try:
            yield run
        finally:
            run.received = sink.stop()

    def send(self, site: sites.Site, variant: Variant, *, then_idle: bool = False) -> tuple[Result, Result | None]:
        """One timed `digest send` on a fresh store; with `then_idle`, `digest run --date D` after it (nothing due)."""
        env, idle = self.env(variant.dkim), None
        with self.delivering(site, variant.key, variant.store, variant.dkim) as run:
            server = self.server_cpu(variant.store)
            sent = infra.measure([*self.digest, *self.send_args(run.config, variant.workers)], env, run.folder / "send")
            server = self.server_cpu(variant.store) - server
            if then_idle:
                idle = infra.measure([*self.digest, "--config", str(run.config), "run", "--date", self.day.isoformat()],
                                     env, run.folder / "run-nothing-due")
        size, n = self.store_bytes(run.url), site.spec.subscribers
        result = Result(n, variant, sent, *parse_summary(sent.stdout), run.received, size, server)
        return result, Result(n, variant, idle, *parse_summary(idle.stdout), 0, size) if idle else None

    def profile(self, site: sites.Site) -> tuple[Path, infra.Measured]:
        """`digest send` once more under cProfile (SQLite, DKIM on, one worker): the stage breakdown."""
        with self.delivering(site, "profile", "sqlite", True) as run:
            stats = run.folder / "send.pstats"
            measured = infra.measure(stages.profile_command(stats, self.send_args(run.config, 1)), self.env(True),
                                     run.folder / "send")
        return stats, measured


# -- baselines ----------------------------------------------------------------------------------------------


def load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def timed_compose(app: App, subscribers: list[Subscriber], day: date) -> tuple[float, float]:
    """bench/render.py's measurement (its `run`, after its warm-up): CPU ms per composed digest, and digests/s."""
    render = load_module("bench_render", BENCH / "render.py")
    render.run(app, subscribers[:50], day)
    start = time.process_time()
    wall, _, _ = render.run(app, subscribers, day)
    return (time.process_time() - start) * 1000 / len(subscribers), len(subscribers) / wall


def compose_cpu_ms(count: int) -> tuple[float, float]:
    """The compose benchmark as bench/render.py runs it: its subscribers over the seed pages."""
    render = load_module("bench_render", BENCH / "render.py")
    with tempfile.TemporaryDirectory() as tmp:
        app = App(build_config({"store": {"url": "sqlite:///bench.db"}}, base=Path(tmp)))
        app.ingest([ROOT / "seeds"], seen_on=render.DAY)
        try:
            return timed_compose(app, render.make_subscribers(count), render.DAY)
        finally:
            app.close()


def compose_site_cpu_ms(site: sites.Site, count: int) -> tuple[float, float]:
    """The same measurement on the end-to-end workload (its 1,000 papers, its first `count` subscribers):
    how much of the gap to compose is the workload, and how much the rest of the send path."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copyfile(site.database, Path(tmp) / "digest.db")
        app = App(build_config({"store": {"url": "sqlite:///digest.db"},
                                "subscribers": {"dir": str(site.subscribers_dir)}}, base=Path(tmp)))
        try:
            return timed_compose(app, list(app.profiles.roster().subscribers[:count]), site.spec.day)
        finally:
            app.close()


def help_seconds(digest: list[str], runs: int) -> float:
    """Median wall time of `digest --help` (what every command pays before it starts)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([*digest, "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- the run --------------------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribers", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="also run 1,000,000 subscribers (hours)")
    parser.add_argument("--stores", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"])
    parser.add_argument("--dkim", nargs="+", choices=("off", "on"), default=["off", "on"])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--day", type=date.fromisoformat, default=DEFAULT_DAY, help="the digest date D")
    parser.add_argument("--seed", type=int, default=1, help="of the generated subscribers")
    parser.add_argument("--sample", type=Path, default=Path(DEFAULT_SAMPLE) if DEFAULT_SAMPLE else None,
                        required=not DEFAULT_SAMPLE, help="arXiv sample, gzip JSONL (default: $DIGEST_ARXIV_SAMPLE)")
    parser.add_argument("--compose-subscribers", type=int, default=3000, help="for the bench/render.py baseline")
    parser.add_argument("--subscriber-form", choices=("auto", "csv", "toml"), default="auto",
                        help="csv: one list imported with `digest subscribers import` (auto: when it exists); "
                             "toml: a profile file each")
    parser.add_argument("--no-profile", action="store_true", help="skip the cProfile stage breakdown")
    parser.add_argument("--pg-fsync", choices=("on", "off"), default="on",
                        help="PostgreSQL durability (on: a production server's defaults)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every variant (figures: medians over them)")
    parser.add_argument("--out", type=Path, default=BENCH / "out" / "e2e")
    parser.add_argument("--days", type=int, default=0,
                        help="N successive days on one store per variant: ingest a day's papers, send the day")
    parser.add_argument("--papers-per-day", type=int, default=sites.PAPERS, help="with --days")
    parser.add_argument("--message-ids", action="store_true",
                        help="with --days: the sink keeps every message and its Message-IDs are counted (duplicates)")
    parser.add_argument("--stored-matches", action="store_true",
                        help="the runs keep every interest's matches in the store (select.stored_matches = \"always\"; "
                             "the default, auto, only where readers share interests)")
    args = parser.parse_args()
    global STORED_MATCHES
    STORED_MATCHES = args.stored_matches
    if args.million and MILLION not in args.subscribers:
        args.subscribers.append(MILLION)
    args.subscribers.sort()
    args.out = args.out.resolve()  # the settings files name paths, which must not depend on where they are
    return args


def variants(args: argparse.Namespace, product: Product) -> tuple[list[Variant], list[str]]:
    """The combinations to run, and notes on the ones the product cannot run yet."""
    workers = [w for w in args.workers if w == 1 or product.workers]
    notes = [] if workers == args.workers else ["`digest send --workers` does not exist yet: 1 worker only"]
    combos = itertools.product(args.stores, (d == "on" for d in args.dkim), workers)
    return [Variant(s, d, w) for s, d, w in combos], notes


def open_bench(args: argparse.Namespace) -> tuple[Bench, list[str]]:
    args.out.mkdir(parents=True, exist_ok=True)
    digest = infra.digest_command()
    product = Product.detect(digest)
    sink = infra.postfix_sink(BENCH / "out")
    notes = [] if sink else ["Postfix smtp-sink could not be had (apt-get download postfix failed): "
                             "aiosmtpd (bench/sink.py) is the sink"]
    bench = Bench(args.out, args.day, digest, product, sink, infra.dkim_key(args.out / "dkim.pem"))
    if "postgresql" in args.stores:
        bench.postgres = infra.Postgres(fsync=args.pg_fsync == "on").start()
    return bench, notes


def site_for(bench: Bench, args: argparse.Namespace, n: int) -> sites.Site:
    """The site of `n` subscribers (built now unless cached)."""
    start = time.perf_counter()
    form = args.subscriber_form
    if form == "auto":
        form = "csv" if bench.product.import_csv else "toml"
    site = sites.build(sites.SiteSpec(n, args.day, args.seed, form), args.out, args.sample, bench.digest)
    print(f"site {site.folder.name}: ready in {time.perf_counter() - start:.0f} s", flush=True)
    return site


def run_sizes(bench: Bench, args: argparse.Namespace, chosen: list[Variant],
              compose_ms: float) -> tuple[list[Result], list[Result], list[float]]:
    """Every variant at every size, --repeat rounds of them, each followed by the compose baseline; the
    nothing-due run after the first variant of each store. Also returns every compose measurement."""
    results, idle, composes = [], [], [compose_ms]
    for n in args.subscribers:
        site = site_for(bench, args, n)
        first: set[str] = set()
        for round_ in range(args.repeat):
            for variant in chosen:
                result, nothing = bench.send(site, variant, then_idle=variant.store not in first)
                first.add(variant.store)
                composes.append(compose_cpu_ms(args.compose_subscribers)[0])
                result = replace(result, compose_ms=(composes[-2] + composes[-1]) / 2, round=round_)
                results.append(result)
                idle += [nothing] if nothing else []
                print(f"  {n:,} {variant.key}, round {round_ + 1}: {result.sent:,} sent in {result.run.wall:.1f} s "
                      f"({result.rate:.1f}/s, {result.cpu_ms:.2f} CPU ms/digest, {result.run.peak_rss_mib:.0f} MiB), "
                      f"sink {result.received:,}{'' if result.ok else ' MISMATCH'}, load {result.run.load:.1f}; "
                      f"compose {result.compose_ms:.3f} CPU ms/digest around it", flush=True)
    return results, idle, composes


def stop_on_sigterm() -> None:
    """A SIGTERM ends the benchmark like Ctrl-C: the sink, the command and the database server are stopped."""
    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)  # also when started in the background, where SIGINT is ignored


def main() -> None:
    stop_on_sigterm()
    # A lab: the sample's placeholder identity, mail to a local sink (`digest check`'s stop does not apply)
    os.environ.setdefault("DIGEST_ALLOW_PLACEHOLDER", "1")
    args = parse_args()
    bench, notes = open_bench(args)
    chosen, more = variants(args, bench.product)
    notes += more
    print(f"digest: {' '.join(bench.digest)}; {bench.product}; sink: "
          f"{'postfix smtp-sink' if bench.sink else 'aiosmtpd'}; PostgreSQL fsync {args.pg_fsync}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    if args.days:
        run_days(bench, args, chosen, notes)
        return
    try:
        help_median = help_seconds(bench.digest, 5)
        compose_ms, compose_rate = compose_cpu_ms(args.compose_subscribers)
        count = min(args.compose_subscribers, args.subscribers[0])
        workload_ms, workload_rate = compose_site_cpu_ms(site_for(bench, args, args.subscribers[0]), count)
        print(f"compose (bench/render.py, {args.compose_subscribers:,} subscribers over the seed pages): "
              f"{compose_ms:.3f} CPU ms/digest, {compose_rate:.0f} digests/s; the same over the end-to-end "
              f"workload ({count:,} of its subscribers): {workload_ms:.3f} CPU ms/digest, {workload_rate:.0f} "
              f"digests/s; digest --help {help_median:.2f} s", flush=True)
        results, idle, composes = run_sizes(bench, args, chosen, compose_ms)
        compose_ms = statistics.fmean(composes)
        print(f"compose: {len(composes)} measurements, {min(composes):.3f}–{max(composes):.3f} CPU ms/digest "
              f"(mean {compose_ms:.3f}); each run's ratio is against those just before and after it", flush=True)
        profiled = None if args.no_profile else profile_run(bench, args)
    finally:
        if bench.postgres:
            bench.postgres.stop()
    report(results, idle, Baselines(compose_ms, workload_ms, help_median), profiled, notes, ROOT)


def profile_run(bench: Bench, args: argparse.Namespace) -> Profiled:
    """The stage breakdown's run, at the smallest size."""
    n = args.subscribers[0]
    stats, run = bench.profile(site_for(bench, args, n))
    sent, _, _ = parse_summary(run.stdout)
    print(f"  profiled {n:,}: {sent:,} sent, {run.cpu * 1000 / max(sent, 1):.2f} CPU ms/digest under the profiler",
          flush=True)
    return Profiled(stats, sent, n)


def run_days(bench: Bench, args: argparse.Namespace, chosen: list[Variant], notes: list[str]) -> None:
    """--days N: every variant through N successive days on one store, each size in turn (bench/e2e_days.py)."""
    import e2e_days as days

    days.STORED_MATCHES = STORED_MATCHES  # (the days' runs write their own digest.toml)

    results: list[days.Day] = []
    composes: list[float] = []  # every compose measurement, shared by the sizes (each day uses those around it)
    try:
        if bench.postgres:
            days.statement_stats(bench.postgres)
        for n in args.subscribers:
            start = time.perf_counter()
            spec = days.DaysSpec(n, args.day, args.days, args.papers_per_day, args.seed)
            site = days.build(spec, args.out, args.sample, bench.digest)
            print(f"site {site.folder.name}: ready in {time.perf_counter() - start:.0f} s", flush=True)
            run = days.DaysRun(bench, site, lambda: compose_cpu_ms(args.compose_subscribers)[0], parse_summary,
                               args.message_ids, composes)
            for variant in chosen:
                results += run.run(variant)
    finally:
        if bench.postgres:
            bench.postgres.stop()
    days.report(results, statistics.fmean(composes))
    days.write_rows(results, args.out / "days.csv")
    for note in notes:
        print(f"note: {note}")




if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("e2e: interrupted (the command, the sink and the database server were stopped)")
