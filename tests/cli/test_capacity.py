"""``vnuma capacity``: the what-if answer equals what real placements then do, nothing is written, and what
stops the next copy is told per check."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from tests.dbdump import dump

pytestmark = pytest.mark.libvirt

GPU2 = "vcpus=16,memory=64GiB,gpus=2"


def test_the_count_it_gives_is_what_vnuma_place_then_places(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--gpus", "2", "--vcpus", "8", "--memory", "16GiB", "--host", "a", "--name", "held")
    before = dump(demo_pair.db)
    doc = demo_pair.ok("capacity", GPU2, "--tenant", "x", "--json").json()
    assert dump(demo_pair.db) == before  # nothing written
    assert (doc["shapes"], doc["fits"]) == ([GPU2], 7)  # 16 GPUs, 2 held
    assert len(doc["placements"]) == 7 and {p["shape"] for p in doc["placements"]} == {GPU2}
    assert [(s["check"], s["hosts"]) for s in doc["stopped_by"]] == [("gpus", 2)]
    assert "free GPUs" in doc["stopped_by"][0]["reason"] and doc["stopped_by"][0]["example_host"] in ("a", "b")
    # The same engine on the same state: exactly that many real placements succeed, the next is refused.
    where = []
    for i in range(7):
        placed = demo_pair.ok("place", "x", "--vcpus", "16", "--memory", "64GiB", "--gpus", "2", "--name", f"c{i}",
                              "--json").json()
        where.append({"shape": GPU2, "host": placed["host"], "cells": [c["host_cell"] for c in placed["cells"]]})
    assert where == doc["placements"]
    assert demo_pair("place", "x", "--vcpus", "16", "--memory", "64GiB", "--gpus", "2").exit_code == 5
    again = demo_pair.ok("capacity", GPU2, "--json").json()
    assert again["fits"] == 0 and again["stopped_by"][0]["check"] == "gpus"  # exit 0 also when nothing fits


def test_a_mix_round_robin_a_count_a_host_and_a_quota(demo_pair: Cli) -> None:
    mix = demo_pair.ok("capacity", GPU2, "vcpus=4,memory=8GiB", "--json").json()
    shapes = [p["shape"] for p in mix["placements"]]
    assert shapes[:4] == [GPU2, "vcpus=4,memory=8GiB", GPU2, "vcpus=4,memory=8GiB"]
    assert shapes.count(GPU2) == 8 and len(shapes) == 16  # stops when the 9th GPU copy fits nowhere
    counted = demo_pair.ok("capacity", GPU2, "--count", "3", "--json").json()
    assert (counted["fits"], counted["stopped_by"]) == (3, [])
    assert "(stopped at --count)" in demo_pair.ok("capacity", GPU2, "--count", "3").stdout
    on_b = demo_pair.ok("capacity", GPU2, "--host", "b", "--json").json()
    assert on_b["fits"] == 4 and {p["host"] for p in on_b["placements"]} == {"b"}
    demo_pair.ok("tenant", "create", "q", "--max-gpus", "4")
    quota = demo_pair.ok("capacity", GPU2, "--tenant", "q", "--json").json()
    assert quota["fits"] == 2 and [s["check"] for s in quota["stopped_by"]] == ["quota"]
    assert quota["stopped_by"][0]["example_host"] is None


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["capacity", "vcpus=x,memory=1GiB"], 4, "bad SHAPE 'vcpus=x,memory=1GiB'"),
        (["capacity", "vcpus=4"], 4, "memory is required"),
        (["capacity", "vcpus=4,memory=1GiB,colour=red"], 4, "cannot read 'colour=red'"),
        (["capacity", GPU2, "--host", "nosuch"], 3, "host 'nosuch' is not in the inventory"),
        (["capacity", GPU2, "--tenant", "nosuch"], 3, "tenant 'nosuch' is not in the inventory"),
        (["capacity", GPU2, "--count", "0"], 4, "--count must be 1 or more"),
        (["capacity", "vcpus=4,memory=1GiB,gpus=99"], 4, "the whole fleet has 16"),
        (["capacity"], 2, "SHAPE"),
    ],
)
def test_bad_capacity_input_changes_nothing(demo_pair: Cli, args: list[str], code: int, words: str) -> None:
    refused_unchanged(demo_pair, args, code, words)
