"""rebalance journal: runs and their steps; how each VM was rendered

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 14:10:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str) -> sa.Column[datetime]:
    return sa.Column(
        name, sa.DateTime(timezone=True), server_default=sa.func.current_timestamp(), nullable=False
    )


def upgrade() -> None:
    # Plain ALTER TABLE on both databases: a batch (copy-and-rename) rebuild of
    # vms on SQLite would cascade-delete every claim.
    op.add_column("vms", sa.Column("rendering", sa.Text(), nullable=True))
    op.create_table(
        "rebalance_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("unfinished", sa.Boolean(), nullable=True),
        sa.Column("objective", sa.String(length=32), nullable=False),
        sa.Column("options", sa.Text(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.CheckConstraint(
            "status IN ('running', 'failed', 'done', 'aborted')", name=op.f("ck_rebalance_runs_status")
        ),
        sa.CheckConstraint("unfinished", name=op.f("ck_rebalance_runs_unfinished_true_or_null")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rebalance_runs")),
        sa.UniqueConstraint("unfinished", name=op.f("uq_rebalance_runs_unfinished")),
    )
    op.create_table(
        "rebalance_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("vm", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("before", sa.Text(), nullable=False),
        sa.Column("after", sa.Text(), nullable=False),
        sa.Column("before_state", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'started', 'done', 'undoing', 'undone')",
            name=op.f("ck_rebalance_steps_status"),
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["rebalance_runs.id"], name=op.f("fk_rebalance_steps_run_id_rebalance_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rebalance_steps")),
        sa.UniqueConstraint("run_id", "seq", name=op.f("uq_rebalance_steps_run_id_seq")),
    )


def downgrade() -> None:
    op.drop_table("rebalance_steps")
    op.drop_table("rebalance_runs")
    op.drop_column("vms", "rendering")  # SQLite >= 3.35 drops a column in place
