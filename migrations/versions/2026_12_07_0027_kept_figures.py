"""hosts.fig_*: what the engine's scorers read of a host (used and total threads, memory and GPUs, thread width),
kept by each claim on its host's row and cleared by every other change, so a placement ranks claimed hosts
without decoding their placements (vnuma.inventory.figures)

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-07 18:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("threads_used", "threads_total", "mem_used", "mem_total", "gpus_free", "gpus_total", "width")


KEPT = "fig_threads_used IS NOT NULL"


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("hosts", sa.Column(f"fig_{name}", sa.BigInteger(), nullable=True))
    # The claimed hosts' figures read from the index alone (vnuma.inventory.figures.KEPT).
    op.create_index(
        "ix_hosts_figures", "hosts", ["name", *(f"fig_{name}" for name in COLUMNS)],
        sqlite_where=sa.text(KEPT), postgresql_where=sa.text(KEPT),
    )


def downgrade() -> None:
    op.drop_index("ix_hosts_figures", table_name="hosts")
    for name in reversed(COLUMNS):
        op.drop_column("hosts", f"fig_{name}")  # SQLite >= 3.35 drops a column in place
