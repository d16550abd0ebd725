"""The operator console's search: trigram indexes over each subscriber's address and name.

A search by any part of an address or name scanned every profile (about 3 s at a million
subscribers on PostgreSQL, 1 s on SQLite); PostgreSQL's pg_trgm GIN indexes and SQLite's FTS5
trigram table answer it in milliseconds. Made only where the database can have them (the
extension there or allowed; SQLite 3.34 or later with FTS5), else a search scans as before.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

from digest.store.console import drop_search_indexes, make_search_indexes

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    make_search_indexes(op.get_bind())


def downgrade() -> None:
    drop_search_indexes(op.get_bind())
