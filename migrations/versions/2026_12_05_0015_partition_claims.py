"""partition_claims: each VM's GPU partitions (vGPU instances, MIG instances), a VF, a MIG start and a
mediated device's UUID claimed once (vnuma place --vgpu / --mig)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-05 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # No VM placed before this revision holds partitions (vnuma place could not ask for them): nothing to fill.
    op.create_table(
        "partition_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=8), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("vf", sa.String(length=32), nullable=True),
        sa.Column("start", sa.Integer(), nullable=True),
        sa.Column("uuid", sa.String(length=36), nullable=False),
        sa.CheckConstraint("kind IN ('vgpu', 'mig')", name=op.f("ck_partition_claims_kind")),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_partition_claims_host_id_hosts"),
                                ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["vm_id"], ["vms.id"], name=op.f("fk_partition_claims_vm_id_vms"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_partition_claims")),
        sa.UniqueConstraint("host_id", "vf", name=op.f("uq_partition_claims_host_id_vf")),
        sa.UniqueConstraint("host_id", "gpu", "start", name=op.f("uq_partition_claims_host_id_gpu_start")),
        sa.UniqueConstraint("uuid", name=op.f("uq_partition_claims_uuid")),
    )
    op.create_index(op.f("ix_partition_claims_vm_id"), "partition_claims", ["vm_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_partition_claims_vm_id"), table_name="partition_claims")
    op.drop_table("partition_claims")
