"""audit_log: every change to the inventory, written in the transaction that makes it (vnuma log)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 19:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("invocation", sa.String(length=32), nullable=False),
        sa.Column("at", sa.String(length=40), nullable=False),
        sa.Column("username", sa.String(length=255), nullable=False),
        sa.Column("machine", sa.String(length=255), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("changes", sa.Text(), nullable=False),
        sa.Column("vms", sa.Text(), nullable=False),
        sa.Column("hosts", sa.Text(), nullable=False),
        sa.Column("tenants", sa.Text(), nullable=False),
        sa.CheckConstraint("outcome IN ('ok', 'refused', 'failed')", name=op.f("ck_audit_log_outcome")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_invocation", "audit_log", ["invocation"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_index("ix_audit_log_invocation", table_name="audit_log")
    op.drop_table("audit_log")
