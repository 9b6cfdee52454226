"""The corpus test's shared inventory and its summary line (files per outcome), printed after every run."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import Cli

OUTCOMES = pytest.StashKey[dict[str, tuple[str, str]]]()
"""File -> (outcome, reason): one of :data:`ORDER`; the reason is the refusal's error line (with where it
was refused), the parts left out, or what is wrong."""

ORDER = ("ok", "partly imported", "refused with a reason", "imported wrong")
"""The outcomes, in the order printed; "imported wrong" (a difference from the file that vnuma does not
name, allowed only for the files the corpus test lists as still wrong today) is printed when there is one."""


@pytest.fixture(scope="session")
def corpus_cli(tmp_path_factory: pytest.TempPathFactory) -> Cli:
    """One inventory for the whole corpus (each file is a host of its own, placed on with ``--host``)."""
    cli = Cli(Path(tmp_path_factory.mktemp("corpus")) / "inventory.db")
    cli.ok("tenant", "create", "corpus")
    return cli


@pytest.fixture
def record_outcome(request: pytest.FixtureRequest) -> Callable[[str, str, str], None]:
    """``record_outcome(file, outcome, reason)`` keeps a file's outcome for the summary."""
    outcomes = request.config.stash.setdefault(OUTCOMES, {})

    def record(file: str, outcome: str, reason: str) -> None:
        assert outcome in ORDER, outcome
        outcomes[file] = (outcome, reason)

    return record


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    outcomes = config.stash.get(OUTCOMES, {})
    if not outcomes:
        return
    counts = Counter(outcome for outcome, _ in outcomes.values())
    at = Counter(reason.split(":", 1)[0] for outcome, reason in outcomes.values() if outcome == ORDER[2])
    detail = {ORDER[2]: f" (at {', '.join(f'{where}: {n}' for where, n in sorted(at.items()))})" if at else ""}
    shown = [f"{counts[o]} {o}{detail.get(o, '')}" for o in ORDER if o != ORDER[3] or counts[o]]
    terminalreporter.write_line(f"topology corpus: {len(outcomes)} files: " + ", ".join(shown))
    if config.option.verbose > 0:
        for file, (outcome, reason) in sorted(outcomes.items()):
            if outcome != ORDER[0]:
                terminalreporter.write_line(f"  {file}: {outcome}: {reason}")
