"""tenants.resctrl: the cache slice and bandwidth cap a tenant's VMs get unless they ask their own

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 11:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("tenants", sa.Column("resctrl", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    op.drop_column("tenants", "resctrl")
