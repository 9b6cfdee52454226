"""Refusals that name their cause, end to end: exit 5, one `error:` line (and a `hint:`) on stderr, `--json`
carrying the same line, nothing written.

Hosts: `plain` is `tests/data/capabilities/x86-2socket-cmt-only.xml` (2 cells, no hugepage pool at all, as
most freshly installed servers); `gpu` adds `tests/data/nodedev/gpu-h100.xml` (an H100 PCIe, 10de:2331, on
cell 0) to `x86-2cell-smt-resctrl.xml`; `snc` is `tests/data/hwloc/snc-gpu-on-two-nodes.xml` (an H100 under an
L3 cache shared by two SNC nodes: on no single NUMA node).
"""

from __future__ import annotations

import pytest

from tests.cli.conftest import REPO, Cli, refused_unchanged
from vnuma.placement.pagefilters import NO_HUGEPAGES, NO_HUGEPAGES_HINT

DATA = REPO / "tests" / "data"
PLAIN = DATA / "capabilities" / "x86-2socket-cmt-only.xml"
GEOMETRY = DATA / "gpu-profiles" / "demo-h100-pcie.json"


def _one_error(stderr: str) -> tuple[str, str]:
    """The `error:` line and the `hint:` line, and nothing else."""
    lines = stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), stderr
    return lines[0].removeprefix("error: "), lines[1].removeprefix("hint: ")


def _refused(cli: Cli, *args: str) -> tuple[str, str]:
    """``place ARGS`` refused (exit 5, nothing written) as a real process; the same line and hint in ``--json``."""
    refused_unchanged(cli, ["place", *args], 5, "no host can take VM")
    res = cli.process("place", *args)
    assert res.exit_code == 5 and res.stdout == ""
    error, hint = _one_error(res.stderr)
    doc = cli("place", *args, "--json")
    assert doc.exit_code == 5 and (doc.json()["error"], doc.json()["hint"]) == (error, hint)
    return error, hint


@pytest.fixture
def plain(cli: Cli) -> Cli:
    cli.ok("host", "import", "plain", "--capabilities", str(PLAIN))
    cli.ok("tenant", "create", "t")
    return cli


def test_a_host_without_hugepages_says_so_under_the_default_page_size(plain: Cli) -> None:
    error, hint = _refused(plain, "t", "--vcpus", "4", "--memory", "4GiB", "--name", "v")
    assert error == f"no host can take VM 'v': plain: {NO_HUGEPAGES}"
    assert hint == NO_HUGEPAGES_HINT
    assert "nr_hugepages" in hint and "--page-size 4K" in hint and "page_size" in hint
    doc = plain("place", "t", "--vcpus", "4", "--memory", "4GiB", "--name", "v", "--json").json()
    assert [(c["check"], c["gist"], c["hosts"]) for c in doc["causes"]] == [("page-size", NO_HUGEPAGES, 1)]
    assert doc["closest"] == "plain"
    plain.ok("place", "t", "--vcpus", "4", "--memory", "4GiB", "--page-size", "4K")


