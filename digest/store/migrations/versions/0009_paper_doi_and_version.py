"""Papers' DOIs and versions: one paper across sources and versions.

- `papers.doi`: the paper's DOI (lower-case, no https://doi.org/), unique where a paper has one; a paper
  without an arXiv id is known by it (a bioRxiv or medRxiv preprint), and one with both by either.
- `papers.version`: the newest version of the paper seen (arXiv's v2, bioRxiv's version 2).

Papers stored before this revision have neither; they are still found by their arXiv id or by title and
first author, and gain a DOI and version the next time a source lists them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("papers") as batch:
        batch.add_column(sa.Column("doi", sa.String))
        batch.add_column(sa.Column("version", sa.Integer))
    op.create_index("ix_papers_doi", "papers", ["doi"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_papers_doi", table_name="papers")
    with op.batch_alter_table("papers") as batch:
        batch.drop_column("version")
        batch.drop_column("doi")
