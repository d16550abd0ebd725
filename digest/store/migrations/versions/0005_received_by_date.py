"""An index of the papers each subscriber received, by date: a send reads only the selection window's.

Without it, reading the papers a batch's subscribers received within the window walked every paper each
of them had ever received (the table's key is subscriber and paper): a send's CPU grew with the days of
history, 27% more per digest after 90 days (bench/history.py). The index holds the paper too, so the
window is read from the index alone.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_received_by_date", "received", ["subscriber", "digest_date", "paper_id"])


def downgrade() -> None:
    op.drop_index("ix_received_by_date", table_name="received")
