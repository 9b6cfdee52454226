"""Checked reads from plain dicts: each failure names its document and key path.

Pure: no I/O. Shared by the codec modules; not a public API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from vnuma.errors import InvalidInputError

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)
MISSING = object()


class At:
    """A key path inside one document, for error messages (``host 'a': cells[1].id``).

    The path is kept as a parent chain and only spelled out on failure, so
    decoding a valid document costs no string building.
    """

    __slots__ = ("doc", "parent", "step")

    def __init__(self, doc: str, parent: At | None = None, step: str | int = "") -> None:
        self.doc = doc
        self.parent = parent
        self.step = step

    def key(self, name: str) -> At:
        """The path one key deeper."""
        return At(self.doc, self, name)

    def index(self, i: int) -> At:
        """The path one list index deeper."""
        return At(self.doc, self, i)

    def path(self) -> str:
        """The path spelled out: ``cells[1].cpus[3].siblings``."""
        steps: list[str | int] = []
        node: At | None = self
        while node is not None and node.parent is not None:
            steps.append(node.step)
            node = node.parent
        text = ""
        for step in reversed(steps):
            if isinstance(step, int):
                text += f"[{step}]"
            elif not step.isprintable() or not step or any(ch in step for ch in ".[] "):
                text += f"[{step!r}]"  # a key from the document is data: quoted, on one line
            else:
                text += f".{step}" if text else step
        return text

    def fail(self, problem: str) -> InvalidInputError:
        """The error to raise for ``problem`` at this path."""
        path = self.path()
        return InvalidInputError(f"{self.doc}: {path}: {problem}" if path else f"{self.doc}: {problem}")


def type_name(value: object) -> str:
    """A JSON-ish type name for messages (``null`` for None)."""
    return "null" if value is None else type(value).__name__


def as_mapping(value: object, at: At) -> Mapping[str, Any]:
    """The value as an object (dict)."""
    if not isinstance(value, Mapping):
        raise at.fail(f"expected an object, got {type_name(value)}")
    return value


def get_key(d: Mapping[str, Any], key: str, at: At, default: object = MISSING) -> Any:
    """``d[key]``; ``default`` when absent and given, else a missing-key error."""
    value = d.get(key, MISSING)
    if value is MISSING:
        if default is MISSING:
            raise at.fail(f"missing key {key!r}")
        return default
    return value


def as_int(value: object, at: At) -> int:
    """The value as an integer (booleans refused)."""
    # bool is an int subclass; a JSON true is never a count or an id.
    if type(value) is not int:
        raise at.fail(f"expected an integer, got {type_name(value)}")
    return value


def as_opt_int(value: object, at: At) -> int | None:
    """An integer or null."""
    return None if value is None else as_int(value, at)


def as_str(value: object, at: At) -> str:
    """The value as a string."""
    if not isinstance(value, str):
        raise at.fail(f"expected a string, got {type_name(value)}")
    return value


def as_opt_str(value: object, at: At) -> str | None:
    """A string or null."""
    return None if value is None else as_str(value, at)


def as_bool(value: object, at: At) -> bool:
    """The value as true/false."""
    if not isinstance(value, bool):
        raise at.fail(f"expected true or false, got {type_name(value)}")
    return value


def as_list(value: object, at: At) -> list[Any]:
    """The value as a list (a tuple is accepted too)."""
    if not isinstance(value, list | tuple):
        raise at.fail(f"expected a list, got {type_name(value)}")
    return list(value)


def as_ints(value: object, at: At) -> tuple[int, ...]:
    """A list of integers, as a tuple."""
    items = as_list(value, at)
    for i, item in enumerate(items):
        if type(item) is not int:
            raise at.index(i).fail(f"expected an integer, got {type_name(item)}")
    return tuple(items)


def list_of(decode: Callable[[Any, At, int], T]) -> Callable[[object, At], tuple[T, ...]]:
    """A check decoding each list item with ``decode(item, at, i)``, which names ``at[i]`` on failure."""

    def check(value: object, at: At) -> tuple[T, ...]:
        return tuple([decode(item, at, i) for i, item in enumerate(as_list(value, at))])

    return check


def int_map(value: object, at: At) -> tuple[tuple[int, int], ...]:
    """An object with decimal-number keys and integer values, as (key, value) pairs in order."""
    pairs: list[tuple[int, int]] = []
    for key, count in as_mapping(value, at).items():
        if not isinstance(key, str) or not key.isdecimal():
            raise at.fail(f"key {key!r} is not a decimal number")
        pairs.append((int(key), as_int(count, at.key(key))))
    return tuple(pairs)


def enum_of(cls: type[E]) -> Callable[[object, At], E]:
    """A check that reads a value of the string enum ``cls``."""
    choices = "|".join(member.value for member in cls)

    def check(value: object, at: At) -> E:
        try:
            return cls(as_str(value, at))
        except ValueError:
            raise at.fail(f"{value!r} is not one of {choices}") from None

    return check


def take(
    d: Mapping[str, Any], key: str, at: At, check: Callable[[Any, At], T], default: object = MISSING
) -> T:
    """``d[key]`` (or ``default`` when absent and given) passed through ``check``, errors naming ``key``."""
    return check(get_key(d, key, at, default), at.key(key))
