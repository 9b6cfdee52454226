"""Refused request shapes, remembered by a caller that places a stream of requests on one ledger.

Pure: no I/O. The simulator owns one :class:`RefusalMemory` and passes it
to :func:`vnuma.placement.engine.place` (fast path): a request of a shape
refused before is refused again at once while the ledger has only filled
since. The memory forgets when capacity can grow again: a removal or an
isolation change (``Fleet.epoch``) and, under ``gpu-first``, any GPU claim
(``Fleet.gpu_epoch``): a VM without GPUs then sees a smaller reserve, and a
GPU VM may no longer strand the GPU that is now taken. ``place`` itself
never changes the ledger or remembers anything on it.
"""

from __future__ import annotations

from vnuma.placement.asks import shape_key
from vnuma.placement.ledger.fleet import Fleet
from vnuma.placement.model import VmRequest
from vnuma.placement.objectives import Strategy
from vnuma.placement.result import Rejection
from vnuma.topology import shape_text

Entry = tuple[int, int, int, Rejection]


class RefusalMemory:
    """Refusals of request shapes on one ledger, valid while the ledger has only filled."""

    def __init__(self) -> None:
        self._refused: dict[object, list[Entry]] = {}
        self._fleet: Fleet | None = None
        self._epoch = -1
        self._grouped = False
        """Does the fleet have GPUs sharing IOMMU groups? Then more GPUs may fit where fewer did not (a whole
        group), and a bigger GPU count is never inferred refused."""

    def _valid(self, fleet: Fleet) -> None:
        if fleet is not self._fleet or fleet.epoch != self._epoch:
            self._refused.clear()
            if fleet is not self._fleet:
                self._grouped = any(hs.shape.iommu_mates for hs in fleet.states)
            self._fleet, self._epoch = fleet, fleet.epoch

    def recall(self, request: VmRequest, fleet: Fleet, strategy: Strategy) -> Rejection | None:
        """The refusal of ``request``, if one of its shape and no larger size was refused before."""
        self._valid(fleet)
        assert request.vcpus is not None and request.memory_kib is not None
        for vcpus, memory, gpus, rejection in self._refused.get(_key(request, fleet, strategy), ()):
            if (vcpus, memory, gpus) == (request.vcpus, request.memory_kib, request.gpus):
                return rejection
            if (not self._grouped or gpus == request.gpus) and _bigger(request, vcpus, memory, gpus, strategy):
                smaller = shape_text(vcpus, memory, gpus)
                return Rejection(
                    rejection.host,
                    rejection.check,
                    f"a smaller request of the same shape ({smaller}) was refused ({rejection.check}: "
                    f"{rejection.reason}) and the fleet has only filled since",
                )
        return None

    def remember(self, request: VmRequest, fleet: Fleet, strategy: Strategy, rejection: Rejection) -> None:
        """Note that ``request`` was refused on ``fleet`` as it is now."""
        self._valid(fleet)
        assert request.vcpus is not None and request.memory_kib is not None
        entry = (request.vcpus, request.memory_kib, request.gpus, rejection)
        self._refused.setdefault(_key(request, fleet, strategy), []).append(entry)


def _key(request: VmRequest, fleet: Fleet, strategy: Strategy) -> object:
    """Two requests of one key differ in size only (:func:`vnuma.placement.asks.shape_key`: every field of
    the request but its name and sizes), under one strategy (and, for gpu-first, one state of the fleet's
    GPUs)."""
    gpu_epoch = fleet.gpu_epoch if strategy is Strategy.GPU_FIRST else -1
    return shape_key(request), strategy, request.gpus > 0, gpu_epoch


def _bigger(request: VmRequest, vcpus: int, memory: int, gpus: int, strategy: Strategy) -> bool:
    """Is ``request`` refused wherever a same-shape request of these sizes was?"""
    assert request.vcpus is not None and request.memory_kib is not None
    # Only with the node count and page size fixed: otherwise a bigger size may divide into
    # cells or pages that a smaller one did not. Under gpu-first more GPUs can strand fewer.
    # Nor with NICs: more GPUs put more NICs within reach of one of them.
    if request.numa_nodes is None or request.page_size_kib is None or request.wants_nics:
        return False
    more_gpus = request.gpus == gpus if strategy is Strategy.GPU_FIRST else request.gpus >= gpus
    return request.vcpus >= vcpus and request.memory_kib >= memory and more_gpus
