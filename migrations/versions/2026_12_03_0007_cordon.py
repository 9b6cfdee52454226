"""hosts.cordoned: a cordoned host takes no new placements and no incoming moves (vnuma host cordon)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 14:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_OLD_FLEET = ("name", "topology_digest", "reserved_cpuset", "uri", "source")


def upgrade() -> None:
    op.add_column("hosts", sa.Column("cordoned", sa.Boolean(), nullable=False, server_default=sa.false()))
    # The fleet read selects the new column too: the covering index covers it.
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", [*_OLD_FLEET, "cordoned"])


def downgrade() -> None:
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", list(_OLD_FLEET))
    # A plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy of hosts would break the VMs' foreign keys.
    op.drop_column("hosts", "cordoned")
