"""Render + validate speed for one large domain: a 4-cell, 64-vCPU, 8-GPU VM on 1G pages.

Times each stage (view model, Jinja render, RelaxNG schema, semantic checks)
and the whole ``render_domain`` call over N warm runs, plus the first (cold)
call, which also compiles the templates and loads libvirt's schema. Prints a
table: mean, p50, p99 and max in milliseconds. Target: render+validate <= 5 ms.

    .venv/bin/python bench/bench_render.py [--runs 500]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from lxml import etree

from tests.builders import make_host
from tests.render.placements import CellSpec, make_placement
from vnuma.render.checks import check_domain
from vnuma.render.domain import render_domain, render_view
from vnuma.render.validate import DOMAIN_RNG, check_schema, load_schema
from vnuma.render.view import RenderOptions, build_view
from vnuma.topology import KIB_PER_GIB, PAGE_1G


def _percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, round(q * (len(sorted_ms) - 1)))]


def _time(fn: Callable[[], object], runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return sorted(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()

    host = make_host(
        "bench-host", cells=4, cores_per_cell=16, smt=2, memory_gib=256, hugepages_1g_gib=128, gpus_per_cell=2
    )
    cells = [CellSpec(c, 16, 32 * KIB_PER_GIB, PAGE_1G, gpus=2) for c in range(4)]
    placement = make_placement(host, cells, vm="bench-vm", threads=2, isolate_emulator=True)
    options = RenderOptions(iothreads=2)

    start = time.perf_counter()
    xml = render_domain(host, placement, options=options)
    cold_ms = (time.perf_counter() - start) * 1000
    view = build_view(host, placement, options)
    root = etree.fromstring(xml.encode())
    assert load_schema(DOMAIN_RNG) is not None, (
        "libvirt's domain.rng is not installed: schema time would be 0"
    )

    stages: list[tuple[str, Callable[[], object]]] = [
        ("build_view", lambda: build_view(host, placement, options)),
        ("render (Jinja)", lambda: render_view(view)),
        ("parse (lxml)", lambda: etree.fromstring(xml.encode())),
        ("schema (domain.rng)", lambda: check_schema(root)),
        ("semantic checks", lambda: check_domain(root, host, placement)),
        ("render_domain total", lambda: render_domain(host, placement, options=options)),
    ]
    print(f"domain: 4 cells, {placement.vcpus} vCPUs, {len(placement.devices)} GPUs, {len(xml)} bytes of XML")
    print(f"first call (compile templates, load schema): {cold_ms:.2f} ms")
    print(f"{'stage':<22}{'runs':>6}{'mean ms':>10}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for name, fn in stages:
        ms = _time(fn, args.runs)
        print(
            f"{name:<22}{args.runs:>6}{statistics.fmean(ms):>10.3f}{_percentile(ms, 0.5):>10.3f}"
            f"{_percentile(ms, 0.99):>10.3f}{ms[-1]:>10.3f}"
        )


if __name__ == "__main__":
    main()
