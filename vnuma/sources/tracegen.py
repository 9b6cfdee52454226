"""Example workload traces (``numa-placement-trace`` version 1, docs/traces.md): the generator.

Pure: no I/O. :func:`make_trace` builds one scenario's document as a dict,
:func:`render_trace` gives its text, and :func:`generate` does both; the
caller writes the file. Standard library only (``json``, ``random``,
``zlib``).

Deterministic: a (scenario, seed) pair always gives the same bytes, on any
platform and Python 3.11+. Each scenario draws from its own stream, seeded
with ``seed * 1000003 + crc32(name)``, so adding a scenario changes no
other. With seed 42 the output is byte-identical to the example traces
shipped in ``examples/traces/`` (and to the reference files the recorded
OpenStack Nova counts of ``bench/README.md`` were measured on), so the
order of every random draw is part of the contract (the requests are drawn
by :mod:`vnuma.sources.tracemix`): reordering two draws, or drawing for a
one-option choice, changes every trace.

Hosts do not depend on the seed; requests do. Every request satisfies what
the format promises: ``vcpus`` and ``memory_mib`` divide evenly over
``numa_nodes``, and the per-node memory is a whole number of pages of
``page_size_kib``. A scenario with a cold mix (``snc-cxl-gpu``) also gives
some requests ``cold_memory_mib`` (whole GiB) and ``cold_tier``, and its
hosts an ``hmat``; the others write neither key. A scenario with a PCIe
layout (``dgx-nics``) writes its GPUs and NICs as objects with their place
in the PCIe tree and gives some requests ``nics``, ``nic_affinity`` and
``nic_function``; the others write bare addresses and no NIC keys. The
partition scenario (``gpu-partitions``) writes the shipped H100 80GB MIG
geometry as ``gpu_profiles``, its GPUs as objects with ``mig`` and ``vgpu``,
and some requests ``mig`` or ``vgpu``.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vnuma.sources.migprofiles import profile_document, shipped_profiles
from vnuma.sources.tracemix import (
    make_cold_requests,
    make_nic_requests,
    make_partition_requests,
    make_requests,
    make_shared_nic_requests,
)
from vnuma.sources.traceshapes import (
    HostShape,
    big16_shape,
    dgx_shape,
    dual_socket_shape,
    epyc_nps4_shape,
    make_host,
    partition_shape,
    shared_nic_shape,
    snc_cxl_shape,
)

FORMAT = "numa-placement-trace"
VERSION = 1


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named workload: how many hosts of which shape, how many requests."""

    name: str
    hosts: int
    shape: Callable[[], HostShape]
    requests: int
    description: str
    mix: Callable[[random.Random, int], list[dict[str, Any]]] = make_requests
    gpu_profiles: Callable[[], list[dict[str, Any]]] | None = None
    """The trace's MIG geometries (``gpu_profiles``), for a scenario whose GPUs have one."""

    def describe(self, hosts: int | None = None) -> str:
        """The description of the scenario made with ``hosts`` hosts (default: its own count)."""
        return self.description.format(hosts=self.hosts if hosts is None else hosts)


