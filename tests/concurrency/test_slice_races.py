"""Cache slices placed from racing processes on a 2-socket host: never more resctrl groups than the host's
classes of service.

One host, two sockets with an 11-way L3 each (2 ways kept for the host) and an MBA domain each, every
control reporting 4 classes (``maxAllocs='4'``, libvirt's own ``vircaps-x86_64-resctrl.xml`` figure). A
class of service is host-wide, so the host takes 3 VMs with a slice or a cap (the default group holds the
4th), wherever their vCPUs run. Each VM has 6 vCPUs, so a socket's 16 threads take two: counted per socket
the host would take 4 (CPUs, pages and ways leave room for them). Four spawned processes each ask for 6 such
VMs at once under ``pack`` (so they aim at the same cells); nothing is released, so the VMs recorded at the
end are the most the host ever held.
"""

from __future__ import annotations

import multiprocessing
import traceback
from dataclasses import replace
from typing import Any

import pytest

from tests.builders import make_host
from tests.concurrency.consistency import inconsistencies
from tests.concurrency.racing import recorded_vms
from vnuma.errors import ConflictError, InventoryError, NoPlacementError
from vnuma.inventory import open_inventory, upgrade
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl, ResctrlPolicy

WORKERS = 4
OPERATIONS = 6
CLASSES = 4


def _fleet(url: str) -> None:
    upgrade(url)
    host = make_host("h", cells=2, cells_per_socket=1, cores_per_cell=8, smt=2)
    control = (CacheControl(2048, 4096, CacheType.BOTH, CLASSES),)
    banks = tuple(CacheBank(c.id, 3, CacheType.BOTH, 11 * 2048, c.cpu_ids, control) for c in host.cells)
    nodes = tuple(BandwidthNode(c.id, c.cpu_ids, 10, 10, CLASSES) for c in host.cells)
    with open_inventory(url) as inv:
        inv.add_host(replace(host, resctrl=Resctrl(banks, nodes), resctrl_policy=ResctrlPolicy(2)))
        inv.add_tenant(Tenant("t", Isolation.NONE))


def _worker(url: str, worker: int, barrier: Any, queue: Any) -> None:
    settings = Settings(db_url=url)
    outcomes: dict[str, int] = {"placed": 0, "no-fit": 0, "busy": 0}
    failures: list[str] = []
    barrier.wait(timeout=120)
    for j in range(OPERATIONS):
        ask = VmRequest(
            name=f"w{worker}-{j}", tenant="t", vcpus=6, memory_kib=KIB_PER_GIB, page_size_kib=PAGE_1G,
            llc_ways=2 if (worker + j) % 3 else None, mem_bw=20 if (worker + j) % 2 else None,
        )
        if ask.llc_ways is None and ask.mem_bw is None:
            ask = replace(ask, llc_ways=2)
        try:
            _ask, result = place_vm(settings, ask, Strategy.PACK, dry_run=False)
            outcomes["placed" if result.chosen is not None else "no-fit"] += 1
        except NoPlacementError as err:
            outcomes["no-fit"] += 1
            if "no free class of service" not in str(err):
                failures.append(f"{ask.name}: refused for another reason: {err}")
        except (ConflictError, InventoryError) as err:
            outcomes["busy"] += 1
            if "busy" not in str(err) and "locked" not in str(err):
                failures.append(f"{ask.name}: {type(err).__name__}: {err}")
        except Exception:  # a traceback is the finding: reported to the test
            failures.append(f"{ask.name}: {traceback.format_exc()}")
    queue.put((outcomes, failures))


@pytest.mark.slow
def test_racing_slices_on_two_sockets_never_exceed_the_hosts_classes_of_service(url: str) -> None:
    _fleet(url)
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, w, barrier, queue)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    failures = [f for _outcomes, fs in results for f in fs]
    assert failures == [], "\n".join(failures)

    recorded = recorded_vms(url)
    assert sum(o["placed"] for o, _fs in results) == len(recorded) == CLASSES - 1  # the default group holds one
    cells = {c["host_cell"] for d in recorded.values() for c in d["cells"]}
    assert cells == {0, 1}  # on both sockets: the count is the host's, not a socket's
    assert inconsistencies(url) == []
