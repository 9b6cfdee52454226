"""The ``[devices]`` table of the configuration file: the cleaning command and its timeout.

::

    [devices]
    clean_command = "/usr/local/sbin/reset-gpu {host} {device}"   # split like a shell line; {host}, {device}
    clean_timeout = 300                                            # seconds (default 300)

Read once with the settings (:func:`vnuma.services.make_settings`: :attr:`.Settings.cleaning`), so every path
that releases devices (``vm release``, a journaled run's moves, the service's routes) runs the same command;
running it is :mod:`vnuma.services.cleaning`. Kept light (no inventory): every command resolves its settings.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vnuma.errors import ConfigError

if TYPE_CHECKING:
    from vnuma.services.config import Config

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

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> CleanCommand:
        """The command from its :func:`dataclasses.asdict` (``vnuma serve`` hands its settings over as JSON)."""
        return cls(tuple(doc["words"]), float(doc["timeout_s"]))


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
