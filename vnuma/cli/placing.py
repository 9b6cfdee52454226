"""``vnuma place`` (``vm list``/``show``: :mod:`.vmview`), and the ``vnuma vm`` group."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer

from vnuma.cli import config, output, remote, settings
from vnuma.cli.completion import TenantArg, hosts
from vnuma.cli.options import StrategyOpt, strategy_of
from vnuma.documents import plan_doc
from vnuma.placement.model import (
    Affinity,
    AntiAffinity,
    ColdTier,
    CpuPolicy,
    EmulatorThreads,
    GpuAffinity,
    IoThreadPolicy,
    MemoryMode,
    NicFunction,
    ThreadPolicy,
    VmRequest,
)
from vnuma.placement.result import PlacementResult
from vnuma.topology.pcie import Level

vm_app = typer.Typer(no_args_is_help=True, add_completion=False)


def _nics(value: str | None, affinity: str) -> tuple[int, bool, Level]:
    """``--nics N|per-gpu`` and ``--nic-affinity LEVEL`` as (count, per GPU, level)."""
    try:
        level = Level(affinity.strip().upper())
    except ValueError:
        raise typer.BadParameter(
            f"{affinity!r} is not one of pix, pxb, phb, node, sys", param_hint="--nic-affinity"
        ) from None
    if value is None:
        return 0, False, level
    if value.strip().lower() == "per-gpu":
        return 0, True, level
    try:
        return int(value), False, level
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a count or per-gpu", param_hint="--nics") from None


def place(
    ctx: typer.Context,
    tenant: TenantArg,
    vcpus: Annotated[int | None, typer.Option("--vcpus", help="Guest vCPUs (default: GPUs' share).")] = None,
    memory: Annotated[
        str | None, typer.Option("--memory", help="Guest memory, e.g. 64GiB (default: GPUs' share).")
    ] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs to pass through.")] = 0,
    vgpu: Annotated[
        str | None,
        typer.Option("--vgpu", metavar="TYPE[:N]", help="N vGPU instances (mediated devices) of a vGPU type."),
    ] = None,
    mig: Annotated[
        str | None,
        typer.Option("--mig", metavar="PROFILE[:N]", help="N MIG instances of a profile, e.g. 3g.40gb:2."),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="VM name (default TENANT-vmN).")] = None,
    numa_nodes: Annotated[str, typer.Option("--numa-nodes", help="Guest NUMA nodes: N or auto.")] = "auto",
    cpu_policy: Annotated[CpuPolicy, typer.Option("--cpu-policy")] = CpuPolicy.DEDICATED,
    dedicated_vcpus: Annotated[
        str | None,
        typer.Option("--dedicated-vcpus", metavar="LIST",
                     help="With --cpu-policy mixed: the vCPUs pinned 1:1, e.g. 0-3,6 (the others float)."),
    ] = None,
    thread_policy: Annotated[ThreadPolicy, typer.Option("--thread-policy")] = ThreadPolicy.PREFER,
    page_size: Annotated[
        str | None,
        typer.Option(
            "--page-size", help="4K, 2M, 1G or large [default: config page_size, VNUMA_PAGE_SIZE, else large]."
        ),
    ] = None,
    gpu_affinity: Annotated[GpuAffinity, typer.Option("--gpu-affinity")] = GpuAffinity.REQUIRED,
    nics: Annotated[
        str | None,
        typer.Option("--nics", metavar="N|per-gpu", help="NICs to pass through beside the GPUs: a count, or per-gpu."),
    ] = None,
    nic_affinity: Annotated[
        str,
        typer.Option(
            "--nic-affinity", metavar="LEVEL",
            help="Farthest PCIe level between a GPU and its NIC: pix, pxb (default), phb, node or sys.",
        ),
    ] = "pxb",
    nic_function: Annotated[
        NicFunction,
        typer.Option("--nic-function", help="NICs as whole physical functions, or as SR-IOV virtual functions."),
    ] = NicFunction.PF,
    emulator_threads: Annotated[EmulatorThreads, typer.Option("--emulator-threads")] = EmulatorThreads.SHARE,
    memory_mode: Annotated[
        MemoryMode, typer.Option("--memory-mode", help="How every guest cell's memory binds to host memory.")
    ] = MemoryMode.STRICT,
    cell_memory_mode: Annotated[
        str | None,
        typer.Option(
            "--cell-memory-mode", metavar="LIST",
            help="One memory mode per guest cell, e.g. strict,interleave (with --numa-nodes N).",
        ),
    ] = None,
    cell_vcpus: Annotated[
        str | None, typer.Option("--cell-vcpus", metavar="LIST", help="vCPUs of each guest cell, e.g. 12,4.")
    ] = None,
    cell_memory: Annotated[
        str | None,
        typer.Option("--cell-memory", metavar="LIST", help="Memory of each guest cell, e.g. 96GiB,32GiB."),
    ] = None,
    cell_gpus: Annotated[
        str | None, typer.Option("--cell-gpus", metavar="LIST", help="GPUs of each guest cell, e.g. 2,0.")
    ] = None,
    iothreads: Annotated[int, typer.Option("--iothreads", help="I/O threads for the domain (0-64).")] = 0,
    iothreads_policy: Annotated[
        IoThreadPolicy,
        typer.Option("--iothreads-policy", help="Pin I/O threads with the emulator, or beside the first device."),
    ] = IoThreadPolicy.EMULATOR,
    host: Annotated[
        str | None, typer.Option("--host", help="Only consider this host.", autocompletion=hosts)
    ] = None,
    llc: Annotated[
        str | None,
        typer.Option("--llc", metavar="SIZE", help="L3 cache slice on each L3 domain its vCPUs use, e.g. 4MiB "
                     "(rounded up to whole ways of each host's cache)."),
    ] = None,
    llc_ways: Annotated[
        int | None, typer.Option("--llc-ways", metavar="N", help="The L3 slice as a number of cache ways.")
    ] = None,
    mem_bw: Annotated[
        int | None,
        typer.Option("--mem-bw", metavar="PCT", help="Memory-bandwidth cap on each of those L3 domains (MBA, %)."),
    ] = None,
    cold_memory: Annotated[
        str | None,
        typer.Option("--cold-memory", metavar="SIZE",
                     help="One more guest cell with this memory and no vCPUs, on a host memory-only cell "
                          "(CXL, a capacity tier)."),
    ] = None,
    cold_tier: Annotated[
        ColdTier, typer.Option("--cold-tier", help="Which memory-only cells may back --cold-memory.")
    ] = ColdTier.ANY,
    group: Annotated[str | None, typer.Option("--group", help="Replica group the VM belongs to.")] = None,
    anti_affinity: Annotated[
        AntiAffinity | None,
        typer.Option("--anti-affinity", help="Keep the group's VMs on different hosts or host cells."),
    ] = None,
    affinity: Annotated[
        Affinity | None,
        typer.Option("--affinity", help="Keep the group's VMs together on one host."),
    ] = None,
    strategy: StrategyOpt = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide, but claim nothing.")] = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show every host's rejection and score.")] = False,
    as_json: output.JsonOpt = False,
    rebalance: Annotated[
        bool, typer.Option("--rebalance", help="When nothing fits, show moves after which the VM would fit.")
    ] = False,
    max_moves: Annotated[int, typer.Option("--max-moves", help="Most moves for --rebalance.")] = 3,
    apply: Annotated[
        bool, typer.Option("--apply", help="With --rebalance: carry the moves out, then place the VM.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask before --apply changes domains.")] = False,
    allow_restart: Annotated[bool, typer.Option("--allow-restart", help="As for `vnuma rebalance`.")] = False,
    allow_migrate: Annotated[bool, typer.Option("--allow-migrate", help="As for `vnuma rebalance`.")] = False,
) -> None:
    """Place a tenant's VM: host, cells, pCPUs, hugepages and GPUs; claim them.

    A VM no host takes is exit 5 with one line: how many hosts refused it
    for each cause, and the host that came closest with its own reason
    (--explain lists every host's); JSON: "error", "hint", "causes",
    "closest" and "rejections". Nothing is written.

    With --rebalance, a VM that fits nowhere gets a plan of at most
    --max-moves moves (as `vnuma rebalance --make-room-for` would make)
    after which it fits; the plan is shown and the command still exits 5,
    unless --apply carries the moves out (journaled, see `vnuma rebalance`)
    and then places the VM. With --host the plan moves VMs on that host only
    (and says so). JSON adds "rebalance": the plan document plus "host" (the
    --host or null) and "found"; without a plan "found" is false and
    "reason" says why (with "run" when applied).

    --group G --anti-affinity host|cell: no two VMs of group G on one host
    (or one host cell); every later move (repin, migrate, drain, rebalance)
    keeps it. A VM the group leaves no room for is exit 5, the refusal
    naming the group and every host it holds, with its VMs there.

    --group G --affinity host: every VM of group G on one host (the first
    goes anywhere, the others where it is), e.g. a tightly coupled pair
    sharing a host's NVLink. A move off that host is refused while the
    group has other VMs (vm migrate, rebalance), and a drain leaves them.
    A group is either affine or anti-affine: asking affinity of a group
    whose VMs asked anti-affinity, or the reverse, is exit 12, nothing
    written.

    Example: vnuma place tenant-a --gpus 2 --group pair-1 --affinity host

    --memory-mode strict|restrictive|preferred|interleave (or per guest
    cell, --cell-memory-mode strict,interleave with --numa-nodes 2) is
    recorded with the VM and rendered as its numatune memnodes: interleave
    spreads a cell's pages over all the VM's host cells (and claims them
    so); restrictive (all cells or none) lets a running VM be re-pinned
    across cells live.

    --cell-vcpus 12,4 --cell-memory 96GiB,32GiB [--cell-gpus 2,0] give each
    guest cell its own size (the guest cell count is their length; --vcpus,
    --memory and --gpus, when given, must be their sums); each guest cell
    lands on a host cell with room for it, its GPUs on its own host cell,
    and every move keeps the sizes.

    --nics per-gpu gives each GPU a NIC of its own within --nic-affinity
    (NVIDIA's levels as `host show` prints them: pix one switch, pxb
    bridges, phb the host bridge, node the same NUMA node, sys anywhere;
    default pxb, where NCCL uses GPUDirect RDMA); --nics N gives N NICs,
    each within the level of one of the VM's GPUs. NICs are physical
    functions passed through whole, or with --nic-function vf SR-IOV virtual
    functions (rendered as <interface type='hostdev'> with a MAC address
    derived from the VM and the VF); a PF and its VFs never go to VMs at the
    same time. Every move (rebalance, drain, repin, migrate) asks for the
    same NICs again where the VM goes.

    --llc SIZE (or --llc-ways N) and --mem-bw PCT give the VM its own slice
    of the last-level cache and a memory-bandwidth cap on every L3 domain
    its vCPUs use (Intel RDT / AMD PQoS, rendered as cachetune and
    memorytune): ways are exclusive and add up after those the host keeps
    for itself (`vnuma host reserve H --llc-ways N`, required before any
    slice is placed there), caps add up to the host's --mem-bw-limit. A
    size is rounded up to whole ways of each host's cache.

    --cold-memory SIZE [--cold-tier any|cxl] gives the VM one more guest
    NUMA cell with that memory and no vCPUs (for idle KV cache, prompt
    caches, model files), bound to a host memory-only cell of a capacity
    tier: kind cxl or unknown, or DRAM that HMAT rates slower than local
    DRAM; HBM/MCDRAM is a hot tier and never serves it; cxl keeps cells of
    kind cxl only. Among those with room, the best HMAT bandwidth (then
    latency) from the VM's CPU cells wins, else the SLIT distance. Its pages
    are the largest size the memory-only cell offers that divides SIZE.

    --iothreads N renders N I/O threads pinned with the emulator threads, or
    with --iothreads-policy device-local on the pCPUs of the guest cell the
    VM's first device (by PCI address) is attached to; `render`/`apply
    --iothreads N` override the count.

    --vgpu TYPE[:N] or --mig PROFILE[:N] gives the VM N partitions of GPUs
    of its own cells instead of whole GPUs: vGPU instances of one type, or
    MIG instances of one profile (from the geometry `vnuma gpu-profile
    import` keeps for the GPU's model). A GPU holding partitions is never
    passed through whole; they render as mediated-device hostdevs and are
    released with the VM. Not with --gpus, nor both together (exit 4).

    Example: vnuma place tenant-a --vcpus 4 --memory 8GiB --mig 3g.40gb:2

    --cpu-policy mixed --dedicated-vcpus 0-3 pins the listed vCPUs 1:1 as
    a dedicated VM's (under --thread-policy prefer or isolate) and lets the
    others float as a shared VM's over their guest cell's pool; emulator
    threads float with them. A cell needs room for all its vCPUs as if
    pinned. Refused (exit 4): the list without mixed, mixed without it, a
    vCPU outside --vcpus, every vCPU listed, or --thread-policy require.

    Example: vnuma place tenant-a --vcpus 8 --memory 8GiB --cpu-policy mixed --dedicated-vcpus 0-3

    Example: vnuma place tenant-a --vcpus 16 --memory 64GiB --numa-nodes 2
    --cell-memory-mode strict,interleave
    """
    from vnuma.services.placing import place_vm, require_chosen
    from vnuma.services.requests import place_request

    for option, given in (("--anti-affinity", anti_affinity), ("--affinity", affinity)):
        if group is None and given is not None:
            raise typer.BadParameter(f"{option} needs --group G", param_hint=option)
    if affinity is not None and anti_affinity is not None:
        raise typer.BadParameter(
            "--affinity and --anti-affinity exclude each other: a group keeps its VMs together or apart",
            param_hint="--affinity",
        )
    nic_count, per_gpu, level = _nics(nics, nic_affinity)
    request = place_request(
        tenant=tenant, page_size=page_size or config(ctx)["page_size"], vcpus=vcpus, memory=memory, gpus=gpus,
        name=name, numa_nodes=numa_nodes, cpu_policy=cpu_policy, thread_policy=thread_policy,
        gpu_affinity=gpu_affinity, nics=nic_count, nics_per_gpu=per_gpu, nic_affinity=level, nic_function=nic_function,
        emulator_threads=emulator_threads, memory_mode=memory_mode, cell_memory_mode=cell_memory_mode,
        cell_vcpus=cell_vcpus, cell_memory=cell_memory, cell_gpus=cell_gpus, iothreads=iothreads,
        iothreads_policy=iothreads_policy, host=host, group=group, anti_affinity=anti_affinity, affinity=affinity,
        llc=llc, llc_ways=llc_ways, mem_bw=mem_bw, cold_memory=cold_memory, cold_tier=cold_tier,
        vgpu=vgpu, mig=mig, dedicated_vcpus=dedicated_vcpus,
    )
    if (apply or yes or allow_restart or allow_migrate) and not rebalance:
        raise typer.BadParameter("--apply, --yes, --allow-restart and --allow-migrate go with --rebalance")
    if apply and dry_run:
        raise typer.BadParameter("--apply and --dry-run contradict each other")
    client = remote(ctx)
    if client:
        if rebalance:
            raise typer.BadParameter("--rebalance runs where the inventory is, not through --server")
        body = {
            "tenant": tenant, "vcpus": vcpus, "memory": memory, "gpus": gpus, "name": name, "numa_nodes": numa_nodes,
            "cpu_policy": cpu_policy.value, "thread_policy": thread_policy.value, "page_size": page_size,
            "gpu_affinity": gpu_affinity.value, "nics": "per-gpu" if per_gpu else (nic_count if nics else None),
            "nic_affinity": level.value.lower(), "nic_function": nic_function.value,
            "emulator_threads": emulator_threads.value,
            "memory_mode": memory_mode.value, "cell_memory_mode": cell_memory_mode, "cell_vcpus": cell_vcpus,
            "cell_memory": cell_memory, "cell_gpus": cell_gpus, "iothreads": iothreads,
            "iothreads_policy": iothreads_policy.value, "host": host, "group": group,
            "anti_affinity": anti_affinity.value if anti_affinity else None,
            "affinity": affinity.value if affinity else None,
            "strategy": strategy.value if strategy else None, "dry_run": dry_run, "explain": explain,
            "llc": llc, "llc_ways": llc_ways, "mem_bw": mem_bw, "cold_memory": cold_memory,
            "cold_tier": cold_tier.value, "vgpu": vgpu, "mig": mig, "dedicated_vcpus": dedicated_vcpus,
        }
        placed_name, result = client.place(body)
        request = replace(request, name=placed_name)
    else:
        chosen_strategy = strategy_of(ctx, strategy)
        request, result = place_vm(settings(ctx), request, chosen_strategy, dry_run=dry_run, explain=explain)
    moved: dict[str, Any] | None = None
    if result.chosen is None and rebalance:
        moved = _make_room(ctx, request, max_moves, apply, yes, allow_restart, allow_migrate, as_json)
        if "run" in moved:
            request, result = place_vm(settings(ctx), request, strategy_of(ctx, strategy), dry_run=False)
    if result.chosen is None and as_json:
        from vnuma.documents import no_fit_doc

        output.echo_json({**no_fit_doc(request, result), **({"rebalance": moved} if moved is not None else {})})
    if explain and not as_json:
        _print_explain(result)
    chosen = require_chosen(request, result)
    if as_json:
        from vnuma.codec import placement_to_dict
        from vnuma.documents import explain_doc

        output.echo_json({
            **placement_to_dict(chosen),
            **({"explain": explain_doc(result)} if explain else {}),
            **({"rebalance": moved} if moved is not None else {}),
        })
    else:
        verb = "would place" if dry_run else "placed"
        from vnuma.cli.placementtable import print_placement

        print_placement(chosen, f"{verb} VM {chosen.vm} (tenant {chosen.tenant}) on host {chosen.host}")


def _make_room(
    ctx: typer.Context, request: VmRequest, max_moves: int, apply: bool, yes: bool,
    allow_restart: bool, allow_migrate: bool, as_json: bool,
) -> dict[str, Any]:
    """The room plan for a VM that fits nowhere, applied with --apply; without a plan, why none was found
    (``"found": false`` and the ``"reason"``). With ``--host`` the plan moves VMs on that host only, and says so."""
    from vnuma.cli.rebalancing import confirm_apply, print_plan, step_progress
    from vnuma.documents import run_doc
    from vnuma.services.rebalancing import plan_room_for, room_words

    plan = plan_room_for(settings(ctx), request, max_moves=max_moves, for_apply=apply)
    doc = plan_doc(plan)
    doc["host"] = request.host
    if not plan.moves:
        reason = room_words(max_moves, request.host, f"VM {request.name!r}")
        if not as_json:
            output.echo_lines([reason])
        return {**doc, "found": False, "reason": reason}
    doc["found"] = True
    if not as_json:
        where = f" on host {request.host} (--host: moves there only)" if request.host is not None else ""
        output.echo_lines([f"VM {request.name} fits after {len(plan.moves)} move(s){where}:"])
        print_plan(doc)
    if apply:
        from vnuma.services.permits import granted
        from vnuma.services.rebalance_apply import apply_plan

        confirm_apply(yes, len(plan.moves))
        with step_progress(as_json, len(plan.moves)) as progress:
            report = apply_plan(settings(ctx), plan, granted(allow_restart, allow_migrate), progress=progress)
        doc["run"] = run_doc(report)
        output.echo_notes(report.notes)
    return doc


def _print_explain(result: PlacementResult) -> None:
    if result.scores:
        output.echo_table("scores", ["HOST", "SCORE"], result.scores)
    if result.rejections:
        rows = [(r.host, r.check, r.reason) for r in result.rejections]
        output.echo_table("rejections", ["HOST", "CHECK", "REASON"], rows)
    chosen = result.chosen
    if chosen is not None and result.cells_decided_by is not None:
        cells = ",".join(str(c) for c in chosen.host_cells)
        output.echo_lines([f"cells {cells} on {chosen.host}: {_DECIDED[result.cells_decided_by]}"])


_DECIDED = {
    "only-choice": "the only cell set that fits there",
    "hmat-bandwidth": "chosen by HMAT bandwidth (the best lowest bandwidth between its cells)",
    "hmat-latency": "chosen by HMAT latency (the lowest highest latency between its cells)",
    "hmat-local-bandwidth": "chosen by HMAT bandwidth of each cell's own memory",
    "hmat-local-latency": "chosen by HMAT latency of each cell's own memory",
    "slit-distance": "chosen by SLIT distance (the closest cells)",
    "slit-sum": "chosen by the sum of SLIT distances",
    "cell-preference": "chosen by the strategy's cell preference",
    "cell-ids": "chosen by the lowest cell ids (a tie otherwise)",
}
"""``place --explain``'s words for :data:`vnuma.placement.order.SET_CRITERIA`."""
