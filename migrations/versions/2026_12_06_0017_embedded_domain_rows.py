"""embedded_domains: the embedded hypervisor's kept domains as one row per (host, domain) instead of one JSON
document per host, so commands changing different domains of one test:// host at once never overwrite each
other; hosts.embedded_kept says whether a host's domains are kept at all (before: the node file's own)

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 12:00:00

Upgrade moves each host's document into rows. A document vnuma could not read (hand-edited: vnuma itself
refused to open such a host, "kept domains are unreadable") becomes "nothing kept": the next connection
holds the node file's own domains again, and ``vnuma reconcile`` shows what that lost. Downgrade writes the
rows back as one document per host (sorted by domain name), ``[]`` for a host kept with none.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _domains(document: str) -> list[dict[str, Any]] | None:
    """The document's domains (``name``, ``xml``, ``running``), None when it is not such a list."""
    try:
        kept = json.loads(document)
    except ValueError:
        return None
    if not isinstance(kept, list) or not all(
        isinstance(d, dict) and isinstance(d.get("name"), str) and isinstance(d.get("xml"), str)
        and isinstance(d.get("running"), bool) for d in kept
    ):
        return None
    return kept


def upgrade() -> None:
    op.create_table(
        "embedded_domains",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("xml", sa.Text(), nullable=False),
        sa.Column("running", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["host_id"], ["hosts.id"], name=op.f("fk_embedded_domains_host_id_hosts"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embedded_domains")),
        sa.UniqueConstraint("host_id", "name", name=op.f("uq_embedded_domains_host_id_name")),
    )
    # Plain ALTER TABLE ... ADD/DROP COLUMN (SQLite 3.35+): a batch copy of hosts would break the VMs' foreign keys.
    op.add_column("hosts", sa.Column("embedded_kept", sa.Boolean(), nullable=False, server_default=sa.false()))
    conn = op.get_bind()
    rows, kept = [], []
    for host_id, document in conn.execute(sa.text("SELECT id, embedded_domains FROM hosts")):
        domains = None if document is None else _domains(str(document))
        if domains is None:
            continue
        kept.append({"id": host_id, "kept": True})
        # A name twice (never written so): the later entry is what the connection held last.
        by_name = {d["name"]: d for d in domains}
        rows += [{"host": host_id, "name": n, "xml": d["xml"], "running": d["running"]} for n, d in by_name.items()]
    if kept:
        conn.execute(sa.text("UPDATE hosts SET embedded_kept = :kept WHERE id = :id"), kept)
    if rows:
        conn.execute(
            sa.text("INSERT INTO embedded_domains (host_id, name, xml, running) VALUES (:host, :name, :xml, :running)"),
            rows,
        )
    op.drop_column("hosts", "embedded_domains")


def downgrade() -> None:
    op.add_column("hosts", sa.Column("embedded_domains", sa.Text(), nullable=True))
    conn = op.get_bind()
    documents: dict[int, list[dict[str, Any]]] = {
        int(host_id): [] for (host_id,) in conn.execute(sa.text("SELECT id FROM hosts WHERE embedded_kept"))
    }
    for host_id, name, xml, running in conn.execute(
        sa.text("SELECT host_id, name, xml, running FROM embedded_domains ORDER BY host_id, name")
    ):
        documents.setdefault(int(host_id), []).append({"name": name, "xml": xml, "running": bool(running)})
    if documents:
        conn.execute(
            sa.text("UPDATE hosts SET embedded_domains = :document WHERE id = :id"),
            [{"id": h, "document": json.dumps(d, sort_keys=True)} for h, d in documents.items()],
        )
    op.drop_column("hosts", "embedded_kept")
    op.drop_table("embedded_domains")
