"""Opening the database: one engine per URL, SQLite's pragmas, and write transactions that take the lock first.

A write on SQLite begins with `BEGIN IMMEDIATE`, so it waits for the write lock up front (up to
`busy_timeout`) instead of starting as a reader and failing with "database is locked" when another
process writes first; that is what lets several send runs and workers share one SQLite file. Reads
begin as ordinary deferred transactions and never block a writer (WAL).
"""

from __future__ import annotations

import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from digest.errors import StoreError
from digest.filemodes import close_to_others, create_file
from digest.logs import masked

_POSTGRES_ALIASES = ("postgres://", "postgresql://")
BUSY_TIMEOUT_MS = 30_000
SERIAL_LOCK = 0x6469_6765_7375  # PostgreSQL advisory lock of the store's serial writes


def normalise_url(url: str) -> str:
    """`postgres://` and `postgresql://` (what managed services hand out) use the psycopg 3 driver."""
    for alias in _POSTGRES_ALIASES:
        if url.startswith(alias):
            return "postgresql+psycopg://" + url.removeprefix(alias)
    return url


def shown(url: str) -> str:
    """The URL as messages show it: its password, if it has one, as `***`."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):
        return masked(url)


def make_engine(url: str, *, durable: bool = False) -> Engine:
    """An engine for the URL; StoreError when the driver or the SQLite folder is missing.

    `durable`: SQLite flushes every commit (synchronous=FULL) instead of at checkpoints. A SQLite file is
    made 0600 (SQLite gives its -wal and -shm files the same mode); one found open to others is closed."""
    url = normalise_url(url)
    if url.startswith("sqlite:///"):
        folder = Path(url.removeprefix("sqlite:///")).parent
        if str(folder) not in ("", ".") and not folder.exists():
            raise StoreError(f"database folder {folder} does not exist")
        _keep_private(sa.engine.make_url(url).database)
    try:
        if url.startswith("sqlite"):
            engine = sa.create_engine(url)
            sa.event.listen(engine, "connect", _sqlite_full if durable else _sqlite_connect)
            sa.event.listen(engine, "begin", _sqlite_begin)
        else:
            engine = sa.create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as exc:
        extra = " (pip install 'paper-digest[postgres]')" if url.startswith("postgresql") else ""
        raise StoreError(f"cannot open database {shown(url)}: the driver {exc.name} is not installed{extra}") from exc
    except sa.exc.ArgumentError as exc:
        raise StoreError(f"store.url {shown(url)!r} is not a database URL: {masked(str(exc))}") from exc
    return engine


def _keep_private(database: str | None) -> None:
    """Make the SQLite file 0600 before SQLite makes it (with the umask's mode); close an existing one's files
    to other users."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database)
    try:
        if create_file(path):
            return
    except OSError:  # a folder this user cannot write in: SQLite says so, with the hint for it (`explain`)
        return
    for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        close_to_others(part, "the store's file")


@contextmanager
def write(engine: Engine, *, serial: bool = True) -> Iterator[Connection]:
    """A write transaction: on SQLite it holds the write lock from its first statement.

    On PostgreSQL a `serial` one also takes a transaction-wide advisory lock, so read-then-write
    transactions (merging papers, syncing profile files, first-use defaults) run one at a time as
    they do on SQLite. The send path's statements are safe row by row (conditional updates, claims
    with SKIP LOCKED) and pass `serial=False`, so workers never wait for each other there.
    """
    with engine.connect() as conn:
        conn.execution_options(immediate=True)
        with conn.begin():
            if serial and conn.dialect.name == "postgresql":
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SERIAL_LOCK})
            yield conn


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" event below issues BEGIN itself
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (preview, status) never block a send
    # NORMAL in WAL mode: a commit survives the process being killed at any moment; only a power cut (or
    # an OS crash) can lose the last commits before a checkpoint. See docs/delivery.md, "Crash safety".
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.close()


def _sqlite_full(dbapi_conn: Any, record: Any) -> None:
    _sqlite_connect(dbapi_conn, record)
    dbapi_conn.execute("PRAGMA synchronous=FULL")


def _sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("immediate") else "BEGIN")


def begin_immediate(cursor: Any) -> None:
    """Take SQLite's write lock on a driver cursor (a `sent` mark's), waiting while another process holds it,
    for up to the busy timeout (on a connection whose own `busy_timeout` is 0).

    SQLite's own busy handler sleeps 1 ms, then 2, 5, 10 … between tries; a mark holds the lock for about
    a tenth of that, so two workers lost a twelfth of their time asleep (1,194 of 10,000 marks waited,
    2 s in all). Here the waits start at 50 µs and double up to 2 ms.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    pause = 0.00005
    while True:
        try:
            cursor.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.002)



class Base:
    """What every part of the store shares: the engine, and write transactions on it."""

    engine: Engine
    durable_sends: bool = False  # every `sent` mark flushed before the next digest (`store.durable_sends`)

    def write(self, *, serial: bool = True) -> Any:
        """A write transaction (see `write`)."""
        return write(self.engine, serial=serial)


def database_errors() -> tuple[type[BaseException], ...]:
    """What a failing database raises: SQLAlchemy's errors, and the drivers' own (the send log's hot path
    talks to the driver directly). PostgreSQL's only once its driver is loaded: until then none of them can
    be raised, and an SQLite run need not spend the import."""
    psycopg = sys.modules.get("psycopg")
    return (sa.exc.SQLAlchemyError, sqlite3.Error) + ((psycopg.Error,) if psycopg is not None else ())


_HINTS = (
    (("readonly", "read-only", "read only"), "the database file or its folder is read-only: let this user write both"),
    (("disk is full", "no space left", "diskfull", "disk full"), "the disk is full: free some space and run again"),
    (("database is locked",), "another program holds the database's lock too long: look for a stuck process"),
    (("disk i/o error",), "the database file could not be written: a full disk, a file size limit or a failing "
     "disk; free space and run again, and if it persists check the file with `sqlite3 FILE 'PRAGMA integrity_check'`"),
    (("malformed", "not a database", "corrupt"),
     "the database file is damaged: stop every digest process, then recover it with "
     "`sqlite3 FILE .recover | sqlite3 recovered.db` and point store.url at recovered.db"),
    (("connection refused", "could not connect", "connection failed", "server closed the connection",
      "terminating connection", "connection is closed", "the connection is lost"),
     "PostgreSQL cannot be reached: check that it runs and that store.url names it"),
    (("unable to open database",), "the database file cannot be opened: check store.url and the folder's permissions"),
)


def explain(exc: BaseException) -> str:
    """A database failure as one line: the driver's message and what to do about it."""
    reason = getattr(exc, "orig", None) or exc
    text = masked(" ".join(str(reason).split())) or reason.__class__.__name__
    low = text.lower()
    for needles, hint in _HINTS:
        if any(needle in low for needle in needles):
            return f"{text} ({hint})"
    return text
