"""The schema's version (Alembic): a new database is made at the head revision; an older one must be upgraded.

Every command checks the version when it opens the store, and refuses to run on a database whose
schema is behind (or ahead of) this installation, saying what to run. `digest db upgrade` applies
the migrations in `migrations/versions/`. A database made before migrations existed (tables, but no
`alembic_version`) counts as the baseline revision.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from digest.errors import StoreError
from digest.store.engine import write
from digest.store.tables import metadata

HEAD = "0009"  # the newest migration; tests check it against migrations/versions/
BASELINE = "0001"  # the schema before migrations
VERSION_TABLE = "alembic_version"
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
_LOCK_KEY = 0x6469_6765_7374  # PostgreSQL advisory lock: one schema change at a time


class SchemaOutOfDate(StoreError):
    """The database's schema is not the one this installation expects."""


def current(conn: Connection) -> str | None:
    """The database's revision; None for an empty database."""
    inspector = sa.inspect(conn)
    if inspector.has_table(VERSION_TABLE):
        return conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()
    return BASELINE if inspector.has_table("papers") else None


def prepare(engine: Engine) -> None:
    """Make an empty database at the head revision; SchemaOutOfDate when an existing one is not at head."""
    with write(engine) as conn:
        revision = _locked_current(conn)
        if revision is not None and revision != HEAD:
            raise SchemaOutOfDate(_out_of_date(engine, revision))


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Apply every migration the database lacks: (revision before, revision after)."""
    from alembic import command  # loaded only for `digest db upgrade`

    with write(engine) as conn:
        before = _locked_current(conn)
        if before is None:
            return None, HEAD
        config = alembic_config(conn)
        if not sa.inspect(conn).has_table(VERSION_TABLE):
            command.stamp(config, BASELINE)
        command.upgrade(config, "head")
        return before, str(current(conn))


def alembic_config(conn: Connection):  # type: ignore[no-untyped-def]
    """Alembic's settings for running the migrations on this connection."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    return config


def _out_of_date(engine: Engine, revision: str) -> str:
    where = engine.url.render_as_string(hide_password=True)
    if revision < HEAD:
        return (f"the database {where} has schema revision {revision}, this version of paper-digest needs {HEAD}: "
                "run `digest db upgrade` (back the database up first)")
    return (f"the database {where} has schema revision {revision}, newer than this version of paper-digest "
            f"knows ({HEAD}): upgrade paper-digest")


def _locked_current(conn: Connection) -> str | None:
    """The revision, read under the schema lock; an empty database is made at head first (and None returned)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    revision = current(conn)
    if revision is None:
        from digest.store.console import make_search_indexes  # (the search indexes, as migration 0007 makes them)

        metadata.create_all(conn)
        make_search_indexes(conn)
        _stamp(conn, HEAD)
    return revision


def _stamp(conn: Connection, revision: str) -> None:
    version = sa.Table(VERSION_TABLE, sa.MetaData(), sa.Column("version_num", sa.String(32), primary_key=True))
    version.create(conn, checkfirst=True)
    conn.execute(version.delete())
    conn.execute(version.insert().values(version_num=revision))
