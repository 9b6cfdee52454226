"""``vnuma place --cell-vcpus/--cell-memory/--cell-gpus``: guest cells of their own sizes on the embedded
hypervisor: placed, rendered (one guest socket, libvirt accepts it), kept by a move; bad lists exit 4 and
change nothing."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, refused_unchanged

pytestmark = pytest.mark.libvirt

LISTS = ("--cell-vcpus", "12,4", "--cell-memory", "24GiB,8GiB", "--cell-gpus", "2,0")


def _shape(doc: dict) -> list[tuple[int, int, int]]:
    gpus = [d["guest_cell"] for d in doc["devices"]]
    return [(len(c["vcpus"]), c["memory_kib"] // 1024**2, gpus.count(c["guest_cell"])) for c in doc["cells"]]


def test_guest_cells_of_their_own_sizes_are_placed_rendered_applied_and_kept(demo_pair: Cli) -> None:
    placed = demo_pair.ok("place", "x", *LISTS, "--host", "a", "--name", "asym", "--json").json()
    assert _shape(placed) == [(12, 24, 2), (4, 8, 0)]
    assert placed["numa_nodes"] == 2
    gpu_cell = {c["guest_cell"]: c["host_cell"] for c in placed["cells"]}[0]
    assert {d["host_cell"] for d in placed["devices"]} == {gpu_cell}
    xml = demo_pair.ok("render", "asym").stdout
    assert "<topology sockets='1' dies='1' cores='8' threads='2'/>" in xml
    assert "<cell id='0' cpus='0-11' memory='25165824' unit='KiB'" in xml
    assert "<cell id='1' cpus='12-15' memory='8388608' unit='KiB'" in xml
    demo_pair.ok("apply", "asym")
    demo_pair.ok("vm", "migrate", "asym", "--to", "b")
    moved = demo_pair.ok("vm", "show", "asym", "--json").json()
    assert moved["host"] == "b" and _shape(moved) == [(12, 24, 2), (4, 8, 0)]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--cell-vcpus", "12,x", "--cell-memory", "24GiB,8GiB"], "bad --cell-vcpus '12,x'"),
        (["--cell-vcpus", "12,4", "--cell-memory", "24GiB"], "one entry per guest cell"),
        (["--cell-vcpus", "12,4", "--cell-memory", "24GiB,8GiB", "--vcpus", "10"], "add up to 16, not the 10"),
        (["--cell-vcpus", "12,4", "--cell-memory", "24GiB,8GiB", "--numa-nodes", "3"], "one entry per guest cell"),
        (["--cell-vcpus", "12,4"], "need both --cell-vcpus and --cell-memory"),
        (["--cell-vcpus", "12,4", "--cell-memory", "24GiB,8GiB", "--gpus", "2"], "--cell-gpus"),
        (["--cell-vcpus", "12,4", "--cell-memory", "24GiB,8x"], "8x"),
    ],
)
def test_bad_cell_lists_change_nothing(demo_pair: Cli, args: list[str], words: str) -> None:
    refused_unchanged(demo_pair, ["place", "x", *args], 4, words)
