"""The site configuration: one TOML file, environment variables, command-line options, built-in defaults.

Where the file is: ``$VNUMA_CONFIG`` when set (it must then exist), else
``$XDG_CONFIG_HOME/vnuma/config.toml`` (``~/.config/vnuma/config.toml``)
when that exists; no file is fine. What wins: a command-line option, then
the environment variable, then the file, then the built-in default — the one
rule :func:`load` applies to every key, and the one ``vnuma config show``
prints. The file holds top-level keys (and the ``[watch]`` table of ``vnuma watch``, read by
:mod:`vnuma.services.watchconfig`, and the ``[device_health]`` table of the GPU health conditions' effects,
read by :mod:`vnuma.services.healthconfig`)::

    database = "/var/lib/vnuma/inventory.db"   # or a SQLAlchemy URL
    libvirt_uri = "qemu+ssh://root@{host}/system"
    strategy = "gpu-first"
    page_size = "1G"
    domain_type = "kvm"
    memnode_mode = "restrictive"
    templates = "/etc/vnuma/templates"
    metrics_allow = "127.0.0.0/8, ::1, 10.20.0.0/16"

Relative paths in the file (``database``, ``templates``) are relative to the
file's directory. ``libvirt_uri`` is the URI ``host add NAME`` uses without
``--uri``; ``{host}`` in it is replaced by the host's name. A key the file
does not know is a warning naming it (the file is still used); a syntax
error or a bad value is an error naming the file, the line and the key.

This module reads the file; the environment is handed in by the CLI (which
reads it once), as for every service.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vnuma.errors import ConfigError


def _choice(*allowed: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"use {', '.join(allowed)}")
        return value

    return check


def _page_size(value: str) -> str:
    from vnuma.errors import InvalidInputError
    from vnuma.topology.sizes import PAGE_SIZE_CHOICES, parse_page_size

    try:
        parse_page_size(value)
    except InvalidInputError as err:
        raise ValueError(f"use {PAGE_SIZE_CHOICES}") from err
    return value


def _strategy(value: str) -> str:
    from vnuma.placement.objectives import Strategy

    return _choice(*(s.value for s in Strategy))(value)


def _memnode_mode(value: str) -> str:
    from vnuma.render.view import OVERRIDE_MODES  # what a render may override placed modes with

    if value not in OVERRIDE_MODES:
        raise ValueError(f"use {', '.join(OVERRIDE_MODES)} (interleaved memory is chosen at place, "
                         "--memory-mode interleave: its claims span the VM's cells)")
    return value


def _text(value: str) -> str:
    if not value.strip():
        raise ValueError("it is empty")
    return value


METRICS_ALLOW = "127.0.0.0/8, ::1"
"""Who may read ``vnuma serve``'s ``/metrics`` without a token by default: this machine only."""

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def networks(text: str) -> tuple[Network, ...]:
    """A ``metrics_allow`` value: comma-separated CIDRs or addresses, or ``none`` (no network).

    Raises:
        ValueError: an item that is neither (its message says what to use).
    """
    if text.strip().lower() == "none":
        return ()
    out = []
    for item in (i.strip() for i in text.split(",")):
        try:
            out.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"{item!r} is no address or CIDR: give CIDRs or addresses, comma-separated, "
                             "or none") from None
    return tuple(out)


def _networks(value: str) -> str:
    networks(value)
    return value


@dataclass(frozen=True, slots=True)
class Key:
    """One setting: its environment variable, built-in default, check, and whether it is a path."""

    env: str
    default: str | None
    check: Callable[[str], str]
    path: bool = False


KEYS: dict[str, Key] = {
    "database": Key("VNUMA_DB", None, _text, path=True),
    "libvirt_uri": Key("VNUMA_LIBVIRT_URI", None, _text),
    "strategy": Key("VNUMA_STRATEGY", "pack", _strategy),
    "page_size": Key("VNUMA_PAGE_SIZE", "large", _page_size),
    "domain_type": Key("VNUMA_DOMAIN_TYPE", "kvm", _choice("kvm", "qemu")),
    "memnode_mode": Key("VNUMA_MEMNODE_MODE", None, _memnode_mode),
    "templates": Key("VNUMA_TEMPLATES", None, _text, path=True),
    "metrics_allow": Key("VNUMA_METRICS_ALLOW", METRICS_ALLOW, _networks),
}
"""The keys the file accepts (``database`` None: ``$XDG_DATA_HOME/vnuma/inventory.db``; ``memnode_mode``
None: each VM's own modes; ``templates`` None: only the shipped ones; ``metrics_allow``: who reads
``vnuma serve``'s ``/metrics`` without a token, :data:`METRICS_ALLOW` by default)."""

SECTIONS = ("watch", "devices", "device_health")
"""The tables the file may hold, checked by their own readers (``[watch]``: :mod:`vnuma.services.watchconfig`,
``[devices]``: :mod:`vnuma.services.cleanconfig`, ``[device_health]``: :mod:`vnuma.services.healthconfig`)."""


