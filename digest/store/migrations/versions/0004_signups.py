"""Web signups with double opt-in: pending signups, the record of consent, rate limits shared by web processes.

- `signups`: a signup waiting for its confirmation link (or held: a profile file or an import has the address).
- `consents`: each confirmed signup: when it was asked for and confirmed, the form's wording version, keyed
  hashes of the two IP addresses.
- `rate_limits`: hits per key and window, so that every `digest serve` process on the store counts together.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "signups",
        sa.Column("email_key", sa.String, primary_key=True),
        sa.Column("email", sa.String, nullable=False),
        sa.Column("status", sa.String, nullable=False),
        sa.Column("nonce", sa.String, nullable=False),
        sa.Column("profile", sa.Text, nullable=False),
        sa.Column("requested_at", sa.DateTime, nullable=False),
        sa.Column("form_version", sa.String, nullable=False),
        sa.Column("ip_hash", sa.String, nullable=False),
        sa.Column("detail", sa.String, nullable=False),
    )
    op.create_index("ix_signups_requested_at", "signups", ["requested_at"])
    op.create_table(
        "consents",
        sa.Column("nonce", sa.String, primary_key=True),
        sa.Column("email_key", sa.String, nullable=False),
        sa.Column("requested_at", sa.DateTime, nullable=False),
        sa.Column("confirmed_at", sa.DateTime, nullable=False),
        sa.Column("form_version", sa.String, nullable=False),
        sa.Column("ip_hash", sa.String, nullable=False),
        sa.Column("confirm_ip_hash", sa.String, nullable=False),
    )
    op.create_index("ix_consents_email_key", "consents", ["email_key"])
    op.create_table(
        "rate_limits",
        sa.Column("key", sa.String, primary_key=True),
        sa.Column("window_start", sa.BigInteger, primary_key=True),
        sa.Column("hits", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rate_limits")
    op.drop_index("ix_consents_email_key", table_name="consents")
    op.drop_table("consents")
    op.drop_index("ix_signups_requested_at", table_name="signups")
    op.drop_table("signups")
