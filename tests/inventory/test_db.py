"""URL resolution, engine settings, and database trouble reported as one-line vnuma errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.builders import make_host
from vnuma.errors import ConfigError, InventoryError
from vnuma.inventory import make_engine, open_inventory, resolve_url
from vnuma.inventory.guard import mask_url
from vnuma.services import make_settings

HOME = {"HOME": "/home/op"}

RESOLVE = [
    ("option-wins", "/srv/a.db", {**HOME, "VNUMA_DB": "/srv/b.db"}, "sqlite:////srv/a.db"),
    ("env-when-no-option", None, {**HOME, "VNUMA_DB": "/srv/b.db"}, "sqlite:////srv/b.db"),
    ("empty-option-is-unset", "", {**HOME, "VNUMA_DB": "/srv/b.db"}, "sqlite:////srv/b.db"),
    ("xdg-default", None, {**HOME, "XDG_DATA_HOME": "/data"}, "sqlite:////data/vnuma/inventory.db"),
    ("home-default", None, HOME, "sqlite:////home/op/.local/share/vnuma/inventory.db"),
    (
        "relative-xdg-ignored",
        None,
        {**HOME, "XDG_DATA_HOME": "rel"},
        "sqlite:////home/op/.local/share/vnuma/inventory.db",
    ),
    (
        "empty-env-is-unset",
        None,
        {**HOME, "VNUMA_DB": ""},
        "sqlite:////home/op/.local/share/vnuma/inventory.db",
    ),
    (
        "url-option",
        "postgresql+psycopg://u@db/inv",
        {**HOME, "VNUMA_DB": "/x"},
        "postgresql+psycopg://u@db/inv",
    ),
    ("url-env", None, {**HOME, "VNUMA_DB": "sqlite:///rel.db"}, "sqlite:///rel.db"),
    ("tilde-path", "~/inv.db", HOME, "sqlite:////home/op/inv.db"),
    ("dotdot-normalised", "/srv/x/../inv.db", HOME, "sqlite:////srv/inv.db"),
]


@pytest.mark.parametrize(("option", "env", "expected"), [r[1:] for r in RESOLVE], ids=[r[0] for r in RESOLVE])
def test_resolve_url(option: str | None, env: dict[str, str], expected: str) -> None:
    """--db, then VNUMA_DB, then the default (the configuration file's place: tests/cli/test_config.py)."""
    assert make_settings(option, env).db_url == expected


def test_a_relative_path_is_made_absolute_against_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_url("inv.db", HOME) == f"sqlite:///{tmp_path}/inv.db"


def test_resolve_url_reads_only_the_mapping_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VNUMA_DB", "/from/os/environ.db")
    monkeypatch.setenv("XDG_DATA_HOME", "/from/os/environ")
    assert resolve_url(None, HOME) == "sqlite:////home/op/.local/share/vnuma/inventory.db"


def test_sqlite_engine_settings(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/deep/er/inv.db")
    try:
        with engine.connect() as conn:
            pragmas = {
                p: conn.exec_driver_sql(f"PRAGMA {p}").scalar()
                for p in ("foreign_keys", "journal_mode", "busy_timeout")
            }
    finally:
        engine.dispose()
    assert pragmas == {"foreign_keys": 1, "journal_mode": "wal", "busy_timeout": 5000}
    assert (tmp_path / "deep" / "er" / "inv.db").exists()


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql+psycopg://vnuma:s3cret@db:5432/inv", "postgresql+psycopg://vnuma:***@db:5432/inv"),
        ("postgresql+psycopg://vnuma@db/inv", "postgresql+psycopg://vnuma@db/inv"),
        ("nonsense://u:s3cret@h:notaport/x", "nonsense://u:***@h:notaport/x"),
    ],
    ids=["password", "no-password", "unparseable"],
)
def test_mask_url(url: str, masked: str) -> None:
    assert mask_url(url) == masked


def test_not_a_database_file(db_path: Path, db_url: str) -> None:
    db_path.write_bytes(b"this is a text file, not SQLite\n" * 200)
    with pytest.raises(InventoryError) as err:
        open_inventory(db_url)
    message = str(err.value)
    assert db_url in message and "not a database" in message and "\n" not in message


def test_a_directory_that_cannot_be_created(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InventoryError, match="cannot create its directory"):
        open_inventory(f"sqlite:///{tmp_path}/afile/inv.db")


def test_a_directory_is_not_a_database_file(tmp_path: Path) -> None:
    with pytest.raises(InventoryError, match=r"unable to open database file") as err:
        open_inventory(f"sqlite:///{tmp_path}")
    assert err.value.hint is not None and "writable" in err.value.hint


def test_a_locked_database_is_an_inventory_error(db_path: Path, db_url: str) -> None:
    open_inventory(db_url).close()
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        with open_inventory(db_url, busy_timeout_ms=50) as inv, pytest.raises(InventoryError) as err:
            inv.add_host(make_host())
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert "database is locked" in str(err.value) and db_url in str(err.value)
    assert err.value.hint is not None and "retry" in err.value.hint


def test_an_unreachable_server_is_reported_with_the_password_masked() -> None:
    pytest.importorskip("psycopg")
    url = "postgresql+psycopg://vnuma:s3cret@127.0.0.1:1/inventory?connect_timeout=2"
    with pytest.raises(InventoryError) as err:
        open_inventory(url)
    message = str(err.value)
    assert "s3cret" not in message and "vnuma:***@127.0.0.1:1/inventory" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "url",
    ["nosuchdb://x/y", "postgresql+nosuchdriver://u@h/db", "postgresql://u@h:port/db"],
    ids=["dialect", "driver", "port"],
)
def test_an_unknown_dialect_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="bad database URL"):
        make_engine(url)
