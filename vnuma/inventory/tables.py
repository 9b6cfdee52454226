"""Every table of the inventory on one metadata: :mod:`.models` with the claims' (:mod:`.claimtables`) and the
watch's (:mod:`.watchtables`), for the migrations' environment and the drift tests."""

from __future__ import annotations

from vnuma.inventory import claimtables, watchtables
from vnuma.inventory.models import Base

__all__ = ["Base", "claimtables", "watchtables"]
