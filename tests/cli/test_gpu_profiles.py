"""`vnuma gpu-profile`: MIG geometries imported from the shipped files, profile files and saved nvidia-smi
text; kept, listed, replaced and removed; bad input refused with the inventory unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged

SMI = Path(__file__).resolve().parents[1] / "data" / "nvidia-smi"
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def test_a_shipped_profile_is_kept_by_name_and_shown(cli: Cli) -> None:
    shipped = cli.ok("gpu-profile", "list", "--shipped", "--json").json()
    assert [s["name"] for s in shipped] == ["a100-sxm4-40gb", "h100-sxm5-80gb"]
    assert cli.ok("gpu-profile", "list", "--json").json() == []
    made = cli.ok("gpu-profile", "import", "h100-sxm5-80gb", "--json").json()
    assert made["replaced"] is False and made["model"] == H100
    kept = cli.ok("gpu-profile", "list", "--json").json()
    h100 = next(s for s in shipped if s["name"] == "h100-sxm5-80gb")
    assert kept == [{k: v for k, v in h100.items() if k != "name"}]
    assert cli.ok("gpu-profile", "show", H100, "--json").json() == kept[0]
    table = cli.ok("gpu-profile", "show", H100).stdout
    assert "3g.40gb" in table and "0,4" in table and "source:" in table
    entries = cli.ok("log", "--json").json()
    assert [c["op"] for e in entries for c in e["changes"]][-1] == "gpu-profile-import"


def test_nvidia_smi_text_gives_the_shipped_geometry(cli: Cli) -> None:
    cli.ok("gpu-profile", "import", str(SMI / "a100-sxm4-40gb-lgip.txt"), "--lgipp",
           str(SMI / "a100-sxm4-40gb-lgipp.txt"), "--model", A100, "--pci-id", "0x10de:0x20b0")
    read = cli.ok("gpu-profile", "show", A100, "--json").json()
    shipped = next(s for s in cli.ok("gpu-profile", "list", "--shipped", "--json").json() if s["model"] == A100)
    assert {k: v for k, v in read.items() if k != "source"} == {
        k: v for k, v in shipped.items() if k not in ("source", "name")
    }
    assert "lgip" in read["source"]


def test_a_profile_file_in_json_and_replace(cli: Cli, tmp_path: Path) -> None:
    cli.ok("gpu-profile", "import", "a100-sxm4-40gb")
    doc = cli.ok("gpu-profile", "show", A100, "--json").json()
    doc["profiles"] = [p for p in doc["profiles"] if p["name"] != "1g.5gb+me"]
    path = tmp_path / "a100.json"
    path.write_text(json.dumps(doc))
    refused_unchanged(cli, ["gpu-profile", "import", str(path)], 9, "already has a MIG profile")
    assert cli.ok("gpu-profile", "import", str(path), "--replace", "--json").json()["replaced"] is True
    names = [p["name"] for p in cli.ok("gpu-profile", "show", A100, "--json").json()["profiles"]]
    assert "1g.5gb+me" not in names and "7g.40gb" in names
    cli.ok("gpu-profile", "remove", A100)
    assert cli.ok("gpu-profile", "list", "--json").json() == []
    refused_unchanged(cli, ["gpu-profile", "remove", A100], 3, "no MIG profile")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d["profiles"][4].update(starts=[0, 6]), "goes past the GPU's 8"),
        (lambda d: d["profiles"][4].update(starts=[0, 2]), "not a multiple"),
        (lambda d: d.update(colour="green"), "unknown key 'colour'"),
        (lambda d: d["profiles"].append(dict(d["profiles"][0])), "two profiles have the name"),
        (lambda d: d.update(profiles=[]), "profile list is empty"),
    ],
)
def test_a_bad_profile_file_changes_nothing(cli: Cli, tmp_path: Path, change: object, words: str) -> None:
    cli.ok("gpu-profile", "import", "h100-sxm5-80gb")
    doc = cli.ok("gpu-profile", "show", H100, "--json").json()
    doc["model"] = "Other GPU"
    doc["pci_ids"] = ["0x10de:0x9999"]
    change(doc)  # type: ignore[operator]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    refused_unchanged(cli, ["gpu-profile", "import", str(path)], 4, words)


def test_bad_sources_are_refused(cli: Cli, tmp_path: Path) -> None:
    cli.ok("gpu-profile", "import", "h100-sxm5-80gb")
    refused_unchanged(cli, ["gpu-profile", "import", "h200"], 4, "neither a .toml/.json profile file")
    refused_unchanged(cli, ["gpu-profile", "import", str(tmp_path / "none.toml")], 4, "no such MIG profile file")
    broken = tmp_path / "broken.toml"
    broken.write_text("model = [")
    refused_unchanged(cli, ["gpu-profile", "import", str(broken)], 4, "not valid TOML")
    lgip, lgipp = str(SMI / "h100-sxm5-80gb-lgip.txt"), str(SMI / "h100-sxm5-80gb-lgipp.txt")
    refused_unchanged(cli, ["gpu-profile", "import", lgip, "--lgipp", lgipp], 4, "--model")
    refused_unchanged(cli, ["gpu-profile", "import", lgipp, "--lgipp", lgipp, "--model", "X"], 4, "-lgip text")
    refused_unchanged(cli, ["gpu-profile", "import", "a100-sxm4-40gb", "--model", "X"], 4, "go with nvidia-smi")
    # another model may not take a PCI id a kept model lists
    refused_unchanged(cli, ["gpu-profile", "import", lgip, "--lgipp", lgipp, "--model", "H100 copy", "--pci-id",
                            "0x10de:0x2330"], 9, "already belongs to GPU model")
    refused_unchanged(cli, ["gpu-profile", "show", "nothing"], 3, "no MIG profile")


DATA = Path(__file__).resolve().parents[1] / "data"


def test_host_show_lists_the_mig_profiles_of_gpus_whose_model_is_kept(cli: Cli, tmp_path: Path) -> None:
    """The SR-IOV fixture's GPU is an H100 PCIe (10de:2331): a copy of the H100 geometry listing that id gives
    it MIG profiles; the VF is never listed; the stored topology never holds the geometry."""
    cli.ok("host", "import", "v", "--capabilities", str(DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"),
           "--nodedev", str(DATA / "nodedev" / "gpu-sriov-vfs.xml"))
    before = cli.ok("host", "show", "v", "--json").json()
    assert before["gpu_profiles"] == [] and all(
        "profile" not in p for d in before["devices"] for p in d["partitions"]
    )
    cli.ok("gpu-profile", "import", "h100-sxm5-80gb")  # 10de:2330: not this GPU
    assert cli.ok("host", "show", "v", "--json").json() == before
    doc = cli.ok("gpu-profile", "show", H100, "--json").json()
    doc.update(model="NVIDIA H100 PCIe", pci_ids=["0x10de:0x2331"])
    path = tmp_path / "h100-pcie.json"
    path.write_text(json.dumps(doc))
    cli.ok("gpu-profile", "import", str(path))
    shown = cli.ok("host", "show", "v", "--json").json()
    assert [g["model"] for g in shown["gpu_profiles"]] == ["NVIDIA H100 PCIe"]
    by_address = {d["address"]: d for d in shown["devices"]}
    mig = [p for p in by_address["0000:3b:00.0"]["partitions"] if "profile" in p]
    assert [(p["profile"], p["free"], p["total"]) for p in mig] == [
        ("1g.10gb", 7, 7), ("1g.10gb+me", 1, 1), ("1g.20gb", 4, 4), ("2g.20gb", 3, 3), ("3g.40gb", 2, 2),
        ("4g.40gb", 1, 1), ("7g.80gb", 1, 1),
    ]
    assert all(not [p for p in d["partitions"] if "profile" in p] for a, d in by_address.items() if a != "0000:3b:00.0")
    table = cli.ok("host", "show", "v").stdout
    assert "GPU MIG profiles" in table and "NVIDIA H100 PCIe" in table and "3g.40gb" in table
    cli.ok("gpu-profile", "remove", "NVIDIA H100 PCIe")
    assert cli.ok("host", "show", "v", "--json").json() == before


def _place_page_example(option: str) -> list[str]:
    """The place page's first `vnuma place ... OPTION ...` example line, as an argument list (comment cut)."""
    import shlex

    from tests.cli.conftest import REPO

    lines = (REPO / "docs" / "place.md").read_text().splitlines()
    found = [shlex.split(line.split("#", 1)[0])[1:] for line in lines
             if line.startswith("vnuma place ") and f" {option} " in line]
    assert found, f"docs/place.md shows no `vnuma place ... {option}` example"
    return found[0]


