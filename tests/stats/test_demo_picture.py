"""The README shows docs/demo-host.svg, which scripts/demo draws: it must be what the demo draws today."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import REPO, Cli


def test_the_readme_picture_is_the_demo_hosts_picture_as_drawn_now(cli: Cli, tmp_path: Path) -> None:
    demo = (REPO / "scripts" / "demo").read_text()
    for step in ("host add gpu-node-1 --demo", "tenant create tenant-a", "place tenant-a --gpus 2 --name tenant-a-llm",
                 "host show gpu-node-1 --svg docs/demo-host.svg"):
        assert step in demo, f"scripts/demo no longer runs `vnuma {step}`: update this test"
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "tenant-a")
    cli.ok("place", "tenant-a", "--gpus", "2", "--name", "tenant-a-llm")
    drawn = tmp_path / "demo-host.svg"
    cli.ok("host", "show", "gpu-node-1", "--svg", str(drawn))
    assert drawn.read_text() == (REPO / "docs" / "demo-host.svg").read_text(), "run `bash scripts/demo` and commit"
    assert "](docs/demo-host.svg)" in (REPO / "README.md").read_text(), "the README shows the picture"
