"""gpu_profiles: MIG geometries by GPU model (vnuma gpu-profile import/list/show/remove)

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 15:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "gpu_profiles",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=255), nullable=False),
        sa.Column("pci_ids", sa.Text(), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.Column("imported_at", sa.String(length=40), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_gpu_profiles")),
        sa.UniqueConstraint("model", name=op.f("uq_gpu_profiles_model")),
    )


def downgrade() -> None:
    op.drop_table("gpu_profiles")
