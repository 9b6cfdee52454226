"""Render a placement into libvirt domain XML and validate it before anyone uses it.

Reads template files only (through :mod:`vnuma.render.env`). Every template
problem, shipped or operator-written, becomes one :class:`RenderError` line
naming the template file, the line and the problem.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from jinja2 import TemplateSyntaxError
from jinja2.exceptions import SecurityError, TemplateNotFound, UndefinedError

from vnuma.errors import RenderError
from vnuma.placement.model import Placement
from vnuma.render.env import make_environment, template_name
from vnuma.render.validate import validate_domain
from vnuma.render.view import DomainView, RenderOptions, build_view
from vnuma.topology import Host

_DEFAULT_OPTIONS = RenderOptions()


def render_domain(
    host: Host,
    placement: Placement,
    *,
    options: RenderOptions = _DEFAULT_OPTIONS,
    template: Path | None = None,
    templates_dir: Path | None = None,
) -> str:
    """Render ``placement`` on ``host`` to domain XML and validate it.

    Raises:
        ConfigError: bad render options.
        RenderError: a template error, or XML that fails libvirt's schema or
            vnuma's semantic checks.
    """
    view = build_view(host, placement, options)
    xml = render_view(view, template=template, templates_dir=templates_dir)
    validate_domain(xml, host, placement)
    return xml


def render_view(view: DomainView, *, template: Path | None = None, templates_dir: Path | None = None) -> str:
    """Render a prepared view with the default or an operator template, without validating.

    Raises:
        RenderError: any template error, naming file and line.
    """
    if template is not None and not template.is_file():
        raise RenderError(f"template file {template} does not exist or is not a file")
    env = make_environment(templates_dir, template)
    name = template_name(template)
    try:
        return env.get_template(name).render(view=view)
    except TemplateSyntaxError as err:
        where = err.filename or err.name or _shown(name)
        raise RenderError(
            f"template {where} line {err.lineno}: syntax error: {_one_line(err.message)}"
        ) from err
    except TemplateNotFound as err:
        raise RenderError(
            f"template {_location(err, name)}: template not found: {_one_line(err.message)}",
            hint=_search_hint(templates_dir),
        ) from err
    except UndefinedError as err:
        raise RenderError(f"template {_location(err, name)}: undefined: {_one_line(err.message)}") from err
    except SecurityError as err:
        raise RenderError(
            f"template {_location(err, name)}: not allowed in the sandbox: {_one_line(str(err))}"
        ) from err
    except RecursionError as err:
        raise RenderError(
            f"template {_shown(name)}: templates extend or include each other, or a macro calls itself, without end",
            hint='an operator domain.xml.j2 extends the shipped one as "vnuma/domain.xml.j2"',
        ) from err
    except Exception as err:  # an operator template may raise anything; it is user input
        raise RenderError(
            f"template {_location(err, name)}: {type(err).__name__}: {_one_line(str(err))}"
        ) from err


def _search_hint(templates_dir: Path | None) -> str:
    shipped = "vnuma's shipped templates (also as vnuma/NAME)"
    return (
        f"templates are looked up in {templates_dir}, then {shipped}"
        if templates_dir
        else f"looked up in {shipped}"
    )


def _shown(name: str) -> str:
    return name.split(":", 1)[1] if name.startswith("operator-file:") else name


def _location(err: BaseException, name: str) -> str:
    """``FILE line N`` of the innermost template frame in the traceback (Jinja rewrites them)."""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        if frame.filename and not frame.filename.endswith(".py") and frame.lineno:
            return f"{frame.filename} line {frame.lineno}"
    return _shown(name)


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split())
