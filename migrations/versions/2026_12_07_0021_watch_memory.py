"""watch_samples.rss_kib and balloon_kib: a VM's resident memory on the host and its balloon's size (KiB,
libvirt's balloon.rss and balloon.current; NULL when not reported, as in every sample taken before)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07 04:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("watch_samples", sa.Column("rss_kib", sa.BigInteger(), nullable=True))
    op.add_column("watch_samples", sa.Column("balloon_kib", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("watch_samples", "balloon_kib")  # SQLite >= 3.35 drops a column in place
    op.drop_column("watch_samples", "rss_kib")
