"""Simulation use case: read a trace file, run it, write per-request placements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.inventory.reading import open_reader
from vnuma.placement.model import Isolation
from vnuma.placement.objectives import Strategy
from vnuma.services import Settings
from vnuma.services.files import MAX_TRACE_SIZE, read_input
from vnuma.services.progress import SILENT, Progress
from vnuma.simulate import Base, load_trace, placements_to_list, report_to_dict, run
from vnuma.sources.trace import trace_text
from vnuma.topology import parse_size_kib


def simulate_file(
    trace_path: Path, strategy: Strategy, isolation: Isolation, placements_path: Path | None,
    inventory: Settings | None = None, progress: Progress = SILENT, max_input_size: str = MAX_TRACE_SIZE,
) -> dict[str, Any]:
    """Run a trace file; optionally write the per-request placements as JSON.

    ``inventory``: replay on that inventory's hosts with its VMs in place (read in one transaction,
    nothing written) instead of the trace's hosts. ``max_input_size``: the largest trace file read (``512MiB``).

    Raises:
        InputTooLargeError: the trace file is larger than ``max_input_size``.
        InvalidInputError: a bad size, or a bad trace (:func:`vnuma.simulate.load_trace`).
    """
    cap = parse_size_kib(max_input_size) * 1024
    # The bytes are dropped once decoded: the file is held once, as text, while it is read.
    text = trace_text(read_input(trace_path, "trace", cap, option="--max-input-size"), str(trace_path))
    trace = load_trace(text, str(trace_path))
    del text
    base = None
    if inventory is not None:
        with open_reader(inventory.db_url) as reader:
            snap = reader.snapshot()
        base = Base(tuple(snap.hosts), tuple(snap.placements), tuple(snap.tenants.values()))
    progress.start(len(trace.requests))
    report = run(trace, strategy, isolation, base, lambda n: progress.advance(n=n))
    if placements_path is not None:
        try:
            placements_path.write_text(json.dumps(placements_to_list(report), indent=1))
        except OSError as err:
            raise InvalidInputError(f"{placements_path}: cannot write placements: {err.strerror}") from err
    return report_to_dict(report)
