"""A trace's requests (``requests[i]`` of ``numa-placement-trace`` version 1), read into the engine's
:class:`~vnuma.placement.model.VmRequest` and written back from one (format: ``docs/traces.md``).

Pure: no I/O. The keys are the request's options (:data:`vnuma.placement.asks.ASKS`), each under its own
name with the value ``POST /v1/place`` takes, except where version 1 of the format has a key of its own:
``memory_mib`` (or, for a size that is not whole MiB, ``memory``), ``page_size_kib`` (null: large),
``numa_nodes`` (null: auto), ``cold_memory_mib`` (or ``cold_memory``) and ``dedicated_vcpus`` (a list of
ids). Version 1's keys are required (``tenant``, ``name``, ``vcpus``, the memory, ``numa_nodes``,
``cpu_policy``, ``thread_policy``, ``page_size_kib``, ``gpus``), every other one optional. A request the
engine would refuse by its own numbers (:func:`vnuma.placement.request.request_problem`) is refused here,
naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.alternatives import label, variants
from vnuma.placement.asks import ASKS, Ask, Form, request_from, written_default
from vnuma.placement.asktexts import PAGE_WORDS, vcpu_list
from vnuma.placement.model import VmRequest
from vnuma.placement.request import request_problem
from vnuma.sources.tracekeys import At
from vnuma.topology import KIB_PER_MIB, format_cpuset, parse_size_kib
from vnuma.topology.names import name_problem

PAGE_SIZES = (4, 2048, 1048576)
REQUIRED = ("tenant", "name", "vcpus", "memory", "numa_nodes", "cpu_policy", "thread_policy", "page_size", "gpus")
"""The options version 1 of the format requires (by option name)."""


def _mib(raw: dict[str, Any], key: str, at: At, low: int) -> Any:
    """A size written in whole MiB under the format's ``*_mib`` key (0 of an optional one: none)."""
    value = at.count(raw, key, low)
    return f"{value}MiB" if value else None


def _page(raw: dict[str, Any], key: str, at: At, _low: int) -> Any:
    value = at.get(raw, key, int, nullable=True)
    if value is not None and value not in PAGE_SIZES:
        raise at.key(key).fail(f"expected null or one of {', '.join(map(str, PAGE_SIZES))}")
    return PAGE_WORDS[value]


def _nodes(raw: dict[str, Any], key: str, at: At, _low: int) -> Any:
    value = at.count(raw, key, 1, nullable=True)
    return "auto" if value is None else value


def _vcpu_ids(raw: dict[str, Any], key: str, at: At, _low: int) -> Any:
    value = raw[key]
    if not isinstance(value, list) or not all(type(v) is int and v >= 0 for v in value):
        raise at.key(key).fail("expected a list of vCPU ids")
    return format_cpuset(value) if value else None


def _page_size_kib(text: Any) -> Any:
    return {v: k for k, v in PAGE_WORDS.items()}[text]


Reader = Callable[[dict[str, Any], str, At, int], Any]
_OWN_KEYS: dict[str, tuple[Reader, Callable[[Any], Any]]] = {
    "memory": (_mib, lambda text: parse_size_kib(text) // KIB_PER_MIB),
    "cold_memory": (_mib, lambda text: parse_size_kib(text) // KIB_PER_MIB),
    "page_size": (_page, _page_size_kib),
    "numa_nodes": (_nodes, lambda value: None if value == "auto" else value),
    "dedicated_vcpus": (_vcpu_ids, lambda text: sorted(vcpu_list(text)) if text else []),
}
"""Options version 1 writes its own way: (read the trace's value, write the option's value)."""
_LEAST = {"vcpus": 1, "memory": 1, "cold_memory": 0}
"""The least a number of version 1 may be (``vcpus`` and ``memory_mib`` 1, an optional ``cold_memory_mib`` 0)."""


def _value(ask: Ask, raw: dict[str, Any], key: str, at: At) -> Any:
    """A trace value of an option written the way ``POST /v1/place`` takes it."""
    form = ask.form
    if form is Form.COUNT:
        return at.count(raw, key, 0)
    if form is Form.NUMBER:
        return at.count(raw, key, _LEAST[ask.name]) if ask.name in _LEAST else at.get(raw, key, int, nullable=True)
    if form is Form.NICS:
        value = raw[key]
        if value != "per-gpu" and type(value) is not int:
            got = "null" if value is None else repr(value) if isinstance(value, str) else type(value).__name__
            raise at.key(key).fail(f"expected an integer or 'per-gpu', got {got}")
        return value
    if form is Form.ALTERNATIVES:
        value = raw[key]
        if value is not None and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            raise at.key(key).fail("expected a list of objects (options by name, as POST /v1/place takes them)")
        return value
    if form is Form.CHOICE:
        value = at.get(raw, key, str, nullable=ask.default is None)
        if value is not None and value not in ask.words:
            raise at.key(key).fail(f"expected one of {', '.join(ask.words)}, got {value!r}")
        return value
    return at.get(raw, key, str, nullable=True)


def parse_request(raw: object, at: At) -> VmRequest:
    """A trace's request as the engine's (its tenant's isolation is the caller's to add).

    Raises:
        InvalidInputError: a missing key of version 1, a value of the wrong kind, a request the engine
            would refuse by its own numbers; each naming the key path and the request.
    """
    if not isinstance(raw, dict):
        raise at.fail("expected an object")
    name = at.get(raw, "name", str)
    problem = name_problem(name, "VM")
    if problem is not None:
        raise at.key("name").fail(problem)
    at = at.noting(f"request {name!r}")  # every later problem names the request
    values: dict[str, Any] = {}
    for ask in ASKS:
        key, own = ask.trace or ask.name, _OWN_KEYS.get(ask.name)
        if ask.trace and key not in raw and ask.name in raw:
            key, own = ask.name, None  # a size that is not whole MiB, written as the option's text
        if key not in raw:
            if ask.name in REQUIRED:
                raise at.fail(f"missing key {key!r}")
            continue
        values[ask.name] = own[0](raw, key, at, _LEAST.get(ask.name, 0)) if own else _value(ask, raw, key, at)
    tenant = values["tenant"]  # null: a request of no tenant, as before names were checked
    problem = name_problem(tenant, "tenant") if isinstance(tenant, str) else None
    if problem is not None:
        raise at.key("tenant").fail(problem)
    try:
        req = request_from(values)
    except InvalidInputError as err:
        raise at.fail(str(err)) from None
    try:
        made = variants(req)
    except InvalidInputError as err:
        raise at.fail(str(err)) from None
    for n, v in enumerate(made):
        problem = request_problem(v)
        if problem is not None:
            raise at.fail(problem if n == 0 else f"{label(req, n)}: {problem}")
    return req


def request_keys(req: VmRequest) -> dict[str, Any]:
    """``req`` as a trace's request: version 1's keys, then every option that differs from its default."""
    out: dict[str, Any] = {}
    for ask in ASKS:
        value = ask.write(req)
        if ask.name not in REQUIRED and value == written_default(ask):
            continue
        own = _OWN_KEYS.get(ask.name)
        if own is None:
            out[ask.name] = value
        elif own[0] is _mib and value is not None and parse_size_kib(value) % KIB_PER_MIB:
            out[ask.name] = value  # not whole MiB: the option's own text
        else:
            out[ask.trace or ask.name] = own[1](value)
    return out


