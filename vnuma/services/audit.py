"""The audit log as the CLI uses it: name the invocation, log a refusal or failure, read the log.

Changes are logged by the inventory itself, in the transaction that makes
them (:mod:`vnuma.inventory.audit`); this module gives that log the command
line (:func:`begin`, passwords in URLs masked), adds the outcome of an
invocation that was refused or failed (:func:`log_outcome`: best effort, in
its own transaction — a database that cannot be reached cannot hear about it
either), and reads entries back for ``vnuma log`` (:func:`read`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from vnuma.errors import InvalidInputError, NoPlacementError, VnumaError
from vnuma.inventory import audit
from vnuma.inventory.access import open_access
from vnuma.inventory.db import missing_sqlite_file
from vnuma.services import Settings

_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@/\s]*@")


def command_line(argv: Sequence[str]) -> str:
    """``vnuma ARGS`` as a shell would quote it, with URL passwords replaced by ``***``."""
    return shlex.join(["vnuma", *(_PASSWORD.sub(r"\1***@", a) for a in argv)])


def begin(argv: Sequence[str]) -> None:
    """Changes from now on belong to the command line ``argv`` (without the program name)."""
    audit.begin_invocation(command_line(argv))


def begin_request(method: str, path: str, token: str, client: str) -> None:
    """Changes from now on belong to the API request ``METHOD PATH`` made with token ``token`` from ``client``
    (logged as user ``token:NAME``)."""
    audit.begin_invocation(f"{method} {path}", user=f"token:{token}", machine=client)


def end() -> None:
    """The command is over (see :func:`begin`)."""
    audit.end_invocation()


def log_outcome(
    settings: Settings, outcome: str, error: str, subjects: Mapping[str, str | None], *,
    cause: BaseException | None = None,
) -> None:
    """Record that the invocation was ``refused`` or ``failed``; quietly nothing when the inventory cannot
    be written (it is unreachable, missing, or its schema is not this vnuma's: then it changed nothing
    either). A placement no host takes (``cause``) is logged with the check that refused the host that came
    closest (:func:`refused_by`), which ``/metrics`` counts refusals by."""
    if missing_sqlite_file(settings.db_url) is not None:
        return
    check = refused_by(cause)
    if check is not None:
        subjects = {**subjects, "check": check}
    try:
        with open_access(settings.db_url) as access, access.begin(True) as x:
            audit.record_outcome(x, outcome, error, subjects)
    except VnumaError:
        pass


def refused_by(err: BaseException | None) -> str | None:
    """The check that refused the host that came closest, for a VM no host takes (a
    :class:`~vnuma.errors.NoPlacementError` carrying its rejections); else None."""
    if not isinstance(err, NoPlacementError) or not err.rejections:
        return None
    from vnuma.placement.refusal import summarize

    closest = summarize(err.rejections).closest
    return closest.check if closest is not None else None


_RELATIVE = re.compile(r"^(\d+)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_age(text: str) -> timedelta | None:
    """An age or duration written ``30s``, ``30m``, ``2h``, ``7d``, ``1w``; None when ``text`` is not one."""
    m = _RELATIVE.match(text.strip())
    return timedelta(**{_UNITS[m.group(2)]: int(m.group(1))}) if m else None


def parse_since(text: str, now: datetime | None = None, option: str = "--since") -> datetime:
    """``--since``: an ISO date or time (``2026-12-01``, ``2026-12-01T08:00``, UTC unless it says), or an age
    (``30m``, ``2h``, ``7d``, ``1w``).

    Raises:
        InvalidInputError: anything else.
    """
    now = now or datetime.now(UTC)
    age = parse_age(text)
    if age is not None:
        return now - age
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInputError(
            f"bad {option} {text!r}", hint="give an ISO date or time (2026-12-01, 2026-12-01T08:00) or an age "
            "(30m, 2h, 7d, 1w)"
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def read(
    settings: Settings, *, vm: str | None = None, host: str | None = None, tenant: str | None = None,
    since: str | None = None, limit: int = 100,
) -> list[dict[str, Any]]:
    """The log entries ``vnuma log`` prints (see :func:`vnuma.inventory.audit.read_log`); ``since`` as
    :func:`parse_since` reads it.

    Raises:
        InvalidInputError: a bad ``since`` or a ``limit`` below 1.
    """
    if limit < 1:
        raise InvalidInputError(f"bad --limit {limit}: give 1 or more")
    when = parse_since(since) if since is not None else None
    f = audit.LogFilter(vm=vm, host=host, tenant=tenant, since=when, limit=limit)
    with open_access(settings.db_url) as access, access.begin(False) as x:
        return audit.read_log(x, f)
