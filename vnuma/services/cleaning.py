"""The configured cleaning command: the ``[devices]`` table of the configuration file, and running it.

::

    [devices]
    clean_command = "/usr/local/sbin/reset-gpu {host} {device}"   # split like a shell line; {host}, {device}
    clean_timeout = 300                                            # seconds (default 300)

A device a VM releases on a host set to ``--after-release clean`` is ``cleaning``; with a command configured,
``vm release`` runs it for each device the VM left cleaning (and ``device clean --command`` for one device).
Exit 0 marks the device clean (as ``device clean`` does, the time spent added to its total); any other exit,
a command that cannot start, or one still running after ``clean_timeout`` seconds (killed) leaves it cleaning
with the reason (the exit status and the last line of its stderr, or the timeout) as its state's reason.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass

from vnuma.errors import ConfigError, DeviceStateError
from vnuma.inventory import open_inventory
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.config import Config
from vnuma.services.devices import Changed, clean, passable
from vnuma.topology import Host
from vnuma.topology.devstates import DeviceStateKind, DeviceStates, still_cleaning

DEFAULT_TIMEOUT_S = 300.0
_KEYS = {"clean_command", "clean_timeout"}


@dataclass(frozen=True, slots=True)
class CleanCommand:
    """The operator's cleaning command (``{host}`` and ``{device}`` replaced in each word) and its timeout."""

    words: tuple[str, ...]
    timeout_s: float = DEFAULT_TIMEOUT_S

    def argv(self, host: str, device: str) -> list[str]:
        """The command line for one device."""
        return [w.replace("{host}", host).replace("{device}", device) for w in self.words]


def clean_command(config: Config) -> CleanCommand | None:
    """The ``[devices]`` table's cleaning command, None when none is configured.

    Raises:
        ConfigError: an unknown key, an empty command or a timeout that is not a positive number.
    """
    table = config.sections.get("devices", {})
    where = f"{config.file}: [devices] "
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}unknown key {unknown[0]!r} (keys: {', '.join(sorted(_KEYS))})")
    text = table.get("clean_command")
    if text is None:
        return None
    if not isinstance(text, str) or not shlex.split(text):
        raise ConfigError(f"{where}clean_command: expected a command line, got {text!r}")
    timeout = table.get("clean_timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"{where}clean_timeout: expected a positive number of seconds, got {timeout!r}")
    return CleanCommand(tuple(shlex.split(text)), float(timeout))


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
            clean(settings, host, address, how="command")
        else:
            _keep_cleaning(settings, host, address, why)
        outcomes.append(Outcome(host, address, why is None, why or ""))
    return outcomes


def clean_by_command(settings: Settings, config: Config, host: str, device: str) -> Changed:
    """``device clean --command``: run the configured command for one cleaning device; clean on exit 0.

    Raises:
        ConfigError: no cleaning command is configured.
        NotFoundError: unknown host or device.
        DeviceStateError: the device is not cleaning, or the command failed or timed out (it stays cleaning,
            the reason recorded).
    """
    command = clean_command(config)
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


def clean_released(settings: Settings, command: CleanCommand, placement: Placement) -> list[Outcome]:
    """Run the command for the devices a released VM left cleaning (:func:`.inventory.devices.devices_of`)."""
    from vnuma.inventory.devices import devices_of

    left = sorted(devices_of(placement))
    return run_cleaning(settings, command, placement.host, left) if left else []


def _keep_cleaning(settings: Settings, host: str, address: str, why: str) -> None:
    """Record why the device stays cleaning (unless it was cleaned or tainted meanwhile)."""

    def change(h: Host, who: str) -> DeviceStates:
        own = h.device_states.of(address)
        if own is None or own.state is not DeviceStateKind.CLEANING:
            return h.device_states
        return still_cleaning(h.device_states, address, why)

    with open_inventory(settings.db_url) as inventory:
        inventory.change_device_states(host, change, "device-clean-failed", {"device": address, "reason": why})


def cleaned_notes(outcomes: list[Outcome]) -> list[str]:
    """One line per device the command ran for."""
    return [f"device {o.address} of host {o.host} cleaned by the cleaning command" if o.cleaned
            else f"device {o.address} of host {o.host} stays cleaning: {o.reason}" for o in outcomes]
