"""``host show --svg``: an lstopo-style drawing of one host and of what its VMs hold.

Pure: no I/O; returns the SVG text (:func:`host_svg`). Drawn with drawsvg,
which escapes every text and attribute, so host, tenant and VM names are
data, never markup.

What is drawn: sockets (packages) holding their NUMA cells; per cell its
memory, one bar per hugepage pool (the share each VM holds, in its colour,
then the free rest), its cores with their SMT threads (PUs) and its GPUs
and NICs, each in the frame of its PCIe root complex (virtual functions and
bridges are not drawn); memory-only cells in a box of their own; devices
without a NUMA node at the bottom; a legend of every VM (tenant, vCPUs, cells). A PU is
filled with its VM's colour when a VM holds it (a pinned vCPU or an
isolated emulator pCPU), outlined in it when the VM keeps it empty (thread
policy ``isolate``), dark grey when reserved for the host, blue-grey when in
the pool ``shared`` VMs float over, light grey when free. A GPU passed through
whole is filled with its VM's colour; a GPU holding partitions (MIG instances,
vGPU instances) is drawn used (blue, white label), with a strip along its foot
of one segment per partition in its VM's colour (by MIG start) and a light grey
segment when it still takes more; a tainted device no VM holds is red, a cleaning one amber
(its title says why). What a VM holds comes from the placement
ledger (:class:`vnuma.placement.ledger.fleet.Fleet`), the same accounting
admission uses; a GPU's mode and partitions are
:func:`vnuma.placement.partitions.gpu_use`'s, as ``host show`` prints them.

Element ids, for scripts and tests: ``pu-N`` (CPU N), ``cell-N``,
``socket-N``, ``pages-C-SIZE`` (a pool's bar, SIZE in KiB) with its segments
``pages-C-SIZE-vmI`` and ``pages-C-SIZE-free``, ``dev-ADDRESS`` (``:``
written ``-``) with a partitioned GPU's segments ``dev-ADDRESS-part-K`` and
``dev-ADDRESS-free``, ``rc-C-ROOT`` (root complex ROOT, e.g. ``pci0000-16``, in
cell C; ``unknown`` for devices whose root complex is not known, C ``none``
for devices without a NUMA node), ``legend-vmI``; every element a VM holds has the class
``vmI tenantJ``, I and J numbering the VMs and tenants by name, and a
``<title>`` naming them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import drawsvg as dw

from vnuma.placement.ledger.claim import page_needs
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Isolation, Placement
from vnuma.placement.partitionchoice import gpu_use
from vnuma.placement.pins import vcpu_pins
from vnuma.report import palette
from vnuma.report.pcietree import shown
from vnuma.report.svgparts import EMPTY, PAD, Box, Elements, Owner, framed, rect, stack, text
from vnuma.topology import Cell, Host, PciDevice, format_size_kib
from vnuma.topology.partitions import GpuUse

PU_W, PU_H, GAP = 30, 18, 3
CORES_PER_ROW = 8
CELLS_PER_ROW = 4
DEV_W, DEV_H = 118, 22
BAR_H, LINE = 10, 14
MIN_CELL_W = 240


class _Holders:
    """Who holds what on the host, from the ledger."""

    def __init__(self, host: Host, placements: Sequence[Placement], isolation: Mapping[str, Isolation]) -> None:
        fleet = Fleet([host], list(placements), dict(isolation))
        self.host = host
        self.placements = sorted(placements, key=lambda p: p.vm)
        self.colour = palette.vm_colours((p.vm, p.tenant) for p in self.placements)
        tenants = sorted({p.tenant or "" for p in self.placements})
        self.vm_index = {p.vm: i for i, p in enumerate(self.placements)}
        self.tenant_index = {t: j for j, t in enumerate(tenants)}
        self.by_vm = {p.vm: p for p in self.placements}
        self.cpu: dict[int, Owner] = {}
        shared: dict[int, list[str]] = {}
        for p in self.placements:
            vcpu_of = {next(iter(cpus)): v for v, cpus in vcpu_pins(p).items() if len(cpus) == 1}
            for cpu in sorted(fleet.held_pcpus(p)):
                if cpu in p.dedicated_pcpus:
                    what = f"vCPU {vcpu_of[cpu]}" if cpu in vcpu_of else "emulator threads"
                    self.cpu[cpu] = self.owner(p.vm, f"CPU {cpu}: {what} of {self.label(p.vm)}")
                else:
                    self.cpu[cpu] = Owner(palette.FREE, f"CPU {cpu}: kept empty for {self.label(p.vm)}",
                                          self.css(p.vm), self.colour[p.vm], 2.2)
            for cpu in p.shared_pcpus:
                shared.setdefault(cpu, []).append(p.vm)
        for cpu, vms in shared.items():
            self.cpu.setdefault(cpu, Owner(palette.SHARED_POOL, f"CPU {cpu}: shared pool of {', '.join(vms)}"))
        for cpu in host.reserved_cpus:
            self.cpu[cpu] = Owner(palette.RESERVED, f"CPU {cpu}: reserved for the host")
        self.pages: dict[tuple[int, int], list[tuple[str, int]]] = {}
        for p in self.placements:
            for (cell, size), n in sorted(page_needs(p).items()):
                self.pages.setdefault((cell, size), []).append((p.vm, n))
        self.device = {d.address: p.vm for p in self.placements for d in p.devices}
        self.gpus: dict[str, GpuUse] = gpu_use(fleet.state(host.name))
        self.states = host.device_states

    def label(self, vm: str) -> str:
        tenant = self.by_vm[vm].tenant
        return f"VM {vm} (tenant {tenant})" if tenant else f"VM {vm}"

    def css(self, vm: str) -> str:
        return f"vm{self.vm_index[vm]} tenant{self.tenant_index[self.by_vm[vm].tenant or '']}"

    def owner(self, vm: str, title: str) -> Owner:
        return Owner(self.colour[vm], title, self.css(vm))


def _size(kib: int) -> str:
    return format_size_kib(kib) if kib else "0"


def _dev_id(address: str) -> str:
    return "dev-" + address.replace(":", "-")


def _core(cpus: Sequence[int], h: _Holders) -> Box:
    w = len(cpus) * PU_W + (len(cpus) - 1) * GAP + 2 * PAD
    free = Owner(palette.FREE, "")

    def draw(x: float, y: float) -> Elements:
        core = dw.Rectangle(x, y, w, PU_H + 2 * PAD, fill=palette.CORE_FILL, stroke=palette.OUTLINE, stroke_width=0.5)
        core.append_title(f"core of CPUs {', '.join(map(str, cpus))}")
        out: Elements = [core]
        for i, cpu in enumerate(cpus):
            o = h.cpu.get(cpu) or Owner(free.fill, f"CPU {cpu}: free")
            px = x + PAD + i * (PU_W + GAP)
            out.append(rect(px, y + PAD, PU_W, PU_H, o, f"pu-{cpu}"))
            dark = o.fill not in (palette.FREE, palette.SHARED_POOL)
            out.append(text(str(cpu), px + PU_W / 2, y + PAD + PU_H - 5, 9, text_anchor="middle",
                             fill="#ffffff" if dark else palette.OUTLINE))
        return out

    return Box(w, PU_H + 2 * PAD, draw)


def _cores(cell: Cell) -> list[tuple[int, ...]]:
    """The cell's cores as sorted SMT thread groups, in order of their first CPU."""
    ids = cell.cpu_ids
    groups = {tuple(sorted((c.siblings or frozenset({c.id})) & ids)) for c in cell.cpus}
    return sorted(groups)


