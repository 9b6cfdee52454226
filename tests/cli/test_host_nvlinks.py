"""``host import|refresh --nvidia-smi-topo FILE``: the NVLinks between a host's GPUs, kept with the host, shown
by ``host show`` as nvidia-smi prints its matrix, refused when the text is another host's."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Cli, refused_unchanged

DATA = Path(__file__).resolve().parent.parent / "data"
DGX = ("--capabilities", str(DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"),
       "--nodedev", str(DATA / "nodedev" / "dgx-like.xml"))
TOPO = DATA / "nvidia-smi"


def test_import_records_the_nvlinks_and_show_prints_the_matrix(cli: Cli) -> None:
    cli.ok("host", "import", "dgx", *DGX, "--nvidia-smi-topo", str(TOPO / "dgx-like-topo-m.txt"))
    doc = cli.ok("host", "show", "dgx", "--json").json()
    assert len(doc["nvlinks"]) == 56 and {n["count"] for n in doc["nvlinks"]} == {12}
    matrix = doc["gpu_matrix"]
    assert matrix["gpus"][:2] == ["0000:13:00.0", "0000:14:00.0"] and matrix["rows"][0][:3] == ["X", "NV12", "NV12"]
    text = cli.ok("host", "show", "dgx").stdout
    assert "GPU x GPU, as nvidia-smi topo -m" in text
    row = next(line.split() for line in text.splitlines() if line.startswith("GPU15 "))
    assert row[:3] == ["GPU15", "0000:c5:00.0", "SYS"] and row[-4:] == ["NV12", "X", "4-7,12-15", "1"]


def test_another_hosts_text_is_refused_and_nothing_recorded(cli: Cli) -> None:
    cli.ok("host", "import", "other", *DGX)
    refused_unchanged(cli, ["host", "import", "dgx", *DGX, "--nvidia-smi-topo", str(TOPO / "h20-8gpu-topo-m.txt")],
                      4, "it shows 8 GPUs, the host has 16 (0000:13:00.0")


def _demo_topo(cli: Cli, tmp_path: Path) -> Path:
    """`nvidia-smi topo -m` text of the demo host (its PCIe levels), GPU0 and GPU1 NVLinked 4 times."""
    cli.ok("host", "add", "a", "--demo")
    matrix = cli.ok("host", "show", "a", "--json").json()["gpu_matrix"]
    rows = [list(r) for r in matrix["rows"]]
    assert len(rows) > 1
    rows[0][1] = rows[1][0] = "NV4"
    labels = [f"GPU{i}" for i in range(len(rows))]
    lines = [f"{label}\t" + "\t".join(" X " if c == "X" else c for c in row)
             for label, row in zip(labels, rows, strict=True)]
    saved = tmp_path / "topo.txt"
    saved.write_text("\t" + "\t".join(labels) + "\n" + "\n".join(lines) + "\n")
    return saved


def test_add_records_the_links_with_the_discovered_host(cli: Cli, tmp_path: Path) -> None:
    saved = _demo_topo(cli, tmp_path)
    cli.ok("host", "add", "b", "--demo", "--nvidia-smi-topo", str(saved))
    assert cli.ok("host", "show", "b", "--json").json()["gpu_matrix"]["rows"][0][1] == "NV4"
    assert cli("host", "add", "--from-file", str(saved), "--nvidia-smi-topo", str(saved)).exit_code == 2


def test_refresh_records_new_links_and_keeps_them_after(cli: Cli, tmp_path: Path) -> None:
    saved = _demo_topo(cli, tmp_path)
    done = cli.ok("host", "refresh", "a", "--nvidia-smi-topo", str(saved), "--json").json()
    assert done["changes"] == ["NVLinks: 0 -> 1 linked GPU pairs"]
    assert cli.ok("host", "refresh", "a", "--json").json()["changes"] == []
    assert cli.ok("host", "show", "a", "--json").json()["gpu_matrix"]["rows"][0][1] == "NV4"
    assert cli("host", "refresh", "--all", "--nvidia-smi-topo", str(saved)).exit_code == 2
