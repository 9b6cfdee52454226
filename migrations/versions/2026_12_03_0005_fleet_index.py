"""ix_hosts_fleet: a covering index for the fleet read of every placement

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03 09:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A placement reads every host's name, digest, reservation, URI and source: from this index
    # alone, without the rows' topology texts (~9 KB each), which a fleet read takes once per digest.
    op.create_index("ix_hosts_fleet", "hosts", ["name", "topology_digest", "reserved_cpuset", "uri", "source"])


def downgrade() -> None:
    op.drop_index("ix_hosts_fleet", table_name="hosts")
