"""Hardened XML parsing: malformed input, wrong roots, entity attacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from vnuma.errors import InvalidInputError
from vnuma.sources.xmlsafe import parse_xml, read_int

BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<capabilities><host>&lol9;</host></capabilities>
"""


def _secret_file(tmp_path: Path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-TOKEN-4711")
    return secret


def test_accepts_expected_root_and_keeps_content() -> None:
    root = parse_xml(b"<capabilities><host/></capabilities>", what="caps.xml", root="capabilities")
    assert root.tag == "capabilities"
    assert root.find("host") is not None


def test_accepts_text_with_encoding_declaration() -> None:
    text = "<?xml version='1.0' encoding='UTF-8'?>\n<device><name>x</name></device>"
    assert parse_xml(text, what="dev.xml", root="device").findtext("name") == "x"


def test_accepts_doctype_without_entities() -> None:
    # Real lstopo output names an external DTD; it must parse without fetching it.
    data = b'<?xml version="1.0"?>\n<!DOCTYPE topology SYSTEM "hwloc2.dtd">\n<topology version="2.0"/>'
    assert parse_xml(data, what="hw.xml", root="topology").get("version") == "2.0"


def test_any_root_when_root_is_none() -> None:
    assert parse_xml(b"<devices/>", what="d.xml", root=None).tag == "devices"


def test_tuple_of_roots() -> None:
    assert parse_xml(b"<node/>", what="n.xml", root=("device", "node")).tag == "node"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "empty document"),
        (b"   \n\t ", "empty document"),
        (b"<capabilities><host>", "malformed XML: Premature end of data"),
        (b"<capabilities><host></capabilities>", "malformed XML: Opening and ending tag mismatch"),
        (b"virsh: error: failed to connect", "malformed XML: Start tag expected"),
        (b"<capabilities>&undefined;</capabilities>", "malformed XML: Entity 'undefined' not defined"),
    ],
    ids=["empty", "whitespace", "truncated", "mismatched-tags", "not-xml", "undefined-entity"],
)
def test_bad_documents_name_the_file_and_problem(data: bytes, expected: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_xml(data, what="host1.xml", root="capabilities")
    message = str(info.value)
    assert message.startswith("host1.xml: ")
    assert expected in message
    assert info.value.hint == "expected <capabilities> as printed by `virsh capabilities`"


def test_malformed_message_carries_line_number() -> None:
    data = b"<capabilities>\n  <host>\n    <topology>\n  </host>\n</capabilities>\n"
    with pytest.raises(InvalidInputError, match=r"caps\.xml: malformed XML: .*line 4"):
        parse_xml(data, what="caps.xml", root="capabilities")


def test_wrong_root_says_what_was_expected() -> None:
    with pytest.raises(InvalidInputError) as info:
        parse_xml(b"<domain type='kvm'><name>vm</name></domain>", what="vm.xml", root="capabilities")
    assert str(info.value) == "vm.xml: root element is <domain>, not <capabilities>"
    assert "virsh capabilities" in (info.value.hint or "")


def test_wrong_root_of_several_lists_them() -> None:
    with pytest.raises(InvalidInputError, match=r"root element is <x>, not <device> or <node>"):
        parse_xml(b"<x/>", what="x.xml", root=("device", "node"))


def test_billion_laughs_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"bomb\.xml: XML entity declarations are not allowed"):
        parse_xml(BILLION_LAUGHS, what="bomb.xml", root="capabilities")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"], ids=["utf8", "utf16-bypasses-byte-scan"])
def test_external_entity_is_refused_and_never_read(tmp_path: Path, encoding: str) -> None:
    secret = _secret_file(tmp_path)
    doc = (
        f'<?xml version="1.0" encoding="{encoding.upper()}"?>\n'
        f'<!DOCTYPE capabilities [<!ENTITY xxe SYSTEM "file://{secret}">]>\n'
        "<capabilities><host>&xxe;</host></capabilities>"
    ).encode(encoding)
    with pytest.raises(InvalidInputError) as info:
        parse_xml(doc, what="xxe.xml", root="capabilities")
    assert "entity declarations are not allowed" in str(info.value)
    assert "TOP-SECRET" not in str(info.value)


def test_etc_passwd_entity_is_refused() -> None:
    doc = b'<!DOCTYPE c [<!ENTITY x SYSTEM "file:///etc/passwd">]><capabilities>&x;</capabilities>'
    with pytest.raises(InvalidInputError) as info:
        parse_xml(doc, what="xxe.xml", root="capabilities")
    assert "root:" not in str(info.value)


def test_external_parameter_entity_in_utf16_is_refused(tmp_path: Path) -> None:
    evil = tmp_path / "evil.dtd"
    evil.write_text('<!ENTITY leak "LEAKED-VALUE">')
    doc = (
        '<?xml version="1.0" encoding="UTF-16"?>'
        f'<!DOCTYPE c [<!ENTITY % p SYSTEM "file://{evil}"> %p;]><c>&leak;</c>'
    ).encode("utf-16")
    with pytest.raises(InvalidInputError, match="entity declarations are not allowed"):
        parse_xml(doc, what="p.xml", root="c")


def test_comments_are_dropped() -> None:
    root = parse_xml(b"<device><!-- note --><name>n</name></device>", what="d.xml", root="device")
    assert [child.tag for child in root] == ["name"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("42", 42), (" 7 ", 7), ("0x1f", 31), ("0X10", 16)],
    ids=["decimal", "padded", "hex", "hex-upper"],
)
def test_read_int_accepts(text: str, expected: int) -> None:
    element = parse_xml(b"<a/>", what="a.xml", root="a")
    assert read_int(text, what="a.xml", element=element, field="value") == expected


@pytest.mark.parametrize(
    ("text", "allow_negative", "expected"),
    [
        (None, False, "is missing value"),
        ("", False, "is missing value"),
        ("four", False, "value 'four' is not an integer"),
        ("-1", False, "value '-1' is negative"),
    ],
    ids=["absent", "blank", "word", "negative"],
)
def test_read_int_refuses(text: str | None, allow_negative: bool, expected: str) -> None:
    element = parse_xml(b"<a/>", what="a.xml", root="a")
    with pytest.raises(InvalidInputError) as info:
        read_int(text, what="a.xml", element=element, field="value", allow_negative=allow_negative)
    assert str(info.value) == f"a.xml line 1: <a> {expected}"


def test_read_int_allows_negative_when_asked() -> None:
    element = parse_xml(b"<a/>", what="a.xml", root="a")
    assert read_int("-1", what="a.xml", element=element, field="node", allow_negative=True) == -1
