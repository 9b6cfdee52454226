"""The one-line refusal: the host that came closest (latest check, then fewest missing units), how many hosts
refused for each cause, and refusals that name their cause (no hugepages, no MIG geometry, a group on every
host, GPUs with no NUMA node)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_host
from tests.placement.helpers import request
from tests.placement.test_partitions import _mig_host
from vnuma.errors import InvalidInputError
from vnuma.placement.engine import no_placement, place
from vnuma.placement.filters import PIPELINE, STAGE
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import AntiAffinity, GpuAffinity, VmRequest
from vnuma.placement.pagefilters import NO_HUGEPAGES, NO_HUGEPAGES_HINT
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.placement.refusal import MOST_CAUSES, closest, gist, summarize
from vnuma.placement.result import Rejection
from vnuma.sources.capabilities import parse_capabilities
from vnuma.topology import PAGE_2M, PAGE_4K, DeviceKind, Host, PciDevice

RDT = Path(__file__).resolve().parent.parent / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"


def _refused(hosts: list[Host] | Fleet, req: VmRequest) -> str:
    result = place(req, hosts if isinstance(hosts, Fleet) else Fleet(hosts))
    assert result.chosen is None, result.chosen
    return str(no_placement(req.name, result))


def test_the_host_missing_fewest_pcpus_is_quoted_not_the_first_by_name() -> None:
    hosts = [make_host("a", cores_per_cell=2), make_host("b", cores_per_cell=6)]
    line = _refused(hosts, request("v", vcpus=16, numa_nodes=1))
    assert line == (
        "no host can take VM 'v': 2 hosts: too few free pCPUs in its cells; "
        "closest: b (cell 0: needs 16 pCPUs, 12 free)"
    )


def test_a_host_whose_gpus_are_full_comes_closer_than_hosts_with_no_gpu_offering_the_profile() -> None:
    """The issue's case: the alphabetically first host has no GPU at all; the MIG host lacks one instance."""
    hosts = [make_host("aa"), make_host("ab"), _mig_host("zz")]
    ask = PartitionAsk(PartitionKind.MIG, "3g.40gb", 17)  # 8 H100s of 2 x 3g.40gb each: 16 fit
    line = _refused(hosts, request("v", vcpus=2, memory_gib=1, page_size_kib=PAGE_4K, partition=ask))
    assert line.startswith(
        "no host can take VM 'v': 2 hosts: no GPU offers mig 3g.40gb; "
        "1 host: too few free mig 3g.40gb on the GPUs of its cells; closest: zz (17 x mig 3g.40gb: 16 fit"
    ), line
    assert "'aa'" not in line and "'ab'" not in line


def test_a_gpu_model_without_a_mig_geometry_is_named_with_its_pci_id() -> None:
    base = make_host("a", gpus_per_cell=1)
    named = [replace(d, product_name="GA100GL [A30 PCIe]", product_id="0x20b7") for d in base.devices]
    hosts = [replace(base, devices=tuple(named)), make_host("b", gpus_per_cell=1)]
    ask = PartitionAsk(PartitionKind.MIG, "1g.6gb")
    with pytest.raises(InvalidInputError) as caught:  # no GPU of the fleet offers it: bad input, exit 4
        place(request("v", page_size_kib=PAGE_4K, partition=ask), Fleet(hosts))
    assert str(caught.value) == (
        "VM 'v': no GPU of the fleet offers MIG profile '1g.6gb' (A30 PCIe (10de:20b7): no MIG geometry kept: "
        "`vnuma gpu-profile import`; GPU 10de:2330: no MIG geometry kept: `vnuma gpu-profile import`)"
    )  # no name recorded: the ids
    assert "gpu-profile import FILE|NAME" in str(caught.value.hint)
    ask = PartitionAsk(PartitionKind.MIG, "3g.40gb", 17)  # offered by zz's H100s, 16 fit
    result = place(request("v", page_size_kib=PAGE_4K, partition=ask), Fleet([*hosts, _mig_host("zz")]))
    reasons = {r.host: r.reason for r in result.rejections if r.host != "zz"}
    assert reasons == {
        "a": "A30 PCIe (10de:20b7): no MIG geometry kept: `vnuma gpu-profile import`",
        "b": "GPU 10de:2330: no MIG geometry kept: `vnuma gpu-profile import`",
    }
    assert "no host can take VM 'v': 1 host: A30 PCIe (10de:20b7): no MIG geometry kept" in str(
        no_placement("v", result))


