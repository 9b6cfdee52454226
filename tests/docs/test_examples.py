"""Every shell example of the README and the manual runs (tests/docs/examples.py: how), each page on a fresh
inventory; an example that cannot run here says why (``<!-- norun: REASON -->``) and is still parsed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.examples import PAGES, REPO, run_page


@pytest.mark.libvirt
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_example_on_the_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    outcome = run_page(page, tmp_path)
    for line, reason in outcome.not_run:
        assert len(reason.split()) >= 3, f"{page.name}:{line}: say why the block cannot run here ({reason!r})"


def test_the_readmes_links_lead_to_files_of_the_repository() -> None:
    text = (REPO / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets
    missing = [t for t in targets if "://" not in t and not (REPO / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


# Repository paths the manual names; a Jinja template name that looks like one is not a file.
_PATH = re.compile(r"(?<![\w/.:-])((?:vnuma|tests|bench|scripts|templates|migrations|examples|docs)/[\w/.-]*\w)")
_NOT_PATHS = {"vnuma/domain.xml.j2"}  # the shipped template as an operator's domain.xml.j2 extends it


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_file_the_page_names_exists(page: Path) -> None:
    named = set(_PATH.findall(page.read_text())) - _NOT_PATHS
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert not missing, f"{page.name} names files the repository does not have: {missing}"