_SCENARIOS = (
    Scenario(
        name="dual-socket-2cell",
        hosts=10,
        shape=dual_socket_shape,
        requests=240,
        description="10 dual-socket hosts, 1 NUMA cell per socket, 32 pCPUs (16 cores x 2 HT) and 256 GiB per cell, "
        "2 GPUs per cell, 2M and 1G hugepages",
    ),
    Scenario(
        name="epyc-nps4-8cell",
        hosts=10,
        shape=epyc_nps4_shape,
        requests=400,
        description="10 dual-socket EPYC-like hosts in NPS4 (8 cells), 16 pCPUs (8 cores x 2 HT) and 128 GiB per cell, "
        "1 GPU per cell",
    ),
    Scenario(
        name="big-16cell",
        hosts=4,
        shape=big16_shape,
        requests=400,
        description="4 hosts: 4 sockets x SNC3 (12 CPU cells, 24 pCPUs and 128 GiB each, GPUs on SNC 0 and 1) "
        "plus 4 CXL memory-only cells (cpus=[], 256 GiB each)",
    ),
    Scenario(
        name="fleet-1000",
        hosts=1000,
        shape=dual_socket_shape,
        requests=20000,
        description="1000 hosts of the dual-socket-2cell kind, 20000 requests",
    ),
    Scenario(
        name="fleet",
        hosts=10000,
        shape=dual_socket_shape,
        requests=20000,
        description="{hosts} hosts of the dual-socket-2cell kind (trace generate --hosts sets how many), "
        "20000 requests",
    ),
    Scenario(
        name="snc-cxl-gpu",
        hosts=8,
        shape=snc_cxl_shape,
        requests=400,
        description="8 hosts: 2 sockets x SNC2 (4 CPU cells, 32 pCPUs, 256 GiB and 1 GPU each) plus 2 CXL memory "
        "expanders (memory-only cells, cpus=[], 512 GiB each, one per socket) rated by HMAT: read latency / "
        "bandwidth from a CPU cell 90 ns / 100 GiB/s local, 110 / 90 SNC neighbour, 140 / 50 other socket, "
        "250 / 30 own socket's CXL, 350 / 15 other socket's CXL (plausible magnitudes of published "
        "Sapphire-Rapids-class and CXL 1.1 expander figures, not measurements); inference mix, 60 % of large "
        "and 20 % of small VMs ask cold_memory_mib (1/2, 1 or 2 x their memory), 40 % of those cold_tier cxl",
        mix=make_cold_requests,
    ),
    Scenario(
        name="dgx-nics",
        hosts=12,
        shape=dgx_shape,
        requests=400,
        description="12 DGX-H100-like hosts: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 HT, 1 TiB), "
        "8 GPUs and 8 NICs (8 SR-IOV VFs each) per host, every GPU paired with a NIC under a PCIe switch (PIX); "
        "per socket 2 root complexes: one with a top switch over two leaf switches (pairs PXB to each other), "
        "one with a switch on each of two root ports (PHB to each other); a layout after public descriptions "
        "of such systems, not measurements; inference mix with VMs of 1/2/4/8 GPUs, 75 % of the VMs with GPUs "
        "ask NICs: per-gpu (85 %) or 1, within pix/pxb/node/sys (40/45/10/5 %), virtual functions for 15 %",
        mix=make_nic_requests,
    ),
    Scenario(
        name="shared-nics",
        hosts=12,
        shape=shared_nic_shape,
        requests=300,
        description="12 8-GPU inference hosts with 4 NICs: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 "
        "HT, 1 TiB), per socket 2 root complexes each with one PCIe switch holding 2 GPUs and 1 NIC (no VFs), so "
        "every NIC is PIX to two GPUs and only one of them can have it; inference mix with VMs of 1/2/4/8 GPUs, "
        "half of the VMs with GPUs ask whole NICs: per-gpu (90 %) or 1, within pix/pxb (50/50 %)",
        mix=make_shared_nic_requests,
    ),
    Scenario(
        name="gpu-partitions",
        hosts=8,
        shape=partition_shape,
        requests=400,
        description="8 8-GPU H100 inference hosts: 2 sockets, 1 NUMA cell each (112 pCPUs = 56 cores x 2 HT, "
        "1 TiB), 4 GPUs per cell, each with the H100 80GB MIG geometry (gpu_profiles: the shipped profile) and "
        "three time-sliced vGPU types (10/20/40 GB: 8/4/2 instances); inference mix whose large VMs (8/16/32 "
        "vCPUs, one node) take 0/1/2/4 whole GPUs (50/30/15/5 %), and 60 % of the VMs without GPUs ask "
        "partitions: MIG (60 %: 1g.10gb/2g.20gb/3g.40gb/"
        "4g.40gb 40/30/20/10 %) or vGPU (40 %: 10c/20c/40c 50/35/15 %), 1 (85 %) or 2 each",
        mix=make_partition_requests,
        gpu_profiles=lambda: [profile_document(shipped_profiles()["h100-sxm5-80gb"])],
    ),
)
SCENARIOS: Mapping[str, Scenario] = {s.name: s for s in _SCENARIOS}


