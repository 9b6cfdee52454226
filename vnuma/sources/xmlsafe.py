"""Hardened XML parsing for every document an operator hands to vnuma.

Pure: no I/O. Callers pass the document's bytes (or text); nothing is ever
fetched: no DTD is loaded, no entity is resolved, no network is touched, and
a document that declares entities (the "billion laughs" expansion, or an
external entity pointing at ``file:///etc/passwd``) is refused outright.
Every failure is an :class:`~vnuma.errors.InvalidInputError` naming the
document (``what``), the line where lxml knows it, and which document was
expected.

Numbers are bounded where they are read: ids and page sizes fit the
inventory's 32-bit columns (:data:`INT32_MAX`), sizes, counts and distances
its 64-bit ones (:data:`INT64_MAX`), so a parsed Host can always be stored.
"""

from __future__ import annotations

import re

from lxml import etree

from vnuma.errors import InvalidInputError
from vnuma.topology import parse_cpuset

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
# Longer than any int64 in decimal or hex; refused before int() so a
# 5,000-digit value cannot reach Python's int-from-str limit (a ValueError).
_MAX_NUMBER_CHARS = 24
_MAX_SHOWN_CHARS = 40
# libxml2 suggests a parser option the operator cannot set (and vnuma keeps off).
_HUGE_ADVICE = re.compile(r",? (?:use|try) XML_PARSE_HUGE(?: option)?")

# Which tool prints each root element; used for the "expected ..." hint.
_PRODUCERS = {
    "capabilities": "`virsh capabilities`",
    "device": "`virsh nodedev-dumpxml DEVICE`",
    "topology": "`lstopo --of xml`",
    "node": "a libvirt test-driver node file",
}


def _parser() -> etree.XMLParser:
    # A fresh parser per call: lxml parsers are not thread-safe.
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )


def expected_hint(root: str | tuple[str, ...] | None) -> str | None:
    """A one-line hint naming the expected document for ``root``."""
    if root is None:
        return None
    names = (root,) if isinstance(root, str) else root
    parts = []
    for name in names:
        producer = _PRODUCERS.get(name)
        parts.append(f"<{name}> as printed by {producer}" if producer else f"<{name}>")
    return "expected " + " or ".join(parts)


def element_where(what: str, element: etree._Element) -> str:
    """``what`` plus the element's line, for error messages: ``caps.xml line 12``."""
    line = element.sourceline
    return f"{what} line {line}" if line else what


def parse_xml(
    data: bytes | str,
    *,
    what: str,
    root: str | tuple[str, ...] | None,
    hint: str | None = None,
) -> etree._Element:
    """Parse untrusted XML safely and return its root element.

    ``root`` names the accepted root element(s); None accepts any root.

    Raises:
        InvalidInputError: empty, malformed or truncated XML, a DTD that
            declares entities, or an unexpected root element.
    """
    hint = hint or expected_hint(root)
    raw = _as_bytes(data, what=what, hint=hint)
    if not raw.strip():
        raise InvalidInputError(f"{what}: empty document", hint=hint)
    if b"<!ENTITY" in raw:
        raise _entity_error(what, hint)
    try:
        element = etree.fromstring(raw, _parser())
    except etree.XMLSyntaxError as err:
        raise InvalidInputError(f"{what}: malformed XML: {_syntax_message(err)}", hint=hint) from err
    except ValueError as err:  # e.g. an encoding lxml cannot honour
        raise InvalidInputError(f"{what}: unreadable XML: {one_line(str(err))}", hint=hint) from err
    dtd = element.getroottree().docinfo.internalDTD
    # The byte scan above misses UTF-16 documents; the parsed DTD does not.
    if dtd is not None and any(True for _ in dtd.iterentities()):
        raise _entity_error(what, hint)
    _check_root(element, what=what, root=root, hint=hint)
    return element


def _as_bytes(data: bytes | str, *, what: str, hint: str | None) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return data.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate: a str no file could have held
        raise InvalidInputError(
            f"{what}: unreadable text: {err.reason} at character {err.start}", hint=hint
        ) from None


def one_line(text: str) -> str:
    """``text`` on one line: each run of whitespace becomes a space (libxml2 ends some messages in one)."""
    return " ".join(text.split()).replace(" ,", ",")


