"""Cache and memory-bandwidth slices (Intel RDT / AMD PQoS, libvirt's ``cachetune`` and ``memorytune``): what
a VM asks, what a host has left, and the one rule between them.

Pure: no I/O. A VM that asks for a slice gets it on every L3 domain its
vCPUs' pCPUs touch (its placement's ``llc``: (cache id, ways), and
``mem_bw``: (domain id, cap)). The rule, asked by the engine's ``resctrl``
filter (a cell whose domains have no room is not used), by admission (check
``resctrl``, on the placement built) and so by every claim and move:

* a host places no slice without resctrl: cache allocation (CAT) needs
  allocatable L3 banks **and** the ways the operator keeps for the host's
  own processes (``vnuma host reserve H --llc-ways N``: vnuma cannot know
  what the host needs, so a host where it was never set is refused with
  that hint); caps need memory-bandwidth domains (MBA);
* ways on one cache id are exclusive and add up: the default group's, then
  each VM's, within the bank's ways (libvirt never lets two allocations
  overlap, and refuses one of the whole cache);
* a slice is a whole number of granules, at least the control's minimum:
  ``--llc SIZE`` is rounded up to whole granules of each host's banks;
* each allocation group takes a class of service (CLOS id) of the **host's**
  (:func:`host_room`): a group is one directory under ``/sys/fs/resctrl``
  whose ``schemata`` holds a mask on every cache id, so a VM with a slice
  on one socket only still takes one of the host's. The groups are the
  default group and each VM holding a slice or a cap anywhere on the host
  (libvirt makes one group per VM: :mod:`vnuma.render.tune`), at most the
  smallest ``maxAllocs`` over all the host's bank controls and bandwidth
  domains (the kernel's limit is the smallest ``num_closids`` of the enabled
  resources; under CDP the code and data controls each report their own,
  halved, count); each group also takes a monitoring ID (RMID) of the
  host's, at most its ``maxMonitors``;
* a cap is a multiple of the domain's granularity, at least its minimum,
  at most 100, and the caps on one domain add up to at most the host's
  ``--mem-bw-limit`` (default 100: no oversubscription).

On a CDP host (code and data controls apart) a VM's ways are taken for
code and for data alike, so one count per cache id holds for both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

from vnuma.placement.model import Placement, Tenant, VmRequest
from vnuma.topology import Host
from vnuma.topology.resctrl import BandwidthNode, CacheBank, Resctrl, bandwidth_nodes, l3_banks

RESERVE_HINT = "keep ways for the host's own processes first: vnuma host reserve {host} --llc-ways N"


def with_tenant_slices(req: VmRequest, tenant: Tenant) -> VmRequest:
    """``req`` with its tenant's slice where it asks none of its own (the cache slice and the bandwidth cap
    apart: a VM's own ``--llc``/``--llc-ways`` replaces the tenant's either, its ``--mem-bw`` the tenant's)."""
    own_llc = req.llc_ways is not None or req.llc_kib is not None
    changes: dict[str, int | None] = {}
    if not own_llc and (tenant.llc_ways is not None or tenant.llc_kib is not None):
        changes.update(llc_ways=tenant.llc_ways, llc_kib=tenant.llc_kib)
    if req.mem_bw is None and tenant.mem_bw is not None:
        changes["mem_bw"] = tenant.mem_bw
    return replace(req, **changes) if changes else req  # type: ignore[arg-type]


def format_asks(llc_kib: int | None, llc_ways: int | None, mem_bw: int | None) -> str:
    """A tenant's slice as its column stores it: ``""``, or ``llc_kib=N``/``llc_ways=N`` and ``mem_bw=N``."""
    parts = [f"{k}={v}" for k, v in (("llc_kib", llc_kib), ("llc_ways", llc_ways), ("mem_bw", mem_bw)) if v is not None]
    return ",".join(parts)


def parse_asks(text: str) -> tuple[int | None, int | None, int | None]:
    """:func:`format_asks`' text read back as (llc_kib, llc_ways, mem_bw).

    Raises:
        ValueError: text it does not write.
    """
    values: dict[str, int] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        if key not in ("llc_kib", "llc_ways", "mem_bw") or not value.isdecimal() or len(value) > 9:
            raise ValueError(f"bad tenant slice {text!r}")
        values[key] = int(value)
    return values.get("llc_kib"), values.get("llc_ways"), values.get("mem_bw")


def wants(req: VmRequest) -> bool:
    """Whether the request asks for a cache slice or a bandwidth cap."""
    return req.llc_ways is not None or req.llc_kib is not None or req.mem_bw is not None


