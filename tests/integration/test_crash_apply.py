"""``vnuma place``/``apply``/``vm undefine``/``vm release --undefine`` killed with SIGKILL against a real libvirtd.

Seeded trials on ``qemu:///system`` (host ``local``, this machine: one NUMA
node, 2 CPUs) with TCG guests of 1 vCPU, 64 or 128 MiB, 4 KiB pages, so at
most two VMs exist at a time. Each trial picks a command for a VM from its
state (place a new VM; ``apply`` a placed/defined/stopped one, with
``--start`` now and then; ``vm undefine``; ``vm release --undefine``; a
running VM is always the next one torn down, so TCG guests do not eat the
CPUs for long) and runs it in a child forked from
``tests.concurrency.forkserver`` (vnuma already imported), killed with
SIGKILL in one of three ways: not at all (one trial in five, to check the
uninterrupted path; three in five for ``place``, which
tests/concurrency/test_sigkill.py puts through ~100 kill trials per backend and which, killed,
leaves nothing for the libvirt commands to act on), after a seeded delay
spread over the command's measured duration (each command kind, and
teardowns of running guests apart, is timed unkilled first), or — for
commands that change libvirt — the moment libvirt shows the change (the
domain appears, runs, or disappears), which lands the kill in the window
between libvirt's change and the inventory's write that delays spread over
a few hundred ms rarely hit. The choices are seeded; which state a kill
leaves depends on timing, so later trials' paths vary from run to run.

After every trial: wait until libvirtd has finished what the dead client
asked of it (libvirtd completes an RPC whose client died: a start goes on,
a destroy goes on), then ``vnuma reconcile --yes --json`` must settle every
finding (exit 0) and ``vnuma reconcile --json`` must then report no drift
(exit 0); the claims must pass the audit of
``tests.concurrency.consistency``; every domain with this test's prefix is
a VM of the inventory, and libvirt's state is the inventory's (placed: no
domain; defined/stopped: defined, not running; running: running). The VM's
end state must be one its command can leave: the state before, the state
after, or a step in between that libvirt really went through (``defined``
for ``apply --start`` killed before the start; ``stopped`` for a teardown
of a running guest killed between destroy and undefine). A trial whose
command was not killed must exit 0 at the state after and leave reconcile
nothing to do.

One outcome is neither before nor after, and is accepted because it is
reconcile's documented rule: ``vm undefine`` killed after libvirt's
undefine but before the inventory's write leaves a ``defined`` VM without
a domain, which reconcile reports as ``missing`` and settles by freeing the
VM's claims, so the VM leaves the inventory instead of going back to
``placed``. The test counts these (``forgotten``).

Domains of other users of the daemon are outside the test: reconcile
reports them as ``unknown`` (and then exits 9); the test checks that every
finding is about such a foreign domain in that case, and otherwise exit 0.

Not checked: an ``apply`` killed between libvirt's define and the
inventory's write is settled by reconcile as ``defined``, but how the
domain was rendered (``--domain-type qemu``) is then not recorded, and a
later ``rebalance --apply`` would re-render it with the defaults.

Cost: a trial takes ~0.3-0.5 s (a command ~0.2-0.3 s, settling,
reconciling twice and checking ~0.15 s); a start and the destroy of its
TCG guest take ~2 s more, so ``--start`` is chosen for about one libvirt
command in ten. ``TRIALS`` = 100 (plus 10 calibration runs) took 60-73 s
on this 2-CPU machine, 70-90 s for the whole test.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libvirt
import pytest

from tests.cli.conftest import Cli
from tests.concurrency.consistency import inconsistencies
from tests.concurrency.forkserver import ForkServer
from vnuma.inventory import open_inventory

pytestmark = [pytest.mark.libvirt, pytest.mark.daemon, pytest.mark.slow]

SEED = 20261203
TRIALS = 100
MAX_VMS = 2
TENANT = "crash"
SETTLE_CAP_S = 5.0
ABSENT = None

# Command kinds and the state each leaves when it completes (None: the VM is gone).
AFTER: dict[str, str | None] = {
    "place": "placed", "apply": "defined", "apply-start": "running", "undefine": "placed", "release": ABSENT,
}
# An unkilled calibration sequence (VM, kind, state before) timing every (kind, running before?) the trials use.
CALIBRATION = (
    ("a", "place", None), ("a", "apply", "placed"), ("a", "undefine", "defined"), ("a", "apply-start", "placed"),
    ("a", "undefine", "running"), ("a", "apply", "placed"), ("a", "release", "defined"),
    ("b", "place", None), ("b", "apply-start", "placed"), ("b", "release", "running"),
)


@dataclass(frozen=True)
class Step:
    """One command on one VM: its kind, the VM, and the VM's state before (None: not in the inventory)."""

    kind: str
    vm: str
    before: str | None
    memory_mib: int = 64

    def argv(self) -> list[str]:
        """The command line (after ``--db``)."""
        if self.kind == "place":
            return ["place", TENANT, "--vcpus", "1", "--memory", f"{self.memory_mib}MiB", "--page-size", "4K",
                    "--name", self.vm]
        if self.kind.startswith("apply"):
            return ["apply", self.vm, "--domain-type", "qemu", *(["--start"] if self.kind == "apply-start" else [])]
        if self.kind == "undefine":
            return ["vm", "undefine", self.vm]
        return ["vm", "release", self.vm, "--undefine"]


