"""Admission checks on memory and devices: ``cell-pages``, ``devices``, ``partitions``, ``sr-iov``,
``iommu-group``, ``resctrl`` (what each means: :mod:`.admit`).

Pure: no I/O.
"""

from __future__ import annotations

from vnuma.placement.iommu import group_problem
from vnuma.placement.ledger.claim import REPLACE_HINT, Claim, Refusal, page_needs
from vnuma.placement.nics import sriov_problem
from vnuma.placement.partitions import partition_problem
from vnuma.placement.resctrl import refusal as slice_refusal
from vnuma.topology import format_size_kib


class CellPages:
    """``cell-pages``: each (cell, page size) has the pages the placement takes."""

    name = "cell-pages"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse pages a cell no longer has free."""
        by_id, cold = c.hs.cell_by_id, c.hs.cold_free
        short = [
            (key, need, free)
            for key, need in page_needs(c.p).items()
            if need > (free := by_id[key[0]].pages_free.get(key[1], 0) if key[0] in by_id else cold.get(key, 0))
        ]
        if short:
            (cell_id, size), need, free = min(short)
            return Refusal(
                f"host {c.hs.name!r}: cell {cell_id} has {max(free, 0)} free pages of {format_size_kib(size)}, "
                f"VM {c.p.vm!r} needs {need}",
                REPLACE_HINT,
            )
        return None


class Devices:
    """``devices``: each device is free."""

    name = "devices"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse devices given to other VMs."""
        for dev in c.p.devices:
            holder = c.hs.devices_taken.get(dev.address)
            if holder is not None:
                return Refusal(
                    f"host {c.hs.name!r}: device {dev.address} is already given to VM {holder!r}", REPLACE_HINT
                )
        return None


class Partitions:
    """``partitions``: one mode per GPU; vGPU instances on free VFs or within the PF's instances; MIG
    instances at free allowed starts (:mod:`vnuma.placement.partitions`)."""

    name = "partitions"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a partition that does not fit, or a whole GPU that holds partitions."""
        if not c.p.partitions and not c.hs.partitions:
            return None
        problem = partition_problem(c.hs, c.p)
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}", REPLACE_HINT)


class Sriov:
    """``sr-iov``: a PF and its VFs are never both passed through."""

    name = "sr-iov"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a PF whose VFs are held, or a VF whose PF is."""
        problem = sriov_problem(c.hs.shape.device_at, c.hs.devices_taken, c.p) if c.p.devices else None
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}")


class IommuGroup:
    """``iommu-group``: VFIO passes IOMMU groups whole."""

    name = "iommu-group"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse a placement that would split an IOMMU group."""
        problem = group_problem(c.hs.shape.device_at, c.p) if c.p.devices else None
        return None if problem is None else Refusal(f"host {c.hs.name!r}: {problem}")


class Slices:
    """``resctrl``: its cache slice and bandwidth cap fit on every L3 domain it touches (:mod:`..resctrl`)."""

    name = "resctrl"

    def check(self, c: Claim) -> Refusal | None:
        """Refuse ways, classes of service or bandwidth the host does not have left."""
        p = c.p
        if not p.llc and not p.mem_bw:
            return None
        vcpu_pcpus = [x for ca in p.cells for x in ca.pcpus]
        problem = slice_refusal(c.hs.host, c.hs.resctrl_use, p.vm, p.llc, p.mem_bw, vcpu_pcpus)
        return None if problem is None else Refusal(problem.reason, problem.hint)