def _pool_bar(cell: Cell, size: int, total: int, width: float, h: _Holders) -> Box:
    held = h.pages.get((cell.id, size), [])
    free = total - sum(n for _vm, n in held)
    base = f"pages-{cell.id}-{size}"

    def draw(x: float, y: float) -> Elements:
        label = f"{_size(size)} pages: {free} of {total} free"
        out: Elements = [text(label, x, y + 10, 10)]
        bar = dw.Group(id=base)
        bar.append_title(f"cell {cell.id}: {label}")
        cx = x
        for vm, n in held:
            seg = width * n / total if total else 0
            o = h.owner(vm, f"{n} {_size(size)} pages of {h.label(vm)}")
            bar.append(rect(cx, y + LINE, seg, BAR_H, Owner(o.fill, o.title, o.css, o.fill, 0),
                             f"{base}-vm{h.vm_index[vm]}"))
            cx += seg
        if free > 0:
            bar.append(rect(cx, y + LINE, x + width - cx, BAR_H,
                             Owner(palette.FREE, f"{free} free", stroke_width=0), f"{base}-free"))
        bar.append(dw.Rectangle(x, y + LINE, width, BAR_H, fill="none", stroke=palette.OUTLINE, stroke_width=0.6))
        out.append(bar)
        return out

    return Box(width, LINE + BAR_H + 4, draw)


