"""API token rows: add, find by key, list, revoke (SQL text on any :class:`Executor`).

A row keeps the token's public ``key``, a slow hash of its secret (the
secret itself is never stored), its role, the tenant a ``tenant`` token acts
for, and when it was made, expires and was revoked (ISO times, UTC).
Creating and revoking are logged in the same transaction (:mod:`.audit`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vnuma.errors import ConflictError, NotFoundError
from vnuma.inventory import audit
from vnuma.inventory.executor import Executor, Refused, Row

_COLUMNS = "key, name, role, tenant, secret_hash, created_at, expires_at, revoked_at"
_HINT = "see `vnuma token list`"


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """One stored token (the hash, never the secret)."""

    key: str
    name: str
    role: str
    tenant: str | None
    secret_hash: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None


def _record(row: Row) -> TokenRecord:
    return TokenRecord(*row)


def add_token(x: Executor, t: TokenRecord) -> None:
    """Insert a token.

    Raises:
        ConflictError: a token of that name exists (revoked ones keep their name).
    """
    if x.one("SELECT 1 FROM api_tokens WHERE name = :name", {"name": t.name}) is not None:
        raise ConflictError(f"token {t.name!r} already exists", hint=_HINT)
    try:
        x.run(
            f"INSERT INTO api_tokens ({_COLUMNS}) VALUES (:key, :name, :role, :tenant, :secret_hash, :created_at, "
            ":expires_at, :revoked_at)",
            {
                "key": t.key, "name": t.name, "role": t.role, "tenant": t.tenant, "secret_hash": t.secret_hash,
                "created_at": t.created_at, "expires_at": t.expires_at, "revoked_at": t.revoked_at,
            },
        )
    except Refused as err:  # a concurrent create of the same name
        raise ConflictError(f"token {t.name!r} already exists", hint=_HINT) from err
    audit.record(x, "token-create", token=t.name, role=t.role, tenant=t.tenant, expires_at=t.expires_at)


def token_by_key(x: Executor, key: str) -> TokenRecord | None:
    """The token whose public key is ``key`` (None: no such token)."""
    row = x.one(f"SELECT {_COLUMNS} FROM api_tokens WHERE key = :key", {"key": key})
    return _record(row) if row is not None else None


def list_tokens(x: Executor) -> list[TokenRecord]:
    """Every token, revoked ones included, by name."""
    return [_record(r) for r in x.rows(f"SELECT {_COLUMNS} FROM api_tokens ORDER BY name")]


def revoke_token(x: Executor, name: str, at: str) -> TokenRecord:
    """Mark token ``name`` revoked at ``at`` (a token revoked already keeps its first time); the token before.

    Raises:
        NotFoundError: no token of that name.
    """
    row = x.one(f"SELECT {_COLUMNS} FROM api_tokens WHERE name = :name{x.lock}", {"name": name})
    if row is None:
        raise NotFoundError(f"unknown token {name!r}", hint=_HINT)
    before = _record(row)
    if before.revoked_at is None:
        x.run("UPDATE api_tokens SET revoked_at = :at WHERE name = :name", {"at": at, "name": name})
        audit.record(x, "token-revoke", token=name, tenant=before.tenant)
    return before
