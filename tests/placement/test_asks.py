"""The request is declared once (:data:`vnuma.placement.asks.ASKS`): every path that writes or reads one keeps
every field.

Random requests are drawn over every declared option (:data:`OPTIONS` must name a strategy for each, so a new
option without one fails here), then taken through each path and back: the stored form (:func:`as_asked`, what
a placement keeps and ``vm show --json`` prints), ``vnuma place``'s command line (parsed by the real Click
command), the body of ``POST /v1/place`` (the real pydantic model), a trace's request (reader and
``trace export``'s writer), a domain's metadata (rendered by the real template, read by the real reader) and
the request a move asks. Each path must give back the very request it was given.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.placement.helpers import request
from vnuma.errors import InvalidInputError
from vnuma.placement.asks import ASKS, BY_NAME, INTERNAL, Form, as_asked, asked_changes, request_from, shape_key
from vnuma.placement.kept import kept_request, move_request
from vnuma.placement.model import Isolation, VmRequest
from vnuma.placement.request import request_problem
from vnuma.sources.tracekeys import At
from vnuma.sources.tracerequests import parse_request, request_keys

NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
SIZES = st.builds(lambda n, unit: f"{n}{unit}", st.integers(1, 64), st.sampled_from(["MiB", "GiB"]))
CELLS = st.integers(1, 4)


def _words(name: str) -> st.SearchStrategy[str]:
    return st.sampled_from(BY_NAME[name].words)


OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "tenant": NAMES,
    "vcpus": st.integers(1, 64),
    "memory": SIZES,
    "gpus": st.integers(0, 4),
    "vgpu": st.builds(lambda t, n: f"{t}:{n}", NAMES, st.integers(1, 4)),
    "mig": st.builds(lambda p, n: f"{p}:{n}", st.sampled_from(["1g.10gb", "3g.40gb"]), st.integers(1, 3)),
    "name": NAMES,
    "numa_nodes": st.one_of(st.just("auto"), CELLS),
    "cpu_policy": _words("cpu_policy"),
    "dedicated_vcpus": st.sets(st.integers(0, 7), min_size=1).map(lambda s: ",".join(map(str, sorted(s)))),
    "thread_policy": _words("thread_policy"),
    "page_size": st.sampled_from(["4K", "2M", "1G", "large"]),
    "gpu_affinity": _words("gpu_affinity"),
    "nics": st.one_of(st.integers(1, 4), st.just("per-gpu")),
    "nic_affinity": _words("nic_affinity"),
    "nic_function": _words("nic_function"),
    "emulator_threads": _words("emulator_threads"),
    "memory_mode": _words("memory_mode"),
    "cell_memory_mode": st.lists(_words("memory_mode"), min_size=2, max_size=4).map(",".join),
    "cell_vcpus": st.lists(st.integers(1, 8), min_size=2, max_size=4).map(lambda v: ",".join(map(str, v))),
    "cell_memory": st.lists(SIZES, min_size=2, max_size=4).map(",".join),
    "cell_gpus": st.lists(st.integers(0, 2), min_size=2, max_size=4).map(lambda v: ",".join(map(str, v))),
    "iothreads": st.integers(0, 64),
    "iothreads_policy": _words("iothreads_policy"),
    "host": NAMES,
    "llc": SIZES,
    "llc_ways": st.integers(1, 16),
    "mem_bw": st.integers(1, 100),
    "cold_memory": SIZES,
    "cold_tier": _words("cold_tier"),
    "group": NAMES,
    "anti_affinity": _words("anti_affinity"),
    "affinity": _words("affinity"),
    "alternatives": st.lists(st.one_of(
        st.builds(lambda n: {"gpus": n}, st.integers(0, 3)),
        st.builds(lambda p, n: {"mig": f"{p}:{n}", "vcpus": 4, "memory": "4GiB"},
                  st.sampled_from(["1g.10gb", "3g.40gb"]), st.integers(1, 3)),
        st.builds(lambda t: {"vgpu": f"{t}:2"}, NAMES),
        st.builds(lambda v, m: {"vcpus": v, "memory": m}, st.integers(1, 64), SIZES),
    ), min_size=1, max_size=3),
}
"""A strategy for the value of every option, as written."""

_EXCLUSIVE = (("vgpu", "mig"), ("llc", "llc_ways"), ("affinity", "anti_affinity"))


@st.composite
def asked_options(draw: st.DrawFn) -> dict[str, Any]:
    """Some options of a request, as written: any subset of the declared ones, each a value its option
    reads; the options that need or exclude each other drawn so that they read (their other checks, sums of
    per-cell lists, a policy for dedicated vCPUs, are the engine's: a request may well be one it refuses)."""
    values = {name: draw(strategy) for name, strategy in sorted(OPTIONS.items()) if draw(st.booleans())}
    for a, b in _EXCLUSIVE:
        if a in values and b in values:
            del values[draw(st.sampled_from([a, b]))]
    if ("affinity" in values or "anti_affinity" in values) and "group" not in values:
        values["group"] = draw(NAMES)
    values.setdefault("tenant", "t1")
    return values


@st.composite
def sound_options(draw: st.DrawFn) -> dict[str, Any]:
    """The options of a request the engine's own check accepts (:func:`request_problem`): every option may be
    drawn, and those that depend on each other agree (per-cell lists of one length summing to the totals, a
    mixed VM's dedicated vCPUs among its vCPUs, NICs beside GPUs...)."""
    values = draw(asked_options())
    n = draw(CELLS)
    cells_vcpus = draw(st.lists(st.integers(1, 4).map(lambda v: 2 * v), min_size=n, max_size=n))
    cells_gib = draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    values.update(vcpus=sum(cells_vcpus), memory=f"{sum(cells_gib)}GiB", numa_nodes=n)
    for key in ("cell_vcpus", "cell_memory", "cell_gpus", "cell_memory_mode"):
        values.pop(key, None)
    if len(set(cells_vcpus)) > 1 or len(set(cells_gib)) > 1:
        values.update(cell_vcpus=",".join(map(str, cells_vcpus)), cell_memory=",".join(f"{g}GiB" for g in cells_gib))
        if values.get("gpus"):
            values["cell_gpus"] = ",".join(str(values["gpus"]) if i == 0 else "0" for i in range(n))
        values.pop("emulator_threads", None)  # an isolated emulator pCPU has no per-cell size
    if n > 1 and draw(st.booleans()):
        modes = draw(st.lists(st.sampled_from(["strict", "preferred", "interleave"]), min_size=n, max_size=n))
        values["cell_memory_mode"] = ",".join(modes)
    if values.get("vgpu") or values.get("mig"):
        values.pop("gpus", None)
        values.pop("cell_gpus", None)
        values.pop("nics", None)
    if not values.get("gpus"):
        values.pop("nics", None)
        if values.get("iothreads_policy") == "device-local":
            del values["iothreads_policy"]
    if values.get("alternatives"):  # each a request the engine's check accepts: the VM's own size, other devices
        if "cell_vcpus" in values or values.get("iothreads_policy") == "device-local":
            del values["alternatives"]
        else:
            values["alternatives"] = [{k: v for k, v in a.items() if k not in ("vcpus", "memory")} or {"gpus": 0}
                                      for a in values["alternatives"]]
    if values.get("cpu_policy") == "mixed":
        values["dedicated_vcpus"] = ",".join(map(str, range(draw(st.integers(1, values["vcpus"] - 1)))))
        if values.get("thread_policy") == "require":
            del values["thread_policy"]
    else:
        values.pop("dedicated_vcpus", None)
    if values.get("cpu_policy") == "shared":
        values.pop("thread_policy", None)
        values.pop("emulator_threads", None)
    if values.get("thread_policy") == "require":
        values.pop("cpu_policy", None)
    if "restrictive" in (values.get("memory_mode"), values.get("cell_memory_mode")):
        values.pop("cell_memory_mode", None)
    return values


def test_every_option_has_a_strategy_and_every_request_field_an_option() -> None:
    """A new option without a strategy here, or a request field no option sets, fails."""
    assert set(OPTIONS) == set(BY_NAME)
    default = VmRequest("", None, None, None)
    unset = {f.name for f in fields(VmRequest)}
    for left_out in (("mig", "llc", "affinity"), ("vgpu", "llc_ways", "anti_affinity")):
        req = request_from({name: OPTIONS_EXAMPLE[name] for name in BY_NAME if name not in left_out})
        unset &= {f.name for f in fields(VmRequest) if getattr(req, f.name) == getattr(default, f.name)}
    assert unset <= INTERNAL | {"nics"}  # nics_per_gpu set instead of a count


OPTIONS_EXAMPLE: dict[str, Any] = {
    "tenant": "t", "vcpus": 8, "memory": "8GiB", "gpus": 2, "vgpu": "t:2", "mig": "3g.40gb:2", "name": "v",
    "numa_nodes": 2, "cpu_policy": "mixed", "dedicated_vcpus": "0-3", "thread_policy": "isolate",
    "page_size": "2M", "gpu_affinity": "preferred", "nics": "per-gpu", "nic_affinity": "phb",
    "nic_function": "vf", "emulator_threads": "isolate", "memory_mode": "interleave",
    "cell_memory_mode": "strict,interleave", "cell_vcpus": "6,2", "cell_memory": "6GiB,2GiB", "cell_gpus": "2,0",
    "iothreads": 2, "iothreads_policy": "device-local", "host": "h", "llc": "4MiB", "llc_ways": 2, "mem_bw": 40,
    "cold_memory": "1GiB", "cold_tier": "cxl", "group": "g", "anti_affinity": "host", "affinity": "host",
    "alternatives": [{"mig": "3g.40gb:2"}],
}
"""One value for every option, none of them its default."""


@given(values=asked_options())
def test_the_stored_form_reads_back_into_the_same_request(values: dict[str, Any]) -> None:
    req = request_from(values)
    assert request_from(as_asked(req)) == req
    assert request_from(asked_changes(req)) == req


def _place_command() -> Any:
    from vnuma.cli import _load

    return _load("place")


def _argv(written: dict[str, Any]) -> list[str]:
    argv = [str(written["tenant"])]
    for ask in ASKS:
        value = written.get(ask.name)
        if ask.name == "alternatives" and value is not None:
            argv += [x for a in value for x in ("--or", ",".join(f"{k}={v}" for k, v in a.items() if v is not None))]
        elif ask.name != "tenant" and value is not None:
            argv += [ask.flag, str(value)]
    return argv


@settings(max_examples=60)
@given(values=asked_options())
def test_the_command_line_reads_every_option(values: dict[str, Any]) -> None:
    """``vnuma place``'s options, made from the declaration, give back the request they were written from."""
    from vnuma.cli.asking import word

    req = request_from(values)
    command = _place_command()
    ctx = command.make_context("place", _argv(asked_changes(req, frozenset({"tenant"}))))
    assert request_from({name: word(ctx.params[name]) for name in BY_NAME}) == req


@settings(max_examples=60)
@given(values=asked_options())
def test_the_api_body_reads_every_option(values: dict[str, Any]) -> None:
    """The body of ``POST /v1/place`` takes the stored form as it is and gives back the same request."""
    from vnuma.api.bodies import PlaceBody

    req = request_from(values)
    body = PlaceBody.model_validate(as_asked(req))
    assert request_from(body.model_dump(include=set(BY_NAME), mode="json")) == req


def test_the_cli_options_and_the_api_members_are_the_same_and_described_alike() -> None:
    from vnuma.api.bodies import PlaceBody

    command = _place_command()
    flags = {p.opts[0] for p in command.params if p.opts[0].startswith("--")}
    arguments = {p.name for p in command.params if not p.opts[0].startswith("--")}
    schema = PlaceBody.model_json_schema()
    request_members = set(schema["properties"]) - {"strategy", "dry_run", "explain"}
    assert request_members == set(BY_NAME)
    assert {a.flag for a in ASKS if a.name != "tenant"} <= flags and arguments == {"tenant"}
    for ask in ASKS:
        assert schema["properties"][ask.name]["description"] == ask.help
        if ask.name != "tenant":
            option = next(p for p in command.params if p.opts[0] == ask.flag)
            assert option.help == ask.help


@given(values=sound_options())
def test_a_trace_request_reads_back_into_the_same_request(values: dict[str, Any]) -> None:
    """``trace export`` writes a request (version 1's keys, then what differs from the defaults) that the trace
    reader reads back whole."""
    req = request_from({"name": "vm1", **values})
    assert request_problem(req) is None
    assert parse_request(request_keys(req), At("t.json").key("requests").index(0)) == req


@settings(max_examples=40)
@given(values=sound_options())
def test_simulate_places_a_trace_request_as_it_was_asked(values: dict[str, Any]) -> None:
    """A trace's request, replayed by ``simulate``, is placed with the very request it asked (as
    ``vnuma place`` places one: the tenant completing it) wherever it fits."""
    from tests.builders import make_host
    from vnuma.simulate import Trace, run

    # What this host offers (slices and partitions have tests of their own): most requests fit here.
    unserved = ("host", "group", "affinity", "anti_affinity", "vgpu", "mig", "llc", "llc_ways", "mem_bw",
                "alternatives")
    req = request_from({"name": "vm1", **{k: v for k, v in values.items() if k not in unserved}})
    host = make_host("h", cells=4, cores_per_cell=16, gpus_per_cell=2, nics_per_cell=2, memory_gib=64,
                     hugepages_2m_gib=16, hugepages_1g_gib=32, memory_only_cells=1)
    trace = Trace("one", (host,), (parse_request(request_keys(req), At("t.json").key("requests").index(0)),))
    (placed,) = run(trace).placements
    if placed is not None:
        assert as_asked(kept_request(placed)) == as_asked(req)


@given(values=asked_options())
def test_a_trace_request_the_engine_refuses_is_refused_naming_it(values: dict[str, Any]) -> None:
    req = request_from({"name": "vm1", **values, "vcpus": values.get("vcpus", 4), "memory": values.get("memory",
                                                                                                   "4GiB")})
    doc = request_keys(req)
    if _problem(req) is None:
        assert parse_request(doc, At("t.json").key("requests").index(0)) == req
    else:
        with pytest.raises(InvalidInputError, match=f"requests\\[0\\].*\\(request '{req.name}'\\)"):
            parse_request(doc, At("t.json").key("requests").index(0))


def _problem(req: VmRequest) -> str | None:
    """What is wrong with ``req`` or with one of its alternatives, each whole (None: nothing)."""
    from vnuma.placement.alternatives import variants

    try:
        return next(filter(None, map(request_problem, variants(req))), None)
    except InvalidInputError as err:  # an alternative that does not read as a request
        return str(err)


@settings(max_examples=40)
@given(values=asked_options())
def test_a_domains_metadata_keeps_the_request(values: dict[str, Any]) -> None:
    """The default template writes the request into the domain's metadata; the reader adoption uses gives it
    back."""
    from tests.builders import make_host
    from tests.render.placements import CellSpec, make_placement
    from vnuma.render.domain import render_domain
    from vnuma.sources.domainxml import parse_domain

    req = request_from({"name": "vm1", **values})
    host = make_host("h", cells=2)
    placement = make_placement(host, [CellSpec(0, 2, 1 << 20)])
    xml = render_domain(host, replace(placement, request=req))
    mark = parse_domain(xml).mark
    assert mark is not None and mark.request is not None
    assert request_from(mark.request) == req


@given(values=asked_options())
def test_a_move_asks_the_kept_request_again(values: dict[str, Any]) -> None:
    """What a move asks is the kept request with the tenant's isolation and none of the confinement of the
    placement (``--host``, avoided hosts and cells); the stored form gives the same."""
    from tests.builders import kept
    from vnuma.placement.model import CellAssignment, Placement

    req = request_from(values)
    p = kept(Placement("vm1", "t1", "h", (CellAssignment(0, 0, (0,), (0,), 1024, 4),)))
    for keeping in (req, as_asked(req)):
        moved = move_request(replace(p, request=keeping), Isolation.CELL)
        assert moved == replace(req, isolation=Isolation.CELL, host=None)
    assert kept_request(replace(p, request=as_asked(req))) == req


def test_the_refusal_memory_tells_sizes_apart_from_shapes() -> None:
    a, b = request("a", vcpus=2), request("b", vcpus=8, memory_gib=4)
    assert shape_key(a) == shape_key(b)
    for change in ({"gpu_affinity": "preferred"}, {"dedicated_vcpus": "0", "cpu_policy": "mixed"}, {"llc_ways": 2}):
        other = request_from({"tenant": "t1", "vcpus": 2, "memory": "1GiB", **change})
        assert shape_key(other) != shape_key(a), change


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"vcpus": "two"}, "bad --vcpus 'two'"),
        ({"nics": "many"}, "bad --nics: 'many'"),
        ({"cpu_policy": "pinned"}, "bad cpu-policy 'pinned'"),
        ({"affinity": "host"}, "--affinity needs --group G"),
        ({"vgpu": "a", "mig": "b"}, "--vgpu and --mig exclude each other"),
        ({"colour": "red"}, "unknown request option(s): colour"),
    ],
    ids=["number", "nics", "choice", "needs", "excludes", "unknown"],
)
def test_options_that_cannot_be_read_are_named(values: dict[str, Any], words: str) -> None:
    with pytest.raises(InvalidInputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        request_from({"tenant": "t", **values})


def test_every_form_is_used() -> None:
    assert {a.form for a in ASKS} == set(Form)
