"""The configuration file's ``[device_health]`` table: each GPU health condition's effect over the defaults,
and a bad table refused as one line naming the file and the key (exit 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.conftest import Cli
from vnuma.errors import ConfigError
from vnuma.services.config import load
from vnuma.services.healthconfig import health_effects
from vnuma.sources.gpuhealth import DEFAULT_EFFECTS, Effects
from vnuma.topology.devstates import TaintEffect


def _effects(tmp_path: Path, text: str) -> Effects:
    path = tmp_path / "vnuma.toml"
    path.write_text(text)
    return health_effects(load({"VNUMA_CONFIG": str(path)}))


def test_the_table_sets_effects_and_leaves_the_rest_at_their_defaults(tmp_path: Path) -> None:
    effects = _effects(tmp_path, '[device_health]\nxid-92 = "none"\nremap-failure = "drain"\n'
                                 'xid-79 = "no-schedule"\n')
    assert effects == {**DEFAULT_EFFECTS, "xid-92": None, "remap-failure": TaintEffect.DRAIN,
                       "xid-79": TaintEffect.NO_SCHEDULE}


def test_no_file_and_no_table_are_the_defaults(tmp_path: Path) -> None:
    assert health_effects(load({"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)})) == DEFAULT_EFFECTS
    assert _effects(tmp_path, 'strategy = "pack"\n') == DEFAULT_EFFECTS


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('xid-13 = "drain"', "[device_health] unknown condition 'xid-13' (conditions: xid-48, xid-63"),
        ('xid-79 = "evict"', "[device_health] xid-79: 'evict' is no effect (use no-schedule, drain, none)"),
        ("xid-79 = 1", "[device_health] xid-79: 1 is no effect"),
        ('xid-79 = "Drain"', "[device_health] xid-79: 'Drain' is no effect"),
    ],
    ids=["unknown-condition", "unknown-effect", "not-a-string", "case"],
)
def test_a_bad_table_is_one_error_naming_file_and_key(tmp_path: Path, table: str, words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{tmp_path / 'vnuma.toml'}: {words}")) as err:
        _effects(tmp_path, f"[device_health]\n{table}\n")
    assert err.value.exit_code == 4


def test_the_file_with_the_table_is_no_unknown_key_to_config_show(cli: Cli, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vnuma.toml"
    path.write_text('strategy = "gpu-first"\n[device_health]\nxid-92 = "none"\n')
    monkeypatch.setenv("VNUMA_CONFIG", str(path))
    res = cli.ok("config", "show")
    assert "warning" not in res.stderr and "gpu-first" in res.stdout