@dataclass
class Tally:
    """What the trials did and found."""

    commands: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    killed: Counter[str] = field(default_factory=Counter)
    settled: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    forgotten: int = 0
    settle_timeouts: int = 0


class Daemon:
    """This test's view of libvirtd: its domains by prefix, their states, and when libvirtd is idle."""

    def __init__(self, uri: str, prefix: str) -> None:
        self.conn = libvirt.open(uri)
        self.prefix = prefix

    def states(self) -> dict[str, tuple[int, int]]:
        """(state, reason) of every domain with the prefix."""
        out = {}
        for dom in self.conn.listAllDomains(0):
            if dom.name().startswith(self.prefix):
                try:
                    out[dom.name()] = tuple(dom.state())
                except libvirt.libvirtError:  # undefined between the listing and the read
                    continue
        return out

    def coarse(self, name: str) -> str:
        """missing / running (or starting) / stopped, for the kill triggers."""
        try:
            active = self.conn.lookupByName(name).isActive()
        except libvirt.libvirtError:
            return "missing"
        return "running" if active else "stopped"

    def _idle(self) -> bool:
        info = subprocess.run(["virt-admin", "srv-threadpool-info", "libvirtd"], capture_output=True, text=True,
                              check=True, timeout=30).stdout
        fields = {k.strip(): int(v) for k, v in (line.split(":") for line in info.splitlines() if ":" in line)}
        return fields["jobQueueDepth"] == 0 and fields["freeWorkers"] == fields["nWorkers"]

    def settle(self) -> bool:
        """Wait until libvirtd has finished what a killed client asked (False: gave up after SETTLE_CAP_S).

        A start shows as paused (starting up) and occupies a worker; a destroy holds the domain's lock,
        so reading its state waits for it; define/undefine occupy a worker for a few ms.
        """
        deadline = time.monotonic() + SETTLE_CAP_S
        quiet = 0
        while time.monotonic() < deadline:
            starting = any(s == libvirt.VIR_DOMAIN_PAUSED for s, _ in self.states().values())
            quiet = quiet + 1 if not starting and self._idle() else 0
            if quiet >= 2:
                return True
            time.sleep(0.02)
        return False

    def cleanup(self) -> None:
        """Destroy and undefine every domain with the prefix, then close the connection."""
        try:
            for dom in self.conn.listAllDomains(0):
                if dom.name().startswith(self.prefix):
                    if dom.isActive():
                        dom.destroy()
                    dom.undefine()
        finally:
            self.conn.close()


def _inventory(url: str) -> dict[str, str]:
    with open_inventory(url) as inv:
        return {p.vm: str(state) for p, state in inv.list_vms(host="local")}


