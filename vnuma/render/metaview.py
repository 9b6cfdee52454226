"""The view of vnuma's own ``<metadata>`` in a domain: its cells, devices and kept request, as strings.

Pure: no I/O. :func:`vnuma.render.view.build_view` puts these in the
:class:`~vnuma.render.view.DomainView` the template writes under ``<vnuma:placement>``;
:mod:`vnuma.render.metadata` reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vnuma.placement.altmodel import metadata_text
from vnuma.placement.asks import asked_changes
from vnuma.placement.kept import kept_request
from vnuma.placement.model import CellAssignment, Placement
from vnuma.topology import format_cpuset


@dataclass(frozen=True, slots=True)
class MetaCell:
    """One guest cell in vnuma's metadata."""

    guest_cell: str
    host_cell: str
    vcpus: str
    pcpus: str
    memory_kib: str
    page_size_kib: str


@dataclass(frozen=True, slots=True)
class MetaDevice:
    """One passed-through device in vnuma's metadata."""

    address: str
    kind: str
    guest_cell: str
    host_cell: str
    guest_address: str


_META_KEPT = frozenset({"tenant", "name", "vcpus", "memory", "gpus"})


def meta_cell(cell: CellAssignment) -> MetaCell:
    """A guest cell as vnuma's metadata writes it."""
    return MetaCell(
        guest_cell=str(cell.guest_cell),
        host_cell=str(cell.host_cell),
        vcpus=format_cpuset(cell.vcpus),
        pcpus=format_cpuset(cell.pcpus),
        memory_kib=str(cell.memory_kib),
        page_size_kib=str(cell.page_size_kib),
    )


def meta_devices(placement: Placement, guest_address: Mapping[str, str]) -> tuple[MetaDevice, ...]:
    """The placement's devices by address; ``guest_address`` maps each host address to its guest one."""
    return tuple(
        MetaDevice(
            d.address, str(d.kind), str(d.guest_cell), "" if d.host_cell is None else str(d.host_cell),
            guest_address[d.address],
        )
        for d in sorted(placement.devices, key=lambda d: d.address)
    )


def meta_request(placement: Placement) -> tuple[tuple[str, str], ...]:
    """The request the VM keeps, as (option with dashes, value as text); none when it keeps none."""
    if placement.request is None:
        return ()
    return tuple((k.replace("_", "-"), metadata_text(v) if isinstance(v, list) else str(v))
                 for k, v in asked_changes(kept_request(placement), _META_KEPT).items() if v is not None)
