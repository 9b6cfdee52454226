"""vnuma's semantic checks of a domain document against the placement it renders.

Pure: no I/O. Each check raises :class:`RenderError` naming the element
(``vcpupin vcpu=3 cpuset=77: pCPU 77 is not in the placement``). They hold
whatever the template did, so an operator template cannot quietly unpin a
vCPU, move memory off the claimed cells, or hand libvirt distances that
corrupt its heap.
"""

from __future__ import annotations

from lxml import etree

from vnuma.errors import InvalidInputError, RenderError
from vnuma.placement.model import CellAssignment, MemoryMode, Placement
from vnuma.render.distances import distance_problem
from vnuma.render.gpumemory import GpuNode, gpu_nodes, nodesets
from vnuma.render.metadata import metadata_of
from vnuma.topology import PAGE_4K, Host, format_cpuset, parse_cpuset

# libvirt's memory units (virScaleInteger): b/bytes, decimal KB/MB/..., binary k/KiB/M/MiB/...
_UNIT_BYTES: dict[str, int] = {
    "b": 1,
    "bytes": 1,
    **{letter: 1024**power for power, letter in enumerate("kmgtpe", start=1)},
    **{f"{letter}ib": 1024**power for power, letter in enumerate("kmgtpe", start=1)},
    **{f"{letter}b": 1000**power for power, letter in enumerate("kmgtpe", start=1)},
}


def check_domain(root: etree._Element, host: Host, placement: Placement) -> None:
    """Run every semantic check on a parsed ``<domain>``.

    Raises:
        RenderError: the first problem found, naming the element.
    """
    if root.tag != "domain":
        raise RenderError(f"rendered XML has root <{root.tag}>, not <domain>")
    cells = {c.guest_cell: c for c in (*placement.cells, *placement.cold)}  # the cold cell has no vCPUs
    gpu_cells = gpu_nodes(host, placement)
    vcpus = check_vcpu_count(root, placement)
    check_topology(root, vcpus)
    check_pins(root, placement, cells, vcpus)
    check_numatune(root, host, cells)
    check_cells(root, cells, vcpus, gpu_cells, host.base_page_kib)
    check_distances(root)
    check_devices(root, placement)
    check_gpu_nodesets(root, gpu_cells)
    check_metadata(root, placement)


def check_vcpu_count(root: etree._Element, placement: Placement) -> int:
    """``<vcpu>`` must be present and equal the placement's vCPU count; returns it."""
    vcpu = root.find("vcpu")
    if vcpu is None:
        raise RenderError("domain has no <vcpu>")
    count = _int(vcpu.text, f"vcpu {vcpu.text!r}")
    if count != placement.vcpus:
        raise RenderError(f"vcpu {count}: the placement has {placement.vcpus} vCPUs")
    return count


def check_topology(root: etree._Element, vcpus: int) -> None:
    """``<cpu><topology>`` sockets*dies*cores*threads must equal the vCPU count."""
    topo = root.find("cpu/topology")
    if topo is None:
        return
    names = ("sockets", "dies", "cores", "threads")
    values = {n: _int(topo.get(n, "1"), f"cpu topology {n}={topo.get(n)!r}") for n in names}
    product = values["sockets"] * values["dies"] * values["cores"] * values["threads"]
    if product != vcpus:
        shown = " ".join(f"{n}={values[n]}" for n in names)
        raise RenderError(f"cpu topology {shown}: makes {product} vCPUs, the domain has {vcpus}")


def check_pins(
    root: etree._Element, placement: Placement, cells: dict[int, CellAssignment], vcpus: int
) -> None:
    """Every vCPU pinned once, inside its guest cell's pCPUs; emulator and iothread pins inside the VM's."""
    placed = frozenset(p for c in cells.values() for p in c.pcpus) | frozenset(placement.emulator_pcpus)
    cell_of = {v: c for c in cells.values() for v in c.vcpus}
    pinned: set[int] = set()
    for pin in root.iterfind("cputune/vcpupin"):
        vcpu = _int(pin.get("vcpu"), f"vcpupin vcpu={pin.get('vcpu')!r}")
        where = f"vcpupin vcpu={vcpu} cpuset={pin.get('cpuset')}"
        cpuset = _cpuset(pin.get("cpuset"), where)
        if vcpu >= vcpus:
            raise RenderError(f"{where}: the domain has no vCPU {vcpu} (it has {vcpus})")
        if vcpu not in cell_of:
            raise RenderError(f"{where}: vCPU {vcpu} is in no guest cell of the placement")
        if vcpu in pinned:
            raise RenderError(f"{where}: vCPU {vcpu} is pinned more than once")
        pinned.add(vcpu)
        _inside(cpuset, placed, where, "the placement")
        cell = cell_of[vcpu]
        _inside(cpuset, frozenset(cell.pcpus), where, f"guest cell {cell.guest_cell}'s pCPUs")
    unpinned = set(cell_of) - pinned
    if unpinned:
        raise RenderError(f"cputune: vCPU(s) {format_cpuset(unpinned)} have no vcpupin")
    for pin in root.iterfind("cputune/emulatorpin"):
        where = f"emulatorpin cpuset={pin.get('cpuset')}"
        _inside(_cpuset(pin.get("cpuset"), where), placed, where, "the placement")
    for pin in root.iterfind("cputune/iothreadpin"):
        where = f"iothreadpin iothread={pin.get('iothread')} cpuset={pin.get('cpuset')}"
        _inside(_cpuset(pin.get("cpuset"), where), placed, where, "the placement")


