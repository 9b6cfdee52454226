"""A saved GPU health file of either kind, told apart by its content: a directory of such files (saved
``nvidia-smi -q -x`` documents and kernel logs side by side) is read file by file without naming each kind.

Pure: no I/O.
"""

from __future__ import annotations

from vnuma.sources.gpuhealth import HealthReport
from vnuma.sources.nvsmihealth import read_nvidia_smi
from vnuma.sources.xidlog import read_kernel_log

_XML_STARTS = ("<?xml", "<nvidia_smi_log")
_BOM = "\ufeff"


def is_nvidia_smi(data: bytes | str) -> bool:
    """True when ``data`` starts as ``nvidia-smi -q -x`` does (``<?xml`` or ``<nvidia_smi_log``, after white
    space and a byte-order mark); a kernel log never does (``dmesg -r``'s ``<6>`` is no XML)."""
    head = data[:64].decode("utf-8", errors="replace") if isinstance(data, bytes) else data[:64]
    return head.lstrip(_BOM + " \t\r\n").startswith(_XML_STARTS)


def read_health_file(data: bytes | str, *, source: str) -> HealthReport:
    """``data`` read as an ``nvidia-smi -q -x`` document when it starts as one, else as kernel log text.

    Raises:
        InvalidInputError: XML that is no readable ``nvidia-smi -q -x`` document.
    """
    if is_nvidia_smi(data):
        return read_nvidia_smi(data, source=source)
    return read_kernel_log(data, source=source)
