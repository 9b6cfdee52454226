"""api_tokens: bearer tokens of the HTTP API (vnuma token create/list/revoke, vnuma serve)

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 05:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("tenant", sa.String(length=255), nullable=True),
        sa.Column("secret_hash", sa.Text(), nullable=False),
        sa.Column("created_at", sa.String(length=40), nullable=False),
        sa.Column("expires_at", sa.String(length=40), nullable=True),
        sa.Column("revoked_at", sa.String(length=40), nullable=True),
        sa.CheckConstraint(
            "role IN ('admin', 'operator', 'reader', 'tenant')", name=op.f("ck_api_tokens_role")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("key", name=op.f("uq_api_tokens_key")),
        sa.UniqueConstraint("name", name=op.f("uq_api_tokens_name")),
    )


def downgrade() -> None:
    op.drop_table("api_tokens")
