"""``GET /metrics``: the inventory's figures and the service's own, in the Prometheus text format.

The inventory's figures (:mod:`vnuma.services.metrics`) are read when Prometheus scrapes, by a collector
(:class:`InventoryCollector`): they are the inventory's, the same from every serving process. The service's
own figures — request counts and latencies by route template (``/v1/vms/{name}``, never the raw path) —
are counted by an ASGI middleware (:class:`Timing`) in each process; with ``vnuma serve --workers N`` the
workers share them through prometheus_client's multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``, set by
``serve``), so any worker's answer holds all of them.

Who may read it (:class:`Readers`): a client whose address is in ``metrics_allow`` (CIDRs, from the
configuration; default loopback only) without a token; anyone else with a token of a fleet-reading role
(reader, operator, admin) — 401 without one, 403 for a tenant token (the figures show every tenant).

To export one more figure of the inventory: add its field to :class:`vnuma.services.metrics.FleetFigures`
(read there), and one function ``(figures) -> metric family`` to :data:`FAMILIES` here.
"""

from __future__ import annotations

import gzip
import ipaddress
import os
import time
from collections.abc import Callable, Iterable, Iterator

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vnuma.api import auth
from vnuma.api.limits import App, Message, Receive, Scope, Send
from vnuma.errors import VnumaError
from vnuma.services import Settings
from vnuma.services.config import METRICS_ALLOW, networks
from vnuma.services.metrics import FleetFigures, Kept, read_figures

disable_created_metrics()  # no `_created` series: counters and histograms are read with rate()

MULTIPROCESS = "PROMETHEUS_MULTIPROC_DIR"
UNMATCHED = "(unmatched)"
"""The route label of a request no route matched (its path is not kept: unbounded label values)."""


class Readers:
    """Who may read ``/metrics``: the allowed networks without a token, else a fleet-reading token."""

    def __init__(self, allow: str | None) -> None:
        self.networks = networks(allow if allow is not None else METRICS_ALLOW)

    def address_allowed(self, host: str | None) -> bool:
        """Whether a client at ``host`` (an IP address; anything else is not) may read without a token."""
        try:
            address = ipaddress.ip_address(host or "")
        except ValueError:
            return False
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return any(address in n for n in self.networks)

    def check(self, request: Request) -> None:
        """Let the request through, or raise (401: no valid token, 403: a tenant token, 429: over its rate)."""
        if self.address_allowed(request.client.host if request.client else None):
            return
        token = request.app.state.gate.caller(request)
        auth.allow(token, auth.FLEET_READ, "read /metrics")


def _labelled(name: str, doc: str, labels: list[str], rows: Iterable[tuple[list[str], float | None]],
              counter: bool = False) -> Metric:
    family = (CounterMetricFamily if counter else GaugeMetricFamily)(name, doc, labels=labels)
    for values, value in rows:
        if value is not None:
            family.add_metric(values, value)
    return family


def _vm_families(f: FleetFigures) -> Iterator[Metric]:
    who = ["vm", "tenant", "host"]
    yield _labelled("vnuma_vm_memory_bandwidth_bytes_per_second",
                    "Memory traffic of a VM in its last sample: to its own cells' controllers (local) or others'.",
                    [*who, "kind"], (r for v in f.vms for r in (([v.vm, v.tenant, v.host, "local"], v.local_bps),
                                                               ([v.vm, v.tenant, v.host, "remote"], v.remote_bps))))
    yield _labelled("vnuma_vm_remote_memory_ratio", "Remote share (0-1) of a VM's memory traffic in its last "
                    "sample.", who, (([v.vm, v.tenant, v.host], v.remote_ratio) for v in f.vms))
    yield _labelled("vnuma_vm_llc_occupancy_bytes", "L3 cache a VM occupied in its last sample (all its caches).",
                    who, (([v.vm, v.tenant, v.host], v.llc_bytes) for v in f.vms))
    yield _labelled("vnuma_vm_sample_timestamp_seconds", "When a VM's last bandwidth sample ended (Unix time).",
                    who, (([v.vm, v.tenant, v.host], v.sampled_at) for v in f.vms))
    states: dict[tuple[str, str], int] = {}
    for v in f.vms:
        states[(v.tenant, v.state)] = states.get((v.tenant, v.state), 0) + 1
    yield _labelled("vnuma_vms", "VMs placed, by tenant and state.", ["tenant", "state"],
                    ([list(k), n] for k, n in sorted(states.items())))


def _cell_families(f: FleetFigures) -> Iterator[Metric]:
    at = ["host", "cell"]
    yield _labelled("vnuma_cell_pcpus", "pCPUs of a CPU cell.", at, (([c.host, str(c.cell)], c.pcpus)
                                                                     for c in f.cells))
    yield _labelled("vnuma_cell_pcpus_free", "pCPUs of a CPU cell no VM holds and the host does not keep.", at,
                    (([c.host, str(c.cell)], c.pcpus_free) for c in f.cells))
    yield _labelled("vnuma_cell_gpus", "GPUs of a CPU cell.", at, (([c.host, str(c.cell)], c.gpus) for c in f.cells))
    yield _labelled("vnuma_cell_gpus_free", "GPUs of a CPU cell no VM holds (whole or partitioned).", at,
                    (([c.host, str(c.cell)], c.gpus_free) for c in f.cells))
    sized = [*at, "page_size_bytes"]
    yield _labelled("vnuma_cell_pages", "Pages of one size a CPU cell has for VMs.", sized,
                    (([c.host, str(c.cell), str(kib * 1024)], total) for c in f.cells for kib, total, _ in c.pages))
    yield _labelled("vnuma_cell_pages_free", "Pages of one size of a CPU cell no VM holds.", sized,
                    (([c.host, str(c.cell), str(kib * 1024)], free) for c in f.cells for kib, _, free in c.pages))


