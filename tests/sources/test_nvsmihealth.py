"""Saved ``nvidia-smi -q -x``: each GPU's address and the conditions its counters and flags show, in the
published layouts (v10 to v13) and in documents saved on real machines; anything else is refused safely."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vnuma.errors import InvalidInputError
from vnuma.sources.gpuhealth import Finding
from vnuma.sources.nvsmihealth import parse_nvidia_smi, read_nvidia_smi

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi-health"
H100 = (DATA / "written-h100-8gpu-v12.xml").read_text()
V100 = (DATA / "written-v100-4gpu-v10.xml").read_text()


def _real(name: str) -> str:
    return (DATA / f"telegraf-{name}.xml").read_text()


def test_an_eight_gpu_v12_document_gives_each_gpus_conditions() -> None:
    rep = read_nvidia_smi(H100, source="smi.xml")
    assert rep.addresses == tuple(f"0000:{b}:00.0" for b in ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db"))
    assert [(f.address, f.condition, f.detail) for f in rep.findings] == [
        ("0000:2a:00.0", "ecc-uncorrectable", "2 volatile uncorrectable ECC errors"),
        ("0000:3a:00.0", "remap-pending", "remapped_row_pending Yes"),
        ("0000:5d:00.0", "remap-failure", "remapped_row_failure Yes"),
    ]
    assert rep.findings[0].where.startswith("smi.xml line ")


def test_an_old_error_in_the_aggregate_counts_only_is_no_condition() -> None:
    gpus = {g.address: g for g in parse_nvidia_smi(H100, what="smi.xml")}
    old = gpus["0000:9a:00.0"]
    assert (old.volatile_uncorrectable, old.aggregate_uncorrectable) == (0, 1) and old.findings() == ()
    assert gpus["0000:2a:00.0"].product_name == "NVIDIA H100 80GB HBM3"


def test_an_older_drivers_double_bit_counters_and_pending_retirement() -> None:
    rep = read_nvidia_smi(V100.encode(), source="v100.xml")
    assert [(f.address, f.condition) for f in rep.findings] == [
        ("0000:05:00.0", "ecc-uncorrectable"), ("0000:84:00.0", "retirement-pending")]
    assert rep.findings[0].detail == "1 volatile uncorrectable ECC error"


@pytest.mark.parametrize(
    ("name", "address", "model"),
    [
        ("a100-sxm4-v12", "0000:01:00.0", "NVIDIA A100-SXM4-80GB"),
        ("a10g", "0000:00:1e.0", "NVIDIA A10G"),
        ("tesla-t4", "0000:00:1e.0", "Tesla T4"),
        ("quadro-p400", "0000:43:00.0", "Quadro P400"),
        ("gtx-1070-ti", "0000:01:00.0", "GeForce GTX 1070 Ti"),
        ("rtx-4000-sff-ada-v13", "0000:06:00.0", "NVIDIA RTX 4000 SFF Ada Generation"),
    ],
    ids=["a100-v12-mig", "a10g-v11", "t4-v11", "p400-no-doctype", "gtx-id-only", "rtx-v13"],
)
def test_real_documents_of_healthy_gpus_name_them_and_show_nothing(name: str, address: str, model: str) -> None:
    (gpu,) = parse_nvidia_smi(_real(name), what=name)
    assert (gpu.address, gpu.product_name) == (address, model)
    assert read_nvidia_smi(_real(name), source=name).findings == ()


def _volatile(counter: str, value: str) -> tuple[str, str]:
    """A pattern setting the GPU's own volatile ``counter`` (not a MIG device's) to ``value``."""
    return rf"(<ecc_errors>\s*<volatile>(?:(?!</volatile>).)*<{counter}>)0(</{counter}>)", rf"\g<1>{value}\2"


@pytest.mark.parametrize(
    ("name", "change", "condition", "detail"),
    [
        ("a10g", (r"<remapped_row_failure>No<", "<remapped_row_failure>Yes<"), "remap-failure",
         "remapped_row_failure Yes"),
        ("a10g", (r"<remapped_row_pending>No<", "<remapped_row_pending>Yes<"), "remap-pending",
         "remapped_row_pending Yes"),
        ("rtx-4000-sff-ada-v13", (r"<remapped_row_failure>No<", "<remapped_row_failure>Yes<"), "remap-failure",
         "remapped_row_failure Yes"),
        ("tesla-t4", (r"<pending_retirement>No<", "<pending_retirement>Yes<"), "retirement-pending",
         "pending_retirement Yes"),
        ("tesla-t4", _volatile("dram_uncorrectable", "3"), "ecc-uncorrectable",
         "3 volatile uncorrectable ECC errors"),
        ("a100-sxm4-v12", _volatile("sram_uncorrectable", "1"), "ecc-uncorrectable",
         "1 volatile uncorrectable ECC error"),
    ],
    ids=["a10g-remap-failure", "a10g-remap-pending", "v13-remap-failure", "t4-retirement-pending", "t4-dram-ecc",
         "a100-sram-ecc"],
)
def test_real_documents_with_one_flag_or_counter_set_show_its_condition(
    name: str, change: tuple[str, str], condition: str, detail: str
) -> None:
    text, n = re.subn(change[0], change[1], _real(name), count=1, flags=re.DOTALL)
    assert n == 1
    (finding,) = read_nvidia_smi(text, source=name).findings
    assert (finding.condition, finding.detail) == (condition, detail)


def test_a_mig_devices_own_ecc_count_is_not_the_gpus() -> None:
    text = _real("a100-sxm4-v12").replace("<sram_uncorrectable>0</sram_uncorrectable>",
                                          "<sram_uncorrectable>4</sram_uncorrectable>", 1)
    assert "<mig_device>" in text.split("<sram_uncorrectable>4")[0]
    assert read_nvidia_smi(text, source="mig").findings == ()


def test_values_nvidia_smi_could_not_read_are_no_finding() -> None:
    text = H100.replace("<remapped_row_failure>Yes<", "<remapped_row_failure>[Unknown Error]<").replace(
        "<dram_uncorrectable>2<", "<dram_uncorrectable>N/A<").replace(
        "<remapped_row_pending>Yes<", "<remapped_row_pending>Not Supported<")
    assert read_nvidia_smi(text, source="smi").findings == ()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty document"),
        ("nvidia-smi: command not found\n", "malformed XML"),
        ("<capabilities/>", "root element is <capabilities>, not <nvidia_smi_log>"),
        ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
         "<nvidia_smi_log><gpu id='&b;'/></nvidia_smi_log>", "entity declarations are not allowed"),
        ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
         "<nvidia_smi_log>&x;</nvidia_smi_log>", "entity declarations are not allowed"),
        ("<nvidia_smi_log>\n<gpu id='GPU-1'><pci><pci_bus_id>N/A</pci_bus_id></pci></gpu></nvidia_smi_log>",
         "smi.xml line 2: <gpu> has no readable PCI bus id (pci/pci_bus_id or id): 'N/A' or 'GPU-1'"),
    ],
    ids=["empty", "not-xml", "other-document", "billion-laughs", "external-entity", "no-bus-id"],
)
def test_what_is_not_an_nvidia_smi_document_is_refused(text: str, words: str) -> None:
    with pytest.raises(InvalidInputError, match=re.escape(words)) as err:
        read_nvidia_smi(text, source="smi.xml")
    assert err.value.exit_code == 4 and err.value.hint is not None and "nvidia-smi -q -x" in err.value.hint


def test_the_dtd_a_document_names_is_never_fetched() -> None:
    text = H100.replace('SYSTEM "nvsmi_device_v12.dtd"', 'SYSTEM "http://127.0.0.1:9/nvsmi_device_v12.dtd"')
    assert len(read_nvidia_smi(text, source="smi").findings) == 3


def test_findings_point_at_their_gpus_element() -> None:
    (finding, *_) = read_nvidia_smi(H100, source="smi.xml").findings
    line = int(finding.where.removeprefix("smi.xml line "))
    assert H100.splitlines()[line - 1].strip() == '<gpu id="00000000:2A:00.0">'
    assert finding == Finding("0000:2a:00.0", "ecc-uncorrectable", f"smi.xml line {line}",
                              "2 volatile uncorrectable ECC errors")


def test_an_unreadable_pci_bus_id_falls_back_on_the_gpus_id() -> None:
    text = H100.replace("<pci_bus_id>00000000:2A:00.0</pci_bus_id>", "<pci_bus_id>N/A</pci_bus_id>")
    assert read_nvidia_smi(text, source="smi").findings[0].address == "0000:2a:00.0"
