"""lbmrd's XML configuration file: parser, validator and DTD (seed chapter 16; spec 06 PART C.3).

The file is validated exactly against the DTD of seed §16.3 (root spelled ``lbmrd``; ``lbmrdr``, the
seed's other spelling, is accepted as an alias, spec 06 §0): element order and cardinality, required and
unknown attributes, text where only elements are allowed, ``ID`` syntax and uniqueness of domain names,
``IDREF`` targets of ``<transform source= destination=>``.  On top of the DTD the values are checked:
integers and their ranges, ``<network>`` as an IPv4 address or CIDR network (also the short form
``192.168.1/24`` of the seed's example; no DNS names, §16.1.9), ``<match>``/``<replace>`` addresses as
dotted-decimal hosts and ports as a number or ``*`` (the default).

Every problem is reported as ``FILE:LINE: message`` naming what is allowed, and all of them are
collected before :class:`~openum._errors.ConfigError` is raised.  Things the seed says "should" hold (a
``<match>`` address inside the source domain's networks, a ``<replace>`` address inside the destination
domain's) are warnings, kept in :attr:`LbmrdConfig.warnings`.

The file is read with a cost linear in its size (:mod:`openum.config._xmltree`): no ``<!DOCTYPE>``
declarations and so no entity expansion (a "billion laughs" file is refused at its ``<!DOCTYPE>``
line), an empty file or one without a root element is an error, the version must be ``1.0``, and a
message shows a long value as its head and its size.

``<ttl>`` is read in **seconds**, the unit of ``-t``: the seed prints "milliseconds between keepalive
checks" for it, which contradicts ``-t`` and copies ``<activity>``'s text (spec 06 §0).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from openum._errors import ConfigError, shorten, shorten_repr
from openum.config._xmltree import XmlNode, parse_xml_tree
from openum.daemons.lbmrd._values import (
    parse_host,
    parse_interface,
    parse_log,
    parse_network,
    parse_port,
    parse_positive,
    parse_rule_port,
)

__all__ = [
    "DAEMON_FIELDS",
    "DTD",
    "DaemonSettings",
    "Domain",
    "Endpoint",
    "LbmrdConfig",
    "Rule",
    "Transform",
    "parse_config_file",
    "parse_config_text",
]

#: seed §16.3, reproduced for ``-d``; the root is spelled ``lbmrd`` (the seed prints ``lbmrdr``).
DTD: Final = """\
<!ELEMENT lbmrd (daemon?, domains, transformations)>
<!ATTLIST lbmrd
    version (1.0) #REQUIRED
>
<!ELEMENT daemon (activity|interface|port|ttl|log|resolver_unicast_receiver_socket_buffer|
    resolver_unicast_send_socket_buffer)*>
