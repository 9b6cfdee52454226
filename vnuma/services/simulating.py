"""Simulation use case: read a trace file, run it, write per-request placements."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vnuma.errors import InvalidInputError
from vnuma.placement.model import Isolation, Strategy
from vnuma.services.files import read_input
from vnuma.simulate import load_trace, placements_to_list, report_to_dict, run


def simulate_file(
    trace_path: Path, strategy: Strategy, isolation: Isolation, placements_path: Path | None
) -> dict[str, Any]:
    """Run a trace file; optionally write the per-request placements as JSON."""
    trace = load_trace(read_input(trace_path, "trace"), str(trace_path))
    report = run(trace, strategy, isolation)
    if placements_path is not None:
        try:
            placements_path.write_text(json.dumps(placements_to_list(report), indent=1))
        except OSError as err:
            raise InvalidInputError(f"{placements_path}: cannot write placements: {err.strerror}") from err
    return report_to_dict(report)
