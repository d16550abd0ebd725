"""Bounce and complaint reports read from a mailbox; the send log found by Message-ID.

- `mail_reports`: every report `digest bounces` has read (by the report's Message-ID, else a hash
  of its bytes), so reading a mailbox twice counts nothing twice.
- `bounces`: what the reports said about each address (hard, soft, complaint), for the soft-bounce
  count, `digest status` and a subscriber's data export.
- `deliveries.message_id` indexed: a report names the digest it is about by its Message-ID.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mail_reports",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("outcome", sa.String, nullable=False),
        sa.Column("processed_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "bounces",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("report", sa.String, nullable=False),
        sa.Column("email", sa.String, nullable=False),
        sa.Column("kind", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("digest_date", sa.Date),
        sa.Column("reported_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_bounces_email", "bounces", ["email"])
    op.create_index("ix_deliveries_message_id", "deliveries", ["message_id"])


def downgrade() -> None:
    op.drop_index("ix_deliveries_message_id", table_name="deliveries")
    op.drop_index("ix_bounces_email", table_name="bounces")
    op.drop_table("bounces")
    op.drop_table("mail_reports")
