"""`vnuma watch --health-dir DIR`: each host's newest saved health files taint its GPUs after a round, each
taint a device-health event in `vnuma events`; a bad file is a warning and the watch goes on."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, Cli

DATA = REPO / "tests" / "data"
CAPS = DATA / "capabilities" / "x86-2cell-smt-resctrl.xml"
HEALTH = DATA / "nvidia-smi-health"
T0 = 1796601600


@pytest.fixture
def hosts(cli: Cli, tmp_path: Path) -> tuple[Cli, Path]:
    """Hosts dgx (16 GPUs) and plain (none), and a recorded round of each: one domain the inventory does not
    hold, so the round is written and measures nothing."""
    cli.ok("host", "import", "dgx", "--capabilities", str(CAPS), "--nodedev", str(DATA / "nodedev" / "dgx-like.xml"))
    cli.ok("host", "import", "plain", "--capabilities", str(CAPS))
    rounds = tmp_path / "rounds"
    rounds.mkdir()
    for host in ("dgx", "plain"):
        (rounds / f"{host}@{T0}.txt").write_text("Domain: 'ghost'\n  state.state=1\n")
    return cli, rounds


def _health_dir(tmp_path: Path, files: dict[str, Path]) -> Path:
    directory = tmp_path / "health"
    directory.mkdir()
    for name, source in files.items():
        shutil.copyfile(source, directory / name)
    return directory


def test_the_newest_files_taint_and_each_taint_is_an_event(hosts: tuple[Cli, Path], tmp_path: Path) -> None:
    cli, rounds = hosts
    health = _health_dir(tmp_path, {
        f"dgx@{T0 - 60}.xml": HEALTH / "written-dgx-like-v12.xml",
        f"dgx@{T0 - 60}.log": HEALTH / "written-dgx-like-dmesg.log",
        f"dgx@{T0 - 3600}.log": HEALTH / "written-dmesg.log",  # older: not read (it is another host's)
        "notes.txt": HEALTH / "README.md",  # not a health file's name: ignored
    })
    (health / f"plain@{T0}.xml").write_text("<?xml version='1.0'?>\n<nvidia_smi_log><gpu id=")  # cut short
    res = cli.ok("watch", "--domstats-dir", str(rounds), "--health-dir", str(health), "--act", "off")
    assert "health: host plain:" in res.stderr and "malformed XML" in res.stderr
    assert "0000:e1:00.0" in res.stderr  # no GPU of dgx: reported
    assert res.stdout.splitlines()[-1].startswith("watch: 2 rounds written over 2 hosts")
    assert res.stdout.splitlines()[-1].endswith("; 4 GPUs tainted from health files")
    events = cli.ok("events", "--json").json()
    assert [(e["rule"], e["host"], e["evidence"][0]["address"], e["evidence"][0]["effect"]) for e in events] == [
        ("device-health", "dgx", "0000:14:00.0", "drain"), ("device-health", "dgx", "0000:2b:00.0", "no-schedule"),
        ("device-health", "dgx", "0000:2c:00.0", "no-schedule"), ("device-health", "dgx", "0000:a3:00.0", "drain")]
    assert all(e["closed_at"] == e["opened_at"] for e in events)
    rows = cli.ok("device", "list", "--state", "tainted", "--json").json()
    assert {(r["address"], r["by"]) for r in rows} == {(e["evidence"][0]["address"], "vnuma watch") for e in events}
    assert "GPU 0000:a3:00.0" in cli.ok("events").stdout
    ops = [c["op"] for entry in cli.ok("log", "--json").json() for c in entry["changes"]]
    assert ops.count("device-taint") == 4 and ops.count("watch-event-opened") == 4


def test_files_already_read_taint_nothing_again(hosts: tuple[Cli, Path], tmp_path: Path) -> None:
    cli, rounds = hosts
    health = _health_dir(tmp_path, {f"dgx@{T0}.log": HEALTH / "written-dgx-like-dmesg.log"})
    cli.ok("watch", "--domstats-dir", str(rounds), "--health-dir", str(health), "--act", "off")
    cli.ok("device", "untaint", "dgx", "0000:a3:00.0")
    later = tmp_path / "later"
    later.mkdir()
    (later / f"dgx@{T0 + 10}.txt").write_text("Domain: 'ghost'\n  state.state=1\n")
    res = cli.ok("watch", "--domstats-dir", str(later), "--health-dir", str(health), "--act", "off")
    # a new watch reads the files again: the GPU still tainted so is left as it is, the untainted one tainted again
    assert res.stdout.splitlines()[-1].endswith("; 1 GPUs tainted from health files")
    assert len(cli.ok("events", "--json").json()) == 3


def test_another_hosts_file_taints_nothing(hosts: tuple[Cli, Path], tmp_path: Path) -> None:
    cli, rounds = hosts
    health = _health_dir(tmp_path, {f"dgx@{T0}.xml": HEALTH / "written-h100-8gpu-v12.xml"})
    res = cli.ok("watch", "--domstats-dir", str(rounds), "--health-dir", str(health), "--act", "off")
    assert "health: host dgx:" in res.stderr and "not host 'dgx''s" in res.stderr
    assert cli.ok("device", "list", "--state", "tainted", "--json").json() == []
    assert cli.ok("events", "--json").json() == []


def test_a_watch_whose_lease_another_took_taints_nothing_and_stops(hosts: tuple[Cli, Path], tmp_path: Path) -> None:
    """The health pass writes as a round does, only while the watch holds the inventory's lease."""
    from vnuma.errors import LeaseError
    from vnuma.services import Settings
    from vnuma.services.watch import Watch
    from vnuma.services.watchhealth import HealthWatch
    from vnuma.sources.gpuhealth import DEFAULT_EFFECTS
    from vnuma.watch.rules import Thresholds

    cli, _ = hosts
    settings = Settings(f"sqlite:///{cli.db}")
    health = HealthWatch(settings, _health_dir(tmp_path, {f"dgx@{T0}.xml": HEALTH / "written-dgx-like-v12.xml"}),
                         DEFAULT_EFFECTS, print, print)
    watch = Watch(settings, Thresholds())
    try:
        with sqlite3.connect(cli.db) as db:
            db.execute("UPDATE watch_lease SET token = 'other', machine = 'elsewhere', pid = 1")
        with pytest.raises(LeaseError, match="another vnuma watch took it"):
            health.after_round(watch, T0)
    finally:
        watch.close()
    assert cli.ok("device", "list", "--state", "tainted", "--json").json() == []
    assert cli.ok("events", "--json").json() == []


