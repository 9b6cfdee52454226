"""The ``[device_health]`` table of the configuration file: the effect of each GPU health condition.

::

    [device_health]
    xid-92 = "none"            # report it, taint nothing
    remap-failure = "drain"    # move the GPU's VMs off too
    xid-74 = "no-schedule"

Keys are the conditions of :data:`vnuma.sources.gpuhealth.CONDITIONS` (``xid-48``, ``xid-79``,
``ecc-uncorrectable``, ``remap-pending``...); values ``drain``, ``no-schedule`` or ``none``. A condition
the table leaves out keeps its default effect. An unknown condition, another value, or a value that is no
string is a ConfigError naming the file and the key (exit 4), before anything is read or written.
"""

from __future__ import annotations

from types import MappingProxyType

from vnuma.errors import ConfigError
from vnuma.services.config import Config
from vnuma.sources.gpuhealth import CONDITIONS, DEFAULT_EFFECTS, Effects
from vnuma.topology.devstates import TaintEffect

SECTION = "device_health"
REPORT_ONLY = "none"
_VALUES = {**{e.value: e for e in TaintEffect}, REPORT_ONLY: None}


def health_effects(config: Config) -> Effects:
    """Each GPU health condition's effect: the file's ``[device_health]`` table over the defaults.

    Raises:
        ConfigError: an unknown condition, or a value other than drain, no-schedule or none.
    """
    table = config.sections.get(SECTION, {})
    where = f"{config.file}: [{SECTION}] "
    effects = dict(DEFAULT_EFFECTS)
    for key, raw in table.items():
        if key not in CONDITIONS:
            raise ConfigError(f"{where}unknown condition {key!r} (conditions: {', '.join(CONDITIONS)})",
                              hint="see docs/devices.md for the GPU health conditions")
        if not isinstance(raw, str) or raw not in _VALUES:
            raise ConfigError(f"{where}{key}: {raw!r} is no effect (use {', '.join(_VALUES)})",
                              hint=f'write it quoted: {key} = "no-schedule"')
        effects[key] = _VALUES[raw]
    return MappingProxyType(effects)
