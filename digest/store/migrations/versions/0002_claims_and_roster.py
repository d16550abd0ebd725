"""Claims with leases on the send log; subscribers kept in the store; workers' progress.

- `deliveries.claimed_by` / `lease_until`: a digest is claimed before it is composed, so any number
  of send runs and workers can share a date without sending anything twice.
- `subscribers` and `profile_files`: every valid profile (from files or imported) in the store, and
  what was read from each file, so a run parses only the files that changed.
- `workers`: each send run's and worker's progress, for `digest status`.
- suppressed addresses are kept lower-case, so a run finds them by the table's key.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # One row per address whatever its case (any of them says it is suppressed), then lower-cased.
    op.execute("DELETE FROM suppressions "
               "WHERE email NOT IN (SELECT min(email) FROM suppressions GROUP BY lower(email))")
    op.execute("UPDATE suppressions SET email = lower(email) WHERE email <> lower(email)")
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String))
        batch.add_column(sa.Column("lease_until", sa.DateTime))
        batch.create_index("ix_deliveries_queue", ["digest_date", "status"])
    op.create_table(
        "subscribers",
        sa.Column("email_key", sa.String, primary_key=True),
        sa.Column("email", sa.String, nullable=False),
        sa.Column("source", sa.String, nullable=False),
        sa.Column("path", sa.String),
        sa.Column("timezone", sa.String, nullable=False),
        sa.Column("send_at", sa.String, nullable=False),
        sa.Column("frequency", sa.String, nullable=False),
        sa.Column("profile", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_subscribers_slot", "subscribers", ["timezone", "send_at", "frequency"])
    op.create_table(
        "profile_files",
        sa.Column("path", sa.String, primary_key=True),
        sa.Column("mtime_ns", sa.BigInteger, nullable=False),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("sha256", sa.String, nullable=False),
        sa.Column("email_key", sa.String),
        sa.Column("problems", sa.Text),
        sa.Column("checked_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "workers",
        sa.Column("owner", sa.String, primary_key=True),
        sa.Column("command", sa.String, nullable=False),
        sa.Column("digest_date", sa.Date),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("claimed", sa.Integer, nullable=False),
        sa.Column("sent", sa.Integer, nullable=False),
        sa.Column("failed", sa.Integer, nullable=False),
        sa.Column("deferred", sa.Integer, nullable=False),
        sa.Column("skipped", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workers")
    op.drop_table("profile_files")
    op.drop_index("ix_subscribers_slot", table_name="subscribers")
    op.drop_table("subscribers")
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_index("ix_deliveries_queue")
        batch.drop_column("lease_until")
        batch.drop_column("claimed_by")
