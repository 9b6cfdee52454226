"""Test-only writer: a Host as `virsh capabilities` XML, to round-trip through the parser."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from vnuma.topology import Cell, Cpu, Host, format_cpuset
from vnuma.topology.resctrl import Resctrl


def _cpu_xml(cpu: Cpu) -> str:
    attrs = [f"id='{cpu.id}'"]
    for name, value in (("socket_id", cpu.socket), ("die_id", cpu.die), ("core_id", cpu.core)):
        if value is not None:
            attrs.append(f"{name}='{value}'")
    attrs.append(f"siblings={quoteattr(format_cpuset(cpu.siblings))}")
    return f"            <cpu {' '.join(attrs)}/>"


def _cell_xml(cell: Cell, *, reverse_cpus: bool) -> list[str]:
    lines = [f"        <cell id='{cell.id}'>", f"          <memory unit='KiB'>{cell.memory_kib}</memory>"]
    lines += [f"          <pages unit='KiB' size='{p.size_kib}'>{p.count}</pages>" for p in cell.pages]
    if cell.distances:
        lines.append("          <distances>")
        lines += [f"            <sibling id='{other}' value='{dist}'/>" for other, dist in cell.distances]
        lines.append("          </distances>")
    cpus = list(reversed(cell.cpus)) if reverse_cpus else list(cell.cpus)
    if cpus:
        lines.append(f"          <cpus num='{len(cpus)}'>")
        lines += [_cpu_xml(cpu) for cpu in cpus]
        lines.append("          </cpus>")
    else:
        lines.append("          <cpus num='0'/>")
    lines.append("        </cell>")
    return lines


def capabilities_xml(host: Host, *, reverse_cells: bool = False, reverse_cpus: bool = False) -> str:
    """Write ``host``'s cells as a capabilities document (devices are not part of it)."""
    cells = list(reversed(host.cells)) if reverse_cells else list(host.cells)
    body = [line for cell in cells for line in _cell_xml(cell, reverse_cpus=reverse_cpus)]
    return "\n".join(
        [
            "<capabilities>",
            "  <host>",
            "    <cpu>",
            "      <arch>x86_64</arch>",
            "    </cpu>",
            "    <topology>",
            f"      <cells num='{len(cells)}'>",
            *body,
            "      </cells>",
            "    </topology>",
            *_resctrl_xml(host.resctrl),
            "  </host>",
            "</capabilities>",
            "",
        ]
    )


def _monitor(tag_attrs: str, features: tuple[str, ...], max_monitors: int | None) -> list[str]:
    if not features and max_monitors is None:
        return []
    count = f" maxMonitors='{max_monitors if max_monitors is not None else 0}'"
    return [f"      <monitor{tag_attrs}{count}>", *(f"        <feature name={quoteattr(f)}/>" for f in features),
            "      </monitor>"]


def _resctrl_xml(r: Resctrl) -> list[str]:
    """``<cache>`` and ``<memory_bandwidth>`` as libvirt prints them (sizes in KiB)."""
    lines: list[str] = []
    cache_monitor = _monitor(" level='3' reuseThreshold='0'", r.cache_monitors, r.max_monitors)
    if r.caches or r.cache_monitors:
        lines.append("    <cache>")
        for b in r.caches:
            head = f"      <bank id='{b.id}' level='{b.level}' type='{b.type}' size='{b.size_kib}' unit='KiB' " \
                f"cpus='{format_cpuset(b.cpus)}'"
            if not b.controls:
                lines.append(head + "/>")
                continue
            lines.append(head + ">")
            lines += [
                f"        <control granularity='{c.granularity_kib}' min='{c.min_kib}' unit='KiB' type='{c.type}' "
                f"maxAllocs='{c.max_allocs}'/>"
                for c in b.controls
            ]
            lines.append("      </bank>")
        lines += cache_monitor if r.cache_monitors else []
        lines.append("    </cache>")
    if r.memory_bandwidth or r.bandwidth_monitors:
        lines.append("    <memory_bandwidth>")
        for n in r.memory_bandwidth:
            if n.granularity is None:
                lines.append(f"      <node id='{n.id}' cpus='{format_cpuset(n.cpus)}'/>")
            else:
                lines.append(
                    f"      <node id='{n.id}' cpus='{format_cpuset(n.cpus)}'><control granularity='{n.granularity}' "
                    f"min='{n.min}' maxAllocs='{n.max_allocs}'/></node>"
                )
        lines += _monitor("", r.bandwidth_monitors, r.max_monitors) if r.bandwidth_monitors else []
        lines.append("    </memory_bandwidth>")
    return lines