def _host_families(f: FleetFigures) -> Iterator[Metric]:
    yield _labelled("vnuma_host_cordoned", "1 when the host is cordoned (takes no new VMs).", ["host"],
                    (([h.host], int(h.cordoned)) for h in f.hosts))
    yield _labelled("vnuma_host_resctrl_classes_of_service", "resctrl classes of service VMs may make on the host "
                    "(its count less the default group's).", ["host"], (([h.host], h.classes) for h in f.hosts))
    yield _labelled("vnuma_host_resctrl_classes_of_service_free", "resctrl classes of service left for VMs "
                    "(each VM with a cache slice or bandwidth cap holds one).", ["host"],
                    (([h.host], h.classes_left) for h in f.hosts))
    yield _labelled("vnuma_gpu_partitions_free", "Partitions of one vGPU type or MIG profile a GPU could still "
                    "take (that profile alone).", ["host", "cell", "gpu", "profile"],
                    (([h.host, "" if cell is None else str(cell), gpu, profile], free)
                     for h in f.hosts for gpu, cell, profile, free in h.partitions))


def _fleet_families(f: FleetFigures) -> Iterator[Metric]:
    yield _labelled("vnuma_placements", "VMs claimed on a host by a placement (the audit log's claims).", [],
                    [([], f.claims)], counter=True)
    yield _labelled("vnuma_placement_refusals", "Placements no host took, by the check that refused the host "
                    "that came closest.", ["check"], (([c], n) for c, n in sorted(f.refusals.items())), counter=True)
    yield _labelled("vnuma_moves", "Journaled moves carried out (rebalance, drain, repin, migrate), by objective.",
                    ["objective"], (([o], n) for o, n in sorted(f.moves.items())), counter=True)


def _event_families(f: FleetFigures) -> Iterator[Metric]:
    yield _labelled("vnuma_events_active", "1 per open event of the watch (vnuma events): its rule, host, and the "
                    "VM or cell it names (empty when it names none).", ["rule", "host", "vm", "cell"],
                    (([e.rule, e.host, e.vm or "", "" if e.cell is None else str(e.cell)], 1) for e in f.events))


def _device_families(f: FleetFigures) -> Iterator[Metric]:
    yield _labelled("vnuma_device_state", "1 per passable device (GPU, NIC, VF) in its state: free, claimed, "
                    "tainted or cleaning (vnuma device list).", ["host", "device", "kind", "state"],
                    (([host, address, kind, state], 1) for host, address, kind, state in f.devices))


FAMILIES: tuple[Callable[[FleetFigures], Iterable[Metric]], ...] = (
    _vm_families, _cell_families, _host_families, _fleet_families, _event_families, _device_families,
)
"""What the inventory's figures are exported as; one more gauge is one more function here."""


class InventoryCollector(Collector):
    """The inventory's figures, read at every scrape; ``vnuma_inventory_up`` 0 (and nothing else of the
    inventory) when it cannot be read, and how long reading took."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kept = Kept()

    def collect(self) -> Iterator[Metric]:
        start = time.perf_counter()
        try:
            figures: FleetFigures | None = read_figures(self.settings, self.kept)
        except VnumaError:
            figures = None
        if figures is not None:
            for family in FAMILIES:
                yield from family(figures)
        yield _labelled("vnuma_inventory_up", "1 when this scrape could read the inventory.", [],
                        [([], int(figures is not None))])
        yield _labelled("vnuma_inventory_read_seconds", "How long this scrape took to read the inventory's figures.",
                        [], [([], time.perf_counter() - start)])


class ApiMetrics:
    """The service's own figures: requests by method, route template and status, and their latency."""

    def __init__(self) -> None:
        self.requests = Counter("vnuma_api_requests", "API requests answered, by method, route and status.",
                                ["method", "route", "status"], registry=None)
        self.latency = Histogram("vnuma_api_request_duration_seconds", "Time to answer an API request, by method "
                                 "and route.", ["method", "route"], registry=None,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)


class Timing:
    """ASGI middleware: each HTTP request's time to its last byte, under its route's template."""

    def __init__(self, app: App, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.metrics.observe(scope.get("method", ""), route, status, time.perf_counter() - start)


def _registry(app: FastAPI) -> CollectorRegistry:
    """What a scrape reads: this process's registry, or (workers) every worker's files and the inventory."""
    if not os.environ.get(MULTIPROCESS):
        registry: CollectorRegistry = app.state.metrics_registry
        return registry
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(app.state.inventory_collector)
    return registry


def install(app: FastAPI, settings: Settings) -> None:
    """Add ``GET /metrics`` and the timing middleware to ``app`` (call it last: the timing is the outermost
    middleware, so it times what the others do too)."""
    readers = Readers(settings.metrics_allow)
    api = ApiMetrics()
    collector = InventoryCollector(settings)
    registry = CollectorRegistry()
    registry.register(collector)
    registry.register(api.requests)
    registry.register(api.latency)
    app.state.metrics_registry = registry
    app.state.inventory_collector = collector

    @app.get("/metrics", summary="Prometheus metrics", include_in_schema=False)
    def metrics(request: Request) -> Response:
        readers.check(request)
        body = generate_latest(_registry(request.app))
        if "gzip" not in request.headers.get("accept-encoding", "").lower():
            return Response(body, media_type=CONTENT_TYPE_LATEST)
        # Prometheus asks for gzip: a tenth of the bytes; level 1 costs ~5 ms per MiB (10,000 hosts: 28 MiB).
        return Response(gzip.compress(body, compresslevel=1), media_type=CONTENT_TYPE_LATEST,
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})

    app.add_middleware(Timing, metrics=api)

