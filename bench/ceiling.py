"""The ceiling of a send on this machine: finished digests handed to Postfix's `smtp-sink`, nothing composed.

    .venv/bin/python bench/ceiling.py [--messages 20000] [--senders 1 2] [--rounds 3] [--smtp-sink PATH]
                                      [--marks [--store postgresql]]

How close a million-reader send comes to "Postfix's `smtp-sink` on this machine, the physical
limit here". This measures that limit the way a send reaches it: digests composed before any clock starts
(generated profiles over the seed papers, as bench/render.py and bench/deliver.py make them), then N sender
processes, each with one reused connection through the real `SmtpTransport`, handing them to one `smtp-sink` (the
C sink, unpacked from the Debian package as bench/e2e.py does) on the same two cores. With `--marks` each message
is also recorded as sent (`SendLogStore.mark_sent` with its papers, one database shared by the senders, as a send's
workers share theirs): the exactly-once record every digest pays. The database is SQLite, or with `--store
postgresql` a throwaway PostgreSQL server on the same machine with a production server's durability settings (as
bench/e2e.py starts one), whose CPU is counted beside the sink's.

Printed per sender count: messages a second (wall), each side's CPU a message (the senders' own, the sink's and
the PostgreSQL server's read from /proc), and what that leaves of two cores for composing a digest at the target's
target rate for a million readers with two workers: 1,700 a second on SQLite (2 cores / 1,700 = 1.18 ms a digest in
all), 1,200 on PostgreSQL (1.67 ms).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from digest.app import App  # noqa: E402
from digest.config import build_config  # noqa: E402
from digest.delivery.smtp import SmtpSettings, SmtpTransport  # noqa: E402
from digest.store import Store  # noqa: E402


def _load(name: str) -> object:
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


bench_render = _load("render")
infra = _load("e2e_infra")
DAY: date = bench_render.DAY  # type: ignore[attr-defined]
TARGET = {"sqlite": 1700, "postgresql": 1200}  # digests a second, a million readers with two workers
CORES = 2


def compose(folder: Path, count: int, url: str) -> list[tuple[str, bytes, list[int]]]:
    """`count` finished digests composed on the store at `url`: recipient, bytes, the store ids of their papers."""
    app = App(build_config({"store": {"url": url}}, base=folder))
    app.ingest([ROOT / "seeds"], seen_on=DAY)
    pool = app.composer.pool(DAY)
    distinct = bench_render.make_subscribers(min(count, 2000))  # type: ignore[attr-defined]
    made = []
    for subscriber in distinct:
        composed = app.composer.compose(subscriber, DAY, pool, received=set())
        made.append((composed.message.as_bytes(), composed.paper_ids))
    app.close()
    return [(f"r{n}@example.org", *made[n % len(made)]) for n in range(count)]


def cpu_of(pid: int) -> float:
    """A process's user + system CPU seconds so far (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sender(messages: list[tuple[str, bytes, list[int]]], port: int, marks: str | None, out: int) -> None:
    """One sender process: every message through one connection (and its mark), then its CPU seconds on `out`."""
    transport = SmtpTransport(SmtpSettings("127.0.0.1", port, "none"), "digest@example.org")
    store = Store(marks) if marks else None
    start = time.process_time()
    for recipient, data, papers in messages:
        transport.send(data, recipient, DAY)
        if store is not None:
            store.mark_sent(recipient, DAY, papers)
    transport.close()
    os.write(out, f"{time.process_time() - start}\n".encode())
    os._exit(0)


