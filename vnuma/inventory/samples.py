"""Each VM's last memory-bandwidth sample: write (replacing the previous one) and read (SQL text on any
:class:`Executor`).

A sample belongs to its VM (deleted with it) and names the host it was taken on; a VM that moved since
keeps its sample until the next measurement, and readers compare the host.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from vnuma.inventory import audit
from vnuma.inventory.executor import Executor


@dataclass(frozen=True, slots=True)
class Sample:
    """A VM's rates between two readings of its monitors ending at ``taken_at`` (ISO time, UTC):
    ``domains`` (L3 id, local bytes/s, total bytes/s), ``llc`` (cache id, bytes occupied)."""

    vm: str
    host: str
    taken_at: str
    interval_ms: int
    domains: tuple[tuple[int, int, int], ...]
    llc: tuple[tuple[int, int], ...]


_READ = (
    "SELECT v.name, h.name, s.taken_at, s.interval_ms, s.domains, s.llc FROM bandwidth_samples s "
    "JOIN vms v ON v.id = s.vm_id JOIN hosts h ON h.id = s.host_id ORDER BY v.name"
)
_IDS = "SELECT v.id, h.id FROM vms v, hosts h WHERE v.name = :vm AND h.name = :host"
_DELETE = "DELETE FROM bandwidth_samples WHERE vm_id = :vm_id"
_INSERT = (
    "INSERT INTO bandwidth_samples (vm_id, host_id, taken_at, interval_ms, domains, llc) "
    "VALUES (:vm_id, :host_id, :taken_at, :interval_ms, :domains, :llc)"
)


def record_samples(x: Executor, samples: Iterable[Sample], *, audited: bool = True) -> list[str]:
    """Keep each sample as its VM's last, replacing the one before; a VM (or host) that left the inventory
    meanwhile is skipped. The VMs whose sample was kept, in order; ``audited``: one audit entry naming them
    (``vnuma watch`` keeps each round's samples unaudited: its detections are what it audits)."""
    kept: list[str] = []
    for s in samples:
        ids = x.one(_IDS, {"vm": s.vm, "host": s.host})
        if ids is None:
            continue
        vm_id, host_id = int(ids[0]), int(ids[1])  # type: ignore[call-overload]
        x.run(_DELETE, {"vm_id": vm_id})
        x.run(_INSERT, {
            "vm_id": vm_id, "host_id": host_id, "taken_at": s.taken_at, "interval_ms": s.interval_ms,
            "domains": json.dumps([list(d) for d in s.domains]), "llc": json.dumps([list(c) for c in s.llc]),
        })
        kept.append(s.vm)
    if kept and audited:
        audit.record(x, "bandwidth-sample", vm=kept)
    return kept


def read_samples(x: Executor) -> dict[str, Sample]:
    """Every VM's last sample, by VM name."""
    out: dict[str, Sample] = {}
    for vm, host, taken_at, interval_ms, domains, llc in x.rows(_READ):
        out[str(vm)] = Sample(
            str(vm), str(host), str(taken_at), int(interval_ms),  # type: ignore[call-overload]
            tuple((int(a), int(b), int(c)) for a, b, c in json.loads(str(domains))),
            tuple((int(a), int(b)) for a, b in json.loads(str(llc))),
        )
    return out
