"""A placement as the inventory stores it: the ``vms.placement`` document and the claim rows.

Pure: no I/O. Every writer (:mod:`.placing`) stores what
:func:`encode_placement` and :func:`claim_rows` give; what may be claimed is
decided by admission (:mod:`vnuma.placement.ledger.admit`), not here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from vnuma.codec import placement_from_dict, placement_to_dict
from vnuma.errors import InvalidInputError, InventoryError
from vnuma.placement.ledger.claim import page_needs
from vnuma.placement.model import Placement

if TYPE_CHECKING:
    from vnuma.placement.ledger.fleet import Fleet  # decoding a placement needs no ledger (nor numpy)


@dataclass(frozen=True, slots=True)
class ClaimRows:
    """The rows a claim writes: (pCPU, exclusive), (cell, page size KiB, count), device addresses,
    (L3 domain, cache ways, bandwidth cap or None), and GPU partitions (GPU, kind, type or profile, VF or
    None, MIG start or None, UUID)."""

    cpus: tuple[tuple[int, bool], ...]
    pages: tuple[tuple[int, int, int], ...]
    devices: tuple[str, ...]
    slices: tuple[tuple[int, int, int | None], ...] = ()
    partitions: tuple[tuple[str, str, str, str | None, int | None, str], ...] = ()


def encode_placement(p: Placement) -> str:
    """The ``vms.placement`` column's text for a placement (which keeps its VM's request: every move asks it
    again)."""
    assert p.request is not None, f"placement of VM {p.vm!r} keeps no request"
    return json.dumps(placement_to_dict(p), separators=(",", ":"))


def decode_placement(name: str, document: str) -> Placement:
    """The placement stored for VM ``name``.

    Raises:
        InventoryError: the stored document cannot be read back.
    """
    try:
        return _decoded(document)
    except (ValueError, TypeError, InvalidInputError) as err:
        raise InventoryError(f"inventory: stored placement of VM {name!r} is unreadable: {err}") from err


@lru_cache(maxsize=1 << 16)
def _decoded(document: str) -> Placement:
    # Placements are immutable and the text is the whole input: a process that reads the
    # inventory again (a worker, a long-running caller) decodes each stored document once.
    return placement_from_dict(json.loads(document))


def claim_rows(p: Placement, ledger: Fleet) -> ClaimRows:
    """What a placement claims on its host, as rows to insert (``ledger`` holds the host)."""
    # Siblings an isolate VM keeps empty are claimed too, so the unique index covers them.
    held = ledger.held_pcpus(p)
    cpus = [(c, True) for c in sorted(held)] + [(c, False) for c in sorted(p.shared_pcpus - held)]
    pages = tuple((cell, size, n) for (cell, size), n in page_needs(p).items())
    ways, caps = dict(p.llc), dict(p.mem_bw)
    slices = tuple((d, ways.get(d, 0), caps.get(d)) for d in sorted(ways.keys() | caps.keys()))
    partitions = tuple((a.gpu, a.kind.value, a.name, a.vf, a.start, a.uuid) for a in p.partitions)
    return ClaimRows(tuple(cpus), pages, tuple(d.address for d in p.devices), slices, partitions)
