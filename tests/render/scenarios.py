"""The golden-file scenarios: one host, placement, options and template each."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from vnuma.placement.model import CpuPolicy, IoThreadPolicy, MemoryMode, Placement, ThreadPolicy
from vnuma.render.domain import render_domain
from vnuma.render.view import RenderOptions
from vnuma.topology import KIB_PER_GIB, PAGE_1G, PAGE_2M, PAGE_4K, Host
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl, ResctrlPolicy

TESTS = Path(__file__).resolve().parent.parent
GOLDEN_DIR = TESTS / "golden"
OPERATOR_TEMPLATES = TESTS / "data" / "templates"
METACHAR_VM = "a<b&\"c'"
METACHAR_TENANT = "t&<en>\"ant'"


@dataclass(frozen=True)
class Scenario:
    """A named rendering case; ``render()`` gives the validated domain XML."""

    name: str
    host: Host
    placement: Placement
    options: RenderOptions = field(default_factory=RenderOptions)
    template: Path | None = None

    @property
    def golden(self) -> Path:
        """Path of this scenario's golden file."""
        return GOLDEN_DIR / f"{self.name}.xml"

    def render(self) -> str:
        """Render and validate with vnuma's renderer."""
        return render_domain(self.host, self.placement, options=self.options, template=self.template)


def _gib(n: int) -> int:
    return n * KIB_PER_GIB


