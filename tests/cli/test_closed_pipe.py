"""A reader that closes the pipe early (``vnuma ... | head``) ends vnuma quietly with exit 141.

Each command runs as a real process writing into a pipe shrunk to one page;
its output is at least twice that, so vnuma is still writing when the
reader, after a few bytes, closes its end: the write fails with EPIPE every
time (were the output to fit, vnuma would exit 0 and the test fail).

``PYTHONUNBUFFERED`` is removed from the child's environment: with it,
CPython's unbuffered stdout drops the rest of a write the kernel cut short
and reports no error, so a one-write JSON document ends with exit 0.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import replace

import pytest

from tests.builders import make_host
from tests.cli.conftest import REPO, Cli
from vnuma.cli import EXIT_CLOSED_PIPE
from vnuma.inventory import open_inventory
from vnuma.topology import DeviceKind, PciDevice

PIPE_BYTES = 4096
SMALL_HOSTS = 160


@pytest.fixture(scope="module")
def big_cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One host with 512 NICs and 160 small hosts: every output below is more than two pipes long."""
    db = tmp_path_factory.mktemp("closed-pipe") / "inventory.db"
    nics = tuple(
        PciDevice(f"0000:{bus:02x}:{slot:02x}.0", DeviceKind.NIC, "0x15b3", "0x101d", slot % 4)
        for bus in range(0x20, 0x30)
        for slot in range(32)
    )
    with open_inventory(f"sqlite:///{db}") as inv:
        inv.add_host(replace(make_host("big", cells=4, cores_per_cell=16), devices=nics))
        for i in range(SMALL_HOSTS):
            inv.add_host(make_host(f"small-{i:02d}"))
    return Cli(db)


def _read_a_little_then_close(cli: Cli, *args: str) -> tuple[int, str]:
    """Run vnuma into a one-page pipe, read 10 bytes, close the pipe; its exit code and stderr."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "vnuma.cli", *cli.options, *args],
        stdout=write_end, stderr=subprocess.PIPE, cwd=REPO, env=env,
    )
    os.close(write_end)
    try:
        first = os.read(read_end, 10)
    finally:
        os.close(read_end)
    assert first, "vnuma wrote nothing"
    _, stderr = proc.communicate(timeout=120)
    return proc.returncode, stderr.decode()


COMMANDS = [
    ["host", "show", "big"],
    ["host", "show", "big", "--json"],
    ["host", "list"],
    ["host", "list", "--json"],
    ["stats", "--json"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(a) for a in COMMANDS])
def test_a_closed_pipe_ends_the_command_quietly_with_141(big_cli: Cli, args: list[str]) -> None:
    code, stderr = _read_a_little_then_close(big_cli, *args)
    assert (code, stderr) == (EXIT_CLOSED_PIPE, "")


def test_a_broken_pipe_that_is_not_stdout_is_still_a_bug(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import vnuma.services.queries

    def broken(*_: object) -> None:
        raise BrokenPipeError(32, "a socket closed")

    monkeypatch.setattr(vnuma.services.queries, "host_summaries", broken)
    res = cli("host", "list")
    assert res.exit_code == 70
    assert res.stderr.startswith("error: internal error (bug): BrokenPipeError")


def test_the_manual_documents_the_closed_pipe_exit_code() -> None:
    errors = (REPO / "docs" / "errors.md").read_text()
    assert f"| {EXIT_CLOSED_PIPE} |" in errors
