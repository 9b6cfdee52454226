"""Saved ``virsh domstats`` output, read back as libvirt's Python binding returns the same stats.

Pure: parses text. ``virsh domstats --memory --cpu-total`` prints, per domain::

    Domain: 'tenant-a-vm1'
      cpu.time=1234
      memory.bandwidth.monitor.count=1
      ...

(a blank line between domains). Values that are whole numbers become ints, the
rest stay strings, as ``domainListGetStats`` gives them. An operator saves
two of these some seconds apart on a host vnuma cannot reach (or keeps an
incident's figures) and hands them to ``vnuma stats --bandwidth --domstats``.
"""

from __future__ import annotations

import re

from vnuma.errors import InvalidInputError

_DOMAIN = re.compile(r"^Domain:\s*'(?P<name>.*)'\s*$")
_INT = re.compile(r"^-?\d+$")


def parse_domstats(text: str, source: str) -> dict[str, dict[str, object]]:
    """Stats by domain name from the text of ``virsh domstats``.

    Raises:
        InvalidInputError: a ``key=value`` line before any ``Domain:`` line, a line that is neither, the
            same domain twice, or no domain at all (``source`` names the file in the message).
    """
    found: dict[str, dict[str, object]] = {}
    current: dict[str, object] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        head = _DOMAIN.match(line)
        if head is not None:
            name = head["name"]
            if name in found:
                raise InvalidInputError(f"{source}: line {number}: domain {name!r} appears twice",
                                        hint="save one `virsh domstats` run per file")
            current = found[name] = {}
            continue
        key, sep, value = line.partition("=")
        if not sep or not key or current is None:
            raise InvalidInputError(
                f"{source}: line {number}: expected \"Domain: 'NAME'\" or key=value, got {line[:60]!r}",
                hint="save the output of `virsh domstats --memory --cpu-total` as it is printed",
            )
        current[key] = int(value) if _INT.match(value) else value
    if not found:
        raise InvalidInputError(f"{source}: no \"Domain: 'NAME'\" line: not the output of `virsh domstats`",
                                hint="save the output of `virsh domstats --memory --cpu-total`")
    return found
