"""``vnuma place --iothreads N [--iothreads-policy device-local]``: recorded with the VM, rendered as pinned
I/O threads, overridable at render/apply, kept by a move; bad input refused with exit 4, nothing changed."""

from __future__ import annotations

import re
import sqlite3

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from vnuma.topology import format_cpuset

pytestmark = pytest.mark.libvirt


def _iothread_pins(xml: str) -> list[tuple[str, str]]:
    return re.findall(r"<iothreadpin iothread='(\d+)' cpuset='([^']+)'/>", xml)


def test_device_local_iothreads_run_on_the_cell_of_the_first_device(demo_pair: Cli) -> None:
    placed = demo_pair.ok(
        "place", "x", "--gpus", "2", "--vcpus", "8", "--memory", "8GiB", "--numa-nodes", "2",
        "--gpu-affinity", "preferred", "--iothreads", "2", "--iothreads-policy", "device-local",
        "--host", "a", "--name", "io", "--json",
    ).json()
    assert (placed["iothreads"], placed["iothread_policy"]) == (2, "device-local")
    first = min(placed["devices"], key=lambda d: d["address"])
    cell = next(c for c in placed["cells"] if c["guest_cell"] == first["guest_cell"])
    xml = demo_pair.ok("render", "io").stdout
    assert "<iothreads>2</iothreads>" in xml
    assert _iothread_pins(xml) == [("1", format_cpuset(cell["pcpus"])), ("2", format_cpuset(cell["pcpus"]))]
    assert "iothreads: 2 (device-local)" in demo_pair.ok("vm", "show", "io").stdout
    assert len(_iothread_pins(demo_pair.ok("render", "io", "--iothreads", "3").stdout)) == 3
    demo_pair.ok("apply", "io")
    demo_pair.ok("vm", "migrate", "io", "--to", "b")
    moved = demo_pair.ok("vm", "show", "io", "--json").json()
    assert (moved["host"], moved["iothreads"], moved["iothread_policy"]) == ("b", 2, "device-local")


def test_emulator_iothreads_follow_the_emulator_pins(demo_pair: Cli) -> None:
    placed = demo_pair.ok("place", "x", "--vcpus", "4", "--memory", "4GiB", "--iothreads", "1", "--json").json()
    xml = demo_pair.ok("render", placed["vm"]).stdout
    assert _iothread_pins(xml) == [("1", format_cpuset(placed["emulator_pcpus"]))]


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--iothreads", "2", "--iothreads-policy", "device-local"], 4, "needs a passed-through device"),
        (["--iothreads", "-1"], 4, "iothreads must be 0 to 64"),
        (["--iothreads", "65"], 4, "iothreads must be 0 to 64"),
        (["--iothreads-policy", "nearby"], 2, "nearby"),
    ],
)
def test_bad_iothreads_change_nothing(demo_pair: Cli, args: list[str], code: int, words: str) -> None:
    refused_unchanged(demo_pair, ["place", "x", "--vcpus", "4", "--memory", "4GiB", *args], code, words)


def test_a_bad_iothreads_override_is_refused(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--name", "s")
    res = demo_pair("render", "s", "--iothreads", "99")
    assert res.exit_code == 4 and "iothreads must be 0 to 64" in res.stderr


def test_the_guest_topology_given_at_apply_is_kept_by_a_move(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--vcpus", "8", "--memory", "8GiB", "--host", "a", "--name", "t")
    assert "<topology sockets='1' dies='1' cores='4' threads='2'/>" in demo_pair.ok("render", "t").stdout
    res = demo_pair("apply", "t", "--sockets", "3")
    assert res.exit_code == 4 and "does not make the VM's 8 vCPUs" in res.stderr
    demo_pair.ok("apply", "t", "--threads", "1")
    demo_pair.ok("vm", "migrate", "t", "--to", "b")
    # The move defined it on b with the topology it was applied with (the embedded hypervisor keeps b's
    # domains in the inventory, as libvirt's test driver returned them).
    with sqlite3.connect(demo_pair.db) as con:
        (kept,) = con.execute(
            "SELECT d.xml FROM embedded_domains d JOIN hosts h ON h.id = d.host_id WHERE h.name = 'b' AND d.name = 't'"
        ).fetchone()
    assert re.findall(r"<topology sockets=.1. dies=.1. cores=.(\d+). threads=.(\d+)./>", kept) == [("8", "1")]