@dataclass(frozen=True, slots=True)
class Value:
    """A setting's effective value and where it came from."""

    value: str | None
    source: str  # "default" | "file" | "env" | "option"
    file: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    """Every key's effective value, the file read (None: none), and warnings about it."""

    values: dict[str, Value]
    file: Path | None
    warnings: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    sections: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """The file's tables that other readers check (``[watch]``: :mod:`vnuma.services.watchconfig`,
    ``[device_health]``: :mod:`vnuma.services.healthconfig`)."""

    def __getitem__(self, key: str) -> str | None:
        return self.values[key].value


def config_path(env: Mapping[str, str]) -> tuple[Path, bool]:
    """The configuration file and whether it was named explicitly (``VNUMA_CONFIG``)."""
    named = env.get("VNUMA_CONFIG")
    if named:
        return Path(named), True
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "vnuma" / "config.toml", False


def check_value(key: str, value: str, label: str, place: str = "") -> str:
    """``value`` when it is a valid ``key``; else ConfigError ``PLACEbad LABEL 'VALUE': what to use``
    (``label``: the option, variable or key; ``place``: ``FILE: line N: `` for the file).

    Every value of ``key`` is checked here, wherever it comes from."""
    try:
        return KEYS[key].check(value)
    except ValueError as err:
        raise ConfigError(f"{place}bad {label} {value!r}: {err}") from None


def load(env: Mapping[str, str], options: Mapping[str, str | None] | None = None) -> Config:
    """Every key resolved: option, else environment, else file, else default.

    Raises:
        ConfigError: an unreadable or malformed file, a value of the wrong type
            or out of range (in the file, the environment or an option), or a
            ``VNUMA_CONFIG`` that names no file.
    """
    path, explicit = config_path(env)
    found, warnings, sections = _read(path, explicit)
    values: dict[str, Value] = {}
    for key, spec in KEYS.items():
        option = (options or {}).get(key)
        if option:  # an empty option or variable is an unset one
            values[key] = Value(check_value(key, option, key), "option")
        elif env.get(spec.env):
            values[key] = Value(check_value(key, env[spec.env], spec.env), "env")
        elif key in found:
            values[key] = Value(found[key], "file", str(path))
        else:
            values[key] = Value(spec.default, "default")
    return Config(values, path if found or path.is_file() else None, tuple(warnings), env, sections)


def _read(path: Path, explicit: bool) -> tuple[dict[str, str], list[str], dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: no such configuration file (VNUMA_CONFIG)",
                              hint="unset VNUMA_CONFIG or point it at a file") from None
        return {}, [], {}
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the configuration file: {reason}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(_syntax_error(path, text, str(err)), hint="the file is TOML: key = \"value\"") from None
    found: dict[str, str] = {}
    warnings: list[str] = []
    sections: dict[str, Any] = {}
    for key, raw in doc.items():
        place = f"{path}: line {_line_of(text, key)}: "
        if key in SECTIONS:
            if not isinstance(raw, dict):
                raise ConfigError(f"{place}{key}: expected a table", hint=f"write it as a [{key}] table")
            sections[key] = raw
            continue
        if key not in KEYS:
            warnings.append(f"{place}unknown key {key!r}, ignored (keys: {', '.join(KEYS)})")
            continue
        if not isinstance(raw, str):
            raise ConfigError(f"{place}{key}: expected a string, got {type(raw).__name__}",
                              hint=f'write it quoted: {key} = "..."')
        value = check_value(key, raw, key, place)
        if KEYS[key].path and "://" not in value:
            value = str((path.parent / os.path.expanduser(value)).absolute())
        found[key] = value
    return found, warnings, sections


def _line_of(text: str, key: str) -> int | str:
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(rf"\s*(\[+\s*)?[\"']?{re.escape(key)}[\"']?\s*(=|\.|\])", line):
            return number
    return "?"


def _syntax_error(path: Path, text: str, message: str) -> str:
    """``FILE: line N: KEY: what tomllib says`` (the key of the line, when it has one)."""
    m = re.search(r"\(at line (\d+), column \d+\)", message)
    what = message[: m.start()].strip() if m else message
    if not m:
        return f"{path}: {what}"
    number = int(m.group(1))
    lines = text.splitlines()
    line = lines[number - 1] if 0 < number <= len(lines) else ""
    key = re.match(r"\s*([A-Za-z0-9_\-\"']+)\s*=", line)
    named = f" {key.group(1).strip(chr(34) + chr(39))}:" if key else ""
    return f"{path}: line {number}:{named} {what}"


def effective(config: Config) -> dict[str, Value]:
    """``config``'s values as a command uses them: the default inventory is its actual place."""
    from vnuma.inventory.db import resolve_url

    values = dict(config.values)
    db = values["database"]
    if db.value is None:
        values["database"] = Value(resolve_url(None, config.env).removeprefix("sqlite:///"), db.source)
    return values
