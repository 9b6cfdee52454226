"""Saved ``virsh freepages --all`` output: each host cell's free pages per page size.

Pure: parses text. ``virsh freepages --all`` prints, per cell::

    Node 0:
    4KiB: 1811834
    2048KiB: 512
    1048576KiB: 0

(a blank line between cells). libvirt counts the system page size's free
pages from the cell's free memory (``MemFree``), so the 4 KiB line is the
cell's free memory in pages and the others are its free huge pages: the
same figures ``getFreePages`` gives a live reading.
"""

from __future__ import annotations

import re

from vnuma.errors import InvalidInputError

_NODE = re.compile(r"^Node\s+(?P<id>\d+):$")
_PAGES = re.compile(r"^(?P<size>\d+)\s*KiB:\s*(?P<count>\d+)$")


def parse_freepages(text: str, source: str) -> dict[int, dict[int, int]]:
    """Free pages by cell id, then page size in KiB.

    Raises:
        InvalidInputError: a line that is neither ``Node N:`` nor ``SIZEKiB: COUNT``, a count before any
            ``Node`` line, a cell twice, or no cell at all (``source`` names the file in the message).
    """
    found: dict[int, dict[int, int]] = {}
    current: dict[int, int] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        node = _NODE.match(line)
        if node is not None:
            cell = int(node["id"])
            if cell in found:
                raise InvalidInputError(f"{source}: line {number}: cell {cell} appears twice",
                                        hint="save one `virsh freepages --all` run per file")
            current = found[cell] = {}
            continue
        pages = _PAGES.match(line)
        if pages is None or current is None:
            raise InvalidInputError(
                f"{source}: line {number}: expected 'Node N:' or 'SIZEKiB: COUNT', got {line[:60]!r}",
                hint="save the output of `virsh freepages --all` as it is printed",
            )
        current[int(pages["size"])] = int(pages["count"])
    if not found:
        raise InvalidInputError(f"{source}: no 'Node N:' line: not the output of `virsh freepages --all`",
                                hint="save the output of `virsh freepages --all`")
    return found
