"""``vnuma gpu-profile``: MIG geometries by GPU model: import, list, show, remove."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vnuma.cli import output, settings

if TYPE_CHECKING:
    from vnuma.topology.mig import MigGeometry

app = typer.Typer(no_args_is_help=True, add_completion=False)


def _doc(g: MigGeometry) -> dict[str, Any]:
    from vnuma.services.gpuprofiles import document

    return document(g)


@app.command("import")
def import_(
    ctx: typer.Context,
    source: Annotated[str, typer.Argument(metavar="FILE|NAME", help="A .toml/.json profile file, a shipped "
                                          "profile's name, demo (the demo host's GPUs), or (with --lgipp) saved "
                                          "`nvidia-smi mig -lgip` text.")],
    lgipp: Annotated[Path | None, typer.Option("--lgipp", metavar="FILE",
                                               help="Saved `nvidia-smi mig -lgipp` text beside -lgip's.")] = None,
    model: Annotated[str | None, typer.Option("--model", help="The GPU model nvidia-smi text is of (as "
                                              "`nvidia-smi -L` names it).")] = None,
    pci_id: Annotated[list[str] | None, typer.Option("--pci-id", metavar="0xVVVV:0xDDDD",
                                                     help="PCI ids of the GPUs nvidia-smi text is of (repeat).")]
    = None,
    gpu: Annotated[int | None, typer.Option("--gpu", metavar="N", help="The GPU index when the nvidia-smi "
                                            "text lists several.")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace the model's geometry if one is kept.")]
    = False,
    as_json: output.JsonOpt = False,
) -> None:
    """Keep a GPU model's MIG geometry: its profiles, their memory and compute slices and where each may start.

    A GPU whose PCI vendor:device id the geometry lists takes it. Profile file format: vnuma/sources/
    migprofiles.py. JSON: {"model", "pci_ids", "memory_slices", "compute_slices", "memory_gib", "source",
    "profiles": [{"name", "profile_id", "memory_slices", "compute_slices", "memory_gib", "max_instances",
    "starts"}], "replaced"}.

    Example: vnuma gpu-profile import h100-sxm5-80gb

    Example: vnuma gpu-profile import demo

    Example: vnuma gpu-profile import lgip.txt --lgipp lgipp.txt --model 'NVIDIA H100 80GB HBM3' --pci-id 0x10de:0x2330
    """
    from vnuma.services.gpuprofiles import import_geometry, read_geometry

    geometry = read_geometry(source, lgipp=lgipp, model=model, pci_ids=pci_id or (), gpu=gpu)
    replaced = import_geometry(settings(ctx), geometry, replace=replace)
    if as_json:
        output.echo_json({**_doc(geometry), "replaced": replaced})
        return
    names = ", ".join(p.name for p in geometry.profiles)
    typer.echo(f"{'replaced' if replaced else 'imported'} MIG profile of {geometry.model}: {names}")


@app.command("list")
def list_(
    ctx: typer.Context,
    shipped: Annotated[bool, typer.Option("--shipped", help="List the profiles vnuma ships (import them by "
                                          "name) instead of those kept in the inventory.")] = False,
    as_json: output.JsonOpt = False,
) -> None:
    """List the MIG geometries kept in the inventory (or shipped with vnuma).

    JSON: [{"model", "pci_ids", "memory_slices", "compute_slices", "memory_gib", "source", "profiles": [...]}]
    (with --shipped each also has "name").

    Example: vnuma gpu-profile list --shipped
    """
    from vnuma.services.gpuprofiles import geometries
    from vnuma.services.gpuprofiles import shipped as shipped_geometries

    named = list(shipped_geometries().items()) if shipped else [(None, g) for g in geometries(settings(ctx))]
    if as_json:
        output.echo_json([{**({"name": n} if n else {}), **_doc(g)} for n, g in named])
        return
    columns = ["NAME"] if shipped else []
    output.echo_table(
        None, [*columns, "MODEL", "PCI IDS", "SLICES", "PROFILES"],
        [(*([n] if shipped else []), g.model, " ".join(g.pci_ids) or "-",
          f"{g.memory_slices} mem / {g.compute_slices} compute", ", ".join(p.name for p in g.profiles))
         for n, g in named],
    )


@app.command("show")
def show(ctx: typer.Context, model: str, as_json: output.JsonOpt = False) -> None:
    """Show one GPU model's MIG profiles: slices, memory, instances and allowed starts.

    JSON: as one entry of `gpu-profile list --json`.

    Example: vnuma gpu-profile show 'NVIDIA H100 80GB HBM3'
    """
    from vnuma.errors import NotFoundError
    from vnuma.services.gpuprofiles import geometries

    kept = geometries(settings(ctx))
    g = next((k for k in kept if k.model == model), None)
    if g is None:
        raise NotFoundError(f"no MIG profile for GPU model {model!r}", hint="see `vnuma gpu-profile list`")
    if as_json:
        output.echo_json(_doc(g))
        return
    output.echo_table(
        f"{g.model} ({' '.join(g.pci_ids) or 'no PCI ids'}): {g.memory_slices} memory slices, "
        f"{g.compute_slices} compute slices, {g.memory_gib:g} GiB",
        ["PROFILE", "ID", "MEMORY SLICES", "COMPUTE SLICES", "GiB", "MAX", "STARTS"],
        [(p.name, p.profile_id, p.memory_slices, p.compute_slices, f"{p.memory_gib:g}", p.max_instances,
          ",".join(map(str, p.starts))) for p in g.profiles],
    )
    typer.echo(f"source: {g.source}")


@app.command("remove")
def remove(ctx: typer.Context, model: str) -> None:
    """Forget a GPU model's MIG geometry.

    Example: vnuma gpu-profile remove 'NVIDIA A100-SXM4-40GB'
    """
    from vnuma.services.gpuprofiles import remove as remove_geometry

    remove_geometry(settings(ctx), model)
    typer.echo(f"removed MIG profile of {model}")
