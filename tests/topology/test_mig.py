"""MIG geometry: the shipped profile files, the nvidia-smi readers and the slice arithmetic.

Inputs: the two shipped geometries (A100-SXM4-40GB, H100 80GB), saved ``nvidia-smi mig``
text in ``tests/data/nvidia-smi/`` (where each came from: its README), a hand-made
geometry where compute runs out before memory, and random geometries written as JSON
profile files. Properties are checked against a brute-force oracle written apart from
the module (sets of memory slices, pairwise).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vnuma.sources.migprofiles import (
    LgipRow,
    geometry_from_nvidia_smi,
    parse_lgip,
    parse_lgipp,
    parse_profile,
    shipped_profiles,
)
from vnuma.topology.mig import (
    Instance,
    MigGeometry,
    ProfileError,
    fits,
    free_counts,
    geometry_for,
    largest_creatable,
    starts_free,
)

SMI = Path(__file__).resolve().parent.parent / "data" / "nvidia-smi"
SHIPPED = {g.model: g for g in shipped_profiles().values()}
A100 = SHIPPED["NVIDIA A100-SXM4-40GB"]
H100 = SHIPPED["NVIDIA H100 80GB HBM3"]


def smi(name: str) -> str:
    return (SMI / name).read_text()


def as_json(g: MigGeometry, change: Callable[[dict[str, Any]], object] = lambda d: None) -> str:
    data = json.loads(json.dumps(dataclasses.asdict(g)))
    change(data)
    return json.dumps(data)


def named(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in data["profiles"] if p["name"] == name)


# --- the shipped files ---

# (name, profile id, memory slices, compute slices, max instances, starts): the guide's
# tables (Table 6 / Table 7) and the -lgipp placements, typed in again here.
ONE_TO_SIX = (0, 1, 2, 3, 4, 5, 6)
A100_TABLE = [
    ("1g.5gb", 19, 1, 1, 7, ONE_TO_SIX), ("1g.5gb+me", 20, 1, 1, 1, ONE_TO_SIX),
    ("1g.10gb", 15, 2, 1, 4, (0, 2, 4, 6)), ("2g.10gb", 14, 2, 2, 3, (0, 2, 4)), ("3g.20gb", 9, 4, 3, 2, (0, 4)),
    ("4g.20gb", 5, 4, 4, 1, (0,)), ("7g.40gb", 0, 8, 7, 1, (0,)),
]
H100_TABLE = [
    ("1g.10gb", 19, 1, 1, 7, ONE_TO_SIX), ("1g.10gb+me", 20, 1, 1, 1, ONE_TO_SIX),
    ("1g.20gb", 15, 2, 1, 4, (0, 2, 4, 6)), ("2g.20gb", 14, 2, 2, 3, (0, 2, 4)), ("3g.40gb", 9, 4, 3, 2, (0, 4)),
    ("4g.40gb", 5, 4, 4, 1, (0,)), ("7g.80gb", 0, 8, 7, 1, (0,)),
]


@pytest.mark.parametrize(("g", "table"), [(A100, A100_TABLE), (H100, H100_TABLE)], ids=["a100", "h100"])
def test_shipped_files_hold_the_guides_tables(g: MigGeometry, table: list[tuple[Any, ...]]) -> None:
    assert (g.memory_slices, g.compute_slices) == (8, 7)
    assert [(p.name, p.profile_id, p.memory_slices, p.compute_slices, p.max_instances, p.starts)
            for p in g.profiles] == table
    assert "MIG User Guide" in g.source


def test_the_package_ships_exactly_these_two() -> None:
    assert sorted(SHIPPED) == ["NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"]
    assert list(shipped_profiles()) == ["a100-sxm4-40gb", "h100-sxm5-80gb"]
    assert (A100.pci_ids, A100.memory_gib, H100.pci_ids, H100.memory_gib) == (
        ("0x10de:0x20b0",), 39.25, ("0x10de:0x2330",), 79.25,
    )


@pytest.mark.parametrize(("g", "stem"), [(A100, "a100-sxm4-40gb"), (H100, "h100-sxm5-80gb")], ids=["a100", "h100"])
def test_nvidia_smi_text_gives_the_shipped_geometry(g: MigGeometry, stem: str) -> None:
    read = geometry_from_nvidia_smi(
        smi(f"{stem}-lgip.txt"), smi(f"{stem}-lgipp.txt"), model=g.model, pci_ids=g.pci_ids, source=g.source
    )
    assert read == g


def test_geometry_for_matches_a_pci_device() -> None:
    assert geometry_for(SHIPPED.values(), "0x10de", "0x2330") is H100
    assert geometry_for(SHIPPED.values(), "0x10DE", "0x20B0") is A100
    assert geometry_for(SHIPPED.values(), "0x10de", "0x2331") is None


# --- the nvidia-smi readers ---


def test_lgip_reads_every_column() -> None:
    rows = parse_lgip(smi("a100-sxm4-40gb-lgip.txt"))
    assert rows[0] == LgipRow(0, "1g.5gb", 19, 7, 7, 4.75, False, 14, 0, 0, 1, 0, 0)
    assert rows[1] == LgipRow(0, "1g.5gb+me", 20, 1, 1, 4.75, False, 14, 1, 0, 1, 1, 1)
    assert rows[-1] == LgipRow(0, "7g.40gb", 0, 1, 1, 39.25, False, 98, 5, 0, 7, 1, 1)
    wide = parse_lgip(smi("h100-sxm5-80gb-lgip.txt"))[-1]
    assert (wide.name, wide.sm, wide.dec, wide.enc, wide.ce, wide.jpeg, wide.ofa) == ("7g.80gb", 132, 7, 0, 8, 7, 1)


def test_lgip_reads_plus_me_and_plus_gfx_profiles() -> None:
    rows = parse_lgip(smi("rtx-pro-6000-lgip-excerpt.txt"))
    assert [(r.name, r.profile_id, r.instances_total, r.ofa) for r in rows] == [
        ("1g.24gb", 14, 4, 0), ("1g.24gb+me", 21, 1, 1), ("1g.24gb+gfx", 47, 4, 0),
    ]


def test_lgip_and_lgipp_ignore_line_endings_indentation_and_blank_lines() -> None:
    lgip, lgipp = smi("a100-sxm4-40gb-lgip.txt"), smi("a100-sxm4-40gb-lgipp.txt")
    messy = "\r\n".join("  " + line for line in ["", *lgip.splitlines(), "", ""])
    assert parse_lgip(messy) == parse_lgip(lgip)
    assert parse_lgipp("\n\n" + lgipp.replace("\n", "\r\n")) == parse_lgipp(lgipp)


def test_several_gpus_need_an_index() -> None:
    lgip, lgipp = smi("h100-sxm5-80gb-lgip.txt"), smi("h100-sxm5-80gb-lgipp.txt")
    both = lgip + lgip.replace("|   0  MIG", "|   1  MIG")
    both_places = lgipp + lgipp.replace("GPU  0", "GPU  1")
    with pytest.raises(ProfileError, match="covers GPUs 0, 1: say which one"):
        geometry_from_nvidia_smi(both, both_places, model=H100.model)
    read = geometry_from_nvidia_smi(both, both_places, model=H100.model, gpu=1, pci_ids=H100.pci_ids,
                                    source=H100.source)
    assert read == H100
    with pytest.raises(ProfileError, match="no profiles for GPU 2"):
        geometry_from_nvidia_smi(both, both_places, model=H100.model, gpu=2)


def test_the_gpus_totals_come_from_its_largest_profiles() -> None:
    lines = smi("a100-sxm4-40gb-lgip.txt").splitlines()
    kept = [i for i, line in enumerate(lines) if "MIG 1g.10gb " in line or "MIG 4g.20gb " in line]
    lgip = "\n".join(lines[:5] + [lines[j] for i in kept for j in (i, i + 1)])
    lgipp = "GPU  0 Profile ID 15 Placements: {0,2,4,6}:2\nGPU  0 Profile ID  5 Placement : {0}:4\n"
    g = geometry_from_nvidia_smi(lgip, lgipp, model="A100 showing two profiles")
    assert (g.memory_slices, g.compute_slices, g.memory_gib) == (8, 4, 19.5)
    assert [(p.name, p.max_instances) for p in g.profiles] == [("1g.10gb", 4), ("4g.20gb", 1)]


LGIP = smi("a100-sxm4-40gb-lgip.txt")
LGIPP = smi("a100-sxm4-40gb-lgipp.txt")
BAD_LGIP = [
    ("nvidia-smi-L", "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)\n",
     r"line 1: expected a profile row, got 'GPU 0: NVIDIA"),
    ("mig-disabled", "No MIG-enabled devices found.\n", r"line 1: expected a profile row, got 'No MIG-enabled"),
    ("lgipp-text", LGIPP, r"line 1: expected a profile row, got 'GPU  0 Profile ID 19"),
    ("empty", "", r"no GPU instance profiles in it"),
    ("header-only", "\n".join(LGIP.splitlines()[:5]), r"no GPU instance profiles in it"),
    ("second-line-missing", LGIP.replace(LGIP.splitlines()[6] + "\n", "", 1),
     r"line 8: expected its second line \(CE JPEG OFA\), got '\|   0  MIG 1g\.5gb\+me"),
    ("last-second-line-missing", "\n".join(LGIP.splitlines()[:-2]), r"profile 7g\.40gb has no second line"),
    ("garbled-count", LGIP.replace("7/7", "7of7"), r"line 6: expected a profile row, got '\|   0  MIG 1g\.5gb"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_LGIP], ids=[c[0] for c in BAD_LGIP])
def test_text_that_is_not_lgip_output_is_refused(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as caught:
        parse_lgip(text)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("nvidia-smi -lgip text")


BAD_LGIPP = [
    ("lgip-text", LGIP, r"line 1: expected 'GPU 0 Profile ID 9 Placements: \{0,4\}:4', got '\+---"),
    ("no-starts", "GPU  0 Profile ID 19 Placements: {}:1\n", r"line 1: expected"),
    ("no-size", "GPU  0 Profile ID 19 Placements: {0,1}\n", r"line 1: expected"),
    ("twice", LGIPP + LGIPP.splitlines()[0], r"line 8: GPU 0 profile 19 again"),
    ("empty", "\n\n", r"no placement lines in it"),
]


@pytest.mark.parametrize(("text", "message"), [c[1:] for c in BAD_LGIPP], ids=[c[0] for c in BAD_LGIPP])
def test_text_that_is_not_lgipp_output_is_refused(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as caught:
        parse_lgipp(text)
    assert "\n" not in str(caught.value)


MISMATCHED = [
    ("placement-missing", LGIPP.replace("GPU  0 Profile ID 15 Placements: {0,2,4,6}:2\n", ""),
     r"no placements for GPU 0 profile 1g\.10gb \(ID 15\)"),
    ("placement-extra", LGIPP + "GPU  0 Profile ID  7 Placement : {0}:8\n",
     r"lists GPU 0 profile ID 7, which -lgip does not"),
    ("size-against-starts", LGIPP.replace("{0,1,2,3,4,5,6}:1", "{0,1,2,3,4,5,6}:2", 1),
     r"profile '1g\.5gb': start 1 is not a multiple of its 2 memory slices"),
]


@pytest.mark.parametrize(("lgipp", "message"), [c[1:] for c in MISMATCHED], ids=[c[0] for c in MISMATCHED])
def test_lgip_and_lgipp_must_agree(lgipp: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        geometry_from_nvidia_smi(LGIP, lgipp, model=A100.model)


# --- profile files: format and every refusal ---


def test_json_and_toml_give_the_same_geometry() -> None:
    assert parse_profile(as_json(A100), "json") == A100
    assert parse_profile(as_json(H100).encode(), "json") == H100


Change = Callable[[dict[str, Any]], object]
"""An edit of a profile file's data (its return value is ignored)."""


