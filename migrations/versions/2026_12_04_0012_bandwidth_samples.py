"""bandwidth_samples: each VM's last memory-bandwidth sample (vnuma stats --bandwidth), read by
vnuma rebalance --objective bandwidth

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 13:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bandwidth_samples",
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("taken_at", sa.String(length=40), nullable=False),
        sa.Column("interval_ms", sa.Integer(), nullable=False),
        sa.Column("domains", sa.Text(), nullable=False),
        sa.Column("llc", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_bandwidth_samples_host_id_hosts"),
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["vm_id"], ["vms.id"], name=op.f("fk_bandwidth_samples_vm_id_vms"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("vm_id", name=op.f("pk_bandwidth_samples")),
    )
    op.create_index(op.f("ix_bandwidth_samples_host_id"), "bandwidth_samples", ["host_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_bandwidth_samples_host_id"), table_name="bandwidth_samples")
    op.drop_table("bandwidth_samples")
