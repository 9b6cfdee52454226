"""Validate rendered domain XML before anything reaches libvirt.

Reads libvirt's RelaxNG schema file (once per process) when it is
installed; everything else is pure. Three layers, each failing with one
:class:`RenderError` line naming the element: well-formed XML (hardened
parser: no entities, no network), libvirt's ``domain.rng``, and vnuma's
semantic checks (:mod:`vnuma.render.checks`), which guard what the schema
cannot see: pins inside the placement, memory on the placed cells, page
sizes, topology, and the distances that crash libvirt 9.0.0.

A domain that ties a GPU's memory nodes to its hostdev (``<acpi nodeset>``,
libvirt 11.8.0: :mod:`vnuma.render.requirements`) is checked against the
installed schema with ``<acpi>`` as libvirt 11.8.0 defines it
(:data:`ACPI_11_8_0`): an older installed schema checks everything else, and
libvirt itself is never asked to define such a domain before 11.8.0.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from lxml import etree

from vnuma.errors import InvalidInputError, RenderError
from vnuma.placement.model import Placement
from vnuma.render.checks import check_domain
from vnuma.render.metadata import parse_domain_xml
from vnuma.render.requirements import ACPI_NODESET_LIBVIRT, needed_libvirt, version_text
from vnuma.topology import Host

DOMAIN_RNG = Path("/usr/share/libvirt/schemas/domain.rng")
_MAX_SCHEMA_ERRORS = 3
_RNG_NS = "http://relaxng.org/ns/structure/1.0"
ACPI_11_8_0 = f"""<define xmlns="{_RNG_NS}" name="acpi">
  <element name="acpi">
    <optional>
      <attribute name="index">
        <ref name="unsignedInt"/>
      </attribute>
    </optional>
    <optional>
      <attribute name="nodeset">
        <ref name="cpuset"/>
      </attribute>
    </optional>
  </element>
</define>"""
"""A device's ``<acpi>`` as libvirt 11.8.0 has it: the ``index`` it always had and the ``nodeset`` that release
added (its NEWS: "the existing ``<acpi>`` element has been extended with a ``nodeset`` attribute"; a nodeset is
libvirt's ``cpuset`` type, as ``<numatune>``'s). Written by vnuma from that release's NEWS and documentation."""


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
    acpi_nodeset = needed_libvirt(root) is not None
    relaxng = load_schema(schema, acpi_nodeset=acpi_nodeset)
    if relaxng is None or relaxng.validate(root):
        return
    errors = [f"line {e.line}: {e.message}" for e in relaxng.error_log][:_MAX_SCHEMA_ERRORS]
    also = f" (with <acpi> as libvirt {version_text(ACPI_NODESET_LIBVIRT)} has it)" if acpi_nodeset else ""
    raise RenderError(
        f"rendered domain does not match libvirt's {schema.name}{also}: {'; '.join(errors)}",
        hint=f"check the template against {schema} (virt-xml-validate FILE domain)",
    )


@lru_cache(maxsize=8)
def load_schema(path: Path, *, acpi_nodeset: bool = False) -> etree.RelaxNG | None:
    """The compiled RelaxNG schema at ``path`` (cached), None when the file does not exist; with
    ``acpi_nodeset``, that schema with its ``acpi`` definition replaced by :data:`ACPI_11_8_0`.

    Raises:
        RenderError: the file exists but cannot be read or compiled.
    """
    if not path.is_file():
        return None
    try:
        # Parse from the path so its <include href> files resolve next to it.
        parser = etree.XMLParser(resolve_entities=False, no_network=True)
        if not acpi_nodeset:
            return etree.RelaxNG(etree.parse(str(path), parser))
        # RELAX NG's <include> with a <define> inside replaces that definition of the included grammar
        # (libxml2 finds it in the grammars that one includes in turn).
        grammar = etree.Element(f"{{{_RNG_NS}}}grammar", datatypeLibrary="http://www.w3.org/2001/XMLSchema-datatypes")
        include = etree.SubElement(grammar, f"{{{_RNG_NS}}}include", href=path.resolve().as_uri())
        include.append(etree.fromstring(ACPI_11_8_0, parser))
        return etree.RelaxNG(etree.ElementTree(grammar))
    except (OSError, etree.XMLSyntaxError, etree.RelaxNGParseError) as err:
        raise RenderError(f"cannot load libvirt schema {path}: {err}") from err
