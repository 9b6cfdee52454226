"""Shared pytest set-up: hypothesis profiles and the golden-file update flag."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Profiles (HYPOTHESIS_PROFILE picks one; default: "ci" under CI, else "dev"):
# - ci: new random examples on every run; scripts/test passes --hypothesis-seed and prints it,
#   and a failure prints the example and its reproduction blob (@reproduce_failure);
# - fixed: the same examples on every run (a seed derived from each test), for reproducing locally;
# - dev: random, with Hypothesis' example database replaying what failed before.
_QUIET = [HealthCheck.too_slow]
settings.register_profile("ci", derandomize=False, deadline=None, print_blob=True, suppress_health_check=_QUIET)
settings.register_profile("fixed", derandomize=True, deadline=None, database=None, suppress_health_check=_QUIET)
settings.register_profile("dev", deadline=None, suppress_health_check=_QUIET)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(autouse=True)
def _no_site_configuration(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read the developer's configuration file or VNUMA_* defaults (VNUMA_DB stays: scripts set it)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-config"))
    for var in ("VNUMA_CONFIG", "VNUMA_LIBVIRT_URI", "VNUMA_STRATEGY", "VNUMA_PAGE_SIZE", "VNUMA_DOMAIN_TYPE",
                "VNUMA_MEMNODE_MODE"):
        monkeypatch.delenv(var, raising=False)


@pytest.hookimpl(tryfirst=True)  # marks added before any other plugin reads them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that use the ``embedded`` QEMU driver run last: once a process has opened ``qemu:///embed``,
    libvirt hands that process's later ``qemu:///system`` connections to the embedded driver (which refuses
    them: "Missing URI parameter 'root'"), so the real-daemon tests must come first. The order is otherwise
    kept. Those and the real-daemon tests (``tests/integration``) are marked ``system_libvirt``: they share
    the machine's one libvirtd, its domains and its migration peer, so scripts/test runs them in one process,
    in this order, after the others have run on every core (pytest-xdist)."""
    items.sort(key=lambda item: "embedded" in getattr(item, "fixturenames", ()))
    for item in items:
        if "embedded" in getattr(item, "fixturenames", ()) or item.path.parent.name == "integration":
            item.add_marker(pytest.mark.system_libvirt)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", help="rewrite golden files from the renderer")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh database on the PostgreSQL server named by VNUMA_TEST_PG, dropped afterwards.

    scripts/test starts a server and sets VNUMA_TEST_PG; without it these
    tests skip on a laptop, but fail under CI, where skipping would hide them.
    """
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    server = os.environ.get("VNUMA_TEST_PG")
    if not server:
        if os.environ.get("CI"):
            pytest.fail("VNUMA_TEST_PG is not set under CI (scripts/test starts PostgreSQL and sets it)")
        pytest.skip("VNUMA_TEST_PG is not set")
    name = f"vnuma_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty inventory URL: an SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/inventory.db"
    return str(request.getfixturevalue("pg_url"))


TEST_DRIVER_URI = "test:///default"
TEST_DRIVER_STOCK = "test"


@pytest.fixture
def conn() -> Iterator[Any]:
    """An open connection to libvirt's in-process test driver, ``test:///default``, for one test.

    The driver keeps its domains only while some connection to it is open,
    and every test of the process shares them: this holds one for the test
    (so in-process vnuma commands see each other's defines), then undefines
    every domain the test defined and puts the stock running domain ``test``
    back if the test removed it.
    """
    libvirt = pytest.importorskip("libvirt")
    c = libvirt.open(TEST_DRIVER_URI)
    before = {d.name() for d in c.listAllDomains()}
    stock = (
        c.lookupByName(TEST_DRIVER_STOCK).XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        if TEST_DRIVER_STOCK in before
        else None
    )
    yield c
    for dom in c.listAllDomains():
        if dom.name() not in before:
            if dom.isActive():
                dom.destroy()
            dom.undefine()
    if stock is not None and TEST_DRIVER_STOCK not in {d.name() for d in c.listAllDomains()}:
        c.defineXML(stock).create()
    c.close()


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """libvirt's QEMU driver embedded in this process (``qemu:///embed?root=DIR``, no daemon), its event loop
    running in a thread. One per process: libvirt opens the embedded driver at one root only. QEMU logs to a
    file itself (no virtlogd) and, run by root, runs as root with no security driver relabelling the files it
    reads (kernels, initramfs, console files of the guest-boot tests)."""
    import shutil
    import threading

    libvirt = pytest.importorskip("libvirt")
    assert shutil.which("qemu-system-x86_64"), "the QEMU driver needs qemu-system-x86_64 (.ci/run installs it)"
    root = tmp_path_factory.mktemp("embed")
    (root / "etc").mkdir()
    conf = 'stdio_handler = "file"\n'
    if os.geteuid() == 0:
        conf += 'user = "+0"\ngroup = "+0"\nsecurity_driver = "none"\n'
    (root / "etc" / "qemu.conf").write_text(conf)
    libvirt.virEventRegisterDefaultImpl()  # the embedded driver needs an event loop registered, once
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            libvirt.virEventRunDefaultImpl()

    conn = libvirt.open(f"qemu:///embed?root={root}")
    threading.Thread(target=loop, daemon=True).start()
    yield conn
    stop.set()
    conn.close()
