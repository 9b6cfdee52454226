"""The filters on memory pages: which page sizes a request may take on a host, and the cells holding them.

Pure: no I/O, reads the ledger only. Part of the pipeline of
:mod:`vnuma.placement.filters` (which lists them in order): ``page-size``
per guest-cell count, then per page size ``cell-pages`` and
``emulator-pages``. A request of page size ``large`` (the default) takes
hugepages only: on a host with none (no pool holds a page) it is refused
with :data:`NO_HUGEPAGES` and what to do about it.
"""

from __future__ import annotations

from vnuma.placement.attempt import Attempt
from vnuma.placement.result import Rejection
from vnuma.topology import format_size_kib

NO_HUGEPAGES = "has no hugepages, and the default page size is large (hugepages only)"
"""Why a host without hugepages takes no VM of page size ``large`` (the ``page-size`` filter, and sizing)."""
NO_HUGEPAGES_HINT = (
    "reserve hugepages (`echo N > /sys/devices/system/node/nodeK/hugepages/hugepages-2048kB/nr_hugepages`), "
    "or place VMs without them (`vnuma place ... --page-size 4K`, or `page_size = \"4K\"` in the config file)"
)


class PageSize:
    """``page-size``: page sizes whose pages divide the memory per cell (``large``: hugepages only)."""

    name = "page-size"

    def apply(self, a: Attempt) -> Rejection | None:
        """The sizes to try, largest first."""
        req, hs = a.view.req, a.view.hs
        wanted = hs.page_sizes(req.page_size_kib)
        a.sizes = [s for s in wanted if all(m % s == 0 for m in a.ms)]
        if a.sizes:
            return None
        if not wanted:
            return a.reject(self.name, NO_HUGEPAGES, hint=NO_HUGEPAGES_HINT, gist=NO_HUGEPAGES)
        sizes_text = ", ".join(format_size_kib(s) for s in wanted)
        opt_out = "" if req.page_size_kib else "; page size 4K opts out of hugepages"
        return a.reject(
            self.name,
            f"{format_size_kib(a.m)} per cell is not a whole number of pages ({sizes_text}){opt_out}",
            gist=None if req.page_size_kib else f"its memory per cell is not a whole number of hugepages{opt_out}",
        )


class CellPages:
    """``cell-pages``: ``n`` cells with the pages of the size under test."""

    name = "cell-pages"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the cells with the pages."""
        need = a.m // a.size
        ok = [c for c in a.cells if a.view.pages(c, a.size) >= need]
        if len(ok) >= a.n:
            a.cells = ok
            return None
        best = max(a.cells, key=lambda c: (a.view.pages(c, a.size), -c.id))
        where = f"cell {best.id}: needs" if a.n == 1 else f"needs {a.n} cells with"
        has = "has" if a.n == 1 else f"{len(ok)} have them; most: cell {best.id} with"
        pages = f"{need} free {format_size_kib(a.size)} pages ({format_size_kib(a.m)})"
        counts = sorted((max(0, a.view.pages(c, a.size)) for c in a.cells), reverse=True)[: a.n]
        missing = sum(max(0, need - k) for k in counts) + need * (a.n - len(counts))
        return a.reject(
            self.name, f"{where} {pages} beside {a.v} {a.view.unit()}, {has} {max(0, a.view.pages(best, a.size))}",
            missing=missing * a.size,
        )


class EmulatorPages:
    """``emulator-pages``: the isolated emulator's cell must also have the pages."""

    name = "emulator-pages"

    def apply(self, a: Attempt) -> Rejection | None:
        """Keep the anchors that have the pages."""
        if a.anchors is None:
            return None
        ids = {c.id for c in a.cells}
        a.anchors = [x for x in a.anchors if x in ids]
        if not a.anchors:
            return a.reject(self.name, "no cell with the pages has room for the isolated emulator thread")
        return None
