"""`vnuma token`: a token is printed once, only its hash is kept, and bad requests change nothing."""

from __future__ import annotations

import re
import sqlite3

from tests.cli.conftest import Cli, refused_unchanged


def test_create_prints_the_token_once_and_keeps_only_a_hash(cli: Cli) -> None:
    cli.ok("tenant", "create", "tenant-a")
    made = cli.ok("token", "create", "ci", "--role", "tenant", "--tenant", "tenant-a")
    secret = made.stdout.strip()
    assert re.fullmatch(r"vnuma_[0-9a-f]{16}_[A-Za-z0-9_-]{43}", secret)
    assert "shown once" in made.stderr
    conn = sqlite3.connect(cli.db)
    try:
        stored = " ".join(str(v) for row in conn.execute("SELECT * FROM api_tokens") for v in row)
    finally:
        conn.close()
    # The secret is the last 43 characters (base64url: it may itself hold "_", so no split on it).
    assert secret[-43:] not in stored and "$argon2id$" in stored
    listed = cli.ok("token", "list", "--json").json()
    assert listed == [{"name": "ci", "role": "tenant", "tenant": "tenant-a", "created_at": listed[0]["created_at"],
                       "expires_at": None, "revoked_at": None}]
    assert secret not in cli.ok("token", "list").stdout


def test_revoke_keeps_the_row_and_its_first_time(cli: Cli) -> None:
    cli.ok("token", "create", "ops", "--role", "operator", "--expires", "2099-01-01")
    first = cli.ok("token", "revoke", "ops", "--json").json()
    assert first["revoked_at"] is not None and first["expires_at"].startswith("2099-01-01")
    assert cli.ok("token", "revoke", "ops", "--json").json()["revoked_at"] == first["revoked_at"]
    entries = cli.ok("log", "--json").json()
    assert [c["op"] for e in entries for c in e["changes"]][-2:] == ["token-create", "token-revoke"]


def test_bad_token_requests_change_nothing(cli: Cli) -> None:
    cli.ok("tenant", "create", "tenant-a")
    cli.ok("token", "create", "taken", "--role", "reader")
    refused_unchanged(cli, ["token", "create", "x", "--role", "root"], 4, "bad --role")
    refused_unchanged(cli, ["token", "create", "x", "--role", "tenant"], 4, "needs --tenant")
    refused_unchanged(cli, ["token", "create", "x", "--role", "reader", "--tenant", "tenant-a"], 4, "needs --tenant")
    refused_unchanged(cli, ["token", "create", "x", "--role", "tenant", "--tenant", "nobody"], 3, "nobody")
    refused_unchanged(cli, ["token", "create", "taken", "--role", "reader"], 9, "already exists")
    refused_unchanged(cli, ["token", "create", "<b>", "--role", "reader"], 4, "bad token name")
    refused_unchanged(cli, ["token", "create", "x", "--role", "reader", "--expires", "2001-01-01"], 4, "past")
    refused_unchanged(cli, ["token", "create", "x", "--role", "reader", "--expires", "soon"], 4, "--expires")
    refused_unchanged(cli, ["token", "revoke", "nothing"], 3, "unknown token")


def test_serve_refuses_a_bad_listen_address(cli: Cli) -> None:
    cli.ok("host", "list")
    for bad in ("8750", "localhost:99999", "a b:80", "[zz]:80"):
        res = cli.process("serve", "--listen", bad)
        assert res.exit_code == 4 and "bad --listen" in res.stderr and "Traceback" not in res.stderr
