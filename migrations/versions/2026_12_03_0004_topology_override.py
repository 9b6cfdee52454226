"""hosts.topology_override: where `host refresh` reads a host's topology instead of libvirt's capabilities

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 08:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE on both databases (no batch rebuild of hosts, which claims reference).
    # Existing rows stay NULL: libvirt's own capabilities, as refresh read them until now.
    op.add_column("hosts", sa.Column("topology_override", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("hosts", "topology_override")  # SQLite >= 3.35 drops a column in place
