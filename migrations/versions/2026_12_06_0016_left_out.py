"""hosts.left_out: the parts of a host its import left out and why (vnuma host show prints them)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 12:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Hosts recorded before this revision carry no list: '' (none known).
    op.add_column("hosts", sa.Column("left_out", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy of hosts would break the VMs' foreign keys.
    op.drop_column("hosts", "left_out")
