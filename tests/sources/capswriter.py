"""Test-only writer: a Host as `virsh capabilities` XML, to round-trip through the parser."""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

from vnuma.topology import Cell, Cpu, Host, format_cpuset


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
            "  </host>",
            "</capabilities>",
            "",
        ]
    )
