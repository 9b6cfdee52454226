"""``vnuma trace list`` / ``generate``, and a generated trace through ``vnuma simulate``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli

SCENARIOS = [
    "dual-socket-2cell", "epyc-nps4-8cell", "big-16cell", "fleet-1000", "fleet", "snc-cxl-gpu", "dgx-nics",
    "shared-nics", "gpu-partitions",
]


def test_list_names_every_scenario(cli: Cli) -> None:
    res = cli.ok("trace", "list")
    for name in SCENARIOS:
        assert name in res.stdout
    rows = cli.ok("trace", "list", "--json").json()
    assert [r["name"] for r in rows] == SCENARIOS
    assert all(set(r) == {"name", "hosts", "requests", "description"} and r["description"] for r in rows)


def test_generate_to_stdout_is_the_shipped_example(cli: Cli) -> None:
    res = cli.ok("trace", "generate", "--scenario", "dual-socket-2cell")
    assert res.stdout == (REPO / "examples" / "traces" / "dual-socket-2cell.json").read_text()
    assert res.stderr == ""


def test_generate_then_simulate(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    res = cli.ok("trace", "generate", "--scenario", "big-16cell", "--seed", "7", "--out", str(out))
    assert str(out) in res.stdout and "400 requests" in res.stdout
    report = cli.ok("simulate", str(out), "--json").json()
    assert report["scenario"] == "big-16cell" and report["requests"] == 400
    assert 0 < report["placed"] <= 400 and report["placed"] + report["rejected"] == 400
    assert out.read_bytes() != (REPO / "examples" / "traces" / "big-16cell.json").read_bytes()


def test_generate_fleet_of_n_hosts_is_byte_identical_on_rerun(cli: Cli, tmp_path: Path) -> None:
    made = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in made:
        res = cli.ok("trace", "generate", "--scenario", "fleet", "--hosts", "12", "--out", str(out))
        assert res.stdout == f"wrote {out}: fleet, seed 42, 12 hosts, 20000 requests\n"
    assert made[0].read_bytes() == made[1].read_bytes()
    doc = json.loads(made[0].read_text())
    assert [h["name"] for h in doc["hosts"]] == [f"host-{i:04d}" for i in range(12)]
    assert doc["description"].startswith("12 hosts of the dual-socket-2cell kind") and doc["summary"]["hosts"] == 12
    assert all({**h, "name": ""} == {**doc["hosts"][0], "name": ""} for h in doc["hosts"])
    report = cli.ok("simulate", str(made[0]), "--json").json()
    assert report["scenario"] == "fleet" and report["requests"] == 20000 and report["pcpus_total"] == 12 * 64
    listed = {r["name"]: r for r in cli.ok("trace", "list", "--json").json()}["fleet"]
    assert listed["hosts"] == 10000 and listed["description"].startswith("10000 hosts")
    # Other scenarios take --hosts too; the requests stay those of the seed.
    small = json.loads(cli.ok("trace", "generate", "--scenario", "dual-socket-2cell", "--hosts", "2").stdout)
    shipped = json.loads((REPO / "examples" / "traces" / "dual-socket-2cell.json").read_text())
    assert small["hosts"] == shipped["hosts"][:2] and small["requests"] == shipped["requests"]


def test_hosts_names_have_as_many_digits_as_the_count_needs() -> None:
    from vnuma.sources.tracegen import make_trace

    names = [h["name"] for h in make_trace("fleet", 1, 10001)["hosts"]]
    assert names[:2] == ["host-00000", "host-00001"] and names[-1] == "host-10000" and names == sorted(names)


def test_generate_no_hosts_is_exit_4(cli: Cli) -> None:
    res = cli("trace", "generate", "--scenario", "fleet", "--hosts", "0")
    assert res.exit_code == 4 and res.stderr == "error: --hosts 0: a trace needs at least 1 host\n"


def test_unknown_scenario_is_exit_4_with_the_scenarios_in_the_hint(cli: Cli) -> None:
    res = cli("trace", "generate", "--scenario", "quad-socket")
    assert res.exit_code == 4 and res.stdout == ""
    error, hint = res.stderr.splitlines()
    assert error == "error: unknown trace scenario 'quad-socket'"
    assert hint.startswith("hint: ") and all(name in hint for name in SCENARIOS)


@pytest.mark.parametrize("target", ["missing-dir/trace.json", "."], ids=["missing-directory", "a-directory"])
def test_unwritable_out_is_exit_4_on_one_line(cli: Cli, tmp_path: Path, target: str) -> None:
    out = tmp_path / target
    res = cli("trace", "generate", "--scenario", "dual-socket-2cell", "--out", str(out))
    assert res.exit_code == 4 and res.stdout == ""
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"error: {out}: cannot write trace: ")


def test_errors_as_a_real_process(cli: Cli) -> None:
    res = cli.process("trace", "generate", "--scenario", "nope")
    assert res.exit_code == 4 and "Traceback" not in res.stderr
    assert res.stderr.startswith("error: unknown trace scenario 'nope'\nhint: ")


def test_simulate_text_reports_nics_when_asked(cli: Cli) -> None:
    out = cli.ok("simulate", str(REPO / "examples" / "traces" / "dgx-nics.json")).stdout
    assert "NIC requests placed / asked" in out and "GPU-NIC levels" in out and "PIX " in out
    report = cli.ok("simulate", str(REPO / "examples" / "traces" / "dgx-nics.json"), "--json").json()
    assert report["nic_placed"] > 0 and sum(report["gpu_nic_levels"].values()) > 0
    plain = cli.ok("simulate", str(REPO / "examples" / "traces" / "dual-socket-2cell.json")).stdout
    assert "NIC" not in plain


def test_simulate_prints_cold_memory_as_every_table_prints_sizes(cli: Cli) -> None:
    from vnuma.topology import format_size_kib

    trace = str(REPO / "examples" / "traces" / "snc-cxl-gpu.json")
    report = cli.ok("simulate", trace, "--json").json()
    line = next(s for s in cli.ok("simulate", trace).stdout.splitlines() if s.startswith("cold tiers placed"))
    assert line.endswith(f", {format_size_kib(report['cold_memory_mib'] * 1024)}") and " MiB" not in line


def test_a_trace_over_the_cap_is_exit_15_on_one_line_and_the_cap_is_a_setting(cli: Cli) -> None:
    trace = REPO / "examples" / "traces" / "dual-socket-2cell.json"  # 53 KiB
    res = cli("simulate", str(trace), "--max-input-size", "32KiB")
    assert res.exit_code == 15 and res.stdout == ""
    error, hint = res.stderr.splitlines()
    assert error == f"error: {trace}: trace file is 53 KiB, larger than the 32 KiB cap"
    assert hint == "hint: raise it with --max-input-size SIZE"
    assert cli.ok("simulate", str(trace), "--max-input-size", "64KiB", "--json").json()["requests"] == 240
    res = cli.process("simulate", str(trace), "--max-input-size", "32KiB")
    assert res.exit_code == 15 and "Traceback" not in res.stderr


def test_the_default_cap_takes_a_trace_over_64_mib(cli: Cli, tmp_path: Path) -> None:
    """A 100,000-host trace is over 100 MiB: the default cap is far above the 64 MiB of the other inputs."""
    from vnuma.services.files import MAX_INPUT_BYTES, MAX_TRACE_SIZE
    from vnuma.topology import parse_size_kib

    assert parse_size_kib(MAX_TRACE_SIZE) * 1024 >= 4 * MAX_INPUT_BYTES
    trace = (REPO / "examples" / "traces" / "dual-socket-2cell.json").read_text()
    big = tmp_path / "padded.json"
    with big.open("w") as f:
        f.write(trace.rstrip().removesuffix("}"))
        f.write(f', "padding": "{"x" * (MAX_INPUT_BYTES + 1024)}"}}\n')
    assert big.stat().st_size > MAX_INPUT_BYTES
    assert cli.ok("simulate", str(big), "--json").json()["requests"] == 240
