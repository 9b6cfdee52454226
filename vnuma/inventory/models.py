"""ORM tables of the inventory (SQLAlchemy 2 typed mappings).

Objects of these classes never leave ``vnuma.inventory``: the repository
converts them to the frozen dataclasses of ``topology`` and
``placement.model``. A change here ships with an Alembic revision in
``migrations/versions`` (the drift test compares the two).

A host's topology is one compact JSON document (``codec.host_to_dict``
without the keys that have their own columns: name, uri, source,
reserved CPUs; see ``topologies.py``), not a row per CPU, so loading a fleet
is one query; the summary columns answer ``host list`` without parsing it.
``topology_digest`` (SHA-256 of that text) lets a fleet load read each
distinct document once instead of once per host (hosts of one hardware
model share it); an empty digest (a row written behind vnuma's back) means
"read this row's text".
``topology_override`` says where ``host refresh`` reads the topology
instead of the host's libvirt capabilities: NULL for libvirt's own, the
marker ``demo`` for the shipped demo host (found in the package at refresh
time, so an inventory survives moving the checkout), else the absolute path
of a capabilities file. The inventory stores it; ``services.hosts`` reads it.
``left_out`` lists the parts of the host the import or refresh that wrote
the topology left out (:mod:`vnuma.topology.leftout`), for ``host show``.
``embedded_kept``: whether vnuma keeps a ``test://`` host's domains between
connections (one ``embedded_domains`` row each; False until a command first
changed one: the node file's own stand until then).
The claims' tables are in :mod:`.claimtables`, the watch's in :mod:`.watchtables` (all of them: :mod:`.tables`).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    func,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from vnuma.inventory.schema import RunStatus, StepStatus, VmState
from vnuma.placement.model import Isolation

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Changing any of these tuples changes a CHECK constraint: it needs a migration.
VM_STATES = tuple(s.value for s in VmState)
ISOLATIONS = tuple(i.value for i in Isolation)
RUN_STATUSES = tuple(s.value for s in RunStatus)
STEP_STATUSES = tuple(s.value for s in StepStatus)


class Base(DeclarativeBase):
    """Declarative base carrying the constraint naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class HostRow(Base):
    """One hypervisor host: its topology document plus cheap summary columns."""

    __tablename__ = "hosts"
    # The fleet read of every placement (vnuma.inventory.reading.FLEET_HOSTS) from the index alone.
    __table_args__ = (
        Index(
            "ix_hosts_fleet", "name", "topology_digest", "reserved_cpuset", "uri", "source", "cordoned",
            "resctrl_policy", "device_states",
        ),
        # `host list` (vnuma.inventory.reading.HOST_SUMMARIES) from the index alone.
        Index("ix_hosts_summary", "name", "uri", "source", "n_cells", "n_cpus", "n_gpus", "memory_kib", "cordoned"),
        # The claimed hosts' kept figures (vnuma.inventory.figures.KEPT) from the index alone.
        Index(
            "ix_hosts_figures", "name", "fig_threads_used", "fig_threads_total", "fig_mem_used", "fig_mem_total",
            "fig_gpus_free", "fig_gpus_total", "fig_width",
            sqlite_where=text("fig_threads_used IS NOT NULL"), postgresql_where=text("fig_threads_used IS NOT NULL"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    uri: Mapped[str | None] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(32))
    topology: Mapped[str] = mapped_column(Text)
    topology_digest: Mapped[str] = mapped_column(String(64), index=True, server_default="")
    reserved_cpuset: Mapped[str] = mapped_column(Text, default="", server_default="")
    topology_override: Mapped[str | None] = mapped_column(Text)
    embedded_kept: Mapped[bool] = mapped_column(default=False, server_default=false())
    # A cordoned host takes no new placements and no incoming moves; its VMs stay until moved.
    cordoned: Mapped[bool] = mapped_column(default=False, server_default=false())
    # The cache ways the host keeps for itself and its bandwidth-cap limit (topology.resctrl.format_policy).
    resctrl_policy: Mapped[str] = mapped_column(Text, default="", server_default="")
    # Its tainted and cleaning devices and what a released device becomes (codec.device_states_to_dict as
    # JSON; "": every device free or claimed as its claims say, released devices free at once).
    device_states: Mapped[str] = mapped_column(Text, default="", server_default="")
    # What the import that wrote the topology left out of the host (codec.left_out_to_list as JSON; "": none).
    left_out: Mapped[str] = mapped_column(Text, default="", server_default="")
    n_cells: Mapped[int]
    n_cpus: Mapped[int]
    n_gpus: Mapped[int]
    memory_kib: Mapped[int] = mapped_column(BigInteger)
    host_generation: Mapped[int] = mapped_column(default=0, server_default="0")
    # Set with host_generation by every change (vnuma.inventory.changes): who changed since a reader's watermark.
    change_mark: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0", index=True)
    # What the scorers read of the host, as its last claim left it (vnuma.inventory.figures; NULL: not kept).
    fig_threads_used: Mapped[int | None] = mapped_column(BigInteger)
    fig_threads_total: Mapped[int | None] = mapped_column(BigInteger)
    fig_mem_used: Mapped[int | None] = mapped_column(BigInteger)
    fig_mem_total: Mapped[int | None] = mapped_column(BigInteger)
    fig_gpus_free: Mapped[int | None] = mapped_column(BigInteger)
    fig_gpus_total: Mapped[int | None] = mapped_column(BigInteger)
    fig_width: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.current_timestamp()
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.current_timestamp(), onupdate=func.current_timestamp()
    )


class EmbeddedDomain(Base):
    """A domain of the embedded hypervisor (a ``test://`` host) kept between connections: its inactive XML and
    whether it runs; each row written alone (:mod:`.embedded`), so racing commands never overwrite each other."""

    __tablename__ = "embedded_domains"
    __table_args__ = (UniqueConstraint("host_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(255))
    xml: Mapped[str] = mapped_column(Text)
    running: Mapped[bool]


class TenantRow(Base):
    """An owner of VMs with its isolation level and optional quotas."""

    __tablename__ = "tenants"
    __table_args__ = (CheckConstraint(_in("isolation", ISOLATIONS), name="isolation"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    isolation: Mapped[str] = mapped_column(String(16))
    max_vcpus: Mapped[int | None]
    max_gpus: Mapped[int | None]
    # The cache slice and bandwidth cap its VMs get unless they ask their own (placement.resctrl.format_asks).
    resctrl: Mapped[str] = mapped_column(Text, default="", server_default="")
    # False: `vnuma watch` never moves its VMs (tenant update T --no-auto-move).
    auto_move: Mapped[bool] = mapped_column(default=True, server_default=true())


class VmRow(Base):
    """A placed VM: its placement document, state, and totals for quota sums."""

    __tablename__ = "vms"
    __table_args__ = (CheckConstraint(_in("state", VM_STATES), name="state"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id", ondelete="RESTRICT"), index=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"), index=True)
    state: Mapped[str] = mapped_column(String(16), default="placed", server_default="placed")
    vcpus: Mapped[int]
    gpus: Mapped[int]
    placement: Mapped[str] = mapped_column(Text)
    # The replica group of the placement (its "group" name), so a claim finds the group's VMs on other hosts.
    group_name: Mapped[str | None] = mapped_column(String(255), index=True)
    # How `vnuma apply` rendered the domain (JSON: render options and template), so a
    # rebalance re-renders it the same way; NULL until the VM is applied.
    rendering: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.current_timestamp()
    )


class ReplicaGroupRow(Base):
    """A replica group's name: the row every claim or move of one of its VMs locks first (``FOR UPDATE`` on
    PostgreSQL; SQLite's writers lock the whole file), so a group's placements are decided one at a time
    (:mod:`.placing`). Written when a group's first VM is claimed, kept after its last VM goes (a name)."""

    __tablename__ = "replica_groups"

    name: Mapped[str] = mapped_column(String(255), primary_key=True)


class BandwidthSample(Base):
    """The last memory-bandwidth sample of a VM (``vnuma stats --bandwidth``, :mod:`.samples`): when, over
    how long, on which host, and its rates as JSON (``domains``: ``[[L3 id, local B/s, total B/s]]``,
    ``llc``: ``[[cache id, bytes]]``). Kept when the VM moves (the planner then knows it is stale)."""

    __tablename__ = "bandwidth_samples"

    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"), primary_key=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="CASCADE"), index=True)
    taken_at: Mapped[str] = mapped_column(String(40))
    interval_ms: Mapped[int]
    domains: Mapped[str] = mapped_column(Text)
    llc: Mapped[str] = mapped_column(Text)


class RebalanceRun(Base):
    """One ``vnuma rebalance --apply``: its options and where it stands.

    ``unfinished`` is TRUE while the run is running or failed and NULL once it
    is done or aborted; its unique constraint allows one unfinished run at a time.
    """

    __tablename__ = "rebalance_runs"
    __table_args__ = (
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
        CheckConstraint("unfinished", name="unfinished_true_or_null"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    unfinished: Mapped[bool | None] = mapped_column(unique=True)
    objective: Mapped[str] = mapped_column(String(32))
    options: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.current_timestamp()
    )
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), server_default=func.current_timestamp(), onupdate=func.current_timestamp()
    )


class RebalanceStep(Base):
    """One move of a run: the VM's placement and domain state before, the placement after, progress."""

    __tablename__ = "rebalance_steps"
    __table_args__ = (
        UniqueConstraint("run_id", "seq"),
        CheckConstraint(_in("status", STEP_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("rebalance_runs.id", ondelete="CASCADE"))
    seq: Mapped[int]
    vm: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    before: Mapped[str] = mapped_column(Text)
    after: Mapped[str] = mapped_column(Text)
    before_state: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)


AUDIT_OUTCOMES = ("ok", "refused", "failed")


class AuditEntry(Base):
    """One row of the audit log (:mod:`.audit`): a change, written in its own transaction, or the refusal
    or failure of an invocation. ``vms``/``hosts``/``tenants``: ``,a,b,`` lists of the names it touches."""

    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint(_in("outcome", AUDIT_OUTCOMES), name="outcome"),
        Index("ix_audit_log_invocation", "invocation"),
        Index("ix_audit_log_at", "at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    invocation: Mapped[str] = mapped_column(String(32))
    at: Mapped[str] = mapped_column(String(40))
    username: Mapped[str] = mapped_column(String(255))
    machine: Mapped[str] = mapped_column(String(255))
    command: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(16))
    changes: Mapped[str] = mapped_column(Text)
    vms: Mapped[str] = mapped_column(Text)
    hosts: Mapped[str] = mapped_column(Text)
    tenants: Mapped[str] = mapped_column(Text)


TOKEN_ROLES = ("admin", "operator", "reader", "tenant")


class ApiToken(Base):
    """A bearer token of the HTTP API (:mod:`.tokens`): its public ``key`` (part of the token), a slow hash
    of its secret (never the secret), its role and, for a ``tenant`` token, the tenant it acts for."""

    __tablename__ = "api_tokens"
    __table_args__ = (CheckConstraint(_in("role", TOKEN_ROLES), name="role"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(32), unique=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str | None] = mapped_column(String(255))
    secret_hash: Mapped[str] = mapped_column(Text)
    created_at: Mapped[str] = mapped_column(String(40))
    expires_at: Mapped[str | None] = mapped_column(String(40))
    revoked_at: Mapped[str | None] = mapped_column(String(40))


class GpuProfile(Base):
    """A GPU model's MIG geometry (:mod:`.gpuprofiles`): the profile file's JSON, the PCI ids it matches."""

    __tablename__ = "gpu_profiles"

    id: Mapped[int] = mapped_column(primary_key=True)
    model: Mapped[str] = mapped_column(String(255), unique=True)
    pci_ids: Mapped[str] = mapped_column(Text)
    document: Mapped[str] = mapped_column(Text)
    imported_at: Mapped[str] = mapped_column(String(40))


class FleetMarks(Base):
    """What a host's change mark cannot say (:mod:`.changes`): one row counting the hosts removed, and the
    changes to the tenants and the kept MIG geometries (counted by triggers on those tables, migration 0028)."""

    __tablename__ = "fleet_marks"
    __table_args__ = (CheckConstraint("id = 1", name="one"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    hosts_removed: Mapped[int] = mapped_column(BigInteger)
    catalog_changes: Mapped[int] = mapped_column(BigInteger, server_default="0")
