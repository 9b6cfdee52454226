"""Who may do what: the bearer token of a request, its role, and the tenant a tenant token is kept to.

Every request but ``GET /openapi.json`` and ``/docs`` carries
``Authorization: Bearer TOKEN``; no valid token is 401 and changes
nothing. Roles (see :mod:`vnuma.services.tokens`): fleet-wide reads (hosts,
stats, capacity) are for ``reader``, ``operator`` and ``admin``; VM and
tenant reads also for ``tenant`` tokens, which see only their own tenant;
placing and releasing for ``operator``, ``admin`` and ``tenant`` (its own
tenant's VMs only); moving VMs (repin, migrate, rebalance runs) for
``operator`` and ``admin``; hosts (drain included), tenants and tokens
change for ``admin`` only.
"""

from __future__ import annotations

from vnuma.errors import ForbiddenError
from vnuma.services.tokens import Role, Token

FLEET_READ = frozenset({Role.ADMIN, Role.OPERATOR, Role.READER})
"""Hosts, stats, capacity: what shows every tenant's use."""
SCOPED_READ = FLEET_READ | {Role.TENANT}
"""VMs and tenants: a tenant token sees its own."""
OPERATE = frozenset({Role.ADMIN, Role.OPERATOR, Role.TENANT})
"""Place and release VMs (a tenant token: its own tenant's)."""
MOVE = frozenset({Role.ADMIN, Role.OPERATOR})
"""Move any tenant's VMs: repin, migrate, carry rebalance plans out."""
DEVICES = frozenset({Role.ADMIN, Role.OPERATOR})
"""Device states: taint, untaint, clean, what a released device becomes (and a taint's drain)."""
ADMIN = frozenset({Role.ADMIN})
"""Hosts (drain included: it cordons), tenants and tokens."""


def allow(token: Token, roles: frozenset[Role], what: str) -> None:
    """Refuse ``token`` unless its role is one of ``roles``.

    Raises:
        ForbiddenError: it is not.
    """
    if token.role not in roles:
        allowed = ", ".join(sorted(r.value for r in roles))
        raise ForbiddenError(f"token {token.name!r} ({token.role.value}) may not {what}", hint=f"ask for a token "
                             f"of role {allowed}")


def seen_by(token: Token) -> str | None:
    """The tenant a token is kept to (None: it sees every tenant)."""
    return token.tenant if token.role is Role.TENANT else None


def acting_for(token: Token, tenant: str | None) -> str:
    """The tenant a request acts for: a tenant token's own (given or left out), else the one named.

    Raises:
        ForbiddenError: a tenant token naming another tenant.
        InvalidInputError: no tenant named by a token that is not a tenant token.
    """
    own = seen_by(token)
    if own is not None:
        if tenant not in (None, own):
            raise ForbiddenError(
                f"token {token.name!r} acts for tenant {own!r} only", hint=f"leave tenant out, or give {own!r}"
            )
        return own
    if tenant is None:
        from vnuma.errors import InvalidInputError

        raise InvalidInputError("tenant is required", hint='e.g. {"tenant": "tenant-a", ...}')
    return tenant
