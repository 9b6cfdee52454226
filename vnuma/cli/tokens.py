"""``vnuma token``: bearer tokens of the HTTP API (``vnuma serve``): create, list, revoke."""

from __future__ import annotations

from typing import Annotated

import typer

from vnuma.cli import output, remote, settings
from vnuma.cli.completion import tenants

app = typer.Typer(no_args_is_help=True, add_completion=False)

ROLES = "admin, operator, reader or tenant"


@app.command("create")
def create(
    ctx: typer.Context,
    name: str,
    role: Annotated[str, typer.Option("--role", metavar="ROLE", help=f"{ROLES} (see `vnuma serve --help`).")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="The tenant of a tenant token.", autocompletion=tenants)
    ] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="An age (90d, 12h, 1w) or an ISO date; default: never.")
    ] = None,
    as_json: output.JsonOpt = False,
) -> None:
    """Make a token and print it once: only a slow (argon2) hash of it is kept.

    A tenant token (--role tenant --tenant T) places, lists, shows and
    releases only tenant T's VMs. JSON: {"name", "role", "tenant",
    "created_at", "expires_at", "revoked_at", "token"}.

    Example: vnuma token create ci-bot --role tenant --tenant tenant-a --expires 90d
    """
    from vnuma.errors import InvalidInputError
    from vnuma.services.tokens import Role, create_token, parse_expires

    try:
        chosen = Role(role.strip().lower())
    except ValueError:
        raise InvalidInputError(f"bad --role {role!r}: use {ROLES}") from None
    client = remote(ctx)
    if client:
        doc = client.create_token(name, chosen.value, tenant, expires)
    else:
        when = parse_expires(expires) if expires is not None else None
        token, secret = create_token(settings(ctx), name, chosen, tenant, when)
        doc = {**token.as_dict(), "token": secret}
    if as_json:
        output.echo_json(doc)
        return
    typer.echo(doc["token"])
    typer.echo(f"token {doc['name']} ({doc['role']}{f', tenant {tenant}' if tenant else ''}): shown once, "
               "keep it safe", err=True)


@app.command("list")
def list_(ctx: typer.Context, as_json: output.JsonOpt = False) -> None:
    """List tokens (never their secrets), revoked ones too.

    JSON: [{"name", "role", "tenant", "created_at", "expires_at", "revoked_at"}].

    Example: vnuma token list --json
    """
    from vnuma.services.tokens import tokens

    client = remote(ctx)
    rows = client.tokens() if client else [t.as_dict() for t in tokens(settings(ctx))]
    if as_json:
        output.echo_json(rows)
        return
    output.echo_table(
        None, ["TOKEN", "ROLE", "TENANT", "CREATED", "EXPIRES", "REVOKED"],
        [(r["name"], r["role"], r["tenant"] or "-", r["created_at"], r["expires_at"] or "never",
          r["revoked_at"] or "-") for r in rows],
    )


@app.command("revoke")
def revoke(ctx: typer.Context, name: str, as_json: output.JsonOpt = False) -> None:
    """Revoke a token: every serving process refuses it from its next request. JSON: the token.

    Example: vnuma token revoke ci-bot
    """
    from vnuma.services.tokens import revoke as run

    client = remote(ctx)
    doc = client.revoke_token(name) if client else run(settings(ctx), name).as_dict()
    if as_json:
        output.echo_json(doc)
        return
    typer.echo(f"revoked token {name} (at {doc['revoked_at']})")
