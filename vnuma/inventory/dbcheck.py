"""``vnuma db check``: what the inventory keeps beside each fact, recomputed from the fact by the rule that wrote it.

Read in one transaction (:func:`check`):

* each VM's claim rows (pCPUs, pages, devices, cache and bandwidth slices,
  GPU partitions, and the host each row is on) against the rows its stored
  placement makes (:func:`.claims.claim_rows`, what every claim writes);
* each host's summary columns (cells, CPUs, GPUs, memory: what ``host
  list`` prints) against its topology (:func:`.hostwrite.summary_columns`,
  what every import and refresh writes), and its topology digest against
  its topology text (:data:`DIGESTS`);
* each host's kept figures (:mod:`.figures`, what its last claim wrote)
  against the figures of the whole fleet's ledger built from the stored
  placements (hosts with an unreadable placement left out).

The claim tables' unique indexes and foreign keys already make double
bookings and orphan rows impossible; this finds what they cannot: rows
written, edited or restored behind vnuma's back that no longer say what the
placements and topologies say. A stored placement that cannot be read back is
one problem row (``placement``), never the end of the check; its claim rows
are then left unchecked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vnuma.inventory import figures
from vnuma.inventory.claims import claim_rows
from vnuma.inventory.executor import Executor, Row
from vnuma.inventory.hostwrite import summary_columns
from vnuma.inventory.reading import Snapshot, read_snapshot
from vnuma.inventory.topologies import digest_topology
from vnuma.placement.ledger.fleet import Fleet
from vnuma.topology import Host

_ON = "JOIN vms v ON v.id = c.vm_id JOIN hosts h ON h.id = c.host_id"
CLAIMS = {
    "cpu": f"SELECT v.name, h.name, c.cpu_id, c.exclusive FROM cpu_claims c {_ON}",
    "page": f"SELECT v.name, h.name, c.cell_id, c.page_size_kib, c.count FROM page_claims c {_ON}",
    "device": f"SELECT v.name, h.name, c.address FROM device_claims c {_ON}",
    "slice": f"SELECT v.name, h.name, c.domain_id, c.ways, c.mem_bw FROM resctrl_claims c {_ON}",
    "partition": f"SELECT v.name, h.name, c.gpu, c.kind, c.name, c.vf, c.start, c.uuid FROM partition_claims c {_ON}",
}
VM_HOSTS = "SELECT v.name, h.name FROM vms v JOIN hosts h ON h.id = v.host_id"
SUMMARIES = "SELECT name, n_cells, n_cpus, n_gpus, memory_kib, topology_digest FROM hosts"
_SUMMARY = ("n_cells", "n_cpus", "n_gpus", "memory_kib")
DIGESTS = (
    "SELECT topology_digest, MIN(topology), COUNT(DISTINCT topology) FROM hosts WHERE topology_digest <> '' "
    "GROUP BY topology_digest"
)
"""One text per digest and how many different texts carry it: each row's digest is checked without reading
every row's text (a digest on one text is that text's, or on several texts is wrong for some)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One disagreement: on ``host`` (and VM ``vm``, or None for the host's own columns), ``what`` (a claim kind
    or a column) the inventory keeps ``kept`` where the rule gives ``expected``."""

    host: str
    vm: str | None
    what: str
    kept: str
    expected: str


@dataclass(frozen=True, slots=True)
class Report:
    """What was checked and every disagreement found (none: consistent)."""

    hosts: int
    vms: int
    problems: tuple[Problem, ...]


def check(x: Executor) -> Report:
    """Read the inventory in ``x``'s transaction and compare (see the module docstring)."""
    unreadable: dict[str, str] = {}
    snapshot = read_snapshot(x, unreadable)
    kinds = list(CLAIMS)
    *claims, vm_hosts, summaries, digests, kept = x.batch(
        [*((CLAIMS[k], None) for k in kinds), (VM_HOSTS, None), (SUMMARIES, None), (DIGESTS, None),
         (figures.KEPT, None)]
    )
    row_host = {str(vm): str(host) for vm, host in vm_hosts}
    found = [*_claim_problems(snapshot, dict(zip(kinds, claims, strict=True)), row_host),
             *_summary_problems(snapshot.hosts, summaries), *_digest_problems(summaries, digests),
             *(Problem(row_host.get(vm, "-"), vm, "placement", why, "a placement vnuma can read")
               for vm, why in unreadable.items()),
             *_figure_problems(snapshot, kept, {row_host.get(vm) for vm in unreadable})]
    ordered = sorted(found, key=lambda p: (p.host, p.vm or "", p.what))
    return Report(len(snapshot.hosts), len(snapshot.placements) + len(unreadable), tuple(ordered))


