"""The site configuration file: what it sets, what wins over it, and how a bad file is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Cli, refused_unchanged

CAPS = Path(__file__).resolve().parents[1] / "data" / "capabilities" / "x86-2cell-smt-resctrl.xml"


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty configuration file at $XDG_CONFIG_HOME/vnuma/config.toml (the default place)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "xdg" / "vnuma" / "config.toml"
    path.parent.mkdir(parents=True)
    path.write_text("")
    return path


def _placed_page_kib(cli: Cli, vm: str) -> int:
    return cli.ok("vm", "show", vm, "--json").json()["cells"][0]["page_size_kib"]


def test_file_then_env_then_option_decide_each_commands_default(cli: Cli, conf: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    conf.write_text('page_size = "2M"\ndomain_type = "qemu"\nstrategy = "first-fit"\n'
                    'libvirt_uri = "test:///default"\n')
    cli.ok("host", "add", "lab", "--capabilities", str(CAPS))  # the file's URI: no --uri needed
    assert cli.ok("host", "show", "lab", "--json").json()["uri"] == "test:///default"
    cli.ok("tenant", "create", "t")
    cli.ok("place", "t", "--vcpus", "1", "--memory", "1GiB", "--name", "from-file")
    assert _placed_page_kib(cli, "from-file") == 2048
    assert "<domain type='qemu'" in cli.ok("render", "from-file").stdout.replace('"', "'")
    monkeypatch.setenv("VNUMA_PAGE_SIZE", "4K")
    monkeypatch.setenv("VNUMA_DOMAIN_TYPE", "kvm")
    cli.ok("place", "t", "--vcpus", "1", "--memory", "1GiB", "--name", "from-env")
    assert _placed_page_kib(cli, "from-env") == 4
    assert "<domain type='kvm'" in cli.ok("render", "from-env").stdout.replace('"', "'")
    cli.ok("place", "t", "--vcpus", "1", "--memory", "1GiB", "--name", "from-option", "--page-size", "2M")
    assert _placed_page_kib(cli, "from-option") == 2048
    assert "<domain type='qemu'" in cli.ok("render", "from-option", "--domain-type", "qemu").stdout.replace('"', "'")
    shown = cli.ok("config", "show", "--json").json()
    assert shown["page_size"] == {"value": "4K", "source": "env", "file": None}
    assert shown["strategy"] == {"value": "first-fit", "source": "file", "file": str(conf)}
    assert shown["memnode_mode"] == {"value": None, "source": "default", "file": None}
    assert shown["database"]["source"] == "option" and shown["database"]["value"] == str(cli.db)
    assert set(shown) == {"database", "libvirt_uri", "strategy", "page_size", "domain_type", "memnode_mode",
                          "templates", "metrics_allow"}


def test_the_configured_database_is_relative_to_the_file_and_must_exist(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "etc" / "vnuma.toml"
    path.parent.mkdir()
    path.write_text('database = "inv.db"\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(path))
    monkeypatch.delenv("VNUMA_DB", raising=False)
    bare = Cli(tmp_path / "unused.db", create=False)
    bare.options = []
    res = bare("host", "list")
    assert res.exit_code == 6 and f"inventory {tmp_path}/etc/inv.db does not exist" in res.stderr
    bare.ok("db", "upgrade")
    assert (tmp_path / "etc" / "inv.db").is_file()
    assert bare.ok("config", "show", "--json").json()["database"] == {
        "value": str(tmp_path / "etc" / "inv.db"), "source": "file", "file": str(path)}


def test_an_unknown_key_is_a_warning_and_the_rest_applies(cli: Cli, conf: Path) -> None:
    conf.write_text('stratgy = "gpu-first"\nstrategy = "gpu-first"\n')
    res = cli.ok("config", "show")
    assert f"warning: {conf}: line 1: unknown key 'stratgy'" in res.stderr
    assert res.stderr.count("warning:") == 1
    assert [line.split()[:3] for line in res.stdout.splitlines() if line.startswith("strategy")] == [
        ["strategy", "gpu-first", "file"]]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('page_size = "3M"\n',
         "line 1: bad page_size '3M': use 4K (or base: no hugepages), 2M, 1G, 64K, 512M, 16G or large"),
        ('# site\nstrategy = pack\n', "line 2: strategy: Invalid value"),
        ('domain_type = "xen"\n', "line 1: bad domain_type 'xen': use kvm, qemu"),
        ('memnode_mode = "interleave"\n', "line 1: bad memnode_mode 'interleave'"),
        ('strategy = 3\n', "line 1: strategy: expected a string, got int"),
        ('[place]\nstrategy = "pack"\n', "line 1: unknown key 'place'"),
    ],
    ids=["bad-value", "syntax", "domain-type", "interleave", "not-a-string", "a-table"],
)
def test_a_bad_file_is_one_line_naming_file_line_and_key(cli: Cli, conf: Path, text: str, words: str) -> None:
    cli.ok("host", "add", "a", "--demo")
    conf.write_text(text)
    if "unknown key" in words:  # a table is an unknown key: a warning, the command runs
        res = cli.ok("host", "list")
        assert f"{conf}: {words}" in res.stderr
        return
    refused_unchanged(cli, ["host", "remove", "a"], 4, f"error: {conf}: {words}")
    assert len(cli("host", "list").stderr.splitlines()) <= 2  # the error line and a hint


def test_bad_values_from_the_environment_and_options_name_their_source(cli: Cli,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cli.ok("host", "add", "a", "--demo")
    monkeypatch.setenv("VNUMA_STRATEGY", "fastest")
    refused_unchanged(cli, ["host", "list"], 4, "bad VNUMA_STRATEGY 'fastest': use pack, gpu-first, first-fit")
    monkeypatch.delenv("VNUMA_STRATEGY")
    monkeypatch.setenv("VNUMA_CONFIG", "/nonexistent/vnuma.toml")
    refused_unchanged(cli, ["host", "list"], 4, "/nonexistent/vnuma.toml: no such configuration file")
