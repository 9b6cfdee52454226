"""``vnuma device health`` and the watch's ``--health-dir``: saved GPU health files onto the inventory's device
states.

The files are read and matched to the host (:func:`vnuma.sources.gpuhealth.host_health`) before anything is
written: a file another host saved, an unreadable or malformed file refuse the whole command (exit 4, nothing
written). Each GPU with an effect is then tainted through :func:`vnuma.services.devices.taint`, one
transaction per GPU, by the rule of :func:`taint_to_give`: a GPU already tainted with the same reason and an
effect at least as strong is left as it is (``already``); otherwise it is tainted with the health reason and
the stronger of its kept effect and the health effect (a health file never weakens an operator's ``drain``).
A health file never lifts a taint (``vnuma device untaint`` does) and never moves a VM: a GPU tainted
``drain`` says the command that moves its VMs off (``vnuma device taint ... --effect drain --apply``).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vnuma.inventory import open_inventory
from vnuma.inventory.executor import Executor
from vnuma.services import Settings
from vnuma.services.devices import Guard, taint
from vnuma.services.files import read_input
from vnuma.sources.gpuhealth import CONDITIONS, Effects, GpuVerdict, HealthReport, HostHealth, host_health
from vnuma.sources.nvsmihealth import read_nvidia_smi
from vnuma.sources.xidlog import read_kernel_log
from vnuma.topology import Host
from vnuma.topology.devstates import DeviceState, DeviceStateKind, TaintEffect

TAINTED, ALREADY, WOULD_TAINT, REPORT_ONLY = "tainted", "already", "would-taint", "report-only"
"""A GPU's status in the outcome: tainted now, already tainted so (unchanged), to be tainted (``--dry-run``),
or reported only (every condition of it set to ``none`` in ``[device_health]``)."""


@dataclass(frozen=True, slots=True)
class GpuOutcome:
    """One GPU with findings: the health verdict, its status, and the effect its taint has after (None:
    report only)."""

    verdict: GpuVerdict
    status: str
    effect: TaintEffect | None


@dataclass(frozen=True, slots=True)
class HealthOutcome:
    """What the health files did to one host: its GPUs with findings (address order), and the addresses the
    files name that are no GPU of the host."""

    host: str
    gpus: tuple[GpuOutcome, ...]
    unknown: tuple[str, ...]
    dry_run: bool


def read_reports(nvidia_smi: Sequence[Path] = (), kernel_logs: Sequence[Path] = ()) -> list[HealthReport]:
    """The health reports of saved ``nvidia-smi -q -x`` documents and kernel logs, in that order.

    Raises:
        InvalidInputError: a missing or unreadable file, XML that is no ``nvidia-smi -q -x`` document.
    """
    return ([read_nvidia_smi(read_input(p, "nvidia-smi"), source=str(p)) for p in nvidia_smi]
            + [read_kernel_log(read_input(p, "kernel log"), source=str(p)) for p in kernel_logs])


def taint_to_give(kept: DeviceState | None, verdict: GpuVerdict) -> TaintEffect | None:
    """The effect to taint the GPU with for ``verdict``, given its kept state; None when nothing changes (no
    effect, or already tainted with the same reason and an effect at least as strong)."""
    if verdict.effect is None:
        return None
    tainted_now = kept is not None and kept.state is DeviceStateKind.TAINTED
    kept_drains = tainted_now and kept is not None and kept.effect is TaintEffect.DRAIN
    if tainted_now and kept is not None and kept.reason == verdict.reason and (
            kept_drains or verdict.effect is TaintEffect.NO_SCHEDULE):
        return None
    return TaintEffect.DRAIN if kept_drains or verdict.effect is TaintEffect.DRAIN else TaintEffect.NO_SCHEDULE


Noted = Callable[[Executor, GpuVerdict, TaintEffect], None]
"""Run in a health taint's own transaction, with the GPU's verdict and the effect given (``vnuma watch``: its
event), so the taint and what notes it are written together or not at all."""


def apply_health(
    settings: Settings, host: Host, health: HostHealth, *, dry_run: bool = False, who: str | None = None,
    guard: Guard | None = None, noted: Noted | None = None,
) -> HealthOutcome:
    """Taint ``host``'s GPUs as ``health`` says (:func:`taint_to_give`); ``dry_run``: write nothing; ``guard``,
    then ``noted``: run first in each taint's transaction (:func:`vnuma.services.devices.taint`).

    Raises:
        NotFoundError: the host or a GPU left the inventory meanwhile.
    """
    out = []
    for v in health.gpus:
        kept = host.device_states.of(v.address)
        give = taint_to_give(kept, v)
        if v.effect is None:
            out.append(GpuOutcome(v, REPORT_ONLY, None))
        elif give is None:
            out.append(GpuOutcome(v, ALREADY, kept.effect if kept is not None else None))
        else:
            if not dry_run:
                taint(settings, host.name, v.address, v.reason, give, who, _guarded(guard, noted, v, give))
            out.append(GpuOutcome(v, WOULD_TAINT if dry_run else TAINTED, give))
    return HealthOutcome(host.name, tuple(out), health.unknown, dry_run)


def _guarded(guard: Guard | None, noted: Noted | None, v: GpuVerdict, give: TaintEffect) -> Guard | None:
    if noted is None:
        return guard

    def both(x: Executor) -> None:
        if guard is not None:
            guard(x)
        noted(x, v, give)

    return both


def device_health(
    settings: Settings, host: str, reports: Sequence[HealthReport], effects: Effects, *, dry_run: bool = False,
    who: str | None = None,
) -> HealthOutcome:
    """Read ``reports`` onto host ``host``'s GPUs (``vnuma device health``).

    Raises:
        NotFoundError: unknown host.
        OtherHostFileError: a report none of whose GPUs is the host's (nothing written).
    """
    with open_inventory(settings.db_url) as inventory:
        found = inventory.get_host(host)
    return apply_health(settings, found, host_health(found, reports, effects), dry_run=dry_run, who=who)


def conditions(v: GpuVerdict) -> list[str]:
    """The verdict's conditions, in table order."""
    return [name for name in CONDITIONS if any(f.condition == name for f in v.findings)]


def drain_command(host: str, g: GpuOutcome) -> str | None:
    """The command that moves a ``drain``-tainted GPU's VMs off it (None for any other GPU)."""
    if g.effect is not TaintEffect.DRAIN or g.status == REPORT_ONLY:
        return None
    return (f"vnuma device taint {shlex.quote(host)} {g.verdict.address} --reason {shlex.quote(g.verdict.reason)} "
            "--effect drain --apply")


def outcome_doc(o: HealthOutcome) -> dict[str, Any]:
    """``vnuma device health --json``: ``host``, ``dry_run``, ``gpus`` [{``address``, ``conditions``,
    ``effect`` (null: report only), ``reason``, ``status`` (tainted|already|would-taint|report-only),
    ``drain`` (the command moving its VMs off, or null), ``findings`` [{``condition``, ``where``,
    ``detail``}]}], ``unknown`` (addresses the files name that are no GPU of the host)."""
    return {
        "host": o.host, "dry_run": o.dry_run,
        "gpus": [{"address": g.verdict.address, "conditions": conditions(g.verdict),
                  "effect": None if g.effect is None else g.effect.value, "reason": g.verdict.reason,
                  "status": g.status, "drain": drain_command(o.host, g),
                  "findings": [{"condition": f.condition, "where": f.where, "detail": f.detail}
                               for f in g.verdict.findings]} for g in o.gpus],
        "unknown": list(o.unknown),
    }
