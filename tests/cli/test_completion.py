"""Shell completion of host, tenant and VM names, as the shell runs it: a real process per key press."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli

pytestmark = pytest.mark.libvirt


def _complete(db: Path | str, line: str) -> tuple[list[str], int, str]:
    words = line.split(" ")
    env = {**os.environ, "VNUMA_DB": str(db), "_VNUMA_COMPLETE": "complete_bash",
           "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    out = subprocess.run([sys.executable, "-m", "vnuma.cli"], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=60)
    return out.stdout.split(), out.returncode, out.stderr


def test_names_come_from_the_inventory_by_prefix(demo_pair: Cli) -> None:
    for vm in ("web_1", "webx1", "db1"):
        demo_pair.ok("place", "x", "--vcpus", "1", "--memory", "1GiB", "--name", vm)
    demo_pair.ok("host", "add", "r_1", "--demo")  # host names may hold LIKE's wildcard _ (not %: the name rule)
    demo_pair.ok("host", "add", "rack9", "--demo")
    demo_pair.ok("tenant", "create", "xylo")
    assert _complete(demo_pair.db, "vnuma vm show ")[0] == ["db1", "web_1", "webx1"]
    assert _complete(demo_pair.db, "vnuma vm show web_")[0] == ["web_1"]  # _ is not a wildcard
    assert _complete(demo_pair.db, "vnuma vm show WEB")[0] == []  # names are case-sensitive
    assert _complete(demo_pair.db, "vnuma host show ")[0] == ["a", "b", "r_1", "rack9"]
    assert _complete(demo_pair.db, "vnuma host show r_")[0] == ["r_1"]  # _ is not a wildcard
    assert _complete(demo_pair.db, "vnuma host show r%")[0] == []  # % is not a wildcard
    assert _complete(demo_pair.db, "vnuma vm migrate web_1 --to r")[0] == ["r_1", "rack9"]
    assert _complete(demo_pair.db, "vnuma place x")[0] == ["x", "xylo"]
    assert _complete(demo_pair.db, "vnuma tenant show xy")[0] == ["xylo"]


def test_an_unreadable_inventory_completes_nothing_and_quietly(tmp_path: Path) -> None:
    words, code, err = _complete(tmp_path / "missing.db", "vnuma vm show ")
    assert (words, code, err) == ([], 0, "")
    assert not (tmp_path / "missing.db").exists()  # completion never creates an inventory


def test_the_completion_script_is_offered(cli: Cli) -> None:
    # Typer detects the shell from the process's ancestors (shellingham): run it under a bash that stays its
    # parent (a trailing command keeps bash from exec'ing it), as from an operator's shell.
    command = f"{shlex.quote(sys.executable)} -m vnuma.cli --show-completion bash; true"
    out = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "_VNUMA_COMPLETE" in out.stdout


def test_completion_loads_neither_sqlalchemy_nor_libvirt_nor_numpy(demo_pair: Cli) -> None:
    env = {**os.environ, "VNUMA_DB": str(demo_pair.db), "_VNUMA_COMPLETE": "complete_bash",
           "COMP_WORDS": "vnuma vm show ", "COMP_CWORD": "3"}
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "vnuma.cli"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=60)
    imported = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "vnuma.inventory.reading" in imported  # the names were read
    assert not {m for m in imported if m.split(".")[0] in ("sqlalchemy", "libvirt", "numpy", "jinja2")}
