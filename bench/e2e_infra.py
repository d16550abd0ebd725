"""What bench/e2e.py runs the real command against: a measured subprocess, an SMTP sink, a PostgreSQL server.

Each piece is a real program in its own process, as in production: the sink's and the database's
CPU never count as the sender's, and the sender's CPU and peak memory are read from the kernel's
accounting of exactly the command's process tree.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs the command and reports the rusage of its whole process tree (workers included, once reaped):
# ru_maxrss of RUSAGE_CHILDREN is the largest single process, so measuring from this fresh parent
# keeps the benchmark's own earlier runs out of it. A SIGTERM is passed on to the command.
RUSAGE_WRAPPER = """
import json, resource, signal, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
signal.signal(signal.SIGTERM, lambda *_: child.terminate())
code = child.wait()
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "maxrss_kib": usage.ru_maxrss}, out)
"""


@dataclass(frozen=True)
class Measured:
    """One run of a command: exit code, wall and CPU seconds, the largest process's peak RSS, its output."""

    code: int
    wall: float
    cpu: float
    peak_rss_mib: float
    stdout: str
    stderr: str
    load: float  # the 1-minute load average when it finished (other jobs share the machine)


def digest_command() -> list[str]:
    """The `digest` program an operator runs: the venv's console script, else `python -m digest`."""
    script = Path(sys.executable).parent / "digest"
    return [str(script)] if script.exists() else [sys.executable, "-m", "digest"]


def measure(command: Sequence[str], env: Mapping[str, str], logs: Path) -> Measured:
    """Run `command` and read its time and memory from the kernel; its output is kept under `logs`."""
    logs.mkdir(parents=True, exist_ok=True)
    usage = logs / "rusage.json"
    with (logs / "stdout.txt").open("w") as out, (logs / "stderr.txt").open("w") as err:
        wrapper = subprocess.Popen([sys.executable, "-c", RUSAGE_WRAPPER, str(usage), *command],
                                   stdout=out, stderr=err, env={**os.environ, **env})
        try:
            wrapper.wait()
        except BaseException:  # interrupted: the command stops too, not left running on its own
            wrapper.terminate()
            wrapper.wait()
            raise
    data = json.loads(usage.read_text())
    return Measured(code=data["code"], wall=data["wall"], cpu=data["cpu"], peak_rss_mib=data["maxrss_kib"] / 1024,
                    stdout=(logs / "stdout.txt").read_text(), stderr=(logs / "stderr.txt").read_text(),
                    load=os.getloadavg()[0])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 15
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"{what} did not start on port {port}")
        time.sleep(0.05)


# -- SMTP sinks -------------------------------------------------------------------------------------------


def postfix_sink(out: Path) -> Path | None:
    """Postfix's C smtp-sink, unpacked from the Debian package into `out` (downloaded once; no mail system
    installed); None when it cannot be had."""
    program = out / "postfix" / "usr" / "sbin" / "smtp-sink"
    if program.exists():
        return program
    try:
        subprocess.run(["apt-get", "download", "postfix"], cwd=out, check=True, capture_output=True, timeout=300)
        package = sorted(out.glob("postfix_*.deb"))[-1]
        subprocess.run(["dpkg", "-x", str(package), str(out / "postfix")], check=True, capture_output=True)
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return program if program.exists() else None