def _set(name: str, key: str, value: Any) -> Change:
    return lambda d: named(d, name).__setitem__(key, value)


BAD_FILES: list[tuple[str, Change, str]] = [
    ("span-past-end", _set("3g.20gb", "starts", [0, 6]), r"profile '3g\.20gb': start 6 \+ 4 memory slices goes past"
     r" the GPU's 8"),
    ("unaligned-start", _set("2g.10gb", "starts", [0, 1]), r"profile '2g\.10gb': start 1 is not a multiple of its 2"),
    ("negative-start", _set("1g.5gb", "starts", [-1, 0]), r"profile '1g\.5gb': start -1 \+ 1 memory slices"),
    ("unsorted-starts", _set("3g.20gb", "starts", [4, 0]), r"profile '3g\.20gb': starts must be a non-empty ascending"),
    ("repeated-start", _set("3g.20gb", "starts", [0, 0]), r"profile '3g\.20gb': starts must be .* without repeats"),
    ("no-starts", _set("7g.40gb", "starts", []), r"profile '7g\.40gb': starts must be a non-empty"),
    ("float-start", _set("7g.40gb", "starts", [0.5]), r"profile '7g\.40gb': starts must be whole numbers"),
    ("duplicate-name", _set("1g.5gb+me", "name", "1g.5gb"), r"two profiles have the name '1g\.5gb'"),
    ("duplicate-id", _set("1g.5gb+me", "profile_id", 19), r"two profiles have the profile id 19"),
    ("unknown-key", lambda d: d.__setitem__("colour", "green"), r"unknown key 'colour' \(known: model, pci_ids"),
    ("unknown-profile-key", _set("4g.20gb", "slices", 4), r"profile '4g\.20gb': unknown key 'slices'"),
    ("missing-key", lambda d: named(d, "1g.10gb").pop("max_instances"),
     r"profile '1g\.10gb': missing key 'max_instances'"),
    ("missing-top-key", lambda d: d.pop("memory_slices"), r"missing key 'memory_slices'"),
    ("zero-size", _set("4g.20gb", "memory_slices", 0), r"profile '4g\.20gb': memory_slices must be positive, got 0"),
    ("negative-max", _set("4g.20gb", "max_instances", -1), r"profile '4g\.20gb': max_instances must be positive"),
    ("negative-id", _set("4g.20gb", "profile_id", -5), r"profile '4g\.20gb': profile_id must not be negative"),
    ("zero-gpu-slices", lambda d: d.__setitem__("memory_slices", 0), r": memory_slices must be positive, got 0"),
    ("compute-above-gpu", lambda d: named(d, "4g.20gb").update(name="8g.20gb", compute_slices=8),
     r"profile '8g\.20gb': compute_slices 8 is more than the GPU's 7"),
    ("memory-above-gpu", _set("7g.40gb", "memory_slices", 16), r"profile '7g\.40gb': memory_slices 16 is more than"),
    ("gib-above-gpu", _set("3g.20gb", "memory_gib", 50), r"profile '3g\.20gb': memory_gib 50\.0 is more than the"),
    ("name-against-compute", _set("3g.20gb", "compute_slices", 2), r"profile '3g\.20gb': the name says 3 compute"),
    ("bad-name", _set("3g.20gb", "name", "half"), r"profile 'half': name is not of the form"),
    ("max-above-starts", _set("4g.20gb", "max_instances", 2), r"'4g\.20gb': max_instances 2 is more than its 1 starts"),
    ("max-above-compute", lambda d: named(d, "2g.10gb").update(starts=[0, 2, 4, 6], max_instances=4),
     r"profile '2g\.10gb': 4 instances of 2 compute slices are more than the GPU's 7"),
    ("empty-profiles", lambda d: d.__setitem__("profiles", []), r"the profile list is empty"),
    ("profile-not-table", lambda d: d.__setitem__("profiles", [7]), r"profiles\[0\] must be a table"),
    ("bool-for-int", lambda d: d.__setitem__("compute_slices", True), r"compute_slices must be int, got True"),
    ("text-for-number", lambda d: d.__setitem__("memory_gib", "39"), r"memory_gib must be a number, got '39'"),
    ("bad-pci-id", lambda d: d.__setitem__("pci_ids", ["10de:20b0"]), r"pci id '10de:20b0' is not of the form"),
    ("pci-ids-not-list", lambda d: d.__setitem__("pci_ids", "0x10de:0x20b0"), r"pci_ids must be list"),
    ("empty-model", lambda d: d.__setitem__("model", " "), r"model must not be empty"),
]


