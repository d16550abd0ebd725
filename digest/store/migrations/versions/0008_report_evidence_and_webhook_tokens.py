"""Each report's evidence; webhook signatures' one-use tokens.

- `mail_reports.evidence`: which sent digest a report matched and by what (its Message-ID, its
  return path), or why it matched none, so an operator can tell a real report from a forged one.
  Reports recorded before this revision have none.
- `webhook_tokens`: a Mailgun signature's token, taken by the first request that carries it and kept
  until the signature would be refused as stale anyway; a second request with it is a replay.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("mail_reports") as batch:
        batch.add_column(sa.Column("evidence", sa.Text, nullable=False, server_default=""))
    op.create_table(
        "webhook_tokens",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("expires_at", sa.DateTime, nullable=False),
    )
    op.create_index("ix_webhook_tokens_expires_at", "webhook_tokens", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_tokens_expires_at", table_name="webhook_tokens")
    op.drop_table("webhook_tokens")
    with op.batch_alter_table("mail_reports") as batch:
        batch.drop_column("evidence")
