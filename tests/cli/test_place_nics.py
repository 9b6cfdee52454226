"""``vnuma place --nics N|per-gpu --nic-affinity LEVEL``: NICs claimed beside the GPUs, rendered and shown, and
refused (with the level reached) where none is near enough."""

from __future__ import annotations

import json
import sqlite3

import pytest
from lxml import etree

from tests.cli.conftest import DGX_CAPS, DGX_NODEDEV, Cli, refused_unchanged

SMALL = ("--vcpus", "2", "--memory", "2GiB", "--page-size", "4K")


def test_per_gpu_claims_a_nic_beside_each_gpu_and_renders_them(dgx: Cli) -> None:
    doc = dgx.ok("place", "t", "--gpus", "2", "--nics", "per-gpu", *SMALL, "--name", "a", "--json").json()
    kinds = sorted(d["kind"] for d in doc["devices"])
    # GPU 0000:13:00.0 takes its audio function along: they share IOMMU group 104.
    assert kinds == ["gpu", "gpu", "nic", "nic", "other"]
    followers = [(d["address"], d["peer_of"]) for d in doc["devices"] if "peer_of" in d]
    assert followers == [("0000:13:00.1", "0000:13:00.0")]
    xml = etree.fromstring(dgx.ok("render", "a").stdout.encode())
    sources = {
        "{:04x}:{:02x}:{:02x}.{:x}".format(*(int(a.get(k), 16) for k in ("domain", "bus", "slot", "function")))
        for a in xml.iterfind("devices/hostdev/source/address")
    }
    assert sources == {d["address"] for d in doc["devices"]}
    view = dgx.ok("vm", "guest-view", "a", "--json").json()
    assert sorted((d["kind"], d["cuda_index"] is None) for d in view["devices"]) == [
        ("gpu", False),
        ("gpu", False),
        ("nic", True),
        ("nic", True),
        ("other", True),
    ]
    # The next VM cannot take those NICs: the database holds each device once.
    other = dgx.ok("place", "t", "--gpus", "2", "--nics", "per-gpu", *SMALL, "--json").json()
    assert not {d["address"] for d in other["devices"]} & {d["address"] for d in doc["devices"]}


def test_no_nic_near_enough_is_exit_5_naming_the_level(cli: Cli) -> None:
    cli.ok("host", "add", "demo", "--demo")  # each GPU's NIC is on another root complex of its cell: NODE
    cli.ok("tenant", "create", "t")
    res = cli("place", "t", "--gpus", "1", "--nics", "per-gpu", *SMALL, "--explain")
    assert res.exit_code == 5
    assert "nic-affinity" in res.stdout and "within PXB; nearest free NIC" in res.stdout and "is NODE" in res.stdout
    assert cli.ok("place", "t", "--gpus", "1", "--nics", "per-gpu", "--nic-affinity", "node", *SMALL, "--json")


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--nics", "1"], 4, "--nics needs --gpus"),
        (["--gpus", "1", "--nics", "two"], 2, "'two' is not a count or per-gpu"),
        (["--gpus", "1", "--nics", "1", "--nic-affinity", "near"], 2, "'near' is not one of pix, pxb, phb, node, sys"),
        (["--gpus", "1", "--nics", "65"], 4, "NIC count must be 0 to 64"),
    ],
    ids=["no-gpus", "bad-count", "bad-level", "too-many"],
)
def test_bad_nic_requests_change_nothing(dgx: Cli, args: list[str], code: int, words: str) -> None:
    refused_unchanged(dgx, ["place", "t", *SMALL, *args], code, words)


def test_a_vm_with_nics_moves_with_its_nics_asked_again(dgx: Cli) -> None:
    dgx.ok("place", "t", "--gpus", "1", "--nics", "per-gpu", "--nic-affinity", "pix", *SMALL, "--name", "a")
    dgx.ok("host", "import", "dgx-2", "--capabilities", str(DGX_CAPS), "--nodedev", str(DGX_NODEDEV))
    assert "nothing to do" in dgx.ok("vm", "repin", "a", "--dry-run").stdout
    dgx.ok("vm", "migrate", "a", "--to", "dgx-2")
    moved = dgx.ok("vm", "show", "a", "--json").json()
    assert moved["host"] == "dgx-2" and moved["nic_affinity"] == "pix" and moved["nics_per_gpu"] is True
    (pair,) = dgx.ok("stats", "--json").json()["vms"][0]["nic_pairs"]
    assert (pair["level"], pair["worse_than_asked"]) == ("PIX", False)  # the NIC was asked for again there
    # A placement from before vnuma recorded how its NICs were asked stays where it is.
    with sqlite3.connect(dgx.db) as conn:
        (doc,) = conn.execute("SELECT placement FROM vms WHERE name = 'a'").fetchone()
        old = {k: v for k, v in json.loads(doc).items() if k not in ("nic_affinity", "nics_per_gpu", "nic_function")}
        conn.execute("UPDATE vms SET placement = ? WHERE name = 'a'", (json.dumps(old),))
    refused_unchanged(dgx, ["vm", "migrate", "a", "--to", "dgx"], 9, "NICs placed before vnuma recorded")


def test_virtual_functions_render_as_hostdev_interfaces_with_stable_macs(dgx: Cli) -> None:
    doc = dgx.ok("place", "t", "--gpus", "2", "--nics", "per-gpu", "--nic-function", "vf", *SMALL, "--name", "a",
                 "--json").json()
    nics = [d["address"] for d in doc["devices"] if d["kind"] == "nic"]
    assert len(nics) == 2 and all(not a.endswith(".0") for a in nics)  # VFs, not the PFs (function 0)
    xml = etree.fromstring(dgx.ok("render", "a").stdout.encode())
    interfaces = xml.findall("devices/interface[@type='hostdev']")
    macs = [i.find("mac").get("address") for i in interfaces]
    assert len(interfaces) == 2 and all(m.startswith("52:54:00:") for m in macs) and len(set(macs)) == 2
    again = etree.fromstring(dgx.ok("render", "a").stdout.encode())
    assert [i.find("mac").get("address") for i in again.findall("devices/interface[@type='hostdev']")] == macs
    bad = dgx("place", "t", "--gpus", "1", "--nics", "1", "--nic-function", "sf", *SMALL)
    assert bad.exit_code == 2 and "--nic-function" in bad.stderr
