"""catalog_changes: fleet_marks counts every change to the tenants and the kept MIG geometries (triggers on both
tables), so a warm ledger reads them again only when the count moved (vnuma.inventory.changes)

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-08 01:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("tenants", "gpu_profiles")
COUNT = "UPDATE fleet_marks SET catalog_changes = catalog_changes + 1 WHERE id = 1"


def upgrade() -> None:
    op.add_column("fleet_marks", sa.Column("catalog_changes", sa.BigInteger(), server_default="0", nullable=False))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            "CREATE FUNCTION vnuma_catalog_changed() RETURNS trigger LANGUAGE plpgsql AS "
            f"$$ BEGIN {COUNT}; RETURN NULL; END $$"
        )
        for table in TABLES:
            op.execute(
                f"CREATE TRIGGER {table}_catalog_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION vnuma_catalog_changed()"
            )
        return
    for table in TABLES:  # SQLite: a trigger per event, for each row
        for event in ("INSERT", "UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER {table}_catalog_{event.lower()} AFTER {event} ON {table} BEGIN {COUNT}; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table in TABLES:
            op.execute(f"DROP TRIGGER {table}_catalog_changed ON {table}")
        op.execute("DROP FUNCTION vnuma_catalog_changed()")
    else:
        for table in TABLES:
            for event in ("insert", "update", "delete"):
                op.execute(f"DROP TRIGGER {table}_catalog_{event}")
    op.drop_column("fleet_marks", "catalog_changes")  # SQLite >= 3.35 drops a column in place
