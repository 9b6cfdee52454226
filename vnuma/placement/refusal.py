"""A refusal in one line: the host that came closest, and how many hosts refused for each cause.

Pure: no I/O, built only when nothing fits (never on the placing path). Every
path that tells an operator why a VM fits nowhere — ``place`` (its error line,
its ``--json`` document and the API's problem document), ``vm migrate``/``repin``,
a drain's VMs left behind, ``capacity``'s "stopped by" — asks :func:`summarize`.

**Closest host**: the one whose rejection came furthest down the pipeline
(:data:`vnuma.placement.filters.STAGE`), then the one missing the fewest units
(``Rejection.missing``: vCPUs, KiB of pages, GPUs, partitions or CPU cells,
as its check counts them; a host that lacks the capability itself, uncounted,
comes after every count), then fleet order.

**Cause**: the check that refused a host and its reason in words that hold for
every host refused so (:func:`gist`): the rejection's own ``gist`` when its check
has several causes (``page-size``: no hugepages at all, or memory that does not
split into them; ``partitions``: no GPU offers the profile, or no geometry kept for
a model, or the GPUs are full; ``group``; ``gpus``: GPUs with no NUMA node), else the
check's words in :data:`CHECK_WORDS` for checks whose reasons name cells, counts or
devices of the host, else the reason itself (it names nothing of the host:
``has no SMT siblings; ...``). Values of the request (8 pCPUs, ``3g.40gb``) may
appear; values of one host (its cell ids, free counts) may not.

Hosts the request itself ruled out (``host``: not the one asked for, ``avoid``)
are no cause: they are not counted, and never quoted while another host refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vnuma.placement.filters import STAGE
from vnuma.placement.result import Rejection
from vnuma.topology import count_of

__all__ = ["CHECK_WORDS", "Cause", "Refusal", "closest", "gist", "summarize"]

CHECK_WORDS: dict[str, str] = {
    "cordoned": "the host is cordoned",
    "resctrl-host": "no cache or memory-bandwidth allocation (resctrl) for its slice or cap",
    "cold-memory": "no memory-only cell with room for its cold tier",
    "partitions": "too few free partitions on the GPUs of its cells",
    "size": "cannot be sized from the host's GPUs",
    "numa-nodes": "too few CPU cells for its guest cells",
    "cell-isolation": "too few CPU cells it may use (cell isolation, or avoided)",
    "cell-cpus": "too few free pCPUs in its cells",
    "gpu-reserve": "gpu-first keeps the pCPUs of free GPUs' cells for GPU VMs",
    "resctrl": "its cache slice or bandwidth cap cannot be set up on its cells (resctrl)",
    "cell-pages": "too few free pages in its cells",
    "gpus": "no cell set with its free GPUs beside its pCPUs and pages",
    "nic-affinity": "no free NIC near enough its GPUs",
    "iommu-group": "its GPUs only by splitting an IOMMU group",
}
"""A check's reason in words that hold for every host (for checks whose reasons name the host's own cells,
counts or devices), when the rejection gives no ``gist`` of its own."""

OUT_OF_SCOPE = frozenset({"host", "avoid"})
"""Checks that only say the request itself ruled the host out."""

MOST_CAUSES = 4
"""The most causes the one line lists (the rest are counted together)."""

EXPLAIN_HINT = "rerun with --explain to see why each host was rejected"
"""``vnuma place``'s hint when the closest host's check gives none (other commands have no ``--explain``)."""


def gist(r: Rejection) -> str:
    """``r``'s reason in words that hold for every host refused for the same cause (see the module)."""
    return r.gist or CHECK_WORDS.get(r.check) or r.reason


@dataclass(frozen=True, slots=True)
class Cause:
    """Hosts refused for one cause: the check, its words (:func:`gist`), how many hosts, and the one of them
    that came closest (its own reason)."""

    check: str
    gist: str
    hosts: int
    example: Rejection


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a VM fits nowhere: the closest host's rejection and the causes, most hosts first (then the cause
    that got further, then its words)."""

    closest: Rejection | None
    causes: tuple[Cause, ...]

    def line(self) -> str:
        """The one line: ``HOST: REASON`` when one host refused; else each cause with its count and the
        closest host: ``12 hosts: no GPU offers mig 3g.40gb; 3 hosts: ...; closest: b (REASON)`` (its reason
        left out when its cause already says it all)."""
        best = self.closest
        if best is None:
            return "the inventory has no hosts"
        if sum(c.hosts for c in self.causes) <= 1:
            return f"{best.host}: {best.reason}"
        shown = [f"{count_of(c.hosts, 'host')}: {c.gist}" for c in self.causes[:MOST_CAUSES]]
        rest = self.causes[MOST_CAUSES:]
        if rest:
            others = sum(c.hosts for c in rest)
            shown.append(f"{count_of(others, 'host')}: {count_of(len(rest), 'other cause')}")
        detail = "" if best.reason == gist(best) else f" ({best.reason})"
        return "; ".join(shown) + f"; closest: {best.host}{detail}"

    def hint(self) -> str | None:
        """What to do: the closest host's hint when its check gives one (the command that refuses may add its
        own way to see every reason: ``place --explain``, :data:`EXPLAIN_HINT`)."""
        return self.closest.hint if self.closest is not None else None


def _rank(r: Rejection) -> tuple[int, int, int]:
    """Lower is closer: the later stage, then the fewest missing units (uncounted last)."""
    missing = r.missing
    return (-STAGE.get(r.check, -1), 0 if missing is not None else 1, missing or 0)


def _relevant(rejections: Sequence[Rejection]) -> list[int]:
    """Indexes of the rejections that are causes (all of them when the request ruled every host out)."""
    kept = [i for i, r in enumerate(rejections) if r.check not in OUT_OF_SCOPE]
    return kept or list(range(len(rejections)))


def closest(rejections: Sequence[Rejection]) -> Rejection | None:
    """The rejection of the host that came closest to fitting (see the module); None without rejections."""
    relevant = [rejections[i] for i in _relevant(rejections)]
    return min(relevant, key=_rank) if relevant else None


def summarize(rejections: Sequence[Rejection], hosts: Sequence[int] | None = None) -> Refusal:
    """The refusal of ``rejections`` (one per host, in fleet order); ``hosts``: how many hosts each stands for
    (a capacity fill's alike hosts; default one each)."""
    by_cause: dict[tuple[str, str], list[tuple[Rejection, int]]] = {}
    for i in _relevant(rejections):
        r = rejections[i]
        by_cause.setdefault((r.check, gist(r)), []).append((r, 1 if hosts is None else hosts[i]))
    causes = [
        Cause(check, words, sum(n for _r, n in rs), min((r for r, _n in rs), key=_rank))
        for (check, words), rs in by_cause.items()
    ]
    causes.sort(key=lambda c: (-c.hosts, _rank(c.example)[0], c.gist))
    return Refusal(closest(rejections), tuple(causes))
