"""``--page-size base`` (or ``4K``) on a 64K-page Grace host, end to end: place, apply in libvirt's test driver,
render, reconcile in agreement (the domain has no hugepage backing, and its cells hold 64 KiB base pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Cli
from tests.placement.test_base_pages import _AS_64K, GH200

pytestmark = pytest.mark.libvirt


@pytest.fixture
def gh64k(tmp_path: Path, conn: Any) -> Cli:
    import re

    stock = conn.lookupByName("test")  # the driver's own domain (put back by conn): a host vnuma fully explains
    stock.destroy()
    stock.undefine()
    text = re.sub(r"<pages unit='KiB' size='(\d+)'>(\d+)</pages>",
                  lambda m: f"<pages unit='KiB' size='{_AS_64K[m[1]]}'>{int(m[2]) * int(m[1]) // int(_AS_64K[m[1]])}"
                            "</pages>", GH200.read_text())
    caps = tmp_path / "gh200-64k.xml"
    caps.write_text(text)
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "gh", "--uri", "test:///default", "--capabilities", str(caps))
    cli.ok("tenant", "create", "t")
    return cli


def test_base_pages_on_a_64k_host_place_apply_and_reconcile(gh64k: Cli) -> None:
    shown = gh64k.ok("place", "t", "--vcpus", "8", "--memory", "16GiB", "--page-size", "base", "--name", "v",
                     "--json").json()
    assert {c["page_size_kib"] for c in shown["cells"]} == {64}
    xml = gh64k.ok("render", "v").stdout
    assert "<hugepages>" not in xml and "page-size-kib='64'" in xml and "arch='aarch64'" in xml
    gh64k.ok("apply", "v")
    assert "in agreement" in gh64k.ok("reconcile", "gh").stdout
