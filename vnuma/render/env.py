"""The Jinja environment domain templates run in: sandboxed, XML-escaped, strict.

Templates are found, in order, in the operator's templates directory
(``VNUMA_TEMPLATES``, passed in by the caller: this module reads no
environment) and then vnuma's shipped ``templates/``. The shipped files are
also reachable as ``vnuma/<name>``, so an operator ``domain.xml.j2`` can
``{% extends "vnuma/domain.xml.j2" %}`` without extending itself. A single
operator file (``--template FILE``) is loaded under its own name and may
extend ``domain.xml.j2``. Environments are cached per (directory, file):
Jinja then keeps compiled templates and reloads files whose mtime changed.

Jinja's sandbox stops templates from reaching Python internals but not from
running forever or filling memory, and an operator's template is user
input. :class:`LimitedSandbox` adds limits to every render (and to
compiling, where Jinja folds constant filter calls):

- steps: each loop iteration and each call a template makes counts one; a
  render may take ``MAX_STEPS`` (a 1,024-vCPU domain takes a few thousand),
  and every 1,024 steps the wall clock is checked against ``MAX_SECONDS``;
- filters count one step, and one per item of an iterator they return;
- ``range()`` stays capped at Jinja's 100,000 items, and ``lipsum()`` (an
  uncounted loop in Python) is not offered;
- ``*`` and ``**`` refuse integers past ``MAX_INT_BITS`` bits and repeated
  sequences past ``MAX_OUTPUT_CHARS`` items (Python would compute
  ``10 ** 10 ** 10`` in one uninterruptible step);
- output, and every captured block or macro result, stops at
  ``MAX_OUTPUT_CHARS`` characters;
- memory: while a template compiles or renders, the process's address space
  limit (``RLIMIT_AS``, Linux) is lowered to its current size plus
  ``MEMORY_HEADROOM_BYTES``, so one huge allocation (``'x'.center(10**10)``,
  ``[s] * n | join``) fails with MemoryError instead of swapping the machine.
  The limit is process-wide for those milliseconds; a thread allocating
  meanwhile could get MemoryError too (vnuma renders on one thread).

Each limit raises :class:`TemplateLimitError` (a Jinja ``SecurityError``),
which the renderer reports as one line naming the template file and line.
What is left: a single C-level operation on up to the memory headroom of
data (sorting 30 million items) can still take seconds.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, ChoiceLoader, Environment, FileSystemLoader, PrefixLoader, StrictUndefined, nodes
from jinja2.environment import Template
from jinja2.exceptions import SecurityError, TemplateNotFound
from jinja2.runtime import Context, LoopContext
from jinja2.sandbox import SandboxedEnvironment

from vnuma.paths import templates_dir as shipped_templates_dir

DEFAULT_TEMPLATE = "domain.xml.j2"
SHIPPED_PREFIX = "vnuma"
OPERATOR_FILE_PREFIX = "operator-file:"

MAX_STEPS = 200_000
MAX_SECONDS = 5.0
MAX_OUTPUT_CHARS = 4 * 1024 * 1024
MAX_INT_BITS = 65_536
MEMORY_HEADROOM_BYTES = 256 * 1024 * 1024


class OperatorFileLoader(BaseLoader):
    """Serves one operator template file under the name ``operator-file:<path>``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = f"{OPERATOR_FILE_PREFIX}{path}"

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        """Return the file's text, its path and an mtime check; TemplateNotFound for other names."""
        if template != self.name:
            raise TemplateNotFound(template)
        try:
            mtime = self.path.stat().st_mtime
            source = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TemplateNotFound(template, f"cannot read template file {self.path}: {err}") from err

        def uptodate() -> bool:
            try:
                return self.path.stat().st_mtime == mtime
            except OSError:
                return False

        return source, str(self.path), uptodate


class TemplateLimitError(SecurityError):
    """A template went past one of the render limits (steps, time, output, integer size, memory)."""


class _Budget:
    """The steps and the deadline of one render."""

    __slots__ = ("deadline", "steps")

    def __init__(self) -> None:
        self.steps = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def step(self) -> None:
        """Count one loop iteration or call.

        Raises:
            TemplateLimitError: past MAX_STEPS, or past the deadline.
        """
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateLimitError(
                f"the template took more than {MAX_STEPS:,} loop iterations and calls (vnuma's limit)"
            )
        if not self.steps & 1023 and time.monotonic() > self.deadline:
            raise TemplateLimitError(f"rendering took longer than {MAX_SECONDS:g} s (vnuma's limit)")


_BUDGET: ContextVar[_Budget | None] = ContextVar("vnuma_template_budget", default=None)


def _step() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.step()


_memory_lock = threading.Lock()
_memory_users = 0
_memory_saved: tuple[int, int] | None = None


def _lower_address_space() -> tuple[int, int] | None:
    """Cap RLIMIT_AS at the current size plus the headroom; the previous limits, None when left alone."""
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as statm:
            size = int(statm.read().split()[0]) * resource.getpagesize()
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + MEMORY_HEADROOM_BYTES
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft != resource.RLIM_INFINITY and soft <= cap:
            return None
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return soft, hard
    except (ImportError, OSError, ValueError, IndexError):  # not Linux, or a limit we may not change
        return None


@contextmanager
def _memory_capped() -> Iterator[None]:
    """Run the body with the address-space cap; nested and concurrent bodies share one cap."""
    global _memory_users, _memory_saved
    with _memory_lock:
        if _memory_users == 0:
            _memory_saved = _lower_address_space()
        _memory_users += 1
    try:
        yield
    finally:
        with _memory_lock:
            _memory_users -= 1
            if _memory_users == 0 and _memory_saved is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_AS, _memory_saved)
                _memory_saved = None


