"""Bad requests get their documented status and a problem body, and change nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import Service, prepared, start
from tests.cli.conftest import Cli
from tests.dbdump import dump

PLACE = {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB"}


@pytest.mark.parametrize(
    ("content", "status", "kind"),
    [
        (b'{"tenant": "tenant-a", "vcpus": 2,', 400, "malformed"),
        (b"[1, 2, 3]", 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": "2", "memory": "4GiB"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": 2.0, "memory": "4GiB"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": true, "memory": "4GiB"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "colour": "red"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4XB"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "cpu_policy": "greedy"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": -2, "memory": "4GiB"}', 422, "invalid-input"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "name": "<b>x</b>"}', 422, "invalid-input"),
        (b'{"tenant": "nobody", "vcpus": 2, "memory": "4GiB"}', 404, "not-found"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "host": "../h1"}', 404, "not-found"),
        (b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "name": "tenant-b-vm0"}', 409, "conflict"),
    ],
)
def test_bad_place_bodies(service: Service, content: bytes, status: int, kind: str) -> None:
    before = dump(service.cli.db)
    got = service.as_("ops").post("/v1/place", content=content, headers={"Content-Type": "application/json"})
    assert got.status_code == status, got.text
    assert got.headers["content-type"] == "application/problem+json"
    body = got.json()
    assert body["type"] == f"urn:vnuma:problem:{kind}" and body["status"] == status and body["detail"]
    assert dump(service.cli.db) == before


@pytest.mark.parametrize("name", ["bad 10", "a;b", "x$(id)"])
def test_a_bad_host_name_is_refused_by_the_api_too(service: Service, name: str) -> None:
    before = dump(service.cli.db)
    got = service.as_("root").post("/v1/hosts", json={"name": name, "demo": True})
    assert got.status_code == 422 and f"bad host name {name!r}" in got.json()["detail"], got.text
    assert dump(service.cli.db) == before


def test_a_body_that_is_not_json_is_415(service: Service) -> None:
    got = service.as_("ops").post("/v1/place", data={"tenant": "tenant-a"})
    assert got.status_code == 415 and "application/json" in got.json()["hint"]


@pytest.mark.parametrize(
    "path",
    ["/v1/vms/..%2F..%2Fetc%2Fpasswd", "/v1/vms/%00", "/v1/hosts/h1%0Aevil", "/v1/vms/a'%20OR%20'1'='1",
     "/v1/nothing", "/v2/hosts"],
)
def test_path_tricks_are_unknown_names(service: Service, path: str) -> None:
    got = service.as_("root").get(path)
    assert got.status_code == 404 and got.headers["content-type"] == "application/problem+json"


def test_oversize_bodies_are_413_declared_or_streamed(service: Service) -> None:
    before = dump(service.cli.db)
    big = b'{"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB", "name": "' + b"x" * (2 << 20) + b'"}'
    ops = service.as_("ops")
    declared = ops.post("/v1/place", content=big, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413 and declared.json()["type"] == "urn:vnuma:problem:too-large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 65536):
            yield big[i:i + 65536]

    streamed = ops.post("/v1/place", content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413
    assert dump(service.cli.db) == before


def test_requests_over_the_rate_are_429(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    base, proc = start(str(cli.db), tmp_path / "serve.log", "--rate-limit", "0.5", "--burst", "3")
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {tokens['watch']}"}) as watch:
            codes = [watch.get("/v1/hosts").status_code for _ in range(4)]
            assert codes == [200, 200, 200, 429]
            refused = watch.get("/v1/hosts")
            assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
            assert refused.json()["type"] == "urn:vnuma:problem:rate-limited"
        # Buckets are per token: another token is not held back.
        other = httpx.get(f"{base}/v1/hosts", headers={"Authorization": f"Bearer {tokens['root']}"})
        assert other.status_code == 200
    finally:
        proc.terminate()
        proc.wait(10)