@pytest.mark.parametrize(("change", "message"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES])
def test_a_bad_profile_file_is_refused_naming_the_culprit(change: Change, message: str) -> None:
    with pytest.raises(ProfileError, match=message) as caught:
        parse_profile(as_json(A100, change), "json", origin="a100.json")
    assert str(caught.value).startswith("a100.json: ") and "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ("model = \n", "toml", r"x: not valid TOML: "),
        ("{\"model\": ", "json", r"x: not valid JSON: "),
        (b"model = \"\xff\"\n", "toml", r"x: not valid TOML: 'utf-8' codec"),
        ("[1, 2]", "json", r"x: the top level must be a table"),
        ("model = 'x'", "yaml", r"x: unknown profile format 'yaml'"),
    ],
    ids=["toml-syntax", "json-syntax", "not-utf8", "json-list", "unknown-format"],
)
def test_unreadable_text_is_refused(text: str | bytes, fmt: Any, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile(text, fmt, origin="x")


def test_profile_error_is_an_input_error_with_exit_4() -> None:
    err = ProfileError("x")
    assert isinstance(err, ValueError) and err.exit_code == 4


# --- slice arithmetic on known cases ---


def test_an_empty_a100() -> None:
    assert starts_free(A100, "3g.20gb", []) == (0, 4)
    assert largest_creatable(A100, []) == A100.profiles[-1]
    assert free_counts(A100, []) == {
        "1g.5gb": 7, "1g.5gb+me": 1, "1g.10gb": 4, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1,
    }


def test_beside_a_4g_instance() -> None:
    used = [("4g.20gb", 0)]
    assert (starts_free(A100, "3g.20gb", used), starts_free(A100, "7g.40gb", used)) == ((4,), ())
    assert starts_free(A100, "2g.10gb", used) == (4,)
    largest = largest_creatable(A100, used)
    assert largest is not None and largest.name == "3g.20gb"
    assert free_counts(A100, used) == {
        "1g.5gb": 3, "1g.5gb+me": 1, "1g.10gb": 2, "2g.10gb": 1, "3g.20gb": 1, "4g.20gb": 0, "7g.40gb": 0,
    }


def test_largest_creatable_ties_go_to_the_profile_listed_first() -> None:
    used = [("4g.20gb", 0), ("1g.5gb", 4), ("1g.5gb", 6)]
    assert starts_free(A100, "1g.5gb+me", used) == (5,) and starts_free(A100, "1g.10gb", used) == ()
    largest = largest_creatable(A100, used)
    assert largest is not None and largest.name == "1g.5gb"


@pytest.mark.parametrize(
    ("used", "expected"),
    [
        ([], True),
        ([("4g.20gb", 0), ("3g.20gb", 4)], True),
        ([("3g.20gb", 0), ("3g.20gb", 4)], True),
        ([("2g.10gb", 0), ("2g.10gb", 2), ("2g.10gb", 4), ("1g.5gb", 6)], True),
        ([("3g.20gb", 0), ("4g.20gb", 0)], False),
        ([("1g.5gb+me", 0), ("1g.5gb+me", 1)], False),
        ([("3g.20gb", 2)], False),
        ([("1g.10gb", 0), ("1g.5gb", 1)], False),
    ],
    ids=["nothing", "4g-and-3g", "two-3g", "three-2g-and-1g", "overlap", "two-media", "start-not-allowed", "inside"],
)
def test_fits_on_the_a100(used: list[Instance], expected: bool) -> None:
    assert fits(A100, used) is expected


SMALL = parse_profile(json.dumps({
    "model": "test GPU", "memory_slices": 4, "compute_slices": 2, "memory_gib": 4, "source": "made up for this test",
    "profiles": [
        {"name": "1g.1gb", "profile_id": 1, "memory_slices": 1, "compute_slices": 1, "memory_gib": 1,
         "max_instances": 2, "starts": [0, 1, 2, 3]},
        {"name": "2g.2gb", "profile_id": 2, "memory_slices": 2, "compute_slices": 2, "memory_gib": 2,
         "max_instances": 1, "starts": [0, 2]},
    ],
}), "json")


def test_compute_can_run_out_before_memory() -> None:
    used = [("2g.2gb", 0)]
    assert starts_free(SMALL, "1g.1gb", used) == ()
    assert not fits(SMALL, [*used, ("1g.1gb", 2)])
    assert largest_creatable(SMALL, used) is None
    assert free_counts(SMALL, used) == {"1g.1gb": 0, "2g.2gb": 0}


def test_an_unknown_profile_name_is_refused() -> None:
    with pytest.raises(ProfileError, match=r"NVIDIA A100-SXM4-40GB has no MIG profile '5g\.50gb' \(it has 1g\.5gb,"):
        starts_free(A100, "5g.50gb", [])
    with pytest.raises(ProfileError, match=r"no MIG profile '9g\.9gb'"):
        fits(A100, [("9g.9gb", 0)])


# --- properties, against a brute-force oracle ---


def oracle_fits(g: MigGeometry, used: list[Instance]) -> bool:
    """Every start allowed, memory spans pairwise disjoint, compute and counts within bounds."""
    by_name = {p.name: p for p in g.profiles}
    if any(start not in by_name[name].starts for name, start in used):
        return False
    spans = [set(range(start, start + by_name[name].memory_slices)) for name, start in used]
    if any(a & b for a, b in itertools.combinations(spans, 2)):
        return False
    counts = Counter(name for name, _ in used)
    return (sum(by_name[name].compute_slices for name, _ in used) <= g.compute_slices
            and all(counts[p.name] <= p.max_instances for p in g.profiles))


@st.composite
def random_geometries(draw: st.DrawFn) -> MigGeometry:
    """A valid geometry of 1-4 profiles with aligned starts, written as a JSON file and read back."""
    memory = draw(st.sampled_from((1, 2, 4, 8)))
    compute = draw(st.integers(1, 7))
    profiles = []
    for i in range(draw(st.integers(1, 4))):
        size = draw(st.sampled_from([s for s in (1, 2, 4, 8) if s <= memory]))
        starts = sorted(draw(st.sets(st.sampled_from(range(0, memory - size + 1, size)), min_size=1)))
        slices = draw(st.integers(1, compute))
        profiles.append({
            "name": f"{slices}g.{size}gb" + ("+" + "m" * i if i else ""), "profile_id": i, "memory_slices": size,
            "compute_slices": slices, "memory_gib": size, "starts": starts,
            "max_instances": draw(st.integers(1, min(len(starts), compute // slices))),
        })
    text = json.dumps({"model": "random", "memory_slices": memory, "compute_slices": compute,
                       "memory_gib": memory, "source": "hypothesis", "profiles": profiles})
    return parse_profile(text, "json")


GEOMETRIES = st.one_of(st.sampled_from((*shipped_profiles().values(), SMALL)), random_geometries())


@st.composite
def grown(draw: st.DrawFn, lowest: bool) -> tuple[MigGeometry, list[Instance]]:
    """A geometry and the instances left by random requests, each given a free start (the lowest, or any)."""
    g = draw(GEOMETRIES)
    used: list[Instance] = []
    for name in draw(st.lists(st.sampled_from([p.name for p in g.profiles]), max_size=12)):
        free = starts_free(g, name, used)
        if free:
            used.append((name, free[0] if lowest else draw(st.sampled_from(free))))
            assert oracle_fits(g, used) and fits(g, used)
    return g, used


@given(case=st.one_of(grown(lowest=True), grown(lowest=False)))
def test_free_starts_are_exactly_the_starts_that_fit(case: tuple[MigGeometry, list[Instance]]) -> None:
    g, used = case
    assert oracle_fits(g, used) and fits(g, used)
    for p in g.profiles:
        assert starts_free(g, p.name, used) == tuple(s for s in p.starts if oracle_fits(g, [*used, (p.name, s)]))


@given(g=GEOMETRIES, data=st.data())
def test_fits_agrees_with_the_oracle_and_refuses_every_overlap(g: MigGeometry, data: st.DataObject) -> None:
    instances = st.sampled_from([(p.name, s) for p in g.profiles for s in p.starts])
    used = data.draw(st.lists(instances, max_size=5))
    assert fits(g, used) is oracle_fits(g, used)
    (a, start_a), (b, start_b) = data.draw(instances), data.draw(instances)
    size = {p.name: p.memory_slices for p in g.profiles}
    if set(range(start_a, start_a + size[a])) & set(range(start_b, start_b + size[b])):
        assert not fits(g, [(a, start_a), (b, start_b)])
        assert not fits(g, [*used, (a, start_a), (b, start_b)])


@given(case=grown(lowest=False))
def test_largest_creatable_and_free_counts_against_the_oracle(case: tuple[MigGeometry, list[Instance]]) -> None:
    g, used = case
    creatable = [p for p in g.profiles if any(oracle_fits(g, [*used, (p.name, s)]) for s in p.starts)]
    best = largest_creatable(g, used)
    if not creatable:
        assert best is None
    else:
        assert best in creatable
        assert (best.memory_slices, best.compute_slices) == max((p.memory_slices, p.compute_slices) for p in creatable)
    taken = {s for name, start in used for p in g.profiles if p.name == name
             for s in range(start, start + p.memory_slices)}
    compute_left = g.compute_slices - sum(p.compute_slices for name, _ in used for p in g.profiles if p.name == name)
    for p in g.profiles:
        open_starts = [s for s in p.starts if taken.isdisjoint(range(s, s + p.memory_slices))]
        left = p.max_instances - sum(1 for name, _ in used if name == p.name)
        assert free_counts(g, used)[p.name] == max(0, min(len(open_starts), compute_left // p.compute_slices, left))
