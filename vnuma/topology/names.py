"""The one rule for the names operators give: hosts, tenants, VMs (and groups, tokens). Pure: no I/O.

A name becomes a libvirt domain name, a file name, a URL path segment and a
word in a table or a shell command line: 1-63 characters from ``A-Z a-z 0-9
_ . + -``, starting with a letter or digit. No space, quote, ``;``, ``$``
or ``/`` can reach a command an operator copies from vnuma's output.
"""

from __future__ import annotations

import re

from vnuma.errors import InvalidInputError

NAME_RULE = "1-63 characters from A-Z a-z 0-9 _ . + -, starting with a letter or digit"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$")


def name_problem(name: str, what: str) -> str | None:
    """Why ``name`` is not a good ``what`` name (``bad host name 'a b': ...``), or None."""
    return None if _NAME.match(name) else f"bad {what} name {name!r}: {NAME_RULE}"


def check_name(name: str, what: str) -> None:
    """Refuse a name that breaks :data:`NAME_RULE`.

    Raises:
        InvalidInputError: empty, too long, or characters outside ``A-Za-z0-9_.+-``.
    """
    problem = name_problem(name, what)
    if problem is not None:
        raise InvalidInputError(problem)
