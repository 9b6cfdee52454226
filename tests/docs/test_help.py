"""The ``--help`` texts pasted into the manual's command pages are today's (cog, tests/docs/cogs.py)."""

from __future__ import annotations

import cogapp

from tests.docs.examples import REPO


def test_the_pasted_help_texts_are_current(capsys) -> None:
    pages = sorted(str(p) for p in (REPO / "docs").glob("*.md") if "[[[cog" in p.read_text())
    assert pages, "no page pastes a --help text"
    status = cogapp.Cog().main(["cog", "--check", "--diff", "-I", str(REPO), *pages])
    assert status == 0, f"a --help text changed: run `cog -r -I . docs/*.md`\n{capsys.readouterr().out}"
