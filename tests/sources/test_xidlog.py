"""Kernel log text: every Xid line is read, however the log was saved; only the condition table's codes are
findings; any other text, however garbled, is skipped without a word."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.sources.gpuhealth import Finding
from vnuma.sources.xidlog import XidEvent, parse_xid_lines, read_kernel_log

DATA = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi-health"
LINE = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."


@pytest.mark.parametrize(
    "line",
    [
        LINE,
        f"[ 8812.551029] {LINE}",
        f"[Mon Dec  7 05:12:01 2026] {LINE}",
        f"kern  :warn  : 2026-12-07T05:12:01,283302+00:00 {LINE}",
        f"Dec 07 05:12:01 gpu-node-7 kernel: {LINE}",
        f"2026-12-07T05:12:01+0000 gpu-node-7 kernel: {LINE}",
        f"Dec  7 05:12:01 gpu-node-7 kernel: [ 8812.551029] {LINE}",
        f"{LINE}\r",
        "NVRM: Xid (PCI:0000:3B:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: Xid (0000:3b:00): 79, GPU has fallen off the bus.",
    ],
    ids=["bare", "dmesg", "dmesg-T", "dmesg-iso-decode", "journalctl", "journalctl-short-iso", "syslog-with-dmesg-time",
         "crlf", "upper-case-unknown-pid", "older-driver"],
)
def test_every_way_a_log_is_saved_reads_the_same_xid(line: str) -> None:
    (event,) = parse_xid_lines(f"booting\n{line}\nlater\n")
    assert (event.line, event.address, event.xid) == (2, "0000:3b:00.0", 79)
    assert event.text.endswith("GPU has fallen off the bus.")


def test_the_finding_names_file_line_and_the_drivers_words_without_the_process() -> None:
    rep = read_kernel_log(f"x\n[ 1.0] {LINE}\n", source="kern.log")
    assert rep.findings == (
        Finding("0000:3b:00.0", "xid-79", "kern.log line 2", "Xid 79, GPU has fallen off the bus."),)
    assert rep.addresses == ("0000:3b:00.0",)


def test_a_journal_of_the_tables_codes_gives_each_its_condition() -> None:
    rep = read_kernel_log((DATA / "written-journalctl-k.log").read_bytes(), source="journal")
    assert [(f.address, f.condition, f.where) for f in rep.findings] == [
        ("0000:ab:00.0", "xid-48", "journal line 4"),
        ("0000:ab:00.0", "xid-63", "journal line 5"),
        ("0000:ba:00.0", "xid-74", "journal line 6"),
        ("0000:db:00.0", "xid-92", "journal line 7"),
        ("0000:9a:00.0", "xid-94", "journal line 10"),
        ("0000:9a:00.0", "xid-64", "journal line 11"),
        ("0000:5d:00.0", "xid-95", "journal line 12"),
    ]
    # Xid 13 names its GPU but is no condition; the NVSwitch's SXid line is no GPU's Xid.
    assert "0000:18:00.0" in rep.addresses and "0000:05:00.0" not in rep.addresses
    assert rep.findings[2].detail == (
        "Xid 74, NVLink: fatal error detected on link 6(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)")


def test_a_dmesg_fall_off_the_bus_is_one_finding_though_the_driver_says_it_three_times() -> None:
    rep = read_kernel_log((DATA / "written-dmesg.log").read_text(), source="dmesg")
    assert rep.findings == (Finding("0000:2a:00.0", "xid-79", "dmesg line 6", "Xid 79, GPU has fallen off the bus."),)


@pytest.mark.parametrize(
    ("name", "xids", "address"),
    [
        ("gpud-dmesg-with-xid-119.log", [119] * 5, "0000:9b:00.0"),
        ("gpud-dmesg-decode-iso.log", [13] * 16 + [43], "0000:38:00.0"),
        ("gpud-xid79-sxid-dmesg.log", [79], "0000:91:00.0"),
    ],
    ids=["xid-119-dmesg-T", "xid-13-iso", "xid-79-with-sxid"],
)
def test_real_logs_read_every_xid_line_and_name_only_its_gpu(name: str, xids: list[int], address: str) -> None:
    data = (DATA / name).read_bytes()
    events = parse_xid_lines(data)
    assert [e.xid for e in events] == xids and {e.address for e in events} == {address}
    rep = read_kernel_log(data, source=name)
    assert rep.addresses == (address,)
    assert [f.condition for f in rep.findings] == (["xid-79"] if 79 in xids else [])


def test_bytes_that_are_not_utf8_do_not_stop_the_reading() -> None:
    data = b"\xff\xfe garbage \x00\x80\n" + LINE.encode() + b"\n\xc3\x28"
    assert [(e.line, e.xid) for e in parse_xid_lines(data)] == [(2, 79)]


# A line of noise: text without "Xid", or a near miss of an Xid line that no reading may take for one.
NEAR_MISSES = (
    "NVRM: Xid (PCI:0000:3b:00) 79, no colon",
    "NVRM: Xid PCI:0000:3b:00: 79, no parenthesis",
    "NVRM: Xid (PCI:00zz:3b:00): 79, not hex",
    "NVRM: Xid (PCI:0000:3b:ff): 79, slot above 31",
    "NVRM: Xid (PCI:0000:3b:00): seventy-nine",
    "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 48 LTSSM Fault Up",
    "NVRM: GPU 0000:2a:00.0: GPU has fallen off the bus.",
    "NVRM: Xid (",
)
_PLAIN = st.text(st.characters(blacklist_characters="\n"), max_size=40).filter(lambda t: "Xid" not in t)
NOISE = st.one_of(_PLAIN, st.builds(lambda a, m, b: a + m + b, _PLAIN, st.sampled_from(NEAR_MISSES), _PLAIN))
PREFIXES = ("", "[ 8812.551029] ", "[Mon Dec  7 05:12:01 2026] ", "Dec 07 05:12:01 gpu-node-7 kernel: ",
            "kern  :warn  : 2026-12-07T05:12:01,283302+00:00 ", "2026-12-07T05:12:01+0000 h kernel: ")


@st.composite
def xid_lines(draw: st.DrawFn) -> tuple[str, str, int]:
    """An Xid line as some driver and some log would print it, with its GPU's address and code."""
    domain, bus, slot = draw(st.integers(0, 0xFFFF)), draw(st.integers(0, 0xFF)), draw(st.integers(0, 0x1F))
    xid = draw(st.integers(0, 999_999))
    shown = f"{domain:0{draw(st.sampled_from([4, 8]))}x}:{bus:02x}:{slot:02x}"
    shown = shown.upper() if draw(st.booleans()) else shown
    process = draw(st.sampled_from(["", "pid=1234, name=python3, ", "pid='<unknown>', name=<unknown>, "]))
    words = draw(st.text(st.characters(blacklist_characters="\n"), max_size=30))
    pci = draw(st.sampled_from(["PCI:", ""]))
    line = f"{draw(st.sampled_from(PREFIXES))}NVRM: Xid ({pci}{shown}): {xid}, {process}{words}"
    return line, f"{domain:04x}:{bus:02x}:{slot:02x}.0", xid


@given(noise=st.lists(NOISE, max_size=12), inserted=st.lists(st.tuples(st.integers(0, 12), xid_lines()), max_size=6))
def test_the_reader_finds_exactly_the_xid_lines_put_into_any_noise(
    noise: list[str], inserted: list[tuple[int, tuple[str, str, int]]]
) -> None:
    lines = list(noise)
    for at, (line, _, _) in inserted:
        lines.insert(min(at, len(lines)), line)
    wanted = {line: (address, xid) for _, (line, address, xid) in inserted}
    expected = [(n, *wanted[line]) for n, line in enumerate(lines, 1) if line in wanted]
    assert [(e.line, e.address, e.xid) for e in parse_xid_lines("\n".join(lines))] == expected


@given(st.one_of(st.text(), st.binary()))
def test_the_reader_never_fails_on_any_text_and_each_event_is_an_xid_line(data: str | bytes) -> None:
    events = parse_xid_lines(data)
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    lines = text.split("\n")
    assert all(isinstance(e, XidEvent) and "NVRM: Xid (" in lines[e.line - 1] for e in events)
