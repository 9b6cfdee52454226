"""Translate database-library failures into vnuma errors, with the URL masked.

Only ``vnuma.inventory`` catches ``sqlalchemy.exc`` / Alembic errors, and it
does so here: every public entry point runs inside :func:`guarded`.
SQLAlchemy is imported by the functions that need it, so the ``sqlite3``
path (:mod:`.placer`) can share :func:`hint_for_text` without loading it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from vnuma.errors import ConfigError, ConflictError, InventoryError

if TYPE_CHECKING:
    from sqlalchemy import exc
    from sqlalchemy.engine import URL

_USERINFO = re.compile(r"(://[^:/@]*):[^@]*@")
_URL_HINT = "use a SQLAlchemy URL (sqlite:///PATH, postgresql+psycopg://USER@HOST/DB) or a file path"


def mask_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (also for URLs SQLAlchemy cannot parse)."""
    from sqlalchemy import exc
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (exc.ArgumentError, ValueError):
        return _USERINFO.sub(r"\1:***@", url)


def parse_url(url: str) -> URL:
    """The parsed URL.

    Raises:
        ConfigError: SQLAlchemy cannot read it.
    """
    from sqlalchemy import exc
    from sqlalchemy.engine import make_url

    try:
        return make_url(url)
    except (exc.ArgumentError, ValueError) as err:
        raise ConfigError(f"bad database URL {mask_url(url)}: {cause_of(err)}", hint=_URL_HINT) from err


def cause_of(err: BaseException) -> str:
    """The driver's own message (not SQLAlchemy's wrapper text), on one line."""
    orig = getattr(err, "orig", None)
    text = str(orig if orig is not None else err).strip() or type(err).__name__
    return " ".join(text.split())


@contextmanager
def guarded(url: str) -> Iterator[None]:
    """Re-raise library errors from the block as ConflictError / ConfigError / InventoryError."""
    from sqlalchemy import exc

    try:
        yield
    except exc.IntegrityError as err:
        raise ConflictError(
            f"inventory {mask_url(url)} refused a conflicting change: {cause_of(err)}",
            hint="another command claimed the same resource first; run the command again",
        ) from err
    except (exc.ArgumentError, exc.NoSuchModuleError) as err:
        raise ConfigError(f"bad database URL {mask_url(url)}: {cause_of(err)}", hint=_URL_HINT) from err
    except exc.SQLAlchemyError as err:
        raise InventoryError(f"inventory {mask_url(url)}: {cause_of(err)}", hint=_hint_for(err)) from err
    except Exception as err:
        if _is_migration_error(err):
            raise InventoryError(f"inventory {mask_url(url)}: migration failed: {cause_of(err)}") from err
        raise


def _is_migration_error(err: Exception) -> bool:
    # Alembic is imported lazily (it is slow to import); if it is not loaded,
    # the error cannot be one of its own.
    module = sys.modules.get("alembic.util.exc")
    return module is not None and isinstance(err, module.CommandError)


def _hint_for(err: exc.SQLAlchemyError) -> str | None:
    return hint_for_text(cause_of(err))


def hint_for_text(message: str) -> str | None:
    """The operator's hint for a database driver's message (locked, not a database, cannot open)."""
    text = message.lower()
    if "locked" in text or "busy" in text:
        return "another vnuma command is writing the inventory; retry in a moment"
    if "not a database" in text:
        return "point --db or VNUMA_DB at a vnuma inventory file"
    if "unable to open" in text:
        return "check that the directory exists and is writable"
    return None
