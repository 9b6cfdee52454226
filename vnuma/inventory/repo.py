"""The inventory repository: every read and write of hosts, tenants, VMs and claims.

Each public method runs in exactly one ``Session.begin()`` transaction and
returns frozen dataclasses (or plain dicts/tuples of them); ORM rows never
leave ``vnuma.inventory``. Library errors come out as ``ConflictError``
(a constraint refused the change) or ``InventoryError`` (database trouble).
Get one with :func:`vnuma.inventory.open_inventory`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from vnuma.inventory import audit, devices, embedded, hosts, hostwrite, journal, placing, reading, tenants, vms
from vnuma.inventory.embedded import KeptDomain
from vnuma.inventory.executor import AlchemyExecutor, Executor
from vnuma.inventory.guard import guarded
from vnuma.inventory.journal import NewStep, RunRecord
from vnuma.inventory.reading import Snapshot
from vnuma.inventory.schema import WRITE_OPTION, RunStatus, VmState
from vnuma.placement.model import Isolation, Placement, Tenant
from vnuma.topology import Host, format_cpuset
from vnuma.topology.devstates import DeviceStates
from vnuma.topology.leftout import LeftOut
from vnuma.topology.resctrl import ResctrlPolicy

T = TypeVar("T")


class Inventory:
    """Hosts, tenants, VMs and their claims in one database."""

    def __init__(self, engine: Engine, url: str, *, owns_engine: bool = True) -> None:
        self.url = url
        self._engine = engine
        self._owns_engine = owns_engine
        # SQLite write transactions start with BEGIN IMMEDIATE (see db.make_engine).
        self._write_engine = engine.execution_options(**{WRITE_OPTION: True})

    def close(self) -> None:
        """Release the database connections (a shared engine's go back to its pool)."""
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> Inventory:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back when it raises."""
        with guarded(self.url), Session(self._write_engine if write else self._engine) as s, s.begin():
            yield s

    def _read(self, fn: Callable[..., T], *args: Any) -> T:
        with self._session() as s:
            return fn(s, *args)

    def _read_x(self, fn: Callable[[Executor], T]) -> T:
        """``fn`` on an executor in one read transaction (the placing queries, :mod:`.placing`)."""
        with self._session() as s:
            return fn(AlchemyExecutor(s.connection()))

    def _write_x(self, fn: Callable[[Executor], T]) -> T:
        """``fn`` on an executor in one write transaction."""
        with self._session(write=True) as s:
            return fn(AlchemyExecutor(s.connection()))

    def _write(self, change: tuple[str, dict[str, Any]], fn: Callable[..., T], *args: Any) -> T:
        """``fn(session, *args)`` in one write transaction that also logs ``change`` (op, details) in the audit
        log; a VM named in the details (or a rebalance step's VMs) is looked up first for its host and tenant."""
        op, details = change
        with self._session(write=True) as s:
            x = AlchemyExecutor(s.connection())
            if "run" in details:
                details = {**audit.step_subjects(x, details["run"], details.get("step")), **details}
            elif isinstance(details.get("vm"), str):
                details = {**details, **audit.vm_subjects(x, details["vm"])}
            out = fn(s, *args)
            audit.record(x, op, **details)
            return out

    # --- hosts ------------------------------------------------------------------------------

    def add_host(self, host: Host, topology_override: str | None = None, left_out: Sequence[LeftOut] = ()) -> None:
        """Add a new host, where a refresh reads its topology and the parts its import left out (ConflictError
        if the name exists)."""
        self._write_x(lambda x: hostwrite.insert_host(x, host, topology_override, left_out))

    def replace_host(self, host: Host, topology_override: str | None = None, left_out: Sequence[LeftOut] = ()) -> None:
        """Refresh a host's topology (read from ``topology_override``, leaving out ``left_out``), keeping its
        reserved CPUs.

        Refused (ConflictError) if it drops claimed resources.
        """
        self._write(("host-refresh", {"host": host.name, "cells": len(host.cells), "left_out": len(left_out)}),
                    hosts.replace_host, host, topology_override, left_out)

    def left_out(self, name: str) -> tuple[LeftOut, ...]:
        """The parts the import that wrote the host's topology left out (NotFoundError if unknown)."""
        return self._read(hosts.left_out, name)

    def topology_override(self, name: str) -> str | None:
        """Where a refresh reads the host's topology; None: libvirt's capabilities (NotFoundError if unknown)."""
        return self._read(hosts.topology_override, name)

    def embedded_domains(self, name: str) -> dict[str, KeptDomain] | None:
        """The domains kept for a ``test://`` host, None if never kept (:func:`.embedded.kept_domains`)."""
        return self._read_x(lambda x: embedded.kept_domains(x, name))

    def keep_embedded_domain(
        self, host: str, name: str, now: KeptDomain | None, held: Sequence[KeptDomain]
    ) -> None:
        """Keep one domain of a ``test://`` host as its driver holds it now (:func:`.embedded.keep_domain`)."""
        self._write_x(lambda x: embedded.keep_domain(x, host, name, now, held))

    def set_cordoned(self, name: str, cordoned: bool) -> bool:
        """Cordon or uncordon a host (NotFoundError if unknown); returns whether it was cordoned before."""
        return self._write(("host-cordon" if cordoned else "host-uncordon", {"host": name}), hosts.set_cordoned, name,
                           cordoned)

    def change_device_states(
        self, name: str, change: Callable[[Host, str], DeviceStates], op: str, details: dict[str, Any],
        guard: Callable[[Executor], None] | None = None,
    ) -> tuple[Host, DeviceStates]:
        """Host ``name`` as it was and its device states after ``change(host, who)`` (``who``: the invocation's
        user), written under the host's lock and logged as ``op`` (:func:`.devices.change_states`). ``guard``
        runs first in the same transaction; what it raises writes nothing (``vnuma watch``: its lease)."""
        with self._session(write=True) as s:
            x = AlchemyExecutor(s.connection())
            if guard is not None:
                guard(x)
            who = audit.current().user
            out = devices.change_states(x, name, lambda host: change(host, who))
            if out[1] != out[0].device_states:
                audit.record(x, op, host=name, **details)
            return out

    def topology_overrides(self) -> dict[str, str]:
        """Host name -> topology override, for the hosts that have one."""
        return self._read(hosts.topology_overrides)

    def get_host(self, name: str) -> Host:
        """One host (NotFoundError if unknown)."""
        return self._read_x(lambda x: reading.read_host(x, name))

    def list_hosts(self) -> list[Host]:
        """Every host, sorted by name."""
        return self._read_x(reading.read_hosts)

    def snapshot(self) -> Snapshot:
        """Tenants, hosts and placements in one transaction: what the engine decides on."""
        return self._read_x(reading.read_snapshot)

    def host_summaries(self) -> list[dict[str, Any]]:
        """``codec.host_summary`` of every host, without parsing topologies."""
        return self._read_x(reading.host_summaries)

    def remove_host(self, name: str) -> None:
        """Remove a host (ConflictError while VMs are placed on it)."""
        self._write(("host-remove", {"host": name}), hosts.remove_host, name)

    def reserve_cpus(self, name: str, cpus: frozenset[int]) -> None:
        """Set the CPUs kept for the host itself (InvalidInputError if absent, ConflictError if claimed)."""
        self._write(("host-reserve", {"host": name, "cpus": format_cpuset(cpus)}), hosts.reserve_cpus, name, cpus)

    def reserve(self, name: str, cpus: frozenset[int] | None, policy: ResctrlPolicy | None) -> None:
        """Set the host's reserved CPUs and/or its resctrl policy, in one transaction (see :func:`hosts.reserve`)."""
        details: dict[str, Any] = {"host": name}
        if cpus is not None:
            details["cpus"] = format_cpuset(cpus)
        if policy is not None:
            details.update(llc_ways=policy.llc_default_ways, mem_bw_limit=policy.mem_bw_limit)
        self._write(("host-reserve", details), hosts.reserve, name, cpus, policy)

    def host_generation(self, name: str) -> int:
        """Counter bumped on every change of the host's claims, reservation or topology."""
        return self._read(hosts.host_generation, name)

    # --- tenants ----------------------------------------------------------------------------

    def add_tenant(self, t: Tenant) -> None:
        """Add a tenant (ConflictError if the name exists)."""
        self._write(("tenant-create", {"tenant": t.name, "isolation": t.isolation.value, "max_vcpus": t.max_vcpus,
                                        "max_gpus": t.max_gpus, "llc_kib": t.llc_kib, "llc_ways": t.llc_ways,
                                        "mem_bw": t.mem_bw}), tenants.add_tenant, t)

    def get_tenant(self, name: str) -> Tenant:
        """One tenant (NotFoundError if unknown)."""
        return self._read(tenants.get_tenant, name)

    def list_tenants(self) -> list[Tenant]:
        """Every tenant, sorted by name."""
        return self._read(tenants.list_tenants)

    def update_tenant(self, new: Tenant) -> Tenant:
        """Give a tenant new isolation and quotas; the old record back (ConflictError if its VMs break
        the new isolation, NotFoundError if unknown)."""
        with self._session(write=True) as s:
            return placing.update_tenant(AlchemyExecutor(s.connection()), new)

    def remove_tenant(self, name: str) -> None:
        """Remove a tenant (ConflictError while it has VMs)."""
        self._write(("tenant-remove", {"tenant": name}), tenants.remove_tenant, name)

    def tenant_usage(self, name: str) -> tuple[int, int]:
        """(vCPUs, GPUs) held by the tenant's VMs; (0, 0) when it has none."""
        return self._read(tenants.tenant_usage, name)

    def tenants(self) -> dict[str, Tenant]:
        """Every tenant with its isolation and quotas, by name."""
        return self._read_x(reading.read_tenants)

    # --- VMs and claims ---------------------------------------------------------------------

    def claim(self, placement: Placement, isolation: Isolation | None = None) -> None:
        """Record the VM and its pCPU, page and device claims in one transaction.

        ``isolation`` is the tenant's: given, the tenant is created with it if
        it does not exist yet; None requires the tenant to exist. Capacity,
        reservations, isolation and quotas are re-checked inside the
        transaction; on any refusal nothing is written.

        Raises:
            NotFoundError: unknown host, or unknown tenant with no isolation given.
            InvalidInputError: a malformed placement.
            ConflictError: the VM exists or a resource is no longer free.
        """
        with self._session(write=True) as s:
            placing.claim(AlchemyExecutor(s.connection()), placement, isolation)

    def release(self, vm_name: str) -> None:
        """Delete a VM and free everything it claimed (NotFoundError if unknown)."""
        self._write(("release", {"vm": vm_name}), vms.release, vm_name)

    def get_vm(self, name: str) -> tuple[Placement, VmState]:
        """A VM's placement and state (NotFoundError if unknown)."""
        return self._read_x(lambda x: reading.get_vm(x, name))

    def list_vms(self, tenant: str | None = None, host: str | None = None) -> list[tuple[Placement, VmState]]:
        """VMs sorted by name, optionally filtered by tenant and/or host."""
        return self._read_x(lambda x: reading.list_vms(x, tenant, host))

    def set_vm_state(self, name: str, state: str) -> None:
        """Record a VM's state: placed, defined, running or stopped."""
        self._write(("vm-state", {"vm": name, "state": str(state)}), vms.set_vm_state, name, state)

    def placements_on(self, host_names: Iterable[str] | None = None) -> list[Placement]:
        """Placements of all VMs (or those on the named hosts), sorted by host, then VM."""
        found = sorted(self._read_x(reading.read_placements), key=lambda p: (p.host, p.vm))
        if host_names is None:
            return found
        wanted = set(host_names)
        return [p for p in found if p.host in wanted]

    def record_defined(self, name: str, rendering: dict[str, Any]) -> None:
        """Record the VM as defined, with how `vnuma apply` rendered its domain, in one transaction."""
        self._write(("vm-defined", {"vm": name}), vms.record_defined, name, rendering)

    def get_rendering(self, name: str) -> dict[str, Any] | None:
        """How the VM's domain was last rendered, None if it was never applied."""
        return self._read(vms.get_rendering, name)

    # --- rebalance journal ------------------------------------------------------------------

    def open_run(self, objective: str, options: dict[str, Any], steps: list[NewStep]) -> int:
        """Journal a rebalance run with its steps pending (ConflictError if one is unfinished)."""
        hosts_moved = sorted({h for st in steps for h in (st.before.host, st.after.host)})
        moved = {"vm": [st.vm for st in steps], "host": hosts_moved}
        return self._write(("run-open", {"objective": objective, **moved}), journal.open_run, objective, options, steps)

    def unfinished_run(self) -> RunRecord | None:
        """The running or failed rebalance run, if any."""
        return self._read(journal.unfinished_run)

    def get_run(self, run_id: int) -> RunRecord:
        """A rebalance run and its steps (NotFoundError if unknown)."""
        return self._read(journal.get_run, run_id)

    def start_step(self, run_id: int, seq: int) -> None:
        """Move the step's claims to the new placement and mark it started (one transaction)."""
        self._write(("step-start", {"run": run_id, "step": seq}), journal.start_step, run_id, seq)

    def finish_step(self, run_id: int, seq: int, state: VmState) -> None:
        """Mark the step done and record the VM's domain state."""
        self._write(("step-done", {"run": run_id, "step": seq, "state": str(state)}), journal.finish_step, run_id, seq,
                    state)

    def begin_undo(self, run_id: int, seq: int) -> None:
        """Move the step's claims back to the old placement and mark it undoing."""
        self._write(("step-undo", {"run": run_id, "step": seq}), journal.begin_undo, run_id, seq)

    def finish_undo(self, run_id: int, seq: int) -> None:
        """Mark the step undone and restore the VM's recorded state."""
        self._write(("step-undone", {"run": run_id, "step": seq}), journal.finish_undo, run_id, seq)

    def stop_run(self, run_id: int, seq: int, error: str) -> RunStatus:
        """Record that the run stopped at a step with an error; it closes as aborted when none of its steps
        began, else it becomes failed (:func:`.journal.stop_run`). The run's new status."""
        return self._write(("run-fail", {"run": run_id, "step": seq, "error": error}), journal.stop_run, run_id,
                           seq, error)

    def resume_run(self, run_id: int) -> None:
        """Mark a failed run running again."""
        self._write(("run-resume", {"run": run_id}), journal.resume_run, run_id)

    def close_run(self, run_id: int, status: RunStatus) -> None:
        """Finish the run as done or aborted."""
        self._write(("run-close", {"run": run_id, "status": str(status)}), journal.close_run, run_id, status)
