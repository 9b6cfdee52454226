"""`vnuma serve --watch`: the watch loop on a thread of a real serving process, and its thresholds checked
before anything is served."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from tests.api.conftest import start
from tests.cli.conftest import REPO, Cli
from tests.dbdump import dump

pytestmark = pytest.mark.libvirt

CAPS = REPO / "vnuma" / "data" / "demo-capabilities.xml"


def _rounds(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM watch_samples WHERE kind = 'round'").fetchone()[0])


def test_the_service_watches_every_host_while_it_serves(cli: Cli, tmp_path: Path) -> None:
    cli.ok("host", "add", "h", "--uri", "test:///default", "--capabilities", str(CAPS))
    log = tmp_path / "serve.log"
    _, proc = start(str(cli.db), log, "--watch", "--interval", "100ms")
    try:
        for _ in range(600):  # until the loop has written two rounds (the service answers meanwhile)
            if _rounds(cli.db) >= 2:
                break
            time.sleep(0.05)
        assert _rounds(cli.db) >= 2, log.read_text()
    finally:
        proc.terminate()
        proc.wait(30)
    text = log.read_text()
    assert "vnuma watch: warning: host h: no free pages reported" in text
    assert "vnuma serve: listening on" in text


def test_watch_thresholds_out_of_range_refuse_to_serve(cli: Cli, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("host", "add", "h", "--uri", "test:///default", "--capabilities", str(CAPS))
    config = tmp_path / "vnuma.toml"
    config.write_text("[watch]\nnoisy_load = 2\n")
    monkeypatch.setenv("VNUMA_CONFIG", str(config))
    before = dump(cli.db)
    res = cli("serve", "--listen", "127.0.0.1:1", "--watch")
    assert res.exit_code == 4 and "[watch] noisy_load: 2 is out of range (0.01 to 1)" in res.stderr
    assert dump(cli.db) == before
