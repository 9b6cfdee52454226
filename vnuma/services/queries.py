"""Read-only and small inventory use cases the CLI prints directly."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vnuma.errors import InvalidInputError, not_in_inventory
from vnuma.inventory import open_inventory
from vnuma.inventory.db import current_revision, head_revision, masked_url, upgrade
from vnuma.placement.model import Placement
from vnuma.services import Settings
from vnuma.services.names import natural_key
from vnuma.topology import Host

if TYPE_CHECKING:
    from vnuma.inventory.dbcheck import Report


def host_summaries(settings: Settings) -> list[dict[str, Any]]:
    """One summary dict per host in natural order (``host list --json``), without the ORM
    (:mod:`vnuma.inventory.reading`)."""
    from vnuma.inventory.reading import open_reader

    with open_reader(settings.db_url) as reader:
        return sorted(reader.host_summaries(), key=lambda r: natural_key(r["name"]))


def host_document(settings: Settings, name: str) -> tuple[Host, dict[str, Any]]:
    """One host and its ``host show --json`` document: its topology, each GPU's mode and free partitions as
    its VMs' claims leave them (:func:`vnuma.placement.partitions.host_gpu_use`), the resctrl classes of
    service their slices leave (:func:`vnuma.placement.resctrl.classes`), ``left_out``, the parts its import
    left out (``[{"what", "why"}]``), and ``gpu_matrix``, ``{"gpus": [address], "rows": [[cell]]}`` as
    ``nvidia-smi topo -m`` prints it (:func:`vnuma.topology.pcie.gpu_matrix`), read in one transaction.

    Raises:
        NotFoundError: unknown host.
    """
    from vnuma.codec import host_to_dict, left_out_to_list
    from vnuma.inventory.reading import open_reader
    from vnuma.placement.partitionchoice import host_gpu_use
    from vnuma.placement.resctrl import ResctrlUse
    from vnuma.topology.pcie import gpu_matrix

    with open_reader(settings.db_url) as reader:
        host, placements, tenants, left_out = reader.shown_host(name)
    doc = host_to_dict(host, host_gpu_use(host, placements, tenants.values()), ResctrlUse.of(placements))
    gpus, rows = gpu_matrix(host)
    matrix = {"gpus": list(gpus), "rows": [list(r) for r in rows]}
    return host, {**doc, "left_out": left_out_to_list(left_out), "gpu_matrix": matrix}


def remove_host(settings: Settings, name: str) -> None:
    """Forget a host (ConflictError while VMs are placed on it)."""
    with open_inventory(settings.db_url) as inventory:
        inventory.remove_host(name)


def reserve(
    settings: Settings, name: str, cpus: str | None, llc_ways: int | None, mem_bw_limit: int | None
) -> None:
    """``vnuma host reserve``: the CPUs kept for the host itself (``cpus``, a list: replaces the set), the L3
    ways kept for its own processes and its VMs' bandwidth-cap limit; each left None keeps its value.

    Raises:
        InvalidInputError: nothing given, a bad CPU list, a policy the host cannot hold.
        NotFoundError: unknown host.
        ConflictError: reserved CPUs a VM holds.
    """
    from vnuma.topology import parse_cpuset

    if cpus is None and llc_ways is None and mem_bw_limit is None:
        raise InvalidInputError("nothing to reserve", hint="give --cpus LIST, --llc-ways N or --mem-bw-limit PCT")
    from dataclasses import replace

    cpu_set = parse_cpuset(cpus) if cpus is not None else None
    with open_inventory(settings.db_url) as inventory:
        policy = None
        if llc_ways is not None or mem_bw_limit is not None:
            now = inventory.get_host(name).resctrl_policy
            changes = {k: v for k, v in (("llc_default_ways", llc_ways), ("mem_bw_limit", mem_bw_limit))
                       if v is not None}
            policy = replace(now, **changes)
        inventory.reserve(name, cpu_set, policy)


def set_cordoned(settings: Settings, name: str, cordoned: bool) -> bool:
    """Cordon or uncordon a host (NotFoundError if unknown); returns whether it was cordoned before."""
    with open_inventory(settings.db_url) as inventory:
        return inventory.set_cordoned(name, cordoned)


def remove_tenant(settings: Settings, name: str) -> None:
    """Forget a tenant (ConflictError while it has VMs)."""
    with open_inventory(settings.db_url) as inventory:
        inventory.remove_tenant(name)


def list_vms(
    settings: Settings, tenant: str | None, host: str | None, *, seen_by: str | None = None
) -> list[tuple[Placement, str]]:
    """(placement, state) of VMs in natural order of their names (``vm2`` before ``vm10``), optionally
    filtered (NotFoundError: a filter names nothing known).

    ``seen_by`` (a tenant's API token): only that tenant's VMs; a filter naming another tenant is unknown.
    """
    from vnuma.inventory.reading import open_reader

    if seen_by is not None and tenant not in (None, seen_by):
        raise not_in_inventory("tenant", tenant)
    with open_reader(settings.db_url) as reader:
        return sorted(reader.list_vms(tenant=seen_by or tenant, host=host), key=lambda v: natural_key(v[0].vm))


def get_vm(settings: Settings, name: str, *, seen_by: str | None = None) -> tuple[Placement, str]:
    """(placement, state) of one VM (NotFoundError if unknown), without the ORM; ``seen_by`` (a tenant's API
    token): another tenant's VM is unknown, with the very words of a VM that does not exist."""
    from vnuma.inventory.reading import open_reader

    with open_reader(settings.db_url) as reader:
        placement, state = reader.vm(name)
    if seen_by is not None and placement.tenant != seen_by:
        raise not_in_inventory("vm", name)
    return placement, state


def db_status(settings: Settings) -> dict[str, Any]:
    """The inventory URL (password masked), its revision and the one this vnuma needs."""
    current, head = current_revision(settings.db_url), head_revision()
    return {"url": masked_url(settings.db_url), "revision": current, "head": head, "up_to_date": current == head}


def db_upgrade(settings: Settings) -> str:
    """Migrate the inventory to head; returns the head revision."""
    upgrade(settings.db_url)
    return head_revision()


def db_check(settings: Settings) -> Report:
    """``vnuma db check``: every VM's claim rows and every host's summary columns against the placements and
    topologies they were written from, in one transaction (:mod:`vnuma.inventory.dbcheck`)."""
    from vnuma.inventory.access import open_access
    from vnuma.inventory.dbcheck import check

    with open_access(settings.db_url) as access, access.begin(False) as x:
        return check(x)


def check_serving(settings: Settings) -> None:
    """Refuse to serve an inventory that cannot be opened or is not at this vnuma's schema.

    Raises:
        InventoryError: unreachable, missing, or at another revision (hint: ``vnuma db upgrade``).
    """
    from vnuma.inventory.access import open_access

    with open_access(settings.db_url) as access, access.begin(False):
        pass
