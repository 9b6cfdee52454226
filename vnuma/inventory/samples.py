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
_UPSERT = (
    "INSERT INTO bandwidth_samples (vm_id, host_id, taken_at, interval_ms, domains, llc) "
    "VALUES (:vm_id, :host_id, :taken_at, :interval_ms, :domains, :llc) "
    "ON CONFLICT (vm_id) DO UPDATE SET host_id = excluded.host_id, taken_at = excluded.taken_at, "
    "interval_ms = excluded.interval_ms, domains = excluded.domains, llc = excluded.llc"
)
"""One statement per sample replaces the VM's last (SQLite and PostgreSQL both have ``ON CONFLICT``)."""


def _ids(x: Executor, table: str, names: set[str]) -> dict[str, int]:
    """Ids by name of the ``table`` rows named (one query per 500 names)."""
    ordered = sorted(names)
    out: dict[str, int] = {}
    for start in range(0, len(ordered), 500):
        chunk = ordered[start:start + 500]
        params = {f"n{i}": n for i, n in enumerate(chunk)}
        marks = ", ".join(f":{k}" for k in params)
        out.update({str(n): int(i) for i, n in x.rows(f"SELECT id, name FROM {table} WHERE name IN ({marks})",
                                                      params)})
    return out


def _json(items: tuple[tuple[int, ...], ...]) -> str:
    """``json.dumps`` of a tuple of int tuples, as it writes them (``[[0, 1, 2]]``), without its per-call cost."""
    return "[" + ", ".join("[" + ", ".join(map(str, item)) + "]" for item in items) + "]"


def record_samples(x: Executor, samples: Iterable[Sample], *, audited: bool = True) -> list[str]:
    """Keep each sample as its VM's last, replacing the one before; a VM (or host) that left the inventory
    meanwhile is skipped. The VMs whose sample was kept, in order; ``audited``: one audit entry naming them
    (``vnuma watch`` keeps each round's samples unaudited: its detections are what it audits). A few
    statements whatever the number of samples."""
    samples = list(samples)
    vms = _ids(x, "vms", {s.vm for s in samples})
    hosts = _ids(x, "hosts", {s.host for s in samples})
    rows = [
        {"vm_id": vms[s.vm], "host_id": hosts[s.host], "taken_at": s.taken_at, "interval_ms": s.interval_ms,
         "domains": _json(s.domains), "llc": _json(s.llc)}
        for s in samples if s.vm in vms and s.host in hosts
    ]
    x.many(_UPSERT, rows)
    kept = [s.vm for s in samples if s.vm in vms and s.host in hosts]
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
