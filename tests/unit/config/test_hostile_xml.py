"""Hostile configuration files: entity expansion, huge text, empty files, unknown versions, huge values.

Both XML parsers (UM's ``<um-configuration>`` and lbmrd's ``<lbmrd>``) share one reader
(:mod:`openum.config._xmltree`), so each attack runs against both.  Cost is checked as process time
with generous bounds (seconds) for inputs that took minutes before the reader was hardened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from openum import ConfigError
from openum._errors import ECHO_LIMIT, shorten, shorten_repr
from openum.config import Config, parse_flat_text, parse_xml_text
from openum.config._xmltree import MAX_DEPTH, MAX_TEXT_CHARS, parse_xml_tree
from openum.daemons.lbmrd import parse_config_file, parse_config_text

UM_DOC = """<?xml version="1.0"?>
{doctype}<um-configuration version="{version}">
  <templates><template name="t"><options type="context">
    <option name="context_name" default-value="{value}"><allow>{text}</allow></option>
  </options></template></templates>
</um-configuration>
"""

LBMRD_DOC = """<?xml version="1.0"?>
{doctype}<lbmrd version="{version}">
  <daemon><log>{text}</log></daemon>
  <domains><domain name="d"><network>10.0.0.0/8</network></domain></domains>
  <transformations><transform source="d" destination="d"><rule>
    <match address="{value}"/><replace address="10.0.0.1"/>
  </rule></transform></transformations>
