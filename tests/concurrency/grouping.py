"""Racing first placements of an affine replica group from separate processes (``tests/concurrency/test_groups.py``).

Workers are spawned (fresh interpreters, like separate ``vnuma place`` commands). With ``hold``, a worker
waits at ``decided`` before its first claim, so both claims are made from snapshots that show neither VM:
they race at the claim, where the group's lock and its members on other hosts decide.
"""

from __future__ import annotations

import threading
import traceback
from typing import Any

from vnuma.errors import VnumaError
from vnuma.inventory.placer import Placer
from vnuma.placement.model import Affinity, Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G


def _hold_first_claim(decided: Any, first: list[str]) -> None:
    """Make this process's first claim wait until every racer decided (its choice noted in ``first``)."""
    original = Placer.claim
    waited = threading.Event()

    def claim(self: Placer, placement: Placement, *args: Any, **kw: Any) -> Placement:
        if not waited.is_set():
            waited.set()
            first.append(placement.host)
            decided.wait(timeout=120)
        return original(self, placement, *args, **kw)

    Placer.claim = claim  # type: ignore[method-assign]


def group_worker(
    url: str, jobs: list[tuple[str, str, int, str]], start: Any, decided: Any, hold: bool, queue: Any
) -> None:
    """Place each job (VM, tenant, vCPUs, group) with ``--affinity host``; put (VM, host or None, first
    choice or None, error or None) on ``queue`` for each."""
    settings = Settings(db_url=url)
    first: list[str] = []
    if hold:
        _hold_first_claim(decided, first)
    start.wait(timeout=120)
    for vm, tenant, vcpus, group in jobs:
        req = VmRequest(vm, tenant, vcpus, 2 * KIB_PER_GIB, page_size_kib=PAGE_1G, group=group,
                        affinity=Affinity.HOST)
        try:
            _req, result = place_vm(settings, req, Strategy.PACK, dry_run=False)
            host, error = (result.chosen.host if result.chosen else None), None
        except VnumaError as err:
            host, error = None, f"{type(err).__name__}: {err}"
        except Exception:  # a traceback is the finding
            host, error = None, traceback.format_exc()
        queue.put((vm, host, first[0] if first else None, error))