def device_name(text: str | None) -> str | None:
    """A device's model name as a file gives it, on one line and at most 100 characters (None: none given)."""
    name = one_line(text or "")
    return (name[:100] + "...") if len(name) > 100 else name or None


def shown(value: str) -> str:
    """``repr(value)``, shortened for an error message when it is long."""
    return repr(value if len(value) <= _MAX_SHOWN_CHARS else value[:_MAX_SHOWN_CHARS] + "...")


def _entity_error(what: str, hint: str | None) -> InvalidInputError:
    return InvalidInputError(
        f"{what}: XML entity declarations are not allowed (entity expansion or external entity attempt)",
        hint=hint,
    )


def _syntax_message(err: etree.XMLSyntaxError) -> str:
    msg = _HUGE_ADVICE.sub(" (a limit vnuma keeps for untrusted XML)", one_line(err.msg or str(err)))
    if err.lineno and "line" not in msg:
        msg = f"{msg} (line {err.lineno})"
    return msg


def _check_root(
    element: etree._Element, *, what: str, root: str | tuple[str, ...] | None, hint: str | None
) -> None:
    if root is None:
        return
    names = (root,) if isinstance(root, str) else root
    tag = element.tag if isinstance(element.tag, str) else "?"
    if tag not in names:
        wanted = " or ".join(f"<{n}>" for n in names)
        raise InvalidInputError(f"{what}: root element is <{tag}>, not {wanted}", hint=hint)


def read_int(
    text: str | None,
    *,
    what: str,
    element: etree._Element,
    field: str,
    allow_negative: bool = False,
    maximum: int = INT64_MAX,
) -> int:
    """Read a decimal (or ``0x`` hex) integer from an attribute or text.

    Raises:
        InvalidInputError: the value is missing, not an integer, negative
            when ``allow_negative`` is false, or above ``maximum``.
    """
    where = element_where(what, element)
    if text is None or not text.strip():
        raise InvalidInputError(f"{where}: <{element.tag}> is missing {field}")
    value = text.strip()
    label = f"{where}: <{element.tag}> {field}"
    if len(value) > _MAX_NUMBER_CHARS:
        raise InvalidInputError(f"{label} {shown(value)} is out of range")
    try:
        number = int(value, 16) if value.lower().startswith(("0x", "-0x")) else int(value, 10)
    except ValueError:
        raise InvalidInputError(f"{label} {shown(value)} is not an integer") from None
    if number < 0 and not allow_negative:
        raise InvalidInputError(f"{label} {value!r} is negative")
    if number > maximum:
        raise InvalidInputError(f"{label} {value!r} is above {maximum}")
    return number


def read_optional_int(
    text: str | None,
    *,
    what: str,
    element: etree._Element,
    field: str,
    allow_negative: bool = False,
    maximum: int = INT64_MAX,
) -> int | None:
    """Like :func:`read_int`, but None when the value is absent."""
    if text is None:
        return None
    return read_int(
        text, what=what, element=element, field=field, allow_negative=allow_negative, maximum=maximum
    )


def read_int_attr(element: etree._Element, attr: str, *, what: str, maximum: int = INT32_MAX) -> int:
    """A required integer attribute (0..``maximum``): missing or unreadable is an InvalidInputError naming it."""
    value = element.get(attr)
    if value is None:
        raise InvalidInputError(f"{element_where(what, element)}: <{element.tag}> has no {attr} attribute")
    return read_int(value, what=what, element=element, field=f"attribute {attr}", maximum=maximum)


def read_cpuset_attr(
    element: etree._Element, attr: str, what: str, *, optional: bool = False
) -> frozenset[int] | None:
    """A cpuset attribute (``0-3,8``); missing is None when ``optional``, else an InvalidInputError naming it."""
    value = element.get(attr)
    if value is None:
        if optional:
            return None
        raise InvalidInputError(f"{element_where(what, element)}: <{element.tag}> has no {attr} attribute")
    try:
        return parse_cpuset(value)
    except InvalidInputError as err:
        raise InvalidInputError(f"{element_where(what, element)}: <{element.tag}> {attr}: {err}") from None
