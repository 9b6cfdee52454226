"""The guest's NCCL topology file (``NCCL_TOPO_FILE``): what NCCL cannot read from inside a VM.

Pure: no I/O. NCCL reads the PCIe tree, NUMA nodes and NVLinks from sysfs
and NVML; in a VM it finds no NVLink and a tree that says little, and falls
back to slow paths. Given ``NCCL_TOPO_FILE`` it starts from this document
instead (NCCL's ``src/graph/xml.cc`` reads it, ``topo.cc`` builds its graph
from it; NCCL then fills in only the attributes the file leaves out):

* ``<system version="1">``, one ``<cpu numaid affinity arch>`` per guest NUMA
  node (``affinity``: the node's vCPUs as a sysfs ``cpumap`` mask), and one
  ``<cpu numaid="-1">`` for devices the host gives no node (NCCL's own
  reading of such a device);
* below a node, ``<pci busid class vendor device link_speed link_width>`` per
  passed-through GPU and NIC, at the **guest's** bus id (as
  :mod:`vnuma.render.pcie` lays them out), with the **host's** link; devices
  the guest reads behind one mirrored switch nest in a ``<pci>`` for the
  switch at its upstream port's guest bus id (NCCL nests a device under the
  upstream port two levels above it), with the host switch's uplink;
* ``<gpu dev rank sm gdr>`` in the ``<pci>`` of a GPU: ``dev`` and ``rank``
  its index among the guest's GPUs in PCI order (``CUDA_DEVICE_ORDER=
  PCI_BUS_ID``, :attr:`GuestDevice.cuda_index`), ``sm`` its compute
  capability where the model is known (else left for NCCL to read), with one
  ``<nvlink target count tclass="0x030200"/>`` per GPU of the VM the host
  links it to (``host import --nvidia-smi-topo``);
* ``<nic><net name dev speed port gdr/></nic>`` in the ``<pci>`` of a NIC.

Children follow the guest's PCI order, which follows the host's switches
and root complexes (expanders in order, depth first), so NCCL's GPU order
and rings follow them too. No XML declaration: NCCL's reader takes none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.placement.model import Placement
from vnuma.render.guestview import GuestDevice
from vnuma.render.pcie import DOWNSTREAM, PcieLayout
from vnuma.render.view import DomainView
from vnuma.topology import DeviceKind, Host, PciDevice, PciLink
from vnuma.topology.nvlink import nvlink_count

NCCL_ARCH = {"x86_64": "x86_64", "aarch64": "arm64", "ppc64le": "ppc64", "ppc64": "ppc64"}
"""libvirt's guest arch -> NCCL's ``arch`` (``kvDictCpuArch``)."""

GPU_CLASS = "0x030200"
NIC_CLASS = "0x020000"
MELLANOX = "0x15b3"

SM_BY_PCI_ID = {
    "0x10de:0x20b0": 80, "0x10de:0x20b2": 80, "0x10de:0x20b5": 80, "0x10de:0x20f1": 80,  # A100 SXM4/PCIe
    "0x10de:0x20b7": 80,  # A30
    "0x10de:0x2330": 90, "0x10de:0x2331": 90, "0x10de:0x2335": 90,  # H100 SXM5, H100 PCIe, H200 SXM
    "0x10de:0x26b9": 89, "0x10de:0x27b8": 89,  # L40S, L4
}
"""Compute capability x10 (NCCL's ``sm``) by PCI id: names from pci.ids, capabilities from NVIDIA's CUDA GPU
list. A model not here gets no ``sm``: NCCL keeps a value the file gives, so none is better than a guess."""


@dataclass(frozen=True, slots=True)
class _Dev:
    """A guest GPU or NIC with what the file says of it."""

    guest: GuestDevice
    host: PciDevice | None
    switch: str | None
    """The guest bus id of the mirrored switch's upstream port it sits behind, None on a root port of its own."""
    link: PciLink | None
    """Its host PCIe link; an SR-IOV virtual function's is its physical function's (the VF has none of its own)."""


def nccl_topology(host: Host, placement: Placement, domain: DomainView) -> str:
    """The NCCL topology document of ``placement``'s guest as ``domain`` renders it.

    Raises:
        InvalidInputError: the VM has no GPU (NCCL has nothing to place).
    """
    by_address = {d.address: d for d in host.devices}
    parent_gpu = {p.uuid: p.gpu for p in placement.partitions}
    switches = _switches(domain.pcie)
    devs = []
    for g in domain.guest.devices:
        if g.cuda_index is None and g.kind != DeviceKind.NIC.value:
            continue
        h = by_address.get(parent_gpu.get(g.address, g.address))
        pf = by_address.get(h.pf) if h is not None and h.pf is not None else None
        link = h.link if h is not None and h.link is not None else (pf.link if pf is not None else None)
        devs.append(_Dev(g, h, switches.get(g.guest_address), link))
    if not any(d.guest.cuda_index is not None for d in devs):
        raise InvalidInputError(
            f"VM {placement.vm!r} has no GPU: an NCCL topology describes GPUs",
            hint="ask for GPUs when placing it (vnuma place ... --gpus N)",
        )
    system = etree.Element("system", version="1")
    arch = NCCL_ARCH.get(domain.arch, domain.arch)
    # A GPU's memory nodes are no CPU NUMA domain: NCCL finds the GPU on its CPU node, as on the host.
    nodes = [(str(n.id), _cpumask(n.vcpus)) for n in domain.guest.nodes if n.gpu is None]
    if any(d.guest.node is None for d in devs):
        nodes.append(("-1", None))
    nic_names, links = _nic_names(devs), _nvlinks(host, devs)
    for numaid, mask in nodes:
        cpu = etree.SubElement(system, "cpu", numaid=numaid)
        if mask is not None:
            cpu.set("affinity", mask)
        cpu.set("arch", arch)
        mine = [d for d in devs if str(d.guest.node if d.guest.node is not None else -1) == numaid]
        _children(cpu, sorted(mine, key=lambda d: d.guest.guest_address), host, nic_names, links)
    etree.indent(system, space="  ")
    return etree.tostring(system, encoding="unicode") + "\n"


def _switches(pcie: PcieLayout) -> dict[str, str]:
    """Guest address of each device behind a mirrored switch -> its upstream port's guest address."""
    ports = {p.index: p for p in pcie.root_ports}
    out: dict[str, str] = {}
    for h in pcie.hostdevs:
        port = ports.get(str(int(h.bus, 16)))
        if port is not None and port.model == DOWNSTREAM:
            out[h.guest_address] = ports[str(int(port.bus, 16))].guest_address
    return out


def _children(
    parent: etree._Element, devs: list[_Dev], host: Host, names: Mapping[str, str],
    nvlinks: Mapping[str, list[tuple[str, int]]],
) -> None:
    """The ``<pci>`` elements of ``devs`` (in guest order) below ``parent``, a switch's devices in its ``<pci>``."""
    done: set[str] = set()
    for dev in devs:
        if dev.switch is None:
            _device(parent, dev, names, nvlinks)
        elif dev.switch not in done:
            done.add(dev.switch)
            group = [d for d in devs if d.switch == dev.switch]
            switch = etree.SubElement(parent, "pci", busid=dev.switch, **{"class": "0x060400"})
            _link(switch, _uplink(host, [d.host for d in group]))
            for member in group:
                _device(switch, member, names, nvlinks)


def _nvlinks(host: Host, devs: Iterable[_Dev]) -> dict[str, list[tuple[str, int]]]:
    """Guest bus id of each whole GPU -> (peer's guest bus id, NVLinks) for the VM's GPUs the host links it to,
    in guest order (a GPU partition has no NVLink of its own)."""
    whole = sorted((d for d in devs if d.guest.kind == DeviceKind.GPU.value and d.host is not None),
                   key=lambda d: d.guest.guest_address)
    return {
        a.guest.guest_address: [
            (b.guest.guest_address, n) for b in whole
            if b is not a and (n := nvlink_count(host.nvlinks, a.guest.address, b.guest.address))
        ]
        for a in whole
    }


def _device(
    parent: etree._Element, dev: _Dev, names: Mapping[str, str], nvlinks: Mapping[str, list[tuple[str, int]]],
) -> None:
    g, h = dev.guest, dev.host
    gpu = g.cuda_index is not None
    cls = f"0x{h.pci_class:06x}" if h is not None and h.pci_class is not None else (GPU_CLASS if gpu else NIC_CLASS)
    pci = etree.SubElement(parent, "pci", busid=g.guest_address, **{"class": cls})
    if h is not None:
        pci.set("vendor", h.vendor_id)
        pci.set("device", h.product_id)
    _link(pci, dev.link)
    if gpu:
        el = etree.SubElement(pci, "gpu", dev=str(g.cuda_index), rank=str(g.cuda_index))
        sm = SM_BY_PCI_ID.get(f"{h.vendor_id}:{h.product_id}") if h is not None else None
        if sm is not None:
            el.set("sm", str(sm))
        el.set("gdr", "1")
        for target, count in nvlinks.get(g.guest_address, ()):
            etree.SubElement(el, "nvlink", target=target, count=str(count), tclass=GPU_CLASS)
        return
    net = etree.SubElement(etree.SubElement(pci, "nic"), "net", name=names[g.guest_address])
    net.set("dev", str(sorted(names).index(g.guest_address)))
    net.set("speed", str(_mbps(dev.link)))
    net.set("port", "1")
    net.set("gdr", "1" if h is not None and h.vendor_id == MELLANOX else "0")


def _nic_names(devs: Iterable[_Dev]) -> dict[str, str]:
    """Guest address -> the name the guest gives the NIC: Mellanox functions ``mlx5_N`` in PCI order (the
    order mlx5 probes them), others systemd's predictable ``enpBsS[fF]``."""
    nics = sorted((d for d in devs if d.guest.cuda_index is None), key=lambda d: d.guest.guest_address)
    out: dict[str, str] = {}
    mlx = 0
    for d in nics:
        if d.host is not None and d.host.vendor_id == MELLANOX:
            out[d.guest.guest_address], mlx = f"mlx5_{mlx}", mlx + 1
        else:
            _domain, bus, rest = d.guest.guest_address.split(":")
            slot, function = rest.split(".")
            out[d.guest.guest_address] = f"enp{int(bus, 16)}s{int(slot, 16)}" + (f"f{function}" if function != "0"
                                                                                  else "")
    return out


def _uplink(host: Host, members: Iterable[PciDevice | None]) -> PciLink | None:
    """The link of the host switch the ``members`` share (the deepest bridge above all of them that the host
    lists), else the first member's own."""
    known = [m for m in members if m is not None]
    if not known:
        return None
    shared = set(known[0].bridges).intersection(*(m.bridges for m in known[1:]))
    by_address = {d.address: d for d in host.devices}
    for bridge in known[0].bridges:  # nearest first
        if bridge in shared and bridge in by_address and by_address[bridge].link is not None:
            return by_address[bridge].link
    return known[0].link


def _link(el: etree._Element, link: PciLink | None) -> None:
    """NCCL's ``link_speed`` (sysfs' ``32.0 GT/s PCIe``) and ``link_width``; empty and 0 when unknown (NCCL then
    assumes its defaults, as for a device sysfs says nothing of)."""
    el.set("link_speed", f"{link.speed_gts:.1f} GT/s PCIe" if link is not None else "")
    el.set("link_width", str(link.width) if link is not None else "0")


_LANE_MBPS = {2.5: 2000, 5.0: 4000, 8.0: 7877, 16.0: 15754, 32.0: 31508, 64.0: 63015}
"""Data rate of one PCIe lane after line encoding (8b/10b to 5 GT/s, 128b/130b from 8 GT/s), Mbit/s."""


def _mbps(link: PciLink | None) -> int:
    """A NIC's ``speed``: what its PCIe link carries (the inventory records no port speed), 0 when unknown (NCCL
    then takes 10 Gbit/s)."""
    if link is None:
        return 0
    return int(_LANE_MBPS.get(link.speed_gts, link.speed_gts * 1000 * 128 / 130) * link.width)


def _cpumask(vcpus: Iterable[int]) -> str:
    """The vCPUs as sysfs' ``cpumap`` (and NCCL's ``affinity``): 32-bit words of 8 hex digits, highest first."""
    cpus = list(vcpus)
    words = [0] * (max(cpus, default=0) // 32 + 1)
    for c in cpus:
        words[c // 32] |= 1 << (c % 32)
    return ",".join(f"{w:08x}" for w in reversed(words))
