"""MIG profile files and saved ``nvidia-smi mig -lgip`` / ``-lgipp`` text, read into geometries.

Pure apart from :func:`shipped_profiles`, which reads the profile files in the package
(``vnuma/data/gpu-profiles/*.toml``); text comes in as arguments. The geometry and its
checks are :mod:`vnuma.topology.mig`'s.

**Profile file** (TOML; JSON has the same keys and nesting; every key is required except
``pci_ids``, and an unknown key is refused)::

    model = "NVIDIA A100-SXM4-40GB"   # the GPU's name as the driver reports it
    pci_ids = ["0x10de:0x20b0"]       # vendor:device ids with this geometry (matching a GPU)
    memory_slices = 8
    compute_slices = 7
    memory_gib = 39.25                # the largest profile's memory, as nvidia-smi prints it
    source = "where the numbers come from"

    [[profiles]]                      # at least one
    name = "3g.20gb"                  # <N>g.<M>gb, maybe +me/+gfx/-me...; N = compute_slices
    profile_id = 9                    # GPU instance profile id, as nvidia-smi prints it
    memory_slices = 4
    compute_slices = 3
    memory_gib = 19.5
    max_instances = 2
    starts = [0, 4]                   # ascending, each a multiple of memory_slices

Every geometry read passes :func:`vnuma.topology.mig.check_geometry` (a :class:`ProfileError`
naming the file and profile otherwise). GiB figures vary by a fraction between drivers.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any, Literal

from vnuma.topology.mig import MigGeometry, MigProfile, ProfileError, check_geometry, compute_in_name

_PCI_ID = re.compile(r"^0x[0-9a-f]{4}:0x[0-9a-f]{4}$", re.IGNORECASE)
_GEOMETRY_KEYS = ("model", "pci_ids", "memory_slices", "compute_slices", "memory_gib", "source", "profiles")
_PROFILE_KEYS = ("name", "profile_id", "memory_slices", "compute_slices", "memory_gib", "max_instances", "starts")


def parse_profile(text: str | bytes, fmt: Literal["toml", "json"], origin: str = "MIG profile") -> MigGeometry:
    """Read and check a profile file; ``origin`` (a file name) starts every error message.

    Raises:
        ProfileError: text that is not a valid profile file, with the first problem found.
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if fmt == "toml":
            data: Any = tomllib.loads(text)
        elif fmt == "json":
            data = json.loads(text)
        else:
            raise ProfileError(f"{origin}: unknown profile format {fmt!r} (toml or json)")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as err:
        raise ProfileError(f"{origin}: not valid {fmt.upper()}: {err}") from err
    return geometry_from_dict(data, origin)


def geometry_from_dict(data: Any, origin: str) -> MigGeometry:
    """A geometry from a profile file's keys, already parsed (the inverse of :func:`profile_document`).

    Raises:
        ProfileError: keys missing, unknown or of the wrong type, or a geometry that fails the checks.
    """
    if not isinstance(data, dict):
        raise ProfileError(f"{origin}: the top level must be a table of keys")
    _known_keys(data, _GEOMETRY_KEYS, origin)
    tables = _take(data, "profiles", list, origin)
    if not tables:
        raise ProfileError(f"{origin}: the profile list is empty")
    pci_ids = _take(data, "pci_ids", list, origin) if "pci_ids" in data else []
    geometry = MigGeometry(
        model=_take(data, "model", str, origin),
        pci_ids=tuple(_pci_id(i, origin) for i in pci_ids),
        memory_slices=_take(data, "memory_slices", int, origin),
        compute_slices=_take(data, "compute_slices", int, origin),
        memory_gib=float(_take(data, "memory_gib", float, origin)),
        profiles=tuple(_read_profile(t, origin, i) for i, t in enumerate(tables)),
        source=_take(data, "source", str, origin),
    )
    check_geometry(geometry, origin)
    return geometry


def profile_document(g: MigGeometry) -> dict[str, Any]:
    """``g`` as a profile file's keys (the JSON form :func:`parse_profile` reads back to an equal geometry)."""
    return {
        "model": g.model, "pci_ids": list(g.pci_ids), "memory_slices": g.memory_slices,
        "compute_slices": g.compute_slices, "memory_gib": g.memory_gib, "source": g.source,
        "profiles": [
            {"name": p.name, "profile_id": p.profile_id, "memory_slices": p.memory_slices,
             "compute_slices": p.compute_slices, "memory_gib": p.memory_gib, "max_instances": p.max_instances,
             "starts": list(p.starts)}
            for p in g.profiles
        ],
    }