def summarize(hosts: Sequence[Mapping[str, Any]], requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The informative ``summary`` key: what the fleet has and what the requests ask for."""
    cells = [c for h in hosts for c in h["cells"]]
    out = {
        "hosts": len(hosts),
        "cells_per_host": sorted({len(h["cells"]) for h in hosts}),
        "pcpus_total": sum(len(c["cpus"]) for c in cells),
        "gpus_total": sum(len(c["gpus"]) for c in cells),
        "memory_mib_total": sum(c["memory_mib"] for c in cells),
        "requests": len(requests),
        "requested_vcpus": sum(r["vcpus"] for r in requests),
        "requested_gpus": sum(r["gpus"] for r in requests),
        "requested_memory_mib": sum(r["memory_mib"] for r in requests),
        "requests_multi_node": sum(1 for r in requests if (r["numa_nodes"] or 1) > 1),
    }
    nics = [r for r in requests if "nics" in r]
    if nics:  # only then, as the cold keys
        placed = [d for c in cells for d in c.get("nics", ())]
        out["nics_total"] = len(placed)
        out["nic_vfs_total"] = sum(d.get("vfs", 0) for d in placed if isinstance(d, dict))
        out["requests_nics"] = len(nics)
        out["requests_nics_per_gpu"] = sum(1 for r in nics if r["nics"] == "per-gpu")
        out["requests_nics_vf"] = sum(1 for r in nics if r["nic_function"] == "vf")
    parts = [r for r in requests if "mig" in r or "vgpu" in r]
    if parts:  # only then, as for cold tiers below
        out["requests_mig"] = sum(1 for r in parts if "mig" in r)
        out["requests_vgpu"] = sum(1 for r in parts if "vgpu" in r)
    cold = [r for r in requests if r.get("cold_memory_mib")]
    if cold:  # only then: the other scenarios' bytes stay as they were
        out["requests_cold"] = len(cold)
        out["requests_cold_cxl"] = sum(1 for r in cold if r.get("cold_tier") == "cxl")
        out["requested_cold_memory_mib"] = sum(r["cold_memory_mib"] for r in cold)
    return out


def scenario_rng(name: str, seed: int) -> random.Random:
    """The scenario's own random stream: independent of the other scenarios, stable across releases."""
    return random.Random(seed * 1000003 + zlib.crc32(name.encode()))


def make_trace(name: str, seed: int, hosts: int | None = None) -> dict[str, Any]:
    """The trace document of scenario ``name`` made with ``seed``, with ``hosts`` hosts (default: the
    scenario's). Hosts are named ``host-0000`` on, with more digits when 10,000 hosts or more need them (so name
    order is number order); requests do not depend on the hosts.

    Raises:
        KeyError: ``name`` is not in :data:`SCENARIOS` (callers check first).
    """
    scenario = SCENARIOS[name]
    count = scenario.hosts if hosts is None else hosts
    width = max(4, len(str(count - 1)))
    # Every host of a scenario is the same but for its name: the copies share the first one's cells.
    body = {k: v for k, v in make_host("", scenario.shape()).items() if k != "name"}
    fleet = [{"name": f"host-{i:0{width}d}", **body} for i in range(count)]
    requests = scenario.mix(scenario_rng(name, seed), scenario.requests)
    doc: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "scenario": name,
        "seed": seed,
        "description": scenario.describe(count),
        "summary": summarize(fleet, requests),
    }
    if scenario.gpu_profiles is not None:
        doc["gpu_profiles"] = scenario.gpu_profiles()
    return {**doc, "hosts": fleet, "requests": requests}


def render_trace(doc: Mapping[str, Any]) -> str:
    """The document as text: compact JSON, one top-level key per line and each list item on its own line."""
    lines = ["{"]
    for n, (key, value) in enumerate(doc.items()):
        comma = "," if n + 1 < len(doc) else ""
        if isinstance(value, list):
            # one host or request per line keeps diffs between two traces readable
            items = [f"  {_compact(item)}" + ("," if i + 1 < len(value) else "") for i, item in enumerate(value)]
            lines += [f" {json.dumps(key)}: [", *items, f" ]{comma}"]
        else:
            lines.append(f" {json.dumps(key)}: {_compact(value)}{comma}")
    return "\n".join([*lines, "}", ""])


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def generate(name: str, seed: int) -> str:
    """The text of scenario ``name`` made with ``seed`` (what ``vnuma trace generate`` prints).

    Raises:
        KeyError: ``name`` is not in :data:`SCENARIOS`.
    """
    return render_trace(make_trace(name, seed))
