"""What a parser may do with any input: return a well-formed result or raise a one-line InvalidInputError.

``outcome(parser, data)`` runs one parser; any exception other than
:class:`~vnuma.errors.InvalidInputError` propagates (the fuzz tests fail
on it, ``bench/fuzz_long.py`` counts it). A returned value is checked
here: a Host must pass ``check_host`` unchanged and keep its sort orders,
each cell's page pools must fit its memory, and every part left out is
said on one line; PCI devices must carry canonical addresses and ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.sources.capabilities import read_capabilities
from vnuma.sources.gpuhealth import CONDITIONS, HealthReport
from vnuma.sources.hwloc import read_hwloc
from vnuma.sources.nodedev import parse_nodedev, parse_nodedev_file_content
from vnuma.sources.nvsmihealth import read_nvidia_smi
from vnuma.topology import Host, PciDevice, parse_cpuset, parse_page_size, parse_size_kib
from vnuma.topology.hostcheck import check_host
from vnuma.topology.leftout import Imported

_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")
_HEALTH_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")
_ID16 = re.compile(r"^0x[0-9a-f]{4}$")
INT32_MAX = 2**31 - 1  # the inventory's INTEGER columns (cell, CPU, page size) on PostgreSQL
INT64_MAX = 2**63 - 1  # its BIGINT columns (memory, page counts)


def check_error(err: InvalidInputError) -> None:
    """A refusal is one non-empty line (and so is its hint)."""
    message = str(err)
    assert message.strip(), f"empty error message from {type(err).__name__}"
    assert "\n" not in message and "\r" not in message, f"multi-line error message: {message!r}"
    assert err.hint is None or ("\n" not in err.hint and err.hint.strip()), f"bad hint: {err.hint!r}"


def check_host_result(host: Host) -> None:
    """A parsed Host is consistent, sorted, and its numbers fit the inventory's columns."""
    assert isinstance(host, Host)
    assert check_host(host) is host
    assert [c.id for c in host.cells] == sorted(c.id for c in host.cells)
    for cell in host.cells:
        assert 0 <= cell.id <= INT32_MAX and 0 <= cell.memory_kib <= INT64_MAX, (cell.id, cell.memory_kib)
        assert [c.id for c in cell.cpus] == sorted(c.id for c in cell.cpus)
        for cpu in cell.cpus:
            assert 0 <= cpu.id <= INT32_MAX and cpu.id in cpu.siblings, cpu
        for pool in cell.pages:
            assert 0 < pool.size_kib <= INT32_MAX and 0 <= pool.count <= INT64_MAX, pool
        assert [o for o, _ in cell.distances] == sorted({o for o, _ in cell.distances})
        assert all(10 <= d <= INT64_MAX for _, d in cell.distances)
    for dev in host.devices:
        check_device(dev)
    assert [d.address for d in host.devices] == sorted({d.address for d in host.devices})


def check_imported(imported: Imported) -> None:
    """An import's host is as :func:`check_host_result` wants it, its pools fit its cells, and each part
    left out is one non-empty line."""
    assert isinstance(imported, Imported)
    check_host_result(imported.host)
    for cell in imported.host.cells:
        assert sum(p.size_kib * p.count for p in cell.pages) <= cell.memory_kib, cell
    for part in imported.left_out:
        line = part.line()
        assert part.what.strip() and part.why.strip() and "\n" not in line and "\r" not in line, part


def check_device(dev: PciDevice) -> None:
    """A PCI device has a canonical ``dddd:bb:ss.f`` address, 16-bit ids and a sane node."""
    assert _ADDRESS.match(dev.address), f"bad address {dev.address!r}"
    assert dev.parent is None or _ADDRESS.match(dev.parent), f"bad parent {dev.parent!r}"
    assert _ID16.match(dev.vendor_id) and _ID16.match(dev.product_id), (dev.vendor_id, dev.product_id)
    assert dev.numa_node is None or 0 <= dev.numa_node <= INT32_MAX


def _check_devices(devices: tuple[PciDevice, ...]) -> None:
    assert isinstance(devices, tuple)
    for dev in devices:
        check_device(dev)
    assert [d.address for d in devices] == sorted({d.address for d in devices})


def _check_optional_device(dev: PciDevice | None) -> None:
    if dev is not None:
        check_device(dev)


def _check_health(rep: HealthReport) -> None:
    """Every GPU a health file names has an address in the inventory's form (a domain may be wider than the
    inventory keeps: such a GPU is named and matches none), once; each finding is a condition on one of them."""
    assert isinstance(rep, HealthReport)
    assert all(_HEALTH_ADDRESS.match(a) for a in rep.addresses), rep.addresses
    assert list(rep.addresses) == sorted(set(rep.addresses))
    for finding in rep.findings:
        assert finding.condition in CONDITIONS and finding.address in rep.addresses, finding
        assert finding.detail.strip() and "\n" not in finding.detail and "\n" not in finding.where, finding


def _check_cpuset(cpus: frozenset[int]) -> None:
    assert isinstance(cpus, frozenset) and all(isinstance(c, int) and c >= 0 for c in cpus)


def _check_size(kib: int) -> None:
    assert isinstance(kib, int) and kib >= 0


def _check_page(kib: int | None) -> None:
    assert kib is None or kib in (4, 2048, 1048576)


def _text(data: bytes | str) -> str:
    return data if isinstance(data, str) else data.decode("utf-8", errors="surrogateescape")


Parser = tuple[Callable[[Any], Any], Callable[[Any], None]]

PARSERS: dict[str, Parser] = {
    "capabilities": (lambda d: read_capabilities(d, name="fuzz", what="caps.xml"), check_imported),
    "nodedev": (lambda d: parse_nodedev(d, what="dev.xml"), _check_optional_device),
    "nodedev-file": (lambda d: parse_nodedev_file_content(d, "devs.xml"), _check_devices),
    "hwloc": (lambda d: read_hwloc(d, name="fuzz", what="hw.xml"), check_imported),
    "nvidia-smi": (lambda d: read_nvidia_smi(d, source="smi.xml"), _check_health),
    "cpuset": (lambda d: parse_cpuset(_text(d)), _check_cpuset),
    "size": (lambda d: parse_size_kib(_text(d)), _check_size),
    "page-size": (lambda d: parse_page_size(_text(d)), _check_page),
}
"""Every fuzzed entry point: a call taking the raw input, and the check of its result."""


def outcome(parser: str, data: bytes | str) -> str:
    """Run ``parser`` on ``data``: ``"ok"`` (checked result) or ``"refused"`` (checked one-line error)."""
    call, check = PARSERS[parser]
    try:
        result = call(data)
    except InvalidInputError as err:
        check_error(err)
        return "refused"
    check(result)
    return "ok"
