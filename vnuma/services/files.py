"""Reading operator-supplied files with one clear error when that fails."""

from __future__ import annotations

from pathlib import Path

from vnuma.errors import InvalidInputError

MAX_INPUT_BYTES = 64 * 1024 * 1024


def read_input(path: Path, what: str) -> bytes:
    """Read a whole input file (capabilities, nodedev, hwloc, trace).

    Raises:
        InvalidInputError: missing, unreadable, a directory, or over 64 MiB.
    """
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise InvalidInputError(f"{path}: {what} file is larger than 64 MiB")
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
