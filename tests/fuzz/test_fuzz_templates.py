"""Fuzz operator templates: bad templates never crash, never hang, never write (issue 6).

Templates from ``tests.fuzz.templates`` (mutated shipped files served from
an operator directory, generated ``{% extends %}`` overrides and hostile
Jinja given as ``--template`` files) are rendered through the render
service against one fixed placement. The oracle: validated domain XML, or
a one-line ``VnumaError`` (RenderError in practice); any other exception
fails the test. Infinite-ish loops, huge integers and strings must end in
the render limits of ``vnuma.render.env``: a hang guard (SIGALRM, a
BaseException the renderer cannot swallow) turns a render that has not
returned after ``HANG_SECONDS`` into a failure instead of a stuck CI job;
it is a hang detector, not a speed assertion. The fuzz runs with the
limits scaled down (``SMALL_LIMITS``: same code paths, less time spent
reaching them); ``test_costly_templates_are_stopped_by_a_limit`` checks the
shipped limits on each costly construct.

Through the CLI, ``vnuma render VM --template F`` and ``vnuma apply VM
--template F`` on a host imported from files: exit 0/7 and 4/7, no
traceback, and the inventory dump is unchanged byte for byte.
Counts: 900 mutated + 900 overrides + 500 hostile = 2,300 through the
service, CLI_EXAMPLES through the CLI.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lxml import etree
from typer.testing import CliRunner

from tests.builders import make_host
from tests.dbdump import dump as _dump
from tests.fuzz.budget import fuzz
from tests.fuzz.templates import hostile_templates, mutated_templates, override_templates
from tests.render.placements import CellSpec, make_placement
from tests.sources.capswriter import capabilities_xml
from vnuma.cli import app
from vnuma.errors import RenderError, VnumaError
from vnuma.render import env as render_env
from vnuma.render.domain import render_domain

MUTATED_EXAMPLES = 900
OVERRIDE_EXAMPLES = 900
HOSTILE_EXAMPLES = 500
CLI_EXAMPLES = 200
HANG_SECONDS = 60

HOST = make_host()
PLACEMENT = make_placement(HOST, [CellSpec(0, 2)], threads=2)
_SERIAL = itertools.count(1)
SMALL_LIMITS = {"MAX_STEPS": 20_000, "MAX_OUTPUT_CHARS": 256 * 1024, "MEMORY_HEADROOM_BYTES": 64 * 2**20}
SHIPPED_LIMITS = {name: getattr(render_env, name) for name in SMALL_LIMITS}


class Hung(BaseException):
    """A render that did not return within HANG_SECONDS."""


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise Hung(f"render did not return within {HANG_SECONDS} s")


@pytest.fixture(scope="module")
def hang_guard() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in SMALL_LIMITS.items():
            patch.setattr(render_env, name, value)
        yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("templates")


def _write(path: Path, data: bytes) -> Path:
    """Write one example's template; the mtime is a serial number, so Jinja always sees a changed file.

    One path per test keeps one cached environment (the shipped templates compile once), and file
    systems whose mtimes tick coarsely could otherwise serve the previous example's compiled template.
    """
    for old in path.parent.iterdir():
        old.unlink()
    path.write_bytes(data)
    serial = next(_SERIAL)
    os.utime(path, (serial, serial))
    return path


def _render(*, template: Path | None = None, templates_dir: Path | None = None) -> str:
    """Render or refuse in one line; the XML of a render that passed validation still names every pin."""
    signal.alarm(HANG_SECONDS)
    try:
        xml = render_domain(HOST, PLACEMENT, template=template, templates_dir=templates_dir)
    except VnumaError as err:
        # Not required to be one line here: the CLI joins lines (lxml's messages end in "\n, line N").
        assert str(err).strip(), f"empty {type(err).__name__}"
        assert err.hint is None or "\n" not in err.hint, err.hint
        return "refused"
    finally:
        signal.alarm(0)
    root = etree.fromstring(xml.encode())
    assert len(root.findall("cputune/vcpupin")) == 2
    return "ok"


@pytest.mark.usefixtures("hang_guard")
@fuzz(MUTATED_EXAMPLES)
@given(case=mutated_templates())
def test_mutated_shipped_templates_render_or_refuse(workdir: Path, case: tuple[str, bytes]) -> None:
    name, data = case
    (workdir / "dir").mkdir(exist_ok=True)
    _render(templates_dir=_write(workdir / "dir" / name, data).parent)


@pytest.mark.usefixtures("hang_guard")
@fuzz(OVERRIDE_EXAMPLES)
@given(text=override_templates())
def test_block_overrides_render_or_refuse(workdir: Path, text: str) -> None:
    (workdir / "file").mkdir(exist_ok=True)
    _render(template=_write(workdir / "file" / "op.xml.j2", text.encode("utf-8", "surrogatepass")))


@pytest.mark.usefixtures("hang_guard")
@fuzz(HOSTILE_EXAMPLES)
@given(text=hostile_templates)
def test_hostile_templates_render_or_refuse(workdir: Path, text: str) -> None:
    (workdir / "file").mkdir(exist_ok=True)
    _render(template=_write(workdir / "file" / "op.xml.j2", text.encode("utf-8", "surrogatepass")))


# --- through the CLI --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An inventory with one host imported from files and one placed VM ``v``."""
    where = tmp_path_factory.mktemp("cli")
    db, caps = where / "inventory.db", where / "caps.xml"
    host = make_host("h", cells=2, cores_per_cell=4, smt=1, memory_gib=8, hugepages_2m_gib=0, hugepages_1g_gib=0)
    caps.write_text(capabilities_xml(host))
    runner = CliRunner()
    for args in (
        ["host", "import", "h", "--capabilities", str(caps)],
        ["tenant", "create", "a"],
        ["place", "a", "--vcpus", "2", "--memory", "1GiB", "--page-size", "4K", "--name", "v"],
    ):
        res = runner.invoke(app, ["--db", str(db), "--create", *args], catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
    return db




_ANY_TEMPLATE = st.one_of(override_templates(), hostile_templates)


@pytest.mark.usefixtures("hang_guard")
@fuzz(CLI_EXAMPLES)
@given(text=_ANY_TEMPLATE, command=st.sampled_from(["render", "apply"]))
def test_cli_render_and_apply_exit_cleanly_and_write_nothing(
    workdir: Path, inventory: Path, text: str, command: str
) -> None:
    (workdir / "cli").mkdir(exist_ok=True)
    path = _write(workdir / "cli" / "op.xml.j2", text.encode("utf-8", "surrogatepass"))
    before = _dump(inventory)
    signal.alarm(HANG_SECONDS)
    try:
        res = CliRunner().invoke(app, ["--db", str(inventory), command, "v", "--template", str(path)])
    finally:
        signal.alarm(0)
    allowed = {"render": {0, 7}, "apply": {4, 7}}[command]  # apply: the host has no URI (exit 4) once it renders
    assert res.exit_code in allowed, (res.exit_code, res.stderr, res.exception)
    assert "Traceback" not in res.stderr
    if res.exit_code:
        lines = res.stderr.splitlines()
        assert lines[0].startswith("error: ") and all(line.startswith("hint: ") for line in lines[1:]), lines
    assert _dump(inventory) == before


# --- the shipped limits ---------------------------------------------------------------------------

COSTLY = {
    "range-of-a-billion": ("{% for i in range(10**9) %}x{% endfor %}", "Range too big"),
    "nested-loops": (
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
        "loop iterations and calls",
    ),
    "loop-growing-its-list": ("{% set xs = [1] %}{% for x in xs %}{{ xs.append(x) }}{% endfor %}", "loop iterations"),
    "recursive-loop-fan-out": (
        "{% for x in range(99999) recursive %}{% if loop.depth < 3 %}{{ loop(range(99999)) }}{% endif %}{% endfor %}",
        "loop iterations",
    ),
    "iterator-filter": ("{{ [1]|slice(100000000)|list|length }}", "loop iterations"),
    "power-tower": ("{{ 10 ** (10 ** 10) }}", "integer of about 40,000,000,000 bits"),
    "string-repeat": ("{{ 'x' * 10**10 }}", "* would make 10,000,000,000 items"),
    "padding-method": ("{{ 'x'.ljust(10**10) }}", "MiB of memory"),
    "padding-filter-folded-while-compiling": ("{{ 'x'|center(1000000000) }}", "MiB of memory"),
    "printf-width": ("{{ '%*d' % (1000000000, 1) }}", "MiB of memory"),
    "doubling-namespace": (
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "MiB of memory",
    ),
    "join-of-repeats": ("{{ ([('x' * 1000000)] * 4000)|join }}", "MiB of memory"),
    "long-output": ("{% for i in range(99999) %}{{ 'x' * 1000 }}{% endfor %}", "output is longer than"),
    "lipsum": ("{{ lipsum(100000) }}", "'lipsum' is undefined"),
}


@pytest.mark.parametrize("case", sorted(COSTLY))
def test_costly_templates_are_stopped_by_a_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    for name, value in SHIPPED_LIMITS.items():  # the fuzz tests' module fixture scales them down
        monkeypatch.setattr(render_env, name, value)
    body, expected = COSTLY[case]
    path = tmp_path / "op.xml.j2"
    path.write_text(f'{{% extends "domain.xml.j2" %}}{{% block devices %}}\n{body}\n{{% endblock %}}\n')
    with pytest.raises(RenderError) as info:
        render_domain(HOST, PLACEMENT, template=path)
    message = str(info.value)
    assert expected in message, message
    assert message.startswith(f"template {path}"), message
