"""The manual's shell examples: read by sybil, run on a scratch inventory, one page at a time.

The conventions (docs/writing.md explains them to writers):

- A fenced ``sh`` block is run, line by line, in page order; each page starts on a fresh inventory
  (``VNUMA_DB`` in a temporary directory, which is also the working directory and holds the stand-in
  files of :data:`STAND_INS`). A line continued with ``\\`` is one command; blank and comment lines are
  skipped.
- A line ``vnuma ARGS`` without shell syntax runs in this process (typer's CliRunner); any other line
  (a pipe, a redirection, ``$VAR``, another program) runs under ``bash -o pipefail`` with ``vnuma`` on
  ``PATH``.
- Each command must exit 0, or the code its comment names: ``vnuma place t --gpus 64   # exit 5: ...``.
- ``<!-- norun: REASON -->`` before a block: the block is not run (a remote host, a long-running
  service, root on a real host), but every ``vnuma ...`` command in it is parsed: ``vnuma ARGS --help``
  must exit 0, so an option that stops existing fails there too.
- ``<!-- file: NAME -->`` before a fenced block (any language): its text is written to ``NAME`` in the
  working directory, for the examples after it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, FencedCodeBlockLexer
from typer.testing import CliRunner

from vnuma.cli import app

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# The files the examples name, and what stands in for each here (copied into every page's directory).
STAND_INS = {
    "caps.xml": "vnuma/data/demo-capabilities.xml",  # `virsh capabilities` of a host: the demo server's
    "node.xml": "vnuma/data/demo-node.xml",  # a libvirt test-driver node file: the demo's
    "gpus.xml": "tests/data/nodedev/gpu-h100.xml",  # `virsh nodedev-dumpxml` of GPUs
    "nics.xml": "tests/data/nodedev/nic-cx7.xml",  # ... and of NICs
    "vfs.xml": "tests/data/nodedev/gpu-sriov-vfs.xml",  # a GPU whose SR-IOV VFs offer vGPU types
    "lstopo.xml": "tests/data/hwloc/2pkg-snc-smt-cxl-gpu.xml",  # `lstopo --of xml`: SNC, CXL and a GPU
    "hmat-caps.xml": "tests/data/capabilities/x86-hmat-memonly.xml",  # capabilities with HMAT, memory-only cells
    "resctrl-caps.xml": "tests/data/capabilities/x86-2cell-smt-resctrl.xml",  # capabilities with CAT/MBA
    "first.txt": "tests/data/domstats/rdt-first.txt",  # two `virsh domstats --memory --cpu-total` readings
    "second.txt": "tests/data/domstats/rdt-second.txt",
    "lgip.txt": "tests/data/nvidia-smi/h100-sxm5-80gb-lgip.txt",  # `nvidia-smi mig -lgip` and `-lgipp`
    "lgipp.txt": "tests/data/nvidia-smi/h100-sxm5-80gb-lgipp.txt",
    "my-domain.xml.j2": "tests/data/templates/disk-and-network.xml.j2",  # an operator template
    "recorded": "tests/data/watch/fleet",  # a directory of recorded rounds for `vnuma watch --domstats-dir`
}

_SHELL = re.compile(r"[|&;<>()$`*?]")  # shell syntax: run the line under bash
_EXPECT = re.compile(r"#\s*exit (\d+)\b")


@dataclass
class Outcome:
    """What a page's examples did: commands run, commands only parsed, and why each block was not run."""

    ran: int = 0
    parsed: int = 0
    not_run: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class Page:
    """One page's scratch directory and environment, and the directive waiting for the next block."""

    path: Path
    home: Path
    env: dict[str, str]
    pending: tuple[str, str] | None = None
    outcome: Outcome = field(default_factory=Outcome)


@dataclass(frozen=True)
class Block:
    language: str
    text: str


@dataclass(frozen=True)
class Directive:
    name: str
    argument: str


def commands(text: str) -> list[tuple[int, str]]:
    """The block's commands with their line offsets: ``\\`` continuations joined, blank and comment lines out."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for offset, line in enumerate(text.splitlines()):
        if not pending:
            start = offset
        if line.rstrip().endswith("\\"):
            pending.append(line.rstrip()[:-1])
            continue
        whole = " ".join([*pending, line]).strip()
        if not _complete(whole):  # a quoted string goes on on the next line
            pending.append(line + "\n")
            continue
        pending = []
        if whole and not whole.startswith("#"):
            out.append((start, whole))
    return out


def _complete(command: str) -> bool:
    try:
        shlex.split(command, comments=True)
    except ValueError:  # "No closing quotation"
        return False
    return True


def expected_exit(command: str) -> int:
    found = _EXPECT.search(command)
    return int(found.group(1)) if found else 0


def _words(command: str) -> list[str] | None:
    """``vnuma ARGS`` as its words when the line needs no shell, else None."""
    code = command.split(" #", 1)[0]
    if _SHELL.search(code):
        return None
    words = shlex.split(code)
    return words if words and words[0] == "vnuma" else None


def vnuma_invocations(command: str) -> list[list[str]]:
    """Every ``vnuma ...`` command a shell line runs (env assignments before it dropped), as argument lists."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.commenters = "#"
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    for token in lexer:
        if token and set(token) <= set("|&;()<>"):
            segments.append([])
        else:
            segments[-1].append(token)
    found = []
    for words in segments:
        while words and re.fullmatch(r"\w+=.*", words[0]):
            words = words[1:]
        if words and words[0] == "vnuma":
            found.append(words[1:])
    return found


