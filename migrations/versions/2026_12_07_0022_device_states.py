"""hosts.device_states: a host's tainted and cleaning devices and what a device its VM releases becomes
(JSON, "" for none: every existing host's devices stay free or claimed as their claims say); the fleet
read's covering index ix_hosts_fleet takes the column too

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07 05:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FLEET = ["name", "topology_digest", "reserved_cpuset", "uri", "source", "cordoned", "resctrl_policy"]


def upgrade() -> None:
    op.add_column("hosts", sa.Column("device_states", sa.Text(), server_default="", nullable=False))
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", [*_FLEET, "device_states"])


def downgrade() -> None:
    op.drop_index("ix_hosts_fleet", table_name="hosts")
    op.create_index("ix_hosts_fleet", "hosts", _FLEET)
    op.drop_column("hosts", "device_states")  # SQLite >= 3.35 drops a column in place
