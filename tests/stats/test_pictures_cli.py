"""`host show --svg/--png` and `stats --svg/--png` from the command line: files written whole, or an error
line, exit 4 and nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged
from tests.stats.test_pictures import valid_svg


@pytest.fixture
def placed(cli: Cli) -> Cli:
    cli.ok("host", "add", "gpu-node-1", "--demo")
    cli.ok("tenant", "create", "tenant-a")
    cli.ok("place", "tenant-a", "--gpus", "2", "--name", "tenant-a-llm")
    return cli


def test_host_show_writes_svg_and_png_and_still_prints_the_tables(placed: Cli, tmp_path: Path) -> None:
    svg, png = tmp_path / "host.svg", tmp_path / "host.png"
    res = placed.ok("host", "show", "gpu-node-1", "--svg", str(svg), "--png", str(png))
    assert "cells" in res.stdout and f"picture written to {svg}" in res.stderr
    doc = valid_svg(svg.read_text())
    assert "tenant-a-llm" in "".join(doc.itertext())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    js = placed.ok("host", "show", "gpu-node-1", "--json", "--svg", str(svg))
    assert js.json()["name"] == "gpu-node-1"


def test_stats_svg_draws_every_host(placed: Cli, tmp_path: Path) -> None:
    placed.ok("host", "add", "gpu-node-2", "--demo")
    out = tmp_path / "fleet.svg"
    res = placed.ok("stats", "--svg", str(out))
    assert "host gpu-node-1" in res.stdout
    text = "".join(valid_svg(out.read_text()).itertext())
    assert "gpu-node-1" in text and "gpu-node-2" in text


@pytest.mark.parametrize("where", ["missing-dir/x.svg", "a-dir", "readonly/x.svg"])
def test_an_unwritable_picture_path_is_refused_and_nothing_is_written(placed: Cli, tmp_path: Path,
                                                                      where: str) -> None:
    (tmp_path / "a-dir").mkdir()
    (tmp_path / "readonly").mkdir(mode=0o555)
    if where.startswith("readonly") and os.geteuid() == 0:
        where = "/proc/x.svg"  # root writes anywhere in a 0555 directory; /proc refuses new files
    target = tmp_path / where if not where.startswith("/") else Path(where)
    png = tmp_path / "ok.png"
    for args in (["host", "show", "gpu-node-1"], ["stats"]):
        refused_unchanged(placed, [*args, "--png", str(png), "--svg", str(target)], 4, "cannot write the picture"
                          if where != "a-dir" else "is a directory")
        res = placed(*args, "--svg", str(target))
        assert res.stdout == "" and len(res.stderr.strip().splitlines()) == 2  # error + hint
    assert not png.exists(), "the PNG is not written when the SVG cannot be"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_pictures_of_unknown_names_are_refused(placed: Cli, tmp_path: Path) -> None:
    out = tmp_path / "x.svg"
    refused_unchanged(placed, ["host", "show", "nope", "--svg", str(out)], 3, "host 'nope'")
    refused_unchanged(placed, ["stats", "--host", "nope", "--svg", str(out)], 3, "host 'nope'")
    refused_unchanged(placed, ["stats", "no-vm", "--svg", str(out)], 3, "VM 'no-vm'")
    assert not out.exists()
