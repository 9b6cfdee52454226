"""Racing placements from separate processes: the worker, the fleet it races on, and the audit.

Used by ``tests/concurrency/test_races.py`` (a CI-sized run) and
``bench/bench_races.py`` (the issue's 8 x 250). Workers are started with the
``spawn`` context, so each is a fresh interpreter with its own engine and
connections, like separate ``vnuma`` commands.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import create_engine, select

from tests.builders import make_host
from vnuma.codec import placement_to_dict
from vnuma.errors import ConflictError, InventoryError, NoPlacementError, VnumaError
from vnuma.inventory import open_inventory, upgrade
from vnuma.inventory.models import VmRow
from vnuma.placement.model import Isolation, Tenant, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import place_vm
from vnuma.topology import KIB_PER_GIB, PAGE_1G, Host
from vnuma.topology.resctrl import BandwidthNode, CacheBank, CacheControl, CacheType, Resctrl, ResctrlPolicy

TENANTS = (Tenant("acme", Isolation.CORE), Tenant("beta", Isolation.NONE))
OUTCOMES = ("placed", "no-fit", "busy", "released")


def make_fleet(url: str, hosts: int = 3) -> None:
    """A fresh inventory with a few small GPU hosts (an 11-way L3 with CAT and MBA per cell, 2 ways kept for
    the host, caps up to 100 per domain) and two tenants."""
    upgrade(url)  # a PostgreSQL database is never created implicitly
    with open_inventory(url) as inv:
        for i in range(hosts):
            host = make_host(f"host-{i}", cells=2, cores_per_cell=8, smt=2, gpus_per_cell=2)
            inv.add_host(replace(host, resctrl=_rdt(host), resctrl_policy=ResctrlPolicy(2)))
        for t in TENANTS:
            inv.add_tenant(t)


def _rdt(host: Host) -> Resctrl:
    control = (CacheControl(2048, 4096, CacheType.BOTH, 16),)
    banks = tuple(CacheBank(c.id, 3, CacheType.BOTH, 11 * 2048, c.cpu_ids, control) for c in host.cells)
    return Resctrl(banks, tuple(BandwidthNode(c.id, c.cpu_ids, 10, 10, 8) for c in host.cells))


def _request(rng: random.Random, name: str) -> VmRequest:
    return VmRequest(
        name=name,
        tenant=rng.choice(TENANTS).name,
        vcpus=rng.choice((1, 2, 2, 4, 6)),
        memory_kib=rng.choice((1, 2, 4)) * KIB_PER_GIB,
        gpus=rng.choice((0, 0, 0, 1)),
        page_size_kib=PAGE_1G,
        llc_ways=rng.choice((None, None, 2, 3)),
        mem_bw=rng.choice((None, None, 20, 40)),
    )


@dataclass
class Report:
    """What one worker did: outcomes, VMs it holds at the end (name -> placement dict), failures."""

    worker: int
    outcomes: Counter[str] = field(default_factory=Counter)
    held: dict[str, dict[str, Any]] = field(default_factory=dict)
    released: list[str] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _place(settings: Settings, rng: random.Random, name: str, report: Report) -> None:
    try:
        _request_done, result = place_vm(settings, _request(rng, name), Strategy.PACK, dry_run=False)
    except NoPlacementError:
        report.outcomes["no-fit"] += 1
        return
    except (ConflictError, InventoryError) as err:
        if "busy" not in str(err) and "locked" not in str(err):
            report.failures.append(f"{name}: {type(err).__name__}: {err}")
        report.outcomes["busy"] += 1
        report.reasons[str(err)] += 1
        return
    if result.chosen is None:
        report.outcomes["no-fit"] += 1
        return
    report.outcomes["placed"] += 1
    report.held[name] = placement_to_dict(result.chosen)


def _release(settings: Settings, rng: random.Random, report: Report) -> None:
    name = rng.choice(sorted(report.held))
    with open_inventory(settings.db_url) as inv:
        inv.release(name)
    del report.held[name]
    report.released.append(name)
    report.outcomes["released"] += 1


def race_worker(url: str, worker: int, count: int, seed: int, barrier: Any, queue: Any) -> None:
    """Run ``count`` operations (placements, and releases of own VMs) and put a Report on ``queue``."""
    report = Report(worker)
    rng = random.Random(seed * 1000 + worker)
    settings = Settings(db_url=url)
    barrier.wait(timeout=120)
    start = time.perf_counter()
    for j in range(count):
        name = f"w{worker}-{j:04d}"
        try:
            if report.held and rng.random() < 0.25:
                _release(settings, rng, report)
            else:
                _place(settings, rng, name, report)
        except VnumaError as err:
            report.failures.append(f"{name}: {type(err).__name__}: {err}")
        except Exception:  # a traceback is the finding: reported to the test
            report.failures.append(f"{name}: {traceback.format_exc()}")
    report.seconds = time.perf_counter() - start
    queue.put(report)


def run_race(url: str, workers: int, count: int, seed: int = 1) -> list[Report]:
    """Start ``workers`` spawned processes racing ``count`` operations each; their reports."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=race_worker, args=(url, w, count, seed, barrier, queue)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    reports = [queue.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, f"worker pid {p.pid} exited with {p.exitcode}"
    return sorted(reports, key=lambda r: r.worker)


def recorded_vms(url: str) -> dict[str, dict[str, Any]]:
    """Every VM row's placement document, by name (read with plain SQLAlchemy)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {name: json.loads(doc) for name, doc in conn.execute(select(VmRow.name, VmRow.placement))}
    finally:
        engine.dispose()
