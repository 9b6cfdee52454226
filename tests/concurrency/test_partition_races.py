"""MIG instances placed from racing processes: no two instances on one GPU ever share a memory slice.

Two spawned processes place 3g.40gb instances (two fit on a GPU, at memory slices 0 and 4) on the demo
host (8 H100 PCIe GPUs) with the geometry of its model kept, until the GPUs are full. Under ``pack`` a
partly used GPU is filled first, so both racers aim at the same GPU and start; the claim's admission
under the host lock (and the ``partition_claims`` unique indexes) must keep them apart. Checked from
the claim rows alone, against the geometry's tables, and against the VMs' placements.
"""

from __future__ import annotations

import json
import multiprocessing
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from tests.concurrency.consistency import inconsistencies
from vnuma.errors import ConflictError, InventoryError, NoPlacementError
from vnuma.inventory import open_inventory, upgrade
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.partitionmodel import PartitionAsk, PartitionKind
from vnuma.services import Settings
from vnuma.services.gpuprofiles import import_geometry
from vnuma.services.placing import place_vm
from vnuma.sources.capabilities import parse_capabilities
from vnuma.sources.demo import demo_capabilities_path, demo_node_path
from vnuma.sources.migprofiles import parse_profile
from vnuma.sources.nodedev import parse_nodedev_file_content, with_parent_bridges
from vnuma.topology import KIB_PER_GIB, PAGE_4K

GEOMETRY = parse_profile(
    (Path(__file__).resolve().parents[1] / "data" / "gpu-profiles" / "demo-h100-pcie.json").read_text(), "json"
)
WORKERS = 2
OPERATIONS = 12  # 24 asks for the 16 slots of 3g.40gb on 8 GPUs


def _fleet(url: str) -> None:
    upgrade(url)
    host = parse_capabilities(demo_capabilities_path().read_bytes(), name="h1")
    devices = with_parent_bridges(parse_nodedev_file_content(demo_node_path().read_bytes(), "demo"))
    with open_inventory(url) as inv:
        inv.add_host(replace(host, devices=devices))
        inv.add_tenant(Tenant("t", Isolation.NONE))
    import_geometry(Settings(db_url=url), GEOMETRY)


def _worker(url: str, worker: int, barrier: Any, queue: Any) -> None:
    settings = Settings(db_url=url)
    outcomes: dict[str, int] = {"placed": 0, "no-fit": 0, "busy": 0}
    failures: list[str] = []
    barrier.wait(timeout=120)
    for j in range(OPERATIONS):
        ask = VmRequest(
            name=f"w{worker}-{j:02d}", tenant="t", vcpus=1, memory_kib=KIB_PER_GIB, page_size_kib=PAGE_4K,
            partition=PartitionAsk(PartitionKind.MIG, "3g.40gb"),
        )
        try:
            _ask, result = place_vm(settings, ask, Strategy.PACK, dry_run=False)
            outcomes["placed" if result.chosen is not None else "no-fit"] += 1
        except NoPlacementError:
            outcomes["no-fit"] += 1
        except (ConflictError, InventoryError) as err:
            outcomes["busy"] += 1
            if "busy" not in str(err) and "locked" not in str(err):
                failures.append(f"{ask.name}: {type(err).__name__}: {err}")
        except Exception:  # a traceback is the finding: reported to the test
            failures.append(f"{ask.name}: {traceback.format_exc()}")
    queue.put((outcomes, failures))


def _rows(url: str) -> tuple[list[Any], dict[str, Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            claims = list(conn.execute(text(
                "SELECT v.name, c.gpu, c.kind, c.name, c.start, c.uuid FROM partition_claims c "
                "JOIN vms v ON v.id = c.vm_id"
            )))
            docs = {name: json.loads(doc) for name, doc in conn.execute(text("SELECT name, placement FROM vms"))}
    finally:
        engine.dispose()
    return claims, docs


@pytest.mark.slow
def test_racing_mig_placements_never_overlap(url: str) -> None:
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
    placed = sum(o["placed"] for o, _fs in results)
    assert placed == 16  # every slot taken once, whoever lost a race placed again or found no room

    claims, docs = _rows(url)
    assert len(claims) == placed == len(docs)
    size = {p.name: p.memory_slices for p in GEOMETRY.profiles}
    slices: dict[str, list[int]] = {}
    for _vm, gpu, kind, profile, start, _uuid in claims:
        assert kind == "mig" and start in next(p.starts for p in GEOMETRY.profiles if p.name == profile)
        slices.setdefault(gpu, []).extend(range(start, start + size[profile]))
    for gpu, used in slices.items():
        assert len(used) == len(set(used)), f"GPU {gpu}: memory slices {sorted(used)} overlap"
    recorded = {
        (vm, d["gpu"], d["kind"], d["profile"], d["start"], d["uuid"])
        for vm, doc in docs.items() for d in doc["devices"] if d["kind"] == "mig"
    }
    assert recorded == set(claims)
    assert inconsistencies(url) == []
