"""Saved ``nvidia-smi -q -x``: each GPU's PCI address and the health conditions its ECC counters and
retirement and remapping flags show.

Pure: no I/O. The document is NVIDIA's published XML (``<!DOCTYPE nvidia_smi_log SYSTEM
"nvsmi_device_v12.dtd">``; v10, v11 and v13 and older documents without a DOCTYPE read the same),
parsed by :func:`vnuma.sources.xmlsafe.parse_xml` (no DTD loaded, no entity, no network). Per
``<gpu>``:

- the address: ``pci/pci_bus_id`` (``00000000:3B:00.0``), else the ``<gpu id>`` attribute;
- uncorrectable ECC errors since the driver loaded: the sum of ``ecc_errors/volatile``'s counters
  named ``*uncorrectable*`` (``sram_uncorrectable``, ``dram_uncorrectable``, the newer
  ``sram_uncorrectable_parity`` and ``sram_uncorrectable_secded``) or, in older documents,
  ``volatile/double_bit/total``; the ``aggregate`` counts (over the board's life, kept across resets
  and reboots) are read the same way but are no condition: the retirement or remapping an old error
  caused is what the flags below tell;
- ``retired_pages/pending_retirement`` (older drivers: ``pending_blacklist``): a page retirement waits for
  a reset;
- ``remapped_rows/remapped_row_pending`` (a remap waits for a reset) and ``remapped_row_failure`` (a row
  could not be remapped).

A value nvidia-smi could not read (``N/A``, ``Not Supported``, ``[Unknown Error]``..., and the whole
``<remapped_rows>N/A</remapped_rows>`` of a GPU in MIG mode or before Ampere) is no finding; a flag is set
only by ``Yes``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.sources.gpuhealth import Finding, HealthReport, bus_id_address, report
from vnuma.sources.xmlsafe import device_name, element_where, parse_xml, shown

_HINT = "expected the XML `nvidia-smi -q -x` prints (<nvidia_smi_log>)"
_MAX_COUNT_CHARS = 20


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """One ``<gpu>``: its address (``dddd:bb:ss.f``), model, where it is in the file (``smi.xml line 9``),
    the volatile and aggregate uncorrectable ECC counts and the three flags (None: not readable)."""

    address: str
    product_name: str | None
    where: str
    volatile_uncorrectable: int | None
    aggregate_uncorrectable: int | None
    retirement_pending: bool | None
    remap_pending: bool | None
    remap_failure: bool | None

    def findings(self) -> tuple[Finding, ...]:
        """The conditions this GPU shows, in the condition table's order."""
        out = []
        if self.volatile_uncorrectable:
            n = self.volatile_uncorrectable
            out.append(("ecc-uncorrectable", f"{n} volatile uncorrectable ECC error{'s' if n > 1 else ''}"))
        if self.remap_failure:
            out.append(("remap-failure", "remapped_row_failure Yes"))
        if self.remap_pending:
            out.append(("remap-pending", "remapped_row_pending Yes"))
        if self.retirement_pending:
            out.append(("retirement-pending", "pending_retirement Yes"))
        return tuple(Finding(self.address, name, self.where, detail) for name, detail in out)


def parse_nvidia_smi(data: bytes | str, *, what: str) -> tuple[GpuHealth, ...]:
    """Every ``<gpu>`` of an ``nvidia-smi -q -x`` document, in document order (``what`` names it in errors).

    Raises:
        InvalidInputError: not XML, entity declarations, a root other than ``<nvidia_smi_log>``, or a
            ``<gpu>`` whose PCI bus id cannot be read.
    """
    root = parse_xml(data, what=what, root="nvidia_smi_log", hint=_HINT)
    return tuple(_gpu(gpu, what) for gpu in root.iterchildren("gpu"))


def read_nvidia_smi(data: bytes | str, *, source: str) -> HealthReport:
    """Every GPU an ``nvidia-smi -q -x`` document names, and the conditions each shows.

    Raises:
        InvalidInputError: as :func:`parse_nvidia_smi`.
    """
    gpus = parse_nvidia_smi(data, what=source)
    return report(source, (g.address for g in gpus), (f for g in gpus for f in g.findings()))


def _gpu(gpu: etree._Element, what: str) -> GpuHealth:
    ecc = gpu.find("ecc_errors")
    retired = gpu.find("retired_pages")
    remapped = gpu.find("remapped_rows")
    return GpuHealth(
        address=_address(gpu, what),
        product_name=device_name(gpu.findtext("product_name")),
        where=element_where(what, gpu),
        volatile_uncorrectable=_uncorrectable(ecc, "volatile"),
        aggregate_uncorrectable=_uncorrectable(ecc, "aggregate"),
        retirement_pending=_any_flag(retired, "pending_retirement", "pending_blacklist"),
        remap_pending=_any_flag(remapped, "remapped_row_pending"),
        remap_failure=_any_flag(remapped, "remapped_row_failure"),
    )


def _address(gpu: etree._Element, what: str) -> str:
    given = [t.strip() for t in (gpu.findtext("pci/pci_bus_id"), gpu.get("id")) if t and t.strip()]
    for text in given:
        if (address := bus_id_address(text)) is not None:
            return address
    raise InvalidInputError(f"{element_where(what, gpu)}: <gpu> has no readable PCI bus id (pci/pci_bus_id or id): "
                            f"{' or '.join(shown(t) for t in given) or 'none'}", hint=_HINT)


def _uncorrectable(ecc: etree._Element | None, kind: str) -> int | None:
    counts = ecc.find(kind) if ecc is not None else None
    if counts is None:
        return None
    cells = [c for c in counts if isinstance(c.tag, str) and "uncorrectable" in c.tag]
    older = counts.find("double_bit/total")
    values = [n for n in (_count(c.text) for c in [*cells, *([older] if older is not None else [])])
              if n is not None]
    return sum(values) if values else None


def _count(text: str | None) -> int | None:
    value = (text or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) <= _MAX_COUNT_CHARS else None


def _any_flag(parent: etree._Element | None, *tags: str) -> bool | None:
    if parent is None:
        return None
    flags = [(parent.findtext(tag) or "").strip() for tag in tags]
    if "Yes" in flags:
        return True
    return False if "No" in flags else None