def check_numatune(root: etree._Element, host: Host, cells: dict[int, CellAssignment]) -> None:
    """``<numatune>`` binds memory to the placed host cells, one memnode per guest cell."""
    memory = root.find("numatune/memory")
    if memory is None:
        raise RenderError("domain has no <numatune><memory>: memory would not be bound to the placed cells")
    placed = frozenset(c.host_cell for c in cells.values())
    where = f"numatune memory nodeset={memory.get('nodeset')}"
    _host_nodes(_cpuset(memory.get("nodeset"), where), host, placed, where)
    memory_mode = memory.get("mode", "strict")
    seen: set[int] = set()
    for node in root.iterfind("numatune/memnode"):
        cellid = _int(node.get("cellid"), f"memnode cellid={node.get('cellid')!r}")
        where = f"memnode cellid={cellid} nodeset={node.get('nodeset')}"
        if cellid not in cells:
            raise RenderError(f"{where}: the guest has no NUMA cell {cellid}")
        if cellid in seen:
            raise RenderError(f"{where}: guest cell {cellid} has more than one memnode")
        seen.add(cellid)
        # Where the claims put the cell's pages: its host cell, or every placed cell when interleaved.
        own = placed if cells[cellid].memory_mode is MemoryMode.INTERLEAVE else frozenset({cells[cellid].host_cell})
        _host_nodes(_cpuset(node.get("nodeset"), where), host, own, where)
        # libvirt: restrictive on <memory> if and only if restrictive on every memnode.
        if (node.get("mode", "strict") == "restrictive") != (memory_mode == "restrictive"):
            raise RenderError(
                f"{where} mode={node.get('mode', 'strict')}: libvirt needs mode='restrictive' on both "
                f"<memory> (here {memory_mode!r}) and every memnode, or on neither"
            )
    missing = set(cells) - seen
    if missing:
        raise RenderError(f"numatune: guest cell(s) {format_cpuset(missing)} have no memnode")


def check_cells(
    root: etree._Element, cells: dict[int, CellAssignment], vcpus: int, gpu_cells: tuple[GpuNode, ...] = (),
    base_kib: int = PAGE_4K,
) -> None:
    """Guest cells match the placement, partition the vCPUs, and hold whole pages of their size (the host's base
    page, ``base_kib``, for a cell without hugepages); the GPUs' nodes (:mod:`vnuma.render.gpumemory`) are there,
    without vCPUs or memory."""
    page_of = _page_sizes(root, frozenset(cells))
    owner: dict[int, int] = {}
    seen: set[int] = set()
    gpu_of = {g.guest_cell: g.gpu for g in gpu_cells}
    for cell in root.iterfind("cpu/numa/cell"):
        cid = _int(cell.get("id"), f"numa cell id={cell.get('id')!r}")
        where = f"numa cell id={cid}"
        if (cid not in cells and cid not in gpu_of) or cid in seen:
            raise RenderError(f"{where}: not a guest cell of the placement, or repeated")
        seen.add(cid)
        if cid in gpu_of:
            _check_gpu_cell(cell, gpu_of[cid], where)
            continue
        placed = cells[cid]
        cpus = _cpuset(cell.get("cpus", ""), f"{where} cpus={cell.get('cpus')}")
        for vcpu in sorted(cpus):
            if vcpu in owner:
                raise RenderError(
                    f"{where} cpus={cell.get('cpus')}: vCPU {vcpu} is also in cell {owner[vcpu]}"
                )
            owner[vcpu] = cid
        if cpus != frozenset(placed.vcpus):
            raise RenderError(
                f"{where} cpus={cell.get('cpus')}: the placement gives guest cell {cid} "
                f"vCPUs {format_cpuset(placed.vcpus) or 'none'}"
            )
        _check_cell_memory(cell, placed, page_of.get(cid, base_kib), where)
    if seen != set(cells) | set(gpu_of):
        raise RenderError(f"cpu numa: guest cell(s) {format_cpuset((set(cells) | set(gpu_of)) - seen)} are missing")
    stray = set(range(vcpus)) - set(owner)
    if stray:
        raise RenderError(f"cpu numa: vCPU(s) {format_cpuset(stray)} are in no guest NUMA cell")


