"""A VM keeps its request as it was asked, and every move asks it again (``"request"`` in its documents)."""

from __future__ import annotations

from tests.cli.conftest import REPO, Cli

RESCTRL = REPO / "tests" / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"
ASKED = ["--vcpus", "4", "--memory", "4GiB", "--gpus", "1", "--gpu-affinity", "preferred", "--numa-nodes", "2",
         "--memory-mode", "interleave", "--iothreads", "2", "--emulator-threads", "isolate", "--page-size", "2M"]


def test_the_placement_keeps_the_request_as_asked(demo_pair: Cli) -> None:
    demo_pair.ok("tenant", "create", "t")
    placed = demo_pair.ok("place", "t", *ASKED, "--host", "a", "--name", "v", "--json").json()
    shown = demo_pair.ok("vm", "show", "v", "--json").json()
    assert placed["request"] == shown["request"]
    request = shown["request"]
    assert {k: request[k] for k in ("tenant", "name", "vcpus", "memory", "gpus", "gpu_affinity", "numa_nodes",
                                    "memory_mode", "iothreads", "emulator_threads", "page_size", "host")} == {
        "tenant": "t", "name": "v", "vcpus": 4, "memory": "4GiB", "gpus": 1, "gpu_affinity": "preferred",
        "numa_nodes": 2, "memory_mode": "interleave", "iothreads": 2, "emulator_threads": "isolate",
        "page_size": "2M", "host": "a",
    }
    assert "reconstructed" not in request
    xml = demo_pair.ok("render", "v").stdout
    assert "<vnuma:request tenant='t' vcpus='4' memory='4GiB' gpus='1' name='v' numa-nodes='2'" in xml
    assert "gpu-affinity='preferred'" in xml


def test_a_drain_moves_a_vm_with_the_request_it_asked(demo_pair: Cli) -> None:
    """The gpu-affinity of a ``preferred`` VM survives a drain (a move used to re-ask ``required``), and so
    does everything else it asked; only where it is changes."""
    demo_pair.ok("tenant", "create", "t")
    demo_pair.ok("place", "t", *ASKED, "--host", "a", "--name", "v")
    before = demo_pair.ok("vm", "show", "v", "--json").json()
    demo_pair.ok("host", "drain", "a", "--apply", "--yes")
    after = demo_pair.ok("vm", "show", "v", "--json").json()
    assert (before["host"], after["host"]) == ("a", "b")
    assert after["request"] == before["request"]
    assert after["request"]["gpu_affinity"] == "preferred"
    assert len(after["cells"]) == 2 and {c["memory_mode"] for c in after["cells"]} == {"interleave"}


def test_a_tenants_later_default_changes_no_placed_vms_request(cli: Cli) -> None:
    """The tenant's cache slice is the VM's when it is placed; a later change of the tenant's default neither
    changes its request nor what a move gives it."""
    cli.ok("host", "import", "rdt", "--capabilities", str(RESCTRL))
    cli.ok("host", "reserve", "rdt", "--llc-ways", "2")
    cli.ok("tenant", "create", "t", "--llc-ways", "2")
    cli.ok("place", "t", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "v")
    cli.ok("tenant", "update", "t", "--llc-ways", "3")
    shown = cli.ok("vm", "show", "v", "--json").json()
    assert shown["request"]["llc_ways"] == 2
    cells = [c["host_cell"] for c in shown["cells"]]
    cli.ok("vm", "repin", "v", "--cells", "1" if cells == [0] else "0")
    moved = cli.ok("vm", "show", "v", "--json").json()
    assert moved["cells"] != shown["cells"] and {e["ways"] for e in moved["llc"]} == {2}
    assert moved["request"] == shown["request"]
    cli.ok("place", "t", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "w")
    assert cli.ok("vm", "show", "w", "--json").json()["request"]["llc_ways"] == 3  # a new VM takes the new one
