"""Use cases: the only layer that combines inventory, hypervisor, sources and render.

Each service opens what it needs from :class:`Settings`, runs one
inventory transaction per change, and returns dataclasses for the CLI to
print. Settings are read once by the CLI and passed in; nothing here reads
the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vnuma.services.cleanconfig import CleanCommand
    from vnuma.services.config import Config


@dataclass(frozen=True, slots=True)
class Settings:
    """Resolved configuration (:mod:`vnuma.services.config`): the inventory URL, an operator templates
    directory, and the defaults of options a command was not given."""

    db_url: str
    templates_dir: Path | None = None
    libvirt_uri: str | None = None
    strategy: str = "pack"
    page_size: str = "large"
    domain_type: str = "kvm"
    memnode_mode: str | None = None
    metrics_allow: str | None = None
    """Who reads ``vnuma serve``'s ``/metrics`` without a token (None: :data:`.config.METRICS_ALLOW`)."""
    cleaning: CleanCommand | None = None
    """The ``[devices]`` cleaning command (:mod:`.cleanconfig`), run for the devices VMs leave cleaning."""
    warnings: tuple[str, ...] = ()


def make_settings(
    db_option: str | None, env: Mapping[str, str], *, create: bool = True, config: Config | None = None
) -> Settings:
    """Resolve settings from the ``--db`` option, the environment and the configuration file.

    An inventory file named explicitly (``--db``, ``VNUMA_DB`` or the file's
    ``database``) must exist unless ``create``: a mistyped path is refused,
    not silently created (with its directories) as an empty inventory. The
    default location is created on first use.

    Raises:
        InventoryError: an explicit SQLite path that does not exist, and not ``create``.
        ConfigError: a malformed configuration file or value.
    """
    from vnuma.errors import InventoryError
    from vnuma.inventory.db import missing_sqlite_file, resolve_url
    from vnuma.services.cleanconfig import clean_command
    from vnuma.services.config import load

    if config is None:
        config = load(env, {"database": db_option})
    database = config.values["database"]
    url = resolve_url(database.value, env)
    missing = missing_sqlite_file(url) if database.source != "default" and not create else None
    if missing is not None:
        raise InventoryError(
            f"inventory {missing} does not exist",
            hint=f"create it: vnuma --db {missing} db upgrade (or add --create before the command)",
        )
    templates = config["templates"]
    return Settings(
        db_url=url,
        templates_dir=Path(templates) if templates else None,
        libvirt_uri=config["libvirt_uri"],
        strategy=config["strategy"] or "pack",
        page_size=config["page_size"] or "large",
        domain_type=config["domain_type"] or "kvm",
        memnode_mode=config["memnode_mode"],
        metrics_allow=config["metrics_allow"],
        cleaning=clean_command(config),
        warnings=config.warnings,
    )
