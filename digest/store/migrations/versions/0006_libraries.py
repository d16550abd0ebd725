"""Readers' libraries: an interest may be a library of papers (BibTeX, RIS, CSL-JSON, a list of ids).

A profile keeps its library's digest; the entries live in `libraries` once, whoever shares them, so
reading the roster for a send does not read every library's titles and abstracts. A profile file's
state remembers the library files it names, so editing one is seen like editing the profile.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "libraries",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("entries", sa.Text, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    op.add_column("profile_files", sa.Column("libraries", sa.Text))


def downgrade() -> None:
    op.drop_column("profile_files", "libraries")
    op.drop_table("libraries")
