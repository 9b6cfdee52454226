"""The rules for names operators give: hosts, tenants and VMs (names are data, checked once, here)."""

from __future__ import annotations

import re

from vnuma.errors import InvalidInputError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,62}$")


def check_vm_name(name: str, what: str = "VM") -> None:
    """VM and tenant names become libvirt domain names and file names: keep them plain.

    Raises:
        InvalidInputError: empty, too long, or characters outside ``A-Za-z0-9_.+-``.
    """
    if not _NAME.match(name):
        raise InvalidInputError(
            f"bad {what} name {name!r}: 1-63 characters from A-Z a-z 0-9 _ . + -, "
            "starting with a letter or digit"
        )



def check_host_name(name: str) -> None:
    """Refuse a host name the inventory and the CLI cannot show cleanly.

    Raises:
        InvalidInputError: empty, longer than 255 characters, or holding '/', NUL, tabs or newlines.
    """
    if not name.strip() or len(name) > 255 or any(ch in name for ch in "/\x00\n\r\t"):
        raise InvalidInputError(
            f"bad host name {name!r}: 1-255 characters, no '/', tabs or newlines"
        )