</lbmrd>
"""


def um(text: str = "x", *, doctype: str = "", version: str = "1.0", value: str = "x") -> object:
    return parse_xml_text(UM_DOC.format(doctype=doctype, version=version, value=value, text=text), "um.xml")


def lbmrd(text: str = "x.log", *, doctype: str = "", version: str = "1.0", value: str = "10.0.0.1") -> object:
    return parse_config_text(
        LBMRD_DOC.format(doctype=doctype, version=version, value=value, text=text), "lbmrd.xml"
    )


PARSERS: dict[str, Callable[..., object]] = {"um-configuration": um, "lbmrd": lbmrd}


def billion_laughs(root: str, levels: int = 9) -> str:
    """The classic: 10 ** levels copies of "lol" from a few hundred bytes of DTD."""
    entities = ['<!ENTITY lol0 "lol">']
    entities += [f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, levels + 1)]
    return f"<!DOCTYPE {root} [\n" + "\n".join(entities) + "\n]>\n"


# ---- the parsers work as before on ordinary files


@pytest.mark.parametrize("parse", PARSERS.values(), ids=PARSERS.keys())
def test_ordinary_files_still_parse(parse: Callable[..., object]) -> None:
    assert parse("plain &amp; &lt;escaped&gt; &#65; text") is not None


def test_an_external_dtd_is_allowed_but_not_read() -> None:
    config = lbmrd(doctype='<!DOCTYPE lbmrd SYSTEM "/nonexistent/lbmrd.dtd">\n')
    assert config.daemon.log == "x.log"  # type: ignore[attr-defined]


# ---- entity expansion


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("parse", "root"), [(um, "um-configuration"), (lbmrd, "lbmrd")], ids=PARSERS.keys())
def test_a_billion_laughs_file_is_refused_at_its_doctype_at_once(
    parse: Callable[..., object], root: str
) -> None:
    """Before: the expansion ran for minutes (expat's 3 GB of "lol" appended with a quadratic +=)."""
    started = time.process_time()
    with pytest.raises(ConfigError) as err:
        parse("&lol9;", doctype=billion_laughs(root))
    assert time.process_time() - started < 2.0  # it took minutes before; a refusal takes milliseconds
    assert err.value.line == 2
    assert "<!DOCTYPE> with declarations" in err.value.reason
    assert "allowed: no <!DOCTYPE>, or one naming an external DTD" in err.value.reason


@pytest.mark.parametrize("parse", PARSERS.values(), ids=PARSERS.keys())
def test_an_external_entity_is_never_read(parse: Callable[..., object], tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    root = "um-configuration" if parse is um else "lbmrd"
    doctype = f'<!DOCTYPE {root} [<!ENTITY xxe SYSTEM "{secret.as_uri()}">]>\n'
    with pytest.raises(ConfigError) as err:
        parse("&xxe;", doctype=doctype)
    assert "TOP-SECRET" not in str(err.value)
    assert "<!DOCTYPE> with declarations" in err.value.reason


@pytest.mark.parametrize("parse", PARSERS.values(), ids=PARSERS.keys())
def test_an_entity_the_file_does_not_declare_is_refused(parse: Callable[..., object]) -> None:
    root = "um-configuration" if parse is um else "lbmrd"
    # with an external DTD (not read), expat would skip the reference and drop text silently
    with pytest.raises(ConfigError) as err:
        parse("a&ext;b", doctype=f'<!DOCTYPE {root} SYSTEM "x.dtd">\n')
    assert "the entity reference &ext; is not allowed" in err.value.reason
    assert "allowed: &amp; &lt; &gt; &apos; &quot;" in err.value.reason
    with pytest.raises(ConfigError, match="undefined entity"):
        parse("a&ext;b")


@pytest.mark.timeout(60)
def test_a_file_starting_with_its_doctype_is_read_as_xml_and_refused_once(tmp_path: Path) -> None:
    """Without ``<?xml ...?>`` first the file was read as flat lines: one error per line of the DTD."""
    path = tmp_path / "laughs.xml"
    path.write_text(
        billion_laughs("um-configuration")
        + '<um-configuration version="1.0"><x>&lol9;</x></um-configuration>'
    )
    with pytest.raises(ConfigError) as err:
        Config().load_file(path)
    assert len(err.value.errors) == 1
    assert str(err.value).startswith(f"{path}:1: a <!DOCTYPE> with declarations")


def test_the_reader_refuses_entity_declarations_even_when_expat_would_take_them() -> None:
    doc = '<!DOCTYPE r [<!ENTITY a "b">]><r>&a;</r>'
    with pytest.raises(ConfigError, match="<!DOCTYPE> with declarations"):
        parse_xml_tree(doc, "f.xml", "<r>")


# ---- text: linear, bounded


@pytest.mark.timeout(60)
def test_text_in_many_parts_is_joined_in_linear_time() -> None:
    """A million text parts in one element: ``text +=`` copied ~10**12 bytes (400,000 parts took 8 s of
    CPU, a million about a minute); joining the parts once copies 2 MB."""
    parts = 1_000_000
    doc = "<r><v>" + "a\n" * parts + "</v></r>"
    started = time.process_time()
    root = parse_xml_tree(doc, "f.xml", "<r>")
    assert time.process_time() - started < 5.0  # about 0.3 s
    assert root.children[0].text == "a\n" * parts
    assert root.children[0].text_line == 1


def test_an_elements_text_is_bounded_but_blank_runs_between_children_are_not() -> None:
    over = "<r><v>" + "a" * (MAX_TEXT_CHARS + 1) + "</v></r>"
    with pytest.raises(ConfigError) as err:
        parse_xml_tree(over, "f.xml", "<r>")
    assert err.value.reason == (
        f"the text inside <v> is longer than {MAX_TEXT_CHARS} characters; allowed: at most "
        f"{MAX_TEXT_CHARS} characters of text in one element"
    )
    assert str(err.value).startswith("f.xml:1: ")
    # the indentation between the children of one element (a big generated file) is not counted
    children = MAX_TEXT_CHARS // 1000 + 1
    many = "<r>" + ("\n" + " " * 1000 + "<t/>") * children + "\n</r>"
    assert len(parse_xml_tree(many, "f.xml", "<r>").children) == children
    exactly = "<r>" + "a" * MAX_TEXT_CHARS + "</r>"
    assert len(parse_xml_tree(exactly, "f.xml", "<r>").text) == MAX_TEXT_CHARS


def test_nesting_is_bounded() -> None:
    ok = "<e>" * MAX_DEPTH + "</e>" * MAX_DEPTH
    assert parse_xml_tree(ok, "f.xml", "<e>").tag == "e"
    deep = "<e>" * (MAX_DEPTH + 1) + "</e>" * (MAX_DEPTH + 1)
    with pytest.raises(
        ConfigError, match=f"nested {MAX_DEPTH + 1} elements deep; allowed: at most {MAX_DEPTH}"
    ):
        parse_xml_tree(deep, "f.xml", "<e>")


@pytest.mark.parametrize("parse", PARSERS.values(), ids=PARSERS.keys())
def test_a_huge_element_text_is_refused_naming_the_element(parse: Callable[..., object]) -> None:
    with pytest.raises(ConfigError) as err:
        parse("9" * 20_000_000)
    element = "allow" if parse is um else "log"
    assert f"the text inside <{element}> is longer than {MAX_TEXT_CHARS} characters" in str(err.value)
    assert len(str(err.value)) < 300


# ---- empty documents


@pytest.mark.parametrize(
    "content", ["", "   \n\t\n", '<?xml version="1.0"?>\n', '<?xml version="1.0"?>\n<!-- nothing -->\n']
)
def test_an_empty_file_or_one_without_a_root_element_is_an_error_naming_the_file(
    content: str, tmp_path: Path
) -> None:
    path = tmp_path / "empty.xml"
    path.write_text(content)
    with pytest.raises(ConfigError) as lbmrd_err:
        parse_config_file(path)
    with pytest.raises(ConfigError) as um_err:
        Config().load_file(path)
    for err, root in ((lbmrd_err, '<lbmrd version="1.0">'), (um_err, "<um-configuration")):
        message = str(err.value)
        assert message.startswith(f"{path}:"), message
        reason = err.value.reason
        assert reason.startswith(("the configuration file is empty", "the file has no root element")), reason
        assert root in reason


def test_an_empty_flat_file_is_refused_but_a_comment_only_file_is_not() -> None:
    with pytest.raises(ConfigError) as err:
        parse_flat_text("\n  \n", "app.cfg")
    assert str(err.value).startswith("app.cfg: the configuration file is empty; allowed: ")
    assert parse_flat_text("# no settings on purpose\n", "app.cfg") == []


# ---- versions


@pytest.mark.parametrize("version", ["99", "2.0", "", "1.0 "])
def test_an_unknown_um_configuration_version_is_refused_naming_the_allowed_one(version: str) -> None:
    with pytest.raises(ConfigError) as err:
        um(version=version)
    assert err.value.line == 2
    assert err.value.reason == (
        f'<um-configuration> version {version!r} is not supported; allowed: version="1.0"'
    )


def test_a_um_configuration_without_a_version_is_refused() -> None:
    with pytest.raises(ConfigError, match=r'needs a version attribute; allowed: version="1\.0"'):
        parse_xml_text("<um-configuration/>", "um.xml")


def test_an_unknown_lbmrd_version_is_refused_naming_the_allowed_one() -> None:
    with pytest.raises(ConfigError) as err:
        lbmrd(version="99")
    assert "lbmrd.xml:2: version '99' is not supported; allowed: \"1.0\"" in str(err.value).splitlines()


# ---- messages never echo a huge value


BIG = 20_000_000


def _short_and_sized(message: str, *names: str) -> None:
    assert len(message) < 400, message[:500]
    assert f"({BIG} bytes)" in message or f"({BIG - 1} bytes)" in message, message
    for name in names:
        assert name in message, message


def test_shorten_keeps_short_text_and_sizes_long_text() -> None:
    assert shorten("abc") == "abc"
    assert shorten_repr("abc") == "'abc'"
    long_text = "é" * (ECHO_LIMIT + 1)
    assert shorten(long_text) == "é" * ECHO_LIMIT + f"... ({2 * (ECHO_LIMIT + 1)} bytes)"
    assert shorten_repr(long_text) == repr("é" * ECHO_LIMIT) + f"... ({2 * (ECHO_LIMIT + 1)} bytes)"


def test_config_error_shortens_an_echoed_value_but_keeps_it_whole_in_value() -> None:
    value = "v " * (BIG // 2)
    err = ConfigError(f"invalid value {value!r} for context option x: got {value.strip()!r}", value=value)
    _short_and_sized(str(err), "context option x")
    assert err.value == value
    # a long run the caller did not name as the value is shortened too
    run = ConfigError("bad name " + "n" * BIG)
    _short_and_sized(str(run), "bad name")


def test_a_flat_file_with_a_20_mb_value_names_the_option_and_the_size() -> None:
    with pytest.raises(ConfigError) as err:
        parse_flat_text("context context_name " + "a " * (BIG // 2) + "\n", "app.cfg")
    _short_and_sized(str(err.value), "app.cfg:1:", "context option context_name")
    with pytest.raises(ConfigError) as err:
        parse_flat_text("context " + "x" * 5000 + " 1\n", "app.cfg")
    assert len(str(err.value)) < 300
    assert "unknown option '" + "x" * ECHO_LIMIT + "'... (5000 bytes) in scope 'context'" in str(err.value)
    with pytest.raises(ConfigError) as err:
        parse_flat_text("y" * BIG + "\n", "app.cfg")
    _short_and_sized(str(err.value), "app.cfg:1:", "expected 'SCOPE OPTION VALUE'")


def test_a_um_xml_file_with_a_20_mb_value_names_the_option_and_the_size() -> None:
    with pytest.raises(ConfigError) as err:
        um(value="a " * (BIG // 2))
    _short_and_sized(str(err.value), "um.xml:4:", "context option context_name")


def test_an_lbmrd_file_with_a_20_mb_value_names_the_element_and_the_size() -> None:
    with pytest.raises(ConfigError) as err:
        lbmrd(value="1" * BIG)
    _short_and_sized(str(err.value), "lbmrd.xml:6:", "<match> address '1111")
    with pytest.raises(ConfigError) as err:
        lbmrd(text="x.log", value="10.0.0.1", doctype="", version="1" * BIG)
    _short_and_sized(str(err.value), "lbmrd.xml:2:", "version '1111")


def test_lbmrd_values_with_spaces_are_shortened_too() -> None:
    """A value with spaces escapes a "long run" rule: each parser shortens what it echoes."""
    doc = LBMRD_DOC.format(doctype="", version="1.0", value="10.0.0.1", text="x.log").replace(
        "<log>x.log</log>", "<ttl>" + "1 " * 300_000 + "</ttl>"
    )
    with pytest.raises(ConfigError) as err:
        parse_config_text(doc, "lbmrd.xml")
    message = str(err.value)
    assert len(message) < 400, message[:500]
    assert message.startswith("lbmrd.xml:3: ttl '1 1 1")
    assert "... (599999 bytes) is not an integer" in message


@pytest.mark.parametrize("value", ["9" * BIG, "0x" + "f" * 5000])
def test_a_huge_integer_is_an_invalid_value_not_a_crash(value: str) -> None:
    """int() refuses more than 4300 digits and a huge number's str() too: both are a ConfigError."""
    with pytest.raises(ConfigError) as err:
        parse_flat_text(f"context resolver_multicast_port {value}\n", "app.cfg")
    message = str(err.value)
    assert len(message) < 400 and message.startswith("app.cfg:1:"), message[:500]
    assert "resolver_multicast_port" in message


def test_a_huge_unknown_option_name_is_refused_without_suggestions() -> None:
    with pytest.raises(ConfigError) as err:
        parse_flat_text(f"context {'q' * BIG} 1\n", "app.cfg")
    assert "unknown option" in str(err.value) and len(str(err.value)) < 400
