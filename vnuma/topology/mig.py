"""MIG geometry: the GPU instance profiles a GPU offers and where each may start.

Pure: no I/O. Profile files and saved ``nvidia-smi mig`` text are read by
:mod:`vnuma.sources.migprofiles`; the checks every geometry passes are here.

**Model.** A GPU has ``memory_slices`` memory slices numbered from 0 (8 on A100/H100) and
``compute_slices`` compute slices (7). An instance of a profile takes the memory slices
``[start, start + memory_slices)`` for one of the profile's ``starts`` (what ``nvidia-smi mig
-lgipp`` lists), and ``compute_slices`` compute slices. A set of instances *fits* when each
start is one its profile allows, no two instances share a memory slice, their compute slices
add up to at most the GPU's, and no profile has more than ``max_instances``. Compute slices
are counted, not placed: this is the driver's placement table, not its whole rule book (the
MIG guide notes that 4g + 3g needs driver R510 or later). An instance is ``(profile name, start)``.

Checks (:func:`check_geometry`), each a :class:`ProfileError` naming the origin and profile:
sizes, counts and GiB positive (a profile id may be 0); a profile no bigger than the GPU; every
start aligned and its span within the GPU's memory slices; ``max_instances`` within its starts
and the GPU's compute slices; names and ids unique.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from vnuma.errors import InvalidInputError

Instance = tuple[str, int]
"""A GPU instance: its profile name and its start memory slice."""

_NAME = re.compile(r"^(\d+)g\.\d+gb(?:[+-][a-z][a-z.]*)*$")


class ProfileError(InvalidInputError, ValueError):
    """A bad MIG profile file or nvidia-smi text, or a profile name the GPU does not have (exit 4)."""


@dataclass(frozen=True, slots=True)
class MigProfile:
    """A GPU instance profile: its size in slices and the memory slices it may start at."""

    name: str
    profile_id: int
    memory_slices: int
    compute_slices: int
    memory_gib: float
    max_instances: int
    starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class MigGeometry:
    """A GPU model's MIG geometry; ``pci_ids`` (``"0x10de:0x20b0"``) match it to a PCI device."""

    model: str
    pci_ids: tuple[str, ...]
    memory_slices: int
    compute_slices: int
    memory_gib: float
    profiles: tuple[MigProfile, ...]
    source: str


def check_geometry(g: MigGeometry, origin: str) -> None:
    """Refuse a geometry that breaks the model's rules.

    Raises:
        ProfileError: the first problem found, naming ``origin`` and the profile.
    """
    for key in ("model", "source"):
        if not getattr(g, key).strip():
            raise ProfileError(f"{origin}: {key} must not be empty")
    for key in ("memory_slices", "compute_slices", "memory_gib"):
        if getattr(g, key) <= 0:
            raise ProfileError(f"{origin}: {key} must be positive, got {getattr(g, key)}")
    for p in g.profiles:
        _check_profile(g, p, f"{origin}: profile {p.name!r}")
    for what, values in (("name", [p.name for p in g.profiles]), ("profile id", [p.profile_id for p in g.profiles])):
        repeated = [v for v, n in Counter(values).items() if n > 1]
        if repeated:
            raise ProfileError(f"{origin}: two profiles have the {what} {repeated[0]!r}")


def _check_profile(g: MigGeometry, p: MigProfile, where: str) -> None:
    match = _NAME.match(p.name)
    if not match:
        raise ProfileError(f"{where}: name is not of the form '<N>g.<M>gb' (e.g. '3g.40gb', '1g.10gb+me')")
    for key in ("memory_slices", "compute_slices", "memory_gib", "max_instances"):
        if getattr(p, key) <= 0:
            raise ProfileError(f"{where}: {key} must be positive, got {getattr(p, key)}")
    if p.profile_id < 0:
        raise ProfileError(f"{where}: profile_id must not be negative, got {p.profile_id}")
    if int(match.group(1)) != p.compute_slices:
        raise ProfileError(f"{where}: the name says {match.group(1)} compute slices, not {p.compute_slices}")
    for key in ("memory_slices", "compute_slices", "memory_gib"):
        if getattr(p, key) > getattr(g, key):
            raise ProfileError(f"{where}: {key} {getattr(p, key)} is more than the GPU's {getattr(g, key)}")
    if not p.starts or list(p.starts) != sorted(set(p.starts)):
        raise ProfileError(f"{where}: starts must be a non-empty ascending list without repeats, got {list(p.starts)}")
    for start in p.starts:
        if start < 0 or start + p.memory_slices > g.memory_slices:
            raise ProfileError(
                f"{where}: start {start} + {p.memory_slices} memory slices goes past the GPU's {g.memory_slices}"
            )
        if start % p.memory_slices:
            raise ProfileError(f"{where}: start {start} is not a multiple of its {p.memory_slices} memory slices")
    if p.max_instances > len(p.starts):
        raise ProfileError(f"{where}: max_instances {p.max_instances} is more than its {len(p.starts)} starts")
    if p.max_instances * p.compute_slices > g.compute_slices:
        raise ProfileError(
            f"{where}: {p.max_instances} instances of {p.compute_slices} compute slices"
            f" are more than the GPU's {g.compute_slices}"
        )


