"""``vnuma vm guest-view``: the guest's nodes and devices, from the placement, in the guest's numbering."""

from __future__ import annotations

from tests.cli.conftest import Cli, refused_unchanged


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
