"""Write tests/data/watch/fleet/: thirty recorded rounds of two hosts, each round a host's
`virsh domstats --memory --cpu-total` output (HOST@UNIXSECONDS.txt) and its `virsh freepages --all`
output (HOST@UNIXSECONDS.freepages.txt), in the format of tests/data/domstats/rdt-*.txt; and
tests/data/watch/alternating/: sixty rounds of one host where two VMs' loads alternate.

    python -m tests.watch.recordings      # rewrites both directories

What the series holds (rates in MB/s over the ten seconds ending at sample i; see the README beside the
data): on host rdt, L3 domain 0: a1 540 (capped at 30 %), a2 480, b1 980 — each within its share — except
that b1 streams 6000 from sample 5 to 14 (a noisy neighbour that starts and stops); a2 restarts at sample 12
(its counters start again from zero); on domain 1, b2 moves 300 MB/s, 95 % local, and turns memory-bound at
sample 20: 3000 MB/s, 40 % local. Host rdt's cell 0 loses 8 GiB of free memory to something outside vnuma
from sample 8 to 21. Host rdt2 (c1, 200 MB/s) stops answering after sample 17. Domain not-ours on rdt is no
VM of the inventory and has no monitor.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "data" / "watch" / "fleet"
ALTERNATING = OUT.parent / "alternating"
T0 = 1796601600  # 2026-12-07T00:00:00Z
STEP = 10
SAMPLES = 30
MB = 1_000_000
GIB_4K = 262_144  # 4 KiB pages in one GiB


def rate(vm: str, i: int) -> tuple[int, float]:
    """(MB/s, local share) of ``vm`` over the interval ending at sample ``i``."""
    if vm == "b1":
        return (6000 if 5 <= i <= 14 else 980), 0.95
    if vm == "b2":
        return (3000, 0.40) if i >= 20 else (300, 0.95)
    return {"a1": 540, "a2": 480, "c1": 200}[vm], 0.95


LAYOUT = {"rdt": {"a1": (0, 2), "a2": (0, 2), "b1": (0, 2), "b2": (1, 4)}, "rdt2": {"c1": (0, 2)}}
"""Host -> VM -> (L3 domain, vCPUs), as the tests' inventory places them."""
LLC = {"a1": 8_388_608, "a2": 2_097_152, "b1": 2_097_152, "b2": 3_145_728, "c1": 1_048_576,
       "x": 2_097_152, "y": 2_097_152, "w": 1_048_576}
ALT_SAMPLES = 60
ALT_LAYOUT = {"rdt": {"x": (0, 2), "y": (0, 2), "w": (1, 2)}}
"""The alternating series: x and y on rdt's L3 domain 0, w on domain 1."""


def alternating(vm: str, i: int) -> tuple[int, float]:
    """(MB/s, local share) in the alternating series: x streams 6000 MB/s in samples 0-9, 20-29, 40-49 and y
    in 10-19, 30-39, 50-59, each 500 otherwise; w 500 throughout."""
    heavy = {"x": 0, "y": 1}.get(vm)
    return (6000 if heavy is not None and (i // 10) % 2 == heavy else 500), 0.95


def counters(vm: str, i: int, rate_of: Any = rate) -> tuple[int, int, int]:
    """(local bytes, total bytes, cpu.time ns) of ``vm`` at sample ``i``; a2 restarts at sample 12."""
    first = 12 if vm == "a2" and i >= 12 else 0
    local = total = cpu = 0
    for k in range(first + 1, i + 1):
        mb_s, share = rate_of(vm, k)
        total += mb_s * MB * STEP
        local += round(mb_s * MB * STEP * share)
        cpu += 15 * 10**8 * STEP
    return local, total, cpu


def domain(vm: str, node: int, vcpus: int, i: int, rate_of: Any = rate) -> str:
    local, total, cpu = counters(vm, i, rate_of)
    cpus = f"0-{vcpus - 1}"
    return "\n".join([
        f"Domain: '{vm}'",
        f"  cpu.time={cpu}",
        f"  cpu.user={cpu * 8 // 10}",
        f"  cpu.system={cpu // 10}",
        "  cpu.cache.monitor.count=1",
        f"  cpu.cache.monitor.0.name=vcpus_{cpus}",
        f"  cpu.cache.monitor.0.vcpus={cpus}",
        "  cpu.cache.monitor.0.bank.count=1",
        f"  cpu.cache.monitor.0.bank.0.id={node}",
        f"  cpu.cache.monitor.0.bank.0.bytes={LLC[vm]}",
        "  memory.bandwidth.monitor.count=1",
        f"  memory.bandwidth.monitor.0.name=vcpus_{cpus}",
        f"  memory.bandwidth.monitor.0.vcpus={cpus}",
        "  memory.bandwidth.monitor.0.node.count=1",
        f"  memory.bandwidth.monitor.0.node.0.id={node}",
        f"  memory.bandwidth.monitor.0.node.0.bytes.local={local}",
        f"  memory.bandwidth.monitor.0.node.0.bytes.total={total}",
    ]) + "\n"


def stranger(i: int) -> str:
    return f"Domain: 'not-ours'\n  cpu.time={i * 10**9}\n  cpu.user={i * 10**8}\n  cpu.system=0\n"


def freepages(host: str, i: int) -> str:
    """Free pages per cell: the inventory's free, less 1 GiB of 4 KiB pages the host itself uses; rdt's cell 0
    less 8 GiB more from sample 8 to 21."""
    used_2m = {cell: 1024 * sum(1 for n, _ in LAYOUT[host].values() if n == cell) for cell in (0, 1)}
    out = []
    for cell in (0, 1):
        small = 10_485_760 - GIB_4K - (8 * GIB_4K if host == "rdt" and cell == 0 and 8 <= i <= 21 else 0)
        out.append(f"Node {cell}:\n4KiB: {small}\n2048KiB: {4096 - used_2m[cell]}\n1048576KiB: 16\n")
    return "\n".join(out)


def write(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.txt"):
        old.unlink()
    for i in range(SAMPLES):
        at = T0 + STEP * i
        for host, vms in LAYOUT.items():
            if host == "rdt2" and i > 17:
                continue
            text = "\n".join(domain(vm, node, vcpus, i) for vm, (node, vcpus) in vms.items())
            if host == "rdt":
                text += "\n" + stranger(i)
            (out / f"{host}@{at}.txt").write_text(text)
            (out / f"{host}@{at}.freepages.txt").write_text(freepages(host, i))


def write_alternating(out: Path = ALTERNATING) -> None:
    """The alternating series (no free pages: it is about moves, not cells)."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.txt"):
        old.unlink()
    for i in range(ALT_SAMPLES):
        for host, vms in ALT_LAYOUT.items():
            text = "\n".join(domain(vm, node, vcpus, i, alternating) for vm, (node, vcpus) in vms.items())
            (out / f"{host}@{T0 + STEP * i}.txt").write_text(text)


if __name__ == "__main__":
    write()
    write_alternating()
