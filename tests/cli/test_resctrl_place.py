"""Cache slices and bandwidth caps end to end: host reserve, place, the claims, render, release.

The host is the 2-socket Intel fixture with CAT and MBA (22 MiB L3 per socket in 2 MiB ways: 11 ways, at
least 2; MBA in steps of 10 %; 16 classes of service per cache, 8 per bandwidth domain).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

CAPS = REPO / "tests" / "data" / "capabilities"


@pytest.fixture
def rdt(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "import", "rdt", "--capabilities", str(CAPS / "x86-2cell-smt-resctrl.xml"))
    cli.ok("host", "import", "plain", "--capabilities", str(CAPS / "epyc-8cell-nps4.xml"))
    cli.ok("tenant", "create", "tenant-a")
    return cli


def _place(cli: Cli, name: str, *extra: str):
    return cli("place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--name", name,
               *extra, "--json")


def _claims(db: Path) -> list[tuple[str, int, int, int | None]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT v.name, c.domain_id, c.ways, c.mem_bw FROM resctrl_claims c JOIN vms v ON v.id = c.vm_id "
            "ORDER BY v.name, c.domain_id"
        ).fetchall()


def test_no_slice_before_the_host_keeps_ways_for_itself(rdt: Cli) -> None:
    before = dump(rdt.db)
    res = _place(rdt, "early", "--llc-ways", "2")
    assert res.exit_code == 5
    assert "closest: rdt (llc: host 'rdt' keeps no cache ways for its own processes" in res.stderr
    assert dump(rdt.db) == before
    explained = rdt("place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--llc-ways", "2", "--dry-run",
                    "--explain", "--json")
    reasons = {r["host"]: r for r in explained.json()["rejections"]}
    assert reasons["plain"]["check"] == "resctrl-host" and "no L3 cache allocation" in reasons["plain"]["reason"]
    assert reasons["rdt"]["check"] == "resctrl"
    assert reasons["rdt"]["hint"].endswith("vnuma host reserve rdt --llc-ways N")


def test_slices_are_claimed_per_l3_domain_exclusively_and_released(rdt: Cli) -> None:
    shown = rdt.ok("host", "reserve", "rdt", "--llc-ways", "2", "--json").json()
    assert shown["resctrl_policy"] == {"llc_default_ways": 2, "mem_bw_limit": 100}
    first = _place(rdt, "a1", "--llc", "7MiB", "--mem-bw", "30")  # 7 MiB: 4 ways of 2 MiB
    assert first.exit_code == 0, first.stderr
    doc = first.json()
    assert doc["host"] == "rdt" and doc["llc"] == [{"cache": doc["cells"][0]["host_cell"], "ways": 4}]
    assert doc["mem_bw"] == [{"domain": doc["cells"][0]["host_cell"], "cap": 30}]
    # 11 ways - 2 for the host = 9 per cache: two 4-way slices per cache, then one way is left on each.
    for name in ("a2", "a3", "a4"):
        assert _place(rdt, name, "--llc-ways", "4").exit_code == 0
    held = _claims(rdt.db)
    per_cache: dict[int, int] = {}
    for _vm, domain, ways, _bw in held:
        per_cache[domain] = per_cache.get(domain, 0) + ways
    assert per_cache == {0: 8, 1: 8}
    refused = _place(rdt, "a5", "--llc-ways", "4")
    assert refused.exit_code == 5
    assert "llc: cache 0 has 1 free ways of 11, VM 'a5' asks 4" in refused.stderr
    # One way is left on each cache, below the 4 MiB (2-way) minimum: a one-way ask is raised to 2, refused.
    assert "has 1 free ways of 11, VM 'a5' asks 2" in _place(rdt, "a5", "--llc-ways", "1").stderr
    rdt.ok("vm", "release", "a1")
    assert _place(rdt, "a5", "--llc-ways", "4", "--mem-bw", "30").exit_code == 0  # a1's ways and cap are free again
    assert [c for c in _claims(rdt.db) if c[0] in ("a1", "a5")] == [("a5", doc["cells"][0]["host_cell"], 4, 30)]


def test_a_slice_below_the_minimum_is_raised_to_it(rdt: Cli) -> None:
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "2")
    doc = _place(rdt, "small", "--llc", "1MiB").json()
    assert doc["llc"][0]["ways"] == 2  # min 4 MiB of 2 MiB granules
    assert _claims(rdt.db) == [("small", doc["llc"][0]["cache"], 2, None)]


def test_bandwidth_caps_add_up_to_the_hosts_limit(rdt: Cli) -> None:
    rdt.ok("host", "reserve", "rdt", "--mem-bw-limit", "50")
    caps = [_place(rdt, f"b{i}", "--mem-bw", "20", "--host", "rdt") for i in range(5)]
    assert [c.exit_code for c in caps] == [0, 0, 0, 0, 5]
    assert "mem-bw: domain" in caps[-1].stderr and "of 50 left" in caps[-1].stderr
    domains = [c.json()["mem_bw"][0]["domain"] for c in caps[:4]]
    assert sorted(domains) == [0, 0, 1, 1]
    assert rdt("host", "reserve", "rdt", "--mem-bw-limit", "30").exit_code == 4  # the VMs hold 40 per domain
    rdt.ok("vm", "release", "b0")
    assert _place(rdt, "b5", "--mem-bw", "20", "--host", "rdt").exit_code == 0


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--llc", "4MiB", "--llc-ways", "2"], 4, "not both"),
        (["--mem-bw", "150"], 4, "from 1 to 100"),
        (["--mem-bw", "0"], 4, "from 1 to 100"),
        (["--llc-ways", "0"], 4, "1 or more"),
        (["--llc", "lots"], 4, "lots"),
        (["--mem-bw", "25", "--host", "rdt"], 5, "not a multiple of 10"),
        (["--llc-ways", "10", "--host", "rdt"], 5, "free ways of 11"),
    ],
)
def test_bad_slices_are_refused_and_change_nothing(rdt: Cli, args: list[str], code: int, words: str) -> None:
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "2")
    before = dump(rdt.db)
    res = _place(rdt, "bad", *args)
    assert res.exit_code == code and words in res.stderr, res.stderr
    assert dump(rdt.db) == before


def test_host_reserve_refuses_ways_the_cache_or_its_vms_do_not_leave(rdt: Cli) -> None:
    assert "can keep 1 to 11, not 12" in rdt("host", "reserve", "rdt", "--llc-ways", "12").stderr
    assert rdt("host", "reserve", "plain", "--llc-ways", "2").exit_code == 4
    assert rdt("host", "reserve", "rdt").exit_code == 4  # nothing to reserve
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "2")
    for name in ("w1", "w2"):
        rdt.ok("place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--llc-ways", "4", "--host", "rdt",
               "--name", name)
    before = dump(rdt.db)
    res = rdt("host", "reserve", "rdt", "--llc-ways", "4", "--cpus", "0")
    assert res.exit_code == 4 and "its VMs hold 8" in res.stderr
    assert dump(rdt.db) == before  # the CPUs were not reserved either: one transaction


def test_the_slice_is_rendered_as_cachetune_and_memorytune(rdt: Cli) -> None:
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "2")
    doc = _place(rdt, "r1", "--llc-ways", "3", "--mem-bw", "40", "--numa-nodes", "2").json()
    cells = sorted(c["host_cell"] for c in doc["cells"])
    shown = rdt.ok("vm", "show", "r1").stdout
    assert f"L3 slice: cache {cells[0]} 3 way(s), cache {cells[1]} 3 way(s)" in shown
    assert f"bandwidth cap: domain {cells[0]} 40, domain {cells[1]} 40" in shown
    xml = rdt.ok("render", "r1").stdout
    assert "<cachetune vcpus='0-1'>" in xml and "<memorytune vcpus='0-1'>" in xml
    for cache in cells:
        assert f"<cache id='{cache}' level='3' type='both' size='6144' unit='KiB'/>" in xml
        assert f"<node id='{cache}' bandwidth='40'/>" in xml


def test_host_show_says_what_the_operator_must_write(rdt: Cli) -> None:
    assert "no cache slice is placed here until `vnuma host reserve rdt --llc-ways N`" in rdt.ok("host", "show",
                                                                                                 "rdt").stdout
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "3", "--mem-bw-limit", "120")
    shown = rdt.ok("host", "show", "rdt").stdout
    assert "echo 'L3:0=7;1=7' > /sys/fs/resctrl/schemata" in shown
    assert "caps add up to at most 120 per domain" in shown
    assert "schemata" not in rdt.ok("host", "show", "plain").stdout  # no L3 allocation there


def test_a_tenants_slice_is_its_vms_default_and_theirs_replaces_it(rdt: Cli) -> None:
    rdt.ok("host", "reserve", "rdt", "--llc-ways", "2")
    made = rdt.ok("tenant", "create", "tenant-b", "--llc", "6MiB", "--mem-bw", "20", "--json").json()
    assert (made["llc_kib"], made["llc_ways"], made["mem_bw"]) == (6144, None, 20)
    plain = rdt.ok("place", "tenant-b", "--vcpus", "2", "--memory", "2GiB", "--name", "b1", "--json").json()
    assert [s["ways"] for s in plain["llc"]] == [3] and [s["cap"] for s in plain["mem_bw"]] == [20]
    own = rdt.ok("place", "tenant-b", "--vcpus", "2", "--memory", "2GiB", "--llc-ways", "2", "--name", "b2",
                 "--json").json()
    assert [s["ways"] for s in own["llc"]] == [2] and [s["cap"] for s in own["mem_bw"]] == [20]
    updated = rdt.ok("tenant", "update", "tenant-b", "--llc-ways", "none", "--mem-bw", "40", "--json").json()
    assert (updated["llc_kib"], updated["llc_ways"], updated["mem_bw"]) == (None, None, 40)
    assert updated["before"]["llc_kib"] == 6144
    later = rdt.ok("place", "tenant-b", "--vcpus", "2", "--memory", "2GiB", "--name", "b3", "--json").json()
    assert "llc" not in later and [s["cap"] for s in later["mem_bw"]] == [40]
    assert rdt.ok("vm", "show", "b1", "--json").json()["llc"] == plain["llc"]  # placed VMs keep theirs
    assert rdt("tenant", "update", "tenant-b", "--mem-bw", "120").exit_code == 4
    assert rdt("tenant", "create", "tenant-c", "--llc", "2MiB", "--llc-ways", "1").exit_code == 4
    assert "LLC ways" not in rdt.ok("tenant", "update", "tenant-b", "--max-vcpus", "8").stdout
