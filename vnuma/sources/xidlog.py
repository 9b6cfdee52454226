"""Kernel log text: the NVIDIA driver's Xid lines, and the health conditions their codes are.

Pure: no I/O. The driver logs a GPU error as ``NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3,
GPU has fallen off the bus.`` (older drivers: ``NVRM: Xid (0000:3b:00): 79, GPU has fallen off the bus.``),
found wherever it stands on its line, so every way the log is saved reads the same: ``dmesg`` (with
``[12345.678901]``, ``-T``'s ``[Mon Dec  7 05:12:01 2026]`` or no timestamp), ``dmesg --time-format iso``
and ``-x`` (``kern  :warn  : 2026-12-07T05:12:01,283302+00:00``), ``journalctl -k`` and syslog files
(``Dec 07 05:12:01 gpu1 kernel: ...``, ``-o short-iso``). Lines are what ``\\n`` separates (a ``\\r`` before
it is dropped), numbered from 1 as ``grep -n`` does; bytes that are not UTF-8 are read as U+FFFD. An
NVSwitch's ``SXid`` line is no GPU's Xid, and the driver's other lines about a GPU (``NVRM: GPU
0000:3b:00.0: GPU has fallen off the bus.``) repeat an Xid line: only Xid lines count.

The address names no PCI function: a GPU's is 0 (:func:`~vnuma.sources.gpuhealth.bus_id_address`).
Every Xid line is an :class:`XidEvent`; those whose code is in the condition table
(:data:`~vnuma.sources.gpuhealth.XID_CONDITIONS`) are findings, the others only name their GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vnuma.sources.gpuhealth import XID_CONDITIONS, Finding, HealthReport, bus_id_address, report
from vnuma.sources.xmlsafe import one_line

_MARK = "NVRM: Xid ("
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2}(?:\.[0-7])?)\): "
                  r"([0-9]{1,6}),? ?(.*)$")
_MAX_DETAIL = 160
# Newer drivers name the process before the words: pid=1234, name=python3, (pid='<unknown>', name=<unknown>,)
_PROCESS = re.compile(r"^pid=[^,]*, (?:name=[^,]*, )?")


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One Xid line: its number in the text (from 1), the GPU's address (``dddd:bb:ss.f``), the Xid code, and
    the driver's words after the code (on one line, at most 160 characters)."""

    line: int
    address: str
    xid: int
    text: str


def parse_xid_lines(data: bytes | str) -> tuple[XidEvent, ...]:
    """Every Xid line of kernel log text, in order; any other line, however garbled, is skipped."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    events = []
    for number, line in enumerate(text.split("\n"), 1):
        if _MARK not in line:
            continue
        match = _XID.search(line.removesuffix("\r"))
        address = bus_id_address(match.group(1)) if match else None
        if match is None or address is None:
            continue
        words = one_line(match.group(3))
        events.append(XidEvent(number, address, int(match.group(2)), _shortened(words)))
    return tuple(events)


def read_kernel_log(data: bytes | str, *, source: str) -> HealthReport:
    """The GPUs a kernel log's Xid lines name, and a finding for each line whose Xid is a known condition
    (``source`` names the file in each finding's ``where``; its ``detail`` is the line's words without the
    process the driver names: ``Xid 79, GPU has fallen off the bus.``)."""
    events = parse_xid_lines(data)
    findings = [
        Finding(e.address, XID_CONDITIONS[e.xid], f"{source} line {e.line}",
                f"Xid {e.xid}, {_PROCESS.sub('', e.text)}".rstrip(", "))
        for e in events if e.xid in XID_CONDITIONS
    ]
    return report(source, (e.address for e in events), findings)


def _shortened(words: str) -> str:
    return words if len(words) <= _MAX_DETAIL else words[:_MAX_DETAIL] + "..."