def test_a_taint_whose_event_cannot_be_written_is_not_kept(
    hosts: tuple[Cli, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A taint and its event are one transaction: what stops the event (here the event's write itself) leaves the
    GPU untainted, so the next round's files taint it with its event."""
    from vnuma.errors import ConflictError
    from vnuma.inventory import history
    from vnuma.services import Settings
    from vnuma.services.watch import Watch
    from vnuma.services.watchhealth import HealthWatch
    from vnuma.sources.gpuhealth import DEFAULT_EFFECTS
    from vnuma.watch.rules import Thresholds

    cli, _ = hosts
    settings = Settings(f"sqlite:///{cli.db}")
    warnings: list[str] = []
    health = HealthWatch(settings, _health_dir(tmp_path, {f"dgx@{T0}.log": HEALTH / "written-dgx-like-dmesg.log"}),
                         DEFAULT_EFFECTS, print, warnings.append)
    recorded = history.record_moment

    def refused(*args: object, **kwargs: object) -> int:
        raise ConflictError("the event could not be written")

    watch = Watch(settings, Thresholds())
    try:
        monkeypatch.setattr(history, "record_moment", refused)
        health.after_round(watch, T0)
        assert warnings == ["health: host dgx: the event could not be written"]
        assert cli.ok("device", "list", "--state", "tainted", "--json").json() == []
        monkeypatch.setattr(history, "record_moment", recorded)
        health.read.clear()  # as a new watch: the files again
        health.after_round(watch, T0 + 10)
    finally:
        watch.close()
    tainted = {r["address"] for r in cli.ok("device", "list", "--state", "tainted", "--json").json()}
    events = cli.ok("events", "--json").json()
    assert tainted and tainted == {e["evidence"][0]["address"] for e in events}
