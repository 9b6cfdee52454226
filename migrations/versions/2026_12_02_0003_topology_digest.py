"""hosts.topology_digest: SHA-256 of the topology text, so a fleet load reads each shape once

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 16:00:00
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE on both databases (no batch rebuild of hosts, which claims reference).
    # The empty default only fills rows written behind vnuma's back; readers decode those one by one.
    op.add_column("hosts", sa.Column("topology_digest", sa.String(length=64), nullable=False, server_default=""))
    conn = op.get_bind()
    hosts = sa.table("hosts", sa.column("id", sa.Integer()), sa.column("topology", sa.Text()),
                     sa.column("topology_digest", sa.String()))
    digests: dict[str, str] = {}
    for host_id, topology in conn.execute(sa.select(hosts.c.id, hosts.c.topology)).all():
        digest = digests.get(topology) or digests.setdefault(topology, hashlib.sha256(topology.encode()).hexdigest())
        conn.execute(sa.update(hosts).where(hosts.c.id == host_id).values(topology_digest=digest))
    op.create_index(op.f("ix_hosts_topology_digest"), "hosts", ["topology_digest"])


def downgrade() -> None:
    op.drop_index(op.f("ix_hosts_topology_digest"), table_name="hosts")
    op.drop_column("hosts", "topology_digest")  # SQLite >= 3.35 drops a column in place
