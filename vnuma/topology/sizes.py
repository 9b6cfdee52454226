"""Memory sizes as operators write and read them: ``--memory 1.5GiB`` parsed, ``160 GiB`` printed, one
style for every table and message. Pure: no I/O."""

from __future__ import annotations

import re

from vnuma.errors import InvalidInputError

PAGE_4K = 4
PAGE_2M = 2048
PAGE_1G = 1048576
PAGE_SIZE_WORDS = {"4k": PAGE_4K, "base": PAGE_4K, "2m": PAGE_2M, "1g": PAGE_1G, "64k": 64, "512m": 524288,
                   "16g": 16777216}
"""``--page-size`` words -> KiB. ``4K`` and ``base`` both mean no hugepages: the host's base page, whatever its
kernel's page size (64 KiB on a 64K-page arm64 kernel; the ledger's ``HostState.page_sizes``). 64K, 512M and
16G are the sizes of such a kernel (Grace hosts), asked by name."""
PAGE_SIZE_CHOICES = "4K (or base: no hugepages), 2M, 1G, 64K, 512M, 16G or large"
"""What ``--page-size`` and the ``page_size`` setting take, as errors and help texts say it."""

_SIZE = re.compile(r"^\s*(\d{1,19})(?:\.(\d{1,9}))?\s*([KMGT])(?:i?B)?\s*$", re.IGNORECASE)
_UNIT_KIB = {"K": 1, "M": 1024, "G": 1024**2, "T": 1024**3}


def parse_size_kib(text: str) -> int:
    """Parse a memory size with a unit (``64GiB``, ``512M``, ``4KiB``, ``1.5GiB``) into KiB.

    Binary units throughout: ``G``, ``GB`` and ``GiB`` all mean 2**30 bytes.
    A bare number is refused rather than guessed (libvirt means KiB, Nova MiB);
    a fraction is taken when it makes a whole number of KiB (``1.5GiB``), and
    refused naming the KiB it makes otherwise (``1.3GiB``).

    Raises:
        InvalidInputError: unreadable text, a missing unit, or not a whole number of KiB.
    """
    match = _SIZE.match(text)
    if not match:
        raise InvalidInputError(f"bad size {text!r}: use a number with a unit, e.g. 64GiB, 512MiB or 1.5GiB")
    whole, fraction, unit = match.group(1), match.group(2) or "", match.group(3).upper()
    scaled = int(whole + fraction) * _UNIT_KIB[unit]
    kib, rest = divmod(scaled, 10 ** len(fraction))
    if rest:
        raise InvalidInputError(
            f"bad size {text!r}: {kib}.{rest:0{len(fraction)}d}".rstrip("0") + " KiB is not a whole number of KiB",
            hint="give a size that is a whole number of KiB, e.g. 1.5GiB or 1300MiB",
        )
    return kib


def count_of(n: int, noun: str) -> str:
    """``1 GPU``, ``2 GPUs``: a count with its noun, singular for one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


_UNITS = (("TiB", 1024**3), ("GiB", 1024**2), ("MiB", 1024))


def format_size_kib(kib: int) -> str:
    """A size as people read it, the one style of every table and message: ``160 GiB``.

    In the largest binary unit it reaches (KiB below 1 MiB): whole when the
    unit divides it (``160 GiB``), exact to two decimals when that is exact
    (``1.5 GiB``, ``1.25 GiB``), else rounded to one decimal (``123.8 GiB``,
    a host cell's memory as the kernel reports it). So sizes side by side in
    a table read alike, and the size parser reads every exact form back.
    """
    for unit, factor in _UNITS:
        if kib >= factor:
            hundredths, rest = divmod(kib * 100, factor)
            if rest:
                return f"{kib / factor:.1f} {unit}"
            whole, cents = divmod(hundredths, 100)
            return f"{whole} {unit}" if not cents else f"{whole}.{cents:02d}".rstrip("0") + f" {unit}"
    return f"{kib} KiB"


def exact_size(kib: int) -> str:
    """A size as an option writes it, exactly and without a space: the largest unit that divides it (``64GiB``,
    ``1536MiB``, ``6KiB``); :func:`parse_size_kib` reads it back. A stored request writes its sizes so."""
    for unit, factor in _UNITS:
        if kib % factor == 0:
            return f"{kib // factor}{unit}"
    return f"{kib}KiB"


def shape_text(vcpus: int | None, memory_kib: int | None, gpus: int, page_size_kib: int | None = None) -> str:
    """A VM's size in words: ``16 vCPUs, 64 GiB, 1 GPU`` (a missing size: ``sized by its GPUs``); with
    ``page_size_kib``, the pages its memory is in: ``16 vCPUs, 48 GiB of 4 KiB pages, 1 GPU``."""
    cpus = count_of(vcpus, "vCPU") if vcpus is not None else "vCPUs sized by its GPUs"
    memory = format_size_kib(memory_kib) if memory_kib is not None else "memory sized by its GPUs"
    if memory_kib is not None and page_size_kib is not None:
        memory += f" of {format_size_kib(page_size_kib)} pages"
    return f"{cpus}, {memory}, {count_of(gpus, 'GPU')}"


def parse_page_size(text: str) -> int | None:
    """Parse a page size option (a :data:`PAGE_SIZE_WORDS` word, ``KiB`` spelt out or not, or its KiB number) -> KiB;
    ``large`` -> None.

    Raises:
        InvalidInputError: anything else.
    """
    value = text.strip().lower()
    if value == "large":
        return None
    value = value.removesuffix("ib") if value.endswith(("kib", "mib", "gib")) else value
    if value in PAGE_SIZE_WORDS:
        return PAGE_SIZE_WORDS[value]
    # isdecimal, not isdigit: "²" is a digit that int() refuses.
    if value.isdecimal() and len(value) <= 8 and int(value) in PAGE_SIZE_WORDS.values():
        return int(value)
    raise InvalidInputError(f"bad page size {text!r}: use {PAGE_SIZE_CHOICES}")
