"""Every real topology file in tests/data, imported, shown and used in a 4-vCPU placement.

The corpus is the files nobody working on vnuma wrote (each directory's README names its source and
licence): hwloc's XML test topologies and its Linux sysfs snapshots converted with lstopo, libvirt's
capabilities test files, virt-manager's and KubeVirt's capabilities test files, and node devices
(libvirt's PCI node devices, virt-manager's test-driver devices), each imported with libvirt's
``capabilityschemadata/caps-qemu-kvm.xml`` (two cells) for a topology.

For each file: ``vnuma host import`` (through the CLI), then either

- a refusal: one ``error:`` line naming the file (exit 4), no traceback, nothing recorded — allowed
  only where the file is rightly refused (:data:`RIGHTLY_REFUSED`);
- or the host: ``host show`` draws it, ``host show --json`` agrees with a second, independent reading of the file
  (:mod:`tests.corpus.reader`) on cells, CPUs, memory, pages, distances and device NUMA nodes, except
  the parts vnuma lists in ``left_out`` (:mod:`tests.corpus.compare`); and a placement of 4 vCPUs
  with 8 MiB of 4 KiB pages (``--page-size 4K``: hosts without hugepages take it; libvirt's test files
  give cells a few MiB of 4 KiB pages) either succeeds on 4 distinct CPUs of the cells it names, or
  is refused (exit 5) with the host's reason — never where a cell shows 4 CPUs and 8 MiB of 4 KiB pages.

Outcomes (counted on the terminal after the run): ok / partly imported (``left_out`` not empty) /
refused with a reason (at import or at placement).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.corpus.compare import compare, invariants
from tests.corpus.reader import FileFacts, read_capabilities, read_hwloc, read_nodedevs

DATA = Path(__file__).resolve().parent.parent / "data"
BASE_CAPABILITIES = "libvirt/capabilityschemadata/caps-qemu-kvm.xml"
VM_MEMORY_KIB = 8 * 1024

HWLOC_DIRS = ("hwloc/upstream", "hwloc/upstream/xml", "hwloc/upstream/linux")
CAPABILITIES_DIRS = (
    "libvirt/vircaps2xmldata", "libvirt/capabilityschemadata", "virt-manager/capabilities", "kubevirt",
)
NODEDEV_FILES = ("libvirt/nodedevschemadata/*.xml", "virt-manager/testdriver.xml")

RIGHTLY_REFUSED = {
    # hwloc 1.x files (no version="2.x"): vnuma reads hwloc 2 only and says how to convert them.
    "hwloc/upstream/xml/16amd64-4distances.v1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/16amd64-4distances.v2tov1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/28intel64-2p2g7c-CoDgroups.v1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/2intel64-1n2c-numaroot.v1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/64intel64-fakeKNL-SNC4-hybrid.v2tov1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/8em64t-2p2ca2co-nonodesets.v1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/8ia64-2n2s2c+1n.v1.xml": "hwloc 1.x XML is not supported",
    "hwloc/upstream/xml/8intel64-fakeKNL-A2A-hybrid.rootattachednumas.v2tov1.xml": "hwloc 1.x XML is not supported",
    # Capabilities of drivers that report no NUMA cells at all (libvirt's test driver, bhyve).
    "libvirt/capabilityschemadata/caps-test2.xml": "no NUMA topology",
    "virt-manager/capabilities/bhyve.xml": "no NUMA topology",
    # KubeVirt's hand-edited files: every cell lists the same six CPUs; a CPU's siblings name CPUs no
    # cell lists.
    "kubevirt/capabilities_with_numa.xml": "CPU 0 appears in more than one cell",
    "kubevirt/capabilities.xml": "lists missing sibling CPU(s) 8-30,35",
}
"""Files vnuma refuses rightly, and words of the reason (the file stays refused after every change)."""


@dataclass(frozen=True)
class Entry:
    """One corpus file: its path under tests/data, its format, and the options that import it."""

    file: str
    fmt: str

    def import_args(self) -> list[str]:
        path = str(DATA / self.file)
        if self.fmt == "hwloc":
            return ["--hwloc", path]
        if self.fmt == "capabilities":
            return ["--capabilities", path]
        return ["--capabilities", str(DATA / BASE_CAPABILITIES), "--nodedev", path]

    def facts(self) -> FileFacts:
        if self.fmt == "hwloc":
            return read_hwloc(DATA / self.file)
        if self.fmt == "capabilities":
            return read_capabilities(DATA / self.file)
        facts = read_capabilities(DATA / BASE_CAPABILITIES)
        facts.devices = read_nodedevs(DATA / self.file)
        return facts


def _corpus() -> list[Entry]:
    def files(pattern: str) -> list[str]:
        return sorted(str(p.relative_to(DATA)) for p in DATA.glob(pattern))

    return [
        *(Entry(f, "hwloc") for d in HWLOC_DIRS for f in files(f"{d}/*.xml")),
        *(Entry(f, "capabilities") for d in CAPABILITIES_DIRS for f in files(f"{d}/*.xml")),
        *(Entry(f, "nodedev") for pattern in NODEDEV_FILES for f in files(pattern)),
    ]


CORPUS = _corpus()


def test_the_corpus_holds_every_file_listed() -> None:
    """Each expectation names a file of the corpus (a renamed file cannot leave a stale entry behind)."""
    files = {e.file for e in CORPUS}
    assert len(CORPUS) >= 130
    assert set(RIGHTLY_REFUSED) <= files


@pytest.mark.parametrize("entry", CORPUS, ids=[e.file for e in CORPUS])
def test_file(entry: Entry, corpus_cli: Cli, record_outcome: Callable[[str, str, str], None]) -> None:
    host = f"c{CORPUS.index(entry):03d}"
    res = corpus_cli("host", "import", host, *entry.import_args())
    if res.exit_code != 0:
        line = _refusal_line(res.exit_code, res.stderr, (4,))
        assert entry.file.rsplit("/", 1)[-1] in line, f"the refusal does not name the file: {line}"
        assert corpus_cli("host", "show", host, "--json").exit_code == 3, "a refused import recorded the host"
        record_outcome(entry.file, "refused with a reason", f"import: {line}")
        _expect(entry.file, f"refused: {line}")
        return
    assert host in corpus_cli.ok("host", "show", host).stdout  # the table, drawn for any host the file makes
    shown = corpus_cli.ok("host", "show", host, "--json").json()
    left_out = shown.get("left_out") or []
    for part in left_out:
        assert part["what"] in res.stderr, f"left out but not said on stderr: {part}"
    problems = compare(entry.facts(), "capabilities" if entry.fmt == "nodedev" else entry.fmt, shown)
    problems += invariants(shown)
    refusal, placement_problems = _place(corpus_cli, host, shown)
    problems += placement_problems
    if problems:
        record_outcome(entry.file, "imported wrong", "; ".join(problems))
    elif left_out:
        record_outcome(entry.file, "partly imported", "; ".join(f"{p['what']}: {p['why']}" for p in left_out))
    elif refusal:
        record_outcome(entry.file, "refused with a reason", f"placement: {refusal}")
    else:
        record_outcome(entry.file, "ok", "")
    _expect(entry.file, "wrong: " + "; ".join(problems) if problems else "")


def _place(cli: Cli, host: str, shown: dict[str, Any]) -> tuple[str, list[str]]:
    """Place 4 vCPUs on the host: the refusal's line (empty when placed) and what is wrong with the outcome."""
    res = cli("place", "corpus", "--name", f"vm-{host[1:]}", "--host", host, "--vcpus", "4",
              "--memory", f"{VM_MEMORY_KIB}KiB", "--page-size", "4K", "--json")
    if res.exit_code != 0:
        line = _refusal_line(res.exit_code, res.stderr, (5,))
        assert host in line, f"the placement refusal does not name the host: {line}"
        roomy = [c["id"] for c in shown["cells"] if len(c["cpus"]) >= 4 and _small_pages_kib(c) >= VM_MEMORY_KIB]
        return line, [f"placement refused though cells {roomy} show 4 CPUs and 8 MiB of 4 KiB pages"] if roomy else []
    placed = res.json()
    cells = {c["id"]: {cpu["id"] for cpu in c["cpus"]} for c in shown["cells"]}
    pcpus = [p for c in placed["cells"] for p in c["pcpus"]]
    problems = [] if len(set(pcpus)) == 4 else [f"placed on pCPUs {pcpus}, not 4 distinct ones"]
    problems += [
        f"placed guest cell {c['guest_cell']} on pCPUs {c['pcpus']} outside host cell {c['host_cell']}"
        for c in placed["cells"] if not set(c["pcpus"]) <= cells.get(c["host_cell"], set())
    ]
    return "", problems


def _small_pages_kib(cell: dict[str, Any]) -> int:
    """A shown cell's 4 KiB pages in KiB (a cell listing no pools is all 4 KiB pages, as vnuma reads it)."""
    pages = {int(size): count for size, count in cell["pages"].items()}
    return pages.get(4, 0) * 4 if pages else cell["memory_kib"]


def _refusal_line(code: int, stderr: str, codes: tuple[int, ...]) -> str:
    """The one ``error:`` line of a refusal with one of ``codes`` (a hint may follow; nothing else)."""
    assert "Traceback" not in stderr and code != 70, f"a crash, not a refusal (exit {code}):\n{stderr}"
    assert code in codes, f"exit {code}, expected {codes}:\n{stderr}"
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), stderr
    assert all(line.startswith("hint: ") for line in lines[1:]), stderr
    return lines[0].removeprefix("error: ")


def _expect(file: str, happened: str) -> None:
    """``happened`` (empty: the file imported and placed as it should) is what the file's entry in
    RIGHTLY_REFUSED says, or nothing when it has none."""
    if file in RIGHTLY_REFUSED:
        assert happened.startswith("refused: ") and RIGHTLY_REFUSED[file] in happened, happened
    else:
        assert not happened, happened
