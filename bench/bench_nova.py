"""OpenStack Nova's own NUMA fit on vnuma's traces, beside vnuma, same traces, same run.

Installs ``nova==34.0.0`` from PyPI into its own virtualenv (``bench/.venv-nova``,
ignored by git, not a dependency of vnuma) the first time, then, per scenario
and seed, replays the generated trace (the requests Nova can express, see
below) through Nova's code in that interpreter:

* hosts in name order, first fit (the first host whose fit succeeds takes
  the VM; Nova's scheduler with no weighers that differ between hosts);
* per host ``nova.virt.hardware.numa_fit_instance_to_host`` (its cell
  sorting as configured by default: spread, cells with free PCI devices last
  for a VM without them, first for one with them; its permutation search)
  with ``nova.pci.stats.PciDeviceStats`` holding the host's GPUs, one pool per
  NUMA node (vendor 10de), asked for ``count`` GPUs with NUMA policy
  ``required``;
* the fit is recorded with ``hardware.numa_usage_from_instance_numa`` and
  ``PciDeviceStats.apply_requests`` (which splits a multi-cell VM's GPUs
  lowest cell first).

What Nova cannot say is dropped from the trace for Nova and for vnuma alike,
and counted: NICs (``nics``: Nova asks them through Neutron ports, not
traces), GPU partitions (``mig``/``vgpu``), cold tiers (``cold_memory_mib``)
and ``isolate`` thread policy (Nova's ``isolate`` refuses SMT hosts; every
example host has SMT). ``numa_nodes`` left open (auto) is asked of Nova as
one node (``hw:numa_nodes=1``); vnuma keeps it open. Both sides get the same
requests in the same order; VMs, vCPUs and GPUs placed and the mean decision
time (per request, all hosts tried) are printed side by side.

    .venv/bin/python bench/bench_nova.py [--seeds 20] [--scenarios a,b] [--time-limit 300]

The Nova side runs as ``bench/.venv-nova/bin/python bench/bench_nova.py --replay FILE``;
a trace it does not finish within ``--time-limit`` seconds is reported as ``-``. A
last table counts, per scenario and strategy, the seeds where vnuma placed at
least as many VMs, vCPUs and GPUs as Nova.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-nova"
NOVA_PY = VENV / "bin" / "python"
NOVA_VERSION = "34.0.0"
CACHE = HERE / ".nova-cache"
GPU_SPEC = {"vendor_id": "10de", "product_id": "2330"}


# --- the vnuma side (the project's interpreter) ------------------------------------------------------------


def ensure_venv() -> None:
    """Create ``bench/.venv-nova`` with nova==34.0.0 unless it is there."""
    if NOVA_PY.exists():
        return
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(NOVA_PY), "-m", "pip", "install", "-q", f"nova=={NOVA_VERSION}"], check=True)


DROPPED = ("nics", "partition", "cold", "isolate")


def why_dropped(r: dict[str, Any]) -> str | None:
    """Which of :data:`DROPPED` keeps a trace request from Nova (None: Nova can express it)."""
    if r.get("nics"):
        return "nics"
    if r.get("mig") or r.get("vgpu"):
        return "partition"
    if r.get("cold_memory_mib"):
        return "cold"
    if r.get("thread_policy") == "isolate":
        return "isolate"
    return None


def expressible(doc: dict[str, Any]) -> tuple[dict[str, Any], dict[str, int]]:
    """The trace document with only the requests Nova can express, and how many were dropped per reason."""
    dropped = dict.fromkeys(DROPPED, 0)
    kept = []
    for r in doc["requests"]:
        why = why_dropped(r)
        if why is None:
            kept.append(r)
        else:
            dropped[why] += 1
    return {**doc, "requests": kept}, dropped


def nova_replay(doc: dict[str, Any], time_limit: float, cache: bool = False) -> dict[str, Any] | None:
    """Nova's outcome on ``doc`` (an expressible trace document), None when over ``time_limit`` seconds.

    ``cache``: keep the outcome in :data:`CACHE` under a digest of the document and of
    :data:`NOVA_VERSION`, and reuse it (Nova's placements are deterministic; its times are then
    those of the run that computed them). ``bench_quality.py`` caches; this script only with ``--cached``.
    """
    text = json.dumps(doc, sort_keys=True)
    key = CACHE / f"{hashlib.sha256((NOVA_VERSION + text).encode()).hexdigest()[:24]}.json"
    if cache and key.exists():
        return json.loads(key.read_text())  # type: ignore[no-any-return]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(text)
        f.flush()
        try:
            out = subprocess.run([str(NOVA_PY), __file__, "--replay", f.name], capture_output=True, text=True,
                                 timeout=time_limit, check=True)
        except subprocess.TimeoutExpired:
            return None
    got: dict[str, Any] = json.loads(out.stdout.splitlines()[-1])
    if cache:
        CACHE.mkdir(exist_ok=True)
        key.write_text(json.dumps(got))
    return got


def vnuma_replay(doc: dict[str, Any], strategy: str) -> dict[str, Any]:
    """vnuma's outcome on ``doc`` under ``strategy`` (the engine's fast path, as ``vnuma simulate``)."""
    from vnuma.placement.objectives import Strategy
    from vnuma.simulate import run
    from vnuma.sources.trace import load_trace

    trace = load_trace(json.dumps(doc).encode(), doc.get("scenario", "trace"))
    report = run(trace, Strategy(strategy))
    placed = [(r, p) for r, p in zip(trace.requests, report.placements, strict=True) if p is not None]
    return {
        "vms": len(placed),
        "vcpus": sum(r.vcpus or 0 for r, _ in placed),
        "gpus": report.gpus_used,
        "placed": [p is not None for p in report.placements],
        "mean_us": sum(report.decision_us) / max(1, len(report.decision_us)),
    }


# --- the Nova side (bench/.venv-nova's interpreter) -----------------------------------------------------------


def _nova_host(h: dict[str, Any]) -> tuple[Any, Any]:
    """A trace host as Nova's (NUMATopology, PciDeviceStats)."""
    from nova import objects
    from nova.pci import stats, whitelist

    cells = []
    for c in h["cells"]:
        if not c["cpus"]:
            continue  # memory-only nodes: Nova has no such cells
        pages = [objects.NUMAPagesTopology(size_kb=int(s), total=p["total"], used=0, reserved=0)
                 for s, p in sorted(c.get("hugepages", {}).items(), key=lambda kv: int(kv[0]))]
        cells.append(objects.NUMACell(
            id=c["id"], cpuset=set(), pcpuset=set(c["cpus"]), memory=c["memory_mib"], cpu_usage=0,
            memory_usage=0, pinned_cpus=set(), siblings=[set(s) for s in c.get("siblings", [])], mempages=pages,
            network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False), socket=None))
    topology = objects.NUMATopology(cells=cells)
    pci = stats.PciDeviceStats(topology, dev_filter=whitelist.Whitelist([]))
    for c in h["cells"]:
        if c.get("gpus"):
            pci.pools.append({**GPU_SPEC, "numa_node": c["id"], "dev_type": "type-PCI", "count": len(c["gpus"]),
                              "devices": [], "parent_ifname": None})
    return topology, pci


