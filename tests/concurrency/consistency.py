"""An independent audit of an inventory: claims vs placements vs host capacity.

Reads the tables with plain SQLAlchemy Core (not the repository under test)
and recomputes every host's use from the recorded placements. Returns a
list of problems, empty when the inventory is consistent. It also runs
``vnuma db check`` (vnuma's own check, :mod:`vnuma.inventory.dbcheck`), so
every race, kill and crash test that audits its inventory checks that
command's answer too.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import replace
from typing import Any

from sqlalchemy import create_engine, select

from tests.placement.helpers import held_by
from vnuma.codec import host_from_dict, placement_from_dict
from vnuma.inventory.claims import page_needs
from vnuma.inventory.claimtables import CpuClaim, DeviceClaim, PageClaim, PartitionClaim, ResctrlClaim
from vnuma.inventory.models import HostRow, VmRow
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.queries import db_check
from vnuma.topology import Host, parse_cpuset
from vnuma.topology.resctrl import l3_banks, parse_policy


def _rows(url: str) -> dict[str, list[Any]]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                "hosts": list(conn.execute(
                    select(HostRow.id, HostRow.name, HostRow.topology, HostRow.reserved_cpuset, HostRow.resctrl_policy)
                ).all()),
                "vms": list(conn.execute(select(VmRow.id, VmRow.name, VmRow.host_id, VmRow.placement)).all()),
                "groups": list(conn.execute(select(VmRow.name, VmRow.group_name, VmRow.placement)).all()),
                "cpus": list(conn.execute(
                    select(CpuClaim.vm_id, CpuClaim.host_id, CpuClaim.cpu_id, CpuClaim.exclusive)
                ).all()),
                "pages": list(conn.execute(
                    select(
                        PageClaim.vm_id, PageClaim.host_id, PageClaim.cell_id,
                        PageClaim.page_size_kib, PageClaim.count,
                    )
                ).all()),
                "devices": list(conn.execute(
                    select(DeviceClaim.vm_id, DeviceClaim.host_id, DeviceClaim.address)
                ).all()),
                "partitions": list(conn.execute(select(
                    PartitionClaim.vm_id, PartitionClaim.gpu, PartitionClaim.kind, PartitionClaim.name,
                    PartitionClaim.vf, PartitionClaim.start, PartitionClaim.uuid,
                )).all()),
                "slices": list(conn.execute(
                    select(ResctrlClaim.vm_id, ResctrlClaim.domain_id, ResctrlClaim.ways, ResctrlClaim.mem_bw)
                ).all()),
            }
    finally:
        engine.dispose()


def _host(name: str, topology: str, reserved: str, policy: str) -> Host:
    doc = json.loads(topology)
    base = host_from_dict({**doc, "name": name})
    return replace(base, reserved_cpus=parse_cpuset(reserved), resctrl_policy=parse_policy(policy))


def _expected_claims(p: Placement, host: Host) -> tuple[set[Any], set[Any], set[Any]]:
    held = held_by(p, host)
    cpus = {(c, True) for c in held} | {(c, False) for c in p.shared_pcpus - held}
    pages = {(cell, size, n) for (cell, size), n in page_needs(p).items()}
    return cpus, pages, {d.address for d in p.devices}


def _check_claims_match(data: dict[str, list[Any]], hosts: dict[int, Host], problems: list[str]) -> None:
    """Every VM holds exactly the claim rows its placement implies; no claim without a VM."""
    cpus: dict[int, set[Any]] = defaultdict(set)
    pages: dict[int, set[Any]] = defaultdict(set)
    devices: dict[int, set[Any]] = defaultdict(set)
    claim_hosts: dict[int, set[int]] = defaultdict(set)
    for vm_id, host_id, cpu, excl in data["cpus"]:
        cpus[vm_id].add((cpu, bool(excl)))
        claim_hosts[vm_id].add(host_id)
    for vm_id, host_id, cell, size, n in data["pages"]:
        pages[vm_id].add((cell, size, int(n)))
        claim_hosts[vm_id].add(host_id)
    for vm_id, host_id, address in data["devices"]:
        devices[vm_id].add(address)
        claim_hosts[vm_id].add(host_id)
    slices: dict[int, set[Any]] = defaultdict(set)
    for vm_id, domain, ways, bw in data["slices"]:
        slices[vm_id].add((domain, ways, bw))
    partitions: dict[int, set[Any]] = defaultdict(set)
    for vm_id, *partition in data["partitions"]:
        partitions[vm_id].add(tuple(partition))
    vm_ids = {row[0] for row in data["vms"]}
    for orphan in sorted(set(partitions) - vm_ids):
        problems.append(f"partition claims of vm_id {orphan} without a VM row")
    for orphan in sorted(set(slices) - vm_ids):
        problems.append(f"cache/bandwidth claims of vm_id {orphan} without a VM row")
    for orphan in sorted(set(claim_hosts) - vm_ids):
        problems.append(f"claims of vm_id {orphan} without a VM row")
    for vm_id, name, host_id, doc in data["vms"]:
        p = placement_from_dict(json.loads(doc))
        host = hosts[host_id]
        if p.vm != name or p.host != host.name:
            problems.append(f"VM {name}: row says host {host.name}, placement says {p.vm} on {p.host}")
        want = _expected_claims(p, host)
        got = (cpus[vm_id], pages[vm_id], devices[vm_id])
        for what, w, g in zip(("cpu", "page", "device"), want, got, strict=True):
            if w != g:
                problems.append(f"VM {name}: {what} claims {sorted(g)} != placement's {sorted(w)}")
        ways, caps = dict(p.llc), dict(p.mem_bw)
        want_slices = {(d, ways.get(d, 0), caps.get(d)) for d in ways.keys() | caps.keys()}
        if slices[vm_id] != want_slices:
            problems.append(f"VM {name}: cache/bandwidth claims {sorted(slices[vm_id])} != {sorted(want_slices)}")
        want_partitions = {(a.gpu, a.kind.value, a.name, a.vf, a.start, a.uuid) for a in p.partitions}
        if partitions[vm_id] != want_partitions:
            problems.append(f"VM {name}: partition claims {sorted(partitions[vm_id])} != {sorted(want_partitions)}")
        if claim_hosts[vm_id] - {host_id}:
            problems.append(f"VM {name}: claims on other hosts {sorted(claim_hosts[vm_id] - {host_id})}")


def _check_claim_table(data: dict[str, list[Any]], hosts: dict[int, Host], problems: list[str]) -> None:
    """From the claim rows alone: nothing exclusive twice, no page pool over capacity."""
    exclusive = Counter((h, c) for _, h, c, excl in data["cpus"] if excl)
    shared = {(h, c) for _, h, c, excl in data["cpus"] if not excl}
    for (h, c), n in sorted(exclusive.items()):
        if n > 1 or (h, c) in shared:
            problems.append(f"claims: pCPU {c} of host {hosts[h].name} held exclusively {n}x (+shared)")
    for (h, a), n in sorted(Counter((h, a) for _, h, a in data["devices"]).items()):
        if n > 1:
            problems.append(f"claims: device {a} of host {hosts[h].name} claimed {n}x")
    used: Counter[tuple[int, int, int]] = Counter()
    for _, h, cell, size, n in data["pages"]:
        used[(h, cell, size)] += int(n)
    for (h, cell, size), n in sorted(used.items()):
        cap = hosts[h].cell(cell).pages_of(size)
        if n > cap:
            problems.append(f"claims: host {hosts[h].name} cell {cell}: {n} pages of {size} KiB > {cap}")


def _check_recomputed(data: dict[str, list[Any]], hosts: dict[int, Host], problems: list[str]) -> None:
    """From the placements alone: every host's use recomputed, nothing twice, nothing over capacity."""
    by_host: dict[int, list[Placement]] = defaultdict(list)
    for _, _, host_id, doc in data["vms"]:
        by_host[host_id].append(placement_from_dict(json.loads(doc)))
    for host_id, placements in sorted(by_host.items()):
        host = hosts[host_id]
        held: dict[int, str] = {}
        devices: dict[str, str] = {}
        pages: Counter[tuple[int, int]] = Counter()
        for p in placements:
            for cpu in held_by(p, host):
                if cpu in held:
                    problems.append(f"host {host.name}: pCPU {cpu} in {held[cpu]} and {p.vm}")
                held[cpu] = p.vm
            for d in p.devices:
                if d.address in devices:
                    problems.append(f"host {host.name}: device {d.address} in {devices[d.address]}, {p.vm}")
                devices[d.address] = p.vm
            pages.update(page_needs(p))
            stray = (p.dedicated_pcpus | p.shared_pcpus) - (host.cpu_ids - host.reserved_cpus)
            if stray:
                problems.append(f"host {host.name}: VM {p.vm} uses missing or reserved pCPUs {sorted(stray)}")
        for p in placements:
            clash = p.shared_pcpus & {c for c, vm in held.items() if vm != p.vm}
            if clash:
                problems.append(f"host {host.name}: shared VM {p.vm} floats on pinned pCPUs {sorted(clash)}")
        for (cell, size), n in sorted(pages.items()):
            if n > host.cell(cell).pages_of(size):
                problems.append(f"host {host.name}: cell {cell} pages of {size} KiB over capacity ({n})")


