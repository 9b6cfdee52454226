"""GPU health: the known-bad conditions a saved health file can show, what each does to the GPU, and
which of a host's GPUs they are about.

Pure: no I/O. The readers — :mod:`vnuma.sources.nvsmihealth` (``nvidia-smi -q -x``) and
:mod:`vnuma.sources.xidlog` (kernel log text) — turn one file into a :class:`HealthReport`: every
GPU the file names, by PCI address, and the :class:`Finding` s on them, each naming a condition of
:data:`CONDITIONS`, the one statement of the conditions, their default effects and reasons
(docs/devices.md, "GPU health"). :func:`host_health` matches reports to one host's GPUs: per GPU
the effect its taint takes (the strongest of its findings': ``drain`` over ``no-schedule``; None
when the operator made every one of them report-only) and one reason naming its conditions in
table order, so the same files give the same taint every time they are read.

A file none of whose GPUs is the host's was saved on another host (or in a guest, which sees its
own PCI addresses): :class:`~vnuma.errors.OtherHostFileError`, naming them. Addresses a file
names that are no GPU of the host (a GPU added since the host was imported, a GPU the inventory
keeps as another kind) are reported in :attr:`HostHealth.unknown`, not refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from vnuma.errors import OtherHostFileError
from vnuma.sources.nodedev import format_pci_address
from vnuma.topology import DeviceKind, Host
from vnuma.topology.devstates import TaintEffect


@dataclass(frozen=True, slots=True)
class Condition:
    """A known-bad condition: its name (the config file's key), its default effect, and the taint's reason."""

    name: str
    effect: TaintEffect
    reason: str


_DRAIN, _NO_SCHEDULE = TaintEffect.DRAIN, TaintEffect.NO_SCHEDULE
CONDITIONS: Mapping[str, Condition] = MappingProxyType({c.name: c for c in (
    Condition("xid-48", _DRAIN, "double-bit ECC error (Xid 48)"),
    Condition("xid-63", _NO_SCHEDULE, "page retirement or row remapping recorded, reset pending (Xid 63)"),
    Condition("xid-64", _NO_SCHEDULE, "page retirement or row remapping could not be recorded (Xid 64)"),
    Condition("xid-74", _NO_SCHEDULE, "NVLink error (Xid 74)"),
    Condition("xid-79", _DRAIN, "GPU has fallen off the bus (Xid 79)"),
    Condition("xid-92", _NO_SCHEDULE, "high single-bit ECC error rate (Xid 92)"),
    Condition("xid-94", _DRAIN, "contained uncorrectable ECC error (Xid 94)"),
    Condition("xid-95", _DRAIN, "uncontained uncorrectable ECC error (Xid 95)"),
    Condition("ecc-uncorrectable", _DRAIN, "uncorrectable ECC errors since the driver loaded"),
    Condition("remap-failure", _NO_SCHEDULE, "row remapping failed"),
    Condition("remap-pending", _NO_SCHEDULE, "row remapping pending (GPU reset needed)"),
    Condition("retirement-pending", _NO_SCHEDULE, "page retirement pending (GPU reset needed)"),
)})
"""Every known-bad condition, in the order reasons name them (docs/devices.md, "GPU health")."""

XID_CONDITIONS: Mapping[int, str] = MappingProxyType(
    {int(name.removeprefix("xid-")): name for name in CONDITIONS if name.startswith("xid-")})
"""The Xid codes of :data:`CONDITIONS` and their conditions' names; any other Xid is no condition."""

Effects = Mapping[str, TaintEffect | None]
"""Each condition's effect (None: report it, taint nothing), as the configuration sets them."""

DEFAULT_EFFECTS: Effects = MappingProxyType({name: c.effect for name, c in CONDITIONS.items()})

_BUS_ID = re.compile(r"^(?:PCI:)?([0-9a-f]{1,8}):([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.([0-7]))?$", re.IGNORECASE)
_MAX_SLOT = 0x1F
_SHOWN = 8


def bus_id_address(text: str) -> str | None:
    """A PCI bus id in the inventory's ``dddd:bb:ss.f`` form (:func:`format_pci_address`): nvidia-smi's
    ``00000000:3B:00.0`` (8-digit domain, upper case), the kernel log's ``PCI:0000:3b:00`` (no function:
    function 0, a GPU's), or the inventory's own form; None when ``text`` is none of them."""
    match = _BUS_ID.match(text.strip())
    if not match:
        return None
    domain, bus, slot = (int(g, 16) for g in match.groups()[:3])
    if slot > _MAX_SLOT:
        return None
    return format_pci_address(domain, bus, slot, int(match.group(4) or "0"))


@dataclass(frozen=True, slots=True)
class Finding:
    """A condition (a key of :data:`CONDITIONS`) on the GPU at ``address``; ``where``: the file and line
    (``kern.log line 12``); ``detail``: what the file says there, on one line."""

    address: str
    condition: str
    where: str
    detail: str


@dataclass(frozen=True, slots=True)
class HealthReport:
    """One file read: its name, every GPU address it names (sorted, once each), and its findings in file order."""

    source: str
    addresses: tuple[str, ...]
    findings: tuple[Finding, ...]


def report(source: str, addresses: Iterable[str], findings: Iterable[Finding]) -> HealthReport:
    """A :class:`HealthReport`; the findings' addresses count as named."""
    found = tuple(findings)
    return HealthReport(source, tuple(sorted({*addresses, *(f.address for f in found)})), found)


@dataclass(frozen=True, slots=True)
class GpuVerdict:
    """One of the host's GPUs with findings: the taint's effect (None: report only) and reason."""

    address: str
    effect: TaintEffect | None
    reason: str
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class HostHealth:
    """What health files say about one host: its GPUs with findings (address order), and the addresses the
    files name that are no GPU of the host, with their findings."""

    host: str
    gpus: tuple[GpuVerdict, ...]
    unknown: tuple[str, ...]
    unknown_findings: tuple[Finding, ...]

    @property
    def taints(self) -> tuple[GpuVerdict, ...]:
        """The GPUs to taint: those with an effect."""
        return tuple(g for g in self.gpus if g.effect is not None)


def host_health(host: Host, reports: Sequence[HealthReport], effects: Effects = DEFAULT_EFFECTS) -> HostHealth:
    """Match ``reports`` to ``host``'s GPUs by PCI address; ``effects``: each condition's (the configured table;
    a condition it leaves out has its default).

    Raises:
        OtherHostFileError: a report naming GPUs of which none is one of the host's GPUs (each such report
            refused on its own: another host's kernel log beside this host's nvidia-smi file is refused too).
    """
    gpus = {d.address for d in host.devices_of(DeviceKind.GPU)}
    for rep in reports:
        if rep.addresses and gpus.isdisjoint(rep.addresses):
            raise _other_host(host, rep, sorted(gpus))
    named = {a for rep in reports for a in rep.addresses}
    findings = [f for rep in reports for f in rep.findings]
    verdicts = tuple(_verdict(a, [f for f in findings if f.address == a], effects)
                     for a in sorted(named & gpus) if any(f.address == a for f in findings))
    return HostHealth(host.name, verdicts, tuple(sorted(named - gpus)),
                      tuple(f for f in findings if f.address not in gpus))


def _verdict(address: str, findings: list[Finding], effects: Effects) -> GpuVerdict:
    conditions = [name for name in CONDITIONS if any(f.condition == name for f in findings)]
    effect_of = {name: effects.get(name, CONDITIONS[name].effect) for name in conditions}
    acting = [name for name in conditions if effect_of[name] is not None]
    effect = None
    if acting:
        drains = any(effect_of[n] is TaintEffect.DRAIN for n in acting)
        effect = TaintEffect.DRAIN if drains else TaintEffect.NO_SCHEDULE
    reason = "; ".join(CONDITIONS[name].reason for name in (acting or conditions))
    return GpuVerdict(address, effect, reason, tuple(findings))


def _other_host(host: Host, rep: HealthReport, gpus: list[str]) -> OtherHostFileError:
    return OtherHostFileError(
        f"{rep.source}: not host {host.name!r}'s: it names GPU{'s' if len(rep.addresses) > 1 else ''} "
        f"{_listed(rep.addresses)}, "
        f"none of the host's ({_listed(gpus) if gpus else 'it has no GPU'})",
        hint=f"save it on host {host.name} itself, where the NVIDIA driver sees the host's PCI addresses "
             f"(`vnuma host show {host.name}` lists its GPUs)")


def _listed(addresses: Sequence[str]) -> str:
    more = len(addresses) - _SHOWN
    return ", ".join(addresses[:_SHOWN]) + (f" and {more} more" if more > 0 else "")
