"""ix_hosts_summary: a covering index for `host list` (the summary columns in name order), so listing a fleet
reads no row with its topology document (on SQLite the columns after the document sit past its overflow pages)

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07 13:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SUMMARY = ["name", "uri", "source", "n_cells", "n_cpus", "n_gpus", "memory_kib", "cordoned"]


def upgrade() -> None:
    op.create_index("ix_hosts_summary", "hosts", SUMMARY)


def downgrade() -> None:
    op.drop_index("ix_hosts_summary", table_name="hosts")
