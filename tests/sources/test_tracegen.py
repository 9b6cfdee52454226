"""The trace generator: the shipped examples are its seed-42 output, and every trace keeps the format's promises."""

from __future__ import annotations

import difflib
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from vnuma.sources.trace import Trace, load_trace
from vnuma.sources.tracegen import SCENARIOS, generate, make_trace, render_trace
from vnuma.sources.tracemix import pick
from vnuma.topology import KIB_PER_MIB, DeviceKind
from vnuma.topology.hmat import nested
from vnuma.topology.tiers import cell_kinds

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"
SHIPPED = (
    "dual-socket-2cell", "epyc-nps4-8cell", "big-16cell", "snc-cxl-gpu", "dgx-nics", "shared-nics", "gpu-partitions",
)
SMALL = st.sampled_from(SHIPPED)
SEEDS = st.integers(min_value=0, max_value=2**63)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_example_is_the_generators_seed_42_output(name: str) -> None:
    path = EXAMPLES / f"{name}.json"
    shipped = path.read_text(encoding="utf-8")  # a missing file fails the test
    made = generate(name, 42)
    if made != shipped:
        diff = difflib.unified_diff(shipped.splitlines(True), made.splitlines(True), str(path), "generate(seed=42)")
        pytest.fail(
            "the generator no longer makes the shipped example with seed 42; the recorded Nova comparisons in "
            "bench/README.md were measured on these bytes\n" + "".join(list(diff)[:40])
        )


def test_only_the_small_examples_are_shipped() -> None:
    assert sorted(p.name for p in EXAMPLES.iterdir()) == sorted(f"{n}.json" for n in SHIPPED)
    assert set(SHIPPED) < set(SCENARIOS)


def check_document(doc: dict[str, Any], name: str, seed: int) -> None:
    """What the format promises about a generated document (docs/traces.md)."""
    assert (doc["format"], doc["version"], doc["scenario"], doc["seed"]) == ("numa-placement-trace", 1, name, seed)
    scenario = SCENARIOS[name]
    assert len(doc["hosts"]) == scenario.hosts and len(doc["requests"]) == scenario.requests
    assert len({h["name"] for h in doc["hosts"]}) == len(doc["hosts"])
    for host in doc["hosts"]:
        ids = [c["id"] for c in host["cells"]]
        assert len(set(ids)) == len(ids)
        for cell in host["cells"]:
            check_cell(cell, ids)
    names = [r["name"] for r in doc["requests"]]
    assert len(set(names)) == len(names)
    for r in doc["requests"]:
        nodes, page = r["numa_nodes"], r["page_size_kib"]
        assert r["vcpus"] >= 1 and r["memory_mib"] >= 1 and nodes >= 1 and r["gpus"] >= 0
        assert r["vcpus"] % nodes == 0 and r["memory_mib"] % nodes == 0
        assert r["memory_mib"] // nodes * KIB_PER_MIB % page == 0, r
        assert r["cpu_policy"] == "dedicated" and r["thread_policy"] in {"prefer", "isolate", "require"}
        assert r["name"].startswith(r["tenant"] + "-vm-")
        if "nics" in r:  # with GPUs, all three keys; never written as 0
            assert r["gpus"] >= 1 and (r["nics"] == "per-gpu" or (type(r["nics"]) is int and r["nics"] >= 1))
            assert r["nic_affinity"] in {"pix", "pxb", "phb", "node", "sys"} and r["nic_function"] in {"pf", "vf"}
        else:
            assert "nic_affinity" not in r and "nic_function" not in r
        if "cold_memory_mib" in r:  # whole GiB, with its tier; never written as 0
            assert r["cold_memory_mib"] > 0 and r["cold_memory_mib"] % 1024 == 0
            assert r["cold_tier"] in {"any", "cxl"}
        else:
            assert "cold_tier" not in r
    summary = doc["summary"]
    assert summary["hosts"] == scenario.hosts and summary["requests"] == scenario.requests
    assert summary["requested_vcpus"] == sum(r["vcpus"] for r in doc["requests"])


def check_cell(cell: dict[str, Any], cell_ids: list[int]) -> None:
    """Siblings partition the CPUs, the page pools partition the memory, distances reach every cell."""
    grouped = [cpu for group in cell["siblings"] for cpu in group]
    assert sorted(grouped) == sorted(cell["cpus"]) and len(set(grouped)) == len(grouped)
    pools = cell["hugepages"]
    assert "4" in pools and all(0 <= p["free"] <= p["total"] for p in pools.values())
    assert sum(int(size) * p["total"] for size, p in pools.items()) == cell["memory_mib"] * KIB_PER_MIB
    assert sorted(int(k) for k in cell["distances"]) == sorted(cell_ids)
    assert cell["distances"][str(cell["id"])] == 10
    assert all(d > 10 for k, d in cell["distances"].items() if k != str(cell["id"]))


