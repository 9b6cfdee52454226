"""Progress bars (rich, on stderr) for commands that can run for more than a second.

A bar is drawn only while someone watches: stdout and stderr are both
terminals and the command does not print ``--json``. Otherwise
:func:`bar` yields a :class:`Plain` reporter that draws nothing, so
scripts, pipes and CI logs see exactly what they saw before. Lines a
command reports while it works (:meth:`Plain.note`) go to stderr either
way, above the bar when there is one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from vnuma.services.progress import Silent


def watching(as_json: bool) -> bool:
    """True when a person sees the output: both streams are terminals and it is not JSON."""
    return not as_json and sys.stdout.isatty() and sys.stderr.isatty()


class Plain(Silent):
    """No bar: progress is dropped, notes are stderr lines."""

    def note(self, line: str) -> None:
        typer.echo(line, err=True)


class Bar(Plain):
    """A rich progress bar: description, bar, done/total, failures, elapsed time."""

    def __init__(self, progress: Any, what: str) -> None:
        self._progress = progress
        self._what = what
        self._task: Any = None
        self._failed = 0

    def start(self, total: int | None) -> None:
        self._task = self._progress.add_task(self._what, total=total, failed="")

    def advance(self, label: str = "", *, failed: bool = False, n: int = 1) -> None:
        if self._task is None:
            self.start(None)
        self._failed += failed
        self._progress.update(
            self._task, advance=n, description=f"{self._what} {label}".rstrip(),
            failed=f"{self._failed} failed" if self._failed else "",
        )

    def note(self, line: str) -> None:
        self._progress.console.print(line, markup=False, highlight=False, soft_wrap=True)


@contextmanager
def bar(what: str, *, as_json: bool = False) -> Iterator[Plain]:
    """A :class:`Bar` while someone watches (:func:`watching`), else a :class:`Plain`; removed when done."""
    if not watching(as_json):
        yield Plain()
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[failed]}"), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )
    with progress:
        yield Bar(progress, what)
