"""``POST /v1/place`` with ``"alternatives": [{...}]``: the CLI's ``--or`` over HTTP, round trip through the
service and back (the placement says which alternative it got, ``vm show`` and ``GET /v1/vms/NAME`` agree, the
kept request lists every alternative), ``explain`` per alternative, and a bad alternative refused as exit 4."""

from __future__ import annotations

from tests.api.conftest import Service

BODY = {"tenant": "tenant-b", "vcpus": 4, "memory": "8GiB", "numa_nodes": 1, "gpus": 4,
        "alternatives": [{"mig": "3g.40gb:2"}, {"gpus": 2}]}
"""Four GPUs on one cell fit on no demo host (2 GPUs per cell): alternative 1, two MIG instances, does."""


def test_alternatives_round_trip_through_the_service(service: Service) -> None:
    ops = service.as_("ops")
    got = ops.post("/v1/place", json={**BODY, "name": "alt", "explain": True})
    assert got.status_code == 201, got.text
    doc = got.json()
    assert doc["alternative"] == 1
    assert [(d["kind"], d["profile"]) for d in doc["devices"]] == [("mig", "3g.40gb")] * 2
    assert doc["request"]["alternatives"] == [
        {"mig": "3g.40gb:2", "vcpus": 4, "memory": "8GiB"}, {"gpus": 2, "vcpus": 4, "memory": "8GiB"}
    ]
    (unfit,) = doc.pop("explain")["alternatives"]
    assert (unfit["alternative"], unfit["asked"]) == (0, "as asked")
    assert {r["host"] for r in unfit["rejections"]} == {"h1", "h2"}
    read = ops.get("/v1/vms/alt").json()
    assert {k: v for k, v in read.items() if k != "state"} == doc
    shown = service.cli.ok("vm", "show", "alt", "--json").json()
    assert {k: v for k, v in shown.items() if k != "state"} == doc
    again = ops.post("/v1/place", json={**doc["request"], "name": "alt2", "dry_run": True})
    assert again.status_code == 200, again.text  # the kept request is a body POST /v1/place takes
    assert again.json()["alternative"] == 1


def test_a_bad_alternative_is_exit_4_naming_it_and_claims_nothing(service: Service) -> None:
    before = service.cli.ok("vm", "list", "--json").json()
    for alternatives, words in (
        ([{"mig": "9g.99gb"}], "alternative 1 (mig=9g.99gb,vcpus=4,memory=8GiB): no GPU of the fleet offers"),
        ([{"gpus": 1}, {"host": "h1"}], "alternative 2 (host=h1): host cannot change in an alternative"),
    ):
        got = service.as_("ops").post("/v1/place", json={**BODY, "alternatives": alternatives})
        problem = got.json()
        assert got.status_code == 422 and problem["exit_code"] == 4 and words in problem["detail"], got.text
    wrong = service.as_("ops").post("/v1/place", json={**BODY, "alternatives": [{"gpus": "two"}]})
    assert wrong.status_code == 422, wrong.text
    assert service.cli.ok("vm", "list", "--json").json() == before
