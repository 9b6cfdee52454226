"""Fixtures for tests against a real libvirtd (qemu:///system).

On a laptop without the daemon these tests skip; scripts/test (and so CI)
starts libvirtd and sets VNUMA_TEST_LIBVIRTD=1, which turns a missing
daemon into a failure instead of a skip.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SYSTEM_URI = "qemu:///system"


def _daemon_up() -> bool:
    try:
        subprocess.run(["virsh", "-c", SYSTEM_URI, "version"], capture_output=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


@pytest.fixture(scope="session")
def libvirtd() -> str:
    if not _daemon_up():
        if os.environ.get("VNUMA_TEST_LIBVIRTD"):
            pytest.fail("libvirtd is required here (VNUMA_TEST_LIBVIRTD=1) but qemu:///system does not answer")
        pytest.skip("no libvirtd at qemu:///system (scripts/test starts one)")
    return SYSTEM_URI


def virsh(*args: str, uri: str = SYSTEM_URI) -> str:
    """Run virsh against the system daemon (or the daemon at ``uri``); return stdout."""
    out = subprocess.run(["virsh", "-c", uri, *args], capture_output=True, text=True, check=True, timeout=60)
    return out.stdout


def remove_domain(uri: str, name: str) -> None:
    """Destroy and undefine ``name`` at ``uri``, whatever state it is in (or none)."""
    for verb in ("destroy", "undefine"):
        subprocess.run(["virsh", "-c", uri, verb, name], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def peer(libvirtd: str) -> tuple[str, Path]:
    """The second libvirtd scripts/test starts (its URI and state directory): a migration peer on this machine."""
    uri, state = os.environ.get("VNUMA_TEST_PEER_URI"), os.environ.get("VNUMA_TEST_PEER_DIR")
    if not uri or not state:
        if os.environ.get("VNUMA_TEST_LIBVIRTD"):
            pytest.fail("scripts/test starts a peer libvirtd (VNUMA_TEST_PEER_URI) but none is set")
        pytest.skip("no peer libvirtd (scripts/test starts one)")
    subprocess.run(["virsh", "-c", uri, "version"], capture_output=True, check=True, timeout=30)
    return uri, Path(state)
