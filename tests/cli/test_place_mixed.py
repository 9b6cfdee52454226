"""``vnuma place --cpu-policy mixed --dedicated-vcpus LIST``: the listed vCPUs pinned 1:1, the others floating;
recorded with the VM, shown by ``vm show`` and ``vm guest-view``, rendered; bad input refused with exit 4 (the
request check's code), one ``error:`` line, nothing written."""

from __future__ import annotations

import re
import sqlite3

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from vnuma.topology import format_cpuset, parse_cpuset

pytestmark = pytest.mark.libvirt

PLACE = ["place", "x", "--vcpus", "8", "--memory", "8GiB", "--cpu-policy", "mixed"]


def test_mixed_vm_pins_its_dedicated_vcpus_and_floats_the_others(demo_pair: Cli) -> None:
    doc = demo_pair.ok(*PLACE, "--dedicated-vcpus", "0-2,6", "--name", "m", "--json").json()
    assert (doc["cpu_policy"], doc["dedicated_vcpus"]) == ("mixed", [0, 1, 2, 6])
    xml = demo_pair.ok("render", "m").stdout
    pins = dict(re.findall(r"<vcpupin vcpu='(\d+)' cpuset='([^']+)'/>", xml))
    dedicated = {int(v): parse_cpuset(pins[str(v)]) for v in (0, 1, 2, 6)}
    floating = {int(v): parse_cpuset(pins[str(v)]) for v in (3, 4, 5, 7)}
    assert all(len(cpus) == 1 for cpus in dedicated.values())
    own = frozenset().union(*dedicated.values())
    assert len(own) == 4, "a dedicated pCPU pinned twice"
    float_set = frozenset().union(*floating.values())
    assert len(float_set) >= 4 and not float_set & own, "floating vCPUs on a dedicated pCPU"
    emulator = re.search(r"<emulatorpin cpuset='([^']+)'/>", xml)
    assert emulator is not None and parse_cpuset(emulator.group(1)) == float_set
    assert "<vnuma:dedicated vcpus='0-2,6'/>" in xml
    shown = demo_pair.ok("vm", "show", "m")
    assert "cpu policy: mixed (vCPUs 0-2,6 dedicated" in shown.stdout
    assert demo_pair.ok("vm", "show", "m", "--json").json()["dedicated_vcpus"] == [0, 1, 2, 6]
    view = demo_pair.ok("vm", "guest-view", "m", "--json").json()
    assert (view["cpu_policy"], view["dedicated_vcpus"]) == ("mixed", [0, 1, 2, 6])
    assert "vCPUs 0-2,6 dedicated" in demo_pair.ok("vm", "guest-view", "m").stdout


def test_a_move_keeps_the_dedicated_vcpus(demo_pair: Cli) -> None:
    demo_pair.ok(*PLACE, "--dedicated-vcpus", "4-7", "--host", "a", "--name", "m")
    demo_pair.ok("vm", "migrate", "m", "--to", "b")
    moved = demo_pair.ok("vm", "show", "m", "--json").json()
    assert (moved["host"], moved["cpu_policy"], moved["dedicated_vcpus"]) == ("b", "mixed", [4, 5, 6, 7])


def _claims(cli: Cli) -> list[tuple[int, int, str]]:
    with sqlite3.connect(cli.db) as con:
        return sorted(con.execute(
            "SELECT c.cpu_id, c.exclusive, v.name FROM cpu_claims c JOIN vms v ON v.id = c.vm_id"
        ).fetchall())


def test_cpu_claims_are_exclusive_pins_and_shared_floats_and_released_whole(demo_pair: Cli) -> None:
    demo_pair.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--host", "a", "--name", "d")
    before = _claims(demo_pair)
    doc = demo_pair.ok(*PLACE, "--dedicated-vcpus", "0-3", "--host", "a", "--name", "m", "--json").json()
    mine = [(cpu, bool(excl)) for cpu, excl, vm in _claims(demo_pair) if vm == "m"]
    pins = {p for c in doc["cells"] for p in c["pcpus"][: sum(1 for v in c["vcpus"] if v < 4)]}
    assert {cpu for cpu, excl in mine if excl} == pins and len(pins) == 4
    assert {cpu for cpu, excl in mine if not excl} == {p for c in doc["cells"] for p in c["pcpus"]} - pins
    demo_pair.ok("vm", "release", "m")
    assert _claims(demo_pair) == before


def test_dedicated_vcpus_go_through_the_server_body(demo_pair: Cli) -> None:
    from vnuma.api.bodies import PlaceBody

    body = PlaceBody.model_validate(
        {"tenant": "x", "vcpus": 4, "memory": "4GiB", "cpu_policy": "mixed", "dedicated_vcpus": "0,1"}
    )
    assert body.dedicated_vcpus == "0,1"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--cpu-policy", "dedicated", "--dedicated-vcpus", "0-3"], "--dedicated-vcpus needs cpu policy mixed"),
        (["--cpu-policy", "shared", "--dedicated-vcpus", "0"], "--dedicated-vcpus needs cpu policy mixed"),
        (["--cpu-policy", "mixed"], "cpu policy mixed needs the vCPUs to dedicate"),
        (["--cpu-policy", "mixed", "--dedicated-vcpus", "0-3,8"], "dedicated vCPU(s) 8 out of range"),
        (["--cpu-policy", "mixed", "--dedicated-vcpus", "0-7"], "every vCPU is dedicated: use cpu policy dedicated"),
        (["--cpu-policy", "mixed", "--dedicated-vcpus", "0-3", "--thread-policy", "require"],
         "thread policy require needs cpu policy dedicated"),
        (["--cpu-policy", "mixed", "--dedicated-vcpus", "0-x"], "bad --dedicated-vcpus '0-x'"),
        (["--cpu-policy", "mixed", "--dedicated-vcpus", "0-7,^2"], "bad --dedicated-vcpus"),
    ],
    ids=["with-dedicated", "with-shared", "mixed-without-list", "out-of-range", "all-dedicated", "require",
         "malformed", "exclusion"],
)
def test_bad_mixed_requests_change_nothing(demo_pair: Cli, args: list[str], words: str) -> None:
    refused_unchanged(demo_pair, ["place", "x", "--vcpus", "8", "--memory", "8GiB", *args], 4, words)
    res = demo_pair("place", "x", "--vcpus", "8", "--memory", "8GiB", *args)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error")]
    assert res.stderr.startswith("error: ") and len(errors) == 1


def test_refusal_is_exit_4_as_a_real_process(demo_pair: Cli) -> None:
    res = demo_pair.process(*PLACE, "--dedicated-vcpus", "9")
    assert res.exit_code == 4 and "out of range" in res.stderr and "Traceback" not in res.stderr
    assert demo_pair.ok("vm", "list", "--json").json() == []


def test_mixed_is_kept_by_dry_run_output(demo_pair: Cli) -> None:
    doc = demo_pair.ok(*PLACE, "--dedicated-vcpus", "1,3", "--dry-run", "--json").json()
    pinned = [c["pcpus"][: sum(1 for v in c["vcpus"] if v in (1, 3))] for c in doc["cells"]]
    assert sum(len(p) for p in pinned) == 2
    assert format_cpuset(doc["dedicated_vcpus"]) == "1,3"
    assert demo_pair.ok("vm", "list", "--json").json() == []
