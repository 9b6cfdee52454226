"""replica_groups and vms.group_name: a claim finds its group's VMs on every host, under a lock of the group
(vnuma place --group G --affinity host)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 10:00:00
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _group_of(document: str) -> str | None:
    """The placement document's ``group.name`` (None: no group, or a document that does not say)."""
    try:
        group = json.loads(document).get("group")
    except (ValueError, AttributeError):
        return None
    name = group.get("name") if isinstance(group, dict) else None
    return name if isinstance(name, str) else None


def upgrade() -> None:
    op.create_table(
        "replica_groups",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_replica_groups")),
    )
    # A plain ALTER TABLE ... ADD COLUMN: a batch copy of vms would cascade to its claims.
    op.add_column("vms", sa.Column("group_name", sa.String(length=255), nullable=True))
    op.create_index(op.f("ix_vms_group_name"), "vms", ["group_name"])
    conn = op.get_bind()
    grouped = [
        {"id": vm_id, "group": group}
        for vm_id, document in conn.execute(sa.text("SELECT id, placement FROM vms"))
        if (group := _group_of(str(document))) is not None
    ]
    if grouped:
        conn.execute(sa.text("UPDATE vms SET group_name = :group WHERE id = :id"), grouped)
        names = sorted({g["group"] for g in grouped})
        conn.execute(sa.text("INSERT INTO replica_groups (name) VALUES (:name)"), [{"name": n} for n in names])


def downgrade() -> None:
    op.drop_index(op.f("ix_vms_group_name"), table_name="vms")
    # A plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy of vms would cascade to its claims.
    op.drop_column("vms", "group_name")
    op.drop_table("replica_groups")