def _device(dev: PciDevice, h: _Holders) -> Box:
    vm = h.device.get(dev.address)
    what = {"gpu": "GPU", "nic": "NIC"}.get(dev.kind.value, "PCI")
    title = f"{what} {dev.address} ({dev.vendor_id}:{dev.product_id})"
    use = h.gpus.get(dev.address)
    if vm is None and use is not None and use.layout:
        return _partitioned(dev, use, title, h)
    kept = h.states.of(dev.address)
    if vm:
        state = f" ({kept.state.value}: {kept.reason})" if kept is not None and kept.state is not None else ""
        o = h.owner(vm, f"{title}: passed through to {h.label(vm)}{state}")
    elif kept is not None and kept.state is not None:
        colour = palette.TAINTED if kept.state.value == "tainted" else palette.CLEANING
        o = Owner(colour, f"{title}: {kept.state.value} ({kept.reason})")
    else:
        o = Owner(palette.FREE, f"{title}: free")

    def draw(x: float, y: float) -> Elements:
        return [
            rect(x, y, DEV_W, DEV_H, o, _dev_id(dev.address)),
            text(f"{what} {dev.address}", x + 4, y + 15, 10,
                 fill="#ffffff" if vm or (kept is not None and kept.state is not None) else palette.OUTLINE),
        ]

    return Box(DEV_W, DEV_H, draw)


def _partitioned(dev: PciDevice, use: GpuUse, title: str, h: _Holders) -> Box:
    """A GPU holding partitions: used, with a strip of its partitions in their VMs' colours (and what is free)."""
    held = ", ".join(f"{p.label()} ({p.vm})" for p in use.layout)
    vms = sorted({p.vm for p in use.layout})
    o = Owner(palette.USED, f"{title}: {use.mode}: {held}", " ".join(h.css(vm) for vm in vms))
    room = {name: n for name, n in sorted(use.free.items()) if n}
    parts = [(h.owner(p.vm, f"{title}: {use.mode} {p.label()} of {h.label(p.vm)}"), f"part-{k}")
             for k, p in enumerate(use.layout)]
    if room:
        left = ", ".join(f"{name} x{n}" for name, n in room.items())
        parts.append((Owner(palette.FREE, f"{title}: room left for {left}"), "free"))
    strip_h = 6

    def draw(x: float, y: float) -> Elements:
        out: Elements = [rect(x, y, DEV_W, DEV_H, o, _dev_id(dev.address)),
                         text(f"GPU {dev.address}", x + 4, y + 12, 10, fill="#ffffff")]
        w = (DEV_W - 2) / len(parts)
        for k, (part, suffix) in enumerate(parts):
            out.append(rect(x + 1 + k * w, y + DEV_H - strip_h - 1, w, strip_h, part,
                            f"{_dev_id(dev.address)}-{suffix}"))
        return out

    return Box(DEV_W, DEV_H, draw)


def _root_complexes(devices: Sequence[PciDevice], h: _Holders, where: str) -> list[Box]:
    """The GPUs and NICs (not VFs) of ``devices``, framed by root complex (one frame for unknown ones)."""
    by_root: dict[str | None, list[PciDevice]] = {}
    for dev in shown(devices):
        by_root.setdefault(dev.root_complex, []).append(dev)
    out = []
    for root in sorted(by_root, key=lambda r: (r is None, r or "")):
        name = root or "root complex unknown"
        inner = stack([_device(d, h) for d in by_root[root]], 2, GAP)
        ident = f"rc-{where}-{(root or 'unknown').replace(':', '-')}"
        out.append(framed(name, inner, palette.ROOT_FILL, ident, f"PCIe root complex {name}", 9))
    return out