def inconsistencies(url: str) -> list[str]:
    """Every disagreement between claims, placements and host capacity in the inventory at ``url``."""
    data = _rows(url)
    hosts = {hid: _host(name, topo, reserved, policy) for hid, name, topo, reserved, policy in data["hosts"]}
    problems: list[str] = []
    _check_claims_match(data, hosts, problems)
    _check_claim_table(data, hosts, problems)
    _check_recomputed(data, hosts, problems)
    _check_slices(data, hosts, problems)
    _check_groups(data, problems)
    problems += [f"db check: host {p.host} VM {p.vm}: {p.what} {p.kept} != {p.expected}"
                 for p in db_check(Settings(db_url=url)).problems]
    return problems


def _check_groups(data: dict[str, list[Any]], problems: list[str]) -> None:
    """Each VM's ``group_name`` is its placement's group; an affine group is on one host and asked no
    anti-affinity."""
    members: dict[str, list[Placement]] = defaultdict(list)
    for name, group_name, doc in data["groups"]:
        p = placement_from_dict(json.loads(doc))
        if group_name != p.group:
            problems.append(f"VM {name}: group_name {group_name!r} but its placement's group is {p.group!r}")
        if p.group is not None:
            members[p.group].append(p)
    for group, placed in sorted(members.items()):
        if any(p.affinity is not None for p in placed):
            hosts = sorted({p.host for p in placed})
            if len(hosts) > 1:
                problems.append(f"affine group {group}: VMs on hosts {hosts}")
            if any(p.anti_affinity is not None for p in placed):
                problems.append(f"group {group}: VMs asked affinity and anti-affinity")


