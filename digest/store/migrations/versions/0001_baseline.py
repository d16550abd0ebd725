"""The schema as it was before migrations: papers, upvotes, the send log, suppressions, runs, caches.

A database made before paper-digest had migrations has these tables and no `alembic_version`;
`digest db upgrade` takes it to be at this revision.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "papers",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("arxiv_id", sa.String, unique=True),
        sa.Column("title_norm", sa.String, nullable=False, index=True),
        sa.Column("title", sa.String, nullable=False),
        sa.Column("abstract", sa.Text, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("upvotes", sa.Integer),
        sa.Column("published", sa.Date),
        sa.Column("first_seen", sa.Date, nullable=False, index=True),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "upvotes",
        sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
        sa.Column("observed_on", sa.Date, primary_key=True),
        sa.Column("upvotes", sa.Integer, nullable=False),
    )
    op.create_table(
        "deliveries",
        sa.Column("subscriber", sa.String, primary_key=True),
        sa.Column("digest_date", sa.Date, primary_key=True),
        sa.Column("message_id", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("transport", sa.String, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "received",
        sa.Column("subscriber", sa.String, primary_key=True),
        sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
        sa.Column("digest_date", sa.Date, nullable=False),
    )
    op.create_table(
        "suppressions",
        sa.Column("email", sa.String, primary_key=True),
        sa.Column("reason", sa.String, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "fetches",
        sa.Column("source", sa.String, primary_key=True),
        sa.Column("url", sa.String, nullable=False),
        sa.Column("fetched_at", sa.DateTime, nullable=False),
        sa.Column("result", sa.String, nullable=False),
        sa.Column("papers", sa.Integer, nullable=False),
        sa.Column("errors", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("etag", sa.String),
        sa.Column("last_modified", sa.String),
        sa.Column("last_ok_at", sa.DateTime),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("command", sa.String, nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
    )
    op.create_table(
        "preferences",
        sa.Column("email", sa.String, primary_key=True),
        sa.Column("frequency", sa.String),
        sa.Column("paused_until", sa.Date),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "locks",
        sa.Column("name", sa.String, primary_key=True),
        sa.Column("owner", sa.String, nullable=False),
        sa.Column("heartbeat_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "feedback",
        sa.Column("subscriber", sa.String, primary_key=True),
        sa.Column("paper_id", sa.Integer, sa.ForeignKey("papers.id"), primary_key=True),
        sa.Column("value", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "cache",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("value", sa.LargeBinary, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "embeddings",
        sa.Column("paper_key", sa.String, primary_key=True),
        sa.Column("model", sa.String, primary_key=True),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("meta", "embeddings", "cache", "feedback", "locks", "preferences", "runs", "fetches",
                  "suppressions", "received", "deliveries", "upvotes", "papers"):
        op.drop_table(table)
