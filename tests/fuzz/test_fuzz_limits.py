"""Hostile documents: entity declarations in any encoding, and inputs built to cost time or memory.

No timings: each case asserts that the document is refused by a limit
(entity ban, libxml2's depth and text-node limits without ``huge_tree``,
the parsers' own bounds) rather than processed.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import ENTITY_EXAMPLES, fuzz
from tests.fuzz.oracle import PARSERS, check_error
from tests.fuzz.raw import entity_documents
from vnuma.errors import InvalidInputError

SECRET = "TOP-SECRET-TOKEN-4711"
FIVE_MB = 5 * 1024 * 1024
ROOTS = {"capabilities": "capabilities", "nodedev": "device", "nodedev-file": "devices", "hwloc": "topology",
         "nvidia-smi": "nvidia_smi_log"}


@pytest.fixture(scope="module")
def secret_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    secret = tmp_path_factory.mktemp("xxe") / "secret.txt"
    secret.write_text(SECRET)
    return secret.as_uri()


def _refusal(parser: str, data: bytes | str) -> InvalidInputError:
    call, _ = PARSERS[parser]
    with pytest.raises(InvalidInputError) as info:
        call(data)
    check_error(info.value)
    return info.value


@pytest.mark.parametrize("parser", sorted(ROOTS))
@fuzz(ENTITY_EXAMPLES)
@given(data=st.data())
def test_entity_declarations_are_refused_in_any_encoding(
    parser: str, secret_uri: str, data: st.DataObject
) -> None:
    document = data.draw(entity_documents(ROOTS[parser], secret_uri), label="document")
    err = _refusal(parser, document)
    assert SECRET not in str(err) and SECRET not in (err.hint or "")


def _nested(root: str, inner: str, size: int) -> str:
    depth = size // (2 * len(inner) + 3)
    return f"<{root}>" + f"<{inner}>" * depth + f"</{inner}>" * depth + f"</{root}>"


CASES: dict[str, tuple[str, Callable[[], str], str]] = {
    "deep-capabilities": (
        "capabilities",
        lambda: _nested("capabilities", "host", FIVE_MB),
        "Excessive depth",
    ),
    "deep-hwloc": ("hwloc", lambda: _nested("topology version='2.0'", "object", FIVE_MB), "Excessive depth"),
    "deep-devices": ("nodedev-file", lambda: _nested("devices", "device", FIVE_MB), "Excessive depth"),
    "huge-text-node": (
        "nodedev",
        lambda: "<device><name>" + "n" * (2 * FIVE_MB + 1) + "</name></device>",
        "Text node too long",
    ),
    "quadratic-entity-blowup": (
        "capabilities",
        lambda: (
            f'<!DOCTYPE c [<!ENTITY a "{"a" * 50_000}">]><capabilities>' + "&a;" * 50_000 + "</capabilities>"
        ),
        "entity declarations are not allowed",
    ),
    "siblings-range-of-4-billion": (
        "capabilities",
        lambda: (
            "<capabilities><host><topology><cells><cell id='0'><cpus>"
            + "<cpu id='0' siblings='0-4294967295'/>" * 10_000
            + "</cpus></cell></cells></topology></host></capabilities>"
        ),
        "siblings '0-4294967295' name more than 256 CPUs",
    ),
    "siblings-reversed-range-hides-span": (
        "capabilities",
        lambda: (
            "<capabilities><host><topology><cells><cell id='0'><cpus>"
            "<cpu id='0' siblings='0-2147483647,2147483647-0'/>"
            "</cpus></cell></cells></topology></host></capabilities>"
        ),
        "name more than 256 CPUs",
    ),
    "distance-matrix-of-a-billion-values": (
        "hwloc",
        lambda: (
            "<topology version='2.0'><object type='Machine' os_index='0'>"
            "<object type='NUMANode' os_index='0' cpuset='0x1' local_memory='1024'/></object>"
            "<distances2 type='NUMANode' nbobjs='31623' indexing='os'><indexes>0</indexes>"
            "<u64values>10</u64values></distances2></topology>"
        ),
        "distance matrix for 31623 nodes has 1 indexes and 1 values",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_costly_documents_are_refused_by_a_limit(case: str) -> None:
    parser, build, expected = CASES[case]
    document = build()
    assert len(document) < 4 * FIVE_MB
    message = str(_refusal(parser, document))
    assert expected in message
    assert "XML_PARSE_HUGE" not in message


def test_a_core_with_thousands_of_pus_reads_each_once() -> None:
    # Siblings come from one pass over the core (cached), not one pass per PU: with 4,096 PUs
    # the per-PU walk read 16.7 million PU elements. The result must still be exact.
    pus = "".join(f"<object type='PU' os_index='{i}'/>" for i in range(4096))
    doc = (
        "<topology version='2.0'><object type='Machine' os_index='0'>"
        "<object type='NUMANode' os_index='0' cpuset='0x1' local_memory='1073741824'/>"
        f"<object type='Core' os_index='0'>{pus}</object></object></topology>"
    )
    call, check = PARSERS["hwloc"]
    imported = call(doc)
    check(imported)
    host = imported.host
    siblings = {cpu.siblings for cpu in host.cells[0].cpus}
    assert siblings == {frozenset(range(4096))}
    assert len({id(s) for s in (cpu.siblings for cpu in host.cells[0].cpus)}) == 1
