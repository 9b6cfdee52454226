"""The texts a request's options are written in, read and written back (:mod:`vnuma.placement.asks`).

Pure: no I/O. Each reader raises :class:`~vnuma.errors.InvalidInputError`
naming the option and what to write instead; each writer writes what its
reader reads back to the same value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnuma.errors import InvalidInputError, OptionsError
from vnuma.placement.model import MemoryMode, PartitionAsk
from vnuma.placement.partitionmodel import PartitionKind
from vnuma.topology import parse_cpuset, parse_page_size, parse_size_kib
from vnuma.topology.sizes import PAGE_SIZE_WORDS

PAGE_WORDS = {None: "large", **{kib: word.upper() for word, kib in PAGE_SIZE_WORDS.items() if word != "base"}}
"""A page size as ``--page-size`` writes it (None: large; the base page as ``4K``)."""


def page_size(text: Any) -> int | None:
    """``--page-size`` (:data:`vnuma.topology.sizes.PAGE_SIZE_WORDS`, ``large``) in KiB, None for large."""
    return parse_page_size(str(text))


def numa_nodes(value: Any) -> int | None:
    """``auto`` -> None, else a positive whole number (a body may give the number itself).

    Raises:
        InvalidInputError: anything else.
    """
    text = str(value).strip()
    if text.lower() == "auto":
        return None
    # isdecimal, not isdigit: "²" is a digit that int() refuses.
    if isinstance(value, bool) or not text.isdecimal() or len(text) > 6 or int(text) < 1:
        raise InvalidInputError(f"bad --numa-nodes {value!r}: use a positive number or auto")
    return int(text)


def int_list(text: str, option: str) -> tuple[int, ...]:
    """``12,4`` -> (12, 4).

    Raises:
        InvalidInputError: a word that is not a whole number.
    """
    words = [w.strip() for w in text.split(",")]
    if not all(w.isdecimal() and len(w) <= 6 for w in words):
        raise InvalidInputError(
            f"bad {option} {text!r}: use whole numbers, one per guest cell, comma-separated (e.g. 12,4)"
        )
    return tuple(int(w) for w in words)


def sizes_list(text: str) -> tuple[int, ...]:
    """``--cell-memory 96GiB,32GiB`` in KiB."""
    return tuple(parse_size_kib(x) for x in text.split(","))


def memory_modes(text: str) -> tuple[MemoryMode, ...]:
    """``strict,interleave`` -> one mode per guest cell.

    Raises:
        InvalidInputError: a word that is not a memory mode.
    """
    modes = []
    for word in text.split(","):
        try:
            modes.append(MemoryMode(word.strip().lower()))
        except ValueError:
            choices = "|".join(m.value for m in MemoryMode)
            raise InvalidInputError(
                f"bad --cell-memory-mode {text!r}: {word.strip()!r} is not one of {choices}",
                hint="one mode per guest cell, comma-separated, e.g. strict,interleave",
            ) from None
    return tuple(modes)


def vcpu_list(text: str) -> frozenset[int]:
    """``--dedicated-vcpus 0-3,6`` as vCPU ids.

    Raises:
        InvalidInputError: not a list of ids and ranges.
    """
    if "^" not in text:  # a cpuset's exclusions have no meaning in a list of vCPUs
        try:
            return parse_cpuset(text)
        except InvalidInputError:
            pass
    raise InvalidInputError(f"bad --dedicated-vcpus {text!r}: expected vCPU ids and ranges, e.g. 0-3,6")


def partition(kind: PartitionKind, text: str) -> PartitionAsk:
    """``TYPE[:N]`` / ``PROFILE[:N]`` (``--vgpu``, ``--mig``, a trace's ``vgpu``/``mig``) as an ask.

    Raises:
        InvalidInputError: an empty name or a count that is not a whole number.
    """
    name, sep, count = text.strip().rpartition(":")
    if not sep:
        name, count = count, "1"
    if not name.strip() or not count.strip().isdecimal():
        raise InvalidInputError(f"bad --{kind.value} {text!r}: expected NAME or NAME:COUNT (e.g. 3g.40gb:2)")
    return PartitionAsk(kind, name.strip(), int(count))


def check_groups(given: Mapping[str, Any]) -> None:
    """What no single option can check: options that need or exclude each other, and the slice's ranges.

    Raises:
        OptionsError: ``--affinity``/``--anti-affinity`` without ``--group``, or both.
        InvalidInputError: ``--vgpu`` with ``--mig``, ``--llc`` with ``--llc-ways``, a way count below one, a
            cap outside 1..100, a slice below 1 KiB.
    """
    for option in ("anti_affinity", "affinity"):
        if given.get("group") is None and given.get(option) is not None:
            raise OptionsError(f"--{option.replace('_', '-')} needs --group G")
    if given.get("affinity") is not None and given.get("anti_affinity") is not None:
        raise OptionsError(
            "--affinity and --anti-affinity exclude each other: a group keeps its VMs together or apart",
        )
    if given.get("vgpu") is not None and given.get("mig") is not None:
        raise InvalidInputError("--vgpu and --mig exclude each other: a VM takes partitions of one kind")
    check_slice(given.get("llc"), given.get("llc_ways"), given.get("mem_bw"))


def check_slice(llc: str | None, llc_ways: int | None, mem_bw: int | None) -> int | None:
    """``--llc SIZE`` in KiB, after checking it against ``--llc-ways`` and ``--mem-bw``.

    Raises:
        InvalidInputError: both --llc and --llc-ways, a size or way count below one, a cap outside 1..100.
    """
    if llc is not None and llc_ways is not None:
        raise InvalidInputError("give --llc SIZE or --llc-ways N, not both")
    if llc_ways is not None and llc_ways < 1:
        raise InvalidInputError(f"--llc-ways must be 1 or more, got {llc_ways}")
    if mem_bw is not None and not 1 <= mem_bw <= 100:
        raise InvalidInputError(f"--mem-bw must be a percentage from 1 to 100, got {mem_bw}")
    if llc is None:
        return None
    kib = parse_size_kib(llc)
    if kib < 1:
        raise InvalidInputError(f"--llc must be 1KiB or more, got {llc!r}")
    return kib
