"""``place_vm``'s bounded retry of a lost claim, driven deterministically in one process.

A claim that loses (ConflictError from the claiming transaction) is planned
again on the new state; after ``CLAIM_ATTEMPTS`` losses the command ends in
one "inventory busy" ConflictError, and a VM name taken by a racer is
reported as such instead of being retried. Both executors are driven: the
stdlib-sqlite3 one ``place`` takes on a plain SQLite file, and the SQLAlchemy
one (forced here by a URL option, as PostgreSQL always takes it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.concurrency.racing import make_fleet
from vnuma.errors import ConflictError
from vnuma.inventory import open_inventory
from vnuma.inventory.placer import Placer
from vnuma.placement.engine import place
from vnuma.placement.model import Isolation, Placement, VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings, placing
from vnuma.topology import KIB_PER_GIB, PAGE_1G

REQUEST = VmRequest("vm1", "acme", vcpus=2, memory_kib=2 * KIB_PER_GIB, page_size_kib=PAGE_1G)


@pytest.fixture(params=["sqlite3", "sqlalchemy"])
def claimer(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Settings, Any]:
    """Settings whose ``place_vm`` claims through the class returned beside them."""
    url = f"sqlite:///{tmp_path}/inventory.db"
    make_fleet(url, hosts=2)
    if request.param == "sqlite3":
        return Settings(db_url=url), Placer
    return Settings(db_url=f"{url}?timeout=5"), Placer


Claim = Callable[..., Any]


def _losing(
    real: Claim, times: int, calls: list[Placement], racer: Callable[[Any], None] | None = None
) -> Claim:
    """A claim that loses its first ``times`` calls (after running ``racer``), then is ``real``."""

    def claim(self: Any, p: Placement, isolation: Isolation | None = None, refit: Any = None, **how: Any) -> Any:
        calls.append(p)
        if len(calls) <= times:
            if racer is not None:
                racer(self)
            raise ConflictError(f"host {p.host!r}: pCPU(s) taken by a racer")
        return real(self, p, isolation, refit, **how)

    return claim


@pytest.mark.parametrize("losses", [1, placing.CLAIM_ATTEMPTS - 1], ids=["once", "all-but-last"])
def test_a_lost_claim_is_planned_again_and_recorded(
    claimer: tuple[Settings, Any], monkeypatch: pytest.MonkeyPatch, losses: int
) -> None:
    settings, cls = claimer
    calls: list[Placement] = []
    monkeypatch.setattr(cls, "claim", _losing(cls.claim, losses, calls))
    monkeypatch.setattr(placing, "RETRY_PAUSE_S", 0.0)
    _request, result = placing.place_vm(settings, REQUEST, Strategy.PACK, dry_run=False)
    assert len(calls) == losses + 1
    with open_inventory(settings.db_url) as inv:
        assert inv.get_vm("vm1")[0] == result.chosen


def test_a_claim_that_keeps_losing_ends_in_inventory_busy(
    claimer: tuple[Settings, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, cls = claimer
    calls: list[Placement] = []
    monkeypatch.setattr(cls, "claim", _losing(cls.claim, 10**6, calls))
    monkeypatch.setattr(placing, "RETRY_PAUSE_S", 0.0)
    busy = rf"^inventory busy: VM 'vm1' lost its claim .* {placing.CLAIM_ATTEMPTS} times"
    with pytest.raises(ConflictError, match=busy) as err:
        placing.place_vm(settings, REQUEST, Strategy.PACK, dry_run=False)
    assert err.value.hint is not None and "run the command again" in err.value.hint
    assert len(calls) == placing.CLAIM_ATTEMPTS
    with open_inventory(settings.db_url) as inv:
        assert inv.list_vms() == []


def test_a_name_taken_by_a_racer_is_not_retried(
    claimer: tuple[Settings, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, cls = claimer
    real = cls.claim

    def racer(placer: Placer) -> None:
        with placing.Cold().viewing(placer, attempt=0) as (fleet, _tenants):
            other = place(REQUEST, fleet, Strategy.PACK, explain=False).chosen
        assert other is not None
        real(placer, other, None)

    calls: list[Placement] = []
    monkeypatch.setattr(cls, "claim", _losing(real, 1, calls, racer))
    with pytest.raises(ConflictError, match=r"^VM 'vm1' already exists"):
        placing.place_vm(settings, REQUEST, Strategy.PACK, dry_run=False)
    assert len(calls) == 1


def test_a_claim_beaten_on_its_pcpus_refits_on_the_locked_host(
    claimer: tuple[Settings, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A racer claims the very pCPUs this VM chose, first: the claim chooses again on that host, under its
    lock, and records that (one claim, no new decision on the fleet)."""
    settings, cls = claimer
    real = cls.claim
    calls: list[Placement] = []

    def racing(self: Any, p: Placement, isolation: Isolation | None = None, refit: Any = None, **how: Any) -> Any:
        calls.append(p)
        if len(calls) == 1:
            real(self, replace(p, vm="racer"), None)  # the same pCPUs, pages and host, another VM
        return real(self, p, isolation, refit, **how)

    monkeypatch.setattr(cls, "claim", racing)
    _request, result = placing.place_vm(settings, REQUEST, Strategy.PACK, dry_run=False)
    assert len(calls) == 1 and result.chosen is not None  # one claim: refitted inside it
    assert result.chosen.host == calls[0].host
    assert result.chosen.dedicated_pcpus.isdisjoint(calls[0].dedicated_pcpus)
    with open_inventory(settings.db_url) as inv:
        assert inv.get_vm("vm1")[0] == result.chosen
        assert inv.get_vm("racer")[0] == replace(calls[0], vm="racer")