def check_parsed(trace: Trace, doc: dict[str, Any]) -> None:
    """The project's own parser reads the same fleet and requests."""
    assert trace.scenario == doc["scenario"]
    assert [h.name for h in trace.hosts] == [h["name"] for h in doc["hosts"]]
    assert [r.name for r in trace.requests] == [r["name"] for r in doc["requests"]]
    for host in trace.hosts:
        for cell in host.cells:
            assert sum(p.size_kib * p.count for p in cell.pages) == cell.memory_kib
    gpus = sum(len(c["gpus"]) for h in doc["hosts"] for c in h["cells"])
    assert sum(len(h.devices_of(DeviceKind.GPU)) for h in trace.hosts) == gpus == doc["summary"]["gpus_total"]
    nics = sum(len(c.get("nics", ())) for h in doc["hosts"] for c in h["cells"])
    assert sum(1 for h in trace.hosts for d in h.devices_of(DeviceKind.NIC) if d.pf is None) == nics
    assert doc["summary"].get("nics_total", nics) == nics
    parsed = {r.name: r for r in trace.requests}
    for r in doc["requests"]:
        asked = parsed[r["name"]]
        nics = r.get("nics", 0)
        assert (asked.nics_per_gpu, asked.nics) == ((True, 0) if nics == "per-gpu" else (False, nics))
        assert asked.nic_affinity.lower() == r.get("nic_affinity", "pxb")
        assert asked.nic_function == r.get("nic_function", "pf")


def _made_and_parsed(name: str, seed: int) -> tuple[dict[str, Any], str]:
    doc = make_trace(name, seed)
    text = render_trace(doc)
    assert json.loads(text) == doc
    check_document(doc, name, seed)
    check_parsed(load_trace(text.encode(), f"{name}.json"), doc)
    return doc, text


@settings(max_examples=15)
@given(name=SMALL, seed=SEEDS)
def test_every_seed_makes_a_valid_trace(name: str, seed: int) -> None:
    _made_and_parsed(name, seed)


@pytest.mark.slow
@settings(max_examples=2)
@given(seed=SEEDS)
def test_fleet_1000_is_a_valid_trace(seed: int) -> None:
    doc, _ = _made_and_parsed("fleet-1000", seed)
    assert Counter(len(h["cells"]) for h in doc["hosts"]) == {2: 1000}


@settings(max_examples=10)
@given(name=SMALL, a=SEEDS, b=SEEDS)
def test_seeds_change_the_requests_not_the_hosts(name: str, a: int, b: int) -> None:
    assume(a != b)
    first, second = make_trace(name, a), make_trace(name, b)
    assert first["hosts"] == second["hosts"]
    assert first["requests"] != second["requests"]


def test_the_same_seed_gives_the_same_bytes() -> None:
    assert generate("big-16cell", 7) == generate("big-16cell", 7)


def test_request_mix_has_both_classes() -> None:
    requests = make_trace("epyc-nps4-8cell", 42)["requests"]
    small = [r for r in requests if r["numa_nodes"] == 1]
    large = [r for r in requests if r["numa_nodes"] == 2]
    assert small and large and len(small) + len(large) == len(requests)
    assert all(r["gpus"] == 0 and 4096 <= r["memory_mib"] <= 32768 for r in small)
    assert all(1 <= r["gpus"] <= 4 and r["vcpus"] >= 16 for r in large)


def test_a_one_option_choice_takes_no_draw() -> None:
    # The order and number of draws fix the bytes of every trace; see the module docstring.
    rng, twin = random.Random(3), random.Random(3)
    assert pick(rng, (("only", 1.0),)) == "only"
    assert rng.random() == twin.random()


def test_render_keeps_one_item_per_line() -> None:
    text = render_trace({"format": "f", "hosts": [{"a": 1}, {"a": 2}], "requests": []})
    assert text == '{\n "format": "f",\n "hosts": [\n  {"a":1},\n  {"a":2}\n ],\n "requests": [\n ]\n}\n'


# ------------------------------------------------------------ snc-cxl-gpu ----


