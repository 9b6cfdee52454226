"""The Jinja environment domain templates run in: sandboxed, XML-escaped, strict.

Templates are found, in order, in the operator's templates directory
(``VNUMA_TEMPLATES``, passed in by the caller: this module reads no
environment) and then vnuma's shipped ``templates/``. The shipped files are
also reachable as ``vnuma/<name>``, so an operator ``domain.xml.j2`` can
``{% extends "vnuma/domain.xml.j2" %}`` without extending itself. A single
operator file (``--template FILE``) is loaded under its own name and may
extend ``domain.xml.j2``. Environments are cached per (directory, file):
Jinja then keeps compiled templates and reloads files whose mtime changed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from jinja2 import BaseLoader, ChoiceLoader, Environment, FileSystemLoader, PrefixLoader, StrictUndefined
from jinja2.exceptions import TemplateNotFound
from jinja2.sandbox import SandboxedEnvironment

from vnuma.paths import templates_dir as shipped_templates_dir

DEFAULT_TEMPLATE = "domain.xml.j2"
SHIPPED_PREFIX = "vnuma"
OPERATOR_FILE_PREFIX = "operator-file:"


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


def template_name(template_file: Path | None) -> str:
    """The name to load: the operator file's own name, else ``domain.xml.j2``."""
    if template_file is None:
        return DEFAULT_TEMPLATE
    return f"{OPERATOR_FILE_PREFIX}{template_file.resolve()}"


def make_environment(
    templates_dir: Path | None = None, template_file: Path | None = None
) -> SandboxedEnvironment:
    """A (cached) sandboxed environment searching ``templates_dir`` then the shipped templates."""
    return _cached_environment(
        templates_dir.resolve() if templates_dir is not None else None,
        template_file.resolve() if template_file is not None else None,
    )


@lru_cache(maxsize=32)
def _cached_environment(templates_dir: Path | None, template_file: Path | None) -> SandboxedEnvironment:
    shipped = FileSystemLoader(str(shipped_templates_dir()))
    loaders: list[BaseLoader] = []
    if template_file is not None:
        loaders.append(OperatorFileLoader(template_file))
    if templates_dir is not None:
        loaders.append(FileSystemLoader(str(templates_dir)))
    loaders += [shipped, PrefixLoader({SHIPPED_PREFIX: shipped})]
    return SandboxedEnvironment(
        loader=ChoiceLoader(loaders),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        auto_reload=True,
    )
