"""A trace whose requests list alternatives (``"alternatives": [{...}]``), replayed by ``simulate`` with the engine's
one rule: each request takes the first alternative that fits anywhere, so on a fleet that only fills the
requests (3 GPUs of a cell of 4) take whole GPUs for exactly as long as the same trace without alternatives
places them, then MIG instances."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli.conftest import REPO
from vnuma.errors import InvalidInputError
from vnuma.simulate import INVALID, load_trace, placements_to_list, report_to_dict, run

EXAMPLE = REPO / "examples" / "traces" / "gpu-partitions.json"


def _trace(requests: list[dict[str, Any]]) -> bytes:
    """The example's hosts and MIG geometries with ``requests``."""
    doc = json.loads(EXAMPLE.read_text())
    return json.dumps({**doc, "requests": requests}).encode()


def _asks(n: int, alternatives: bool) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        ask = {"tenant": "t", "name": f"vm{i}", "vcpus": 4, "memory_mib": 8192, "numa_nodes": 1,
               "cpu_policy": "dedicated", "thread_policy": "prefer", "page_size_kib": None, "gpus": 3}
        if alternatives:
            ask["alternatives"] = [{"mig": "3g.40gb:2"}]
        out.append(ask)
    return out


def test_a_replay_takes_the_first_alternative_while_it_fits_anywhere_then_the_next() -> None:
    n = 200
    whole = run(load_trace(_trace(_asks(n, False)), "t.json"))
    either = run(load_trace(_trace(_asks(n, True)), "t.json"))
    first = sum(1 for p in whole.placements if p is not None)
    assert 0 < first < n
    got = [p.alternative if p is not None else None for p in either.placements]
    assert got[:first] == [0] * first  # the same decisions as without alternatives
    assert got[first] == 1  # whole GPUs fit nowhere any more: MIG instances
    assert got == sorted(got, key=lambda a: 2 if a is None else a)  # the fleet only fills: never back to 0
    assert next(p.partitions for p in either.placements[first:] if p is not None)
    doc = report_to_dict(either)
    assert doc["alternative_requests"] == n
    assert doc["placed_by_alternative"] == {"0": first, "1": got.count(1)}
    assert [e["alternative"] for e in placements_to_list(either)] == got


@pytest.mark.parametrize(
    ("alternatives", "words"),
    [
        ([{"mig": "3g.40gb:0"}], "alternative 1 (mig=3g.40gb:0,vcpus=4,memory=8GiB): a VM takes 1 to 64"),
        ([{"numa_nodes": 2}], "alternative 1 (numa_nodes=2): numa_nodes cannot change in an alternative"),
        ("mig=3g.40gb", "alternatives: expected a list of objects"),
    ],
    ids=["zero", "not-a-device", "text"],
)
def test_a_trace_request_with_a_bad_alternative_is_refused_naming_it(alternatives: object, words: str) -> None:
    ask = {**_asks(1, False)[0], "alternatives": alternatives}
    with pytest.raises(InvalidInputError) as caught:
        load_trace(_trace([ask]), "t.json")
    assert words in str(caught.value) and "request 'vm0'" in str(caught.value)


def test_a_request_invalid_only_against_the_fleet_is_a_refusal_with_its_reason_and_the_replay_goes_on() -> None:
    asks = _asks(4, False)
    asks[1]["alternatives"] = [{"mig": "9g.99gb:2"}]  # a profile no GPU of the fleet offers
    asks[2]["gpus"] = 10_000  # more GPUs than the whole fleet has
    report = run(load_trace(_trace(asks), "t.json"))
    assert [p is not None for p in report.placements] == [True, False, False, True]
    assert [c for c in report.rejection_checks] == [None, INVALID, INVALID, None]
    doc = report_to_dict(report)
    assert doc["rejections_by_reason"] == {INVALID: 2}
    assert [(r["name"], r["reason"]) for r in doc["invalid_requests"]] == [
        ("vm1", "VM 'vm1': alternative 1 (mig=9g.99gb:2,vcpus=4,memory=8GiB): no GPU of the fleet offers MIG "
                "profile '9g.99gb'"),
        ("vm2", f"VM 'vm2': asks for 10000 GPUs, the whole fleet has {doc['gpus_total']}"),
    ]


def test_a_profile_no_gpu_offers_is_invalid_as_asked_as_in_an_alternative() -> None:
    """One rule for an unknown profile, wherever the request names it: invalid on the fleet, not a host's refusal."""
    own = {**_asks(1, False)[0], "gpus": 0, "mig": "9g.99gb:2"}
    report = run(load_trace(_trace([own]), "t.json"))
    assert report.rejection_checks == (INVALID,)
    assert report.invalid == ((0, "VM 'vm0': no GPU of the fleet offers MIG profile '9g.99gb'"),)
