"""Example workload traces: list the generator's scenarios, make one, write it where asked."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vnuma.codec.traces import trace_document
from vnuma.errors import InvalidInputError, NotFoundError
from vnuma.inventory.reading import open_reader
from vnuma.services import Settings
from vnuma.sources.tracegen import SCENARIOS, make_trace, render_trace


@dataclass(frozen=True, slots=True)
class GeneratedTrace:
    """One generated trace: its text and what it holds."""

    scenario: str
    seed: int
    hosts: int
    requests: int
    text: str


def trace_scenarios() -> list[dict[str, Any]]:
    """Every scenario the generator makes: name, host and request counts, one-line description."""
    return [
        {"name": s.name, "hosts": s.hosts, "requests": s.requests, "description": s.describe()}
        for s in SCENARIOS.values()
    ]


def generate_trace(scenario: str, seed: int, hosts: int | None = None) -> GeneratedTrace:
    """Make scenario ``scenario`` with ``seed`` and ``hosts`` hosts (default: the scenario's).

    Raises:
        InvalidInputError: an unknown scenario (the hint lists the known ones), fewer than 1 host.
    """
    if hosts is not None and hosts < 1:
        raise InvalidInputError(f"--hosts {hosts}: a trace needs at least 1 host")
    if scenario not in SCENARIOS:
        raise InvalidInputError(
            f"unknown trace scenario {scenario!r}",
            hint=f"scenarios: {', '.join(SCENARIOS)} (see vnuma trace list)",
        )
    doc = make_trace(scenario, seed, hosts)
    return GeneratedTrace(scenario, seed, len(doc["hosts"]), len(doc["requests"]), render_trace(doc))


def export_trace(settings: Settings, hosts: list[str] | None, *, with_vms: bool) -> GeneratedTrace:
    """The inventory's hosts (``hosts``: only those) as a trace (:mod:`vnuma.codec.traces`), read in one
    transaction.

    Raises:
        NotFoundError: a named host is not in the inventory.
        InvalidInputError: no host to export.
    """
    with open_reader(settings.db_url) as reader:
        snap = reader.snapshot()
    known = {h.name: h for h in snap.hosts}
    missing = [h for h in hosts or () if h not in known]
    if missing:
        raise NotFoundError(f"host {missing[0]!r} is not in the inventory", hint="see `vnuma host list`")
    chosen = [known[h] for h in dict.fromkeys(hosts)] if hosts else list(known.values())
    if not chosen:
        raise InvalidInputError("the inventory has no hosts to export", hint="add one: vnuma host add NAME --uri URI")
    doc = trace_document(chosen, snap.placements, snap.tenants.values(), with_vms=with_vms)
    return GeneratedTrace("inventory", 0, len(doc["hosts"]), len(doc["requests"]), render_trace(doc))


def write_trace(trace: GeneratedTrace, path: Path) -> None:
    """Write a generated trace to ``path`` (replacing the file).

    Raises:
        InvalidInputError: the file cannot be written (missing directory, a directory, no permission, ...).
    """
    try:
        path.write_text(trace.text, encoding="utf-8")
    except OSError as err:
        raise InvalidInputError(f"{path}: cannot write trace: {err.strerror or err}") from err