def _build() -> tuple[Scenario, ...]:
    host = make_host()
    gpu_host = make_host("gpu-host", gpus_per_cell=2)
    snc_host = make_host("snc-host", cells=4, cells_per_socket=2)
    rdt_host = _with_resctrl(make_host("rdt-host"), cdp=False)
    cdp_host = _with_resctrl(make_host("cdp-host"), cdp=True)
    two_2m = [CellSpec(0, 4, _gib(4), PAGE_2M), CellSpec(1, 4, _gib(4), PAGE_2M)]
    return (
        Scenario("one-cell-2m", host, make_placement(host, [CellSpec(0, 4, _gib(4), PAGE_2M)], threads=2)),
        Scenario(
            "two-cell-1g",
            host,
            make_placement(
                host, [CellSpec(0, 8, _gib(8), PAGE_1G), CellSpec(1, 8, _gib(8), PAGE_1G)], threads=2
            ),
        ),
        Scenario(
            "two-cells-one-socket",  # an SNC/NPS host: two NUMA cells of one socket make one guest socket
            snc_host,
            make_placement(
                snc_host, [CellSpec(2, 8, _gib(8), PAGE_1G), CellSpec(3, 8, _gib(8), PAGE_1G)], threads=2
            ),
        ),
        Scenario(
            "two-cell-strict-hugepages",
            host,
            make_placement(
                host, [CellSpec(0, 4, _gib(4), PAGE_2M), CellSpec(1, 4, _gib(4), PAGE_1G)], threads=2
            ),
        ),
        Scenario(
            "gpus-on-two-cells",
            gpu_host,
            make_placement(
                gpu_host,
                [CellSpec(0, 8, _gib(16), PAGE_1G, gpus=2), CellSpec(1, 8, _gib(16), PAGE_1G, gpus=2)],
                vm="infer-1",
                threads=2,
            ),
        ),
        Scenario(
            "guest-hints",  # the guest view as an SMBIOS OEM string (apply --guest-hints)
            gpu_host,
            make_placement(
                gpu_host,
                [CellSpec(0, 8, _gib(16), PAGE_1G, gpus=1), CellSpec(1, 8, _gib(16), PAGE_1G, gpus=2)],
                vm="infer-2",
                threads=2,
            ),
            RenderOptions(guest_hints=True),
        ),
        Scenario(
            "isolate-threads",
            host,
            make_placement(host, [CellSpec(0, 4)], threads=1, thread_policy=ThreadPolicy.ISOLATE),
        ),
        Scenario(
            "require-threads",
            host,
            make_placement(host, [CellSpec(0, 4)], threads=2, thread_policy=ThreadPolicy.REQUIRE),
        ),
        Scenario(
            "emulator-isolate",
            host,
            make_placement(host, [CellSpec(0, 4)], threads=1, isolate_emulator=True),
            RenderOptions(iothreads=2),
        ),
        Scenario(
            "restrictive-memnode",
            host,
            make_placement(host, two_2m, threads=2),
            RenderOptions(memnode_mode="restrictive"),
        ),
        Scenario(
            "shared-cpu-policy",
            host,
            make_placement(
                host,
                [CellSpec(0, 2, _gib(2), PAGE_4K), CellSpec(1, 2, _gib(2), PAGE_4K)],
                cpu_policy=CpuPolicy.SHARED,
            ),
        ),
        _mixed_scenario("mixed-cpu-policy", host),
        Scenario(
            "operator-template-override",
            host,
            make_placement(host, [CellSpec(0, 4)], threads=2),
            template=OPERATOR_TEMPLATES / "disk-and-network.xml.j2",
        ),
        Scenario(
            "names-with-metacharacters",
            host,
            make_placement(host, [CellSpec(0, 2)], vm=METACHAR_VM, tenant=METACHAR_TENANT, threads=2),
        ),
        Scenario(
            "tcg-one-cell",
            host,
            make_placement(host, [CellSpec(0, 2, 128 * 1024, PAGE_2M)], threads=1),
            RenderOptions(domain_type="qemu", emulator="/usr/bin/qemu-system-x86_64"),
        ),
        Scenario(
            "iothreads-device-local",
            gpu_host,
            replace(
                make_placement(gpu_host, [CellSpec(0, 4, _gib(4), PAGE_2M), CellSpec(1, 4, _gib(4), PAGE_2M, gpus=1)]),
                iothreads=2, iothread_policy=IoThreadPolicy.DEVICE_LOCAL,
            ),
        ),
        Scenario(
            "asymmetric-cells",
            gpu_host,
            make_placement(
                gpu_host, [CellSpec(0, 12, _gib(12), PAGE_1G, gpus=2), CellSpec(1, 4, _gib(4), PAGE_1G)], threads=2
            ),
        ),
        Scenario(
            "preferred-memory",
            host,
            make_placement(host, [replace(c, memory_mode=MemoryMode.PREFERRED) for c in two_2m], threads=2),
        ),
        Scenario(
            "interleaved-memory",
            host,
            make_placement(host, [replace(c, memory_mode=MemoryMode.INTERLEAVE) for c in two_2m], threads=2),
        ),
        Scenario(
            "per-cell-memory-modes",
            host,
            make_placement(
                host, [two_2m[0], replace(two_2m[1], memory_mode=MemoryMode.INTERLEAVE)], threads=2
            ),
        ),
        Scenario(
            "cache-slice-and-bandwidth-cap",
            rdt_host,
            replace(make_placement(rdt_host, two_2m, threads=2), llc=((0, 2), (1, 2)), mem_bw=((0, 30), (1, 30))),
        ),
        Scenario(
            "cache-slice-cdp",
            cdp_host,
            replace(make_placement(cdp_host, [CellSpec(0, 4, _gib(4), PAGE_2M)], threads=2), llc=((0, 3),)),
        ),
        # From the capabilities fixtures, placed by the engine: two SNC cells share one L3 (one <cache>);
        # an AMD socket's cell spans four CCX caches (a VM on two CCXs gets a slice on each).
        _engine_scenario("cache-slice-snc", "x86-snc2-resctrl.xml", numa_nodes=2, vcpus=4),
        _engine_scenario("cache-slice-amd-ccx", "amd-1socket-4ccx-resctrl.xml", numa_nodes=1, vcpus=12),
        # A cold tier, placed by the engine: on the HMAT host's CXL-like memory-only cell rated from the VM's
        # cell (guest HMAT copied), and on the hwloc SNC host's CXL-DRAM expander (SLIT only, no HMAT).
        _cold_scenario("cold-tier-hmat", "capabilities/x86-hmat-memonly.xml", avoid=(0,)),
        _cold_scenario("cold-tier-cxl-hwloc", "hwloc/2pkg-snc-smt-cxl-gpu.xml", avoid=()),
        # Two GPUs with an SR-IOV virtual function of a NIC beside each (<interface type='hostdev'> with a
        # derived MAC), the first GPU's audio function along (its IOMMU group), on the DGX-like host.
        _vf_scenario("nic-vf-per-gpu"),
        # Four GPUs of one cell under two host root complexes (a switch of two on each): two expanders on the
        # same guest node, each mirroring its switch.
        _dgx_scenario("gpus-two-root-complexes", gpus=4),
        # Two MIG instances of one H100 and a vGPU on an SR-IOV VF: mediated-device hostdevs by UUID on the
        # expander of their GPU's guest cell.
        _partition_scenario("mig-two-instances", "mig", "3g.40gb", 2),
        _partition_scenario("vgpu-on-vf", "vgpu", "nvidia-1049", 1),
        # A GH200-like host whose GPU has its HBM3 node and seven nodes kept for MIG: eight CPU-less guest
        # nodes tied to the GPU's hostdev (<acpi nodeset>, libvirt 11.8.0).
        _grace_scenario("gh200-gpu-memory-nodes", "gh200-mig-capabilities.xml", "gh200-numa-nodedevs.xml"),
    )


def _engine_scenario(name: str, capabilities: str, *, numa_nodes: int, vcpus: int) -> Scenario:
    """A VM asking 2 ways and a cap of 20 on the fixture host (1 way kept for the host), as the engine places
    it."""
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest
    from vnuma.sources.capabilities import parse_capabilities

    data = (TESTS / "data" / "capabilities" / capabilities).read_bytes()
    host = replace(parse_capabilities(data, name=name), resctrl_policy=ResctrlPolicy(1))
    request = VmRequest("vm1", "acme", vcpus, _gib(2), numa_nodes=numa_nodes, page_size_kib=PAGE_4K, llc_ways=2,
                        mem_bw=20)
    chosen = place(request, Fleet([host])).chosen
    assert chosen is not None and chosen.llc, name
    return Scenario(name, host, chosen)


