"""numa_maps parsing (recorded text) and the pid/proc reading around it; the kernel's tiering settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import make_host
from vnuma.inventory import open_inventory
from vnuma.inventory.db import upgrade
from vnuma.placement.model import CellAssignment, Placement
from vnuma.services import Settings
from vnuma.services.hostprobe import is_local_uri, memory_by_node, parse_numa_maps, qemu_pid, tiering_problems
from vnuma.services.stats import collect, measure

# Recorded from a TCG guest with 2 MiB hugepages bound to node 0 (LIBVIRT.md), plus a
# two-node anonymous mapping and lines numastat ignores (no N fields).
RECORDED = """\
55d7c1c2e000 default file=/usr/bin/qemu-system-x86_64 mapped=612 mapmax=2 N0=612 kernelpagesize_kB=4
55d7c24b0000 default anon=1803 dirty=1803 N0=1203 N1=600 kernelpagesize_kB=4
7f2a40000000 bind:0 file=/dev/hugepages/libvirt/qemu/ram-node0 huge dirty=64 N0=64 kernelpagesize_kB=2048
7f2a48000000 bind:1 file=/dev/hugepages/libvirt/qemu/ram-node1 huge dirty=2 N1=2 kernelpagesize_kB=1048576
7ffd5d5e3000 default stack anon=9 dirty=9 N0=9 kernelpagesize_kB=4
7ffd5d5fc000 default
garbage line N7=notanumber
"""


def test_parse_numa_maps_sums_pages_times_page_size_per_node() -> None:
    assert parse_numa_maps(RECORDED) == {
        0: (612 + 1203 + 9) * 4 + 64 * 2048,
        1: 600 * 4 + 2 * 1048576,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("x default\n", {}),
        ("x default N3=2\n", {3: 8}),
        ("x default N0=1 kernelpagesize_kB=64\n", {0: 64}),
    ],
    ids=["empty", "no-nodes", "default-4k", "64k-pages"],
)
def test_parse_numa_maps_edge_cases(text: str, expected: dict[int, int]) -> None:
    assert parse_numa_maps(text) == expected


@pytest.mark.parametrize(
    ("uri", "local"),
    [("qemu:///system", True), ("qemu+ssh://h/system", False), ("test:///default", False), (None, False)],
    ids=["local", "ssh", "test-driver", "files"],
)
def test_is_local_uri(uri: str | None, local: bool) -> None:
    assert is_local_uri(uri) is local


def test_measure_reads_pid_file_and_numa_maps(tmp_path: Path) -> None:
    run, proc = tmp_path / "run", tmp_path / "proc"
    (proc / "4242").mkdir(parents=True)
    run.mkdir()
    (run / "vm1.pid").write_text("4242\n")
    (proc / "4242" / "numa_maps").write_text(RECORDED)
    cell = CellAssignment(0, 0, (0,), (0,), 131072, 2048)
    measured = measure(Placement("vm1", "t", "h", (cell,)), run, proc)
    assert measured is not None and measured.pid == 4242
    total = sum(parse_numa_maps(RECORDED).values())
    assert measured.local == pytest.approx(parse_numa_maps(RECORDED)[0] / total)
    assert measure(Placement("gone", "t", "h", (cell,)), run, proc) is None
    (run / "bad.pid").write_text("not a pid")
    assert qemu_pid("bad", run) is None
    assert memory_by_node(9999, proc) is None


@pytest.mark.parametrize(
    ("demotion", "balancing", "expected"),
    [
        ("false\n", "1\n", []),
        ("true\n", "0\n", ["kernel demotion is on"]),
        ("false\n", "2\n", ["memory tiering balancing is on (kernel.numa_balancing = 2"]),
        ("true\n", "3\n", ["kernel demotion is on", "memory tiering balancing is on (kernel.numa_balancing = 3"]),
        (None, None, []),  # an older kernel without either file
        ("garbage", "x3", []),
    ],
)
def test_tiering_problems_name_the_setting(demotion: str | None, balancing: str | None, expected: list[str]) -> None:
    problems = tiering_problems(demotion, balancing)
    assert [p[: len(e)] for p, e in zip(problems, expected, strict=False)] == expected
    assert len(problems) == len(expected)
    if balancing == "3\n":
        assert "sysctl -w kernel.numa_balancing=1" in problems[1]  # normal balancing kept, tiering off


def test_stats_warns_about_tiering_on_local_hosts_with_memory_only_cells(tmp_path: Path) -> None:
    sys_root, proc = tmp_path / "sys", tmp_path / "proc"
    (sys_root / "kernel/mm/numa").mkdir(parents=True)
    (proc / "sys/kernel").mkdir(parents=True)
    (sys_root / "kernel/mm/numa/demotion_enabled").write_text("true\n")
    (proc / "sys/kernel/numa_balancing").write_text("1\n")
    url = f"sqlite:///{tmp_path / 'inv.db'}"
    upgrade(url)
    with open_inventory(url) as inv:
        inv.add_host(make_host("tiered", memory_only_cells=2, uri="qemu:///system"))
        inv.add_host(make_host("far", memory_only_cells=2, uri="qemu+ssh://far/system"))
        inv.add_host(make_host("flat", uri="qemu:///system"))
    report = collect(Settings(db_url=url), sys_root=sys_root, proc=proc)
    assert [w.split(":")[0] for w in report.warnings] == ["host tiered"]
    assert "demotion_enabled" in report.warnings[0]
    (sys_root / "kernel/mm/numa/demotion_enabled").write_text("false\n")
    assert collect(Settings(db_url=url), sys_root=sys_root, proc=proc).warnings == ()
