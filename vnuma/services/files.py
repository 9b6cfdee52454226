"""Reading operator-supplied files with one clear error when that fails."""

from __future__ import annotations

from pathlib import Path

from vnuma.errors import InputTooLargeError, InvalidInputError
from vnuma.topology import format_size_kib

MAX_INPUT_BYTES = 64 * 1024 * 1024
"""The cap on an input file (capabilities, nodedev, hwloc, host lists, MIG profiles)."""
MAX_TRACE_SIZE = "512MiB"
"""The default cap on a trace file (``simulate --max-input-size``): a trace of 100,000 two-socket hosts and
20,000 requests (``trace generate --scenario fleet --hosts 100000``) is about 135 MiB; eight-GPU hosts with their
PCIe places (``dgx-nics``) take about 4 times as much per host."""


def read_input(path: Path, what: str, max_bytes: int = MAX_INPUT_BYTES, *, option: str | None = None) -> bytes:
    """Read a whole input file (capabilities, nodedev, hwloc, trace), of at most ``max_bytes``; ``option``: the
    option that sets the cap, named in the hint.

    Raises:
        InputTooLargeError: over ``max_bytes``.
        InvalidInputError: missing, unreadable, a directory.
    """
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise InputTooLargeError(
                f"{path}: {what} file is {format_size_kib(-(-size // 1024))}, larger than the "
                f"{format_size_kib(max_bytes // 1024)} cap",
                hint=f"raise it with {option} SIZE" if option else None,
            )
        return path.read_bytes()
    except FileNotFoundError as err:
        raise InvalidInputError(f"{path}: no such {what} file") from err
    except IsADirectoryError as err:
        raise InvalidInputError(f"{path}: is a directory, expected a {what} file") from err
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot read {what} file: {err.strerror}") from err


def write_output(path: Path, text: str, what: str) -> None:
    """Write ``text`` to the file an operator named (replacing it).

    Raises:
        InvalidInputError: the file cannot be written (a missing directory, no permission, a directory).
    """
    try:
        path.write_text(text, encoding="utf-8")
    except IsADirectoryError as err:
        raise InvalidInputError(f"{path}: is a directory, expected a {what} file") from err
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot write {what} file: {err.strerror}") from err
