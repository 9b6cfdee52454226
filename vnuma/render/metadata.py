"""vnuma's own ``<metadata>`` in a domain: its namespace and a reader for it.

Pure: no I/O. The default template writes ``<vnuma:placement>`` under
``<metadata>``; :func:`read_metadata` reads it back from any domain XML
(libvirt keeps foreign-namespace metadata verbatim) so a domain found on a
host can be matched to the inventory by tenant, VM and host.
"""

from __future__ import annotations

from typing import Any

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.topology import parse_cpuset

VNUMA_NS = "https://vnuma.dev/xmlns/domain/1"
VNUMA_PREFIX = "vnuma"

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def parse_domain_xml(domain_xml: str, what: str = "domain XML") -> etree._Element:
    """Parse domain XML with a hardened parser (no entities, no network).

    Raises:
        InvalidInputError: the text is not well-formed XML.
    """
    try:
        return etree.fromstring(domain_xml.encode("utf-8"), _PARSER)
    except etree.XMLSyntaxError as err:
        raise InvalidInputError(f"{what} is not well-formed XML: {' '.join(str(err).split())}") from err


def read_metadata(domain_xml: str) -> dict[str, Any] | None:
    """vnuma's placement record in ``domain_xml``, or None when the domain has none.

    The dict holds ``tenant``, ``vm``, ``host``, ``cpu_policy``,
    ``thread_policy``, ``numa_nodes`` (``"auto"``, a count, or None in
    domains rendered before vnuma recorded it), ``emulator_pcpus`` (frozenset), ``dedicated_vcpus``
    (frozenset, empty but for cpu policy ``mixed``), ``cells`` (list of
    dicts: ``guest_cell``, ``host_cell``, ``vcpus``, ``pcpus``,
    ``memory_kib``, ``page_size_kib``) and ``devices`` (list of dicts:
    ``address``, ``kind``, ``guest_cell``, ``host_cell`` or None).

    Raises:
        InvalidInputError: malformed XML or a malformed ``vnuma:placement``.
    """
    return metadata_of(parse_domain_xml(domain_xml))


def metadata_of(root: etree._Element) -> dict[str, Any] | None:
    """Like :func:`read_metadata`, for an already parsed ``<domain>`` element.

    Raises:
        InvalidInputError: a malformed ``vnuma:placement``.
    """
    found = root.find(f"metadata/{{{VNUMA_NS}}}placement")
    if found is None:
        return None
    return {
        "tenant": _text(found, "tenant"),
        "vm": _text(found, "vm"),
        "host": _text(found, "host"),
        "cpu_policy": _text(found, "cpu-policy"),
        "thread_policy": _text(found, "thread-policy"),
        "numa_nodes": _optional_text(found, "numa-nodes"),
        "emulator_pcpus": _cpuset(found, "emulator", "pcpus", optional=True),
        "dedicated_vcpus": _cpuset(found, "dedicated", "vcpus", optional=True),
        "cells": [
            {
                "guest_cell": _int(cell, "guest"),
                "host_cell": _int(cell, "host"),
                "vcpus": _cpuset(cell, None, "vcpus"),
                "pcpus": _cpuset(cell, None, "pcpus"),
                "memory_kib": _int(cell, "memory-kib"),
                "page_size_kib": _int(cell, "page-size-kib"),
            }
            for cell in found.iterfind(f"{{{VNUMA_NS}}}cell")
        ],
        "devices": [
            {
                "address": _attr(dev, "address"),
                "kind": _attr(dev, "kind"),
                "guest_cell": _int(dev, "guest-cell"),
                "host_cell": _int(dev, "host-cell") if dev.get("host-cell") is not None else None,
            }
            for dev in found.iterfind(f"{{{VNUMA_NS}}}device")
        ],
    }


def _bad(what: str) -> InvalidInputError:
    return InvalidInputError(f"domain metadata vnuma:placement: {what}")


def _text(parent: etree._Element, tag: str) -> str:
    child = parent.find(f"{{{VNUMA_NS}}}{tag}")
    if child is None:
        raise _bad(f"missing <vnuma:{tag}>")
    return child.text or ""


def _optional_text(parent: etree._Element, tag: str) -> str | None:
    child = parent.find(f"{{{VNUMA_NS}}}{tag}")
    return None if child is None else child.text or ""


def _attr(element: etree._Element, name: str) -> str:
    value = element.get(name)
    if value is None:
        raise _bad(f"<vnuma:{etree.QName(element).localname}> has no {name} attribute")
    return str(value)


def _int(element: etree._Element, name: str) -> int:
    value = _attr(element, name)
    if not value.isdecimal() or len(value) > 18:
        raise _bad(f"<vnuma:{etree.QName(element).localname}> {name}={value!r} is not a number")
    return int(value)


def _cpuset(parent: etree._Element, tag: str | None, name: str, *, optional: bool = False) -> frozenset[int]:
    element = parent if tag is None else parent.find(f"{{{VNUMA_NS}}}{tag}")
    if element is None:
        if optional:
            return frozenset()
        raise _bad(f"missing <vnuma:{tag}>")
    value = _attr(element, name)
    try:
        return parse_cpuset(value)
    except InvalidInputError as err:
        raise _bad(f"<vnuma:{etree.QName(element).localname}> {name}: {err}") from err
