"""initial: hosts, tenants, VMs and their CPU, page and device claims

Revision ID: 0001
Revises:
Create Date: 2026-12-02 10:47:41
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str) -> sa.Column[datetime]:
    return sa.Column(
        name, sa.DateTime(timezone=True), server_default=sa.func.current_timestamp(), nullable=False
    )


def _fk(table: str, column: str, target: str, ondelete: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def upgrade() -> None:
    _create_hosts()
    _create_tenants()
    _create_vms()
    _create_cpu_claims()
    _create_device_claims()
    _create_page_claims()


def _create_hosts() -> None:
    op.create_table(
        "hosts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("uri", sa.Text(), nullable=True),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("topology", sa.Text(), nullable=False),
        sa.Column("reserved_cpuset", sa.Text(), server_default="", nullable=False),
        sa.Column("n_cells", sa.Integer(), nullable=False),
        sa.Column("n_cpus", sa.Integer(), nullable=False),
        sa.Column("n_gpus", sa.Integer(), nullable=False),
        sa.Column("memory_kib", sa.BigInteger(), nullable=False),
        sa.Column("host_generation", sa.Integer(), server_default="0", nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosts")),
        sa.UniqueConstraint("name", name=op.f("uq_hosts_name")),
    )


def _create_tenants() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("isolation", sa.String(length=16), nullable=False),
        sa.Column("max_vcpus", sa.Integer(), nullable=True),
        sa.Column("max_gpus", sa.Integer(), nullable=True),
        sa.CheckConstraint("isolation IN ('core', 'cell', 'none')", name=op.f("ck_tenants_isolation")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("name", name=op.f("uq_tenants_name")),
    )


def _create_vms() -> None:
    op.create_table(
        "vms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), server_default="placed", nullable=False),
        sa.Column("vcpus", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("placement", sa.Text(), nullable=False),
        _timestamp("created_at"),
        sa.CheckConstraint("state IN ('placed', 'defined', 'running', 'stopped')", name=op.f("ck_vms_state")),
        _fk("vms", "host_id", "hosts", "RESTRICT"),
        _fk("vms", "tenant_id", "tenants", "RESTRICT"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_vms")),
        sa.UniqueConstraint("name", name=op.f("uq_vms_name")),
    )
    op.create_index(op.f("ix_vms_host_id"), "vms", ["host_id"], unique=False)
    op.create_index(op.f("ix_vms_tenant_id"), "vms", ["tenant_id"], unique=False)


def _create_cpu_claims() -> None:
    op.create_table(
        "cpu_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("cpu_id", sa.Integer(), nullable=False),
        sa.Column("exclusive", sa.Boolean(), nullable=False),
        _fk("cpu_claims", "host_id", "hosts", "RESTRICT"),
        _fk("cpu_claims", "vm_id", "vms", "CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cpu_claims")),
        sa.UniqueConstraint("vm_id", "cpu_id", name=op.f("uq_cpu_claims_vm_id_cpu_id")),
    )
    # Two exclusive claims of one pCPU are impossible; shared (floating) claims may overlap.
    op.create_index(
        "uq_cpu_claims_exclusive_host_id_cpu_id",
        "cpu_claims",
        ["host_id", "cpu_id"],
        unique=True,
        sqlite_where=sa.text("exclusive"),
        postgresql_where=sa.text("exclusive"),
    )


def _create_device_claims() -> None:
    op.create_table(
        "device_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("address", sa.String(length=32), nullable=False),
        _fk("device_claims", "host_id", "hosts", "RESTRICT"),
        _fk("device_claims", "vm_id", "vms", "CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_device_claims")),
        sa.UniqueConstraint("host_id", "address", name=op.f("uq_device_claims_host_id_address")),
    )
    op.create_index(op.f("ix_device_claims_vm_id"), "device_claims", ["vm_id"], unique=False)


def _create_page_claims() -> None:
    op.create_table(
        "page_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("cell_id", sa.Integer(), nullable=False),
        sa.Column("page_size_kib", sa.Integer(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("count > 0", name=op.f("ck_page_claims_count_positive")),
        _fk("page_claims", "host_id", "hosts", "RESTRICT"),
        _fk("page_claims", "vm_id", "vms", "CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_page_claims")),
        sa.UniqueConstraint(
            "vm_id", "cell_id", "page_size_kib", name=op.f("uq_page_claims_vm_id_cell_id_page_size_kib")
        ),
    )
    op.create_index(
        "ix_page_claims_host_cell_size", "page_claims", ["host_id", "cell_id", "page_size_kib"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_page_claims_host_cell_size", table_name="page_claims")
    op.drop_table("page_claims")
    op.drop_index(op.f("ix_device_claims_vm_id"), table_name="device_claims")
    op.drop_table("device_claims")
    op.drop_index("uq_cpu_claims_exclusive_host_id_cpu_id", table_name="cpu_claims")
    op.drop_table("cpu_claims")
    op.drop_index(op.f("ix_vms_tenant_id"), table_name="vms")
    op.drop_index(op.f("ix_vms_host_id"), table_name="vms")
    op.drop_table("vms")
    op.drop_table("tenants")
    op.drop_table("hosts")
