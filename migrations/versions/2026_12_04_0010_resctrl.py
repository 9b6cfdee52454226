"""resctrl: hosts.resctrl_policy (the cache ways a host keeps for itself, its bandwidth-cap limit) and
resctrl_claims (each VM's cache ways and bandwidth cap per L3 domain)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 11:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_FLEET = ("name", "topology_digest", "reserved_cpuset", "uri", "source", "cordoned")


def upgrade() -> None:
    op.add_column("hosts", sa.Column("resctrl_policy", sa.Text(), nullable=False, server_default=""))
    # The fleet read selects the new column too: the covering index covers it.
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", [*_OLD_FLEET, "resctrl_policy"])
    op.create_table(
        "resctrl_claims",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("vm_id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("domain_id", sa.Integer(), nullable=False),
        sa.Column("ways", sa.Integer(), nullable=False),
        sa.Column("mem_bw", sa.Integer(), nullable=True),
        sa.CheckConstraint("ways >= 0", name=op.f("ck_resctrl_claims_ways_not_negative")),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_resctrl_claims_host_id_hosts"),
                                ondelete="RESTRICT"),
        sa.ForeignKeyConstraint(["vm_id"], ["vms.id"], name=op.f("fk_resctrl_claims_vm_id_vms"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_resctrl_claims")),
        sa.UniqueConstraint("vm_id", "domain_id", name=op.f("uq_resctrl_claims_vm_id_domain_id")),
    )
    op.create_index("ix_resctrl_claims_host_domain", "resctrl_claims", ["host_id", "domain_id"])


def downgrade() -> None:
    op.drop_index("ix_resctrl_claims_host_domain", table_name="resctrl_claims")
    op.drop_table("resctrl_claims")
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", list(_OLD_FLEET))
    op.drop_column("hosts", "resctrl_policy")
