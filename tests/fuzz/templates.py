"""Strategies for operator templates: mutated shipped templates, generated overrides, hostile Jinja.

Three sources, all text (the renderer reads templates as UTF-8 files):

- ``mutated_templates``: a shipped template (``domain.xml.j2`` or a partial)
  with 1-3 byte-level edits (truncate, insert, flip, splice from ``raw``)
  or token-level edits (a Jinja delimiter dropped, doubled or swapped, a
  ``view`` field renamed);
- ``override_templates``: ``{% extends "domain.xml.j2" %}`` with 1-3 blocks
  overridden by bodies built from Jinja constructs: XML text, ``view``
  fields real and unknown, attribute access on undefined, unknown filters
  and tests, ``super()``, includes of real and missing partials, macros,
  loops (some ``range(10**9)``-sized, nested, or growing the list they walk),
  big integer and string arithmetic, and sandbox escapes;
- ``hostile_templates``: one such construct on its own, no ``extends``.

The oracle (``tests.fuzz.test_fuzz_templates``) wants validated XML or a
one-line vnuma error, within the render limits of ``vnuma.render.env``.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz.raw import byte_mutated

SHIPPED = Path(__file__).resolve().parents[2] / "templates"
SHIPPED_TEXT = {p.name: p.read_text(encoding="utf-8") for p in sorted(SHIPPED.glob("*.j2"))}
BLOCKS = (
    "identity",
    "memory",
    "memoryBacking",
    "vcpu",
    "cputune",
    "numatune",
    "os",
    "features",
    "cpu",
    "clock",
    "lifecycle",
    "devices",
)
FIELDS = ("name", "vcpus", "memory_kib", "cells", "vcpupins", "memnodes", "pages", "uuid", "no_such_field")

# Each construct is a template fragment; several are combined into one block body.
CONSTRUCTS: tuple[str, ...] = (
    "{{ super() }}",
    "  <clock offset='localtime'/>\n",
    "    <watchdog model='i6300esb' action='reset'/>\n",
    "<disk type='file' device='disk'><source file='/img/{{ view.name }}.qcow2'/><target dev='vda'/></disk>",
    "{{ view.name }}",
    "{{ view.name|upper|replace('A', '<') }}",
    "{{ view.vcpus * 2 }}",
    "{{ view.no_such_field }}",
    "{{ nothing.at.all }}",
    "{{ view.cells[99] }}",
    "{{ view.name|no_such_filter }}",
    "{% if view.vcpus is no_such_test %}x{% endif %}",
    "{% include '_cpu.xml.j2' %}",
    "{% include '_no_such_partial.xml.j2' %}",
    "{% include 'domain.xml.j2' %}",
    "{% for pin in view.vcpupins %}<vcpupin vcpu='{{ pin.id }}' cpuset='{{ pin.cpuset }}'/>{% endfor %}",
    "{% for i in range(10**9) %}x{% endfor %}",
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "{% for i in range(99999) %}{{ i }}{% endfor %}",
    "{% set xs = [1] %}{% for x in xs %}{{ xs.append(x) }}{% endfor %}",
    "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
    "{% macro m(n) %}{{ m(n) }}{% endmacro %}{{ m(1) }}",
    "{% macro m(n) %}<x n='{{ n }}'/>{% endmacro %}{{ m(view.vcpus) }}",
    "{% for x in [1, 2] recursive %}{{ loop(range(99999)) }}{% endfor %}",
    "{{ 10 ** (10 ** 10) }}",
    "{{ 'x' * 10**10 }}",
    "{{ 'x'.ljust(10**10) }}",
    "{{ 'x'|center(1000000000) }}",
    "{{ [1]|batch(1000000000, 0)|list|length }}",
    "{{ [1]|slice(100000000)|list|length }}",
    "{{ (range(99999)|list * 40)|sort|length }}",
    "{{ '%*d' % (1000000000, 1) }}",
    "{{ '{:1000000000}'.format(1) }}",
    "{{ ''.__class__.__mro__ }}",
    "{{ view.__init__.__globals__ }}",
    "{{ cycler(1, 2).next() }}{{ dict(a=1)|tojson }}",
    "{{ lipsum(10) }}",
    "{{ 1 // 0 }}",
    "{{ range(3)|sum(start='x') }}",
    "{{ '<&>\"' }}{{ '<b>'|safe }}",
    "</domain>",
    "<domain>",
    "{% raw %}{{ x }}{% endraw %}",
    "{# comment #}",
    "{% endblock %}",
    "{% block devices %}{% endblock %}",
    "{% extends 'domain.xml.j2' %}",
    "{{",
    "{% if %}",
    "{% for %}",
    "\x00\ufffe",
)
_CONSTRUCT = st.sampled_from(CONSTRUCTS)
_BODY = st.lists(_CONSTRUCT, min_size=1, max_size=3).map("".join)
_FIELD = st.sampled_from(FIELDS)
_TOKENS = ("{{", "}}", "{%", "%}", "{#", "#}", "endblock", "endfor", "endif", "super()", "view.", "'", "<", ">")
_TOKEN = st.sampled_from(_TOKENS)


@st.composite
def override_templates(draw: st.DrawFn) -> str:
    """``{% extends "domain.xml.j2" %}`` (or the ``vnuma/`` name) overriding 1-3 blocks with drawn bodies."""
    parent = draw(st.sampled_from(["domain.xml.j2", "domain.xml.j2", "vnuma/domain.xml.j2"]))
    blocks = draw(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=3, unique=True))
    parts = [f'{{% extends "{parent}" %}}\n']
    for block in blocks:
        parts.append(f"{{% block {block} %}}\n{draw(_BODY)}\n{{% endblock %}}\n")
    return "".join(parts)


def _token_edit(draw: st.DrawFn, text: str) -> str:
    token = draw(_TOKEN)
    at = text.find(token, draw(st.integers(0, max(len(text) - 1, 0))))
    action = draw(st.sampled_from(["drop", "double", "swap", "field"]))
    if action == "field":
        old = "view." + draw(_FIELD)
        return text.replace("view.name", old, 1) if "view.name" in text else text + "{{ " + old + " }}"
    if at < 0:
        return text + token
    end = at + len(token)
    if action == "drop":
        return text[:at] + text[end:]
    if action == "double":
        return text[:end] + token + text[end:]
    return text[:at] + draw(_TOKEN) + text[end:]


@st.composite
def mutated_templates(draw: st.DrawFn) -> tuple[str, bytes]:
    """(name, file content): a shipped template after 1-3 token-level or byte-level edits (maybe not UTF-8)."""
    name = draw(st.sampled_from(sorted(SHIPPED_TEXT)))
    data = SHIPPED_TEXT[name].encode("utf-8")
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            data = _token_edit(draw, data.decode("utf-8", errors="surrogateescape")).encode(
                "utf-8", errors="surrogateescape"
            )
        else:
            data = draw(byte_mutated(data))
    return name, data


hostile_templates: st.SearchStrategy[str] = _BODY.map(lambda body: f"<domain type='kvm'>\n{body}\n</domain>\n")