def _choose(rng: random.Random, vms: dict[str, str], name: str) -> Step:
    """The next command: tear a running VM down, place a new VM, or act on one by its state."""
    running = sorted(vm for vm, state in vms.items() if state == "running")
    if running:
        return Step(rng.choice(("undefine", "release")), running[0], "running")
    if len(vms) < MAX_VMS and (not vms or rng.random() < 0.3):
        return Step("place", name, None, rng.choice((64, 128)))
    vm = rng.choice(sorted(vms))
    state = vms[vm]
    if state == "placed":
        kind = rng.choices(("apply", "apply-start", "release"), (72, 9, 19))[0]
    else:
        kind = rng.choices(("undefine", "release", "apply", "apply-start"), (34, 29, 28, 9))[0]
    return Step(kind, vm, state)


def _trigger(daemon: Daemon, step: Step) -> Callable[[], bool] | None:
    """A condition that is true once libvirt shows the step's change; None when nothing shows."""
    if step.kind == "apply" and step.before == "placed":
        return lambda: daemon.coarse(step.vm) != "missing"
    if step.kind == "apply-start":
        return lambda: daemon.coarse(step.vm) == "running"
    if step.kind in ("undefine", "release") and step.before == "running":
        return lambda: daemon.coarse(step.vm) != "running"
    if step.kind in ("undefine", "release") and step.before in ("defined", "stopped"):
        return lambda: daemon.coarse(step.vm) == "missing"
    return None


def _run(
    server: ForkServer, argv: list[str], err: Path, kill: Callable[[float], bool] | None
) -> tuple[dict[str, int], float]:
    """Run a command in a forked child, SIGKILLed the first time ``kill(elapsed_s)`` is true; status, seconds."""
    start = time.monotonic()
    pid = server.start(argv, err)
    while kill is not None and not server.finished(pid):
        if kill(time.monotonic() - start):
            os.kill(pid, signal.SIGKILL)  # still the server's unreaped child: the pid cannot be reused
            break
        time.sleep(0.0005)
    status = server.reap()
    return status, time.monotonic() - start


def _killer(rng: random.Random, daemon: Daemon, step: Step, durations: dict[tuple[str, bool], float],
            tally: Tally) -> Callable[[float], bool] | None:
    """How this trial is killed: not at all, at a seeded delay, or when libvirt shows the change."""
    trigger = _trigger(daemon, step)
    roll = rng.random()
    # place is killed less often here: tests/concurrency/test_sigkill.py runs ~100 kill trials of it per backend, and a
    # killed place leaves nothing for the libvirt commands to act on.
    if roll < (0.6 if step.kind == "place" else 0.2):
        tally.modes["unkilled"] += 1
        return None
    if trigger is not None and roll < 0.65:
        tally.modes["on-libvirt-change"] += 1
        return lambda _elapsed: trigger()
    tally.modes["delay"] += 1
    delay = rng.uniform(0, 1.2 * durations[(step.kind, step.before == "running")])
    return lambda elapsed: elapsed >= delay


def _reconcile(cli: Cli, prefix: str) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]]]:
    """``reconcile --yes --json``: exit code, this test's findings, foreign findings (other users' domains)."""
    res = cli("reconcile", "--yes", "--json")
    findings = [f for h in res.json()["hosts"] for f in h["findings"]]
    ours = [f for f in findings if f["name"].startswith(prefix)]
    foreign = [f for f in findings if not f["name"].startswith(prefix)]
    assert all(f["drift"] == "unknown" for f in foreign), foreign
    return res.exit_code, ours, foreign


def _agree(cli: Cli, daemon: Daemon, url: str, prefix: str) -> dict[str, str]:
    """Reconcile reports no drift, the claims audit is clean, libvirt's state is the inventory's."""
    res = cli("reconcile", "--json")
    findings = [f for h in res.json()["hosts"] for f in h["findings"]]
    assert [f for f in findings if f["name"].startswith(prefix)] == []
    assert res.exit_code == (9 if findings else 0), res.stderr
    assert inconsistencies(url) == []
    vms = _inventory(url)
    domains = daemon.states()
    assert set(domains) <= set(vms), f"domains unknown to the inventory: {sorted(set(domains) - set(vms))}"
    expected = {"placed": None, "defined": libvirt.VIR_DOMAIN_SHUTOFF, "stopped": libvirt.VIR_DOMAIN_SHUTOFF,
                "running": libvirt.VIR_DOMAIN_RUNNING}
    for vm, state in vms.items():
        seen = domains[vm][0] if vm in domains else None
        assert seen == expected[state], f"{vm}: inventory says {state}, libvirt state {domains.get(vm)}"
    return vms