def _check_slices(data: dict[str, list[Any]], hosts: dict[int, Host], problems: list[str]) -> None:
    """From the placements alone: no cache's ways over-allocated beside the host's own, no domain's caps
    over the host's limit, no more resctrl groups on a host (its default group and one per VM holding a
    slice or a cap anywhere on it) than its smallest class count (a CLOS id is host-wide)."""
    ways: Counter[tuple[int, int]] = Counter()
    caps: Counter[tuple[int, int]] = Counter()
    groups: Counter[int] = Counter()
    for _, _name, host_id, doc in data["vms"]:
        p = placement_from_dict(json.loads(doc))
        groups[host_id] += bool(p.llc or p.mem_bw)
        for cache, n in p.llc:
            ways[(host_id, cache)] += n
        for domain, cap in p.mem_bw:
            caps[(host_id, domain)] += cap
    for (host_id, cache), n in sorted(ways.items()):
        host = hosts[host_id]
        bank = l3_banks(host.resctrl)[cache]
        kept = host.resctrl_policy.llc_default_ways or 0
        if bank.ways is None or n + kept > bank.ways:
            problems.append(f"host {host.name}: cache {cache}: {n} ways to VMs + {kept} kept > {bank.ways}")
    for (host_id, domain), total in sorted(caps.items()):
        host = hosts[host_id]
        if total > host.resctrl_policy.mem_bw_limit:
            problems.append(f"host {host.name}: domain {domain}: caps {total} > {host.resctrl_policy.mem_bw_limit}")
    for host_id, vms in sorted(groups.items()):
        host = hosts[host_id]
        closids = [c.max_allocs for b in host.resctrl.caches for c in b.controls]
        closids += [n.max_allocs for n in host.resctrl.memory_bandwidth if n.max_allocs is not None]
        if vms and 1 + vms > min(closids, default=0):
            problems.append(f"host {host.name}: {vms} VMs hold resctrl groups beside the default group, "
                            f"the host has {min(closids, default=0)} classes of service")
