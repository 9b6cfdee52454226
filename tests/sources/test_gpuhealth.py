"""GPU health: bus ids in every form read as the inventory's addresses; health files matched to a host's GPUs
give each GPU one effect and reason; a file of another host is refused naming its GPUs."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import make_host
from vnuma.errors import OtherHostFileError
from vnuma.sources.gpuhealth import (
    CONDITIONS,
    DEFAULT_EFFECTS,
    XID_CONDITIONS,
    HealthReport,
    TaintEffect,
    bus_id_address,
    host_health,
)
from vnuma.sources.nodedev import format_pci_address
from vnuma.sources.nvsmihealth import read_nvidia_smi
from vnuma.sources.xidlog import read_kernel_log
from vnuma.topology import DeviceKind, Host, PciDevice

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi-health"
ROOT = Path(__file__).resolve().parents[2]
H100_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")


def _host(name: str, buses: tuple[str, ...], *, nics: tuple[str, ...] = ()) -> Host:
    devices = [PciDevice(f"0000:{b}:00.0", DeviceKind.GPU, "0x10de", "0x2330", 0) for b in buses]
    devices += [PciDevice(f"0000:{b}:00.0", DeviceKind.NIC, "0x15b3", "0x101d", 0) for b in nics]
    return replace(make_host(name), devices=tuple(sorted(devices, key=lambda d: d.address)))


H100_HOST = _host("gpu-node-7", H100_BUSES)


def _files() -> list[HealthReport]:
    return [
        read_nvidia_smi((DATA / "written-h100-8gpu-v12.xml").read_bytes(), source="smi.xml"),
        read_kernel_log((DATA / "written-journalctl-k.log").read_bytes(), source="journal"),
        read_kernel_log((DATA / "written-dmesg.log").read_bytes(), source="dmesg"),
    ]


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("00000000:3B:00.0", "0000:3b:00.0"),
        ("PCI:0000:3b:00", "0000:3b:00.0"),
        ("0000:3b:00.0", "0000:3b:00.0"),
        ("0000:3B:00", "0000:3b:00.0"),
        ("00000019:01:00.0", "0019:01:00.0"),
        ("PCI:0019:01:00", "0019:01:00.0"),
        ("00010000:e1:00.0", "10000:e1:00.0"),
        (" 00000000:3B:00.1 ", "0000:3b:00.1"),
    ],
    ids=["nvidia-smi", "kernel-log", "inventory", "no-function", "grace-domain", "grace-kernel-log", "vmd-domain",
         "spaces-function-1"],
)
def test_each_form_of_a_bus_id_reads_as_the_inventorys_address(text: str, address: str) -> None:
    assert bus_id_address(text) == address


@pytest.mark.parametrize("text", ["", "3b:00.0", "0000:3b:00.8", "0000:3b:20.0", "000000000:3b:00.0",
                                  "GPU-509665ad-b600-ac93-3616-d754b23d636d", "N/A", "0000:3b:00.0x"])
def test_what_is_no_bus_id_reads_as_none(text: str) -> None:
    assert bus_id_address(text) is None


@given(domain=st.integers(0, 0xFFFF_FFFF), bus=st.integers(0, 0xFF), slot=st.integers(0, 0x1F),
       function=st.integers(0, 7))
def test_nvidia_smis_and_the_kernels_forms_meet_the_inventorys(domain: int, bus: int, slot: int, function: int) -> None:
    stored = format_pci_address(domain, bus, slot, function)
    assert bus_id_address(f"{domain:08X}:{bus:02X}:{slot:02X}.{function}") == stored
    assert bus_id_address(stored) == stored
    assert bus_id_address(f"PCI:{domain:04x}:{bus:02x}:{slot:02x}") == format_pci_address(domain, bus, slot, 0)


def test_the_h100_hosts_files_give_each_sick_gpu_its_effect_and_reason() -> None:
    health = host_health(H100_HOST, _files())
    assert health.unknown == () and health.unknown_findings == ()
    assert [(g.address, g.effect, g.reason) for g in health.gpus] == [
        ("0000:2a:00.0", TaintEffect.DRAIN, "GPU has fallen off the bus (Xid 79); "
                                       "uncorrectable ECC errors since the driver loaded"),
        ("0000:3a:00.0", TaintEffect.NO_SCHEDULE, "row remapping pending (GPU reset needed)"),
        ("0000:5d:00.0", TaintEffect.DRAIN, "uncontained uncorrectable ECC error (Xid 95); row remapping failed"),
        ("0000:9a:00.0", TaintEffect.DRAIN, "page retirement or row remapping could not be recorded (Xid 64); "
                                       "contained uncorrectable ECC error (Xid 94)"),
        ("0000:ab:00.0", TaintEffect.DRAIN, "double-bit ECC error (Xid 48); "
                                       "page retirement or row remapping recorded, reset pending (Xid 63)"),
        ("0000:ba:00.0", TaintEffect.NO_SCHEDULE, "NVLink error (Xid 74)"),
        ("0000:db:00.0", TaintEffect.NO_SCHEDULE, "high single-bit ECC error rate (Xid 92)"),
    ]
    assert health.taints == health.gpus  # 0000:18:00.0 had only an Xid 13: no condition
    assert [f.where for f in health.gpus[0].findings] == ["smi.xml line 91", "dmesg line 6"]


def test_the_same_files_give_the_same_effects_and_reasons_in_any_order() -> None:
    forward = {g.address: (g.effect, g.reason) for g in host_health(H100_HOST, _files()).gpus}
    backward = {g.address: (g.effect, g.reason) for g in host_health(H100_HOST, _files()[::-1]).gpus}
    assert forward == backward


def test_the_configured_effects_change_the_taints() -> None:
    effects = {**DEFAULT_EFFECTS, "xid-92": None, "remap-failure": TaintEffect.DRAIN,
               "xid-95": TaintEffect.NO_SCHEDULE, "remap-pending": None}
    health = host_health(H100_HOST, _files(), effects)
    verdicts = {g.address: g for g in health.gpus}
    assert verdicts["0000:db:00.0"].effect is None and verdicts["0000:db:00.0"] not in health.taints
    assert verdicts["0000:db:00.0"].reason == "high single-bit ECC error rate (Xid 92)"  # reported all the same
    assert verdicts["0000:5d:00.0"].effect is TaintEffect.DRAIN  # by the remap failure now, no longer by the Xid 95
    assert verdicts["0000:3a:00.0"].effect is None
    again = host_health(H100_HOST, _files(), {**effects, "remap-failure": None})
    assert again.gpus[2].effect is TaintEffect.NO_SCHEDULE
    only = host_health(H100_HOST, _files(), {"xid-95": TaintEffect.NO_SCHEDULE})  # the rest at their defaults
    assert [g.effect for g in only.gpus] == [TaintEffect.DRAIN, TaintEffect.NO_SCHEDULE, TaintEffect.NO_SCHEDULE,
                                             *[TaintEffect.DRAIN] * 2, *[TaintEffect.NO_SCHEDULE] * 2]


def test_gpus_the_files_name_that_the_host_lacks_are_reported_not_refused() -> None:
    host = _host("gpu-node-7", H100_BUSES[:-1], nics=("db",))  # the inventory keeps db as a NIC
    health = host_health(host, _files())
    assert health.unknown == ("0000:db:00.0",)
    assert [(f.address, f.condition) for f in health.unknown_findings] == [("0000:db:00.0", "xid-92")]
    assert "0000:db:00.0" not in {g.address for g in health.gpus}


@pytest.mark.parametrize(
    ("host", "reports", "words"),
    [
        (_host("v100-node", ("04", "05", "84", "85")), _files()[:1],
         "smi.xml: not host 'v100-node''s: it names GPUs 0000:18:00.0, 0000:2a:00.0, 0000:3a:00.0, 0000:5d:00.0, "
         "0000:9a:00.0, 0000:ab:00.0, 0000:ba:00.0, 0000:db:00.0, none of the host's (0000:04:00.0, 0000:05:00.0, "
         "0000:84:00.0, 0000:85:00.0)"),
        (_host("v100-node", ("04", "05", "84", "85")),
         [read_nvidia_smi((DATA / "written-v100-4gpu-v10.xml").read_bytes(), source="v100.xml"), _files()[2]],
         "dmesg: not host 'v100-node''s: it names GPU 0000:2a:00.0, none of the host's"),
        (make_host("cpu-only"), _files()[1:2], "journal: not host 'cpu-only''s: it names GPUs 0000:18:00.0, "
         "0000:5d:00.0, 0000:9a:00.0, 0000:ab:00.0, 0000:ba:00.0, 0000:db:00.0, none of the host's (it has no GPU)"),
    ],
    ids=["nvidia-smi-of-another-host", "one-file-of-another-host", "host-without-gpus"],
)
def test_a_file_of_another_host_is_refused_naming_its_gpus(host: Host, reports: list[HealthReport],
                                                           words: str) -> None:
    with pytest.raises(OtherHostFileError, match=re.escape(words)) as err:
        host_health(host, reports)
    assert err.value.exit_code == 4 and err.value.hint is not None and f"on host {host.name} itself" in err.value.hint


def test_many_gpus_of_another_host_are_named_eight_and_counted() -> None:
    many = HealthReport("big.xml", tuple(f"0000:{b:02x}:00.0" for b in range(0x40, 0x50)), ())
    with pytest.raises(OtherHostFileError, match=r"0000:47:00\.0 and 8 more, none of the host's"):
        host_health(H100_HOST, [many])


def test_a_log_naming_no_gpu_is_nothing_to_refuse() -> None:
    quiet = read_kernel_log("[ 0.0] Linux version 6.1\n", source="quiet")
    assert host_health(H100_HOST, [quiet]).gpus == () and host_health(make_host("cpu-only"), [quiet]).unknown == ()


def test_the_table_gives_drain_to_falling_off_the_bus_and_uncorrectable_errors_only() -> None:
    drains = {name for name, c in CONDITIONS.items() if c.effect is TaintEffect.DRAIN}
    assert drains == {"xid-48", "xid-79", "xid-94", "xid-95", "ecc-uncorrectable"}
    assert sorted(XID_CONDITIONS) == [48, 63, 64, 74, 79, 92, 94, 95]


def test_the_docs_table_lists_every_condition_with_its_default_effect() -> None:
    docs = (ROOT / "docs" / "devices.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \|[^|]*\| `(drain|no-schedule)` \|", docs, flags=re.MULTILINE))
    assert rows == {name: c.effect.value for name, c in CONDITIONS.items()}
