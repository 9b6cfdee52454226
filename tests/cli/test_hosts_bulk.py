"""``vnuma host add --from-file`` and ``vnuma host refresh --all``: many hosts, each on its own.

Real parts: libvirt's test driver (``test:///default``: 2 cells x 8 CPUs) for
the hosts that work, and URIs libvirt refuses at once for the ones that do
not (a missing test-driver node file; an unresolvable ssh host).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.cli.conftest import REPO, Cli
from vnuma.cli import app
from vnuma.errors import InvalidInputError
from vnuma.services.discovery import Entry, parse_host_list
from vnuma.sources.demo import demo_capabilities_path

GOOD = "test:///default"
MISSING_NODE_FILE = "test:///nonexistent/node.xml"
UNRESOLVABLE = "qemu+ssh://root@nohost.invalid/system"

HOST_FILE = f"""\
# lab hosts
alpha   {GOOD}
bravo {GOOD}    # the same URI under two names is allowed

broken {MISSING_NODE_FILE}
{UNRESOLVABLE}
charlie\t{GOOD}
"""


def _write(tmp_path: Path, text: str, name: str = "hosts.txt") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _listed(cli: Cli) -> list[str]:
    return [r["name"] for r in cli.ok("host", "list", "--json").json()]


@pytest.mark.libvirt
def test_good_hosts_are_added_and_failures_are_summarised_with_exit_8(cli: Cli, tmp_path: Path) -> None:
    res = cli.process("host", "add", "--from-file", _write(tmp_path, HOST_FILE), "--jobs", "3")
    assert res.exit_code == 8, res.stderr
    assert _listed(cli) == ["alpha", "bravo", "charlie"]
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in res.stdout.splitlines()[1:] if line.strip()}
    assert rows["alpha"][0] == "added" and rows["alpha"][1].startswith("2 cells, 16 CPUs")
    assert rows["broken"][0] == "failed" and "nonexistent/node.xml" in rows["broken"][1]
    assert rows["nohost.invalid"][0] == "failed" and "nohost.invalid" in rows["nohost.invalid"][1]
    assert "3 added, 2 failed" in res.stdout
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "2 of 5 hosts failed" in errors[0] and "broken" in errors[0]
    assert "Traceback" not in res.stderr


@pytest.mark.libvirt
def test_json_lists_every_host_in_file_order_whatever_the_completion_order(cli: Cli, tmp_path: Path) -> None:
    res = cli("host", "add", "--from-file", _write(tmp_path, HOST_FILE), "--jobs", "8", "--json")
    assert res.exit_code == 8
    doc = res.json()
    assert [h["name"] for h in doc["hosts"]] == ["alpha", "bravo", "broken", "nohost.invalid", "charlie"]
    assert [h["result"] for h in doc["hosts"]] == ["added", "added", "failed", "failed", "added"]
    assert [h["exit_code"] for h in doc["hosts"]] == [0, 0, 8, 8, 0]
    assert (doc["added"], doc["failed"], doc["skipped"], doc["exit_code"]) == (3, 2, 0, 8)
    assert doc["hosts"][3]["uri"] == UNRESOLVABLE
    for host in doc["hosts"]:
        assert host.keys() == {"name", "uri", "result", "detail", "exit_code", "hint", "changes", "left_out"}


@pytest.mark.libvirt
def test_rerunning_the_file_skips_what_is_there_and_a_taken_name_is_a_conflict(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "import", "delta", "--capabilities", str(demo_capabilities_path()))
    first = _write(tmp_path, f"alpha {GOOD}\nbravo {GOOD}\n", "first.txt")
    cli.ok("host", "add", "--from-file", first)
    again = _write(tmp_path, f"alpha {GOOD}\nbravo {MISSING_NODE_FILE}\ndelta {GOOD}\necho {GOOD}\n", "again.txt")
    doc = cli("host", "add", "--from-file", again, "--json").json()
    results = {h["name"]: (h["result"], h["exit_code"]) for h in doc["hosts"]}
    # bravo exists under another URI: a conflict (9) found before anything is contacted.
    assert results == {"alpha": ("skipped", 0), "bravo": ("failed", 9), "delta": ("failed", 9), "echo": ("added", 0)}
    assert doc["exit_code"] == 9
    assert _listed(cli) == ["alpha", "bravo", "delta", "echo"]
    assert cli.ok("host", "show", "bravo", "--json").json()["uri"] == GOOD


@pytest.mark.libvirt
def test_the_first_failure_in_file_order_decides_the_exit_code(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "taken", "--uri", GOOD)
    text = f"fresh {GOOD}\ntaken {MISSING_NODE_FILE}\nbroken {MISSING_NODE_FILE}\n"
    assert cli("host", "add", "--from-file", _write(tmp_path, text)).exit_code == 9
    text = f"broken {MISSING_NODE_FILE}\ntaken {MISSING_NODE_FILE}\n"
    assert cli("host", "add", "--from-file", _write(tmp_path, text, "b.txt")).exit_code == 8


@pytest.mark.libvirt
def test_hosts_can_come_from_stdin(cli: Cli) -> None:
    res = cli.runner.invoke(
        app,
        [*cli.options, "host", "add", "--from-file", "-"],
        input=f"# from a pipe\nalpha {GOOD}\nbravo {GOOD}\n",
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.stderr
    assert _listed(cli) == ["alpha", "bravo"]
    assert res.stderr == ""


MALFORMED = {
    "three-fields": (f"ok {GOOD}\n\nbad {GOOD} extra\n", "line 3"),
    "bare-local-uri": (f"ok {GOOD}\n# no host part to name it by\nqemu:///system\n", "line 3"),
    "bad-name": (f"ok {GOOD}\nno\x00pe {GOOD}\n", "line 2"),
    "duplicate-name": (f"ok {GOOD}\nother {GOOD}\nok {MISSING_NODE_FILE}\n", "line 3"),
    "only-comments": ("# nothing here\n\n   \n", "no hosts"),
}


@pytest.mark.libvirt
@pytest.mark.parametrize("kind", sorted(MALFORMED), ids=sorted(MALFORMED))
def test_a_malformed_file_is_exit_4_naming_the_line_and_adds_nothing(
    cli: Cli, tmp_path: Path, kind: str, dumped: Callable[[Path], list[str]]
) -> None:
    cli.ok("host", "add", "existing", "--uri", GOOD)
    before = dumped(cli.db)
    text, needle = MALFORMED[kind]
    path = _write(tmp_path, text)
    res = cli.process("host", "add", "--from-file", path)
    assert res.exit_code == 4, res.stderr
    first = res.stderr.splitlines()[0]
    assert first.startswith("error: ") and needle in first and path in first
    assert "Traceback" not in res.stderr
    assert dumped(cli.db) == before


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["host", "add", "--from-file", "/nonexistent/hosts.txt"], "/nonexistent/hosts.txt"),
        (["host", "add", "solo", "--from-file", "HOSTS"], "NAME"),
        (["host", "add", "--uri", GOOD, "--from-file", "HOSTS"], "--uri"),
        (["host", "add", "--demo", "--from-file", "HOSTS"], "--demo"),
        (["host", "add", "--from-file", "NOT-UTF8"], "UTF-8"),
        (["host", "refresh", "existing", "--all"], "NAME"),
        (["host", "refresh", "--all", "--capabilities", "HOSTS"], "--capabilities"),
        (["host", "refresh"], "NAME"),
    ],
    ids=["missing-file", "name-too", "uri-too", "demo-too", "not-utf8", "refresh-name-too", "refresh-caps-too",
         "refresh-nothing"],
)
@pytest.mark.libvirt
def test_option_mistakes_are_exit_4_and_change_nothing(
    cli: Cli, tmp_path: Path, args: list[str], needle: str, dumped: Callable[[Path], list[str]]
) -> None:
    cli.ok("host", "add", "existing", "--uri", GOOD)
    hosts = _write(tmp_path, f"new {GOOD}\n")
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 test:///default\n")
    args = [{"HOSTS": hosts, "NOT-UTF8": str(tmp_path / "latin1.txt")}.get(a, a) for a in args]
    before = dumped(cli.db)
    res = cli(*args)
    assert res.exit_code == 4, res.stderr
    assert res.stderr.startswith("error: ") and needle in res.stderr.splitlines()[0]
    assert dumped(cli.db) == before


def test_jobs_out_of_range_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    assert cli("host", "add", "--from-file", _write(tmp_path, f"a {GOOD}\n"), "--jobs", "0").exit_code == 2
    assert cli("host", "refresh", "--all", "--jobs", "65").exit_code == 2


@pytest.mark.libvirt
def test_refresh_all_rewrites_changed_hosts_skips_imported_ones_and_survives_a_failure(
    cli: Cli, tmp_path: Path
) -> None:
    caps = str(demo_capabilities_path())
    cli.ok("host", "add", "plain", "--uri", GOOD)
    # Each is read from its own capabilities file again: the 4-cell demo host, then 2 cells.
    grown_caps = tmp_path / "grown.xml"
    shutil.copy(caps, grown_caps)
    cli.ok("host", "add", "grown", "--uri", GOOD, "--capabilities", str(grown_caps))
    gone_caps = tmp_path / "gone.xml"
    shutil.copy(caps, gone_caps)
    cli.ok("host", "add", "gone", "--uri", GOOD, "--capabilities", str(gone_caps))
    cli.ok("host", "import", "offline", "--capabilities", caps)
    cli.ok("host", "add", "lab", "--demo")
    lab_before = cli.ok("host", "show", "lab", "--json").json()
    shutil.copy(REPO / "tests/data/capabilities/x86-2cell-smt-resctrl.xml", grown_caps)
    gone_caps.unlink()  # its refresh fails (exit 4); the others go on
    res = cli("host", "refresh", "--all", "--json")
    assert res.exit_code == 4, res.stderr
    doc = res.json()
    by_name = {h["name"]: h for h in doc["hosts"]}
    assert [h["name"] for h in doc["hosts"]] == ["gone", "grown", "lab", "offline", "plain"]
    assert by_name["plain"]["result"] == "refreshed" and by_name["plain"]["changes"] == []
    assert by_name["grown"]["result"] == "refreshed"
    assert {"cell 2 removed", "cell 3 removed"} <= set(by_name["grown"]["changes"])
    assert by_name["offline"]["result"] == "skipped" and by_name["offline"]["uri"] is None
    assert by_name["gone"]["result"] == "failed" and str(gone_caps) in by_name["gone"]["detail"]
    assert by_name["lab"]["result"] == "refreshed" and by_name["lab"]["changes"] == []
    assert (doc["refreshed"], doc["skipped"], doc["failed"]) == (3, 1, 1)
    assert len(cli.ok("host", "show", "grown", "--json").json()["cells"]) == 2
    assert cli.ok("host", "show", "lab", "--json").json() == lab_before


@pytest.mark.libvirt
def test_refresh_all_table_says_no_change_and_exits_0(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "--from-file", _write(tmp_path, f"alpha {GOOD}\nbravo {GOOD}\n"))
    cli.ok("host", "import", "offline", "--capabilities", str(demo_capabilities_path()))
    res = cli.process("host", "refresh", "--all")
    assert res.exit_code == 0, res.stderr
    assert res.stderr == ""
    lines = [line.split(None, 2) for line in res.stdout.splitlines()]
    assert ["alpha", "refreshed", "no change"] in [[p.strip() for p in line] for line in lines]
    assert "2 refreshed, 1 skipped" in res.stdout


# --- the host-list format (pure) ---------------------------------------------------------------------

def test_a_bare_uri_is_named_after_its_host_part() -> None:
    entries = parse_host_list("qemu+ssh://root@gpu-7.lab:2222/system\nqemu+tls://gpu-8/system # tls\n", "f")
    assert entries == [
        Entry("gpu-7.lab", "qemu+ssh://root@gpu-7.lab:2222/system", 1),
        Entry("gpu-8", "qemu+tls://gpu-8/system", 2),
    ]


names = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=12)
uris = st.sampled_from([GOOD, "qemu:///system", "qemu+ssh://root@h/system", "test:///tmp/node.xml"])
padding = st.sampled_from(["", " ", "\t", "  \t"])


noise_lines = st.lists(st.sampled_from(["", "# comment", "   ", "\t# indented comment"]), max_size=2)


@given(
    hosts=st.dictionaries(names, uris, min_size=1, max_size=8),
    noise=st.lists(noise_lines, min_size=9, max_size=9),
    pad=padding,
)
def test_host_lists_parse_back_to_their_entries_whatever_the_comments(
    hosts: dict[str, str], noise: list[list[str]], pad: str
) -> None:
    lines: list[str] = []
    for (name, uri), before in zip(hosts.items(), noise, strict=False):
        lines += before
        lines.append(f"{pad}{name}{pad or ' '}{uri}{pad}# trailing")
    lines += noise[-1]
    parsed = parse_host_list("\n".join(lines), "f")
    assert [(e.name, e.uri) for e in parsed] == list(hosts.items())
    for e in parsed:
        assert lines[e.line - 1].split("#")[0].split() == [e.name, e.uri]


def test_a_name_twice_names_both_lines() -> None:
    with pytest.raises(InvalidInputError, match="line 4: host 'a' is already given on line 1"):
        parse_host_list(f"a {GOOD}\nb {GOOD}\n\na {GOOD}\n", "f")


def test_refresh_all_of_an_empty_inventory_succeeds_with_no_rows(cli: Cli) -> None:
    res = cli.ok("host", "refresh", "--all")
    assert "no hosts" in res.stdout
    assert cli.ok("host", "refresh", "--all", "--json").json()["hosts"] == []