def test_an_anti_affinity_group_names_every_host_it_holds() -> None:
    fleet = Fleet([make_host("h1"), make_host("h2"), make_host("h3", cores_per_cell=1)])
    apart = {"group": "g", "anti_affinity": AntiAffinity.HOST}
    for vm in ("g1", "g2"):
        chosen = place(request(vm, vcpus=8, **apart), fleet).chosen
        assert chosen is not None
        fleet.add(chosen)
    line = _refused(fleet, request("g3", vcpus=8, **apart))
    where = {p.host: p.vm for p in (fleet.placement("g1"), fleet.placement("g2")) if p is not None}
    assert set(where) == {"h1", "h2"}
    assert "2 hosts: group 'g' (anti-affinity host) has its VMs on hosts 'h1' (VM " in line, line
    assert f"'h1' (VM {where['h1']!r}), 'h2' (VM {where['h2']!r})" in line
    assert "1 host: too few free pCPUs in its cells; closest: h3 (" in line  # got further than the group's hosts


def test_a_host_without_hugepages_says_so_and_what_to_do() -> None:
    bare = make_host("bare", hugepages_2m_gib=0, hugepages_1g_gib=0)
    req = request("v", vcpus=4, memory_gib=4)
    result = place(req, Fleet([bare]))
    assert [(r.check, r.reason) for r in result.rejections] == [("page-size", NO_HUGEPAGES)]
    err = no_placement("v", result)
    assert str(err) == f"no host can take VM 'v': bare: {NO_HUGEPAGES}" and err.hint == NO_HUGEPAGES_HINT
    assert place(replace(req, page_size_kib=PAGE_4K), Fleet([bare])).chosen is not None


def test_a_gpu_only_request_on_a_host_without_hugepages_gets_the_same_hint() -> None:
    bare = make_host("bare", hugepages_2m_gib=0, hugepages_1g_gib=0, gpus_per_cell=1)
    result = place(request("v", vcpus=None, memory_gib=None, gpus=1), Fleet([bare]))
    (r,) = result.rejections
    assert (r.check, r.reason, r.hint) == ("size", NO_HUGEPAGES, NO_HUGEPAGES_HINT)


def _loose(host: Host) -> Host:
    """``host`` with its GPUs on no NUMA node (hwloc puts a GPU local to several nodes under their package)."""
    devices = tuple(replace(d, numa_node=None) if d.kind is DeviceKind.GPU else d for d in host.devices)
    return replace(host, devices=devices)


def test_a_gpu_with_no_numa_node_is_named_and_affinity_preferred_places_it() -> None:
    host = _loose(make_host("snc", cells=2, gpus_per_cell=1))
    req = request("v", vcpus=4, gpus=1)
    (r,) = place(req, Fleet([host])).rejections
    assert r.check == "gpus" and "GPU 0000:10:00.0, 0000:20:00.0 of the host have no NUMA node" in r.reason
    assert "`--gpu-affinity preferred` places it" in r.reason
    assert gist(r) == "the host's free GPUs have no NUMA node: `--gpu-affinity preferred` places them"
    chosen = place(replace(req, gpu_affinity=GpuAffinity.PREFERRED), Fleet([host])).chosen
    assert chosen is not None and [d.kind for d in chosen.devices] == [DeviceKind.GPU]