class Sink:
    """An SMTP server on 127.0.0.1 that accepts every message, keeps nothing, and counts what it got."""

    def __init__(self, program: Path | None, logs: Path) -> None:
        self.program, self.logs, self.port = program, logs, free_port()
        self.kind = "postfix smtp-sink" if program else "aiosmtpd (bench/sink.py)"
        self.proc: subprocess.Popen[bytes] | None = None

    def command(self) -> tuple[list[str], dict[str, str]]:
        if self.program is None:
            return [sys.executable, str(ROOT / "bench" / "sink.py"), str(self.port)], {}
        user = ["-u", "nobody"] if os.geteuid() == 0 else []  # smtp-sink refuses to keep root privileges
        libraries = {"LD_LIBRARY_PATH": str(self.program.parents[1] / "lib" / "postfix")}
        return [str(self.program), "-c", *user, f"127.0.0.1:{self.port}", "1000"], libraries

    def start(self) -> Sink:
        command, env = self.command()
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / "sink.txt").open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env})
        wait_for_port(self.port, self.proc, self.kind)
        return self

    def stop(self) -> int:
        """Stop the sink; the number of messages it received."""
        assert self.proc is not None
        time.sleep(0.2)  # smtp-sink updates its counters when the sender's QUIT arrives
        self.proc.terminate()
        self.proc.wait(10)
        text = (self.logs / "sink.txt").read_text(errors="replace")
        found = re.findall(r"mesg=(\d+)", text) or re.findall(r"received: (\d+)", text)
        return int(found[-1]) if found else 0


# -- PostgreSQL -------------------------------------------------------------------------------------------


def _as_postgres(command: list[str]) -> None:
    if os.geteuid() == 0:  # PostgreSQL will not run as root
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, capture_output=True, text=True, timeout=300, check=True)


class Postgres:
    """A throwaway server in a temporary folder (initdb, pg_ctl), as tests/pg.py starts one, but with
    the durability settings of a production server unless `fsync` is off."""

    def __init__(self, fsync: bool) -> None:
        sys.path.insert(0, str(ROOT))
        from tests.pg import bindir

        found = bindir()
        if found is None:
            raise FileNotFoundError("PostgreSQL is not installed (Debian package: postgresql)")
        self.bin, self.fsync, self.port = found, fsync, free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="digest-e2e-pg-"))

    def start(self) -> Postgres:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        data = str(self.folder / "data")
        _as_postgres([str(self.bin / "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8"])
        options = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.folder}"
        if not self.fsync:
            options += " -c fsync=off -c full_page_writes=off -c synchronous_commit=off"
        _as_postgres([str(self.bin / "pg_ctl"), "-D", data, "-o", options, "-l", str(self.folder / "server.log"),
                      "-w", "start"])
        return self

    def stop(self) -> None:
        _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop"])
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def _connect(self):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True)

    def execute(self, sql: str) -> None:
        with self._connect() as conn:
            conn.execute(sql)

    def scalar(self, sql: str) -> object:
        with self._connect() as conn:
            return conn.execute(sql).fetchone()[0]

    def create(self, name: str, template: str | None = None) -> str:
        """A new database (a copy of `template` when given, which is how each timed run starts fresh); its URL."""
        self.execute(f"DROP DATABASE IF EXISTS {name}")
        self.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        return self.url(name)

    def cpu_seconds(self) -> float:
        """CPU seconds the server has used so far: its live processes, and the backends it has reaped."""
        time.sleep(0.2)  # a client's backend exits just after the client does
        postmaster = int((self.folder / "data" / "postmaster.pid").read_text().split()[0])
        ticks = _cpu_ticks(postmaster, reaped=True) + sum(_cpu_ticks(pid) for pid in _children(postmaster))
        return ticks / os.sysconf("SC_CLK_TCK")

    def size(self, name: str) -> int:
        return int(self.scalar(f"SELECT pg_database_size('{name}')"))  # type: ignore[call-overload]


def _children(pid: int) -> list[int]:
    with contextlib.suppress(OSError):
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _cpu_ticks(pid: int, reaped: bool = False) -> int:
    """User and system clock ticks of a process (with `reaped`, also of its children it has waited for)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0  # it exited meanwhile
    utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
    return utime + stime + (cutime + cstime if reaped else 0)


def sqlite_size(database: Path) -> int:
    """Bytes on disk of a SQLite database with its write-ahead log."""
    return sum(p.stat().st_size for p in (database, Path(f"{database}-wal")) if p.exists())


def dkim_key(path: Path) -> str:
    """An RSA-2048 key in PEM (made once, kept in bench/out): what `DIGEST_DKIM_KEY` holds in production."""
    if not path.exists():
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.TraditionalOpenSSL, NoEncryption()))
    return path.read_text()
