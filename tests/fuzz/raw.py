"""Hypothesis strategies for raw documents: bytes, token soup, encodings and BOMs, DOCTYPEs with entities.

Also the byte-level mutations (truncate, insert, flip, splice) applied on
top of well-formed documents, and the final re-encoding (UTF-8 bytes,
UTF-16/32 with or without BOM, a Python ``str`` with stray surrogates).
"""

from __future__ import annotations

from hypothesis import strategies as st

BOMS: tuple[bytes, ...] = (
    b"",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xfe\xff",
    b"\xff\xfe\x00\x00",
    b"\x00\x00\xfe\xff",
    b"\xef\xbb",
)
ENCODINGS: tuple[str, ...] = ("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "latin-1", "ascii")
DECLARED: tuple[str, ...] = (
    "UTF-8",
    "UTF-16",
    "UTF-16LE",
    "UTF-32",
    "ISO-8859-1",
    "ASCII",
    "EBCDIC",
    "UCS-4",
    "bogus",
    "",
)
STRAY_CHARS: tuple[str, ...] = ("\ud800", "\udfff", "\x00", "\ufffe", "\uffff", "\x85", "\u2028", "\x1b")
TOKENS: tuple[str, ...] = (
    "<capabilities>",
    "</capabilities>",
    "<host>",
    "</host>",
    "<topology>",
    "</topology>",
    "<cells num='2'>",
    "</cells>",
    "<cell id='0'>",
    "<cell id='1'>",
    "</cell>",
    "<memory unit='KiB'>",
    "</memory>",
    "<pages unit='KiB' size='2048'>",
    "</pages>",
    "<distances>",
    "</distances>",
    "<sibling id='0' value='10'/>",
    "<sibling id='1' value='21'/>",
    "<cpus num='2'>",
    "</cpus>",
    "<cpu id='0' socket_id='0' core_id='0' siblings='0-1'/>",
    "<cpu id='1' siblings='0-1'/>",
    "<device>",
    "</device>",
    "<devices>",
    "</devices>",
    "<name>pci_0000_17_00_0</name>",
    "<parent>pci_0000_16_01_0</parent>",
    "<capability type='pci'>",
    "</capability>",
    "<domain>0</domain>",
    "<bus>23</bus>",
    "<slot>0</slot>",
    "<function>0</function>",
    "<class>0x030200</class>",
    "<vendor id='0x10de'/>",
    "<product id='0x2330'/>",
    "<numa node='0'/>",
    "<topology version='2.0'>",
    "<object type='Machine' os_index='0'>",
    "<object type='NUMANode' os_index='0' cpuset='0x3' local_memory='1073741824'>",
    "<object type='Package' os_index='0'>",
    "<object type='Core' os_index='0'>",
    "<object type='PU' os_index='0'/>",
    "<object type='PU' os_index='1'/>",
    "</object>",
    "<page_type size='4096' count='10'/>",
    "<distances2 type='NUMANode' nbobjs='1' indexing='os'>",
    "<indexes length='1'>0</indexes>",
    "<u64values length='1'>10</u64values>",
    "</distances2>",
    "<![CDATA[x]]>",
    "<!-- c -->",
    "<?pi x?>",
    "&amp;",
    "&lt;",
    "&#10;",
    "&#0;",
    "&#xD800;",
    "&x;",
    "12",
    " ",
    "\n",
    "0x",
    "\x00",
    "<",
    ">",
    "/>",
    "'",
    '"',
    "=",
)


def _encode(text: str, encoding: str) -> bytes:
    return text.encode(encoding, errors="replace")


raw_bytes = st.binary(max_size=400)
"""Uniformly random bytes."""

token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map("".join)
"""Vocabulary of the three formats glued in any order: nearly-XML that reaches the parsers' code."""


@st.composite
def encoded(draw: st.DrawFn, text: str) -> bytes | str:
    """``text`` as the parsers may receive it: bytes in some encoding with some BOM, or a str."""
    kind = draw(st.sampled_from(["utf-8", "encoding", "declared", "str", "str-stray"]))
    if kind == "utf-8":
        return _encode(text, "utf-8")
    if kind == "encoding":
        return draw(st.sampled_from(BOMS)) + _encode(text, draw(st.sampled_from(ENCODINGS)))
    if kind == "declared":
        declaration = f'<?xml version="1.0" encoding="{draw(st.sampled_from(DECLARED))}"?>'
        return draw(st.sampled_from(BOMS)) + _encode(declaration + text, draw(st.sampled_from(ENCODINGS)))
    if kind == "str":
        return text
    at = draw(st.integers(0, len(text)))
    return text[:at] + draw(st.sampled_from(STRAY_CHARS)) + text[at:]


@st.composite
def byte_mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` after 0-3 byte-level edits: truncate, insert bytes, overwrite a byte, splice a slice."""
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["truncate", "insert", "overwrite", "splice"]))
        at = draw(st.integers(0, len(data)))
        if op == "truncate":
            data = data[:at]
        elif op == "insert":
            insert = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(TOKENS).map(str.encode))
            data = data[:at] + insert + data[at:]
        elif op == "overwrite" and data:
            at = min(at, len(data) - 1)
            data = data[:at] + bytes([draw(st.integers(0, 255))]) + data[at + 1 :]
        elif op == "splice" and data:
            lo = draw(st.integers(0, len(data)))
            hi = draw(st.integers(lo, min(len(data), lo + 200)))
            data = data[:at] + data[lo:hi] + data[at:]
    return data


@st.composite
def entity_documents(draw: st.DrawFn, root: str, secret_uri: str) -> bytes | str:
    """A document whose DOCTYPE declares entities (internal, external, parameter, nested expansion)."""
    declarations = [
        '<!ENTITY a "aaaaaaaaaa">',
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">',
        f'<!ENTITY x SYSTEM "{secret_uri}">',
        f'<!ENTITY % p SYSTEM "{secret_uri}"> %p;',
        "<!ENTITY % q \"<!ENTITY r 'rrr'>\"> %q;",
        '<!ENTITY u PUBLIC "-//X//Y" "http://127.0.0.1:9/x.dtd">',
        '<!ENTITY n SYSTEM "x" NDATA png>',
    ]
    chosen = draw(st.lists(st.sampled_from(declarations), min_size=1, max_size=4, unique=True))
    refs = draw(st.lists(st.sampled_from(["&a;", "&b;", "&x;", "&r;", "&u;", "text"]), max_size=3))
    spacing = draw(st.sampled_from(["", " ", "\n", "\t"]))
    doc = f"<!DOCTYPE {root} [{spacing}{spacing.join(chosen)}{spacing}]>\n<{root}>{''.join(refs)}</{root}>"
    return draw(encoded(doc))
