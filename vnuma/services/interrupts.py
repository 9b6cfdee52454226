"""Ctrl-C (SIGINT) that tells the truth: a command that has made its change finishes; one stopped says what it did.

The ``vnuma`` process (:func:`own_process`, called by ``vnuma.cli.main``)
handles SIGINT in two ways:

* **Finished once committed.** Around the commit that makes the change a
  command was asked for (:func:`finishing`: ``place``'s claim) SIGINT is only
  noted. When the commit happens the command goes on, prints its result,
  exits 0 and says on stderr that the interrupt came after the change
  (:func:`late`); when it does not, the noted interrupt stops the command
  right there, as any other. Once a command has printed its result
  (:func:`completed`) a SIGINT is only noted too: the process's clean-up
  cannot turn a finished command into an interrupted one.
* **Stopped, and saying what was done.** Anywhere else SIGINT stops the
  command (KeyboardInterrupt). The CLI then says exactly what it had
  committed (:func:`what_was_done`, from its invocation's rows in the audit
  log, which commit with the changes they log), e.g. "interrupted after
  cordoning host h1; nothing moved" or "interrupted; nothing was changed",
  records the same words as the invocation's outcome and exits 130. A
  journaled run stopped so is stopped in its journal first
  (:mod:`.rebalance_apply`: closed when none of its steps began, else left
  for --resume or --abort), and the words say which.

In a library, a test runner (CliRunner) or the API server's threads nothing
here changes how SIGINT is handled.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vnuma.inventory.schema import RunStatus, StepStatus
from vnuma.services import Settings

if TYPE_CHECKING:
    from vnuma.inventory.journal import RunRecord


@dataclass
class _State:
    owned: bool = False
    holding: bool = False
    noted: int = 0


_state = _State()


def own_process() -> None:
    """This process is the ``vnuma`` command: its SIGINT handling is ours to change."""
    _state.owned = True


def _note(_signum: int, _frame: object) -> None:
    _state.noted += 1


def _hold() -> Callable[..., Any] | int | None:
    """Note SIGINT instead of raising KeyboardInterrupt (in the owned process's main thread): the handler
    it replaced, None when nothing was changed."""
    if not _state.owned or _state.holding or threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.signal(signal.SIGINT, _note)
    _state.holding = True
    return previous


def _release(previous: Callable[..., Any] | int | None) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)
        _state.holding = False


@contextmanager
def finishing() -> Iterator[None]:
    """Around a commit after which the command must finish: SIGINT is only noted from here on, for the rest
    of the command. When the block raises (nothing committed), a noted SIGINT is raised as KeyboardInterrupt
    instead of the block's error: the command was interrupted before it changed anything."""
    previous = _hold()
    try:
        yield
    except BaseException as err:
        _release(previous)
        if previous is not None and _state.noted:
            _state.noted = 0
            raise KeyboardInterrupt from err
        raise


def completed() -> None:
    """The command's work and output are done: from now on SIGINT is only noted."""
    _hold()


@contextmanager
def held() -> Iterator[None]:
    """SIGINT only noted inside (while the CLI writes down what an interrupted command did)."""
    previous = _hold()
    try:
        yield
    finally:
        _release(previous)


def late() -> bool:
    """Whether a SIGINT came while the command went on to finish (it finished)."""
    return _state.noted > 0


@dataclass(frozen=True, slots=True)
class Said:
    """What an interrupted command tells: ``message`` (also its audit outcome) and a ``hint`` on going on."""

    message: str
    hint: str | None = None


_PHRASES = {
    "claim": "placing VM {vm} on host {host}",
    "release": "releasing VM {vm}",
    "host-cordon": "cordoning host {host}",
    "host-uncordon": "uncordoning host {host}",
    "vm-defined": "defining VM {vm}",
    "vm-state": "recording VM {vm} as {state}",
    "embedded-domains": "leaving domain {domain} {kept} on host {host}",
}
_RUN_OPS = frozenset({"run-open", "step-start", "step-done", "step-undo", "step-undone", "run-fail", "run-resume",
                      "run-close"})
_IN_STEPS = frozenset({"embedded-domains", "vm-state", "vm-defined"})
_RESUME = "`vnuma rebalance --resume` finishes it, `vnuma rebalance --abort` rolls it back"


def what_was_done(settings: Settings) -> Said:
    """What the current invocation had committed when SIGINT stopped it, in words (with a word on libvirt
    when the command had opened a hypervisor: it may hold a change the inventory has not recorded)."""
    from vnuma.inventory import audit
    from vnuma.inventory.access import open_access
    from vnuma.services.hypervisors import opened_any

    libvirt_opened = opened_any()
    with open_access(settings.db_url) as access, access.begin(False) as x:
        changes = audit.committed(x, audit.current().id)
    in_run = any(c["op"] in _RUN_OPS for c in changes)  # a run's libvirt changes are its steps'
    phrases = [_phrase(c) for c in changes if c["op"] not in _RUN_OPS and not (in_run and c["op"] in _IN_STEPS)]
    parts = list(dict.fromkeys(p for p in phrases if p))
    runs = _runs(settings, sorted({int(c["run"]) for c in changes if c["op"] in _RUN_OPS and "run" in c}))
    parts += [_run_words(r) for r in runs]
    hints = [_RESUME for r in runs if r.status in (RunStatus.RUNNING, RunStatus.FAILED)]
    if not parts:
        return Said("interrupted; nothing was changed", _LIBVIRT_HINT if libvirt_opened else None)
    moved = any(s.status is not StepStatus.PENDING for r in runs for s in r.steps)
    cordoned = [c["host"] for c in changes if c["op"] == "host-cordon"]
    tail = ""
    if cordoned and not moved:
        tail = "; nothing moved"
        hints.append(f"drain it again (`vnuma host drain {cordoned[-1]}`) or take it back "
                     f"(`vnuma host uncordon {cordoned[-1]}`)")
    if libvirt_opened and not runs:
        hints.append(_LIBVIRT_HINT)
    return Said(f"interrupted after {', '.join(parts)}{tail}", "; ".join(hints) or None)


_LIBVIRT_HINT = "libvirt may hold a change the inventory has not recorded: `vnuma reconcile` shows it"


def _phrase(change: dict[str, Any]) -> str | None:
    template = _PHRASES.get(change["op"])
    try:
        return template.format(**change) if template else _generic(change)
    except KeyError:
        return _generic(change)


def _generic(change: dict[str, Any]) -> str:
    named = [
        f"{k} {','.join(v) if isinstance(v, list) else v}" for k in ("vm", "host", "tenant") if (v := change.get(k))
    ]
    return str(change["op"]) + (f" ({' '.join(named)})" if named else "")


def _runs(settings: Settings, run_ids: list[int]) -> list[RunRecord]:
    if not run_ids:
        return []
    from vnuma.inventory import open_inventory

    with open_inventory(settings.db_url) as inventory:
        return [inventory.get_run(run_id) for run_id in run_ids]


def _run_words(run: RunRecord) -> str:
    """Where a journaled run stands."""
    total = len(run.steps)
    if run.status is RunStatus.DONE:
        return f"carrying out rebalance run {run.id} ({total} move(s))"
    if run.status is RunStatus.ABORTED:
        if all(s.status is StepStatus.PENDING for s in run.steps):
            return f"opening rebalance run {run.id} (closed again: it had begun no move)"
        return f"rebalance run {run.id} (rolled back)"
    done = sum(s.status is StepStatus.DONE for s in run.steps)
    moving = [s.vm for s in run.steps if s.status in (StepStatus.STARTED, StepStatus.UNDOING)]
    half = f", VM {moving[0]} half-way" if moving else ""
    return f"rebalance run {run.id}: {done} of {total} move(s) done{half}; the run is unfinished ({run.status})"