def _out_of_memory(err: MemoryError) -> TemplateLimitError:
    limit = TemplateLimitError(
        f"the template needed more than {MEMORY_HEADROOM_BYTES // 2**20} MiB of memory (vnuma's limit)"
    )
    return limit.with_traceback(err.__traceback__)  # keeps the template frames: the error names the line


class LimitedTemplate(Template):
    """A template whose ``render`` runs under a fresh step budget and the memory cap."""

    def render(self, *args: Any, **kwargs: Any) -> str:
        """Render like Jinja does.

        Raises:
            TemplateLimitError: a limit was reached (MemoryError included).
        """
        token = _BUDGET.set(_Budget())
        try:
            with _memory_capped():
                return super().render(*args, **kwargs)
        except MemoryError as err:
            raise _out_of_memory(err) from None
        finally:
            _BUDGET.reset(token)


def _check_binop(operator: str, left: Any, right: Any) -> None:
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0 and abs(left) > 1:
        bits = right * abs(left).bit_length()
    elif operator == "*" and ints:
        bits = left.bit_length() + right.bit_length()
    else:
        bits = 0
    if bits > MAX_INT_BITS:
        raise TemplateLimitError(f"{operator} would make an integer of about {bits:,} bits (limit {MAX_INT_BITS:,})")
    if operator == "*":
        seq, times = (left, right) if isinstance(right, int) else (right, left)
        sized = isinstance(seq, str | bytes | list | tuple) and isinstance(times, int)
        if sized and len(seq) * times > MAX_OUTPUT_CHARS:
            raise TemplateLimitError(f"* would make {len(seq) * times:,} items (limit {MAX_OUTPUT_CHARS:,})")


class LimitedSandbox(SandboxedEnvironment):
    """Jinja's sandbox plus vnuma's render limits (see the module docstring)."""

    intercepted_binops = frozenset({"*", "**"})
    template_class = LimitedTemplate

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals.pop("lipsum", None)
        self.filters = {name: self._counting(f) for name, f in self.filters.items()}

    def _counting(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as one step, its iterator results (``map``, ``slice``, ``batch``...) a step per item."""

        @functools.wraps(fn)  # keeps Jinja's pass_context/pass_environment marks
        def counting(*args: Any, **kwargs: Any) -> Any:
            _step()
            result = fn(*args, **kwargs)
            return self.counted(result) if isinstance(result, Iterator) else result

        return counting

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        """Parse, then route every ``for`` loop's iterable through :meth:`counted`."""
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Call(
                nodes.EnvironmentAttribute("counted"), [loop.iter], [], None, None, lineno=loop.iter.lineno
            )
        return tree

    def compile(self, *args: Any, **kwargs: Any) -> Any:
        """Compile under a step budget and the memory cap (Jinja runs constant filter calls while compiling).

        Raises:
            TemplateLimitError: compiling needed more memory than the headroom.
        """
        token = _BUDGET.set(_Budget())  # folding a filter past a limit fails and leaves it to the render
        try:
            with _memory_capped():
                return super().compile(*args, **kwargs)
        except MemoryError as err:
            raise _out_of_memory(err) from None
        finally:
            _BUDGET.reset(token)

    def counted(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """Yield ``iterable``'s items, one step each."""
        for item in iterable:
            _step()
            yield item

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        """One step, then Jinja's sandboxed call; a recursive loop's new iterable is counted too."""
        _step()
        if isinstance(__obj, LoopContext) and args:
            args = (__self.counted(args[0]), *args[1:])
        return super().call(__context, __obj, *args, **kwargs)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """``*`` and ``**`` within the integer and size limits.

        Raises:
            TemplateLimitError: the result would be too large.
        """
        _step()
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def concat(self, parts: Iterable[str]) -> str:  # type: ignore[override]
        """Join output chunks, refusing past MAX_OUTPUT_CHARS characters.

        Raises:
            TemplateLimitError: the output is too long.
        """
        joined: list[str] = []
        size = 0
        for part in parts:
            size += len(part)
            if size > MAX_OUTPUT_CHARS:
                raise TemplateLimitError(f"the output is longer than {MAX_OUTPUT_CHARS:,} characters (vnuma's limit)")
            joined.append(part)
        return "".join(joined)


def template_name(template_file: Path | None) -> str:
    """The name to load: the operator file's own name, else ``domain.xml.j2``."""
    if template_file is None:
        return DEFAULT_TEMPLATE
    return f"{OPERATOR_FILE_PREFIX}{template_file.resolve()}"


def make_environment(
    templates_dir: Path | None = None, template_file: Path | None = None
) -> LimitedSandbox:
    """A (cached) sandboxed environment searching ``templates_dir`` then the shipped templates."""
    return _cached_environment(
        templates_dir.resolve() if templates_dir is not None else None,
        template_file.resolve() if template_file is not None else None,
    )


@lru_cache(maxsize=32)
def _cached_environment(templates_dir: Path | None, template_file: Path | None) -> LimitedSandbox:
    shipped = FileSystemLoader(str(shipped_templates_dir()))
    loaders: list[BaseLoader] = []
    if template_file is not None:
        loaders.append(OperatorFileLoader(template_file))
    if templates_dir is not None:
        loaders.append(FileSystemLoader(str(templates_dir)))
    loaders += [shipped, PrefixLoader({SHIPPED_PREFIX: shipped})]
    return LimitedSandbox(
        loader=ChoiceLoader(loaders),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=True,
    )
