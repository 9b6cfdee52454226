"""A trace document's text read without building its whole JSON tree at once.

Pure: no I/O. :func:`scan_trace` reads the top-level object key by key with
the standard library's decoder, and the ``hosts`` array host by host: a host
object but its ``name`` is keyed by its JSON text (the text after the name
when the host starts with it, as the generator and ``trace export`` write
hosts), and hosts whose rest is the same text share one object. A fleet of 100,000 hosts of a few hardware
shapes then holds a few host objects and 100,000 names, not 100,000 trees of
cells, CPU lists and sibling groups (about 5 KiB each); the decoder
(:mod:`.trace`) decodes each shared object once. Equal texts are equal JSON
values, so sharing never changes what a host decodes to.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

HostEntry = tuple[str | None, Any]
"""A host as scanned: (its name, the object without it, shared by equal ones); (None, the value as written)
when it is not an object with a string ``name``."""

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def scan_trace(text: str) -> Any:
    """The JSON value of ``text``; when an object, its ``hosts`` (when an array) is a list of :data:`HostEntry`.

    Raises:
        json.JSONDecodeError: ``text`` is not JSON (the standard library's messages).
    """
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        return json.loads(text)
    doc: dict[str, Any] = {}
    pos = _skip(text, pos + 1)
    if text.startswith("}", pos):
        return _end(text, pos + 1, doc)
    while True:
        if not text.startswith('"', pos):
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = scanstring(text, pos + 1)
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        pos = _skip(text, pos + 1)
        if key == "hosts" and text.startswith("[", pos):
            doc[key], pos = _hosts(text, pos + 1)
        else:
            doc[key], pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text.startswith("}", pos):
            return _end(text, pos + 1, doc)
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _skip(text, pos + 1)


def _hosts(text: str, pos: int) -> tuple[list[HostEntry], int]:
    """The hosts of the array whose ``[`` is just before ``pos``, and the position after its ``]``."""
    entries: list[HostEntry] = []
    bodies: dict[str, dict[str, Any]] = {}
    pos = _skip(text, pos)
    if text.startswith("]", pos):
        return entries, pos + 1
    while True:
        start = pos
        raw, pos = _DECODER.raw_decode(text, pos)
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            name = raw.pop("name")
            # The text after a leading "name" (as the generator and `trace export` write hosts) is the rest's
            # text as it stands; else the rest is written out (keys starting "{" never meet the others).
            head = '{"name":' + encode_basestring_ascii(name)
            key = text[start + len(head) : pos] if text.startswith(head, start) else json.dumps(raw)
            entries.append((name, bodies.setdefault(key, raw)))
        else:
            entries.append((None, raw))
        pos = _skip(text, pos)
        if text.startswith("]", pos):
            return entries, pos + 1
        if not text.startswith(",", pos):
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _skip(text, pos + 1)


def _skip(text: str, pos: int) -> int:
    match = _WS.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _end(text: str, pos: int, doc: dict[str, Any]) -> dict[str, Any]:
    end = _skip(text, pos)
    if end != len(text):
        raise json.JSONDecodeError("Extra data", text, end)
    return doc
