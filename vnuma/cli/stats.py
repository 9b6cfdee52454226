"""``vnuma stats``: per-cell use, fragmentation and VM locality."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from vnuma.cli import output, remote, settings
from vnuma.topology import format_size_kib, shape_text


def stats(
    ctx: typer.Context,
    vm: Annotated[str | None, typer.Argument(help="Only this VM (and its host).")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Only this host.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    svg: output.SvgOpt = None,
    png: output.PngOpt = None,
    bandwidth: Annotated[
        bool, typer.Option("--bandwidth", help="Measure memory bandwidth and LLC occupancy (resctrl monitors).")
    ] = False,
    interval: Annotated[
        str, typer.Option("--interval", metavar="TIME", help="With --bandwidth: time between the two readings.")
    ] = "2s",
    domstats: Annotated[
        list[Path] | None,
        typer.Option("--domstats", metavar="FILE",
                     help="With --bandwidth, twice: saved `virsh domstats --memory --cpu-total` outputs to read "
                          "instead of libvirt, --interval apart."),
    ] = None,
    vm_option: Annotated[
        str | None, typer.Option("--vm", metavar="VM", help="Only this VM (as the VM argument).")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="TIME",
                     help="With --bandwidth: the history `vnuma watch` kept from this time (1h, 30m, 2026-12-07T08:00) "
                          "instead of measuring."),
    ] = None,
) -> None:
    """Show per-cell use, fragmentation and per-VM locality.

    Per cell: pCPUs claimed/free/reserved, pages claimed of each pool, GPUs
    used of the cell's total, and the largest free block (the largest
    one-cell dedicated VM of a new tenant the placement engine could still
    place on that cell, with the size of the pages its memory is in, which
    may be 4 KiB while the default page size is large; "nothing fits" when
    not one vCPU with one page does).
    Per host, for k = 1..4 cells: the largest VM the engine could still
    place on k cells (most vCPUs, then memory, then GPUs); for one cell, the
    largest of the cells' free blocks. Per VM: the share of its vCPUs, memory and devices on its own
    cells; for running VMs on a local host (qemu:///...) also the memory its
    QEMU process really has on each node (/proc/PID/numa_maps); for running
    VMs with resctrl memory-bandwidth monitors (an operator template's
    <memorytune><monitor/>), the local share of their memory traffic; for a
    VM holding GPUs and NICs, each GPU's NIC and their PCIe level on the host
    (PIX..SYS as `host show` prints them), flagged when worse than the
    --nic-affinity it was placed with. A host whose libvirt cannot be read
    is a warning on stderr.

    JSON: {"hosts": [{"host", "cells": [{"cell", "pcpus": {"total",
    "claimed", "free", "reserved"}, "pages": [{"size_kib", "total",
    "claimed", "free"}], "gpus": {"total", "free", "tainted", "cleaning",
    "idle_blocked"}, "largest_free": SHAPE or null}],
    "fragmentation": [{"cells", "largest": SHAPE or null}]}], "vms": [{"vm",
    "tenant", "host", "state", "cells", "vcpus_local", "memory_local",
    "devices_local", "nic_pairs": [{"gpu", "nic", "level",
    "worse_than_asked"}], "measured": null or {"pid", "node_kib": {NODE: KiB},
    "memory_local"}, "bandwidth": null or {"local_bytes", "total_bytes",
    "local"}}], "warnings": [TEXT]}; SHAPE is {"vcpus", "memory_kib",
    "page_size_kib", "gpus"}.

    --svg/--png FILE also draw the fleet: one row per host, one block per
    cell with bars for pCPUs and memory claimed and a square per GPU
    (claimed, free, or stranded: free on a cell with no free pCPU or page);
    past 200 hosts, hosts of one shape and use share a row.

    --bandwidth measures instead: each running VM's resctrl monitors are
    read through libvirt twice, --interval apart (default 2s; 500ms, 1m),
    and per VM the local and total memory bandwidth (MB/s, 10^6 bytes/s)
    and LLC occupancy per cache id are printed, then per L3 domain the
    total and its heaviest VMs. A VM is noisy on a domain two or more VMs
    use when its part of the domain's traffic exceeds its share: the
    tenants there split the domain equally, each tenant's share is split
    among its VMs there, and a VM with a bandwidth cap (--mem-bw) is
    entitled to its cap. Each measured VM's sample is kept in the
    inventory (the last one) for `vnuma rebalance --objective bandwidth`;
    through --server the service measures (operators and admins).
    Only VMs with monitors (placed with a cache slice or bandwidth cap on a
    host with resctrl monitoring) have figures. JSON: {"taken_at",
    "interval_s", "vms": [{"vm", "tenant", "host", "local_mb_s",
    "total_mb_s", "local", "domains": [{"domain", "local_mb_s",
    "total_mb_s", "noisy"}], "llc": [{"cache", "bytes"}], "noisy"}],
    "domains": [{"host", "domain", "total_mb_s", "llc_bytes", "vms",
    "top": [{"vm", "total_mb_s"}]}], "warnings": [TEXT]}.

    --bandwidth --since TIME prints the history `vnuma watch` kept instead
    (raw samples, then one-minute means): per VM its samples, local and
    remote MB/s and remote share at the last one, the highest, and its
    resident memory at the last one (RSS, `-` when not reported); per L3
    domain its total; with a VM, each of its points (with its CPU use,
    resident memory and balloon size). --svg/--png draw it: a
    time-series chart per VM (local and remote MB/s) and per L3 domain
    (total). JSON: {"since", "vms": [{"vm", "host", "points": [{"at",
    "mean", "local_mb_s", "remote_mb_s", "remote_share", "llc_bytes",
    "cpu", "rss_kib", "balloon_kib"}]}], "domains": [{"host", "domain",
    "points": [{"at", "mean", "total_mb_s", "llc_bytes"}]}]}.

    Example: vnuma stats --svg fleet.svg

    Example: vnuma stats --host h1 --bandwidth --interval 5s
    """
    from vnuma.services.stats import collect

    client = remote(ctx)
    if vm_option is not None:
        if vm is not None and vm != vm_option:
            raise typer.BadParameter(f"two VMs: {vm} and --vm {vm_option}", param_hint="--vm")
        vm = vm_option
    if since is not None:
        if not bandwidth:
            raise typer.BadParameter("--since goes with --bandwidth: the watch's history", param_hint="--since")
        if client:
            raise typer.BadParameter("the history is read where the inventory is, not through --server")
        _history(ctx, vm, since, as_json, svg, png)
        return
    if bandwidth or domstats:
        _bandwidth(ctx, vm, host, as_json, interval, domstats or [], client)
        return
    if (svg is not None or png is not None) and client:
        raise typer.BadParameter("pictures are drawn where the inventory is, not through --server")
    if svg is not None or png is not None:
        from vnuma.services.pictures import fleet_picture

        output.write_pictures(lambda: fleet_picture(settings(ctx), vm, host), svg, png)

    from vnuma.documents import stats_doc

    doc = client.stats(vm, host) if client else stats_doc(collect(settings(ctx), vm, host))
    for warning in doc["warnings"]:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        output.echo_json(doc)
        return
    _print(doc)


def _bandwidth(
    ctx: typer.Context, vm: str | None, host: str | None, as_json: bool, interval: str, domstats: list[Path],
    client: Any,
) -> None:
    from vnuma.documents import bandwidth_doc
    from vnuma.services.bandwidth import measure, parse_interval

    if domstats and len(domstats) != 2:
        raise typer.BadParameter("give --domstats twice: the first and the second reading", param_hint="--domstats")
    if client and domstats:
        raise typer.BadParameter("--domstats files are read where the command runs, not through --server")
    if client:
        doc = client.bandwidth(vm, host, interval)
    else:
        recorded = (domstats[0], domstats[1]) if domstats else None
        doc = bandwidth_doc(measure(settings(ctx), vm, host, interval_s=parse_interval(interval), recorded=recorded))
    for warning in doc["warnings"]:
        typer.echo(f"warning: {warning}", err=True)
    if as_json:
        output.echo_json(doc)
        return
    output.echo_table(
        f"memory bandwidth over {doc['interval_s']:g}s, ending {doc['taken_at']}",
        ["VM", "TENANT", "HOST", "LOCAL MB/S", "TOTAL MB/S", "LLC OCCUPANCY", "NOISY ON"],
        [
            (v["vm"], v["tenant"], v["host"], f"{v['local_mb_s']:.1f}", f"{v['total_mb_s']:.1f}",
             " ".join(f"L3#{c['cache']}={_size(c['bytes'] // 1024)}" for c in v["llc"]) or "-",
             ",".join(f"L3#{d['domain']}" for d in v["domains"] if d["noisy"]) or "-")
            for v in doc["vms"]
        ],
    )
    output.echo_table(
        "per L3 domain",
        ["HOST", "L3", "TOTAL MB/S", "LLC OCCUPANCY", "VMS", "HEAVIEST"],
        [
            (d["host"], d["domain"], f"{d['total_mb_s']:.1f}", _size(d["llc_bytes"] // 1024), d["vms"],
             ", ".join(f"{t['vm']} {t['total_mb_s']:.1f}" for t in d["top"]) or "-")
            for d in doc["domains"]
        ],
    )


def _history(ctx: typer.Context, vm: str | None, since: str, as_json: bool, svg: Path | None,
             png: Path | None) -> None:
    from vnuma.services.watchhistory import bandwidth_history, history_picture

    doc = bandwidth_history(settings(ctx), since, vm)
    output.write_pictures(lambda: history_picture(doc), svg, png)
    if as_json:
        output.echo_json(doc)
        return
    if vm is not None:
        for s in doc["vms"]:
            output.echo_table(
                f"VM {s['vm']} on {s['host']} since {doc['since']}",
                ["AT", "LOCAL MB/S", "REMOTE MB/S", "REMOTE", "LLC", "CPU", "RSS", "BALLOON"],
                [(p["at"] + (" (1-min mean)" if p["mean"] else ""), p["local_mb_s"], p["remote_mb_s"],
                  _share(p["remote_share"]), _size((p["llc_bytes"] or 0) // 1024),
                  "-" if p["cpu"] is None else f"{p['cpu']:.2f}", _kib(p["rss_kib"]), _kib(p["balloon_kib"]))
                 for p in s["points"]],
            )
        return
    output.echo_table(
        f"memory bandwidth per VM since {doc['since']}",
        ["VM", "HOST", "SAMPLES", "LAST", "LOCAL MB/S", "REMOTE MB/S", "REMOTE", "HIGHEST TOTAL MB/S", "RSS"],
        [(s["vm"], s["host"], len(s["points"]), s["points"][-1]["at"], s["points"][-1]["local_mb_s"],
          s["points"][-1]["remote_mb_s"], _share(s["points"][-1]["remote_share"]),
          max(round(p["local_mb_s"] + p["remote_mb_s"], 1) for p in s["points"]),
          _kib(s["points"][-1]["rss_kib"])) for s in doc["vms"]],
    )
    output.echo_table(
        "per L3 domain",
        ["HOST", "L3", "SAMPLES", "LAST TOTAL MB/S", "HIGHEST TOTAL MB/S"],
        [(s["host"], s["domain"], len(s["points"]), s["points"][-1]["total_mb_s"],
          max(p["total_mb_s"] for p in s["points"])) for s in doc["domains"]],
    )


def _kib(kib: int | None) -> str:
    """A memory figure of the history (KiB), ``-`` when not reported."""
    return "-" if kib is None else _size(kib)


def _size(kib: int) -> str:
    return format_size_kib(kib) if kib else "0"


def _gpus_text(gpus: dict[str, int]) -> str:
    """``used/total``, then the tainted and cleaning ones (never free; ``idle_blocked`` of them no VM holds)."""
    used = gpus["total"] - gpus["free"] - gpus.get("idle_blocked", 0)
    states = [f"{gpus[s]} {s}" for s in ("tainted", "cleaning") if gpus.get(s)]
    return f"{used}/{gpus['total']}" + (f" ({', '.join(states)})" if states else "")


def _shape_text(s: dict[str, int] | None) -> str:
    if s is None:
        return "nothing fits"
    return shape_text(s["vcpus"], s["memory_kib"], s["gpus"], s["page_size_kib"])


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _print(doc: dict[str, Any]) -> None:
    for h in doc["hosts"]:
        rows = []
        for c in h["cells"]:
            pcpus = c["pcpus"]
            pages = ", ".join(f"{_size(p['size_kib'])} {p['claimed']}/{p['total']}" for p in c["pages"])
            rows.append(
                (
                    c["cell"],
                    f"{pcpus['claimed']}/{pcpus['free']}/{pcpus['reserved']}",
                    pages,
                    _gpus_text(c["gpus"]),
                    _shape_text(c["largest_free"]),
                )
            )
        output.echo_table(
            f"host {h['host']}",
            ["CELL", "PCPUS USED/FREE/RSVD", "PAGES USED/TOTAL", "GPUS USED/TOTAL", "LARGEST FREE BLOCK"],
            rows,
        )
        output.echo_table(
            None,
            ["CELLS", "LARGEST VM THE ENGINE CAN STILL PLACE"],
            [(f["cells"], _shape_text(f["largest"])) for f in h["fragmentation"]],
        )
    if doc["vms"]:
        output.echo_table(
            "VM locality",
            ["VM", "HOST", "STATE", "CELLS", "VCPUS", "MEMORY", "DEVICES", "MEASURED", "MBM LOCAL"],
            [
                (
                    v["vm"],
                    v["host"],
                    v["state"],
                    ",".join(map(str, v["cells"])),
                    _share(v["vcpus_local"]),
                    _share(v["memory_local"]),
                    _share(v["devices_local"]),
                    _measured(v["measured"]),
                    "-" if v["bandwidth"] is None else _share(v["bandwidth"]["local"]),
                )
                for v in doc["vms"]
            ],
        )
    pairs = [(v["vm"], p) for v in doc["vms"] for p in v["nic_pairs"]]
    if pairs:
        output.echo_table(
            "GPU-NIC pairs",
            ["VM", "GPU", "NIC", "LEVEL", "WORSE THAN ASKED"],
            [(vm, p["gpu"], p["nic"], p["level"] or "unknown", "yes" if p["worse_than_asked"] else "-")
             for vm, p in pairs],
        )


def _measured(m: dict[str, Any] | None) -> str:
    if m is None:
        return "-"
    nodes = " ".join(f"N{n}={_size(k)}" for n, k in m["node_kib"].items())
    return f"pid {m['pid']}: {nodes} ({_share(m['memory_local'])} local)"
