"""`vnuma stats --bandwidth`: recorded `virsh domstats --memory --cpu-total` outputs, the rates and noisy VMs
they give, the sample kept in the inventory, the live path through libvirt, and bad input.

The recordings (tests/data/domstats/rdt-first.txt, rdt-second.txt, 2 s apart) are of four VMs on the
2-socket Intel fixture with CAT, MBA and MBM: on L3 domain 0, tenant-a's a1 (capped at 30 %) moves 4000 MB/s
and a2 1000 MB/s, tenant-b's b1 1000 MB/s; on domain 1, tenant-b's b2 500 MB/s. A fifth domain, not
placed by vnuma, has no monitor.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.builders import kept
from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump
from tests.stats.conftest import resctrl_vms
from vnuma.errors import InvalidInputError
from vnuma.placement.model import Placement
from vnuma.sources.domstats import parse_domstats
from vnuma.sources.mbm import parse_cache_occupancy
from vnuma.watch.bandwidth import assess, rate

CAPS = REPO / "tests" / "data" / "capabilities"
RECORDED = REPO / "tests" / "data" / "domstats"
FIRST, SECOND = RECORDED / "rdt-first.txt", RECORDED / "rdt-second.txt"


def test_saved_domstats_read_back_as_libvirt_returns_them() -> None:
    stats = parse_domstats(SECOND.read_text(), "second")
    assert list(stats) == ["a1", "a2", "b1", "b2", "not-ours"]
    assert stats["a1"]["memory.bandwidth.monitor.0.node.0.bytes.total"] == 68_100_000_000
    assert stats["a1"]["cpu.cache.monitor.0.vcpus"] == "0-1"
    (monitor,) = parse_cache_occupancy(stats["b2"])
    assert (monitor.vcpus, monitor.banks) == ("0-3", ((1, 3_145_728),))
    assert parse_cache_occupancy(stats["not-ours"]) == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no \"Domain: 'NAME'\" line"),
        ("  cpu.time=1\n", "line 1: expected"),
        ("Domain: 'a'\n  just words\n", "line 2: expected"),
        ("Domain: 'a'\n  x=1\nDomain: 'a'\n", "domain 'a' appears twice"),
    ],
)
def test_text_that_is_not_domstats_output_is_refused_with_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        parse_domstats(text, "saved.txt")


def _placement(vm: str, tenant: str, caps: tuple[tuple[int, int], ...] = ()) -> Placement:
    return kept(Placement(vm=vm, tenant=tenant, host="rdt", cells=(), mem_bw=caps))


def test_rates_are_counter_differences_over_the_interval_and_the_heavy_tenant_is_noisy() -> None:
    first, second = (parse_domstats(p.read_text(), p.name) for p in (FIRST, SECOND))
    placements = {
        "a1": _placement("a1", "tenant-a", ((0, 30),)), "a2": _placement("a2", "tenant-a"),
        "b1": _placement("b1", "tenant-b"), "b2": _placement("b2", "tenant-b"),
    }
    rates = [rate(p, first[vm], second[vm], 2.0) for vm, p in placements.items()]
    assert all(r is not None for r in rates)
    vms, domains = assess([r for r in rates if r is not None], placements)
    by_vm = {v.vm: v for v in vms}
    assert (by_vm["a1"].local_bps, by_vm["a1"].total_bps) == (3_600_000_000, 4_000_000_000)
    assert by_vm["a1"].llc == ((0, 8_388_608),)
    # Domain 0: 6000 MB/s. a1 is entitled to its 30 % cap and moves 67 %; a2 (tenant-a's half split
    # between its two VMs: 25 %) moves 17 %; b1 (tenant-b's half) 17 %.
    assert {v.vm: v.noisy for v in vms} == {"a1": (0,), "a2": (), "b1": (), "b2": ()}
    (d0, d1) = domains
    assert (d0.domain, d0.total_bps, d0.vms, d0.llc_bytes) == (0, 6_000_000_000, 3, 8_388_608 + 2_097_152 * 2)
    assert d0.top == (("a1", 4_000_000_000), ("a2", 1_000_000_000), ("b1", 1_000_000_000))
    assert (d1.domain, d1.total_bps, d1.vms) == (1, 500_000_000, 1)  # alone on its domain: never noisy


def test_a_counter_that_went_down_gives_no_rate_for_that_domain() -> None:
    first, second = (parse_domstats(p.read_text(), p.name) for p in (FIRST, SECOND))
    p = _placement("a1", "tenant-a")
    restarted = rate(p, second["a1"], first["a1"], 2.0)  # the readings swapped: every counter went down
    assert restarted is not None and restarted.domains == () and restarted.llc == ((0, 6_291_456),)
    assert rate(p, {}, {}, 2.0) is None


@pytest.fixture
def rdt(tmp_path: Path) -> Cli:
    return resctrl_vms(Cli(tmp_path / "inventory.db"))


def _samples(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT v.name, h.name, s.interval_ms, s.domains, s.llc FROM bandwidth_samples s "
            "JOIN vms v ON v.id = s.vm_id JOIN hosts h ON h.id = s.host_id ORDER BY v.name"
        ).fetchall()


def test_recorded_readings_give_per_vm_and_per_domain_figures_and_the_sample_is_kept(rdt: Cli) -> None:
    res = rdt.ok("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND), "--json")
    doc = res.json()
    assert doc["interval_s"] == 2.0 and doc["warnings"] == []
    a1 = next(v for v in doc["vms"] if v["vm"] == "a1")
    assert a1 == {
        "vm": "a1", "tenant": "tenant-a", "host": "rdt", "local_mb_s": 3600.0, "total_mb_s": 4000.0, "local": 0.9,
        "domains": [{"domain": 0, "local_mb_s": 3600.0, "total_mb_s": 4000.0, "noisy": True}],
        "llc": [{"cache": 0, "bytes": 8_388_608}], "noisy": True,
    }
    assert [v["vm"] for v in doc["vms"] if v["noisy"]] == ["a1"]
    assert [(d["domain"], d["total_mb_s"], [t["vm"] for t in d["top"]]) for d in doc["domains"]] == [
        (0, 6000.0, ["a1", "a2", "b1"]), (1, 500.0, ["b2"]),
    ]
    kept = _samples(rdt.db)
    assert [(vm, host, ms) for vm, host, ms, _d, _l in kept] == [(vm, "rdt", 2000) for vm in ("a1", "a2", "b1", "b2")]
    assert kept[0][3] == "[[0, 3600000000, 4000000000]]" and kept[0][4] == "[[0, 8388608]]"
    table = rdt.ok("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND), "--interval", "4s")
    assert "a1" in table.stdout and "L3#0" in table.stdout and "a1 2000.0" in table.stdout  # 4 s: half the rate
    assert len(_samples(rdt.db)) == 4  # the new sample replaced the old one
    rdt.ok("vm", "release", "a1")
    assert [row[0] for row in _samples(rdt.db)] == ["a2", "b1", "b2"]  # released with its VM


def test_one_vm_or_one_host_only(rdt: Cli) -> None:
    doc = rdt.ok("stats", "b2", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND), "--json").json()
    assert [v["vm"] for v in doc["vms"]] == ["b2"] and [d["domain"] for d in doc["domains"]] == [1]
    assert [row[0] for row in _samples(rdt.db)] == ["b2"]
    missing = rdt("stats", "--host", "nope", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND))
    assert missing.exit_code == 3 and "host 'nope' is not in the inventory" in missing.stderr


def test_bad_recordings_and_options_are_one_clear_error_and_nothing_is_written(rdt: Cli, tmp_path: Path) -> None:
    before = dump(rdt.db)
    broken = tmp_path / "broken.txt"
    broken.write_text("<domstats/>\n")
    res = rdt("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(broken))
    assert res.exit_code == 4 and res.stderr.startswith(f"error: {broken}: line 1: expected")
    assert "Traceback" not in res.stderr
    once = rdt("stats", "--bandwidth", "--domstats", str(FIRST))
    assert once.exit_code == 2 and "give --domstats twice" in once.stderr
    for interval in ("0s", "soon", "2h"):
        res = rdt("stats", "--bandwidth", "--interval", interval)
        assert res.exit_code == 4 and "bad --interval" in res.stderr
    gone = rdt("stats", "--bandwidth", "--domstats", str(tmp_path / "nope.txt"), "--domstats", str(SECOND))
    assert gone.exit_code == 4 and "cannot read" in gone.stderr
    assert dump(rdt.db) == before


@pytest.mark.libvirt
def test_live_readings_through_libvirt_of_a_vm_without_monitors_warn_and_keep_nothing(running: Cli) -> None:
    cli = running
    res = cli.ok("stats", "--bandwidth", "--interval", "10ms", "--json")
    assert res.json()["vms"] == [] and "no memory-bandwidth or cache monitors for v" in res.stderr
    assert _samples(cli.db) == []


def test_rebalance_on_the_kept_samples_moves_the_heaviest_vm_to_the_quiet_domain(rdt: Cli) -> None:
    before = dump(rdt.db)
    res = rdt("rebalance", "--objective", "bandwidth")
    assert res.exit_code == 4 and "the inventory has none" in res.stderr and "vnuma stats --bandwidth" in res.stderr
    assert dump(rdt.db) == before
    rdt.ok("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND))
    plan = rdt.ok("rebalance", "--objective", "bandwidth", "--max-moves", "1", "--json").json()
    # Domain 0 carries 6000 MB/s, domain 1 500: the share is 3250, 2750 beyond it. a1 (4000) to cell 1
    # leaves 2000 and 4500: 1250 beyond.
    assert (plan["objective"], plan["before"], plan["after"]) == ("bandwidth", 2750, 1250)
    (move,) = plan["moves"]
    assert (move["vm"], move["from"]["cells"], move["to"]["cells"]) == ("a1", [0], [1])
    assert "4000 MB/s" in move["reason"] and "measured" in move["reason"]
    table = rdt.ok("rebalance", "--objective", "bandwidth", "--max-moves", "1").stdout
    assert "objective bandwidth: 2750 -> 1250" in table


@pytest.mark.libvirt
def test_a_bandwidth_plan_is_carried_out_through_libvirt_like_any_other(cli: Cli, conn: Any) -> None:
    cli.ok("host", "add", "rdt", "--uri", "test:///default", "--capabilities",
           str(CAPS / "x86-2cell-smt-resctrl.xml"))
    cli.ok("host", "reserve", "rdt", "--llc-ways", "2")
    for tenant in ("tenant-a", "tenant-b"):
        cli.ok("tenant", "create", tenant)
    for name, tenant, vcpus in (("a1", "tenant-a", "2"), ("a2", "tenant-a", "2"), ("b1", "tenant-b", "2"),
                                ("b2", "tenant-b", "4")):
        cli.ok("place", tenant, "--vcpus", vcpus, "--memory", "2GiB", "--page-size", "2M", "--name", name,
               "--llc-ways", "2")
        cli.ok("apply", name)
    cli.ok("stats", "--bandwidth", "--domstats", str(FIRST), "--domstats", str(SECOND))
    done = cli.ok("rebalance", "--objective", "bandwidth", "--max-moves", "1", "--apply", "--yes", "--json").json()
    assert done["run"]["status"] == "done" and [s["vm"] for s in done["run"]["steps"]] == ["a1"]
    moved = cli.ok("vm", "show", "a1", "--json").json()
    assert [c["host_cell"] for c in moved["cells"]] == [1] and moved["llc"] == [{"cache": 1, "ways": 2}]
    xml = conn.lookupByName("a1").XMLDesc(0)
    assert "<cache id='1' level='3' type='both'" in xml  # the slice follows the vCPUs to the other L3
    # The sample stays with the VM until the next measurement; the planner knows it was taken on cell 0's
    # domain and spreads it over the VM's new pCPUs' domains instead.
    again = cli.ok("rebalance", "--objective", "bandwidth", "--json").json()
    assert again["before"] == 1250


def test_readings_that_name_no_inventory_vm_say_so(rdt: Cli, tmp_path: Path) -> None:
    """Saved readings of other domains (another host's, renamed ones) measure nothing, and say why: not two
    empty tables in silence. A VM in one reading only is named too."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text(FIRST.read_text().replace("Domain: '", "Domain: 'x"))
    second.write_text(SECOND.read_text().replace("Domain: '", "Domain: 'x"))
    res = rdt.ok("stats", "--bandwidth", "--domstats", str(first), "--domstats", str(second), "--json")
    assert res.json()["vms"] == [] and res.json()["domains"] == []
    words = ("the readings hold none of the inventory's VMs in both (they name xa1, xa2, xb1, xb2, xnot-ours): "
             "nothing was measured")
    assert res.json()["warnings"] == [words] and res.stderr.splitlines() == [f"warning: {words}"]
    table = rdt.ok("stats", "--host", "rdt", "--bandwidth", "--domstats", str(first), "--domstats", str(SECOND))
    assert table.stderr.splitlines() == [
        "warning: in one reading only, left out: a1, a2, b1, b2",
        "warning: the readings hold none of the VMs of host rdt in both (they name a1, a2, b1, b2, not-ours, xa1, "
        "xa2, xb1, xb2, xnot-ours): nothing was measured",
    ]
    assert _samples(rdt.db) == []