def test_snc_cxl_gpu_hosts_are_snc_sockets_with_cxl_expanders_rated_by_hmat() -> None:
    doc = make_trace("snc-cxl-gpu", 42)
    trace = load_trace(render_trace(doc).encode(), "snc-cxl-gpu.json")
    for host in trace.hosts:
        cpu_cells = [c.id for c in host.cells if c.cpus]
        memory_only = [c.id for c in host.cells if c.memory_only]
        assert (cpu_cells, memory_only) == ([0, 1, 2, 3], [4, 5])
        assert [len(c.cpus) for c in host.cells] == [32, 32, 32, 32, 0, 0]
        assert [c.memory_kib // KIB_PER_MIB // 1024 for c in host.cells] == [256, 256, 256, 256, 512, 512]
        assert sorted(d.numa_node for d in host.devices_of(DeviceKind.GPU)) == [0, 1, 2, 3]
        assert cell_kinds(host) == {0: "dram", 1: "dram", 2: "dram", 3: "dram", 4: "cxl", 5: "cxl"}
        latency, bandwidth = nested(host.hmat.latency_ns), nested(host.hmat.bandwidth_kib_s)
        for matrix in (latency, bandwidth):  # every CPU cell to every cell, nothing from a memory-only cell
            assert sorted(matrix) == cpu_cells and all(sorted(row) == list(range(6)) for row in matrix.values())
        for cell in cpu_cells:
            socket = cell // 2
            own_cxl, other_cxl = 4 + socket, 5 - socket
            neighbour, remote = cell ^ 1, (cell + 2) % 4
            assert (
                latency[cell][cell] < latency[cell][neighbour] < latency[cell][remote]
                < latency[cell][own_cxl] < latency[cell][other_cxl]
            )
            assert (
                bandwidth[cell][cell] > bandwidth[cell][neighbour] > bandwidth[cell][remote]
                > bandwidth[cell][own_cxl] > bandwidth[cell][other_cxl]
            )
            assert bandwidth[cell][own_cxl] * 3 <= bandwidth[cell][cell]  # CXL clearly slower than local DRAM


def test_snc_cxl_gpu_requests_ask_cold_tiers_of_both_kinds() -> None:
    doc = make_trace("snc-cxl-gpu", 42)
    cold = [r for r in doc["requests"] if "cold_memory_mib" in r]
    tiers = Counter(r["cold_tier"] for r in cold)
    assert tiers["any"] > 0 and tiers["cxl"] > 0 and 0 < len(cold) < len(doc["requests"])
    assert {r["cold_memory_mib"] * 2 // r["memory_mib"] for r in cold} == {1, 2, 4}  # 1/2, 1 or 2 x the memory
    summary = doc["summary"]
    assert (summary["requests_cold"], summary["requests_cold_cxl"]) == (len(cold), tiers["cxl"])
    assert summary["requested_cold_memory_mib"] == sum(r["cold_memory_mib"] for r in cold)
    trace = load_trace(render_trace(doc).encode(), "snc-cxl-gpu.json")
    parsed = {r.name: r for r in trace.requests}
    for r in doc["requests"]:
        assert parsed[r["name"]].cold_memory_kib == r.get("cold_memory_mib", 0) * 1024
        assert parsed[r["name"]].cold_tier == r.get("cold_tier", "any")


def test_snc_cxl_gpu_is_deterministic() -> None:
    assert generate("snc-cxl-gpu", 42) == generate("snc-cxl-gpu", 42)
    assert make_trace("snc-cxl-gpu", 1)["requests"] != make_trace("snc-cxl-gpu", 2)["requests"]


@pytest.mark.parametrize("name", [n for n in SHIPPED if n != "snc-cxl-gpu"])  # fleet-1000: dual-socket's kind
def test_only_the_cold_scenario_writes_cold_keys_and_hmat(name: str) -> None:
    doc = make_trace(name, 3)
    assert all("hmat" not in h for h in doc["hosts"])
    assert all("cold_memory_mib" not in r and "cold_tier" not in r for r in doc["requests"])
    assert not {"requests_cold", "requested_cold_memory_mib"} & set(doc["summary"])


# --------------------------------------------------------------- dgx-nics ----


def test_dgx_nics_is_deterministic_and_its_hosts_do_not_depend_on_the_seed() -> None:
    assert generate("dgx-nics", 42) == generate("dgx-nics", 42)
    first, second = make_trace("dgx-nics", 1), make_trace("dgx-nics", 2)
    assert first["hosts"] == second["hosts"] and first["requests"] != second["requests"]


def test_dgx_nics_writes_device_places_and_nic_requests() -> None:
    doc = make_trace("dgx-nics", 42)
    for host in doc["hosts"]:
        for cell in host["cells"]:
            assert len(cell["gpus"]) == len(cell["nics"]) == 4
            for device in (*cell["gpus"], *cell["nics"]):
                assert {"address", "root_complex", "switch"} <= set(device)
                assert "bridges" not in device or device["switch"] in device["bridges"]
            assert all(n["vfs"] == 8 for n in cell["nics"]) and all("vfs" not in g for g in cell["gpus"])
    asking = [r for r in doc["requests"] if "nics" in r]
    assert Counter(r["nic_affinity"] for r in asking).keys() == {"pix", "pxb", "node", "sys"}
    assert Counter(r["nic_function"] for r in asking).keys() == {"pf", "vf"}
    assert Counter(r["nics"] for r in asking).keys() == {"per-gpu", 1}
    assert {r["gpus"] for r in doc["requests"]} == {0, 1, 2, 4, 8}
    summary = doc["summary"]
    assert (summary["nics_total"], summary["nic_vfs_total"]) == (96, 768)
    assert summary["requests_nics"] == len(asking)
    assert summary["requests_nics_per_gpu"] == sum(1 for r in asking if r["nics"] == "per-gpu")
    assert summary["requests_nics_vf"] == sum(1 for r in asking if r["nic_function"] == "vf")


@pytest.mark.parametrize(
    "name", [n for n in SCENARIOS if n not in {"dgx-nics", "shared-nics", "fleet-1000", "gpu-partitions"}]
)
def test_only_the_nic_scenarios_write_nic_keys_and_device_places(name: str) -> None:
    doc = make_trace(name, 3)
    assert all(isinstance(d, str) for h in doc["hosts"] for c in h["cells"] for d in (*c["gpus"], *c.get("nics", ())))
    assert all(not {"nics", "nic_affinity", "nic_function"} & set(r) for r in doc["requests"])
    assert not {"nics_total", "requests_nics"} & set(doc["summary"])


def test_shared_nics_writes_two_gpus_and_one_nic_per_switch_and_whole_nic_requests() -> None:
    doc = make_trace("shared-nics", 42)
    assert make_trace("shared-nics", 1)["hosts"] == doc["hosts"]
    for host in doc["hosts"]:
        for cell in host["cells"]:
            assert (len(cell["gpus"]), len(cell["nics"])) == (4, 2)
            switches = Counter(d["switch"] for d in (*cell["gpus"], *cell["nics"]))
            assert sorted(switches.values()) == [3, 3]  # 2 GPUs + 1 NIC below each switch
            assert all("vfs" not in d for d in (*cell["gpus"], *cell["nics"]))
    asking = [r for r in doc["requests"] if "nics" in r]
    assert asking and {r["nic_affinity"] for r in asking} == {"pix", "pxb"}
    assert {r["nic_function"] for r in asking} == {"pf"} and all(r["gpus"] >= 1 for r in asking)
    assert (doc["summary"]["nics_total"], doc["summary"]["nic_vfs_total"]) == (48, 0)


def test_gpu_partitions_writes_the_geometry_gpu_offers_and_partition_requests() -> None:
    doc = make_trace("gpu-partitions", 42)
    assert make_trace("gpu-partitions", 7)["hosts"] == doc["hosts"]
    (geometry,) = doc["gpu_profiles"]
    assert geometry["model"] == "NVIDIA H100 80GB HBM3" and len(geometry["profiles"]) == 7
    for host in doc["hosts"]:
        for cell in host["cells"]:
            assert len(cell["gpus"]) == 4
            assert all(g["mig"] == geometry["model"] and set(g["vgpu"]) == {
                "nvidia-h100-10c", "nvidia-h100-20c", "nvidia-h100-40c"} for g in cell["gpus"])
    mig = [r for r in doc["requests"] if "mig" in r]
    vgpu = [r for r in doc["requests"] if "vgpu" in r]
    assert mig and vgpu and all(r["gpus"] == 0 for r in (*mig, *vgpu))
    assert not [r for r in doc["requests"] if "mig" in r and "vgpu" in r]
    assert {r["mig"].split(":")[0] for r in mig} == {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb"}
    assert any(r["mig"].endswith(":2") for r in mig) and {r["gpus"] for r in doc["requests"]} == {0, 1, 2, 4}
    assert (doc["summary"]["requests_mig"], doc["summary"]["requests_vgpu"]) == (len(mig), len(vgpu))
