"""A throwaway PostgreSQL server for the tests: Debian's binaries, a data folder in /tmp, a free port on 127.0.0.1.

Started once per test session (initdb and pg_ctl, as the `postgres` user when the tests run as root,
since PostgreSQL refuses to run as root) and stopped at the end; each test gets a database of its own.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


def bindir() -> Path | None:
    """Where PostgreSQL's server programs are (Debian keeps them out of PATH)."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgServer:
    folder: Path
    port: int
    bin: Path
    databases: int = 0

    def url(self, name: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"

    def new_database(self) -> str:
        """A fresh, empty database; its URL."""
        import psycopg

        self.databases += 1
        name = f"test_{self.databases}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres", autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(self.folder, ignore_errors=True)

    def restart(self) -> None:
        """A fast restart, as an operator's or a package upgrade's: every session is ended, the data kept."""
        _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w", "stop"])
        _pg_start(self.bin, self.folder, self.port)


def _as_postgres(command: list[str]) -> subprocess.CompletedProcess[str]:
    if os.geteuid() == 0:  # PostgreSQL will not run as root
        command = ["runuser", "-u", "postgres", "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def start() -> PgServer:
    """Initialise and start a server; raises if PostgreSQL is not installed or will not start."""
    programs = bindir()
    if programs is None:
        raise FileNotFoundError("PostgreSQL is not installed (Debian package: postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="digest-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    _as_postgres([str(programs / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync"])
    port = free_port()
    _pg_start(programs, folder, port)
    return PgServer(folder, port, programs)


def _pg_start(programs: Path, folder: Path, port: int) -> None:
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c full_page_writes=off"
    _as_postgres([str(programs / "pg_ctl"), "-D", str(folder / "data"), "-o", options, "-l",
                  str(folder / "server.log"), "-w", "start"])
