"""`vm guest-view --nccl-topo | --launch | --cloud-init` through `--server`: what they print locally, byte for byte.

The `pair` of tests/api/test_client.py: two inventories made alike (two demo hosts, a VM without GPUs per tenant),
one served; here each also gets a VM with two GPUs.
"""

from __future__ import annotations

from pathlib import Path

from tests.api.conftest import Service
from tests.api.test_client import pair  # noqa: F401 (the fixture)
from tests.cli.conftest import Cli

GUEST_COMMANDS = [
    (["vm", "guest-view", "g2", "--nccl-topo"], 0),
    (["vm", "guest-view", "g2", "--launch", "vllm"], 0),
    (["vm", "guest-view", "g2", "--launch", "torchrun", "--json"], 0),
    (["vm", "guest-view", "g2", "--cloud-init"], 0),
    (["vm", "guest-view", "g2", "--cloud-init", "--launch", "sglang"], 0),
    (["vm", "guest-view", "tenant-a-vm0", "--nccl-topo"], 4),  # no GPU
    (["vm", "guest-view", "tenant-a-vm0", "--launch", "llama.cpp", "--json"], 0),
    (["vm", "guest-view", "g2", "--launch", "tgi"], 2),  # no such framework
    (["vm", "guest-view", "nosuch", "--nccl-topo"], 3),
    (["vm", "guest-view", "nosuch", "--cloud-init"], 3),
]


def test_the_guest_files_through_the_service_are_what_they_are_locally(
    pair: tuple[Cli, Cli, Service], tmp_path: Path,  # noqa: F811
) -> None:
    local, client, service = pair
    for cli in (local, service.cli):
        cli.ok("place", "tenant-a", "--vcpus", "8", "--memory", "16GiB", "--gpus", "2", "--name", "g2")
    for args, code in GUEST_COMMANDS:
        here, there = local(*args), client(*args)
        assert (there.exit_code, there.stdout, there.stderr) == (here.exit_code, here.stdout, here.stderr), args
        assert here.exit_code == code, (args, here.stderr)
    # --out writes where the CLI runs.
    for cli, name in ((local, "here.xml"), (client, "there.xml")):
        cli.ok("vm", "guest-view", "g2", "--nccl-topo", "--out", str(tmp_path / name))
    assert (tmp_path / "here.xml").read_text() == (tmp_path / "there.xml").read_text()
    assert (tmp_path / "here.xml").read_text().startswith("<system version=\"1\">")
