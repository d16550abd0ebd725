"""What a send says it did, and what `digest status` says of runs: counted from what happened, never inferred.

"Taken by other workers" is the digests other send runs and workers recorded claiming while this send ran: a lone
send stopped by its database (which then cannot say what is left) took from no one. A run in the log whose process
was killed is shown as died, not running for ever. Real stores (SQLite files, a PostgreSQL server), a real SMTP
server, real processes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from digest import daily
from digest.cli import main
from digest.store import Store
from digest.store.runs import this_process
from digest.store.tables import _now, locks

from ..conftest import DAY, cli_env, prime, sample_site
from ..smtpd import Recorder, smtp_server

FAR = "far.example/7/1/ab"  # a worker on another machine, as its owner id reads


def test_a_lone_send_stopped_by_its_database_took_nothing_from_other_workers(smtp_app, postgres, model_rows):
    """The database refuses every connection from the moment the server takes the first digest (of four, a batch
    of one each): the send stops, and since no other process claimed anything its summary names no other worker
    (it said "3 taken by other workers": what it could no longer count, taken for others' work)."""
    import psycopg

    url = postgres.new_database()
    prime(url, model_rows)
    name = url.rsplit("/", 1)[1]
    admin = psycopg.connect(f"host=127.0.0.1 port={postgres.port} user=postgres dbname=postgres", autocommit=True)
    cut: list[bool] = []

    def database_goes(_received) -> None:
        if not cut:
            cut.append(True)
            admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])

    server = Recorder(on_message=database_goes)
    try:
        with smtp_server(server) as port:
            app = smtp_app(port, store={"url": url}, delivery={"batch_size": 1})
            report = daily.send(app, DAY)
    finally:
        admin.execute(f"ALTER DATABASE {name} ALLOW_CONNECTIONS true")
        admin.close()
    assert len(server.messages) == 1 and "database" in report.halted, report.halted
    assert report.others == 0 and "other workers" not in report.summary(), report.summary()


def test_what_another_worker_claims_during_a_send_is_counted_as_taken_by_it(smtp_app):
    """A worker on another machine claims two of the four due digests while the send is under way (and records
    its claim, as every sender does): the send delivers the other two and says that 2 were taken by other workers,
    although the date also holds digests of no slot of this send (which it claims and skips)."""
    claimed: list[int] = []

    def another_worker_claims(_received) -> None:
        if not claimed:
            other = Store(app.config.store.url)
            try:
                other.start_worker(FAR, "worker", DAY)
                claimed.append(len(other.claim(DAY, FAR, limit=2, lease_until=_now() + timedelta(minutes=10))))
                other.worker_progress(FAR, claimed=claimed[0])
            finally:
                other.close()

    server = Recorder(on_message=another_worker_claims)
    with smtp_server(server) as port:
        app = smtp_app(port, delivery={"batch_size": 1})
        app.store.enqueue(DAY, ["gone1@uni.acme.dev", "gone2@uni.acme.dev", "gone3@uni.acme.dev"],
                          message_id=lambda e: f"<{e}.{DAY}@digest.example.org>", transport="smtp")
        report = daily.send(app, DAY)
    assert claimed == [2] and report.count("sent") == 2 and len(server.messages) == 2
    assert report.others == 2 and report.summary().endswith(", 2 taken by other workers"), report.summary()


# -- runs whose process is gone ------------------------------------------------------------------------------------


def status(site: Path, capsys) -> tuple[int, list[str], str]:
    """`digest status` of the site: its exit code, its "Recent runs" lines, its stderr."""
    capsys.readouterr()
    code = main(["--config", str(site / "digest.toml"), "status", "--date", DAY.isoformat()])
    out, err = capsys.readouterr()
    lines = out.split("\n\n")[0].splitlines()
    assert lines[0] == "Recent runs:"
    return code, lines[1:], err


def status_section(site: Path, capsys, heading: str) -> list[str]:
    """The lines of one section of `digest status`."""
    capsys.readouterr()
    main(["--config", str(site / "digest.toml"), "status", "--date", DAY.isoformat()])
    section = capsys.readouterr().out.split(f"{heading}\n", 1)[1]
    return section.split("\n\n")[0].splitlines()