def compute_in_name(name: str) -> int:
    """The compute slices a profile's name says (``3g.40gb``: 3); 0 for a name of another form."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else 0  # 0: the profile checks then refuse the name



def geometry_for(geometries: Iterable[MigGeometry], vendor_id: str, product_id: str) -> MigGeometry | None:
    """The geometry whose ``pci_ids`` list this PCI device (``"0x10de"``, ``"0x20b0"``), or None."""
    key = f"{vendor_id}:{product_id}".lower()
    return next((g for g in geometries if key in g.pci_ids), None)


def find_profile(geometry: MigGeometry, name: str) -> MigProfile:
    """The profile called ``name``.

    Raises:
        ProfileError: the GPU has no such profile.
    """
    for p in geometry.profiles:
        if p.name == name:
            return p
    known = ", ".join(p.name for p in geometry.profiles)
    raise ProfileError(f"{geometry.model} has no MIG profile {name!r} (it has {known})")


def _span(p: MigProfile, start: int) -> range:
    return range(start, start + p.memory_slices)


def starts_free(geometry: MigGeometry, profile_name: str, used: Iterable[Instance]) -> tuple[int, ...]:
    """The starts of this profile where a new instance would fit beside ``used`` (assumed to fit), lowest first.

    Empty when the compute slices or the profile's ``max_instances`` are used up.

    Raises:
        ProfileError: a profile name (asked for or in ``used``) the GPU does not have.
    """
    used = tuple(used)
    p = find_profile(geometry, profile_name)
    taken = {s for name, start in used for s in _span(find_profile(geometry, name), start)}
    compute = sum(find_profile(geometry, name).compute_slices for name, _ in used)
    if compute + p.compute_slices > geometry.compute_slices:
        return ()
    if sum(1 for name, _ in used if name == profile_name) >= p.max_instances:
        return ()
    return tuple(s for s in p.starts if taken.isdisjoint(_span(p, s)))


def fits(geometry: MigGeometry, used: Iterable[Instance]) -> bool:
    """Whether these instances can all exist on one GPU (see the module's model).

    Raises:
        ProfileError: a profile name the GPU does not have (a caller's mistake, not a misfit).
    """
    taken: set[int] = set()
    compute = 0
    counts: Counter[str] = Counter()
    for name, start in used:
        p = find_profile(geometry, name)
        span = set(_span(p, start))
        if start not in p.starts or not taken.isdisjoint(span):
            return False
        taken |= span
        compute += p.compute_slices
        counts[name] += 1
        if counts[name] > p.max_instances:
            return False
    return compute <= geometry.compute_slices


def largest_creatable(geometry: MigGeometry, used: Iterable[Instance]) -> MigProfile | None:
    """The biggest profile (memory slices, then compute slices; ties to the one listed first) still creatable."""
    used = tuple(used)
    creatable = [p for p in geometry.profiles if starts_free(geometry, p.name, used)]
    return max(creatable, key=lambda p: (p.memory_slices, p.compute_slices), default=None)


def free_counts(geometry: MigGeometry, used: Iterable[Instance]) -> dict[str, int]:
    """How many more instances of each profile could be created *alone* (each counted as if the
    only one added, not together), taking the lowest free start each time."""
    used = tuple(used)
    counts: dict[str, int] = {}
    for p in geometry.profiles:
        added: list[Instance] = []
        while free := starts_free(geometry, p.name, used + tuple(added)):
            added.append((p.name, free[0]))
        counts[p.name] = len(added)
    return counts
