"""Running the configured cleaning command (``[devices] clean_command``: :mod:`.cleanconfig`).

A device a VM leaves on a host set to ``--after-release clean`` is ``cleaning``; with a command configured
(:attr:`.Settings.cleaning`), every path that makes VMs leave devices runs it for exactly those devices: ``vm
release`` (:func:`.applying.release_vm`), and each step of a journaled run (rebalance, ``vm migrate``, ``vm repin``,
``host drain``, a device drain, the watch's proposals, the same through the API), once the step is done, for the
devices its VM left (:func:`clean_left`; an ``--abort``'s undone step too); ``device clean --command`` runs it
for one device. Exit 0 marks the device clean (as ``device clean`` does, the time spent added to its total); any
other exit, a command that cannot start, or one still running after ``clean_timeout`` seconds (killed) leaves it
cleaning with the reason (the exit status and the last line of its stderr, or the timeout) as its state's reason.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from vnuma.errors import ConfigError, DeviceStateError, VnumaError
from vnuma.inventory import open_inventory
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.cleanconfig import CleanCommand
from vnuma.services.devices import Changed, clean, passable
from vnuma.topology import Host
from vnuma.topology.devstates import DeviceStateKind, DeviceStates, still_cleaning


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the command did for one device: ``cleaned``, else why it stays cleaning."""

    host: str
    address: str
    cleaned: bool
    reason: str = ""


def _run(command: CleanCommand, host: str, address: str) -> str | None:
    """None when the command exited 0 for the device, else why not."""
    argv = command.argv(host, address)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=command.timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return f"cleaning command timed out after {command.timeout_s:g} s"
    except OSError as err:
        return f"cleaning command {argv[0]!r} cannot run: {err.strerror or err}"
    if done.returncode == 0:
        return None
    last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "")
    return f"cleaning command exited {done.returncode}" + (f": {last}" if last else "")


def run_cleaning(settings: Settings, command: CleanCommand, host: str, devices: list[str]) -> list[Outcome]:
    """Run the command for each of ``devices`` of ``host`` that is cleaning now (the others are left alone):
    exit 0 cleans it (:func:`vnuma.services.devices.clean`), anything else leaves it cleaning with the reason.

    Raises:
        NotFoundError: unknown host or device.
    """
    with open_inventory(settings.db_url) as inventory:
        now = inventory.get_host(host)
    outcomes = []
    for device in devices:
        address = passable(now, device).address
        own = now.device_states.of(address)
        if own is None or own.state is not DeviceStateKind.CLEANING:
            continue
        why = _run(command, host, address)
        if why is None:
            try:
                clean(settings, host, address, how="command")
            except VnumaError as err:  # its state changed while the command ran (cleaned by hand, tainted)
                why = f"not marked clean: {err}"
        else:
            _keep_cleaning(settings, host, address, why)
        outcomes.append(Outcome(host, address, why is None, why or ""))
    return outcomes


def clean_by_command(settings: Settings, host: str, device: str) -> Changed:
    """``device clean --command``: run the configured command for one cleaning device; clean on exit 0.

    Raises:
        ConfigError: no cleaning command is configured.
        NotFoundError: unknown host or device.
        DeviceStateError: the device is not cleaning, or the command failed or timed out (it stays cleaning,
            the reason recorded).
    """
    command = settings.cleaning
    if command is None:
        raise ConfigError("no cleaning command is configured",
                          hint="set clean_command in the [devices] table of the configuration file (docs/devices.md)")
    with open_inventory(settings.db_url) as inventory:
        now = inventory.get_host(host)
    address = passable(now, device).address
    own = now.device_states.of(address)
    if own is None or own.state is not DeviceStateKind.CLEANING:
        return clean(settings, host, address)  # says why not, as `device clean` does
    why = _run(command, host, address)
    if why is not None:
        _keep_cleaning(settings, host, address, why)
        raise DeviceStateError(f"device {address} of host {host!r} stays cleaning: {why}",
                               hint=f"clean it by hand, then `vnuma device clean {host} {address}`")
    return clean(settings, host, address, how="command")


def clean_left(settings: Settings, before: Placement, after: Placement | None = None) -> list[str]:
    """Run the configured command (none: nothing) for the devices VM ``before.vm`` left going from ``before`` to
    ``after`` (None: released; :func:`vnuma.inventory.devices.left`) that are cleaning now, and say what it did,
    one line per device. Never raises for the command or the devices' states: what went wrong is in the lines
    (the device stays cleaning, the reason recorded); the VM's move or release stands either way."""
    from vnuma.inventory.devices import left

    command = settings.cleaning
    gone = sorted(left(before, after)) if command is not None else []
    if not gone:
        return []
    try:
        outcomes = run_cleaning(settings, command, before.host, gone)  # type: ignore[arg-type]
    except VnumaError as err:
        return [f"cleaning command not run for the devices VM {before.vm} left on host {before.host}: {err}"]
    return [f"device {o.address} of host {o.host} cleaned by the cleaning command" if o.cleaned
            else f"device {o.address} of host {o.host} stays cleaning: {o.reason}" for o in outcomes]


def _keep_cleaning(settings: Settings, host: str, address: str, why: str) -> None:
    """Record why the device stays cleaning (unless it was cleaned or tainted meanwhile)."""

    def change(h: Host, who: str) -> DeviceStates:
        own = h.device_states.of(address)
        if own is None or own.state is not DeviceStateKind.CLEANING:
            return h.device_states
        return still_cleaning(h.device_states, address, why)

    with open_inventory(settings.db_url) as inventory:
        inventory.change_device_states(host, change, "device-clean-failed", {"device": address, "reason": why})
