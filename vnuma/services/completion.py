"""Names for shell completion: hosts, tenants or VMs starting with what was typed (one plain read)."""

from __future__ import annotations

from vnuma.inventory.reading import open_reader
from vnuma.services import Settings


def names(settings: Settings, kind: str, prefix: str) -> list[str]:
    """``kind`` (``host``, ``tenant``, ``vm``) names starting with ``prefix``, sorted (at most 500)."""
    with open_reader(settings.db_url) as reader:
        return reader.names(kind, prefix)
