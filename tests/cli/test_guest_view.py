"""``vnuma vm guest-view``: the guest's nodes and devices, from the placement, in the guest's numbering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from tests.render.nccl_reader import Node, read_topology


def _placed(cli: Cli) -> dict:
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "x")
    args = ("place", "x", "--vcpus", "8", "--memory", "16GiB", "--gpus", "2", "--numa-nodes", "2", "--name", "v")
    return dict(cli.ok(*args, "--json").json())


def test_guest_view_json_follows_the_placement(cli: Cli) -> None:
    placed = _placed(cli)
    view = cli.ok("vm", "guest-view", "v", "--json").json()
    assert (view["vm"], view["tenant"], view["host"]) == ("v", "x", "a")
    assert [n["id"] for n in view["nodes"]] == [c["guest_cell"] for c in placed["cells"]]
    for node, cell in zip(view["nodes"], placed["cells"], strict=True):
        assert len(node["vcpus"]) == len(cell["pcpus"])
        assert node["memory_kib"] == cell["memory_kib"] and node["page_size_kib"] == cell["page_size_kib"]
        assert node["distances"][str(node["id"])] == 10
    assert sorted((d["address"], d["node"]) for d in view["devices"]) == sorted(
        (d["address"], d["guest_cell"]) for d in placed["devices"]
    )
    assert sorted(d["cuda_index"] for d in view["devices"]) == [0, 1]
    assert {g for n in view["nodes"] for g in n["devices"]} == {d["guest_address"] for d in view["devices"]}


def test_guest_view_text_names_nodes_devices_and_launch_lines(cli: Cli) -> None:
    _placed(cli)
    view = cli.ok("vm", "guest-view", "v", "--json").json()
    text = cli.ok("vm", "guest-view", "v").stdout
    assert text.splitlines()[0] == "VM v (tenant x) on host a: what the guest sees"
    for dev in view["devices"]:
        assert f"{dev['launch']} COMMAND" in text and dev["guest_address"] in text


def test_guest_view_of_an_unknown_vm_is_exit_3_and_changes_nothing(cli: Cli) -> None:
    _placed(cli)
    refused_unchanged(cli, ["vm", "guest-view", "nope"], 3, "'nope'")


def test_nccl_topo_names_the_guests_gpus_at_their_guest_addresses(cli: Cli, tmp_path: Path) -> None:
    _placed(cli)
    view = cli.ok("vm", "guest-view", "v", "--json").json()
    text = cli.ok("vm", "guest-view", "v", "--nccl-topo").stdout
    system = read_topology(text)
    gpus = {g.parent.attrs["busid"]: int(g.attrs["dev"]) for g in system.iter("gpu") if g.parent is not None}
    assert gpus == {d["guest_address"]: d["cuda_index"] for d in view["devices"] if d["cuda_index"] is not None}
    numaids = {g.parent.attrs["busid"]: _cpu_of(g) for g in system.iter("gpu") if g.parent is not None}
    assert numaids == {d["guest_address"]: str(d["node"]) for d in view["devices"] if d["cuda_index"] is not None}
    out = tmp_path / "topo.xml"
    res = cli.ok("vm", "guest-view", "v", "--nccl-topo", "--out", str(out))
    assert res.stdout == "" and out.read_text() == text and str(out) in res.stderr


def _cpu_of(node: Node) -> str:
    while node.name != "cpu":
        assert node.parent is not None
        node = node.parent
    return node.attrs["numaid"]


def test_nccl_topo_of_a_vm_without_gpus_is_exit_4_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "x")
    cli.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--name", "cpu-only")
    out = tmp_path / "topo.xml"
    refused_unchanged(cli, ["vm", "guest-view", "cpu-only", "--nccl-topo", "--out", str(out)], 4, "has no GPU")
    assert not out.exists()
    assert cli("vm", "guest-view", "cpu-only", "--out", str(out)).exit_code == 2


@pytest.mark.parametrize("shown", [("--nccl-topo",), ("--json",), ("--launch", "vllm", "--json"), ("--cloud-init",)])
def test_guest_view_loads_neither_the_orm_nor_the_engine_nor_jinja(cli: Cli, shown: tuple[str, ...]) -> None:
    """What keeps the command quick as a whole process: it reads through sqlite3 (vnuma.inventory.reading)."""
    _placed(cli)
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['vnuma', '--db', {str(cli.db)!r}, 'vm', 'guest-view', 'v', *{shown!r}]\n"
        "try:\n    runpy.run_module('vnuma.cli', run_name='__main__')\n"
        "except SystemExit as exit:\n    assert not exit.code, exit.code\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic', 'numpy', 'jinja2'))\n"
        "print(heavy, file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    start = {"--nccl-topo": '<system version="1">', "--cloud-init": "#cloud-config\n"}.get(shown[0], "{")
    assert proc.stderr.strip() == "[]" and proc.stdout.startswith(start)


@pytest.mark.parametrize("framework", ["vllm", "sglang", "llama.cpp", "torchrun"])
def test_launch_prints_the_lines_of_the_placed_vm(cli: Cli, framework: str) -> None:
    _placed(cli)
    view = cli.ok("vm", "guest-view", "v", "--json").json()
    doc = cli.ok("vm", "guest-view", "v", "--launch", framework, "--json").json()
    assert doc["framework"] == framework
    gpus = {d["node"]: [d["cuda_index"]] for d in view["devices"] if d["cuda_index"] is not None}
    assert {n["node"]: n["gpus"] for n in doc["nodes"]} == gpus  # one process per node, its own GPU
    for n in doc["nodes"]:
        assert set(n) >= {"node", "cpus", "gpus", "nics", "env", "command"} and isinstance(n["command"], str)
        assert n["env"]["CUDA_VISIBLE_DEVICES"] == str(n["gpus"][0])
        assert n["cpus"] == next(v["vcpus"] for v in view["nodes"] if v["id"] == n["node"])
    text = cli.ok("vm", "guest-view", "v", "--launch", framework).stdout
    assert text.splitlines()[0] == f"VM v: {framework}, one process per guest NUMA node"
    assert [line.strip() for line in text.splitlines() if line.startswith("  ")] == [n["line"] for n in doc["nodes"]]


def test_an_unknown_framework_is_exit_2_and_writes_nothing(cli: Cli, tmp_path: Path) -> None:
    _placed(cli)
    refused_unchanged(cli, ["vm", "guest-view", "v", "--launch", "tgi"], 2, "unknown framework 'tgi'")
    out = tmp_path / "user-data"
    refused_unchanged(cli, ["vm", "guest-view", "v", "--cloud-init", "--launch", "tgi", "--out", str(out)], 2,
                      "unknown framework 'tgi'")
    assert not out.exists()


def test_cloud_init_writes_the_topology_and_the_environment(cli: Cli, tmp_path: Path) -> None:
    import yaml

    _placed(cli)
    topo = cli.ok("vm", "guest-view", "v", "--nccl-topo").stdout
    out = tmp_path / "user-data"
    res = cli.ok("vm", "guest-view", "v", "--cloud-init", "--out", str(out))
    assert res.stdout == "" and str(out) in res.stderr
    doc = yaml.safe_load(out.read_text())
    files = {f["path"]: f["content"] for f in doc["write_files"]}
    assert files["/etc/vnuma/nccl-topo.xml"] == topo
    assert "export NCCL_TOPO_FILE=/etc/vnuma/nccl-topo.xml" in files["/etc/profile.d/vnuma.sh"]
    assert cli("vm", "guest-view", "v", "--cloud-init", "--json").exit_code == 2
    assert cli("vm", "guest-view", "v", "--launch", "vllm", "--out", str(out)).exit_code == 2


def test_a_vm_without_gpus_launches_on_its_cpus_and_its_cloud_init_writes_only_the_environment(cli: Cli) -> None:
    import yaml

    cli.ok("host", "add", "a", "--demo")
    cli.ok("tenant", "create", "x")
    cli.ok("place", "x", "--vcpus", "2", "--memory", "2GiB", "--name", "cpu-only")
    doc = cli.ok("vm", "guest-view", "cpu-only", "--launch", "vllm", "--json").json()
    assert [(n["gpus"], n["env"]) for n in doc["nodes"]] == [([], {"VLLM_CPU_OMP_THREADS_BIND": "0-1"})]
    user_data = yaml.safe_load(cli.ok("vm", "guest-view", "cpu-only", "--cloud-init").stdout)
    assert [f["path"] for f in user_data["write_files"]] == ["/etc/profile.d/vnuma.sh"]
