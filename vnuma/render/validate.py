"""Validate rendered domain XML before anything reaches libvirt.

Reads libvirt's RelaxNG schema file (once per process) when it is
installed; everything else is pure. Three layers, each failing with one
:class:`RenderError` line naming the element: well-formed XML (hardened
parser: no entities, no network), libvirt's ``domain.rng``, and vnuma's
semantic checks (:mod:`vnuma.render.checks`), which guard what the schema
cannot see: pins inside the placement, memory on the placed cells, page
sizes, topology, and the distances that crash libvirt 9.0.0.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lxml import etree

from vnuma.errors import InvalidInputError, RenderError
from vnuma.placement.model import Placement
from vnuma.render.checks import check_domain
from vnuma.render.metadata import parse_domain_xml
from vnuma.topology import Host

DOMAIN_RNG = Path("/usr/share/libvirt/schemas/domain.rng")
_MAX_SCHEMA_ERRORS = 3


def validate_domain(xml: str, host: Host, placement: Placement, *, schema: Path | None = DOMAIN_RNG) -> None:
    """Check ``xml`` against libvirt's schema (when installed) and vnuma's semantic rules.

    ``schema=None`` skips the RelaxNG step (the semantic checks still run).

    Raises:
        RenderError: malformed XML, a schema violation, or a semantic
            problem, naming the element.
    """
    try:
        root = parse_domain_xml(xml, "rendered domain XML")
    except InvalidInputError as err:
        raise RenderError(str(err)) from err
    if schema is not None:
        check_schema(root, schema)
    check_domain(root, host, placement)


def check_schema(root: etree._Element, schema: Path = DOMAIN_RNG) -> None:
    """Validate against a RelaxNG schema file; do nothing when the file is absent.

    Raises:
        RenderError: the document does not match, or the schema cannot be loaded.
    """
    relaxng = load_schema(schema)
    if relaxng is None or relaxng.validate(root):
        return
    errors = [f"line {e.line}: {e.message}" for e in relaxng.error_log][:_MAX_SCHEMA_ERRORS]
    raise RenderError(
        f"rendered domain does not match libvirt's {schema.name}: {'; '.join(errors)}",
        hint=f"check the template against {schema} (virt-xml-validate FILE domain)",
    )


@lru_cache(maxsize=4)
def load_schema(path: Path) -> etree.RelaxNG | None:
    """The compiled RelaxNG schema at ``path`` (cached), None when the file does not exist.

    Raises:
        RenderError: the file exists but cannot be read or compiled.
    """
    if not path.is_file():
        return None
    try:
        # Parse from the path so its <include href> files resolve next to it.
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        return etree.RelaxNG(etree.parse(str(path), parser))
    except (OSError, etree.XMLSyntaxError, etree.RelaxNGParseError) as err:
        raise RenderError(f"cannot load libvirt schema {path}: {err}") from err
