"""watch_proposals: what vnuma watch proposed or withheld for each event, and why; tenants.auto_move (a
tenant's opt-out of automatic moves)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 18:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "watch_proposals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.Integer(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("vm", sa.String(length=255), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("to_host", sa.String(length=255), nullable=True),
        sa.Column("objective", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("move", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_proposals")),
    )
    op.create_index(op.f("ix_watch_proposals_event_id"), "watch_proposals", ["event_id"])
    op.create_index(op.f("ix_watch_proposals_at_ms"), "watch_proposals", ["at_ms"])
    op.add_column("tenants", sa.Column("auto_move", sa.Boolean(), nullable=False, server_default=sa.true()))


def downgrade() -> None:
    op.drop_column("tenants", "auto_move")
    op.drop_index(op.f("ix_watch_proposals_at_ms"), table_name="watch_proposals")
    op.drop_index(op.f("ix_watch_proposals_event_id"), table_name="watch_proposals")
    op.drop_table("watch_proposals")