def ways_for(req: VmRequest, bank: CacheBank) -> int:
    """The ways ``req`` asks on ``bank``: ``llc_ways``, or ``llc_kib`` rounded up to whole granules, at least
    the control's minimum."""
    control = bank.controls[0]
    granule = control.granularity_kib
    asked = req.llc_ways if req.llc_ways is not None else -(-(req.llc_kib or 0) // granule)
    return max(asked, -(-control.min_kib // granule))


class ResctrlUse:
    """What the VMs on one host hold: ways per cache id, caps per domain, and how many VMs hold a slice or a
    cap (each one resctrl group: a class of service and a monitoring ID of the host's); ``fits`` remembers
    the (asks, L3 ids) :func:`cell_room` found room for on those domains, until a change on one of them."""

    __slots__ = ("bw", "fits", "vms", "ways")

    def __init__(self) -> None:
        self.ways: dict[int, int] = {}
        self.bw: dict[int, int] = {}
        self.vms = 0
        """VMs holding a slice or a cap anywhere on the host: each is one resctrl group."""
        self.fits: set[tuple[int | None, int | None, int | None, tuple[int, ...]]] = set()

    @classmethod
    def of(cls, placements: Iterable[Placement]) -> ResctrlUse:
        """What ``placements`` (the VMs on one host) hold."""
        use = cls()
        for p in placements:
            use.apply(p, +1)
        return use

    def apply(self, p: Placement, sign: int) -> None:
        """Count ``p``'s slices in (``sign`` +1) or out (-1)."""
        if not p.llc and not p.mem_bw:
            return
        if self.fits:
            touched = {i for i, _w in p.llc} | {i for i, _c in p.mem_bw}
            self.fits = {key for key in self.fits if touched.isdisjoint(key[3])}
        for i, ways in p.llc:
            self.ways[i] = self.ways.get(i, 0) + sign * ways
        for i, cap in p.mem_bw:
            self.bw[i] = self.bw.get(i, 0) + sign * cap
        self.vms += sign


@dataclass(frozen=True, slots=True)
class Classes:
    """A host's classes of service as its VMs see them (``host show``): ``total`` the resctrl groups VMs may
    make (the host's count less the one its default group holds), ``used`` the VMs holding one (a slice or a
    cap anywhere on the host). ``used`` exceeds ``total`` only on a host that changed under its VMs."""

    used: int
    total: int

    @property
    def left(self) -> int:
        """Groups VMs may still make (0 when over-used)."""
        return max(self.total - self.used, 0)


def classes(host: Host, use: ResctrlUse) -> Classes | None:
    """``host``'s :class:`Classes` beside what its VMs hold (``use``), or None where no control reports a
    class count (no allocation: no VM holds a group there)."""
    found = _facts(host.resctrl).classes
    return None if found is None else Classes(use.vms, found - 1)


@dataclass(frozen=True, slots=True)
class Problem:
    reason: str
    hint: str | None = None


def host_problem(host: Host, req: VmRequest, *, policy: bool = True) -> Problem | None:
    """Why ``host`` can place no slice ``req`` asks for at all, or None: no resctrl for it, or (``policy``)
    no ways kept for the host's own processes."""
    if req.llc_ways is not None or req.llc_kib is not None:
        if not _facts(host.resctrl).banks:
            return Problem(f"llc: host {host.name!r} has no L3 cache allocation (resctrl CAT)",
                           "place it on a host whose capabilities list L3 <control>s, or without a slice "
                           "(vnuma place with no --llc or --llc-ways)")
        if policy and host.resctrl_policy.llc_default_ways is None:
            return _no_ways_kept(host)
    if req.mem_bw is not None and not _facts(host.resctrl).nodes:
        return Problem(f"mem-bw: host {host.name!r} has no memory-bandwidth allocation (resctrl MBA)",
                       "place it on a host whose capabilities list <memory_bandwidth>, or without a cap "
                       "(vnuma place with no --mem-bw)")
    return None


def _no_ways_kept(host: Host) -> Problem:
    return Problem(f"llc: host {host.name!r} keeps no cache ways for its own processes yet",
                   RESERVE_HINT.format(host=host.name))


@dataclass(frozen=True, slots=True)
class _Facts:
    """A host's resctrl facts as the rule reads them, worked out once per :class:`Resctrl` object (hosts of
    one topology share it): banks and domains by id, the host's classes of service (None: no control reports
    a count), each CPU's L3 id."""

    resctrl: Resctrl
    banks: dict[int, CacheBank]
    nodes: dict[int, BandwidthNode]
    classes: int | None
    l3_of: dict[int, int]

    def touched(self, cpus: Iterable[int]) -> tuple[int, ...]:
        """The L3 ids of ``cpus``, ascending."""
        l3_of = self.l3_of
        return tuple(sorted({l3_of[c] for c in cpus if c in l3_of}))


_FACTS: dict[int, _Facts] = {}


def _facts(resctrl: Resctrl) -> _Facts:
    found = _FACTS.get(id(resctrl))
    if found is not None and found.resctrl is resctrl:
        return found
    banks, nodes = l3_banks(resctrl), bandwidth_nodes(resctrl)
    limits = [c.max_allocs for b in resctrl.caches for c in b.controls]
    limits += [n.max_allocs for n in resctrl.memory_bandwidth if n.max_allocs is not None]
    classes = min(limits, default=None)
    l3_of = {cpu: b.id for b in resctrl.caches if b.level == 3 for cpu in b.cpus}
    if len(_FACTS) > 4096:
        _FACTS.clear()
    made = _FACTS[id(resctrl)] = _Facts(resctrl, banks, nodes, classes, l3_of)
    return made


def slices(host: Host, req: VmRequest, vcpu_pcpus: Iterable[int]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The (``llc``, ``mem_bw``) of a VM asking ``req`` whose vCPUs run on ``vcpu_pcpus``: one entry per L3
    domain they touch (a domain without allocation gets 0 ways, which the rule refuses)."""
    return slices_on(host, req, _facts(host.resctrl).touched(vcpu_pcpus))


def slices_on(host: Host, req: VmRequest, ids: tuple[int, ...]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """:func:`slices` on the L3 domains ``ids``."""
    banks = _facts(host.resctrl).banks
    llc: tuple[tuple[int, int], ...] = ()
    if req.llc_ways is not None or req.llc_kib is not None:
        llc = tuple((i, ways_for(req, banks[i]) if i in banks else 0) for i in ids)
    mem_bw = tuple((i, req.mem_bw) for i in ids) if req.mem_bw is not None else ()
    return llc, mem_bw


def policy_problem(host: Host, use: ResctrlUse) -> Problem | None:
    """Why ``host``'s resctrl policy cannot stand beside what its VMs hold (``use``), or None: the default
    group's ways at least 1 and, with the VMs' ways, within every bank; the VMs' caps within the limit."""
    policy = host.resctrl_policy
    ways = policy.llc_default_ways
    if ways is not None:
        banks = l3_banks(host.resctrl)
        if not banks:
            return Problem(f"host {host.name!r} has no L3 cache allocation (resctrl CAT) to keep ways of")
        for i, bank in sorted(banks.items()):
            assert bank.ways is not None
            held = use.ways.get(i, 0)
            if ways < 1 or ways + held > bank.ways:
                return Problem(f"llc: cache {i} has {bank.ways} ways, its VMs hold {held}: the host's own processes "
                               f"can keep 1 to {bank.ways - held}, not {ways}")
    if policy.mem_bw_limit < 1:
        return Problem(f"mem-bw: the limit must be 1 or more, not {policy.mem_bw_limit}")
    for i, used in sorted(use.bw.items()):
        if used > policy.mem_bw_limit:
            return Problem(f"mem-bw: the VMs on domain {i} hold caps of {used} in all, more than {policy.mem_bw_limit}",
                           "release or move VMs first, or keep a higher limit")
    return None


def refusal(
    host: Host, use: ResctrlUse, vm: str, llc: tuple[tuple[int, int], ...], mem_bw: tuple[tuple[int, int], ...],
    vcpu_pcpus: Iterable[int],
) -> Problem | None:
    """Why a VM's slices ``llc``/``mem_bw`` (its vCPUs on ``vcpu_pcpus``) may not be had on ``host`` given
    ``use`` (what the other VMs hold), or None: the rule of the module doc."""
    if not llc and not mem_bw:
        return None
    facts = _facts(host.resctrl)
    touched = facts.touched(vcpu_pcpus)
    for name, entries in (("llc", llc), ("mem-bw", mem_bw)):
        if entries and tuple(i for i, _v in entries) != touched:
            return Problem(f"{name}: VM {vm!r} has slices on L3 domains {[i for i, _v in entries]}, its vCPUs touch "
                           f"{list(touched)}", "the host changed since the placement was computed; place it again")
    return room(host, use, vm, llc, mem_bw)


def cell_room(host: Host, use: ResctrlUse, req: VmRequest, ids: tuple[int, ...]) -> Problem | None:
    """Why the L3 domains ``ids`` (a cell's) have no room for the slices ``req`` asks, or None: :func:`room` of
    :func:`slices_on` them. A fit on the domains is remembered in ``use`` until their next change (the
    host-wide counts are read afresh; a refusal names the VM, so it is worked out each time)."""
    key = (req.llc_ways, req.llc_kib, req.mem_bw, ids)
    if key in use.fits:
        return host_room(host, use)
    llc, mem_bw = slices_on(host, req, ids)
    found = room(host, use, req.name, llc, mem_bw)
    if found is None:
        if len(use.fits) > 4096:  # a bound on memory: asks of many sizes
            use.fits.clear()
        use.fits.add(key)
    return found


def cell_domains(host: Host) -> dict[int, tuple[int, ...]]:
    """Each CPU cell's L3 domains (ids of the banks holding any of its CPUs)."""
    facts = _facts(host.resctrl)
    return {c.id: facts.touched(c.cpu_ids) for c in host.cells if c.cpus}


def domains_of(host: Host, cpus: Iterable[int]) -> dict[int, int]:
    """The L3 domains ``cpus`` touch (ids ascending), each with how many of ``cpus`` it holds."""
    l3_of = _facts(host.resctrl).l3_of
    return dict(sorted(Counter(l3_of[c] for c in cpus if c in l3_of).items()))


def room(
    host: Host, use: ResctrlUse, vm: str, llc: tuple[tuple[int, int], ...], mem_bw: tuple[tuple[int, int], ...]
) -> Problem | None:
    """The arithmetic of the rule: ``llc``/``mem_bw`` against the host's facts, policy and ``use``; the
    host-wide counts (:func:`host_room`) before the domains'."""
    if llc and host.resctrl_policy.llc_default_ways is None:
        return _no_ways_kept(host)
    return host_room(host, use) or _domain_room(host, use, vm, llc, mem_bw)


def host_room(host: Host, use: ResctrlUse) -> Problem | None:
    """Why a VM can make no resctrl group on ``host`` beside the VMs' groups ``use`` counts (the default
    group holds one), or None: a monitoring ID and a class of service of the host's are left."""
    facts = _facts(host.resctrl)
    groups = use.vms + 1
    rmids = facts.resctrl.max_monitors
    if rmids is not None and groups + 1 > rmids:
        return Problem(f"resctrl: host {host.name!r} has no free monitoring ID (RMID): {groups} of {rmids} "
                       "in use", "place it where fewer VMs hold slices")
    total = facts.classes
    if total is not None and groups + 1 > total:
        vms = f" and {use.vms} VM{'s' if use.vms != 1 else ''}" if use.vms else ""
        return Problem(f"resctrl: host {host.name!r} has no free class of service ({groups} of {total} in use: "
                       f"the default group{vms})",
                       "a class of service is host-wide, whatever cells a VM uses: place it on a host where fewer "
                       "VMs hold slices or caps")
    return None


def _domain_room(
    host: Host, use: ResctrlUse, vm: str, llc: tuple[tuple[int, int], ...], mem_bw: tuple[tuple[int, int], ...]
) -> Problem | None:
    """The rule on each L3 domain: ways and caps."""
    facts = _facts(host.resctrl)
    policy = host.resctrl_policy
    banks = facts.banks
    for i, ways in llc:
        bank = banks.get(i)
        if bank is None or bank.ways is None:
            return Problem(f"llc: cache {i} of host {host.name!r} takes no allocation")
        control = bank.controls[0]
        if ways < 1 or ways * control.granularity_kib < control.min_kib:
            return Problem(f"llc: {ways} way(s) of {control.granularity_kib} KiB is below cache {i}'s minimum "
                           f"of {control.min_kib} KiB")
        free = bank.ways - (policy.llc_default_ways or 0) - use.ways.get(i, 0)
        if ways > free:
            return Problem(f"llc: cache {i} has {max(free, 0)} free ways of {bank.ways}, VM {vm!r} asks {ways}",
                           "ask for fewer ways, or place it where the cache has room")
    nodes = facts.nodes
    for i, cap in mem_bw:
        node = nodes.get(i)
        if node is None or node.granularity is None:
            return Problem(f"mem-bw: L3 domain {i} of host {host.name!r} takes no bandwidth cap")
        least = node.min or node.granularity
        if cap > 100 or cap < least or cap % node.granularity:
            return Problem(f"mem-bw: a cap of {cap} on domain {i} is not a multiple of {node.granularity} "
                           f"from {least} to 100")
        left = policy.mem_bw_limit - use.bw.get(i, 0)
        if cap > left:
            return Problem(f"mem-bw: domain {i} has {max(left, 0)} of {policy.mem_bw_limit} left, VM {vm!r} asks {cap}",
                           "ask for a lower cap, or place it where the domain has room")
    return None
