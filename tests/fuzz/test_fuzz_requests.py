"""Fuzz trace JSON (``load_trace``, then a simulation of what it accepts) and ``vnuma place`` options.

Traces: a small valid trace mutated 1-3 times (a key deleted, a value
replaced by arbitrary JSON or an edge value, a list element duplicated),
plus truncations and raw bytes. ``load_trace`` must return a consistent
trace or raise one one-line InvalidInputError; an accepted trace must
simulate, or be refused by the engine with a one-line InvalidInputError
(``vnuma simulate`` exits 4 on a request no host of the trace could ever
take, such as more GPUs than the whole fleet has). 2,000 mutated + 400 raw inputs.

Request options: ``vnuma place`` through CliRunner with drawn option
values on a real SQLite inventory: the exit code is in the documented set,
stderr holds no traceback, and (for ``--dry-run`` or a refusal) the
inventory dump is byte-for-byte unchanged. See CLI_EXAMPLES for the count.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.builders import make_host
from tests.dbdump import dump as _dump
from tests.fuzz.budget import RAW_EXAMPLES, fuzz
from tests.fuzz.oracle import check_error
from vnuma.cli import app
from vnuma.errors import InvalidInputError
from vnuma.inventory import open_inventory
from vnuma.placement.model import CpuPolicy, EmulatorThreads, GpuAffinity, Isolation, Tenant, ThreadPolicy
from vnuma.placement.objectives import Strategy
from vnuma.simulate import run
from vnuma.sources.trace import load_trace
from vnuma.topology.hostcheck import check_host

TRACE_EXAMPLES = 2000
CLI_EXAMPLES = 300
EXIT_CODES = {0, 2, 3, 4, 5, 9}


def _cell(cid: int) -> dict[str, Any]:
    cores = range(cid * 4, cid * 4 + 4)
    return {
        "id": cid,
        "cpus": [c for core in cores for c in (core, core + 8)],
        "siblings": [[core, core + 8] for core in cores],
        "memory_mib": 16384,
        "hugepages": {"4": {"total": 1048576, "free": 1048576}, "2048": {"total": 2048, "free": 2048},
                      "1048576": {"total": 4, "free": 4}},
        "distances": {"0": 10 if cid == 0 else 21, "1": 21 if cid == 0 else 10, "2": 14 if cid == 0 else 24},
        "gpus": [f"0000:{0x10 + cid:02x}:00.0"],
        "nics": [],
    }


# A memory-only (CXL) cell, rated slower than DRAM by the host's HMAT: what cold tiers land on.
_CXL = {
    "id": 2, "cpus": [], "siblings": [], "memory_mib": 16384,
    "hugepages": {"4": {"total": 2097152, "free": 2097152}, "1048576": {"total": 8, "free": 8}},
    "distances": {"0": 14, "1": 24, "2": 10}, "gpus": [],
}
_HMAT = {
    "latency_ns": {"0": {"0": 90, "1": 140, "2": 250}, "1": {"0": 140, "1": 90, "2": 350}},
    "bandwidth_kib_s": {"0": {"0": 104857600, "1": 52428800, "2": 31457280},
                        "1": {"0": 52428800, "1": 104857600, "2": 15728640}},
}


BASE: dict[str, Any] = {
    "format": "numa-placement-trace",
    "version": 1,
    "scenario": "fuzz",
    "hosts": [{"name": "host-0", "cells": [_cell(0), _cell(1), _CXL], "hmat": _HMAT}],
    "requests": [
        {"tenant": "t1", "name": f"vm-{i}", "vcpus": v, "memory_mib": m, "numa_nodes": n,
         "cpu_policy": "dedicated", "thread_policy": tp, "page_size_kib": p, "gpus": g}
        for i, (v, m, n, tp, p, g) in enumerate(
            [(2, 2048, 1, "prefer", 2048, 0), (4, 4096, None, "isolate", 1048576, 1),
             (8, 8192, 2, "require", None, 1)]
        )
    ] + [
        {"tenant": "t1", "name": "vm-cold", "vcpus": 2, "memory_mib": 2048, "numa_nodes": 1,
         "cpu_policy": "dedicated", "thread_policy": "prefer", "page_size_kib": 2048, "gpus": 0,
         "cold_memory_mib": 4096, "cold_tier": "cxl"},
    ],
}

_EDGE = st.sampled_from(
    [None, True, False, 0, -1, 1, 2**31, 2**63, 10**30, -(10**30), 0.5, math.inf, -math.inf, math.nan,
     "", "0", "-1", "x" * 300, "\x00", "\u202e", [], {}, [[]], {"": None}]
)
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, data: st.DataObject) -> Any:
    path = data.draw(st.sampled_from(_paths(doc)[1:]), label="path")
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    key = path[-1]
    action = data.draw(st.sampled_from(["delete", "edge", "json", "duplicate"]), label="action")
    if action == "delete":
        del parent[key]
    elif action == "duplicate" and isinstance(parent, list):
        parent.insert(key, json.loads(json.dumps(parent[key])))
    else:
        # A copy: _EDGE's lists and dicts are the same objects in every test case, and a later
        # mutation edits in place (sharing them made the generation flaky under shrinking).
        parent[key] = json.loads(json.dumps(data.draw(_EDGE if action == "edge" else _JSON, label="value")))
    return doc


def _accepts_or_refuses(data: bytes) -> None:
    try:
        trace = load_trace(data, "trace.json")
    except InvalidInputError as err:
        check_error(err)
        return
    for host in trace.hosts:
        assert check_host(host) is host
    try:
        report = run(trace)
    except InvalidInputError as err:  # e.g. a request for more GPUs than the trace's fleet has
        check_error(err)
        return
    assert report.requests == trace.requests


@fuzz(TRACE_EXAMPLES)
@given(data=st.data())
def test_mutated_traces_load_or_refuse(data: st.DataObject) -> None:
    doc = json.loads(json.dumps(BASE))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        doc = _mutate(doc, data)
    text = json.dumps(doc).encode()
    if data.draw(st.booleans(), label="truncate"):
        text = text[: data.draw(st.integers(0, len(text)), label="cut")]
    _accepts_or_refuses(text)


@fuzz(RAW_EXAMPLES)
@given(raw=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode)))
def test_raw_bytes_load_or_refuse(raw: bytes) -> None:
    _accepts_or_refuses(raw)


# --- vnuma place options ---------------------------------------------------------------------

# Typed options (integers, choices) get well-typed text here: Click's own refusals of the
# rest currently exit 70, see test_badly_typed_options_are_usage_errors.
_COUNT = st.one_of(st.integers(-3, 80).map(str), st.sampled_from(["9" * 30, "-0", "007", "-99999999999"]))
_NOT_INT = st.sampled_from(["", "x", "1.5", "²", "0x10", " ", "1e3"])
_UNITS = ["", "K", "KiB", "M", "MiB", "GiB", "G", "TiB", "PiB", "b"]
_SIZE = st.one_of(
    st.tuples(st.integers(0, 2**70), st.sampled_from(_UNITS)).map(lambda t: f"{t[0]}{t[1]}"),
    st.text(max_size=10),
)
_OPTIONS: dict[str, st.SearchStrategy[str]] = {
    "--vcpus": _COUNT,
    "--memory": _SIZE,
    "--gpus": _COUNT,
    "--name": st.one_of(
        st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,8}", fullmatch=True), st.text(max_size=70)
    ),
    "--numa-nodes": st.one_of(_COUNT, _NOT_INT, st.just("auto"), st.just("AUTO")),
    "--cpu-policy": st.sampled_from([m.value for m in CpuPolicy]),
    "--dedicated-vcpus": st.one_of(
        st.from_regex(r"[0-9]{1,2}(-[0-9]{1,2})?(,[0-9]{1,2}){0,2}", fullmatch=True), st.text(max_size=8)
    ),
    "--thread-policy": st.sampled_from([m.value for m in ThreadPolicy]),
    "--page-size": st.one_of(
        st.sampled_from(["4K", "2M", "1G", "large", "3M", "0", "-1G"]), st.text(max_size=6)
    ),
    "--gpu-affinity": st.sampled_from([m.value for m in GpuAffinity]),
    "--emulator-threads": st.sampled_from([m.value for m in EmulatorThreads]),
    "--host": st.sampled_from(["host-a", "host-b", "nope", ""]),
    "--strategy": st.sampled_from([m.value for m in Strategy]),
}




@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fuzz-place") / "inventory.db"
    with open_inventory(f"sqlite:///{path}") as inv:
        inv.add_host(make_host("host-a", gpus_per_cell=2))
        inv.add_host(make_host("host-b", cells=1, gpus_per_cell=1))
        inv.add_tenant(Tenant("acme", Isolation.CORE))
        inv.add_tenant(Tenant("tiny", Isolation.NONE, max_vcpus=4, max_gpus=0))
    return path


@fuzz(CLI_EXAMPLES)
@given(data=st.data())
def test_place_options_never_crash_nor_write_on_refusal(inventory: Path, data: st.DataObject) -> None:
    chosen = data.draw(st.lists(st.sampled_from(sorted(_OPTIONS)), unique=True, max_size=6), label="options")
    tenant = data.draw(st.sampled_from(["acme", "tiny", "ghost"]), label="tenant")
    argv = ["--db", str(inventory), "place", tenant]
    for option in chosen:
        argv += [option, data.draw(_OPTIONS[option], label=option)]
    flags = data.draw(
        st.lists(st.sampled_from(["--dry-run", "--explain", "--json"]), unique=True), label="flags"
    )
    argv += flags
    before = _dump(inventory)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code in EXIT_CODES, (argv, result.exit_code, result.output)
    assert "Traceback" not in result.output, (argv, result.output)
    if result.exit_code != 0 or "--dry-run" in flags:
        assert _dump(inventory) == before, argv
    else:
        with open_inventory(f"sqlite:///{inventory}") as inv:
            vm = inv.list_vms()[0][0].vm
        assert CliRunner().invoke(app, ["--db", str(inventory), "vm", "release", vm]).exit_code == 0


@pytest.mark.parametrize(
    ("option", "value"),
    [("--vcpus", "x"), ("--gpus", ""), ("--gpus", "1.5"), ("--cpu-policy", "floating"),
     ("--strategy", "spread")],
    ids=["vcpus-x", "gpus-empty", "gpus-float", "cpu-policy", "strategy"],
)
def test_badly_typed_options_are_usage_errors(inventory: Path, option: str, value: str) -> None:
    before = _dump(inventory)
    result = CliRunner().invoke(app, ["--db", str(inventory), "place", "acme", option, value])
    assert _dump(inventory) == before
    assert result.exit_code == 2, result.output
