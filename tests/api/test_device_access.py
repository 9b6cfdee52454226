"""Device states through the API: admin and operator tokens change them, readers list them, tenants neither;
the taint names the token; a placement through the service (its warm ledger) never takes a tainted GPU."""

from __future__ import annotations

from tests.api.conftest import Service

GPU = "0000:17:00.0"


def test_who_may_taint_and_list_devices(service: Service) -> None:
    taint = {"reason": "Xid 79"}
    for name in ("watch", "alice"):
        refused = service.as_(name).post(f"/v1/hosts/h1/devices/{GPU}/taint", json=taint)
        assert refused.status_code == 403 and refused.json()["error"] == "ForbiddenError"
    assert service.as_("alice").get("/v1/devices").status_code == 403
    done = service.as_("ops").post(f"/v1/hosts/h1/devices/{GPU}/taint", json=taint)
    assert done.status_code == 200, done.text
    assert (done.json()["state"], done.json()["by"]) == ("tainted", "token:ops")
    listed = service.as_("watch").get("/v1/devices", params={"state": "tainted"}).json()
    assert [(r["host"], r["address"]) for r in listed] == [("h1", GPU)]
    again = service.as_("root").post(f"/v1/hosts/h1/devices/{GPU}/untaint")
    assert again.status_code == 200 and again.json()["state"] is None
    twice = service.as_("root").post(f"/v1/hosts/h1/devices/{GPU}/untaint")
    assert twice.status_code == 409 and twice.json()["error"] == "DeviceStateError" and twice.json()["exit_code"] == 14


def test_a_placement_through_the_service_never_takes_a_tainted_gpu(service: Service) -> None:
    ops = service.as_("ops")
    place = {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "gpus": 1, "host": "h1"}
    first = ops.post("/v1/place", json={**place, "name": "warm-up", "dry_run": True})
    assert first.status_code == 200, first.text  # the service's ledger is warm now
    assert ops.post(f"/v1/hosts/h1/devices/{GPU}/taint", json={"reason": "ECC"}).status_code == 200
    answers = [ops.post("/v1/place", json={**place, "name": f"g{i}"}) for i in range(8)]
    assert [a.status_code for a in answers] == [201] * 7 + [409]  # h1 has 8 GPUs, one tainted
    assert all(GPU not in [d["address"] for d in a.json()["devices"]] for a in answers[:7])
