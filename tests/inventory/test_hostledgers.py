"""A claim reuses the one-host ledger its process's previous claim on the host left only while the rows it
stands for are what the claim reads (vnuma/inventory/hostledgers.py), on both backends."""

from __future__ import annotations

import pytest

from tests.builders import make_host
from tests.inventory.conftest import placement
from vnuma.errors import ConflictError
from vnuma.inventory import hostledgers, open_inventory, upgrade
from vnuma.inventory.placer import open_placer
from vnuma.inventory.placing import claim
from vnuma.placement.model import Isolation, Tenant


def _filled(url: str) -> str:
    upgrade(url)
    with open_inventory(url) as inv:
        inv.add_host(make_host("host-a", gpus_per_cell=2))
        inv.add_tenant(Tenant("acme", Isolation.CORE))
    return url


def test_consecutive_claims_on_a_host_reuse_its_ledger_and_still_refuse_what_it_holds(url: str) -> None:
    kept = hostledgers.KEPT
    with open_placer(_filled(url)) as placer:
        placer.claim(placement("vm1", (2, 18)))
        hits = kept.hits
        placer.claim(placement("vm2", (3, 19)))
        assert kept.hits == hits + 1
        # The kept ledger holds both: a VM on either's pCPUs is refused, on the ledger found kept.
        with pytest.raises(ConflictError):
            placer.claim(placement("clash", (3,)))
        assert kept.hits == hits + 2
        placer.claim(placement("vm3", (4, 20)))  # the refused claim kept nothing: built again
        assert kept.hits == hits + 2
        placer.claim(placement("vm4", (5, 21)))
        assert kept.hits == hits + 3


def test_a_release_by_another_connection_is_read_not_the_kept_ledger(url: str) -> None:
    kept = hostledgers.KEPT
    with open_placer(_filled(url)) as placer:
        placer.claim(placement("vm1", (2, 18)))
        with open_inventory(url) as inv:
            inv.release("vm1")
        hits = kept.hits
        placer.claim(placement("again", (2, 18)))  # the kept ledger still holds vm1 on them
        assert kept.hits == hits


def test_a_claim_rolled_back_leaves_no_ledger_that_holds_it(url: str) -> None:
    kept = hostledgers.KEPT
    with open_placer(_filled(url)) as placer:
        placer.claim(placement("vm1", (2, 18)))
        with pytest.raises(RuntimeError, match="rolled back"), placer._access.begin(True) as x:
            claim(x, placement("gone", (3, 19)), url=placer.url)
            raise RuntimeError("rolled back")
        hits = kept.hits
        placer.claim(placement("vm2", (3, 19)))
        assert kept.hits == hits
