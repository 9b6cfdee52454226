"""A directory's health files are read by their content: nvidia-smi documents as XML, anything else as a
kernel log."""

from __future__ import annotations

from pathlib import Path

import pytest

from vnuma.errors import InvalidInputError
from vnuma.sources.healthfile import is_nvidia_smi, read_health_file
from vnuma.sources.nvsmihealth import read_nvidia_smi
from vnuma.sources.xidlog import read_kernel_log

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi-health"
FILES = sorted(p for p in DATA.iterdir() if p.suffix in (".xml", ".log"))


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_each_saved_file_reads_as_its_own_reader_reads_it(path: Path) -> None:
    data = path.read_bytes()
    own = read_nvidia_smi if path.suffix == ".xml" else read_kernel_log
    assert is_nvidia_smi(data) is (path.suffix == ".xml")
    assert read_health_file(data, source=path.name) == own(data, source=path.name)


@pytest.mark.parametrize(
    ("text", "xml"),
    [
        ("\ufeff  \n<?xml version='1.0'?><nvidia_smi_log/>", True),
        ("<nvidia_smi_log></nvidia_smi_log>", True),
        ("<6>[ 8812.551029] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", False),
        ("", False),
    ],
    ids=["bom-and-space", "no-declaration", "dmesg-raw", "empty"],
)
def test_the_kind_is_told_by_how_the_text_starts(text: str, xml: bool) -> None:
    assert is_nvidia_smi(text) is xml and is_nvidia_smi(text.encode()) is xml


def test_a_raw_dmesg_is_a_kernel_log_and_broken_xml_is_refused() -> None:
    rep = read_health_file("<6>[ 8812.551029] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n",
                           source="kmsg")
    assert [f.condition for f in rep.findings] == ["xid-79"]
    with pytest.raises(InvalidInputError, match=r"smi\.xml: malformed XML"):
        read_health_file("<?xml version='1.0'?>\n<nvidia_smi_log><gpu>", source="smi.xml")
