"""kept_requests: every placement keeps the request its VM asked (``"request"`` in its document); placements
stored before get theirs rebuilt from where the VM is, marked ``"reconstructed": true``

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07 09:00:00

The rebuild is this revision's own, frozen here (the application no longer
rebuilds requests): the size and guest shape the VM has (its cell count,
unless placed with ``auto``; guest cells of different sizes each their
own), its policies, page size, memory modes, slices, cold tier, NICs as
recorded, GPU partitions; GPUs ``required`` (what every move asked before).
The placements of journaled runs' steps get theirs too, so an undone or
resumed step claims a placement that keeps one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PAGES = {4: "4K", 2048: "2M", 1048576: "1G"}


def _size(kib: int) -> str:
    for unit, factor in (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024)):
        if kib % factor == 0:
            return f"{kib // factor}{unit}"
    return f"{kib}KiB"


def _cpuset(ids: list[int]) -> str:
    ids = sorted(set(ids))
    runs: list[str] = []
    start = prev = None
    for i in ids:
        if start is None:
            start = prev = i
        elif i == prev + 1:  # type: ignore[operator]
            prev = i
        else:
            runs.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = i
    if start is not None:
        runs.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(runs)


def _kib(cell: dict[str, Any]) -> int:
    return int(cell["memory_kib"]) if cell.get("memory_kib") is not None else int(cell["memory_mib"]) * 1024


def rebuilt(doc: dict[str, Any]) -> dict[str, Any]:
    """The request a stored placement document amounts to (see the module doc), in the stored form."""
    every = doc.get("cells", [])
    cells = sorted((c for c in every if not c.get("cold")), key=lambda c: c["guest_cell"])
    cold = [c for c in every if c.get("cold")]
    sizes = [(len(c["vcpus"]), _kib(c)) for c in cells]
    own = len(set(sizes)) > 1
    modes = [c.get("memory_mode", "strict") for c in cells]
    uniform = len(set(modes)) <= 1
    devices = doc.get("devices", [])
    gpus = [d for d in devices if d.get("kind") == "gpu"]
    nics = sum(1 for d in devices if d.get("kind") == "nic" and d.get("peer_of") is None)
    parts = [d for d in devices if d.get("kind") in ("vgpu", "mig")]
    pins = {x for c in cells for x in c["pcpus"]}
    isolated = bool(set(doc.get("emulator_pcpus", [])) - pins)
    group = doc.get("group") or {}
    nodes = doc.get("numa_nodes", len(cells))
    recorded_nics = doc.get("nic_affinity") is not None
    per_gpu = bool(doc.get("nics_per_gpu")) and recorded_nics
    part = parts[0] if parts else None
    return {
        "tenant": doc.get("tenant"),
        "vcpus": sum(v for v, _ in sizes),
        "memory": _size(sum(m for _, m in sizes)) if cells else None,
        "gpus": len(gpus),
        "vgpu": f"{part['type']}:{len(parts)}" if part is not None and part["kind"] == "vgpu" else None,
        "mig": f"{part['profile']}:{len(parts)}" if part is not None and part["kind"] == "mig" else None,
        "name": doc.get("vm"),
        "numa_nodes": nodes if uniform and not own else len(cells),
        "cpu_policy": doc.get("cpu_policy", "dedicated"),
        "dedicated_vcpus": _cpuset(doc["dedicated_vcpus"]) if doc.get("dedicated_vcpus") else None,
        "thread_policy": doc.get("thread_policy", "prefer"),
        "page_size": _PAGES.get(cells[0]["page_size_kib"], f"{cells[0]['page_size_kib']}K") if cells else "large",
        "gpu_affinity": "required",
        "nics": "per-gpu" if per_gpu else (nics if recorded_nics and nics else None),
        "nic_affinity": doc.get("nic_affinity") or "pxb",
        "nic_function": doc.get("nic_function", "pf"),
        "emulator_threads": "isolate" if isolated else "share",
        "memory_mode": modes[0] if modes and uniform else "strict",
        "cell_memory_mode": ",".join(modes) if not uniform else None,
        "cell_vcpus": ",".join(str(v) for v, _ in sizes) if own else None,
        "cell_memory": ",".join(_size(m) for _, m in sizes) if own else None,
        "cell_gpus": ",".join(str(sum(1 for d in gpus if d["guest_cell"] == c["guest_cell"])) for c in cells)
        if own and gpus else None,
        "iothreads": doc.get("iothreads", 0),
        "iothreads_policy": doc.get("iothread_policy", "emulator"),
        "host": None,
        "llc": None,
        "llc_ways": max((e["ways"] for e in doc.get("llc", [])), default=None),
        "mem_bw": max((e["cap"] for e in doc.get("mem_bw", [])), default=None),
        "cold_memory": _size(sum(_kib(c) for c in cold)) if cold else None,
        "cold_tier": doc.get("cold_tier", "any"),
        "group": group.get("name"),
        "anti_affinity": group.get("anti_affinity"),
        "affinity": group.get("affinity"),
        "reconstructed": True,
    }


def _with_request(text: str) -> str | None:
    """The document with its rebuilt request, or None when it keeps one (or is not a placement's)."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "request" in doc or not doc.get("cells"):
        return None
    return json.dumps({**doc, "request": rebuilt(doc)}, separators=(",", ":"))


def _without_request(text: str) -> str | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "request" not in doc:
        return None
    return json.dumps({k: v for k, v in doc.items() if k != "request"}, separators=(",", ":"))


def _rewrite(change: Any) -> None:
    bind = op.get_bind()
    for row in bind.execute(sa.text("SELECT id, placement FROM vms")).fetchall():
        new = change(row[1])
        if new is not None:
            bind.execute(sa.text("UPDATE vms SET placement = :p WHERE id = :id"), {"p": new, "id": row[0]})
    for row in bind.execute(sa.text('SELECT id, "before", "after" FROM rebalance_steps')).fetchall():
        before, after = change(row[1]), change(row[2])
        if before is not None or after is not None:
            bind.execute(
                sa.text('UPDATE rebalance_steps SET "before" = :b, "after" = :a WHERE id = :id'),
                {"b": before if before is not None else row[1], "a": after if after is not None else row[2],
                 "id": row[0]},
            )


def upgrade() -> None:
    _rewrite(_with_request)


def downgrade() -> None:
    _rewrite(_without_request)
