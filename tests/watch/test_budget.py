"""The acting budget (vnuma/watch/budget.py) holds over any stream of asks: however many VMs are noisy at once,
the moves it admits never exceed the limits."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from vnuma.watch.budget import HOUR_S, Ask, Budget, Counted, withheld

HOSTS = ("h1", "h2", "h3")
VMS = tuple(f"vm{i}" for i in range(8))

asks = st.lists(
    st.tuples(
        st.sampled_from(VMS[:4]), st.sampled_from(HOSTS), st.sampled_from((None, *HOSTS)),
        st.integers(0, 900),  # seconds since the ask before: bursts and lulls
        st.integers(0, 9).map(lambda k: k == 0),  # the tenant opted out (now and then)
        st.sampled_from((frozenset(),) * 6 + tuple(frozenset({h}) for h in HOSTS)),  # the cordoned hosts
        st.sampled_from(((0,), (1,), (0, 1))),  # the cells it leaves
        st.sampled_from(((0,), (1,), (0, 1))),  # the cells it goes to
    ),
    min_size=10, max_size=150,
)
budgets = st.builds(Budget, st.integers(0, 4), st.integers(0, 8), st.integers(60, 2 * HOUR_S),
                    st.integers(0, 4 * HOUR_S), st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(budgets, asks)
def test_the_moves_admitted_never_exceed_the_budget(budget: Budget, stream: list[tuple]) -> None:
    done: list[tuple[Counted, Ask]] = []
    at = 1_800_000_000.0
    for vm, host, to_host, gap, opted_out, cordoned, cells, to_cells in stream:
        at += gap
        ask = Ask(vm, "t", host, to_host, at, cordoned, opted_out, to_cells)
        reason = withheld(budget, ask, [c for c, _ in done])
        if reason is None:
            done.append((Counted(vm, host, at, cells), ask))
        else:
            assert reason  # every move withheld says why
    for c, ask in done:
        hour = [d for d, _ in done if c.at_s - HOUR_S < d.at_s <= c.at_s]
        assert len(hour) <= budget.fleet_hour
        assert sum(1 for d in hour if d.host == c.host) <= budget.host_hour
        assert not ask.opted_out
        assert not {ask.host, ask.to_host} & ask.cordoned
        assert budget.allow_migrate or ask.to_host in (None, ask.host)
        assert not any(d.vm == c.vm and (d.host, d.left) == (ask.to_host, ask.to_cells)
                       and c.at_s - budget.return_s < d.at_s <= c.at_s for d, _ in done if d is not c)
    for vm in VMS:
        times = [c.at_s for c, _ in done if c.vm == vm]
        assert all(b - a >= budget.cooldown_s for a, b in pairwise(times))


def test_every_vm_noisy_at_once_moves_no_more_than_the_budget() -> None:
    budget = Budget(host_hour=2, fleet_hour=3, cooldown_s=3600)
    done: list[Counted] = []
    reasons = []
    for vm in VMS:  # eight VMs on two hosts, all noisy in the same round
        host = HOSTS[VMS.index(vm) % 2]
        reason = withheld(budget, Ask(vm, "t", host, None, 1000.0), done)
        if reason is None:
            done.append(Counted(vm, host, 1000.0))
        reasons.append(reason)
    assert [c.vm for c in done] == ["vm0", "vm1", "vm2"]
    fleet = "fleet: 3 moves in the last hour, the most allowed (moves_per_hour in the [watch] table)"
    host = "host h1: 2 moves in the last hour, the most allowed (moves_per_host_hour in the [watch] table)"
    assert reasons[3:] == [fleet, host, fleet, host, fleet]
    later = withheld(budget, Ask("vm0", "t", "h1", None, 1000.0 + 1800), done)  # still the same hour
    assert later == "VM vm0 is in its cooldown after a move, until 1970-01-01T01:16:40+00:00 (cooldown in the " \
        "[watch] table)"
    assert withheld(budget, Ask("vm7", "t", "h2", None, 1000.0 + HOUR_S), done) is None  # an hour on


def test_what_is_withheld_before_the_counts() -> None:
    budget = Budget()
    assert withheld(budget, Ask("v", "acme", "h1", None, 0.0, opted_out=True), []) == (
        "tenant acme opted out of automatic moves (vnuma tenant update acme --auto-move)")
    assert withheld(budget, Ask("v", "acme", "h1", "h2", 0.0, frozenset({"h2"})), []) == (
        "host h2 is cordoned: nothing moves on it")
    assert withheld(budget, Ask("v", "acme", "h1", "h2", 0.0), []) == (
        "no re-pin on h1 helps; migrating v to h2 needs --allow-migrate")
    assert withheld(Budget(allow_migrate=True), Ask("v", "acme", "h1", "h2", 0.0), []) is None
