"""ORM tables of ``vnuma watch``: its samples, events, proposals, readings and lease (SQLAlchemy 2 typed
mappings, on :mod:`.models`' base; written and read as SQL text by :mod:`.history`, :mod:`.samples`,
:mod:`.history_proposals` and :mod:`.watchlease`).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, Float, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from vnuma.inventory.models import Base


class WatchSample(Base):
    """One sample of ``vnuma watch`` (:mod:`.history`): a VM's rates (``kind`` ``vm``, ``item`` -1), an L3
    domain's totals (``domain``, ``item`` its id), a host cell's free memory and drift (``cell``), or the mark
    that a host's round was written (``round``); raw (``minute`` false, kept for the raw window) or a one-minute
    mean (kept for days). ``flags``: the rules true in this sample (raw only); ``cpu``: cores busy; ``rss_kib``,
    ``balloon_kib``: a VM's resident memory on the host and its balloon's size (NULL: not reported)."""

    __tablename__ = "watch_samples"
    __table_args__ = (
        Index("ix_watch_samples_subject", "kind", "host", "subject", "item", "at_ms"),
        Index("ix_watch_samples_minute_at", "minute", "at_ms"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    minute: Mapped[bool]
    kind: Mapped[str] = mapped_column(String(8))
    host: Mapped[str] = mapped_column(String(255))
    subject: Mapped[str] = mapped_column(String(255))
    item: Mapped[int]
    local_bps: Mapped[int | None] = mapped_column(BigInteger)
    total_bps: Mapped[int | None] = mapped_column(BigInteger)
    llc_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cpu: Mapped[float | None] = mapped_column(Float)
    free_kib: Mapped[int | None] = mapped_column(BigInteger)
    drift_kib: Mapped[int | None] = mapped_column(BigInteger)
    flags: Mapped[str] = mapped_column(String(64))
    rss_kib: Mapped[int | None] = mapped_column(BigInteger)
    balloon_kib: Mapped[int | None] = mapped_column(BigInteger)


class WatchEvent(Base):
    """A detection of ``vnuma watch``: its rule, subject (a VM, or a host cell), when it opened and closed
    (NULL: open), and its evidence (JSON: the samples that opened it)."""

    __tablename__ = "watch_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    rule: Mapped[str] = mapped_column(String(16))
    host: Mapped[str] = mapped_column(String(255))
    vm: Mapped[str | None] = mapped_column(String(255), index=True)
    cell: Mapped[int | None]
    opened_ms: Mapped[int] = mapped_column(BigInteger, index=True)
    closed_ms: Mapped[int | None] = mapped_column(BigInteger)
    evidence: Mapped[str] = mapped_column(Text)


class WatchReading(Base):
    """Each host's last reading as ``vnuma watch`` used it (``domains``: JSON, the stats of the inventory's VMs
    by name), so that a restarted watch has rates from its first round."""

    __tablename__ = "watch_readings"

    host: Mapped[str] = mapped_column(String(255), primary_key=True)
    at_ms: Mapped[int] = mapped_column(BigInteger)
    domains: Mapped[str] = mapped_column(Text)


class WatchLease(Base):
    """Which ``vnuma watch`` writes the rounds (:mod:`.watchlease`): one row, free when ``expires_ms`` has passed
    (a watch killed without releasing it too); ``token`` is the holder's own, ``machine`` and ``pid`` say which
    process holds it."""

    __tablename__ = "watch_lease"
    __table_args__ = (CheckConstraint("id = 1", name="one"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    token: Mapped[str] = mapped_column(String(64))
    machine: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int]
    expires_ms: Mapped[int] = mapped_column(BigInteger)


class WatchProposal(Base):
    """What ``vnuma watch`` decided for an event (:mod:`.history_proposals`): a move proposed (``move``: JSON,
    the planned move), withheld (``reason`` says why), or being carried out (``applying``: the rebalance run
    whose options name this proposal tells how it ended)."""

    __tablename__ = "watch_proposals"

    id: Mapped[int] = mapped_column(primary_key=True)
    event_id: Mapped[int] = mapped_column(index=True)
    at_ms: Mapped[int] = mapped_column(BigInteger, index=True)
    status: Mapped[str] = mapped_column(String(16))
    vm: Mapped[str | None] = mapped_column(String(255))
    host: Mapped[str] = mapped_column(String(255))
    to_host: Mapped[str | None] = mapped_column(String(255))
    objective: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text)
    move: Mapped[str | None] = mapped_column(Text)