def _read_profile(table: Any, origin: str, index: int) -> MigProfile:
    if not isinstance(table, dict):
        raise ProfileError(f"{origin}: profiles[{index}] must be a table of keys")
    name = _take(table, "name", str, f"{origin}: profiles[{index}]")
    where = f"{origin}: profile {name!r}"
    _known_keys(table, _PROFILE_KEYS, where)
    starts = _take(table, "starts", list, where)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in starts):
        raise ProfileError(f"{where}: starts must be whole numbers, got {starts!r}")
    return MigProfile(
        name=name,
        profile_id=_take(table, "profile_id", int, where),
        memory_slices=_take(table, "memory_slices", int, where),
        compute_slices=_take(table, "compute_slices", int, where),
        memory_gib=float(_take(table, "memory_gib", float, where)),
        max_instances=_take(table, "max_instances", int, where),
        starts=tuple(starts),
    )


def _known_keys(table: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ProfileError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")


def _take(table: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in table:
        raise ProfileError(f"{where}: missing key {key!r}")
    value = table[key]
    kinds = (int, float) if kind is float else (kind,)
    if isinstance(value, bool) or not isinstance(value, kinds):  # TOML/JSON true is a Python int
        wanted = "a number" if kind is float else kind.__name__
        raise ProfileError(f"{where}: {key} must be {wanted}, got {_clip(repr(value))}")
    return value


def _pci_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not _PCI_ID.match(value):
        raise ProfileError(f"{where}: pci id {value!r} is not of the form '0x10de:0x20b0'")
    return value.lower()


@cache
def shipped_profiles() -> dict[str, MigGeometry]:
    """The geometries vnuma ships (package data ``vnuma/data/gpu-profiles/*.toml``), by file stem
    (``a100-sxm4-40gb``), in name order."""
    folder = files("vnuma") / "data" / "gpu-profiles"
    found = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    return {f.name.removesuffix(".toml"): parse_profile(f.read_text(encoding="utf-8"), "toml", origin=f.name)
            for f in found}


DEMO_PROFILE = "demo"
"""The name ``gpu-profile import`` takes for the demo host's GPU geometry (as ``host add --demo`` names the host)."""
DEMO_GPU_ID = "0x10de:0x2331"
"""The PCI id of the demo host's GPUs (``vnuma/data/demo-node.xml``: H100 PCIe)."""


def demo_geometry() -> MigGeometry:
    """The MIG geometry of the demo host's GPUs: the shipped ``h100-sxm5-80gb`` one under their PCI id, so that
    ``--mig`` can be tried on the demo host. Its model and source say what it is (not a measured H100 PCIe
    table), and it is not listed with the shipped ones (``--shipped``), which describe real GPUs."""
    from dataclasses import replace

    return replace(
        shipped_profiles()["h100-sxm5-80gb"], model="NVIDIA H100 PCIe (vnuma demo host)", pci_ids=(DEMO_GPU_ID,),
        source="the vnuma demo host's GPUs (10de:2331): the shipped h100-sxm5-80gb geometry under their PCI id, "
               "for trying --mig on the demo host; not a measured H100 PCIe table",
    )


@dataclass(frozen=True, slots=True)
class LgipRow:
    """One profile of ``nvidia-smi mig -lgip`` (name without ``MIG ``; engine counts as printed)."""

    gpu: int
    name: str
    profile_id: int
    instances_free: int
    instances_total: int
    memory_gib: float
    p2p: bool
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int


@dataclass(frozen=True, slots=True)
class LgippRow:
    """One line of ``nvidia-smi mig -lgipp``: a profile's allowed starts and its size in memory slices."""

    gpu: int
    profile_id: int
    starts: tuple[int, ...]
    memory_slices: int


_LGIP_ROW = re.compile(
    r"^(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)/(\d+)\s+(\d+(?:\.\d+)?)\s+(Yes|No)\s+(\d+)\s+(\d+)\s+(\d+)$"
)
_LGIP_MORE = re.compile(r"^(\d+)\s+(\d+)\s+(\d+)$")
_LGIP_HEADER = re.compile(r"^(GPU instance profiles:|GPU\s+Name\s+ID\b.*|Free/Total\s+GiB\b.*|=+)$")
_LGIPP_ROW = re.compile(r"^GPU\s+(\d+)\s+Profile ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}:(\d+)$")


def parse_lgip(text: str) -> tuple[LgipRow, ...]:
    """The profiles in saved ``nvidia-smi mig -lgip`` output, in its order; box lines and headers are skipped.

    Raises:
        ProfileError: a line that is not part of that table, a row without its second
            (CE/JPEG/OFA) line, or text without a profile row.
    """
    rows: list[LgipRow] = []
    first: re.Match[str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("+"):
            continue
        cell = line[1:-1].strip() if line.startswith("|") and line.endswith("|") and len(line) > 1 else None
        if cell is not None and _LGIP_HEADER.match(cell):
            continue
        if cell is not None and first is None and (match := _LGIP_ROW.match(cell)):
            first = match
        elif cell is not None and first is not None and (more := _LGIP_MORE.match(cell)):
            rows.append(_lgip_row(first, more))
            first = None
        else:
            what = "its second line (CE JPEG OFA)" if first is not None else "a profile row"
            raise ProfileError(f"nvidia-smi -lgip text, line {number}: expected {what}, got {_clip(line)!r}")
    if first is not None:
        raise ProfileError(f"nvidia-smi -lgip text: profile {first.group(2)} has no second line (CE JPEG OFA)")
    if not rows:
        raise ProfileError("nvidia-smi -lgip text: no GPU instance profiles in it (is MIG mode enabled?)")
    return tuple(rows)


def _lgip_row(m: re.Match[str], more: re.Match[str]) -> LgipRow:
    gpu, name, pid, free, total, gib, p2p, sm, dec, enc = m.groups()
    ce, jpeg, ofa = (int(v) for v in more.groups())
    return LgipRow(int(gpu), name, int(pid), int(free), int(total), float(gib), p2p == "Yes",
                   int(sm), int(dec), int(enc), ce, jpeg, ofa)


def parse_lgipp(text: str) -> tuple[LgippRow, ...]:
    """The placements in saved ``nvidia-smi mig -lgipp`` output (``GPU 0 Profile ID 9 Placements: {0,4}:4``).

    Raises:
        ProfileError: a line of another shape, a profile listed twice, or no line at all.
    """
    rows: dict[tuple[int, int], LgippRow] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _LGIPP_ROW.match(line)
        starts = match.group(3).replace(" ", "").split(",") if match else [""]
        if match is None or "" in starts:
            raise ProfileError(
                f"nvidia-smi -lgipp text, line {number}: expected 'GPU 0 Profile ID 9 Placements: {{0,4}}:4',"
                f" got {_clip(line)!r}"
            )
        row = LgippRow(int(match.group(1)), int(match.group(2)), tuple(int(s) for s in starts), int(match.group(4)))
        if (row.gpu, row.profile_id) in rows:
            raise ProfileError(f"nvidia-smi -lgipp text, line {number}: GPU {row.gpu} profile {row.profile_id} again")
        rows[row.gpu, row.profile_id] = row
    if not rows:
        raise ProfileError("nvidia-smi -lgipp text: no placement lines in it")
    return tuple(rows.values())


def geometry_from_nvidia_smi(
    lgip_text: str, lgipp_text: str, *, model: str, gpu: int | None = None,
    pci_ids: tuple[str, ...] = (), source: str = "nvidia-smi mig -lgip and -lgipp output",
) -> MigGeometry:
    """One GPU's geometry from its ``-lgip`` and ``-lgipp`` text (``gpu``: its index; None when only one is listed).

    Compute slices come from the name (``3g`` = 3); the GPU's memory slices are the end of
    its last placement, its compute slices and GiB the largest profile's; ``max_instances``
    is the Total of Free/Total.

    Raises:
        ProfileError: unreadable text, several GPUs and no ``gpu``, the two texts listing
            different profiles, or a geometry that fails the profile file's checks.
    """
    lgip, lgipp = parse_lgip(lgip_text), parse_lgipp(lgipp_text)
    if gpu is None:
        listed = sorted({r.gpu for r in lgip})
        if len(listed) > 1:
            raise ProfileError(f"nvidia-smi -lgip text covers GPUs {', '.join(map(str, listed))}: say which one")
        gpu = listed[0]
    rows = [r for r in lgip if r.gpu == gpu]
    places = {p.profile_id: p for p in lgipp if p.gpu == gpu}
    if not rows:
        raise ProfileError(f"nvidia-smi -lgip text has no profiles for GPU {gpu}")
    for r in rows:
        if r.profile_id not in places:
            raise ProfileError(
                f"nvidia-smi -lgipp text has no placements for GPU {gpu} profile {r.name} (ID {r.profile_id})"
            )
    extra = sorted(set(places) - {r.profile_id for r in rows})
    if extra:
        raise ProfileError(f"nvidia-smi -lgipp text lists GPU {gpu} profile ID {extra[0]}, which -lgip does not")
    profiles = tuple(
        MigProfile(r.name, r.profile_id, places[r.profile_id].memory_slices, compute_in_name(r.name),
                   r.memory_gib, r.instances_total, places[r.profile_id].starts)
        for r in rows
    )
    geometry = MigGeometry(
        model=model, pci_ids=tuple(_pci_id(i, "nvidia-smi text") for i in pci_ids),
        memory_slices=max(s + p.memory_slices for p in profiles for s in p.starts),
        compute_slices=max(p.compute_slices for p in profiles), memory_gib=max(p.memory_gib for p in profiles),
        profiles=profiles, source=source,
    )
    check_geometry(geometry, f"nvidia-smi text for GPU {gpu}")
    return geometry


def _clip(line: str, limit: int = 60) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


