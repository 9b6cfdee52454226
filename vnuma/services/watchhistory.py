"""``stats --bandwidth --since``: the watch's history of each VM and each L3 domain, as a document and a picture.

Reads the raw samples and the one-minute means kept since the time asked
(:mod:`vnuma.inventory.history`); a series holds both, in time order, each
point saying whether it is a mean. MB/s are 10^6 bytes per second.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from vnuma.errors import NotFoundError
from vnuma.inventory import history
from vnuma.inventory.access import open_access
from vnuma.report.timeseries import LOCAL, REMOTE, TOTAL, Chart, Line, history_svg
from vnuma.services import Settings
from vnuma.services.audit import parse_since
from vnuma.services.watch import iso, vm_point


def _mb(bps: int | None) -> float:
    return round((bps or 0) / 1e6, 1)


def bandwidth_history(settings: Settings, since: str, vm: str | None = None) -> dict[str, Any]:
    """The ``stats --bandwidth --since --json`` document: per VM (or only ``vm``) and, without ``vm``, per L3
    domain, the points kept since ``since``.

    Raises:
        InvalidInputError: a bad ``since``.
        NotFoundError: ``vm`` has no sample in the period.
    """
    when = parse_since(since)
    with open_access(settings.db_url) as access, access.begin(False) as x:
        rows = history.samples_since(x, round(when.timestamp() * 1000), vm)
    vms: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    domains: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        point: dict[str, Any] = {"at": iso(r.at_ms / 1000), "mean": r.minute}
        if r.kind == "vm":
            vms[(r.subject, r.host)].append(point | vm_point(r))
        else:
            domains[(r.host, r.item)].append(point | {"total_mb_s": _mb(r.total_bps), "llc_bytes": r.llc_bytes})
    if vm is not None and not vms:
        raise NotFoundError(f"VM {vm!r} has no sample in the watch's history since {iso(when.timestamp())}",
                            hint="run `vnuma watch` (or replay recorded rounds), or ask an earlier --since")
    return {
        "since": iso(when.timestamp()),
        "vms": [{"vm": name, "host": host, "points": points} for (name, host), points in sorted(vms.items())],
        "domains": [{"host": host, "domain": d, "points": points} for (host, d), points in sorted(domains.items())],
    }


def _seconds(point: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(point["at"]).timestamp()


def history_picture(doc: dict[str, Any]) -> str:
    """The history picture (SVG text) of a :func:`bandwidth_history` document: local and remote MB/s per VM,
    total MB/s per L3 domain."""
    charts = [
        Chart(f"VM {s['vm']} on {s['host']}", "MB/s", (
            Line("local", LOCAL, tuple((_seconds(p), p["local_mb_s"]) for p in s["points"])),
            Line("remote", REMOTE, tuple((_seconds(p), p["remote_mb_s"]) for p in s["points"])),
        ))
        for s in doc["vms"]
    ] + [
        Chart(f"host {s['host']} L3 domain {s['domain']}", "MB/s",
              (Line("total", TOTAL, tuple((_seconds(p), p["total_mb_s"]) for p in s["points"])),))
        for s in doc["domains"]
    ]
    points = [p["at"] for s in doc["vms"] + doc["domains"] for p in s["points"]]
    return history_svg(charts, min(points, default=doc["since"]), max(points, default=doc["since"]), gap_s=120)
