"""change_marks: each host's change mark (the writing transaction's id on PostgreSQL, a counter on SQLite) and
the count of removed hosts, so a warm ledger reads only the hosts changed since its last read

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-07 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("hosts", sa.Column("change_mark", sa.BigInteger(), server_default="0", nullable=False))
    op.create_index(op.f("ix_hosts_change_mark"), "hosts", ["change_mark"])
    marks = op.create_table(
        "fleet_marks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("hosts_removed", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_fleet_marks_one")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fleet_marks")),
    )
    op.bulk_insert(marks, [{"id": 1, "hosts_removed": 0}])


def downgrade() -> None:
    op.drop_table("fleet_marks")
    op.drop_index(op.f("ix_hosts_change_mark"), table_name="hosts")
    op.drop_column("hosts", "change_mark")  # SQLite >= 3.35 drops a column in place
