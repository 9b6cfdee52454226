"""The readable placement table ``vnuma place`` and ``vnuma vm show`` print."""

from __future__ import annotations

from vnuma.cli import output
from vnuma.placement.kept import kept_request
from vnuma.placement.model import CpuPolicy, Placement
from vnuma.placement.pins import iothread_pins
from vnuma.topology import format_cpuset, format_size_kib


def print_placement(p: Placement, title: str, state: str | None = None) -> None:
    """A placement as a table of guest cells plus devices."""
    head = [title] + ([f"state: {state}"] if state else [])
    output.echo_lines(head)
    output.echo_table(
        None,
        ["GUEST CELL", "HOST CELL", "VCPUS", "PCPUS", "MEMORY", "PAGES", "MODE"],
        [
            (c.guest_cell, c.host_cell, format_cpuset(c.vcpus), format_cpuset(c.pcpus),
             format_size_kib(c.memory_kib), f"{c.pages} x {format_size_kib(c.page_size_kib)}", c.memory_mode)
            for c in p.cells
        ] + [
            (c.guest_cell, c.host_cell, "- (cold)", "-", format_size_kib(c.memory_kib),
             f"{c.pages} x {format_size_kib(c.page_size_kib)}", c.memory_mode)
            for c in p.cold
        ],
    )
    extras = [f"emulator pCPUs: {format_cpuset(p.emulator_pcpus) or '-'}"]
    alternatives = kept_request(p).alternatives if p.request is not None else ()
    if alternatives:
        got = "as asked" if p.alternative == 0 else alternatives[p.alternative - 1].text
        extras.insert(0, f"alternative: {p.alternative} of 0-{len(alternatives)} ({got})")
    if p.cpu_policy is CpuPolicy.MIXED:
        extras.insert(0, f"cpu policy: mixed (vCPUs {format_cpuset(p.dedicated_vcpus)} dedicated, the others float)")
    if p.iothreads:
        extras.append(f"iothreads: {p.iothreads} ({p.iothread_policy}) on pCPUs {format_cpuset(iothread_pins(p))}")
    if p.group is not None:
        asked = f" (anti-affinity {p.anti_affinity})" if p.anti_affinity else ""
        extras.append(f"group: {p.group}" + (f" (affinity {p.affinity})" if p.affinity else asked))
    if p.llc:
        extras.append("L3 slice: " + ", ".join(f"cache {i} {w} way(s)" for i, w in p.llc))
    if p.mem_bw:
        extras.append("bandwidth cap: " + ", ".join(f"domain {i} {c}" for i, c in p.mem_bw))
    extras += [f"{d.kind} {d.address} -> guest cell {d.guest_cell} (host cell {d.host_cell})" for d in p.devices]
    extras += [
        f"{a.kind} {a.name}" + (f"@{a.start}" if a.start is not None else "") + f" on GPU {a.gpu}"
        + (f" via {a.vf}" if a.vf else "") + f" (mdev {a.uuid}) -> guest cell {a.guest_cell} (host cell {a.host_cell})"
        for a in p.partitions
    ]
    output.echo_lines(extras)