def _cell(cell: Cell, devices: Sequence[PciDevice], h: _Holders) -> Box:
    pools = [(p.size_kib, p.count) for p in cell.pages if p.size_kib != h.host.base_page_kib and p.count]
    cores = [_core(c, h) for c in _cores(cell)]
    grid = stack(cores, CORES_PER_ROW, GAP) if cores else EMPTY
    groups = _root_complexes(devices, h, str(cell.id))
    across = max(1, int((max(MIN_CELL_W, grid.w) + GAP) // (groups[0].w + GAP))) if groups else 1
    dev_row = stack(groups, across, GAP) if groups else EMPTY
    width = max(MIN_CELL_W, grid.w, dev_row.w)
    bars = [_pool_bar(cell, size, n, width, h) for size, n in pools]
    parts = [b for b in (*bars, grid, dev_row) if b.h]
    inner = stack(parts, 1, 6) if parts else Box(width, 0, lambda x, y: [])
    inner = Box(max(width, inner.w), inner.h, inner.draw)
    kind = "memory-only cell" if cell.memory_only else "NUMA cell"
    title = f"{kind} {cell.id} · {_size(cell.memory_kib)}"
    fill = palette.MEMORY_ONLY_FILL if cell.memory_only else palette.CELL_FILL
    return framed(title, inner, fill, f"cell-{cell.id}", title, 11)


def _legend(h: _Holders) -> Box:
    fixed = [
        (Owner(palette.FREE, "free"), "free"),
        (Owner(palette.RESERVED, "reserved"), "reserved for the host"),
        (Owner(palette.SHARED_POOL, "shared pool"), "shared pool (floating vCPUs)"),
        (Owner(palette.FREE, "kept empty", stroke=palette.OUTLINE, stroke_width=2.2), "kept empty (outlined)"),
    ]
    entries: list[tuple[Owner, str, str | None]] = [(o, t, None) for o, t in fixed]
    for p in h.placements:
        cells = ",".join(str(c) for c in sorted(set(p.host_cells)))
        line = f"{p.vm} · {p.tenant or '-'} · {p.vcpus} vCPU{'s' * (p.vcpus != 1)} · cells {cells}"
        entries.append((h.owner(p.vm, h.label(p.vm)), line, f"legend-vm{h.vm_index[p.vm]}"))
    col_w = 330
    rows = (len(entries) + 2) // 3

    def draw(x: float, y: float) -> Elements:
        out: Elements = [text("Legend", x, y + 12, 12, font_weight="bold")]
        for i, (o, label, id_) in enumerate(entries):
            ex, ey = x + (i // rows) * col_w, y + 20 + (i % rows) * 18
            out.append(rect(ex, ey, 22, 13, o, id_))
            shown = label if len(label) <= 48 else label[:47] + "…"
            out.append(text(shown, ex + 28, ey + 11, 10))
        return out

    return Box(3 * col_w, 20 + rows * 18, draw)


def host_svg(host: Host, placements: Sequence[Placement], isolation: Mapping[str, Isolation]) -> str:
    """The drawing of ``host`` with what ``placements`` (its VMs) hold, as SVG text."""
    h = _Holders(host, placements, isolation)
    cell_ids = {c.id for c in host.cells}
    devs_of: dict[int | None, list[PciDevice]] = {}
    for d in host.devices:
        devs_of.setdefault(d.numa_node if d.numa_node in cell_ids else None, []).append(d)
    sockets: dict[int | None, list[Box]] = {}
    memory_only: list[Box] = []
    for cell in host.cells:
        box = _cell(cell, devs_of.get(cell.id, []), h)
        if cell.memory_only:
            memory_only.append(box)
        else:
            sockets.setdefault(min((c.socket for c in cell.cpus if c.socket is not None), default=None), []).append(box)
    parts: list[Box] = []
    for s in sorted(sockets, key=lambda s: (s is None, s or 0)):
        name = f"Package {s}" if s is not None else "Package (unknown socket)"
        parts.append(framed(name, stack(sockets[s], CELLS_PER_ROW), palette.SOCKET_FILL,
                             f"socket-{s if s is not None else 'unknown'}", name))
    if memory_only:
        parts.append(framed("Memory-only cells (CXL, HBM)", stack(memory_only, CELLS_PER_ROW),
                             palette.SOCKET_FILL, "memory-only", "cells with memory and no CPUs"))
    loose = _root_complexes(devs_of.get(None, []), h, "none")
    if loose:
        parts.append(framed("Devices with no NUMA node", stack(loose, 4, GAP), palette.SOCKET_FILL, "no-node",
                            "no NUMA node"))
    body = stack(parts, 1, 10)
    reserved = len(host.reserved_cpus)
    title = f"Host {host.name} · {len(host.cells)} cells · {len(host.cpu_ids)} CPUs ({reserved} reserved)"
    title += f" · {len(h.placements)} VM{'s' * (len(h.placements) != 1)}"
    legend = _legend(h)
    width = max(body.w, legend.w, 7 * len(title)) + 24
    height = 30 + body.h + 16 + legend.h + 12
    d = dw.Drawing(width, height, id_prefix="vnuma")
    d.append(dw.Rectangle(0, 0, width, height, fill=palette.BACKGROUND))
    d.append(text(title, 12, 20, 14, font_weight="bold"))
    for el in body.draw(12, 30):
        d.append(el)
    for el in legend.draw(12, 30 + body.h + 16):
        d.append(el)
    return d.as_svg()
