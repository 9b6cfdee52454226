"""hosts.embedded_domains: what libvirt's test driver (the embedded hypervisor) holds, kept between connections;
the demo host's URI no longer embeds the checkout's path

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 12:30:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEMO_URI = "test:///vnuma-demo"  # vnuma.sources.demo.DEMO_URI (a migration keeps its own copy)


def upgrade() -> None:
    # NULL: nothing kept yet (the driver's own start state); a JSON list once a command saw the domains.
    op.add_column("hosts", sa.Column("embedded_domains", sa.Text(), nullable=True))
    # Hosts added with --demo stored test:///<checkout>/vnuma/data/demo-node.xml: resolved at connection time now.
    op.execute(sa.text("UPDATE hosts SET uri = :uri WHERE topology_override = 'demo'").bindparams(uri=DEMO_URI))


def downgrade() -> None:
    # The demo hosts keep test:///vnuma-demo: the checkout's path is not known here (`vnuma host refresh`
    # of an older vnuma does not need it: it reads the demo topology from its own package).
    op.drop_column("hosts", "embedded_domains")