def _allowed(step: Step) -> set[str | None]:
    """End states a killed ``step`` may leave after reconcile (see the module docstring)."""
    ends: set[str | None] = {step.before, AFTER[step.kind]}
    if step.kind == "apply-start":
        ends.add("defined")
    if step.kind in ("undefine", "release") and step.before == "running":
        ends.add("stopped")
    if step.kind == "undefine" and step.before != "placed":
        ends.add(ABSENT)  # reconcile frees a `defined` VM whose domain is gone
    return ends


def _trial(server: ForkServer, cli: Cli, daemon: Daemon, step: Step, kill: Callable[[float], bool] | None,
           tally: Tally, err: Path) -> float:
    """One trial, checked; the command's duration."""
    url = f"sqlite:///{cli.db}"
    status, seconds = _run(server, [*cli.options, *step.argv()], err, kill)
    tally.commands[step.kind] += 1
    if not daemon.settle():
        tally.settle_timeouts += 1
    code, ours, foreign = _reconcile(cli, daemon.prefix)
    assert all(f["outcome"] == "done" for f in ours), ours
    assert code == (9 if foreign else 0)
    end = _agree(cli, daemon, url, daemon.prefix).get(step.vm)
    if "exit" in status:
        assert status["exit"] == 0, f"{step}: exit {status['exit']}: {err.read_text()}"
        assert ours == [], f"{step} completed, yet reconcile found {ours}"
        assert end == AFTER[step.kind], step
    else:
        tally.killed[step.kind] += 1
        assert end in _allowed(step), f"{step} killed: ended {end}; reconcile: {ours}"
    tally.settled[step.kind] += bool(ours)
    tally.forgotten += step.kind == "undefine" and end is ABSENT and step.before != "placed"
    tally.outcomes[f"{step.kind} {step.before}->{end}"] += 1
    return seconds


@pytest.fixture
def crash_env(libvirtd: str, tmp_path: Path) -> Iterator[tuple[Cli, Daemon, ForkServer]]:
    cli = Cli(tmp_path / "inventory.db")
    cli.ok("host", "add", "local", "--uri", libvirtd)
    cli.ok("tenant", "create", TENANT)
    daemon = Daemon(libvirtd, f"vcx{os.getpid()}-")
    server = ForkServer()
    try:
        yield cli, daemon, server
    finally:
        server.close()
        daemon.cleanup()


def test_sigkill_then_reconcile_leaves_inventory_and_libvirt_in_agreement(
    crash_env: tuple[Cli, Daemon, ForkServer], tmp_path: Path
) -> None:
    cli, daemon, server = crash_env
    rng = random.Random(SEED)
    tally, err = Tally(), tmp_path / "err"
    durations: dict[tuple[str, bool], float] = {}
    for vm, kind, before in CALIBRATION:  # unkilled, and checked like any trial
        step = Step(kind, f"{daemon.prefix}cal-{vm}", before)
        durations[(kind, before == "running")] = _trial(server, cli, daemon, step, None, tally, err)
    started = time.perf_counter()
    for trial in range(TRIALS):
        step = _choose(rng, _inventory(f"sqlite:///{cli.db}"), f"{daemon.prefix}{trial:03d}")
        _trial(server, cli, daemon, step, _killer(rng, daemon, step, durations, tally), tally, err)
    print(f"\n{TRIALS} trials in {time.perf_counter() - started:.1f} s; commands (with {len(CALIBRATION)} "
          f"unkilled calibration runs) {dict(tally.commands)}; "
          f"modes {dict(tally.modes)}; killed {dict(tally.killed)}; settled by reconcile {dict(tally.settled)}; "
          f"forgotten {tally.forgotten}; settle timeouts {tally.settle_timeouts}\n"
          + "\n".join(f"  {k}: {n}" for k, n in sorted(tally.outcomes.items())))
    assert sum(tally.killed.values()) >= TRIALS // 3, tally.killed
    assert sum(tally.settled.values()) >= 5, f"few kills fell between libvirt and the inventory: {tally.settled}"