def _mixed_scenario(name: str, host: Host) -> Scenario:
    """8 vCPUs over 2 guest cells, vCPUs 0-1 and 4 dedicated, the others floating, as the engine places it."""
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest

    request = VmRequest("vm1", "acme", 8, _gib(4), numa_nodes=2, page_size_kib=PAGE_2M,
                        cpu_policy=CpuPolicy.MIXED, dedicated_vcpus=frozenset({0, 1, 4}))
    chosen = place(request, Fleet([host])).chosen
    assert chosen is not None, name
    return Scenario(name, host, chosen)


def _cold_scenario(name: str, fixture: str, *, avoid: tuple[int, ...]) -> Scenario:
    """A 4-vCPU VM with 16 GiB of cold memory (CPU cells ``avoid`` avoided), as the engine places it."""
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest
    from vnuma.sources.capabilities import parse_capabilities
    from vnuma.sources.hwloc import parse_hwloc

    data = (TESTS / "data" / fixture).read_bytes()
    host = parse_hwloc(data, name=name) if fixture.startswith("hwloc/") else parse_capabilities(data, name=name)
    request = VmRequest("vm1", "acme", 4, _gib(4), page_size_kib=PAGE_4K, cold_memory_kib=_gib(16),
                        avoid_cells=frozenset((name, c) for c in avoid))
    chosen = place(request, Fleet([host])).chosen
    assert chosen is not None and chosen.cold, name
    return Scenario(name, host, chosen)


def grace_host(name: str, capabilities: str, nodedevs: str) -> Host:
    """A Grace host of ``tests/data/grace`` as ``host import --capabilities --nodedev`` reads it."""
    from vnuma.services.hosts import import_documents

    grace = TESTS / "data" / "grace"
    caps, devs = grace / capabilities, grace / nodedevs
    return import_documents(name, (caps.name, caps.read_bytes()), [(devs.name, devs.read_bytes())], None).host


def _grace_scenario(name: str, capabilities: str, nodedevs: str) -> Scenario:
    """An 8-vCPU VM with one GPU on a Grace host, as the engine places it."""
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest

    host = grace_host(name, capabilities, nodedevs)
    chosen = place(VmRequest("vm1", "acme", 8, _gib(16), page_size_kib=PAGE_1G, gpus=1), Fleet([host])).chosen
    assert chosen is not None and len(chosen.devices) == 1, name
    return Scenario(name, host, chosen)


def _vf_scenario(name: str) -> Scenario:
    from vnuma.placement.model import NicFunction

    return _dgx_scenario(name, gpus=2, nics_per_gpu=True, nic_function=NicFunction.VF)


def _dgx_scenario(name: str, **asks: Any) -> Scenario:
    """A 4-vCPU VM asking ``asks`` on the DGX-like host, as the engine places it."""
    from tests.placement.test_nics import _dgx
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest

    host = _dgx(name)
    chosen = place(VmRequest("vm1", "acme", 4, _gib(4), page_size_kib=PAGE_4K, **asks), Fleet([host])).chosen
    assert chosen is not None and any(d.peer_of for d in chosen.devices), name
    return Scenario(name, host, chosen)


def _partition_scenario(name: str, kind: str, what: str, count: int) -> Scenario:
    """A 4-vCPU VM asking ``count`` partitions (the engine's placement on the partition tests' hosts)."""
    from tests.placement.test_partitions import _mig_host, _vgpu_host
    from vnuma.placement.engine import place
    from vnuma.placement.ledger.fleet import Fleet
    from vnuma.placement.model import VmRequest
    from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind

    host = _mig_host(name) if kind == "mig" else _vgpu_host(name)
    ask = PartitionAsk(PartitionKind(kind), what, count)
    chosen = place(VmRequest("vm1", "acme", 4, _gib(4), page_size_kib=PAGE_4K, partition=ask), Fleet([host])).chosen
    assert chosen is not None and len(chosen.partitions) == count, name
    return Scenario(name, host, chosen)


def _with_resctrl(host: Host, *, cdp: bool) -> Host:
    """``host`` with an Intel-like L3 (22 MiB, 2 MiB ways) per cell, CAT (code and data apart with ``cdp``)
    and MBA (10 % steps)."""
    if cdp:
        controls = (CacheControl(2048, 2048, CacheType.CODE, 8), CacheControl(2048, 2048, CacheType.DATA, 8))
    else:
        controls = (CacheControl(2048, 4096, CacheType.BOTH, 16),)
    banks = tuple(CacheBank(c.id, 3, CacheType.BOTH, 22 * 1024, c.cpu_ids, controls) for c in host.cells)
    nodes = tuple(BandwidthNode(c.id, c.cpu_ids, 10, 10, 8) for c in host.cells)
    return replace(host, resctrl=Resctrl(banks, nodes), resctrl_policy=ResctrlPolicy(2))


SCENARIOS = _build()
BY_NAME = {s.name: s for s in SCENARIOS}