def test_the_manuals_mig_example_works_on_the_demo_host_once_its_geometry_is_kept(cli: Cli) -> None:
    """`host add lab --demo`, then the place page's `gpu-profile import demo` and `place ... --mig 3g.40gb`: every GPU
    of the demo host takes the demo geometry, and the example places a MIG instance."""
    cli.ok("host", "add", "lab", "--demo")
    cli.ok("tenant", "create", "tenant-a")
    example = _place_page_example("--mig")
    refused = cli(*example)
    assert refused.exit_code == 4 and "gpu-profile import" in refused.stderr  # no geometry kept yet: no GPU offers it
    kept = cli.ok("gpu-profile", "import", "demo", "--json").json()
    assert kept["pci_ids"] == ["0x10de:0x2331"] and "not a measured H100 PCIe table" in kept["source"]
    gpus = [d for d in cli.ok("host", "show", "lab", "--json").json()["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == 8 and all(any(p.get("profile") == "3g.40gb" for p in d["partitions"]) for d in gpus)
    placed = cli.ok(*example, "--json").json()
    assert [(d["kind"], d["profile"]) for d in placed["devices"]] == [("mig", "3g.40gb")]
    shipped = [s["name"] for s in cli.ok("gpu-profile", "list", "--shipped", "--json").json()]
    assert "demo" not in shipped  # the shipped ones describe real GPUs


def test_the_manuals_vgpu_example_works_where_gpus_offer_the_type(cli: Cli) -> None:
    """The place page's `--vgpu nvidia-1049:2` on a host whose H100's VFs offer that type (the demo's GPUs offer
    none, as the page says)."""
    from vnuma.sources.demo import demo_capabilities_path

    data = Path(__file__).resolve().parents[1] / "data"
    cli.ok("host", "import", "v", "--capabilities", str(demo_capabilities_path()),
           "--nodedev", str(data / "nodedev" / "gpu-sriov-vfs.xml"))
    cli.ok("tenant", "create", "tenant-a")
    example = _place_page_example("--vgpu")
    placed = cli.ok(*example, "--json").json()
    assert [(d["kind"], d["type"]) for d in placed["devices"]] == [("vgpu", "nvidia-1049")] * 2