def test_mig_on_a_model_without_a_geometry_names_the_model_and_its_pci_id(cli: Cli) -> None:
    cli.ok("host", "import", "gpu", "--capabilities", str(DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"),
           "--nodedev", str(DATA / "nodedev" / "gpu-h100.xml"))
    cli.ok("tenant", "create", "t")
    args = ["t", "--vcpus", "2", "--memory", "2GiB", "--mig", "3g.40gb", "--name", "v"]
    refused_unchanged(cli, ["place", *args], 4, "no MIG geometry kept")  # no GPU of the fleet offers it: bad input
    error, hint = _one_error(cli.process("place", *args).stderr)
    assert error == ("VM 'v': no GPU of the fleet offers MIG profile '3g.40gb' "
                     "(H100 PCIe (10de:2331): no MIG geometry kept: `vnuma gpu-profile import`)")
    assert "vnuma gpu-profile import FILE|NAME" in hint
    cli.ok("gpu-profile", "import", str(GEOMETRY))
    assert cli.ok("place", *args, "--json").json()["devices"][0]["profile"] == "3g.40gb"


def test_an_anti_affinity_group_names_every_host_it_holds(cli: Cli) -> None:
    for name in ("a", "b"):
        cli.ok("host", "import", name, "--capabilities", str(PLAIN))
    cli.ok("tenant", "create", "t")
    apart = ["--vcpus", "2", "--memory", "2GiB", "--page-size", "4K", "--group", "g", "--anti-affinity", "host"]
    cli.ok("place", "t", *apart, "--name", "g1", "--host", "a")
    cli.ok("place", "t", *apart, "--name", "g2", "--host", "b")
    error, hint = _refused(cli, "t", *apart, "--name", "g3")
    assert error == (
        "no host can take VM 'g3': 2 hosts: group 'g' (anti-affinity host) has its VMs on hosts 'a' (VM 'g1'), "
        "'b' (VM 'g2'); closest: a (group 'g' (anti-affinity host) already has VM 'g1' on host 'a')"
    )
    assert hint == "place it elsewhere, or leave the group"


def test_a_gpu_on_two_numa_nodes_is_named_and_affinity_preferred_places_it(cli: Cli) -> None:
    cli.ok("host", "import", "snc", "--hwloc", str(DATA / "hwloc" / "snc-gpu-on-two-nodes.xml"))
    cli.ok("tenant", "create", "t")
    args = ["t", "--vcpus", "2", "--memory", "2GiB", "--gpus", "1", "--name", "v"]
    error, _hint = _refused(cli, *args)
    assert error.startswith("no host can take VM 'v': snc: no cell with 1 free GPUs beside 2 pCPUs")
    assert "GPU 0000:17:00.0, 0000:c1:00.0 of the host have no NUMA node" in error
    assert "so GPU affinity required finds it on no cell: `--gpu-affinity preferred` places it" in error
    placed = cli.ok("place", *args, "--gpu-affinity", "preferred", "--json").json()
    assert [d["kind"] for d in placed["devices"]] == ["gpu"]


def test_the_closest_host_is_quoted_and_hosts_are_counted_by_cause(cli: Cli) -> None:
    """Two hosts without GPUs sort first by name; the GPU host lacking geometry for the model is a cause of its own."""
    for name in ("a-plain", "b-plain"):
        cli.ok("host", "import", name, "--capabilities", str(PLAIN))
    cli.ok("host", "import", "z-gpu", "--capabilities", str(DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"),
           "--nodedev", str(DATA / "nodedev" / "gpu-h100.xml"))
    cli.ok("gpu-profile", "import", str(GEOMETRY))
    cli.ok("tenant", "create", "t")
    mig = ["--vcpus", "2", "--memory", "2GiB", "--page-size", "4K", "--mig", "3g.40gb"]
    cli.ok("place", "t", *mig, "--name", "m1")
    cli.ok("place", "t", *mig, "--name", "m2")  # the H100's two 3g.40gb instances
    error, hint = _refused(cli, "t", *mig, "--name", "v")
    assert error.startswith(
        "no host can take VM 'v': 2 hosts: no GPU offers mig 3g.40gb; "
        "1 host: too few free mig 3g.40gb on the GPUs of its cells; closest: z-gpu (1 x mig 3g.40gb: 0 fit"
    ), error
    assert hint == "see the GPUs' partitions in `vnuma host show`"
    doc = cli("place", "t", *mig, "--name", "v", "--json").json()
    assert [(c["hosts"], c["closest_host"]) for c in doc["causes"]] == [(2, "a-plain"), (1, "z-gpu")]
    assert doc["closest"] == "z-gpu"
    assert {r["host"]: r["missing"] for r in doc["rejections"]} == {"a-plain": None, "b-plain": None, "z-gpu": 1}
