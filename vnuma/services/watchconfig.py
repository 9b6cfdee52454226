"""The ``[watch]`` table of the configuration file: ``vnuma watch``'s thresholds, persistence and retention.

::

    [watch]
    k = 3                  # a rule opens an event when true in >= k of the last n samples
    n = 5
    m = 3                  # ... and the event is cleared after m quiet samples in a row (m >= n - k + 1)
    noisy_load = 0.5       # noisy: only on a domain loaded to >= this part of its highest load seen
    remote_share = 0.3     # remote: a VM's remote share above this (0..0.99)
    capped = 0.95          # capped: at >= this part of its cap (0.01..1)
    cell_drift = "4GiB"    # cell-drift: host free this much below the inventory's free
    history = "1h"         # raw samples kept this long, then one-minute means
    minutes_days = 7       # one-minute means kept this many days
    moves_per_host_hour = 2   # acting: at most this many moves leave a host in an hour
    moves_per_hour = 10       # ... and this many on the whole fleet
    cooldown = "1h"           # a VM moved is not moved again within this time
    no_return = "24h"         # ... nor back to the cells it left within this time

    [watch.tenants.acme]   # a tenant's own remote_share and capped
    remote_share = 0.5

Every value is checked against :data:`vnuma.watch.rules.RANGES` (the one
statement of the ranges); a value out of range, of the wrong type, or an
unknown key is a ConfigError naming the file and the key, before the watch
reads or writes anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from types import MappingProxyType
from typing import Any

from vnuma.errors import ConfigError, InvalidInputError
from vnuma.services.audit import parse_age
from vnuma.services.config import Config
from vnuma.topology.sizes import parse_size_kib
from vnuma.watch.budget import Budget
from vnuma.watch.rules import RANGES, Limits, Thresholds, inconsistency

_LIMITS = {f.name for f in fields(Limits)}
_BUDGET = {"moves_per_host_hour": "host_hour", "moves_per_hour": "fleet_hour"}
_TOP = {"k", "n", "m", "noisy_load", "cell_drift", "history", "minutes_days", *_LIMITS, "tenants", *_BUDGET,
        "cooldown", "no_return"}


def _number(where: str, key: str, raw: object, whole: bool) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or (whole and not isinstance(raw, int)):
        raise ConfigError(f"{where}{key}: expected {'a whole number' if whole else 'a number'}, got {raw!r}")
    return raw


def _checked(where: str, key: str, value: float, shown: object) -> float:
    lo, hi = RANGES[key]
    if not lo <= value <= hi:
        raise ConfigError(f"{where}{key}: {shown!r} is out of range ({lo:g} to {hi:g})",
                          hint="see docs/watch.md for each threshold's meaning and range")
    return value


def _limits(where: str, table: Mapping[str, Any], base: Limits) -> Limits:
    values: dict[str, float] = {}
    for key, raw in table.items():
        if key not in _LIMITS:
            raise ConfigError(f"{where}unknown key {key!r} (a tenant may set {', '.join(sorted(_LIMITS))})")
        values[key] = _checked(where, key, _number(where, key, raw, False), raw)
    return Limits(**{**{f: getattr(base, f) for f in _LIMITS}, **values})


def thresholds(config: Config) -> Thresholds:
    """The watch's thresholds: the file's ``[watch]`` table over the built-in defaults.

    Raises:
        ConfigError: an unknown key, a value of the wrong type or out of range, or a persistence that
            cannot work (k > n, m < n - k + 1).
    """
    table = config.sections.get("watch", {})
    where = f"{config.file}: [watch] "
    unknown = sorted(set(table) - _TOP)
    if unknown:
        raise ConfigError(f"{where}unknown key {unknown[0]!r} (keys: {', '.join(sorted(_TOP))})")
    values: dict[str, Any] = {}
    for key in ("k", "n", "m", "minutes_days"):
        if key in table:
            values[key] = int(_checked(where, key, _number(where, key, table[key], True), table[key]))
    if "noisy_load" in table:
        values["noisy_load"] = _checked(where, "noisy_load", _number(where, "noisy_load", table["noisy_load"],
                                                                      False), table["noisy_load"])
    if "cell_drift" in table:
        values["cell_drift_kib"] = int(_checked(where, "cell_drift_kib", _size(where, table["cell_drift"]),
                                                table["cell_drift"]))
    if "history" in table:
        values["history_s"] = int(_checked(where, "history_s", _time(where, table["history"]), table["history"]))
    limits = _limits(where, {k: v for k, v in table.items() if k in _LIMITS}, Limits())
    tenants_table = table.get("tenants", {})
    if not isinstance(tenants_table, dict) or not all(isinstance(v, dict) for v in tenants_table.values()):
        raise ConfigError(f"{where}tenants: expected [watch.tenants.NAME] tables")
    tenants = {name: _limits(f"{config.file}: [watch.tenants.{name}] ", t, limits) for name, t in tenants_table.items()}
    t = Thresholds(**values, limits=limits, tenants=MappingProxyType(tenants), budget=_budget(where, table))
    problem = inconsistency(t)
    if problem is not None:
        raise ConfigError(f"{where}{problem}")
    return t


def _budget(where: str, table: Mapping[str, Any]) -> Budget:
    """The acting budget's limits of the ``[watch]`` table (the permits come from the command line)."""
    values: dict[str, int] = {}
    for key, name in _BUDGET.items():
        if key in table:
            values[name] = int(_checked(where, key, _number(where, key, table[key], True), table[key]))
    for key, name in (("cooldown", "cooldown_s"), ("no_return", "return_s")):
        if key in table:
            values[name] = int(_checked(where, f"{key}_s", _time(where, table[key], key), table[key]))
    return replace(Budget(), **values)


def _size(where: str, raw: object) -> int:
    if isinstance(raw, str):
        try:
            return parse_size_kib(raw)
        except InvalidInputError:
            pass
    raise ConfigError(f"{where}cell_drift: expected a size such as \"1GiB\", got {raw!r}")


def _time(where: str, raw: object, key: str = "history") -> int:
    age = parse_age(raw) if isinstance(raw, str) else None
    if age is None:
        raise ConfigError(f"{where}{key}: expected a time such as \"1h\" or \"30m\", got {raw!r}")
    return round(age.total_seconds())
