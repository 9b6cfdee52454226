"""watch_history: vnuma watch's samples (raw for a window, then one-minute means), its events, and each
host's last reading

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "watch_samples",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("minute", sa.Boolean(), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("item", sa.Integer(), nullable=False),
        sa.Column("local_bps", sa.BigInteger(), nullable=True),
        sa.Column("total_bps", sa.BigInteger(), nullable=True),
        sa.Column("llc_bytes", sa.BigInteger(), nullable=True),
        sa.Column("cpu", sa.Float(), nullable=True),
        sa.Column("free_kib", sa.BigInteger(), nullable=True),
        sa.Column("drift_kib", sa.BigInteger(), nullable=True),
        sa.Column("flags", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_samples")),
    )
    op.create_index("ix_watch_samples_subject", "watch_samples", ["kind", "host", "subject", "item", "at_ms"])
    op.create_index("ix_watch_samples_minute_at", "watch_samples", ["minute", "at_ms"])
    op.create_table(
        "watch_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rule", sa.String(length=16), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("vm", sa.String(length=255), nullable=True),
        sa.Column("cell", sa.Integer(), nullable=True),
        sa.Column("opened_ms", sa.BigInteger(), nullable=False),
        sa.Column("closed_ms", sa.BigInteger(), nullable=True),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watch_events")),
    )
    op.create_index(op.f("ix_watch_events_vm"), "watch_events", ["vm"])
    op.create_index(op.f("ix_watch_events_opened_ms"), "watch_events", ["opened_ms"])
    op.create_table(
        "watch_readings",
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("at_ms", sa.BigInteger(), nullable=False),
        sa.Column("domains", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("host", name=op.f("pk_watch_readings")),
    )


def downgrade() -> None:
    op.drop_table("watch_readings")
    op.drop_index(op.f("ix_watch_events_opened_ms"), table_name="watch_events")
    op.drop_index(op.f("ix_watch_events_vm"), table_name="watch_events")
    op.drop_table("watch_events")
    op.drop_index("ix_watch_samples_minute_at", table_name="watch_samples")
    op.drop_index("ix_watch_samples_subject", table_name="watch_samples")
    op.drop_table("watch_samples")
