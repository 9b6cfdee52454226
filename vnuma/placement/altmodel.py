"""A request's alternatives as written: ``--or gpus=1,vcpus=8``, ``"alternatives": [{"mig": "3g.40gb:2"}]``.

Pure: no I/O. An :class:`Alternative` is a partial request over the device and partition options
(:data:`DEVICE_KEYS`) and the size (:data:`SIZE_KEYS`): the options it gives, by option name, with the value
``POST /v1/place`` takes. It stands for the VM's whole request with its devices replaced by the alternative's
(a device option it does not give is not asked) and its vCPUs and memory the alternative's when it gives
them, else the main request's as asked (:func:`vnuma.placement.asks.request_from` writes them in, so a stored
alternative always says its size: null is sized from its GPUs). What the alternative then asks, and
whether it is a request at all, is :mod:`vnuma.placement.alternatives`' to say.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vnuma.errors import InvalidInputError

DEVICE_KEYS = ("gpus", "mig", "vgpu", "nics", "cell_gpus")
"""The options an alternative replaces as a group (the main request's are dropped, the alternative's taken)."""
SIZE_KEYS = ("vcpus", "memory")
"""The options an alternative may change beside its devices (the main request's as asked, when not given)."""
ALT_KEYS = ("gpus", "mig", "vgpu", "nics", "vcpus", "memory")
"""What ``--or`` and an ``"alternatives"`` entry may give, in the order they are written."""
MAX_ALTERNATIVES = 8
"""The most alternatives one request may list besides itself."""


@dataclass(frozen=True, slots=True)
class Alternative:
    """One alternative: (option name, value) pairs in :data:`ALT_KEYS` order (see the module doc)."""

    asked: tuple[tuple[str, Any], ...]

    def get(self, key: str) -> Any:
        return dict(self.asked).get(key)

    @property
    def text(self) -> str:
        """As ``--or`` writes it (options with a value only): ``mig=3g.40gb:2,vcpus=8``."""
        return ",".join(f"{k}={v}" for k, v in self.asked if v is not None) or "nothing"

    def with_sizes(self, sizes: Mapping[str, Any]) -> Alternative:
        """This alternative with ``sizes`` (vcpus, memory) where it gives none."""
        given = dict(self.asked)
        return _ordered({**{k: v for k, v in sizes.items() if k not in given}, **given})


    def sized(self, placed: Mapping[str, Any]) -> Alternative:
        """This alternative with the vCPUs and memory of ``placed`` (a request as written) where it gives none
        (null: it was sized from its GPUs)."""
        given = dict(self.asked)
        return _ordered({**given, **{k: placed.get(k) for k in SIZE_KEYS if given.get(k) is None}})


def _ordered(values: Mapping[str, Any]) -> Alternative:
    return Alternative(tuple((k, values[k]) for k in ALT_KEYS if k in values))


def _pairs(text: str, n: int) -> dict[str, Any]:
    """``KEY=VALUE[,KEY=VALUE]...`` (``--or``): keys with dashes or underscores."""
    out: dict[str, Any] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key or not value.strip():
            raise InvalidInputError(
                f"bad --or {text!r} (alternative {n}): expected OPTION=VALUE[,OPTION=VALUE...], "
                "e.g. mig=3g.40gb:2 or gpus=1,vcpus=8"
            )
        out[key] = value.strip()
    return out


def parse_alternatives(value: Any) -> tuple[Alternative, ...]:
    """Alternatives as given: None, a list of ``--or`` texts or of objects (the API, a trace, a stored
    request), or that list as JSON text (a domain's metadata). Numbered from 1 (0 is the main request).

    Raises:
        InvalidInputError: a malformed entry, an option an alternative cannot give, an alternative giving
            nothing, more than :data:`MAX_ALTERNATIVES`; each naming the alternative.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise InvalidInputError(f"bad alternatives {value!r}: expected a JSON list") from None
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError("alternatives must be a list")
    if len(value) > MAX_ALTERNATIVES:
        raise InvalidInputError(f"a request lists at most {MAX_ALTERNATIVES} alternatives, not {len(value)}")
    out = []
    for n, entry in enumerate(value, 1):
        given = _pairs(entry, n) if isinstance(entry, str) else entry
        if not isinstance(given, Mapping):
            raise InvalidInputError(f"alternative {n}: expected an object of options, or OPTION=VALUE text")
        unknown = sorted(set(given) - set(ALT_KEYS))
        if unknown:
            raise InvalidInputError(
                f"alternative {n} ({_said(given)}): {', '.join(unknown)} cannot change in an alternative",
                hint=f"an alternative gives {', '.join(ALT_KEYS)}",
            )
        if all(v is None for v in given.values()):
            raise InvalidInputError(f"alternative {n} asks for nothing: give its devices, vCPUs or memory")
        out.append(_ordered({k: _plain(k, v) for k, v in given.items()}))
    return tuple(out)


def _said(given: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in given.items())


def _plain(key: str, value: Any) -> Any:
    """A count written as text on the command line (``gpus=2``) as the number the body gives."""
    if key in _COUNTS and isinstance(value, str) and value.strip().isdecimal() and len(value.strip()) < 10:
        return int(value)
    return value


_COUNTS = frozenset({"gpus", "vcpus", "nics"})


def written(alternatives: tuple[Alternative, ...]) -> list[dict[str, Any]] | None:
    """The alternatives as a request document keeps them (None: none)."""
    return [dict(a.asked) for a in alternatives] if alternatives else None


def metadata_text(alternatives: list[dict[str, Any]]) -> str:
    """The written alternatives as one text (a domain metadata attribute; :func:`parse_alternatives` reads it)."""
    return json.dumps(alternatives, separators=(",", ":"))
