"""Where a value sits in a trace file, and reading typed keys there (:class:`At`): every problem names the
file and the key path (``trace.json: hosts[3].cells[1].siblings``).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vnuma.errors import InvalidInputError


class At:
    """Where in a trace file a value is (file name, key path, the request's name): how errors name it."""

    __slots__ = ("note", "path", "what")

    def __init__(self, what: str, path: str = "", note: str = "") -> None:
        self.what, self.path, self.note = what, path, note

    def key(self, name: str) -> At:
        # A key from the file is data: one that is not a plain printable word is shown quoted, on one line.
        if not name.isprintable() or not name or any(ch in name for ch in ".[] "):
            return At(self.what, f"{self.path}[{name!r}]", self.note)
        return At(self.what, f"{self.path}.{name}" if self.path else name, self.note)

    def index(self, i: int) -> At:
        return At(self.what, f"{self.path}[{i}]", self.note)

    def noting(self, note: str) -> At:
        """The same path, its errors followed by ``note`` (the request's name)."""
        return At(self.what, self.path, note)

    def fail(self, problem: str) -> InvalidInputError:
        note = f" ({self.note})" if self.note else ""
        return InvalidInputError(f"{self.what}: {self.path or 'top level'}: {problem}{note}")

    def get(
        self,
        d: Mapping[str, Any],
        name: str,
        kind: type | tuple[type, ...],
        *,
        optional: bool = False,
        nullable: bool = False,
    ) -> Any:
        if name not in d:
            if optional:
                return None
            raise self.fail(f"missing key {name!r}")
        value = d[name]
        if value is None and (nullable or optional):
            return None
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            got = "null" if value is None else type(value).__name__
            raise self.key(name).fail(f"expected {_kind_name(kind)}, got {got}")
        return value

    def count(self, d: Mapping[str, Any], name: str, low: int, *, nullable: bool = False) -> Any:
        value = self.get(d, name, int, nullable=nullable)
        if value is not None and value < low:
            raise self.key(name).fail(f"must be {low} or more, got {value}")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {int: "an integer", str: "a string", list: "a list", dict: "an object", bool: "true/false"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)