def _in_process(page: Page, words: list[str]) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, words, prog_name="vnuma", env=page.env)
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return 70, res.stdout, f"{res.stderr}{type(res.exception).__name__}: {res.exception}"
    return res.exit_code, res.stdout, res.stderr


def _in_bash(page: Page, command: str) -> tuple[int, str, str]:
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True,
                          cwd=page.home, env=page.env, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def run_block(example: Example) -> str | None:
    """Run (or, after a norun directive, parse) the commands of a fenced block; the failure's text, or None."""
    page: Page = example.namespace["page"]
    block: Block = example.parsed
    pending, page.pending = page.pending, None
    if pending and pending[0] == "file":
        (page.home / pending[1]).write_text(block.text)
        return None
    if block.language != "sh":
        return None
    if pending and pending[0] == "norun":
        page.outcome.not_run.append((example.line, pending[1]))
        return _parse_only(page, example, block)
    for offset, command in commands(block.text):
        words = _words(command)
        code, out, err = _in_process(page, words[1:]) if words else _in_bash(page, command)
        page.outcome.ran += 1
        want = expected_exit(command)
        if code != want or ("Traceback" in err and "--debug" not in command):  # a traceback is a bug
            return (f"{page.path.name}:{example.line + 1 + offset}: `{command}` exited {code}, expected {want}\n"
                    f"--- stdout\n{out[-3000:]}\n--- stderr\n{err[-3000:]}")
    return None


def _parse_only(page: Page, example: Example, block: Block) -> str | None:
    for offset, command in commands(block.text):
        for words in vnuma_invocations(command):
            code, out, err = _in_process(page, [*words, "--help"])
            page.outcome.parsed += 1
            if code != 0:
                return (f"{page.path.name}:{example.line + 1 + offset}: `vnuma {' '.join(words)}` does not parse "
                        f"(exit {code}): {out[-1000:]}{err[-1000:]}")
    return None


def note_directive(example: Example) -> str | None:
    page: Page = example.namespace["page"]
    directive: Directive = example.parsed
    if not directive.argument:
        return f"{page.path.name}:{example.line}: `<!-- {directive.name}: ... -->` needs its argument"
    page.pending = (directive.name, directive.argument)
    return None


class _Blocks:
    """Every fenced block, whatever its language."""

    lexer = FencedCodeBlockLexer(language=r"[\w-]*")

    def __call__(self, document: Document) -> list[Region]:
        regions = []
        for region in self.lexer(document):
            region.parsed = Block(region.lexemes["language"], str(region.lexemes["source"]))
            region.evaluator = run_block
            regions.append(region)
        return regions


class _Directives:
    """``<!-- norun: REASON -->`` and ``<!-- file: NAME -->``."""

    lexer = DirectiveInHTMLCommentLexer(directive="norun|file", arguments=".*?")

    def __call__(self, document: Document) -> list[Region]:
        regions = []
        for region in self.lexer(document):
            region.parsed = Directive(region.lexemes["directive"], (region.lexemes["arguments"] or "").strip())
            region.evaluator = note_directive
            regions.append(region)
        return regions


SYBIL = Sybil(parsers=[_Blocks(), _Directives()], path=str(REPO), patterns=["README.md", "docs/*.md"])


def run_page(path: Path, home: Path) -> Outcome:
    """Run every example of ``path`` in order in ``home`` (a fresh directory); raises at the first failure."""
    for name, source in STAND_INS.items():
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, home / name)
        else:
            (home / name).write_bytes((REPO / source).read_bytes())
    bin_dir = home / ".bin"
    bin_dir.mkdir()
    (bin_dir / "vnuma").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vnuma.cli "$@"\n')
    (bin_dir / "vnuma").chmod(0o755)
    (home / "examples").symlink_to(REPO / "examples")
    env = {
        **os.environ,
        "VNUMA_DB": str(home / "inventory.db"),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    page = Page(path, home, env)
    code, out, err = _in_process(page, ["db", "upgrade"])
    assert code == 0, out + err
    document = SYBIL.parse(path)
    document.namespace["page"] = page
    for example in document:
        example.evaluate()
    assert page.pending is None, f"{path.name}: a directive at the end of the page has no block after it"
    return page.outcome