def check_distances(root: etree._Element) -> None:
    """``<distances>`` must form a SLIT libvirt accepts (its 9.0.0 heap bug; see LIBVIRT.md)."""
    cell_ids: set[int] = set()
    matrix: dict[int, dict[int, int]] = {}
    for cell in root.iterfind("cpu/numa/cell"):
        cid = _int(cell.get("id"), f"numa cell id={cell.get('id')!r}")
        cell_ids.add(cid)
        block = cell.find("distances")
        if block is None:
            continue
        row: dict[int, int] = {}
        for sib in block.iterfind("sibling"):
            where = f"numa cell id={cid} sibling id={sib.get('id')} value={sib.get('value')}"
            sid = _int(sib.get("id"), where)
            if sid in row:
                raise RenderError(f"{where}: sibling {sid} is listed twice")
            row[sid] = _int(sib.get("value"), where)
        matrix[cid] = row
    if not matrix:
        return
    problem = distance_problem(matrix, frozenset(cell_ids))
    if problem is not None:
        raise RenderError(
            f"numa distances: {problem}", hint="libvirt 9.0.0 corrupts its memory on such distances"
        )


def check_devices(root: etree._Element, placement: Placement) -> None:
    """PCI hostdevs (and hostdev interfaces: SR-IOV VFs) are exactly the placement's devices; expander buses
    name guest cells."""
    guest_cells = {c.guest_cell for c in placement.cells}
    wanted = {d.address.lower() for d in placement.devices}
    found: set[str] = set()
    sources = [*root.iterfind("devices/hostdev[@type='pci']/source/address"),
               *root.iterfind("devices/interface[@type='hostdev']/source/address")]
    for src in sources:
        address = _pci_address(src)
        if address not in wanted:
            raise RenderError(f"hostdev {address}: device is not in the placement")
        found.add(address)
    if wanted - found:
        raise RenderError(f"devices: placement device(s) {', '.join(sorted(wanted - found))} have no hostdev")
    for ctrl in root.iterfind("devices/controller[@model='pcie-expander-bus']"):
        node = ctrl.find("target/node")
        if node is None:
            continue
        where = f"controller index={ctrl.get('index')} pcie-expander-bus node={node.text}"
        if _int(node.text, where) not in guest_cells:
            raise RenderError(f"{where}: the guest has no NUMA cell {node.text}")


def check_gpu_nodesets(root: etree._Element, gpu_cells: tuple[GpuNode, ...]) -> None:
    """Each GPU with nodes of its own has them, and only them, as ``<acpi nodeset>`` on its hostdev; no other
    hostdev names nodes."""
    wanted = nodesets(gpu_cells)
    for src in root.iterfind("devices/hostdev[@type='pci']/source/address"):
        address = _pci_address(src)
        acpi = src.getparent().getparent().find("acpi")
        nodeset = None if acpi is None else acpi.get("nodeset")
        where = f"hostdev {address}"
        if nodeset is None and address in wanted:
            raise RenderError(
                f"{where}: its GPU memory node(s) {wanted[address]} are tied to it by no <acpi nodeset>",
                hint="a template writing its own <hostdev> must write <acpi nodeset='{{ dev.acpi_nodeset }}'/> "
                     "when dev.acpi_nodeset is set",
            )
        if nodeset is not None and _cpuset(nodeset, f"{where} acpi nodeset") != _cpuset(wanted.get(address, ""), where):
            raise RenderError(f"{where} acpi nodeset={nodeset}: the GPU's guest memory nodes are "
                              f"{wanted.get(address) or 'none'}")


def check_metadata(root: etree._Element, placement: Placement) -> None:
    """vnuma's ``<metadata>`` is present and names the placement's tenant, VM and host."""
    try:
        meta = metadata_of(root)
    except InvalidInputError as err:
        raise RenderError(str(err)) from err
    if meta is None:
        raise RenderError(
            "metadata: no vnuma:placement element; the domain could not be matched to the inventory",
            hint="a template overriding the identity block must keep {% include '_metadata.xml.j2' %}",
        )
    for key in ("tenant", "vm", "host"):
        if meta[key] != getattr(placement, key):
            raise RenderError(
                f"metadata vnuma:{key} {meta[key]!r}: the placement's {key} is {getattr(placement, key)!r}"
            )


