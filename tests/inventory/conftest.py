"""Fixtures for inventory tests: a migrated SQLite file per test, placement builders, table dumps."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builders import kept
from vnuma.inventory import Inventory, open_inventory
from vnuma.placement.model import CellAssignment, CpuPolicy, DeviceAssignment, Placement
from vnuma.topology import PAGE_1G, DeviceKind


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "inventory.db"


@pytest.fixture
def db_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"


@pytest.fixture
def inv(db_url: str) -> Iterator[Inventory]:
    inventory = open_inventory(db_url)
    yield inventory
    inventory.close()




def placement(
    vm: str,
    pcpus: tuple[int, ...],
    *,
    host: str = "host-a",
    tenant: str = "acme",
    host_cell: int = 0,
    memory_gib: int = 1,
    page_size_kib: int = PAGE_1G,
    gpus: tuple[str, ...] = (),
    policy: CpuPolicy = CpuPolicy.DEDICATED,
    emulator_pcpus: tuple[int, ...] = (),
) -> Placement:
    """A one-cell placement: vCPU i pinned to ``pcpus[i]``, memory from ``page_size_kib`` pages."""
    cell = CellAssignment(
        0, host_cell, tuple(range(len(pcpus))), pcpus, memory_gib * 1024 * 1024, page_size_kib
    )
    devices = tuple(DeviceAssignment(a, DeviceKind.GPU, 0, host_cell) for a in gpus)
    return kept(Placement(vm, tenant, host, (cell,), emulator_pcpus, devices, cpu_policy=policy))