def _nova_instance(r: dict[str, Any]) -> Any:
    """A trace request as Nova's InstanceNUMATopology (``numa_nodes`` open: one node)."""
    from nova import objects

    n = r.get("numa_nodes") or 1
    vcpus, mem = r["vcpus"], r["memory_mib"]
    dedicated = r.get("cpu_policy", "dedicated") == "dedicated"
    cells = []
    for i in range(n):
        ids = set(range(i * vcpus // n, (i + 1) * vcpus // n))
        cells.append(objects.InstanceNUMACell(
            id=i, cpuset=set() if dedicated else ids, pcpuset=ids if dedicated else set(), memory=mem // n,
            pagesize=r.get("page_size_kib"), cpu_policy="dedicated" if dedicated else "shared",
            cpu_thread_policy=r.get("thread_policy", "prefer") if dedicated else None))
    return objects.InstanceNUMATopology(cells=cells)


def replay(path: str) -> dict[str, Any]:
    """Nova's first fit over the trace at ``path``: per request, hosts in name order, Nova's NUMA fit."""
    import logging

    from nova import config, objects
    from nova.virt import hardware

    logging.disable(logging.CRITICAL)
    config.parse_args([], default_config_files=[])
    objects.register_all()
    doc = json.loads(Path(path).read_text())
    hosts = sorted(doc["hosts"], key=lambda h: h["name"])
    state = [list(_nova_host(h)) for h in hosts]
    placed: list[bool] = []
    spent = 0.0
    for r in doc["requests"]:
        inst = _nova_instance(r)
        pci_req = None
        if r.get("gpus"):
            pci_req = [objects.InstancePCIRequest(count=r["gpus"], spec=[dict(GPU_SPEC)], numa_policy="required",
                                                  request_id=None, alias_name="gpu")]
        t0 = time.perf_counter()
        ok = False
        for entry in state:
            topo, pci = entry
            fitted = hardware.numa_fit_instance_to_host(topo, inst, {}, pci_requests=pci_req, pci_stats=pci)
            if fitted is None:
                continue
            entry[0] = hardware.numa_usage_from_instance_numa(topo, fitted)
            if pci_req:
                pci.apply_requests(pci_req, {}, fitted.cells)
            ok = True
            break
        spent += time.perf_counter() - t0
        placed.append(ok)
    got = [r for r, ok in zip(doc["requests"], placed, strict=True) if ok]
    return {"vms": len(got), "vcpus": sum(r["vcpus"] for r in got), "gpus": sum(r.get("gpus", 0) for r in got),
            "placed": placed, "mean_us": spent / max(1, len(placed)) * 1e6}


# --- the report --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replay", help=argparse.SUPPRESS)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--scenarios", default="", help="comma-separated, default every scenario but fleet-1000")
    parser.add_argument("--strategies", default="pack,first-fit")
    parser.add_argument("--time-limit", type=float, default=300.0, help="seconds per trace for Nova")
    parser.add_argument("--cached", action="store_true",
                        help="reuse Nova's outcomes from bench/.nova-cache (its times are then the caching run's)")
    args = parser.parse_args()
    if args.replay:
        print(json.dumps(replay(args.replay)))
        return
    from vnuma.sources.tracegen import SCENARIOS, make_trace

    ensure_venv()
    names = args.scenarios.split(",") if args.scenarios else [s for s in SCENARIOS if s != "fleet-1000"]
    strategies = args.strategies.split(",")
    print(f"{'scenario':18} {'seed':>4} {'dropped n/p/c/i':>16} {'who':10} {'VMs':>5} {'vCPUs':>6} {'GPUs':>5} "
          f"{'mean us':>8}")
    wins: dict[tuple[str, str], list[tuple[bool, bool, bool]]] = {}
    for name in names:
        for seed in range(1, args.seeds + 1):
            doc, dropped = expressible(make_trace(name, seed))
            nova = nova_replay(doc, args.time_limit, cache=args.cached)
            marks = "/".join(str(dropped[k]) for k in DROPPED)
            rows = [("nova", nova)] + [(s, vnuma_replay(doc, s)) for s in strategies]
            for who, got in rows:
                if got is None:
                    print(f"{name:18} {seed:>4} {marks:>16} {who:10} {'-':>5} (over the time limit)")
                    continue
                print(f"{name:18} {seed:>4} {marks:>16} {who:10} {got['vms']:>5} {got['vcpus']:>6} "
                      f"{got['gpus']:>5} {got['mean_us']:>8.0f}")
                if nova is not None and who != "nova":
                    wins.setdefault((name, who), []).append(
                        tuple(got[k] >= nova[k] for k in ("vms", "vcpus", "gpus")))  # type: ignore[arg-type]
    print(f"\n{'scenario':18} {'strategy':10} {'seeds':>5} {'VMs>=Nova':>10} {'vCPUs>=':>8} {'GPUs>=':>8}")
    for (name, who), got in wins.items():
        n = len(got)
        vms, cpus, gpus = (sum(1 for g in got if g[i]) for i in range(3))
        print(f"{name:18} {who:10} {n:>5} {vms:>6}/{n:<3} {cpus:>4}/{n:<3} {gpus:>4}/{n:<3}")

if __name__ == "__main__":
    main()
