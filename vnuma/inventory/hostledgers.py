"""One-host ledgers kept between the claims of one process.

A claim builds the ledger of its host from the rows its transaction read
(:func:`~.placing.ledger_of`: every VM of the host decoded and booked again).
A serving worker claims on the same host again and again, so the ledger a
claim leaves is kept for the next one:

* a kept ledger is reused only when every row it stands for equals what the
  new claim's transaction read: the host's row and the MIG geometries, the
  tenant's row, the host's VMs with their tenants, what the tenant holds
  elsewhere and its replica group's VMs elsewhere. Equal rows build an equal
  ledger, so reuse never changes an answer, whatever changed in between (a
  release, another process's claim, a database made again under the same
  URL): any difference is a miss, and the ledger is built from the rows;
* a claim that wrote its VM keeps its ledger (the VM recorded) under the rows
  it will read once committed: its own VM's row added. Rolled back, those
  rows are never read, and the ledger is never used again;
* a ledger is taken out while one claim uses it and put back after, so two
  threads never share one.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import NamedTuple

from vnuma.inventory.executor import Row
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Placement

KEPT_MAX = 64
"""Ledgers kept per process (the hosts claimed on last)."""


class Rows(NamedTuple):
    """What one host's ledger is built from (the VMs' rows in name order, as Python sorts)."""

    host: Row
    profiles: tuple[Row, ...]
    tenant: Row
    on_host: tuple[Row, ...]
    used: Row
    members: tuple[Placement, ...]

    @classmethod
    def read(
        cls, host: Row, profiles: Sequence[Row], tenant: Row, on_host: Sequence[Row], used: Row,
        members: Sequence[Placement],
    ) -> Rows:
        """The rows as a transaction returned them."""
        return cls(tuple(host), tuple(map(tuple, profiles)), tuple(tenant), tuple(sorted(map(tuple, on_host))),
                   tuple(used), tuple(members))

    def with_vm(self, vm: str, document: str) -> Rows:
        """The rows once VM ``vm`` of this tenant, stored as ``document``, is on the host."""
        row = (vm, document, *self.tenant[1:])  # ON_HOST's tenant columns are TENANT's but its id
        return self._replace(on_host=tuple(sorted((*self.on_host, row))))


class HostLedgers:
    """Kept one-host ledgers by (inventory URL, host name), each with the rows it stands for."""

    def __init__(self, most: int = KEPT_MAX) -> None:
        self._kept: OrderedDict[tuple[str, str], tuple[Rows, Fleet]] = OrderedDict()
        self._lock = threading.Lock()
        self._most = most
        self.hits = 0
        """Claims that found their host's ledger kept (for tests and benchmarks)."""

    def take(self, url: str, host: str, rows: Rows, build: Callable[[], Fleet]) -> Fleet:
        """The ledger ``rows`` stand for: the kept one when it stands for equal rows, else ``build()``."""
        with self._lock:
            kept = self._kept.pop((url, host), None)
        if kept is not None and kept[0] == rows:
            self.hits += 1
            return kept[1]
        return build()

    def keep(self, url: str, host: str, rows: Rows, ledger: Fleet) -> None:
        """Keep ``ledger`` as the one ``rows`` stand for (the least recently kept goes beyond :data:`KEPT_MAX`)."""
        with self._lock:
            self._kept[(url, host)] = (rows, ledger)
            self._kept.move_to_end((url, host))
            while len(self._kept) > self._most:
                self._kept.popitem(last=False)


KEPT = HostLedgers()
"""This process's kept ledgers (a forked child starts without them: its lock may have been held)."""
os.register_at_fork(after_in_child=KEPT.__init__)