@pytest.fixture
def site(tmp_path: Path) -> Path:
    return sample_site(tmp_path)


def test_a_run_whose_process_was_killed_shows_as_died(site: Path, capsys):
    """A process logs a send run, starts sending (its worker row) and is killed with SIGKILL before it finishes:
    `digest status` shows the run as died (process gone), not running, and so its worker, and exits 1 as for a
    failed run."""
    starter = ("import sys, time\nfrom datetime import date\nfrom digest.delivery.owners import Owner\n"
               "from digest.store import Store\nstore = Store(sys.argv[1])\nrun_id = store.start_run('send')\n"
               "store.start_worker(Owner.current().id, 'send', date(2026, 6, 12))\n"
               "print(run_id, flush=True)\ntime.sleep(120)\n")
    process = subprocess.Popen([sys.executable, "-c", starter, f"sqlite:///{site / 'digest.db'}"], cwd=site,
                               stdout=subprocess.PIPE, text=True, env=cli_env())
    try:
        assert process.stdout is not None
        run_id = int(process.stdout.readline())
        code, lines, _ = status(site, capsys)
        assert [line.split("UTC  ", 1)[1].strip() for line in lines] == ["running"]  # alive: under way
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    code, lines, err = status(site, capsys)
    [line] = lines
    assert line.startswith(f"  #{run_id:<4} send ")
    assert line.split("UTC  ", 1)[1] == f"died     (process gone: pid {process.pid} on {os.uname().nodename} no " \
                                        "longer runs)"
    assert code == 1 and err == f"digest: the last run (#{run_id} send) died\n"
    workers = status_section(site, capsys, "Send workers (last 24 hours):")
    assert [w.split(f"pid {process.pid} on ", 1)[1].endswith("  died (process gone)") for w in workers] == [True]


def test_a_run_of_another_machine_silent_past_its_lease_shows_as_died(site: Path, capsys):
    """Runs of another machine: one heard from a minute ago is running; one not heard from for two hours shows as
    died (lease expired), with the machine's process and when it was last heard from. A run of this process is
    running however long ago it was heard from."""
    store = Store(f"sqlite:///{site / 'digest.db'}")
    try:
        silent = store.start_run("run", process="far.example/4242/99")
        fresh = store.start_run("send", process="far.example/4343/99")
        mine = store.start_run("fetch")
        long_ago = _now() - timedelta(hours=2)
        with store.write() as conn:
            for run_id in (silent, mine):
                conn.execute(locks.update().where(locks.c.name == f"run/{run_id}").values(heartbeat_at=long_ago))
        code, lines, _ = status(site, capsys)
        states = {int(line.split()[0].lstrip("#")): line.split("UTC  ", 1)[1] for line in lines}
        assert states[silent] == f"died     (lease expired: pid 4242 on far.example, not heard from since " \
                                 f"{long_ago:%Y-%m-%d %H:%M} UTC)"
        assert states[fresh].startswith("running") and states[mine].startswith("running")
        store.finish_run(mine, "ok", "done")
        assert store.run_leases([mine]) == {}  # a finished run has no lease left
    finally:
        store.close()


def test_a_sender_at_work_keeps_the_lease_of_the_run_it_works_for(smtp_app):
    """A run logged by this process, its lease last renewed two hours ago: a send renews it as it claims."""
    with smtp_server(Recorder()) as port:
        app = smtp_app(port)
        run_id = app.store.start_run("send")
        long_ago = _now() - timedelta(hours=2)
        with app.store.write() as conn:
            conn.execute(locks.update().where(locks.c.name == f"run/{run_id}").values(heartbeat_at=long_ago))
        assert daily.send(app, DAY).count("sent") == 4
    [(owner, heard)] = app.store.run_leases([run_id]).values()
    assert owner == f"{this_process()}/run" and heard > long_ago + timedelta(hours=1)
