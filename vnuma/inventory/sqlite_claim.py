"""A claim through ``sqlite3``: the DB-API twin of ``vms.claim`` for :mod:`.sqlite_direct`.

Runs inside the caller's ``BEGIN IMMEDIATE`` transaction, so nothing else
writes the inventory between the re-checks and the inserts. The checks
(:func:`.claims.check_claim`, :func:`.claims.check_tenant_quota`), the
stored document (:func:`.claims.encode_placement`) and the claim rows
(:func:`.claims.claim_rows`) are the ones ``vms.claim`` uses; only the SQL
is written out here. The unique indexes on the claim tables refuse a double
booking even if those checks were wrong.
"""

from __future__ import annotations

import sqlite3

from vnuma.errors import ConflictError, NotFoundError
from vnuma.inventory.claims import (
    Holder,
    HostClaims,
    check_claim,
    check_tenant_quota,
    claim_rows,
    encode_placement,
    gpu_count,
    host_claims,
)
from vnuma.inventory.guard import cause_of
from vnuma.inventory.schema import VmState
from vnuma.inventory.topologies import decode_host
from vnuma.placement.model import Isolation, Placement
from vnuma.topology import Host

_HOLDER = "v.name, t.name, t.isolation FROM {table} JOIN vms v ON v.id = x.vm_id JOIN tenants t ON t.id = v.tenant_id"


def claim_in(c: sqlite3.Connection, p: Placement, isolation: Isolation | None) -> None:
    """Record a VM and everything it holds, after re-checking the host as it is now.

    Raises:
        NotFoundError: no such host, or no such tenant and no ``isolation``.
        InvalidInputError: a malformed placement.
        ConflictError: the VM name exists, a resource is taken or reserved,
            an isolation rule or a tenant quota would be broken.
    """
    row = c.execute(
        "SELECT id, name, uri, source, topology, reserved_cpuset FROM hosts WHERE name = ?", (p.host,)
    ).fetchone()
    if row is None:
        raise NotFoundError(f"host {p.host!r} is not in the inventory", hint="see `vnuma host list`")
    host_id = int(row[0])
    if c.execute("SELECT id FROM vms WHERE name = ?", (p.vm,)).fetchone() is not None:
        raise ConflictError(
            f"VM {p.vm!r} already exists", hint=f"release it first with `vnuma vm release {p.vm}`"
        )
    tenant_id, tenant_isolation, max_vcpus, max_gpus = _tenant(c, p.tenant, isolation)
    host = decode_host(*row[1:])
    check_claim(p, tenant_isolation, host, load_claims(c, host_id, host))
    check_tenant_quota(p.tenant, max_vcpus, max_gpus, tenant_usage_in(c, p.tenant), p)
    rows = claim_rows(p, host)
    try:
        vm_id = c.execute(
            "INSERT INTO vms (name, tenant_id, host_id, state, vcpus, gpus, placement) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (p.vm, tenant_id, host_id, VmState.PLACED.value, p.vcpus, gpu_count(p), encode_placement(p)),
        ).lastrowid
        c.executemany(
            "INSERT INTO cpu_claims (vm_id, host_id, cpu_id, exclusive) VALUES (?, ?, ?, ?)",
            [(vm_id, host_id, cpu, excl) for cpu, excl in rows.cpus],
        )
        c.executemany(
            "INSERT INTO page_claims (vm_id, host_id, cell_id, page_size_kib, count) VALUES (?, ?, ?, ?, ?)",
            [(vm_id, host_id, cell, size, n) for cell, size, n in rows.pages],
        )
        c.executemany(
            "INSERT INTO device_claims (vm_id, host_id, address) VALUES (?, ?, ?)",
            [(vm_id, host_id, address) for address in rows.devices],
        )
    except sqlite3.IntegrityError as err:
        raise ConflictError(
            f"host {p.host!r}: the inventory refused VM {p.vm!r}: {cause_of(err)}",
            hint="another command claimed the same resources first; place the VM again",
        ) from err
    # As hosts.bump_generation (SQLAlchemy adds the updated_at of the column's onupdate).
    c.execute(
        "UPDATE hosts SET host_generation = host_generation + 1, updated_at = CURRENT_TIMESTAMP WHERE id = ?",
        (host_id,),
    )


def _tenant(
    c: sqlite3.Connection, name: str, isolation: Isolation | None
) -> tuple[int, Isolation, int | None, int | None]:
    """The tenant's id, isolation and quotas; created with ``isolation`` if missing and given."""
    sql = "SELECT id, isolation, max_vcpus, max_gpus FROM tenants WHERE name = ?"
    row = c.execute(sql, (name,)).fetchone()
    if row is None:
        if isolation is None:
            raise NotFoundError(f"tenant {name!r} is not in the inventory", hint="see `vnuma tenant list`")
        c.execute(
            "INSERT INTO tenants (name, isolation, max_vcpus, max_gpus) VALUES (?, ?, NULL, NULL)",
            (name, isolation.value),
        )
        row = c.execute(sql, (name,)).fetchone()
    return int(row[0]), Isolation(row[1]), row[2], row[3]


def load_claims(c: sqlite3.Connection, host_id: int, host: Host) -> HostClaims:
    """What the VMs on a host hold now (the twin of ``vms.load_claims``)."""
    cpus = c.execute(
        "SELECT x.cpu_id, x.exclusive, " + _HOLDER.format(table="cpu_claims x")
        + " WHERE x.host_id = ? ORDER BY v.name, x.cpu_id",
        (host_id,),
    ).fetchall()
    pages = c.execute(
        "SELECT cell_id, page_size_kib, sum(count) FROM page_claims WHERE host_id = ? "
        "GROUP BY cell_id, page_size_kib",
        (host_id,),
    ).fetchall()
    page_users = c.execute(
        "SELECT DISTINCT x.cell_id, " + _HOLDER.format(table="page_claims x") + " WHERE x.host_id = ?",
        (host_id,),
    ).fetchall()
    devices = c.execute(
        "SELECT x.address, v.name FROM device_claims x JOIN vms v ON v.id = x.vm_id WHERE x.host_id = ?",
        (host_id,),
    ).fetchall()
    return host_claims(
        ((cpu, bool(excl), Holder(vm, t, Isolation(iso))) for cpu, excl, vm, t, iso in cpus),
        pages,
        ((cell, Holder(vm, t, Isolation(iso))) for cell, vm, t, iso in page_users),
        ((address, vm) for address, vm in devices),
        host,
    )


def tenant_usage_in(c: sqlite3.Connection, name: str) -> tuple[int, int]:
    """(vCPUs, GPUs) held by the tenant's VMs, inside the caller's transaction."""
    row = c.execute(
        "SELECT coalesce(sum(v.vcpus), 0), coalesce(sum(v.gpus), 0) FROM vms v "
        "JOIN tenants t ON t.id = v.tenant_id WHERE t.name = ?",
        (name,),
    ).fetchone()
    return int(row[0]), int(row[1])
