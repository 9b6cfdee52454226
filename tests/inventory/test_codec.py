"""The dict codecs: exact round trips, the public key shapes, and errors that name the bad key."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given

from tests.builders import make_host
from tests.inventory.conftest import placement
from tests.inventory.strategies import hosts, placements
from vnuma.codec import (
    host_from_dict,
    host_summary,
    host_to_dict,
    placement_from_dict,
    placement_to_dict,
    tenant_from_dict,
    tenant_to_dict,
)
from vnuma.errors import InvalidInputError
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.topology import Host


@given(hosts())
def test_host_round_trips_through_dict_and_json(host: Host) -> None:
    assert host_from_dict(host_to_dict(host)) == host
    assert host_from_dict(json.loads(json.dumps(host_to_dict(host)))) == host


@given(placements())
def test_placement_round_trips_through_dict_and_json(p: Placement) -> None:
    assert placement_from_dict(placement_to_dict(p)) == p
    assert placement_from_dict(json.loads(json.dumps(placement_to_dict(p)))) == p


@pytest.mark.parametrize(
    "tenant",
    [Tenant("acme"), Tenant("b", Isolation.CELL, 64, 4), Tenant("c", Isolation.NONE, None, 0)],
    ids=["defaults", "cell-with-quotas", "none-zero-gpus"],
)
def test_tenant_round_trips(tenant: Tenant) -> None:
    assert tenant_from_dict(json.loads(json.dumps(tenant_to_dict(tenant)))) == tenant


def test_host_dict_has_the_public_shape() -> None:
    host = make_host("hv1", cells=2, cores_per_cell=2, smt=2, gpus_per_cell=1, reserved_cpus=frozenset({0}))
    d = host_to_dict(host)
    assert set(d) >= {"name", "uri", "source", "reserved_cpus", "cells", "devices"}
    assert d["reserved_cpus"] == [0]
    cell = d["cells"][0]
    assert set(cell) >= {"id", "memory_kib", "memory_only", "cpus", "pages", "distances"}
    assert cell["cpus"][0] == {"id": 0, "socket": 0, "die": 0, "core": 0, "siblings": [0, 4]}
    assert cell["pages"] == {"4": (64 - 48) * 1024 * 256, "2048": 16 * 512, "1048576": 32}
    assert cell["distances"] == {"0": 10, "1": 21}
    assert d["devices"][0] == {
        "address": "0000:10:00.0",
        "kind": "gpu",
        "numa_node": 0,
        "vendor_id": "0x10de",
        "product_id": "0x2330",
        "product_name": None,
        "parent": None,
        "root_complex": None,
        "bridges": [],
        "iommu_group": None,
        "iommu_peers": [],
        "class": None,
        "vfs": [],
        "vf_max": None,
        "pf": None,
        "link": None,
        "mdev_types": [],
        "mode": None,
        "layout": [],
        "partitions": [],
    }


def test_placement_dict_has_the_public_shape() -> None:
    d = placement_to_dict(placement("vm1", (2, 3), memory_gib=4, gpus=("0000:10:00.0",)))
    assert {k: d[k] for k in ("vm", "tenant", "host", "emulator_pcpus")} == {
        "vm": "vm1",
        "tenant": "acme",
        "host": "host-a",
        "emulator_pcpus": [],
    }
    assert d["cells"] == [
        {
            "guest_cell": 0,
            "host_cell": 0,
            "vcpus": [0, 1],
            "pcpus": [2, 3],
            "memory_mib": 4096,
            "memory_kib": 4 * 1024 * 1024,
            "page_size_kib": 1048576,
            "memory_mode": "strict",
        }
    ]
    assert d["devices"] == [{"address": "0000:10:00.0", "kind": "gpu", "guest_cell": 0, "host_cell": 0}]


def test_host_summary_counts() -> None:
    host = make_host(
        "hv1", cells=2, cores_per_cell=4, smt=2, gpus_per_cell=2, nics_per_cell=1, uri="qemu:///system"
    )
    assert host_summary(host) == {
        "name": "hv1",
        "uri": "qemu:///system",
        "source": "capabilities",
        "cells": 2,
        "cpus": 16,
        "gpus": 4,
        "memory_kib": 2 * 64 * 1024 * 1024,
        "cordoned": False,
    }


def test_optional_keys_may_be_omitted() -> None:
    minimal = {"name": "m", "cells": [{"id": 0, "memory_kib": 1024}]}
    host = host_from_dict(minimal)
    assert host.cells[0].memory_only and host.devices == () and host.uri is None
    p = placement_from_dict(
        {
            "vm": "v",
            "tenant": "t",
            "host": "h",
            "cells": [
                {
                    "guest_cell": 0,
                    "host_cell": 1,
                    "vcpus": [0],
                    "pcpus": [5],
                    "memory_mib": 2,
                    "page_size_kib": 4,
                }
            ],
        }
    )
    assert p.cells[0].memory_kib == 2048 and p.devices == () and p.threads_per_core == 1
    assert p.numa_nodes == 1  # written before the shape was recorded: the cell count it has is kept


def test_placement_records_the_guest_shape_asked_for() -> None:
    d = placement_to_dict(placement("vm1", (0, 1)))
    assert d["numa_nodes"] == "auto" and placement_from_dict(d).numa_nodes is None
    d["numa_nodes"] = 1
    assert placement_from_dict(d).numa_nodes == 1


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        target: Any = d
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


HOST_ERRORS = [
    ("no-name", _drop(("name",)), "host: missing key 'name'"),
    ("cells-not-list", _set(("cells",), {"0": {}}), "cells: expected a list, got dict"),
    (
        "cpu-no-siblings",
        _drop(("cells", 1, "cpus", 3, "siblings")),
        "cells[1].cpus[3]: missing key 'siblings'",
    ),
    (
        "core-string",
        _set(("cells", 1, "cpus", 3, "core"), "7"),
        "cells[1].cpus[3].core: expected an integer, got str",
    ),
    (
        "id-bool",
        _set(("cells", 0, "cpus", 0, "id"), True),
        "cells[0].cpus[0].id: expected an integer, got bool",
    ),
    (
        "sibling-float",
        _set(("cells", 0, "cpus", 1, "siblings"), [1.0]),
        "cells[0].cpus[1].siblings[0]: expected an",
    ),
    ("page-key", _set(("cells", 0, "pages", "2M"), 3), "cells[0].pages: key '2M' is not a decimal number"),
    (
        "memory-null",
        _set(("cells", 0, "memory_kib"), None),
        "cells[0].memory_kib: expected an integer, got null",
    ),
    (
        "memory-only-lie",
        _set(("cells", 0, "memory_only"), True),
        "cells[0].memory_only: is True but the cell has",
    ),
    (
        "bad-source",
        _set(("source",), "virsh"),
        "source: 'virsh' is not one of libvirt|capabilities|hwloc|trace",
    ),
    ("bad-kind", _set(("devices", 0, "kind"), "fpga"), "devices[0].kind: 'fpga' is not one of gpu|nic|other"),
    ("device-no-node", _drop(("devices", 0, "numa_node")), "devices[0]: missing key 'numa_node'"),
    ("reserved-strings", _set(("reserved_cpus",), ["0"]), "reserved_cpus[0]: expected an integer, got str"),
    ("stray-reserved", _set(("reserved_cpus",), [999]), "reserved CPU(s) 999 do not exist"),
    ("missing-sibling", _set(("cells", 0, "cpus", 0, "siblings"), [0, 999]), "missing sibling CPU(s) 999"),
]


@pytest.mark.parametrize(
    ("mutate", "expected"), [h[1:] for h in HOST_ERRORS], ids=[h[0] for h in HOST_ERRORS]
)
def test_bad_host_dict_names_the_key(mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    d = copy.deepcopy(host_to_dict(make_host("hv1", gpus_per_cell=1)))
    mutate(d)
    with pytest.raises(InvalidInputError) as err:
        host_from_dict(d)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def _both(*mutations: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def mutate(d: dict[str, Any]) -> None:
        for m in mutations:
            m(d)

    return mutate


PLACEMENT_ERRORS = [
    ("no-host", _drop(("host",)), "placement of VM 'vm1': missing key 'host'"),
    (
        "no-memory",
        _both(_drop(("cells", 0, "memory_kib")), _drop(("cells", 0, "memory_mib"))),
        "cells[0]: missing key 'memory_mib'",
    ),
    ("pcpus-str", _set(("cells", 0, "pcpus"), "0-3"), "cells[0].pcpus: expected a list, got str"),
    ("policy", _set(("cpu_policy",), "pinned"), "cpu_policy: 'pinned' is not one of dedicated|shared"),
    ("device-cell", _set(("devices", 0, "guest_cell"), "0"), "devices[0].guest_cell: expected an integer"),
    ("shape-word", _set(("numa_nodes",), "two"), "numa_nodes: expected an integer"),
    ("shape-count", _set(("numa_nodes",), 3), "numa_nodes: says 3 guest cells but the placement has 1"),
]


@pytest.mark.parametrize(
    ("mutate", "expected"), [e[1:] for e in PLACEMENT_ERRORS], ids=[e[0] for e in PLACEMENT_ERRORS]
)
def test_bad_placement_dict_names_the_key(mutate: Callable[[dict[str, Any]], None], expected: str) -> None:
    d = placement_to_dict(placement("vm1", (0, 1), gpus=("0000:10:00.0",)))
    mutate(d)
    with pytest.raises(InvalidInputError) as err:
        placement_from_dict(d)
    assert expected in str(err.value)


@pytest.mark.parametrize(
    "decode", [host_from_dict, placement_from_dict, tenant_from_dict], ids=["host", "placement", "tenant"]
)
def test_a_list_is_not_a_document(decode: Callable[[Any], object]) -> None:
    with pytest.raises(InvalidInputError, match=r"expected an object, got list"):
        decode([])


def test_bad_tenant_isolation() -> None:
    with pytest.raises(
        InvalidInputError, match=r"tenant 'a': isolation: 'socket' is not one of core\|cell\|none"
    ):
        tenant_from_dict({"name": "a", "isolation": "socket"})
