"""``vnuma place --memory-mode`` / ``--cell-memory-mode``: recorded with the VM, shown, rendered, applied through
libvirt's test driver, kept by a move; bad input is refused with exit 2/4 and changes nothing."""

from __future__ import annotations

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from vnuma.topology import format_cpuset

pytestmark = pytest.mark.libvirt

MIX = ("--vcpus", "4", "--memory", "4GiB", "--numa-nodes", "2", "--page-size", "2M")


def test_per_cell_modes_are_recorded_shown_rendered_and_applied(demo_pair: Cli) -> None:
    placed = demo_pair.ok(
        "place", "x", *MIX, "--cell-memory-mode", "strict,interleave", "--host", "a", "--name", "m", "--json"
    ).json()
    assert [c["memory_mode"] for c in placed["cells"]] == ["strict", "interleave"]
    shown = demo_pair.ok("vm", "show", "m").stdout
    assert "MODE" in shown and "interleave" in shown
    xml = demo_pair.ok("render", "m").stdout
    first, second = (c["host_cell"] for c in placed["cells"])
    assert f"<memnode cellid='0' mode='strict' nodeset='{first}'/>" in xml
    everywhere = format_cpuset({first, second})
    assert f"<memnode cellid='1' mode='interleave' nodeset='{everywhere}'/>" in xml
    demo_pair.ok("apply", "m")
    demo_pair.ok("reconcile", "a")  # exit 0: the domain's interleaved memnode is what the placement renders
    # A move re-fits with the same modes, cell by cell.
    demo_pair.ok("vm", "migrate", "m", "--to", "b")
    moved = demo_pair.ok("vm", "show", "m", "--json").json()
    assert moved["host"] == "b" and [c["memory_mode"] for c in moved["cells"]] == ["strict", "interleave"]


def test_one_mode_for_every_cell_and_the_render_override(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", *MIX, "--memory-mode", "restrictive", "--name", "r")
    assert "mode='restrictive'" in demo_pair.ok("render", "r").stdout
    assert "<memory mode='restrictive'" in demo_pair.ok("render", "r").stdout
    overridden = demo_pair.ok("render", "r", "--memnode-mode", "strict").stdout
    assert "restrictive" not in overridden.split("<numatune>")[1].split("</numatune>")[0]
    demo_pair.ok("place", "x", *MIX, "--memory-mode", "interleave", "--name", "i")
    res = demo_pair("render", "i", "--memnode-mode", "strict")
    assert res.exit_code == 4 and "interleaved memory" in res.stderr


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--cell-memory-mode", "strict,interleave"], 4, "need as many guest cells (--numa-nodes 2), not auto"),
        (["--numa-nodes", "2", "--cell-memory-mode", "strict,bogus"], 4, "'bogus' is not one of"),
        (["--numa-nodes", "2", "--cell-memory-mode", "restrictive,strict"], 4, "restrictive applies to every"),
        (["--memory-mode", "loose"], 2, "loose"),
    ],
)
def test_bad_memory_modes_change_nothing(demo_pair: Cli, args: list[str], code: int, words: str) -> None:
    refused_unchanged(demo_pair, ["place", "x", "--vcpus", "4", "--memory", "4GiB", *args], code, words)


def test_interleave_is_not_a_render_override(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--name", "s")
    res = demo_pair("apply", "s", "--memnode-mode", "interleave")
    assert res.exit_code == 4 and "--memory-mode interleave" in res.stderr
