"""Read a running QEMU process's real memory placement from /proc on the local host.

I/O: reads ``RUN_DIR/NAME.pid`` (libvirt's pid file of a domain) and
``/proc/PID/numa_maps``. :func:`parse_numa_maps` is the pure part and sums
pages the way ``numastat -p`` does: each mapping line's ``N<node>=<pages>``
times its ``kernelpagesize_kB``.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

RUN_DIR = Path("/run/libvirt/qemu")
PROC = Path("/proc")
_NODE = re.compile(r"^N(\d{1,5})=(\d{1,19})$")
_PAGE = re.compile(r"^kernelpagesize_kB=(\d{1,10})$")


def parse_numa_maps(text: str) -> dict[int, int]:
    """KiB of resident memory per NUMA node from ``numa_maps`` text (unreadable fields are skipped)."""
    per_node: dict[int, int] = {}
    for line in text.splitlines():
        fields = line.split()
        page_kib = 4
        counts: list[tuple[int, int]] = []
        for field in fields[2:]:
            node = _NODE.match(field)
            if node:
                counts.append((int(node.group(1)), int(node.group(2))))
                continue
            page = _PAGE.match(field)
            if page:
                page_kib = int(page.group(1))
        for node_id, pages in counts:
            per_node[node_id] = per_node.get(node_id, 0) + pages * page_kib
    return dict(sorted(per_node.items()))


def is_local_uri(uri: str | None) -> bool:
    """True for a libvirt URI naming this machine (``qemu:///system``), not a remote one."""
    if not uri:
        return False
    parts = urlsplit(uri)
    return parts.scheme == "qemu" and not parts.netloc


def qemu_pid(domain: str, run_dir: Path = RUN_DIR) -> int | None:
    """The QEMU pid of a running domain from libvirt's pid file, None when absent or unreadable."""
    try:
        text = (run_dir / f"{domain}.pid").read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdecimal() and len(text) <= 10 else None


def memory_by_node(pid: int, proc: Path = PROC) -> dict[int, int] | None:
    """KiB per NUMA node of process ``pid``, None when its numa_maps cannot be read."""
    try:
        text = (proc / str(pid) / "numa_maps").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return parse_numa_maps(text)


SYS = Path("/sys")
DEMOTION = "kernel/mm/numa/demotion_enabled"
BALANCING = "sys/kernel/numa_balancing"
TIERING_BIT = 2
"""``kernel.numa_balancing`` is a bitmask: 1 normal balancing, 2 memory tiering (hot pages promoted from a
slower tier)."""


def tiering_problems(demotion: str | None, balancing: str | None) -> list[str]:
    """What undoes strict binding on a host with memory-only (slower tier) nodes, from the text of
    ``/sys/kernel/mm/numa/demotion_enabled`` and ``/proc/sys/kernel/numa_balancing`` (None: not there):
    demotion moves pages to a slower tier at reclaim, even outside a VM's allowed nodes; tiering balancing
    promotes hot pages between tiers. Each problem names the setting and what to write."""
    problems = []
    if demotion is not None and demotion.strip().lower() in ("true", "1", "y", "yes"):
        problems.append(
            f"kernel demotion is on (/sys/{DEMOTION} = {demotion.strip()}): reclaim can move pages of strictly "
            f"bound VMs to memory-only nodes; `echo false > /sys/{DEMOTION}` keeps them where vnuma put them"
        )
    value = balancing.strip() if balancing is not None else ""
    if value.isdecimal() and len(value) <= 10 and int(value) & TIERING_BIT:
        keep = int(value) & ~TIERING_BIT
        problems.append(
            f"memory tiering balancing is on (kernel.numa_balancing = {value}, bit {TIERING_BIT}): the kernel "
            f"moves VMs' pages between tiers; `sysctl -w kernel.numa_balancing={keep}` turns it off"
        )
    return problems


def tiering_warnings(sys_root: Path = SYS, proc: Path = PROC) -> list[str]:
    """:func:`tiering_problems` of this machine's settings (a setting that cannot be read counts as absent)."""

    def read(path: Path) -> str | None:
        try:
            return path.read_text(encoding="ascii", errors="replace")[:64]
        except OSError:
            return None

    return tiering_problems(read(sys_root / DEMOTION), read(proc / BALANCING))
