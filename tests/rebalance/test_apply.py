"""``vnuma rebalance --apply / --resume / --abort`` through libvirt's test driver (in-process).

The test driver keeps ``test:///default``'s domains only while some
connection to it is open, so a fixture holds one for each test and
undefines what the test defined. Hosts are added with that URI and a
capabilities file (the driver's own topology has 8 KiB "huge" pages and
CPUs its pin API cannot address). What each step did is read back from
libvirt's XML: the live definition for live re-pins, the persistent one for
what the domain boots with next.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.builders import make_host
from tests.cli.conftest import Cli
from tests.sources.capswriter import capabilities_xml

libvirt = pytest.importorskip("libvirt")
pytestmark = pytest.mark.libvirt

URI = "test:///default"
ONE_CELL = ("--page-size", "4K", "--numa-nodes", "1")
ROOM = ["--make-room-for", "vcpus=4,memory=1GiB,page_size=4K,numa_nodes=1"]


def _caps(tmp_path: Path, cores_per_cell: int) -> Path:
    path = tmp_path / f"caps-{cores_per_cell}.xml"
    host = make_host(
        cells=2, cores_per_cell=cores_per_cell, smt=1, memory_gib=8, hugepages_2m_gib=0, hugepages_1g_gib=0
    )
    path.write_text(capabilities_xml(host))
    return path


def _fragmented(cli: Cli, tmp_path: Path, *, cores_per_cell: int = 4, apply: tuple[str, ...] = ()) -> None:
    """Cell 0: v2 on pCPUs 2-3 (v1 released from 0-1); cell 1: v3 on 4-5. A 4-vCPU VM fits only after a move."""
    cli.ok("host", "add", "h", "--uri", URI, "--capabilities", str(_caps(tmp_path, cores_per_cell)))
    cli.ok("tenant", "create", "a")
    for name in ("v1", "v2", "v3"):
        cli.ok("place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", name)
    cli.ok("vm", "release", "v1")
    assert cli("place", "a", "--vcpus", "4", "--memory", "1GiB", *ONE_CELL, "--dry-run").exit_code == 5
    for name in ("v2", "v3"):
        if apply:
            cli.ok("apply", name, *apply)


def _pins(conn: Any, vm: str, *, inactive: bool = False) -> dict[str, str]:
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE if inactive else 0
    xml = conn.lookupByName(vm).XMLDesc(flags)
    pins = dict(re.findall(r"<vcpupin vcpu='(\d+)' cpuset='([^']+)'/>", xml))
    nodes = re.findall(r"<memnode cellid='0' mode='\w+' nodeset='([^']+)'/>", xml)
    return {**pins, "memnode": nodes[0] if nodes else ""}


def _cells(cli: Cli, vm: str) -> tuple[list[int], list[int]]:
    doc = cli.ok("vm", "show", vm, "--json").json()
    placement = doc.get("placement", doc)
    cells = placement["cells"]
    return [c["host_cell"] for c in cells], [p for c in cells for p in c["pcpus"]]


def test_running_vms_move_live_and_the_room_opens(cli: Cli, conn: Any, tmp_path: Path) -> None:
    _fragmented(cli, tmp_path, apply=("--start", "--memnode-mode", "restrictive"))
    doc = cli.ok("rebalance", *ROOM, "--apply", "--yes", "--json").json()
    (move,) = doc["moves"]
    run = doc["run"]
    assert run["status"] == "done"
    assert [(s["vm"], s["kind"], s["status"]) for s in run["steps"]] == [(move["vm"], "live", "done")]
    vm = move["vm"]
    cells, pcpus = _cells(cli, vm)
    assert cells == move["to"]["cells"] != move["from"]["cells"]
    live, persistent = _pins(conn, vm), _pins(conn, vm, inactive=True)
    assert [live["0"], live["1"]] == [str(p) for p in pcpus]
    assert persistent == {"0": str(pcpus[0]), "1": str(pcpus[1]), "memnode": str(cells[0])}
    assert conn.lookupByName(vm).isActive()
    assert cli.ok("vm", "show", vm, "--json").json()["state"] == "running"
    cli.ok("place", "a", "--vcpus", "4", "--memory", "1GiB", *ONE_CELL, "--name", "big")


def test_strict_numatune_needs_allow_restart_and_nothing_changes_without_it(
    cli: Cli, conn: Any, tmp_path: Path, dumped: Callable[[Path], list[str]]
) -> None:
    _fragmented(cli, tmp_path, apply=("--start",))
    before = dumped(cli.db)
    res = cli("rebalance", *ROOM, "--apply", "--yes")
    assert res.exit_code == 9 and "--allow-restart" in res.stderr
    assert dumped(cli.db) == before
    doc = cli.ok("rebalance", *ROOM, "--apply", "--yes", "--allow-restart", "--json").json()
    (step,) = doc["run"]["steps"]
    assert (step["kind"], step["status"]) == ("restart", "done")
    cells, pcpus = _cells(cli, step["vm"])
    assert _pins(conn, step["vm"]) == {"0": str(pcpus[0]), "1": str(pcpus[1]), "memnode": str(cells[0])}
    assert conn.lookupByName(step["vm"]).isActive()


def test_defined_vms_are_redefined_and_placed_ones_only_move_claims(cli: Cli, conn: Any, tmp_path: Path) -> None:
    _fragmented(cli, tmp_path)
    cli.ok("apply", "v3")  # defined, not started; v2 stays placed only
    doc = cli.ok("rebalance", *ROOM, "--max-moves", "1", "--apply", "--yes", "--json").json()
    (step,) = doc["run"]["steps"]
    expected_kind = {"v2": "claims", "v3": "redefine"}[step["vm"]]
    assert step["kind"] == expected_kind
    if step["vm"] == "v3":
        cells, pcpus = _cells(cli, "v3")
        expected = {"0": str(pcpus[0]), "1": str(pcpus[1]), "memnode": str(cells[0])}
        assert _pins(conn, "v3", inactive=True) == expected
        assert not conn.lookupByName("v3").isActive()
    assert [d.name() for d in conn.listAllDomains() if d.name() == "v2"] == []


def test_apply_asks_for_yes_when_not_on_a_terminal(
    cli: Cli, conn: Any, tmp_path: Path, dumped: Callable[[Path], list[str]]
) -> None:
    _fragmented(cli, tmp_path)
    before = dumped(cli.db)
    res = cli("rebalance", *ROOM, "--apply")
    assert res.exit_code == 4 and "--yes" in res.stderr
    assert dumped(cli.db) == before


def _journal(db: Path) -> list[tuple[Any, ...]]:
    c = sqlite3.connect(db)
    try:
        return c.execute(
            "SELECT r.status, r.unfinished, s.seq, s.vm, s.kind, s.status, s.error IS NOT NULL "
            "FROM rebalance_runs r JOIN rebalance_steps s ON s.run_id = r.id ORDER BY r.id, s.seq"
        ).fetchall()
    finally:
        c.close()


def test_failed_step_is_journaled_then_abort_puts_everything_back(cli: Cli, conn: Any, tmp_path: Path) -> None:
    # 8 cores per cell: cell 1 is CPUs 8-15, which the test driver's pin API cannot address
    # (its CPU map has 8 CPUs), so the live re-pin of w into cell 1 fails in libvirt.
    cli.ok("host", "add", "h", "--uri", URI, "--capabilities", str(_caps(tmp_path, 8)))
    cli.ok("tenant", "create", "a")
    for name, vcpus, memory in (("w", "2", "1GiB"), ("z", "6", "1GiB"), ("y", "2", "2GiB")):
        cli.ok("place", "a", "--vcpus", vcpus, "--memory", memory, "--page-size", "4K", "--name", name)
    cli.ok("vm", "release", "z")  # cell 0: w on 0-1; cell 1: y on 8-9
    cli.ok("apply", "w", "--start", "--memnode-mode", "restrictive")
    before_pins = _pins(conn, "w", inactive=True)
    before_cells = _cells(cli, "w")
    room = ["--make-room-for", "vcpus=8,memory=1GiB,page_size=4K,numa_nodes=1"]
    res = cli("rebalance", *room, "--apply", "--yes")
    assert res.exit_code == 8, res.stderr
    assert "step 1 (w)" in res.stderr and "--resume" in res.stderr and "--abort" in res.stderr
    assert _journal(cli.db) == [("failed", 1, 1, "w", "live", "started", 1)]
    # The claims sit at the destination while the run is unfinished; a second apply is refused.
    assert _cells(cli, "w")[0] == [1]
    again = cli("rebalance", *room, "--apply", "--yes")
    assert again.exit_code == 9 and "unfinished" in again.stderr
    assert cli("rebalance", "--resume").exit_code == 8
    doc = cli.ok("rebalance", "--abort", "--json").json()
    assert doc["run"]["status"] == "aborted"
    assert [s["status"] for s in doc["run"]["steps"]] == ["undone"]
    assert _cells(cli, "w") == before_cells
    assert _pins(conn, "w", inactive=True) == before_pins
    assert cli.ok("vm", "show", "w", "--json").json()["state"] == "running"
    assert cli("rebalance", "--abort").exit_code == 3


def test_journal_rows_record_every_step(cli: Cli, conn: Any, tmp_path: Path) -> None:
    _fragmented(cli, tmp_path, apply=("--start", "--memnode-mode", "restrictive"))
    cli.ok("rebalance", *ROOM, "--apply", "--yes")
    rows = _journal(cli.db)
    assert [(r[0], r[1], r[5]) for r in rows] == [("done", None, "done")]
    c = sqlite3.connect(cli.db)
    before, after = c.execute("SELECT before, after FROM rebalance_steps").fetchone()
    c.close()
    assert json.loads(before)["cells"] != json.loads(after)["cells"]


def test_place_rebalance_shows_the_plan_and_apply_makes_room_then_places(
    cli: Cli, conn: Any, tmp_path: Path, dumped: Callable[[Path], list[str]]
) -> None:
    _fragmented(cli, tmp_path, apply=("--start", "--memnode-mode", "restrictive"))
    big = ("place", "a", "--vcpus", "4", "--memory", "1GiB", *ONE_CELL, "--name", "big")
    before = dumped(cli.db)
    shown = cli(*big, "--rebalance", "--json")
    assert shown.exit_code == 5
    doc = json.loads(shown.stdout)
    assert "rejections" in doc and len(doc["rebalance"]["moves"]) == 1 and "run" not in doc["rebalance"]
    assert dumped(cli.db) == before
    assert cli(*big, "--apply").exit_code == 2  # --apply belongs to --rebalance
    placed = cli.ok(*big, "--rebalance", "--apply", "--yes", "--json").json()
    assert placed["vm"] == "big" and len(placed["cells"]) == 1
    assert placed["rebalance"]["run"]["status"] == "done"
    (step,) = placed["rebalance"]["run"]["steps"]
    assert step["kind"] == "live" and conn.lookupByName(step["vm"]).isActive()
    moved_cells, _ = _cells(cli, step["vm"])
    assert moved_cells != [placed["cells"][0]["host_cell"]]


def test_place_rebalance_without_a_plan_says_so(cli: Cli, conn: Any, tmp_path: Path) -> None:
    _fragmented(cli, tmp_path)
    big = ("place", "a", "--vcpus", "8", "--memory", "1GiB", *ONE_CELL, "--rebalance", "--max-moves", "1")
    res = cli(*big)
    assert res.exit_code == 5 and "no plan of at most 1 move(s) makes room for VM 'a-vm1'" in res.stdout
    doc = cli(*big, "--json").json()
    assert doc["rebalance"]["found"] is False and doc["rebalance"]["moves"] == []
    assert doc["rebalance"]["reason"] == "no plan of at most 1 move(s) makes room for VM 'a-vm1'"
    on_host = cli(*big, "--host", "h")
    assert on_host.exit_code == 5 and "no plan of at most 1 move(s) on host h makes room" in on_host.stdout


def test_make_room_for_says_already_fits_finds_moves_or_exits_5(cli: Cli, conn: Any, tmp_path: Path) -> None:
    _fragmented(cli, tmp_path)
    fits = cli("rebalance", "--make-room-for", "vcpus=2,memory=1GiB,page_size=4K,numa_nodes=1")
    assert (fits.exit_code, fits.stdout) == (0, "the shape already fits: nothing to do\n")
    moves = cli.ok("rebalance", *ROOM)
    assert "room: 1 -> 0" in moves.stdout
    none = cli("rebalance", "--make-room-for", "vcpus=8,memory=1GiB,page_size=4K,numa_nodes=1", "--max-moves", "1")
    assert none.exit_code == 5
    assert none.stderr.startswith("error: no plan of at most 1 move(s) makes room for the shape\nhint: ")
    as_json = cli("rebalance", "--make-room-for", "vcpus=8,memory=1GiB,page_size=4K,numa_nodes=1", "--json")
    assert as_json.exit_code == 5 and as_json.json()["moves"] == [] and as_json.json()["before"] == 1
