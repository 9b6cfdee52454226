"""``POST /v1/place`` with ``cpu_policy: mixed`` and ``dedicated_vcpus``: the CLI's contract over HTTP."""

from __future__ import annotations

from tests.api.conftest import Service


def test_a_mixed_vm_is_placed_through_the_service_as_through_the_cli(service: Service) -> None:
    body = {"tenant": "tenant-b", "vcpus": 8, "memory": "16GiB", "cpu_policy": "mixed", "dedicated_vcpus": "0-2,6"}
    got = service.as_("ops").post("/v1/place", json=body)
    assert got.status_code == 201, got.text
    doc = got.json()
    assert (doc["cpu_policy"], doc["dedicated_vcpus"]) == ("mixed", [0, 1, 2, 6])
    shown = service.cli.ok("vm", "show", doc["vm"], "--json").json()
    assert {k: v for k, v in shown.items() if k != "state"} == doc


def test_a_bad_mixed_request_is_the_clis_exit_4_and_claims_nothing(service: Service) -> None:
    before = service.cli.ok("vm", "list", "--json").json()
    for extra, words in (
        ({"cpu_policy": "mixed"}, "cpu policy mixed needs the vCPUs to dedicate"),
        ({"dedicated_vcpus": "0"}, "--dedicated-vcpus needs cpu policy mixed"),
        ({"cpu_policy": "mixed", "dedicated_vcpus": "0-7"}, "every vCPU is dedicated"),
    ):
        got = service.as_("ops").post("/v1/place", json={"tenant": "tenant-b", "vcpus": 8, "memory": "16GiB", **extra})
        problem = got.json()
        assert got.status_code == 422 and problem["exit_code"] == 4 and words in problem["detail"], got.text
    assert service.cli.ok("vm", "list", "--json").json() == before
