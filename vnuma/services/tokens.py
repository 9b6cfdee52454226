"""API tokens: create (printed once), list, revoke, and authenticate a bearer token.

A token reads ``vnuma_KEY_SECRET``: ``KEY`` (16 hex digits) names its row,
``SECRET`` (43 URL-safe characters, 256 bits) is checked against the
argon2id hash stored there; the secret itself is never stored, so a lost
token is revoked and replaced, never recovered. Roles:

* ``reader``: reads everything (hosts, tenants, VMs, stats, capacity);
* ``operator``: a reader that also places, releases and applies VMs of any tenant;
* ``tenant``: places, lists, shows and releases only the VMs of its own
  tenant, and sees nothing of other tenants (their VMs are "unknown");
* ``admin``: everything, hosts, tenants and tokens included.

Checking argon2 takes tens of milliseconds by design; a process that
serves requests (:class:`Authenticator`) checks each distinct token once
and keeps the result, but still reads the row on every request, so a
revocation or an expiry takes effect at once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from vnuma.errors import AuthenticationError, InvalidInputError
from vnuma.inventory.access import open_access
from vnuma.inventory.tokens import TokenRecord, add_token, list_tokens, revoke_token, token_by_key
from vnuma.services import Settings
from vnuma.services.audit import parse_since
from vnuma.services.names import check_name

if TYPE_CHECKING:
    from argon2 import PasswordHasher

_TOKEN = re.compile(r"^vnuma_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")


class Role(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    READER = "reader"
    TENANT = "tenant"


@dataclass(frozen=True, slots=True)
class Token:
    """A token as callers see it: no hash, no secret."""

    name: str
    role: Role
    tenant: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None

    def as_dict(self) -> dict[str, str | None]:
        """``token list --json`` rows: {"name", "role", "tenant", "created_at", "expires_at", "revoked_at"}."""
        return {
            "name": self.name, "role": self.role.value, "tenant": self.tenant, "created_at": self.created_at,
            "expires_at": self.expires_at, "revoked_at": self.revoked_at,
        }


def _public(r: TokenRecord) -> Token:
    return Token(r.name, Role(r.role), r.tenant, r.created_at, r.expires_at, r.revoked_at)


def _hasher() -> PasswordHasher:
    """argon2id with argon2-cffi's defaults; imported only where a token is made or checked."""
    from argon2 import PasswordHasher

    return PasswordHasher()


def _now() -> datetime:
    return datetime.now(UTC)


def parse_expires(text: str, now: datetime | None = None) -> datetime:
    """``--expires``: an age from now (``30d``, ``12h``, ``1w``) or an ISO date or time in the future.

    Raises:
        InvalidInputError: anything else, or a time already past.
    """
    now = now or _now()
    text = text.strip()
    read = parse_since(text, now, "--expires")  # an age reads as that long ago
    when = now + (now - read) if re.fullmatch(r"\d+\s*[smhdw]", text) else read
    if when <= now:
        raise InvalidInputError(f"bad --expires {text!r}: it is already past", hint="e.g. --expires 90d")
    return when


def create_token(
    settings: Settings, name: str, role: Role, tenant: str | None = None, expires: datetime | None = None
) -> tuple[Token, str]:
    """Make a token; returns it and the bearer string (shown once, never stored).

    Raises:
        InvalidInputError: a bad name; a ``tenant`` role without a tenant, or a tenant for another role.
        NotFoundError: an unknown tenant.
        ConflictError: a token of that name exists.
    """
    check_name(name, "token")
    if (role is Role.TENANT) != (tenant is not None):
        raise InvalidInputError(
            "a tenant token needs --tenant T, and only a tenant token takes one",
            hint="vnuma token create NAME --role tenant --tenant T",
        )
    if tenant is not None:
        from vnuma.services.tenants import tenant_rows

        tenant_rows(settings, tenant)  # NotFoundError for an unknown tenant
    key, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    record = TokenRecord(
        key=key, name=name, role=role.value, tenant=tenant, secret_hash=_hasher().hash(secret),
        created_at=_now().isoformat(timespec="seconds"),
        expires_at=expires.astimezone(UTC).isoformat(timespec="seconds") if expires else None, revoked_at=None,
    )
    with open_access(settings.db_url) as access, access.begin(True) as x:
        add_token(x, record)
    return _public(record), f"vnuma_{key}_{secret}"


def tokens(settings: Settings) -> list[Token]:
    """Every token (revoked ones too), by name."""
    with open_access(settings.db_url) as access, access.begin(False) as x:
        return [_public(r) for r in list_tokens(x)]


def revoke(settings: Settings, name: str) -> Token:
    """Revoke token ``name`` now (at once, for every serving process); the token as it is now.

    Raises:
        NotFoundError: no token of that name.
    """
    at = _now().isoformat(timespec="seconds")
    with open_access(settings.db_url) as access, access.begin(True) as x:
        before = revoke_token(x, name, at)
    token = _public(before)
    return token if token.revoked_at else replace(token, revoked_at=at)


class Authenticator:
    """Checks bearer tokens for a serving process: argon2 once per distinct token, the row every time."""

    def __init__(self, settings: Settings, *, remember: int = 4096) -> None:
        self._settings = settings
        self._checked: dict[bytes, str] = {}  # sha256 of a token already verified -> its key
        self._remember = remember

    def authenticate(self, bearer: str | None) -> Token:
        """The live token ``bearer`` is.

        Raises:
            AuthenticationError: no token, a malformed one, an unknown, wrong, revoked or expired one.
        """
        if not bearer:
            raise AuthenticationError("no token", hint="send Authorization: Bearer TOKEN (vnuma token create)")
        m = _TOKEN.match(bearer)
        if m is None:
            raise AuthenticationError("malformed token", hint="tokens read vnuma_KEY_SECRET")
        key, secret = m.groups()
        with open_access(self._settings.db_url) as access, access.alone() as x:
            record = token_by_key(x, key)
        if record is None:
            raise AuthenticationError("unknown token")
        digest = hashlib.sha256(bearer.encode()).digest()
        if self._checked.get(digest) != key:
            from argon2.exceptions import VerificationError

            try:
                _hasher().verify(record.secret_hash, secret)
            except VerificationError:
                raise AuthenticationError("wrong token") from None
            if len(self._checked) >= self._remember:
                self._checked.clear()
            self._checked[digest] = key
        if record.revoked_at is not None:
            raise AuthenticationError(f"token {record.name!r} was revoked at {record.revoked_at}")
        if record.expires_at is not None and datetime.fromisoformat(record.expires_at) <= _now():
            raise AuthenticationError(f"token {record.name!r} expired at {record.expires_at}")
        return _public(record)