<!ELEMENT activity (#PCDATA) >
<!ELEMENT interface (#PCDATA) >
<!ELEMENT port (#PCDATA) >
<!ELEMENT ttl (#PCDATA) >
<!ELEMENT log (#PCDATA) >
<!ELEMENT resolver_unicast_receiver_socket_buffer (#PCDATA) >
<!ELEMENT resolver_unicast_send_socket_buffer (#PCDATA) >
<!ELEMENT domains (domain+)>
<!ELEMENT domain (network+)>
<!ATTLIST domain name ID #REQUIRED>
<!ELEMENT network ( #PCDATA )>
<!ELEMENT transformations ( transform+ )>
<!ELEMENT transform ( rule+ )>
<!ATTLIST transform
    source IDREF #REQUIRED
    destination IDREF #REQUIRED
>
<!ELEMENT rule ( match, replace )>
<!ELEMENT match EMPTY>
<!ATTLIST match
    address CDATA #REQUIRED
    port CDATA "*"
>
<!ELEMENT replace EMPTY>
<!ATTLIST replace
    address CDATA #REQUIRED
    port CDATA "*"
>
"""

# ---- the DTD as data: one entry per element (PRACTICES.md 2)

_ELEMENTS: Final = "elements"  # a content model of child elements
_PCDATA: Final = "#PCDATA"
_EMPTY: Final = "EMPTY"


@dataclass(frozen=True)
class _Spec:
    kind: str
    #: (child name, minimum, maximum or None for unbounded), in DTD order
    children: tuple[tuple[str, int, int | None], ...] = ()
    #: True: the children must appear in this order (a DTD sequence); False: a repeated choice
    ordered: bool = True
    #: attribute name -> required
    attrs: Mapping[str, bool] = field(default_factory=dict)
    #: the content model as the DTD writes it, for messages
    model: str = ""


#: ``<daemon>`` child element -> :class:`DaemonSettings` field.
DAEMON_FIELDS: Final[Mapping[str, str]] = {
    "activity": "activity",
    "interface": "interface",
    "port": "port",
    "ttl": "ttl",
    "log": "log",
    "resolver_unicast_receiver_socket_buffer": "receiver_socket_buffer",
    "resolver_unicast_send_socket_buffer": "send_socket_buffer",
}

_SPECS: Final[Mapping[str, _Spec]] = {
    "lbmrd": _Spec(
        _ELEMENTS,
        (("daemon", 0, 1), ("domains", 1, 1), ("transformations", 1, 1)),
        attrs={"version": True},
        model="(daemon?, domains, transformations)",
    ),
    "daemon": _Spec(
        _ELEMENTS,
        tuple((name, 0, None) for name in DAEMON_FIELDS),
        ordered=False,
        model="(" + "|".join(DAEMON_FIELDS) + ")*",
    ),
    **{name: _Spec(_PCDATA) for name in DAEMON_FIELDS},
    "domains": _Spec(_ELEMENTS, (("domain", 1, None),), model="(domain+)"),
    "domain": _Spec(_ELEMENTS, (("network", 1, None),), attrs={"name": True}, model="(network+)"),
    "network": _Spec(_PCDATA),
    "transformations": _Spec(_ELEMENTS, (("transform", 1, None),), model="(transform+)"),
    "transform": _Spec(
        _ELEMENTS, (("rule", 1, None),), attrs={"source": True, "destination": True}, model="(rule+)"
    ),
    "rule": _Spec(_ELEMENTS, (("match", 1, 1), ("replace", 1, 1)), model="(match, replace)"),
    "match": _Spec(_EMPTY, attrs={"address": True, "port": False}),
    "replace": _Spec(_EMPTY, attrs={"address": True, "port": False}),
}

_ROOT_NAMES: Final = ("lbmrd", "lbmrdr")  # spec 06 §0: accept the seed's other spelling too
#: the versions of the file format (seed §16.3: ``version (1.0) #REQUIRED``)
VERSIONS: Final = ("1.0",)
_ROOT: Final = '<lbmrd version="1.0">'

# ---- the configuration


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A ``<match>`` or ``<replace>``: a host address and a port; ``port`` None is ``*``."""

    address: str
    port: int | None = None

    def __str__(self) -> str:
        return f"{self.address}:{'*' if self.port is None else self.port}"


@dataclass(frozen=True, slots=True)
class Rule:
    """``<rule>``: an advertised ``match`` address:port becomes ``replace`` (seed §16.1.4-6)."""

    match: Endpoint
    replace: Endpoint
    line: int = field(default=0, compare=False)

    def apply(self, address: str, port: int) -> tuple[str, int] | None:
        """The rewritten ``(address, port)``, or None when this rule does not match.

        ``*`` in ``<match>`` matches any port; ``*`` in ``<replace>`` keeps the matched port.
        """
        if address != self.match.address or (self.match.port is not None and port != self.match.port):
            return None
        return self.replace.address, port if self.replace.port is None else self.replace.port


@dataclass(frozen=True, slots=True)
class Transform:
    """``<transform>``: rules for TIRs sent from domain ``source`` to clients in ``destination``."""

    source: str
    destination: str
    rules: tuple[Rule, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Domain:
    """``<domain>``: a named set of networks; clients are sorted into domains by source address."""

    name: str
    networks: tuple[ipaddress.IPv4Network, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class DaemonSettings:
    """What ``<daemon>`` sets; None where the file does not set it.  ``lines``: field -> line."""

    interface: str | None = None
    port: int | None = None
    ttl: int | None = None
    activity: int | None = None
    log: str | None = None
    receiver_socket_buffer: int | None = None
    send_socket_buffer: int | None = None
    lines: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class LbmrdConfig:
    """One lbmrd configuration file, validated.  ``source`` is the file name (None: no file)."""

    daemon: DaemonSettings = field(default_factory=DaemonSettings)
    domains: tuple[Domain, ...] = ()
    transforms: tuple[Transform, ...] = ()
    source: str | None = None
    #: ``FILE:LINE: warning: ...`` for what the seed says "should" hold but does not
    warnings: tuple[str, ...] = ()


_DAEMON_PARSERS: Final[Mapping[str, Callable[[str], object]]] = {
    "activity": lambda t: parse_positive(t, "activity", "milliseconds"),
    "interface": parse_interface,
    "port": parse_port,
    "ttl": lambda t: parse_positive(t, "ttl", "seconds"),
    "log": parse_log,
    "receiver_socket_buffer": lambda t: parse_positive(t, "receive socket buffer", "bytes"),
    "send_socket_buffer": lambda t: parse_positive(t, "send socket buffer", "bytes"),
}

# XML 1.0 Name production (ASCII part; wider letters are accepted by \w): the syntax of ID values.
_XML_NAME: Final = re.compile(r"[^\W\d.-][\w.:-]*")

# ---- the parse tree (openum.config._xmltree: no entities, linear text, empty files refused)

_Node = XmlNode


def _parse_tree(data: bytes, source: str) -> _Node:
    return parse_xml_tree(data, source, _ROOT)


# ---- validation


def _describe(spec: _Spec) -> str:
    return spec.model


def _tag(name: str) -> str:
    """``<name>`` for a message; a long (hostile) name is shortened."""
    return f"<{shorten(name)}>"


def _names(names: list[str], most: int = 20) -> str:
    """``a, b, c`` for a message: at most ``most`` names, each shortened; ``none`` for no names."""
    if not names:
        return "none"
    shown = ", ".join(shorten(n) for n in names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[ConfigError] = []
        self.warnings: list[str] = []

    def error(self, line: int, message: str, value: str | None = None) -> None:
        """Record a problem; ``value``: the text the message echoes (shortened there when long)."""
        self.errors.append(ConfigError(message, source=self.source, line=line, value=value))

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(f"{self.source}:{line}: warning: {message}")

    # -- structure (the DTD)

    def structure(self, node: _Node, spec_name: str) -> None:
        spec = _SPECS[spec_name]
        tag = _tag(node.tag)
        for name in node.attrib:
            if name not in spec.attrs:
                allowed = ", ".join(spec.attrs) or "none"
                self.error(
                    node.line, f"attribute {shorten_repr(name)} is not allowed on {tag}; allowed: {allowed}"
                )
        for name, required in spec.attrs.items():
            if required and name not in node.attrib:
                self.error(node.line, f"{tag} needs the attribute '{name}'")
        if spec.kind in (_PCDATA, _EMPTY):
            for child in node.children:
                holds = "only text" if spec.kind == _PCDATA else "nothing (it is an EMPTY element)"
                self.error(child.line, f"{_tag(child.tag)} is not allowed inside {tag}; it holds {holds}")
            if spec.kind == _EMPTY and node.text.strip():
                self.error(node.text_line, f"text is not allowed inside {tag}; it is an EMPTY element")
            return
        if node.text.strip():
            self.error(
                node.text_line,
                f"text {shorten_repr(node.text.strip(), 40)} is not allowed inside {tag}; "
                f"it holds only the elements {_describe(spec)}",
            )
        names = [c[0] for c in spec.children]
        counts: dict[str, int] = {}
        highest = -1
        for child in node.children:
            if child.tag not in names:
                self.error(
                    child.line, f"{_tag(child.tag)} is not allowed inside {tag}; allowed: {_describe(spec)}"
                )
                continue
            index = names.index(child.tag)
            counts[child.tag] = counts.get(child.tag, 0) + 1
            maximum = spec.children[index][2]
            if maximum is not None and counts[child.tag] > maximum:
                self.error(
                    child.line,
                    f"<{child.tag}> may appear only {'once' if maximum == 1 else f'{maximum} times'} "
                    f"inside {tag}; allowed: {_describe(spec)}",
                )
            elif spec.ordered and index < highest:
                self.error(
                    child.line,
                    f"<{child.tag}> must come before <{names[highest]}> inside {tag}; "
                    f"allowed: {_describe(spec)}, in that order",
                )
            highest = max(highest, index)
            self.structure(child, child.tag)
        for name, minimum, maximum in spec.children:
            if counts.get(name, 0) < minimum:
                hint = ""
                if name in ("domains", "transformations"):
                    hint = " (mandatory even without NAT: use the dummy configuration of seed §16.2)"
                what = f"a <{name}>" if maximum == 1 else f"at least one <{name}>"
                self.error(node.line, f"{tag} needs {what}{hint}; allowed: {_describe(spec)}")

    # -- values

    def value(self, line: int, parse: Callable[[str], object], text: str) -> object:
        try:
            return parse(text)
        except ValueError as exc:
            self.error(line, str(exc), text.strip())
            return None


def _build(root: _Node, checker: _Checker) -> LbmrdConfig:
    """The configuration from a tree whose structure was checked (unknown parts were reported)."""
    version = root.attrib.get("version")
    if version is not None and version not in VERSIONS:
        allowed = ", ".join(f'"{v}"' for v in VERSIONS)
        checker.error(root.line, f"version {shorten_repr(version)} is not supported; allowed: {allowed}")

    settings: dict[str, object] = {}
    lines: dict[str, int] = {}
    domains: list[Domain] = []
    transforms: list[Transform] = []
    for section in root.children:
        if section.tag == "daemon":
            for child in section.children:
                name = DAEMON_FIELDS.get(child.tag)
                if name is None or child.children:
                    continue
                value = checker.value(child.line, _DAEMON_PARSERS[name], child.text)
                if value is None:
                    continue
                if name in lines:
                    checker.warn(child.line, f"<{child.tag}> is set again; line {lines[name]} is overridden")
                settings[name], lines[name] = value, child.line
        elif section.tag == "domains":
            domains += _domains(section, checker)
    ids = {d.name: d for d in domains}
    for section in root.children:
        if section.tag == "transformations":
            transforms += _transforms(section, ids, checker)
    daemon = DaemonSettings(**settings, lines=tuple(lines.items()))  # type: ignore[arg-type]
    return LbmrdConfig(daemon, tuple(domains), tuple(transforms), checker.source, tuple(checker.warnings))


def _domains(section: _Node, checker: _Checker) -> list[Domain]:
    out: list[Domain] = []
    kept: set[str] = set()
    seen: dict[str, int] = {}
    for node in section.children:
        if node.tag != "domain":
            continue
        name = node.attrib.get("name")
        if name is not None:
            if not _XML_NAME.fullmatch(name):
                checker.error(
                    node.line,
                    f"domain name {shorten_repr(name)} is not a valid XML ID; allowed: a name starting "
                    "with a letter or '_', then letters, digits, '.', '-', '_' or ':'",
                )
            elif name in seen:
                checker.error(
                    node.line,
                    f"domain name {shorten_repr(name)} is already defined at line {seen[name]}; "
                    "domain names (XML IDs) must be unique",
                )
            else:
                seen[name] = node.line
        networks: list[ipaddress.IPv4Network] = []
        for child in node.children:
            if child.tag != "network" or child.children:
                continue
            try:
                net, host_bits = parse_network(child.text)
            except ValueError as exc:
                checker.error(child.line, str(exc), child.text.strip())
                continue
            if host_bits:
                checker.warn(
                    child.line,
                    f"network {shorten_repr(child.text.strip())} has host bits set; it means {net}",
                )
            networks.append(net)
        if name is not None and name not in kept:
            kept.add(name)
            out.append(Domain(name, tuple(networks), node.line))
    return out


def _endpoint(node: _Node, checker: _Checker) -> Endpoint | None:
    address = node.attrib.get("address")
    if address is None:
        return None  # reported by the structure check
    ok = True
    try:
        host = parse_host(address)
    except ValueError as exc:
        checker.error(node.line, f"<{node.tag}> {exc}", address.strip())
        ok = False
    try:
        port = parse_rule_port(node.attrib.get("port", "*"))
    except ValueError as exc:
        checker.error(node.line, f"<{node.tag}> {exc}", node.attrib.get("port", "*").strip())
        ok = False
    return Endpoint(host, port) if ok else None


def _transforms(section: _Node, ids: Mapping[str, Domain], checker: _Checker) -> list[Transform]:
    out: list[Transform] = []
    known = _names(sorted(ids))
    for node in section.children:
        if node.tag != "transform":
            continue
        refs: dict[str, Domain | None] = {}
        for attr in ("source", "destination"):
            ref = node.attrib.get(attr)
            if ref is None:
                continue
            refs[attr] = ids.get(ref)
            if ref not in ids:
                checker.error(
                    node.line,
                    f"<transform {attr}={shorten_repr(ref)}> names no <domain> "
                    f"(an IDREF must match a domain name); defined domains: {known}",
                )
        rules: list[Rule] = []
        for rule in node.children:
            if rule.tag != "rule":
                continue
            parts = {c.tag: c for c in rule.children if c.tag in ("match", "replace")}
            if len(parts) != 2:
                continue  # reported by the structure check
            match = _endpoint(parts["match"], checker)
            replace = _endpoint(parts["replace"], checker)
            if match is None or replace is None:
                continue
            for what, endpoint, domain, line in (
                ("match", match, refs.get("source"), parts["match"].line),
                ("replace", replace, refs.get("destination"), parts["replace"].line),
            ):
                if domain is not None and not any(
                    ipaddress.IPv4Address(endpoint.address) in net for net in domain.networks
                ):
                    side = "source" if what == "match" else "destination"
                    checker.warn(
                        line,
                        f"<{what}> address {endpoint.address} is outside the {side} domain "
                        f"{shorten_repr(domain.name)} ({_names([str(n) for n in domain.networks])})",
                    )
            rules.append(Rule(match, replace, rule.line))
        source, destination = node.attrib.get("source"), node.attrib.get("destination")
        if source in ids and destination in ids and rules:
            out.append(Transform(source, destination, tuple(rules), node.line))  # type: ignore[arg-type]
    return out


def parse_config_text(data: str | bytes, source: str = "<config>") -> LbmrdConfig:
    """Parse and validate an lbmrd configuration; :class:`ConfigError` listing every problem."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    root = _parse_tree(raw, source)
    checker = _Checker(source)
    if root.tag not in _ROOT_NAMES:
        checker.error(root.line, f"the root element must be {_ROOT}, not {_tag(root.tag)}")
        raise ConfigError.collect(checker.errors)
    checker.structure(root, "lbmrd")
    config = _build(root, checker)
    if checker.errors:
        raise ConfigError.collect(sorted(checker.errors, key=lambda e: e.line or 0))
    return config


def parse_config_file(path: str | Path) -> LbmrdConfig:
    """Read and validate an lbmrd configuration file; errors name ``FILE:LINE``."""
    source = str(path)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the configuration file: {exc.strerror or exc}", source=source
        ) from None
    return parse_config_text(data, source)