def _check_gpu_cell(cell: etree._Element, gpu: str, where: str) -> None:
    """A GPU's guest node has no vCPUs and no memory of its own (the GPU's memory is reached through the GPU)."""
    if _cpuset(cell.get("cpus", ""), f"{where} cpus={cell.get('cpus')}"):
        raise RenderError(f"{where} cpus={cell.get('cpus')}: a memory node of GPU {gpu} has no vCPUs")
    if _kib(cell.get("memory"), cell.get("unit", "KiB"), f"{where} memory={cell.get('memory')}") != 0:
        raise RenderError(f"{where} memory={cell.get('memory')}: a memory node of GPU {gpu} has memory='0' "
                          "(its memory is the GPU's, never guest RAM)")


def _check_cell_memory(cell: etree._Element, placed: CellAssignment, page_kib: int, where: str) -> None:
    memory_kib = _kib(cell.get("memory"), cell.get("unit", "KiB"), f"{where} memory={cell.get('memory')}")
    where = f"{where} memory={memory_kib} KiB"
    if memory_kib != placed.memory_kib:
        raise RenderError(
            f"{where}: the placement gives guest cell {placed.guest_cell} {placed.memory_kib} KiB"
        )
    if page_kib != placed.page_size_kib:
        raise RenderError(
            f"{where}: backed by {page_kib} KiB pages, the placement claimed {placed.page_size_kib} KiB pages"
        )
    if memory_kib < page_kib or memory_kib % page_kib:
        raise RenderError(f"{where}: not a whole number (>= 1) of {page_kib} KiB pages")


def _page_sizes(root: etree._Element, guest_cells: frozenset[int]) -> dict[int, int]:
    """Backing page size (KiB) of each guest cell per ``<memoryBacking>``; absent cells use the base page."""
    hugepages = root.find("memoryBacking/hugepages")
    if hugepages is None:
        return {}
    sizes: dict[int, int] = {}
    fallback: int | None = None
    pages = hugepages.findall("page")
    if not pages:
        raise RenderError(
            "memoryBacking hugepages: no <page size>; vnuma needs an explicit size per guest cell"
        )
    for page in pages:
        where = f"memoryBacking page size={page.get('size')} nodeset={page.get('nodeset')}"
        size = _kib(page.get("size"), page.get("unit", "KiB"), where)
        if page.get("nodeset") is None:
            fallback = size
            continue
        for cid in _cpuset(page.get("nodeset"), where):
            if cid not in guest_cells:
                raise RenderError(f"{where}: the guest has no NUMA cell {cid}")
            sizes[cid] = size
    if fallback is not None:
        sizes = {cid: sizes.get(cid, fallback) for cid in guest_cells}
    return sizes


def _host_nodes(nodes: frozenset[int], host: Host, placed: frozenset[int], where: str) -> None:
    existing = frozenset(c.id for c in host.cells)
    if nodes - existing:
        raise RenderError(f"{where}: host {host.name!r} has no NUMA cell {format_cpuset(nodes - existing)}")
    if nodes != placed:
        raise RenderError(f"{where}: the placement uses host cell(s) {format_cpuset(placed)}")


def _inside(cpuset: frozenset[int], allowed: frozenset[int], where: str, whose: str) -> None:
    stray = cpuset - allowed
    if stray:
        noun = "pCPU" if len(stray) == 1 else "pCPUs"
        verb = "is" if len(stray) == 1 else "are"
        raise RenderError(f"{where}: {noun} {format_cpuset(stray)} {verb} not in {whose}")


def _int(value: str | None, where: str) -> int:
    text = (value or "").strip()
    if not text.isdecimal() or len(text) > 18:
        raise RenderError(f"{where}: {value!r} is not a whole number")
    return int(text)


def _cpuset(value: str | None, where: str) -> frozenset[int]:
    if value is None:
        raise RenderError(f"{where}: attribute missing")
    try:
        return parse_cpuset(value)
    except InvalidInputError as err:
        raise RenderError(f"{where}: {err}") from err


def _kib(value: str | None, unit: str, where: str) -> int:
    factor = _UNIT_BYTES.get(unit.lower())
    if factor is None:
        raise RenderError(f"{where}: unknown memory unit {unit!r}")
    total = _int(value, where) * factor
    if total % 1024:
        raise RenderError(f"{where}: {total} bytes is not a whole number of KiB")
    return total // 1024


def _pci_address(src: etree._Element) -> str:
    where = "hostdev source address " + " ".join(f"{k}={v}" for k, v in src.attrib.items())
    try:
        parts = [int(src.get(k, "0"), 16) for k in ("domain", "bus", "slot", "function")]
    except ValueError as err:
        raise RenderError(f"{where}: not hexadecimal") from err
    return f"{parts[0]:04x}:{parts[1]:02x}:{parts[2]:02x}.{parts[3]:x}"