def run(messages: list[tuple[str, bytes, list[int]]], senders: int, port: int, sink_pid: int,
        marks: str | None, server: object | None) -> dict[str, float]:
    """One run: the messages split among `senders` processes; rates and CPU a message (`server`: PostgreSQL's)."""
    read, write = os.pipe()
    server_before = server.cpu_seconds() if server is not None else 0.0  # type: ignore[attr-defined]
    sink_before, wall = cpu_of(sink_pid), time.perf_counter()
    children = []
    for n in range(senders):
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                sender(messages[n::senders], port, marks, write)
            finally:
                os._exit(1)  # (a failed sender: its CPU line is missing, which the parent reports)
        children.append(pid)
    os.close(write)
    for pid in children:
        os.waitpid(pid, 0)
    wall = time.perf_counter() - wall
    sink = cpu_of(sink_pid) - sink_before
    database = server.cpu_seconds() - server_before if server is not None else 0.0  # type: ignore[attr-defined]
    with os.fdopen(read) as results:
        lines = results.read().split()
    if len(lines) != senders:
        raise SystemExit(f"ceiling: {senders - len(lines)} of {senders} senders failed")
    spent = sum(float(line) for line in lines)
    return {"rate": len(messages) / wall, "sender_ms": spent * 1000 / len(messages),
            "sink_ms": sink * 1000 / len(messages), "server_ms": database * 1000 / len(messages)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--senders", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3, help="runs of each sender count, alternated")
    parser.add_argument("--marks", action="store_true", help="record each message as sent, as a send does")
    parser.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite", help="where --marks go")
    parser.add_argument("--smtp-sink", help="Postfix's smtp-sink (default: unpacked into bench/out as bench/e2e.py)")
    args = parser.parse_args()
    program = Path(args.smtp_sink) if args.smtp_sink else infra.postfix_sink(ROOT / "bench" / "out")  # type: ignore[attr-defined]
    if program is None:
        sys.exit("ceiling: Postfix's smtp-sink could not be had (apt-get download postfix failed)")
    postgres = infra.Postgres(fsync=True).start() if args.store == "postgresql" else None  # type: ignore[attr-defined]
    try:
        measure(args, program, postgres)
    finally:
        if postgres is not None:
            postgres.stop()


def measure(args: argparse.Namespace, program: Path, postgres: object | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = postgres.create("bench") if postgres is not None else "sqlite:///bench.db"  # type: ignore[attr-defined]
        messages = compose(folder, args.messages, url)
        size = sum(len(d) for _, d, _ in messages) / len(messages) / 1024
        print(f"{len(messages)} digests, {size:.1f} KiB each, to Postfix's smtp-sink on 127.0.0.1; {os.cpu_count()} "
              f"cores; load {os.getloadavg()[0]:.2f}")
        sink = infra.Sink(program, folder / "sink").start()  # type: ignore[attr-defined]
        results: dict[int, list[dict[str, float]]] = {n: [] for n in args.senders}
        try:
            for r in range(args.rounds):
                for n in args.senders:
                    marks = None
                    if args.marks and postgres is not None:  # (a copy of the store the digests were composed on)
                        marks = postgres.create(f"marks_{n}_{r}", template="bench")  # type: ignore[attr-defined]
                    elif args.marks:
                        copy = folder / f"marks-{n}-{r}.db"
                        shutil.copyfile(folder / "bench.db", copy)
                        marks = f"sqlite:///{copy}"
                    results[n].append(run(messages, n, sink.port, sink.proc.pid, marks, postgres))
        finally:
            received = sink.stop()
        sent = len(messages) * args.rounds * len(args.senders)
        print(f"the sink counted {received} messages (sent {sent})")
        if received != sent:
            raise SystemExit("ceiling: the sink did not count every message sent")
        for n, runs in results.items():
            best = max(runs, key=lambda r: r["rate"])
            rates = " / ".join(f"{r['rate']:.0f}" for r in runs)
            target = TARGET[args.store]
            budget = CORES * 1000 / target - best["sender_ms"] - best["sink_ms"] - best["server_ms"]
            server = f", PostgreSQL {best['server_ms']:.3f} ms" if postgres is not None else ""
            print(f"{n} sender{'s' if n > 1 else ''}{f' with marks ({args.store})' if args.marks else ''}: {rates} "
                  f"messages a second (best {best['rate']:.0f}); sender CPU {best['sender_ms']:.3f} ms, sink "
                  f"{best['sink_ms']:.3f} ms{server} a message; at {target:,} a second on {CORES} cores "
                  f"{budget:.2f} ms a digest left for composing it")


if __name__ == "__main__":
    main()