def _claim_problems(snapshot: Snapshot, claims: dict[str, list[Row]], row_host: dict[str, str]) -> Iterable[Problem]:
    kept: dict[tuple[str, str], set[tuple[Any, ...]]] = defaultdict(set)
    on: dict[str, set[str]] = defaultdict(set)
    for kind, rows in claims.items():
        for vm, host, *row in rows:
            kept[(str(vm), kind)].add(_normal(kind, row))
            on[str(vm)].add(str(host))
    hosts = {h.name: h for h in snapshot.hosts}
    ledgers: dict[str, Fleet] = {}
    for p in snapshot.placements:
        if row_host.get(p.vm) != p.host:
            yield Problem(p.host, p.vm, "host", str(row_host.get(p.vm)), p.host)
        elsewhere = on[p.vm] - {p.host}
        if elsewhere:
            yield Problem(p.host, p.vm, "claims' host", ",".join(sorted(on[p.vm])), p.host)
        if p.host not in ledgers:
            ledgers[p.host] = Fleet([hosts[p.host]])
        rows = claim_rows(p, ledgers[p.host])
        expected = {"cpu": rows.cpus, "page": rows.pages, "device": [(d,) for d in rows.devices],
                    "slice": rows.slices, "partition": rows.partitions}
        for kind in CLAIMS:
            want = {_normal(kind, list(r)) for r in expected[kind]}
            got = kept.get((p.vm, kind), set())
            if got != want:
                yield Problem(p.host, p.vm, f"{kind} claims", _show(got), _show(want))


def _normal(kind: str, row: list[Any]) -> tuple[Any, ...]:
    """A claim row as both sides compare it (the database's booleans and integers as Python's)."""
    if kind == "cpu":
        return int(row[0]), bool(row[1])
    if kind in ("page", "slice"):
        return tuple(None if v is None else int(v) for v in row)
    return tuple(row)


def _show(rows: set[tuple[Any, ...]]) -> str:
    return "; ".join(",".join("-" if v is None else str(v) for v in r) for r in sorted(rows, key=repr)) or "none"


def _summary_problems(hosts: list[Host], rows: list[Row]) -> Iterable[Problem]:
    by_name = {str(r[0]): r[1:5] for r in rows}
    shapes: dict[tuple[int, int], dict[str, int]] = {}  # hosts of one topology text share cells and devices
    for host in hosts:
        key = (id(host.cells), id(host.devices))  # every host stays alive here: ids are unique
        want = shapes.get(key)
        if want is None:
            want = shapes[key] = summary_columns(host)
        for column, value in zip(_SUMMARY, by_name[host.name], strict=True):
            if str(value) != str(want[column]):
                yield Problem(host.name, None, column, str(value), str(want[column]))


def _figure_problems(snapshot: Snapshot, kept: list[Row], skipped: set[str | None]) -> Iterable[Problem]:
    rows = [r for r in kept if r[0] not in skipped]
    if not rows:
        return
    ledger = Fleet(snapshot.hosts, snapshot.placements, snapshot.tenants.values())
    for name, *values in rows:
        want = ledger.arrays.figures(ledger.state(str(name)).index)
        for column, got, expected in zip(figures.COLUMNS, values, want, strict=True):
            if int(got) != expected:
                yield Problem(str(name), None, column, str(got), str(expected))


def _digest_problems(rows: list[Row], digests: list[Row]) -> Iterable[Problem]:
    wrong: dict[str, str] = {}
    for digest, text, texts in digests:
        if int(texts) > 1:
            wrong[str(digest)] = f"the digest of its own topology ({texts} different topologies carry this one)"
        elif digest_topology(str(text)) != digest:
            wrong[str(digest)] = digest_topology(str(text))
    for name, *_columns, digest in rows:
        if str(digest) in wrong:
            yield Problem(str(name), None, "topology_digest", str(digest), wrong[str(digest)])