def test_hosts_of_one_shape_each_name_themselves_in_their_refusal() -> None:
    """Unclaimed hosts of one shape share one fit; resctrl's words name the host (and its hint the command to
    run there), so each host's own is computed: host r2's refusal never names r1."""
    hosts = [parse_capabilities(RDT.read_bytes(), name=name) for name in ("r1", "r2")]
    result = place(request("v", page_size_kib=PAGE_2M, llc_ways=2), Fleet(hosts))
    assert [(r.host, r.check) for r in result.rejections] == [("r1", "resctrl"), ("r2", "resctrl")]
    for r, other in zip(result.rejections, ("r2", "r1"), strict=True):
        assert f"host {r.host!r} keeps no cache ways" in r.reason and other not in r.reason
        assert str(r.hint).endswith(f"vnuma host reserve {r.host} --llc-ways N")


def test_hosts_the_request_ruled_out_are_no_cause() -> None:
    rejections = (
        Rejection("a", "host", "not the requested host 'b'"),
        Rejection("b", "cell-cpus", "cell 0: needs 8 pCPUs, 2 free", missing=6),
    )
    refusal = summarize(rejections)
    assert refusal.line() == "b: cell 0: needs 8 pCPUs, 2 free"
    assert [(c.check, c.hosts) for c in refusal.causes] == [("cell-cpus", 1)]


def test_hosts_alike_count_as_many_and_many_causes_are_counted_together() -> None:
    checks = ["numa-nodes", "smt", "cell-isolation", "cell-cpus", "gpu-reserve", "emulator"]
    rejections = tuple(Rejection(f"h{i}", c, f"reason {i}") for i, c in enumerate(checks))
    refusal = summarize(rejections, hosts=[1, 2, 3, 4, 5, 6])
    assert [c.hosts for c in refusal.causes] == [6, 5, 4, 3, 2, 1]
    line = refusal.line()
    assert line.startswith("6 hosts: ") and "; 3 hosts: 2 other causes; closest: h5" in line
    assert len(line.split("; ")) == MOST_CAUSES + 2


_CHECKS = st.sampled_from([*PIPELINE, "quota"])
_REJECTIONS = st.lists(
    st.builds(
        Rejection, st.sampled_from(["a", "b", "c", "d"]), _CHECKS, st.sampled_from(["r1", "r2"]),
        missing=st.one_of(st.none(), st.integers(0, 9)),
    ),
    max_size=8,
)


@given(_REJECTIONS)
def test_every_counted_host_is_in_one_cause_and_the_closest_got_furthest(rejections: list[Rejection]) -> None:
    refusal = summarize(rejections)
    relevant = [r for r in rejections if r.check not in ("host", "avoid")] or rejections
    assert sum(c.hosts for c in refusal.causes) == len(relevant)
    assert len({(c.check, c.gist) for c in refusal.causes}) == len(refusal.causes)
    best = refusal.closest
    assert (best is None) == (not rejections) and best == closest(rejections)
    if best is not None:
        assert best in relevant
        furthest = max(STAGE.get(r.check, -1) for r in relevant)
        assert STAGE.get(best.check, -1) == furthest
        peers = [r.missing for r in relevant if STAGE.get(r.check, -1) == furthest]
        if any(m is not None for m in peers):
            assert best.missing == min(m for m in peers if m is not None)
        assert any(c.example == best for c in refusal.causes)


def test_a_device_model_reads_the_marketing_name_pci_ids_bracket() -> None:
    dev = PciDevice("0000:3b:00.0", DeviceKind.GPU, "0x10de", "0x20b7", 0, product_name="GA100GL [A30 PCIe]")
    assert dev.model() == "A30 PCIe (10de:20b7)"
    assert replace(dev, product_name="Tesla T4").model() == "Tesla T4 (10de:20b7)"
    assert replace(dev, product_name=None).model() == "10de:20b7"
