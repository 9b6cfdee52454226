"""Shared by the benchmarks: time whole processes."""

from __future__ import annotations

import subprocess
import time


def timed(args: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` runs of a process (each must exit 0)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return times
