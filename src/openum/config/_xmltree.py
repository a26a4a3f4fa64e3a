"""The XML reader behind openum's XML configuration files: UM's ``<um-configuration>`` files and lbmrd's
``<lbmrd>`` file (UM Concepts Guide, chapter 16).

A configuration file is read with a cost linear in its size, whatever it holds:

- no DTD declarations: a ``<!DOCTYPE>`` with an internal subset (``[ ... ]``) and any ``<!ENTITY>``
  declaration are refused, so no entity is ever expanded (the "billion laughs" file) and no external
  entity or DTD is ever read.  A ``<!DOCTYPE>`` naming an external DTD is allowed (it is not read), but a
  reference to an entity other than XML's five predefined ones (``&amp;`` ``&lt;`` ``&gt;`` ``&apos;``
  ``&quot;``) or a character reference (``&#65;``) is refused;
- an element's text is collected in parts and joined once (linear, never a quadratic ``+=``), and is at
  most :data:`MAX_TEXT_CHARS` characters, not counting the blank runs between its child elements;
- elements nest at most :data:`MAX_DEPTH` deep;
- an empty file, or one without a root element, is an error naming the file.

Every refusal is a :class:`~openum._errors.ConfigError` naming ``FILE:LINE`` and what is allowed.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field
from typing import Final

from openum._errors import ConfigError, shorten

__all__ = ["MAX_DEPTH", "MAX_TEXT_CHARS", "XmlNode", "parse_xml_tree"]

#: the most text one element may hold (characters), not counting blank runs between child elements.
MAX_TEXT_CHARS: Final = 1 << 20
#: the deepest element nesting accepted (UM's and lbmrd's files nest at most 8 deep).
MAX_DEPTH: Final = 64

_PREDEFINED: Final = "&amp; &lt; &gt; &apos; &quot; and character references such as &#65;"


@dataclass
class XmlNode:
    """One element: its tag, attributes, line, child elements and text (all text parts, joined)."""

    tag: str
    attrib: dict[str, str]
    line: int
    children: list[XmlNode] = field(default_factory=list)
    text: str = ""
    text_line: int = 0  # line of the first non-blank text (0: none)

    def find_all(self, tag: str) -> list[XmlNode]:
        return [c for c in self.children if c.tag == tag]

    def find(self, tag: str) -> XmlNode | None:
        for c in self.children:
            if c.tag == tag:
                return c
        return None


class _RefusedError(Exception):
    """Raised inside an expat handler: stops the parse (pyexpat re-raises it from ``Parse``)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _is_blank(data: str | bytes) -> bool:
    return not data or data.isspace()


def parse_xml_tree(data: str | bytes, source: str, expected: str) -> XmlNode:
    """The root element of the XML document ``data`` (read from ``source``).

    ``expected`` names the root element wanted (``<lbmrd version="1.0">``), for the messages about an
    empty file or one without a root element.  Raises :class:`ConfigError` naming ``source`` and the line.
    """
    if _is_blank(data):
        raise ConfigError(
            f"the configuration file is empty; allowed: an XML document whose root element is {expected}",
            source=source,
            line=1,
        )
    parser = xml.parsers.expat.ParserCreate()
    parser.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
    document = XmlNode("#document", {}, 0)
    stack = [document]
    parts: list[list[str]] = [[]]
    sizes = [0]

    def doctype(_name: str, _sysid: str | None, _pubid: str | None, internal_subset: int) -> None:
        if internal_subset:
            raise _RefusedError(
                "a <!DOCTYPE> with declarations ([ ... ]) is not allowed: openum reads configuration files "
                "without DTD declarations, so no entity is ever expanded; allowed: no <!DOCTYPE>, or one "
                "naming an external DTD, which is not read",
                parser.CurrentLineNumber,
            )

    def entity(name: str, *_rest: object) -> None:
        raise _RefusedError(
            f"the entity declaration <!ENTITY {shorten(name)}> is not allowed: openum expands no entities "
            f"and reads no external ones; allowed: {_PREDEFINED}",
            parser.CurrentLineNumber,
        )

    def skipped(name: str, _is_parameter: int) -> None:
        raise _RefusedError(
            f"the entity reference &{shorten(name)}; is not allowed (openum reads no DTD); allowed: "
            f"{_PREDEFINED}",
            parser.CurrentLineNumber,
        )

    def start(tag: str, attrib: dict[str, str]) -> None:
        if len(stack) > MAX_DEPTH:
            raise _RefusedError(
                f"<{shorten(tag)}> is nested {len(stack)} elements deep; allowed: at most {MAX_DEPTH}",
                parser.CurrentLineNumber,
            )
        node = XmlNode(tag, attrib, parser.CurrentLineNumber)
        stack[-1].children.append(node)
        stack.append(node)
        parts.append([])
        sizes.append(0)

    def end(_tag: str) -> None:
        node = stack.pop()
        node.text = "".join(parts.pop())
        sizes.pop()

    def chars(text: str) -> None:
        parts[-1].append(text)
        if text.isspace():
            return
        node = stack[-1]
        if not node.text_line:
            node.text_line = parser.CurrentLineNumber
        sizes[-1] += len(text)
        if sizes[-1] > MAX_TEXT_CHARS:
            raise _RefusedError(
                f"the text inside <{shorten(node.tag)}> is longer than {MAX_TEXT_CHARS} characters; "
                f"allowed: at most {MAX_TEXT_CHARS} characters of text in one element",
                node.text_line,
            )

    parser.StartDoctypeDeclHandler = doctype
    parser.EntityDeclHandler = entity
    parser.SkippedEntityHandler = skipped
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(data, True)
    except _RefusedError as exc:
        raise ConfigError(exc.message, source=source, line=exc.line) from None
    except xml.parsers.expat.ExpatError as exc:
        no_elements = xml.parsers.expat.errors.codes[xml.parsers.expat.errors.XML_ERROR_NO_ELEMENTS]
        if exc.code == no_elements and not document.children:
            raise ConfigError(
                f"the file has no root element (only a declaration, comments or white space); "
                f"allowed: an XML document whose root element is {expected}",
                source=source,
                line=exc.lineno,
            ) from None
        raise ConfigError(
            f"not well-formed XML: {xml.parsers.expat.errors.messages[exc.code]}",
            source=source,
            line=exc.lineno,
        ) from None
    return document.children[0]
