"""A request with alternatives that loses its claim: the locked host may give the alternative decided (or an
earlier one), never a later one while the one decided fits on another host; then the whole fleet decides
again, as for a request whose host has no room left."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.cli.conftest import Cli
from vnuma.inventory.placer import Placer, open_placer
from vnuma.inventory.reading import Snapshot
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import Tenant
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.placing import Cold, place_vm
from vnuma.services.requests import place_request


class Stale(Cold):
    """The first attempt decides on a snapshot taken earlier (what a racer's claim made stale); the next
    attempts on new ones."""

    def __init__(self, snap: Snapshot) -> None:
        super().__init__()  # the later attempts read every host
        self.snap = snap

    @contextmanager
    def viewing(self, placer: Placer, *, attempt: int) -> Iterator[tuple[Fleet, Mapping[str, Tenant]]]:
        if attempt:
            with super().viewing(placer, attempt=attempt) as seen:
                yield seen
            return
        yield Fleet(self.snap.hosts, self.snap.placements, self.snap.tenants.values()), self.snap.tenants


def test_a_lost_claim_does_not_take_a_later_alternative_while_the_decided_one_fits_elsewhere(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    for host in ("h1", "h2"):
        cli.ok("host", "add", host, "--demo")
    cli.ok("tenant", "create", "t")
    small = ("--vcpus", "8", "--memory", "8GiB", "--page-size", "4K")
    cli.ok("place", "t", "--gpus", "8", *small, "--host", "h2", "--name", "x")
    url = f"sqlite:///{cli.db}"
    with open_placer(url) as placer:
        stale = placer.snapshot()  # h2's GPUs all taken: 8 GPUs fit on h1 only
    cli.ok("vm", "release", "x")
    cli.ok("place", "t", "--gpus", "1", *small, "--host", "h1", "--name", "racer")  # now they fit on h2 only
    request = place_request({"tenant": "t", "name": "v", "gpus": 8, "vcpus": 8, "memory": "8GiB", "page_size": "4K",
                             "alternatives": ["gpus=1"]}, page_size_default="large")
    _, result = place_vm(Settings(url), request, Strategy.PACK, dry_run=False, view=Stale(stale))
    assert result.chosen is not None
    assert (result.chosen.host, result.chosen.alternative, len(result.chosen.devices)) == ("h2", 0, 8)
