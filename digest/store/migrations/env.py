"""Alembic's entry point: run the migrations on the connection `digest.store.schema` hands over."""

from __future__ import annotations

from alembic import context

from digest.store.tables import metadata

IGNORED_TABLES = {"apscheduler_jobs"}  # APScheduler's job store creates and owns this one


def include_object(obj: object, name: str | None, type_: str, reflected: bool, compare_to: object) -> bool:
    return not (type_ == "table" and name in IGNORED_TABLES)


connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, include_object=include_object,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
