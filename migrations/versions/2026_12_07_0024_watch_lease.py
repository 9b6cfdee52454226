"""watch_lease: the one row that says which `vnuma watch` writes the inventory's rounds (a holder's token,
its machine and process, until when), so that a second watch on the same inventory is refused

Revision ID: 0024
Revises: 0022
Create Date: 2026-12-07 06:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    lease = op.create_table(
        "watch_lease",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("machine", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("expires_ms", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_watch_lease_one")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_lease")),
    )
    op.bulk_insert(lease, [{"id": 1, "token": "", "machine": "", "pid": 0, "expires_ms": 0}])  # free: expired long ago


def downgrade() -> None:
    op.drop_table("watch_lease")
