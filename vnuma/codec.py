"""Plain-dict codecs for hosts, placements and tenants (the ``--json`` and inventory shapes).

Pure: no I/O. The dict shapes are public contracts that operators' scripts
rely on: keys may be added, never renamed or removed. Every ``*_from_dict``
validates its input and raises :class:`InvalidInputError` naming the key
path (``cells[1].cpus[3].siblings``); ``x_from_dict(x_to_dict(v)) == v``.

Keys for dataclass fields that have a default may be omitted on input
(``uri``, ``devices``, ``pages``, ``parent``, ...); the others are required.
Maps keyed by a number (page size, cell id) use the decimal string as key,
in the order of the dataclass tuples, so JSON round trips keep that order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from vnuma.errors import InvalidInputError
from vnuma.placement.model import (
    CellAssignment,
    CpuPolicy,
    DeviceAssignment,
    Isolation,
    Placement,
    Tenant,
    ThreadPolicy,
)
from vnuma.topology import KIB_PER_MIB, Cell, Cpu, DeviceKind, Host, PagePool, PciDevice, Source, check_host

T = TypeVar("T")
_MISSING = object()


# --- validation helpers -------------------------------------------------------------------------


class _At:
    """A key path inside one document, for error messages (``host 'a': cells[1].id``)."""

    __slots__ = ("doc", "path")

    def __init__(self, doc: str, path: str = "") -> None:
        self.doc = doc
        self.path = path

    def key(self, name: str) -> _At:
        return _At(self.doc, f"{self.path}.{name}" if self.path else name)

    def index(self, i: int) -> _At:
        return _At(self.doc, f"{self.path}[{i}]")

    def fail(self, problem: str) -> InvalidInputError:
        where = f"{self.doc}: {self.path}" if self.path else self.doc
        return InvalidInputError(f"{where}: {problem}")


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: object, at: _At) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise at.fail(f"expected an object, got {_type_name(value)}")
    return value


def _get(d: Mapping[str, Any], key: str, at: _At, default: object = _MISSING) -> Any:
    value = d.get(key, _MISSING)
    if value is _MISSING:
        if default is _MISSING:
            raise at.fail(f"missing key {key!r}")
        return default
    return value


def _int(value: object, at: _At) -> int:
    # bool is an int subclass; a JSON true is never a count or an id.
    if type(value) is not int:
        raise at.fail(f"expected an integer, got {_type_name(value)}")
    return value


def _opt_int(value: object, at: _At) -> int | None:
    return None if value is None else _int(value, at)


def _str(value: object, at: _At) -> str:
    if not isinstance(value, str):
        raise at.fail(f"expected a string, got {_type_name(value)}")
    return value


def _opt_str(value: object, at: _At) -> str | None:
    return None if value is None else _str(value, at)


def _bool(value: object, at: _At) -> bool:
    if not isinstance(value, bool):
        raise at.fail(f"expected true or false, got {_type_name(value)}")
    return value


def _list(value: object, at: _At) -> list[Any]:
    if not isinstance(value, list | tuple):
        raise at.fail(f"expected a list, got {_type_name(value)}")
    return list(value)


def _ints(value: object, at: _At) -> tuple[int, ...]:
    items = _list(value, at)
    for i, item in enumerate(items):
        if type(item) is not int:
            raise at.index(i).fail(f"expected an integer, got {_type_name(item)}")
    return tuple(items)


def _each(value: object, at: _At, decode: Callable[[Any, _At], T]) -> tuple[T, ...]:
    return tuple(decode(item, at.index(i)) for i, item in enumerate(_list(value, at)))


def _int_map(value: object, at: _At) -> tuple[tuple[int, int], ...]:
    pairs: list[tuple[int, int]] = []
    for key, count in _mapping(value, at).items():
        if not isinstance(key, str) or not key.isdecimal():
            raise at.fail(f"key {key!r} is not a decimal number")
        pairs.append((int(key), _int(count, at.key(key))))
    return tuple(pairs)


def _enum(cls: Callable[[str], T], value: object, at: _At, choices: str) -> T:
    try:
        return cls(_str(value, at))
    except ValueError:
        raise at.fail(f"{value!r} is not one of {choices}") from None


def _choices(values: Any) -> str:
    return "|".join(str(v.value) for v in values)


# --- hosts --------------------------------------------------------------------------------------


def host_to_dict(host: Host) -> dict[str, Any]:
    """The host as a JSON-ready dict (see the module docstring for the contract)."""
    return {
        "name": host.name,
        "uri": host.uri,
        "source": host.source.value,
        "reserved_cpus": sorted(host.reserved_cpus),
        "cells": [_cell_to_dict(c) for c in host.cells],
        "devices": [_device_to_dict(d) for d in host.devices],
    }


def _cell_to_dict(cell: Cell) -> dict[str, Any]:
    pages = {str(p.size_kib): p.count for p in cell.pages}
    distances = {str(other): dist for other, dist in cell.distances}
    if len(pages) != len(cell.pages) or len(distances) != len(cell.distances):
        raise InvalidInputError(f"cell {cell.id}: duplicate page size or distance entries")
    return {
        "id": cell.id,
        "memory_kib": cell.memory_kib,
        "memory_only": cell.memory_only,
        "cpus": [
            {"id": c.id, "socket": c.socket, "die": c.die, "core": c.core, "siblings": sorted(c.siblings)}
            for c in cell.cpus
        ],
        "pages": pages,
        "distances": distances,
    }


def _device_to_dict(dev: PciDevice) -> dict[str, Any]:
    return {
        "address": dev.address,
        "kind": dev.kind.value,
        "numa_node": dev.numa_node,
        "vendor_id": dev.vendor_id,
        "product_id": dev.product_id,
        "parent": dev.parent,
    }


def host_from_dict(d: Mapping[str, Any]) -> Host:
    """Build and check a host from its dict form.

    Raises:
        InvalidInputError: a missing key or wrong type (named by its key path),
            or an inconsistent topology (see :func:`vnuma.topology.check_host`).
    """
    at = _At("host")
    d = _mapping(d, at)
    name = _str(_get(d, "name", at), at.key("name"))
    at = _At(f"host {name!r}")
    host = Host(
        name=name,
        cells=_each(_get(d, "cells", at), at.key("cells"), _cell_from_dict),
        devices=_each(_get(d, "devices", at, []), at.key("devices"), _device_from_dict),
        uri=_opt_str(_get(d, "uri", at, None), at.key("uri")),
        source=_enum(Source, _get(d, "source", at, Source.CAPABILITIES.value), at.key("source"), _choices(Source)),
        reserved_cpus=frozenset(_ints(_get(d, "reserved_cpus", at, []), at.key("reserved_cpus"))),
    )
    return check_host(host)


def _cell_from_dict(value: object, at: _At) -> Cell:
    d = _mapping(value, at)
    cpus = _each(_get(d, "cpus", at, []), at.key("cpus"), _cpu_from_dict)
    memory_only = _get(d, "memory_only", at, None)
    if memory_only is not None and _bool(memory_only, at.key("memory_only")) != (not cpus):
        raise at.key("memory_only").fail(f"is {memory_only} but the cell has {len(cpus)} CPUs")
    return Cell(
        id=_int(_get(d, "id", at), at.key("id")),
        memory_kib=_int(_get(d, "memory_kib", at), at.key("memory_kib")),
        cpus=cpus,
        pages=tuple(PagePool(s, n) for s, n in _int_map(_get(d, "pages", at, {}), at.key("pages"))),
        distances=_int_map(_get(d, "distances", at, {}), at.key("distances")),
    )


def _cpu_from_dict(value: object, at: _At) -> Cpu:
    d = _mapping(value, at)
    return Cpu(
        id=_int(_get(d, "id", at), at.key("id")),
        socket=_opt_int(_get(d, "socket", at), at.key("socket")),
        die=_opt_int(_get(d, "die", at), at.key("die")),
        core=_opt_int(_get(d, "core", at), at.key("core")),
        siblings=frozenset(_ints(_get(d, "siblings", at), at.key("siblings"))),
    )


def _device_from_dict(value: object, at: _At) -> PciDevice:
    d = _mapping(value, at)
    return PciDevice(
        address=_str(_get(d, "address", at), at.key("address")),
        kind=_enum(DeviceKind, _get(d, "kind", at), at.key("kind"), _choices(DeviceKind)),
        vendor_id=_str(_get(d, "vendor_id", at), at.key("vendor_id")),
        product_id=_str(_get(d, "product_id", at), at.key("product_id")),
        numa_node=_opt_int(_get(d, "numa_node", at), at.key("numa_node")),
        parent=_opt_str(_get(d, "parent", at, None), at.key("parent")),
    )


def host_summary(host: Host) -> dict[str, Any]:
    """One line of ``vnuma host list --json``: counts and totals, no topology."""
    return {
        "name": host.name,
        "uri": host.uri,
        "source": host.source.value,
        "cells": len(host.cells),
        "cpus": sum(len(c.cpus) for c in host.cells),
        "gpus": len(host.devices_of(DeviceKind.GPU)),
        "memory_kib": host.memory_kib,
    }


# --- placements ---------------------------------------------------------------------------------


def placement_to_dict(p: Placement) -> dict[str, Any]:
    """The placement as a JSON-ready dict; ``memory_mib`` is for readers, ``memory_kib`` is exact."""
    return {
        "vm": p.vm,
        "tenant": p.tenant,
        "host": p.host,
        "cpu_policy": p.cpu_policy.value,
        "thread_policy": p.thread_policy.value,
        "threads_per_core": p.threads_per_core,
        "cells": [
            {
                "guest_cell": c.guest_cell,
                "host_cell": c.host_cell,
                "vcpus": list(c.vcpus),
                "pcpus": list(c.pcpus),
                "memory_mib": c.memory_kib // KIB_PER_MIB,
                "memory_kib": c.memory_kib,
                "page_size_kib": c.page_size_kib,
            }
            for c in p.cells
        ],
        "emulator_pcpus": list(p.emulator_pcpus),
        "devices": [
            {"address": d.address, "kind": d.kind.value, "guest_cell": d.guest_cell, "host_cell": d.host_cell}
            for d in p.devices
        ],
    }


def placement_from_dict(d: Mapping[str, Any]) -> Placement:
    """Build a placement from its dict form (``memory_kib`` wins over ``memory_mib``).

    Raises:
        InvalidInputError: a missing key or wrong type, named by its key path.
    """
    at = _At("placement")
    d = _mapping(d, at)
    vm = _str(_get(d, "vm", at), at.key("vm"))
    at = _At(f"placement of VM {vm!r}")
    return Placement(
        vm=vm,
        tenant=_str(_get(d, "tenant", at), at.key("tenant")),
        host=_str(_get(d, "host", at), at.key("host")),
        cells=_each(_get(d, "cells", at), at.key("cells"), _assignment_from_dict),
        emulator_pcpus=_ints(_get(d, "emulator_pcpus", at, []), at.key("emulator_pcpus")),
        devices=_each(_get(d, "devices", at, []), at.key("devices"), _device_assignment_from_dict),
        cpu_policy=_enum(
            CpuPolicy, _get(d, "cpu_policy", at, CpuPolicy.DEDICATED.value), at.key("cpu_policy"), _choices(CpuPolicy)
        ),
        thread_policy=_enum(
            ThreadPolicy,
            _get(d, "thread_policy", at, ThreadPolicy.PREFER.value),
            at.key("thread_policy"),
            _choices(ThreadPolicy),
        ),
        threads_per_core=_int(_get(d, "threads_per_core", at, 1), at.key("threads_per_core")),
    )


def _assignment_from_dict(value: object, at: _At) -> CellAssignment:
    d = _mapping(value, at)
    kib = _get(d, "memory_kib", at, None)
    if kib is None:
        memory_kib = _int(_get(d, "memory_mib", at), at.key("memory_mib")) * KIB_PER_MIB
    else:
        memory_kib = _int(kib, at.key("memory_kib"))
    return CellAssignment(
        guest_cell=_int(_get(d, "guest_cell", at), at.key("guest_cell")),
        host_cell=_int(_get(d, "host_cell", at), at.key("host_cell")),
        vcpus=_ints(_get(d, "vcpus", at), at.key("vcpus")),
        pcpus=_ints(_get(d, "pcpus", at), at.key("pcpus")),
        memory_kib=memory_kib,
        page_size_kib=_int(_get(d, "page_size_kib", at), at.key("page_size_kib")),
    )


def _device_assignment_from_dict(value: object, at: _At) -> DeviceAssignment:
    d = _mapping(value, at)
    return DeviceAssignment(
        address=_str(_get(d, "address", at), at.key("address")),
        kind=_enum(DeviceKind, _get(d, "kind", at), at.key("kind"), _choices(DeviceKind)),
        guest_cell=_int(_get(d, "guest_cell", at), at.key("guest_cell")),
        host_cell=_opt_int(_get(d, "host_cell", at, None), at.key("host_cell")),
    )


# --- tenants ------------------------------------------------------------------------------------


def tenant_to_dict(t: Tenant) -> dict[str, Any]:
    """The tenant as a JSON-ready dict: ``name``, ``isolation``, ``max_vcpus``, ``max_gpus``."""
    return {"name": t.name, "isolation": t.isolation.value, "max_vcpus": t.max_vcpus, "max_gpus": t.max_gpus}


def tenant_from_dict(d: Mapping[str, Any]) -> Tenant:
    """Build a tenant from its dict form.

    Raises:
        InvalidInputError: a missing key, a wrong type or an unknown isolation.
    """
    at = _At("tenant")
    d = _mapping(d, at)
    name = _str(_get(d, "name", at), at.key("name"))
    at = _At(f"tenant {name!r}")
    return Tenant(
        name=name,
        isolation=_enum(Isolation, _get(d, "isolation", at, Isolation.CORE.value), at.key("isolation"), _choices(Isolation)),
        max_vcpus=_opt_int(_get(d, "max_vcpus", at, None), at.key("max_vcpus")),
        max_gpus=_opt_int(_get(d, "max_gpus", at, None), at.key("max_gpus")),
    )
