"""Tokens and roles over real HTTP: who may do what, and what a tenant token never sees."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.api.conftest import Service
from tests.dbdump import dump
from vnuma.services import make_settings
from vnuma.services.tokens import Role, create_token


def _problem(response, status: int, error: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["status"] == status and body["error"] == error
    return body


def test_no_valid_token_is_401_and_changes_nothing(service: Service) -> None:
    before = dump(service.cli.db)
    place = {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB"}
    good = service.tokens["ops"]
    wrong_secret = good[:-1] + ("A" if good[-1] != "A" else "B")
    for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Basic " + good},
                    {"Authorization": "Bearer nonsense"}, {"Authorization": f"Bearer {wrong_secret}"},
                    {"Authorization": "Bearer vnuma_0000000000000000_" + "a" * 43}):
        got = service.as_(None).post("/v1/place", json=place, headers=headers)
        body = _problem(got, 401, "AuthenticationError")
        assert got.headers["www-authenticate"] == "Bearer" and body["exit_code"] == 10
    assert dump(service.cli.db) == before


def test_revoked_and_expired_tokens_are_refused_at_once(service: Service) -> None:
    ops = service.as_("ops")
    assert ops.get("/v1/vms").status_code == 200  # checked once, remembered by the service...
    service.cli.ok("token", "revoke", "ops")
    assert "revoked" in _problem(ops.get("/v1/vms"), 401, "AuthenticationError")["detail"]  # ...but not its row
    settings = make_settings(str(service.cli.db), {})
    _made, secret = create_token(settings, "old", Role.READER, expires=datetime.now(UTC) - timedelta(seconds=1))
    got = service.as_(None).get("/v1/vms", headers={"Authorization": f"Bearer {secret}"})
    assert "expired" in _problem(got, 401, "AuthenticationError")["detail"]


@pytest.mark.parametrize(
    ("token", "method", "path", "body"),
    [
        ("watch", "POST", "/v1/place", {"tenant": "tenant-a", "vcpus": 2, "memory": "4GiB"}),
        ("watch", "POST", "/v1/vms/tenant-a-vm0/release", {}),
        ("ops", "POST", "/v1/tenants", {"name": "tenant-z"}),
        ("ops", "DELETE", "/v1/tenants/tenant-b", None),
        ("ops", "POST", "/v1/hosts/h1/cordon", None),
        ("ops", "GET", "/v1/tokens", None),
        ("alice", "GET", "/v1/hosts", None),
        ("alice", "GET", "/v1/stats", None),
        ("alice", "POST", "/v1/capacity", {"shapes": ["vcpus=2,memory=4GiB"]}),
        ("alice", "POST", "/v1/place", {"tenant": "tenant-b", "vcpus": 2, "memory": "4GiB"}),
        ("alice", "POST", "/v1/tokens", {"name": "mine", "role": "admin"}),
        ("alice", "POST", "/v1/hosts", {"name": "h9", "demo": True}),
        ("ops", "POST", "/v1/hosts/h1/reserve", {"cpus": "0-1"}),
        ("ops", "POST", "/v1/hosts/h1/refresh", None),
        ("ops", "DELETE", "/v1/hosts/h1", None),
        ("watch", "POST", "/v1/vms/tenant-a-vm0/apply", {}),
        ("watch", "POST", "/v1/vms/tenant-a-vm0/start", None),
        ("alice", "POST", "/v1/vms/tenant-a-vm0/repin", {"cells": "3"}),
        ("watch", "POST", "/v1/vms/tenant-a-vm0/migrate", {"to": "h2"}),
        ("alice", "POST", "/v1/vms/tenant-a-vm0/migrate", {"to": "h2"}),
        ("ops", "POST", "/v1/hosts/h1/drain", {}),
        ("watch", "POST", "/v1/rebalance", {"objective": "fragmentation", "apply": True}),
        ("alice", "POST", "/v1/rebalance/resume", None),
        ("watch", "POST", "/v1/rebalance/abort", None),
    ],
)
def test_roles_refuse_what_they_do_not_allow(
    service: Service, token: str, method: str, path: str, body: dict | None
) -> None:
    before = dump(service.cli.db)
    got = service.as_(token).request(method, path, json=body)
    assert _problem(got, 403, "ForbiddenError")["exit_code"] == 11
    assert dump(service.cli.db) == before


def test_a_tenant_token_sees_and_touches_only_its_tenant(service: Service) -> None:
    alice = service.as_("alice")
    assert [v["vm"] for v in alice.get("/v1/vms").json()] == ["tenant-a-vm0"]
    assert [t["name"] for t in alice.get("/v1/tenants").json()] == ["tenant-a"]
    # Another tenant's VM and tenant answer exactly as names that do not exist.
    for existing, missing in (("/v1/vms/tenant-b-vm0", "/v1/vms/tenant-b-vm9"),
                              ("/v1/tenants/tenant-b", "/v1/tenants/tenant-q"),
                              ("/v1/vms?tenant=tenant-b", "/v1/vms?tenant=tenant-q")):
        seen, absent = alice.get(existing), alice.get(missing)
        assert seen.status_code == absent.status_code == 404
        words = {k: v for k, v in seen.json().items() if k != "detail"}
        assert words == {k: v for k, v in absent.json().items() if k != "detail"}
        name, other = existing.rsplit("/", 1)[-1].split("=")[-1], missing.rsplit("/", 1)[-1].split("=")[-1]
        assert seen.json()["detail"] == absent.json()["detail"].replace(other, name)
    before = dump(service.cli.db)
    for action in ("release", "render", "apply", "start", "stop"):
        _problem(alice.post(f"/v1/vms/tenant-b-vm0/{action}", json={}), 404, "NotFoundError")
    assert dump(service.cli.db) == before
    # Its own: placed for its tenant without naming it, and released.
    made = alice.post("/v1/place", json={"vcpus": 2, "memory": "4GiB"})
    assert made.status_code == 201 and made.json()["tenant"] == "tenant-a"
    assert alice.post(f"/v1/vms/{made.json()['vm']}/release", json={}).status_code == 200


def test_admin_manages_tokens_and_a_new_token_works(service: Service) -> None:
    root = service.as_("root")
    made = root.post("/v1/tokens", json={"name": "robot", "role": "reader", "expires": "30d"})
    assert made.status_code == 201, made.text
    secret = made.json()["token"]
    assert made.json()["expires_at"] is not None
    listed = root.get("/v1/tokens").json()
    assert {t["name"] for t in listed} >= {"robot", "root"} and all("token" not in t for t in listed)
    robot = {"Authorization": f"Bearer {secret}"}
    assert service.as_(None).get("/v1/hosts", headers=robot).status_code == 200
    assert root.post("/v1/tokens/robot/revoke").json()["revoked_at"] is not None
    assert service.as_(None).get("/v1/hosts", headers=robot).status_code == 401
