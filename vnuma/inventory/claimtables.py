"""ORM tables of the claims: what each VM holds of its host (SQLAlchemy 2 typed mappings, on :mod:`.models`' base).

Claims carry database constraints so that double booking is impossible even
if the checks in Python were wrong: an exclusive pCPU, a device and a VM's
(cell, page size) can each be claimed once, and so can a GPU partition's VF, MIG start and UUID.
What may be claimed is admission's to decide (:mod:`vnuma.placement.ledger.admit`); the rows a claim
writes are :func:`vnuma.inventory.claims.claim_rows`'.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, String, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from vnuma.inventory.models import Base


class CpuClaim(Base):
    """A pCPU held by a VM: exclusively (pinned) or shared (floating)."""

    __tablename__ = "cpu_claims"
    __table_args__ = (
        UniqueConstraint("vm_id", "cpu_id"),
        # The partial index is what makes two exclusive claims of one pCPU impossible.
        Index(
            "uq_cpu_claims_exclusive_host_id_cpu_id",
            "host_id",
            "cpu_id",
            unique=True,
            sqlite_where=text("exclusive"),
            postgresql_where=text("exclusive"),
        ),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"))
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"))
    cpu_id: Mapped[int]
    exclusive: Mapped[bool]


class PageClaim(Base):
    """``count`` pages of ``page_size_kib`` on host cell ``cell_id`` held by a VM."""

    __tablename__ = "page_claims"
    __table_args__ = (
        UniqueConstraint("vm_id", "cell_id", "page_size_kib"),
        Index("ix_page_claims_host_cell_size", "host_id", "cell_id", "page_size_kib"),
        CheckConstraint("count > 0", name="count_positive"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"))
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"))
    cell_id: Mapped[int]
    page_size_kib: Mapped[int]
    count: Mapped[int] = mapped_column(BigInteger)


class ResctrlClaim(Base):
    """A VM's cache ways (``ways``, 0: none) and memory-bandwidth cap (``mem_bw``, None: none) on one L3
    domain of its host (:mod:`vnuma.placement.resctrl`)."""

    __tablename__ = "resctrl_claims"
    __table_args__ = (
        UniqueConstraint("vm_id", "domain_id"),
        Index("ix_resctrl_claims_host_domain", "host_id", "domain_id"),
        CheckConstraint("ways >= 0", name="ways_not_negative"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"))
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"))
    domain_id: Mapped[int]
    ways: Mapped[int]
    mem_bw: Mapped[int | None]


class DeviceClaim(Base):
    """A host PCI device passed through to a VM."""

    __tablename__ = "device_claims"
    __table_args__ = (UniqueConstraint("host_id", "address"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"), index=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"))
    address: Mapped[str] = mapped_column(String(32))


class PartitionClaim(Base):
    """A GPU partition a VM holds: a vGPU instance of type ``name`` (on SR-IOV virtual function ``vf``, or
    on the GPU's physical function when NULL) or a MIG instance of profile ``name`` at memory slice
    ``start`` of GPU ``gpu``. A VF is claimed once (NULLs never collide), a MIG start once per GPU, and a
    mediated device's UUID once; admission (the engine's ``partitions`` check) decides the rest."""

    __tablename__ = "partition_claims"
    __table_args__ = (
        UniqueConstraint("host_id", "vf"),
        UniqueConstraint("host_id", "gpu", "start"),
        UniqueConstraint("uuid"),
        CheckConstraint("kind IN ('vgpu', 'mig')", name="kind"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    vm_id: Mapped[int] = mapped_column(ForeignKey("vms.id", ondelete="CASCADE"), index=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("hosts.id", ondelete="RESTRICT"))
    gpu: Mapped[str] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(8))
    name: Mapped[str] = mapped_column(String(255))
    vf: Mapped[str | None] = mapped_column(String(32))
    start: Mapped[int | None]
    uuid: Mapped[str] = mapped_column(String(36))
