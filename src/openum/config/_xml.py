"""UM XML configuration files (``<um-configuration>``), as the UM Configuration Guide describes them.

Structure understood::

    <um-configuration version="1.0">
      <templates>
        <template name="T"> <options type="context|source|receiver|wildcard-receiver|event-queue">
          <option name="..." default-value="..." [order="deny,allow"]> [<allow>v</allow>] [<deny>v</deny>]
        </options> </template>
      </templates>
      <applications>
        <application name="A" template="T1,T2">
          <contexts template="...">
            <context name="C" template="..."> <options type="context">...</options>
              <sources template="..." order="deny,allow">
                <topic topicname="Orders" | pattern="^Ord.*" template="..." rule="allow|deny">
                  <options type="source">...</options> </topic> </sources>
              <receivers ...> (same, type="receiver") </receivers>
              <wildcard-receivers ...> <wildcard-receiver pattern="..." pattern-type="pcre" ...>
                <options type="wildcard-receiver">...</options> </wildcard-receiver> </wildcard-receivers>
            </context>
          </contexts>
          <event-queues> <event-queue name="Q" template="..."> <options type="event-queue">...
        </application>
      </applications>
    </um-configuration>

Resolution order for an object (each layer overrides the previous one): application templates,
``<contexts>`` template, ``<context>`` templates, ``<context>`` options, then for topics the
``<sources>``/``<receivers>`` template, the matching ``<topic>``'s templates and its options.  A topic
matches by exact ``topicname`` first, otherwise the first ``pattern`` (in document order) that
matches.  An unnamed ``<application>``, ``<context>`` or ``<event-queue>`` matches only unnamed
objects.  Option values may be restricted by ``<allow>``/``<deny>`` rules (``order="allow,deny"``:
deny unless allowed; ``order="deny,allow"``: allow unless denied; the last matching rule wins), and
topics by ``rule`` attributes the same way.

The root element's ``version`` must be ``1.0``.  The file is read with a cost linear in its size
(:mod:`openum.config._xmltree`): no ``<!DOCTYPE>`` declarations and so no entity expansion, an empty file
or one without a root element is refused, and a message shows a long value as its head and its size.

Errors name ``FILE:LINE``; a file with any error applies nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openum._errors import ConfigError, shorten, shorten_repr
from openum.config._flat import Setting
from openum.config._index import REGISTRY
from openum.config._registry import normalize_scope
from openum.config._xmltree import XmlNode, parse_xml_tree

__all__ = ["ObjectRules", "XmlConfig", "parse_xml_file", "parse_xml_text"]


#: the versions of the ``<um-configuration>`` file format (UM's DTD: ``version="1.0"``).
VERSIONS = ("1.0",)
_ROOT = '<um-configuration version="1.0">'

_Node = XmlNode


def _parse_tree(text: str, source: str) -> _Node:
    return parse_xml_tree(text, source, _ROOT)


@dataclass(frozen=True)
class _ValueRule:
    allow: bool
    values: tuple[str, ...]


@dataclass
class _OptionEntry:
    scope: str
    name: str
    origin: str
    setting: Setting | None  # None: the element only restricts values (no default-value)
    order: str  # "deny,allow" (default allow) or "allow,deny" (default deny)
    rules: list[_ValueRule]

    def permits(self, text: str) -> bool:
        verdict = self.order == "deny,allow"
        for rule in self.rules:
            if text.strip().lower() in (v.strip().lower() for v in rule.values):
                verdict = rule.allow
        return verdict


@dataclass
class _OptionBag:
    """Options by scope from one ``<options>`` group or template."""

    entries: list[_OptionEntry] = field(default_factory=list)


@dataclass
class _Topic:
    name: str | None
    pattern: re.Pattern[str] | None
    pattern_text: str | None
    rule: str | None
    templates: list[str]
    options: _OptionBag
    line: int


@dataclass
class _TopicSet:
    templates: list[str] = field(default_factory=list)
    order: str = "deny,allow"
    topics: list[_Topic] = field(default_factory=list)

    def match(self, topic: str) -> _Topic | None:
        for entry in self.topics:
            if entry.name is not None and entry.name == topic:
                return entry
        for entry in self.topics:
            if entry.pattern is not None and entry.pattern.search(topic):
                return entry
        return None

    def permits(self, topic: str) -> bool:
        verdict = self.order == "deny,allow"
        for entry in self.topics:
            if entry.rule is None:
                continue
            hit = (
                entry.name == topic
                if entry.name is not None
                else bool(entry.pattern and entry.pattern.search(topic))
            )
            if hit:
                verdict = entry.rule == "allow"
        return verdict


@dataclass
class _Context:
    name: str | None
    templates: list[str]
    options: _OptionBag
    sources: _TopicSet
    receivers: _TopicSet
    wildcard_receivers: _TopicSet
    line: int


@dataclass
class _Application:
    name: str | None
    templates: list[str]
    contexts_templates: list[str]
    contexts: list[_Context]
    event_queues: list[tuple[str | None, list[str], _OptionBag]]
    line: int


@dataclass
class ObjectRules:
    """What an XML file says about one object: settings in layer order, and value restrictions."""

    settings: list[Setting]
    restrictions: list[tuple[str, str, _OptionEntry, str]]  # (scope, option, entry, origin)

    def check(self, scope: str, values: dict[str, str]) -> None:
        """Raise :class:`ConfigError` if an effective value is refused by an allow/deny rule."""
        errors: list[ConfigError] = []
        for r_scope, name, entry, origin in self.restrictions:
            if r_scope == scope and name in values and not entry.permits(values[name]):
                errors.append(
                    ConfigError(
                        f"value {shorten_repr(values[name])} of {scope} option {name} is denied by the XML "
                        f"configuration ({origin})",
                        option=name,
                        scope=scope,
                        value=values[name],
                        allowed=", ".join(
                            f"{'allow' if r.allow else 'deny'} {'|'.join(r.values)}" for r in entry.rules
                        )
                        + f" (order {entry.order})",
                    )
                )
        if errors:
            raise ConfigError.collect(errors)


class XmlConfig:
    """A parsed ``<um-configuration>`` file, resolved per application, context and topic."""

    def __init__(
        self, source: str, templates: dict[str, dict[str, _OptionBag]], applications: list[_Application]
    ):
        self.source = source
        self._templates = templates
        self._applications = applications

    @property
    def application_names(self) -> list[str | None]:
        return [a.name for a in self._applications]

    def settings(self) -> list[Setting]:
        """Every option setting the file makes, wherever it is (templates, contexts, topics, queues)."""
        bags: list[_OptionBag] = [bag for scopes in self._templates.values() for bag in scopes.values()]
        for app in self._applications:
            bags += [options for _name, _templates, options in app.event_queues]
            for ctx in app.contexts:
                bags.append(ctx.options)
                for tset in (ctx.sources, ctx.receivers, ctx.wildcard_receivers):
                    bags += [topic.options for topic in tset.topics]
        return [entry.setting for bag in bags for entry in bag.entries if entry.setting is not None]

    def _application(self, name: str | None) -> _Application | None:
        for app in self._applications:
            if app.name is not None and app.name == name:
                return app
        for app in self._applications:
            if app.name is None:
                return app
        if not self._applications:
            return None
        names = _names([repr(a.name) for a in self._applications])
        raise ConfigError(
            f"no <application> matches application name {_repr(name)} (the file has {names}); add one with "
            f"that name or an unnamed <application>, or set LBM_XML_CONFIG_APPNAME",
            value=name,
            source=self.source,
        )

    def _template_bags(self, names: list[str], scope: str) -> list[_OptionBag]:
        bags = []
        for name in names:
            scopes = self._templates.get(name, {})
            if scope in scopes:
                bags.append(scopes[scope])
        return bags

    def _context(self, app: _Application, name: str | None) -> _Context | None:
        for ctx in app.contexts:
            if ctx.name == name:
                return ctx
        return None

    def rules_for(
        self,
        scope: str,
        *,
        application: str | None,
        context: str | None,
        topic: str | None = None,
        event_queue: str | None = None,
    ) -> ObjectRules:
        """The layered settings for an object of ``scope`` (and the value restrictions)."""
        scope = normalize_scope(scope)
        app = self._application(application)
        bags: list[_OptionBag] = []
        if app is not None:
            bags += self._template_bags(app.templates, scope)
            if scope == "event_queue":
                for q_name, q_templates, q_options in app.event_queues:
                    if q_name == event_queue:
                        bags += self._template_bags(q_templates, scope)
                        bags.append(q_options)
            else:
                bags += self._template_bags(app.contexts_templates, scope)
                ctx = self._context(app, context)
                if ctx is not None:
                    bags += self._template_bags(ctx.templates, scope)
                    bags.append(_filter(ctx.options, scope))
                    topic_set = {
                        "source": ctx.sources,
                        "receiver": ctx.receivers,
                        "wildcard_receiver": ctx.wildcard_receivers,
                    }.get(scope)
                    if topic_set is not None and topic is not None:
                        bags += self._template_bags(topic_set.templates, scope)
                        matched = topic_set.match(topic)
                        if matched is not None:
                            bags += self._template_bags(matched.templates, scope)
                            bags.append(_filter(matched.options, scope))
        settings: list[Setting] = []
        restrictions: list[tuple[str, str, _OptionEntry, str]] = []
        for bag in bags:
            for entry in bag.entries:
                if entry.scope != scope:
                    continue
                if entry.setting is not None:
                    settings.append(entry.setting)
                if entry.rules:
                    restrictions.append((scope, entry.name, entry, entry.origin))
        return ObjectRules(settings, restrictions)

    def topic_permitted(
        self, scope: str, topic: str, *, application: str | None, context: str | None
    ) -> bool:
        """False when ``<sources>``/``<receivers>``/``<wildcard-receivers>`` rules deny ``topic``."""
        app = self._application(application)
        if app is None:
            return True
        ctx = self._context(app, context)
        if ctx is None:
            return True
        topic_set = {
            "source": ctx.sources,
            "receiver": ctx.receivers,
            "wildcard_receiver": ctx.wildcard_receivers,
        }[normalize_scope(scope)]
        return topic_set.permits(topic)


def _filter(bag: _OptionBag, scope: str) -> _OptionBag:
    return _OptionBag([e for e in bag.entries if e.scope == scope])


_NAME_LIST = re.compile(r"\s*,\s*")


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[ConfigError] = []

    def error(self, message: str, node: _Node, **fields: Any) -> None:
        self.errors.append(ConfigError(message, source=self.source, line=node.line, **fields))

    def names(self, node: _Node, attr: str = "template") -> list[str]:
        raw = node.attrib.get(attr, "").strip()
        return [n for n in _NAME_LIST.split(raw) if n] if raw else []

    def expect(self, node: _Node, allowed: set[str]) -> None:
        for child in node.children:
            if child.tag not in allowed:
                self.error(
                    f"unexpected element <{shorten(child.tag)}> inside <{node.tag}>",
                    child,
                    allowed="elements: " + ", ".join(f"<{a}>" for a in sorted(allowed)),
                )

    def options(self, node: _Node, bag: _OptionBag) -> None:
        type_attr = node.attrib.get("type")
        if type_attr is None:
            self.error(
                "<options> needs a type attribute",
                node,
                allowed="context, source, receiver, wildcard-receiver, event-queue, hfx, xsp",
            )
            return
        try:
            scope = normalize_scope(type_attr)
        except ConfigError as exc:
            self.error(exc.reason, node, scope=type_attr, allowed=exc.allowed)
            return
        for child in node.children:
            if child.tag != "option":
                self.error(
                    f"unexpected element <{shorten(child.tag)}> inside <options>", child, allowed="<option>"
                )
                continue
            self.option(child, scope, bag)

    def option(self, node: _Node, scope: str, bag: _OptionBag) -> None:
        name = node.attrib.get("name")
        if not name:
            self.error("<option> needs a name attribute", node)
            return
        order = node.attrib.get("order", "deny,allow").replace(" ", "").lower()
        if order not in ("deny,allow", "allow,deny"):
            self.error(
                f"invalid order {shorten_repr(order)} on option {shorten(name)}",
                node,
                option=name,
                allowed="deny,allow or allow,deny",
            )
            return
        rules = []
        for child in node.children:
            if child.tag in ("allow", "deny"):
                values = tuple(v.text.strip() for v in child.find_all("value")) or (child.text.strip(),)
                rules.append(_ValueRule(child.tag == "allow", values))
            else:
                self.error(
                    f"unexpected element <{shorten(child.tag)}> inside <option>",
                    child,
                    allowed="<allow>, <deny>",
                )
        setting = None
        origin = f"{self.source}:{node.line}"
        if "default-value" in node.attrib:
            value = node.attrib["default-value"]
            try:
                opt, typed = REGISTRY.convert(scope, name, value, from_text=True)
                setting = Setting(scope, opt, typed, origin)
            except ConfigError as exc:
                self.error(
                    exc.reason,
                    node,
                    option=exc.option,
                    scope=scope,
                    value=value,
                    allowed=exc.allowed,
                    suggestions=exc.suggestions,
                )
                return
        else:
            try:
                opt = REGISTRY.lookup(scope, name)
            except ConfigError as exc:
                self.error(
                    exc.reason,
                    node,
                    option=name,
                    scope=scope,
                    allowed=exc.allowed,
                    suggestions=exc.suggestions,
                )
                return
        if setting is not None or rules:
            bag.entries.append(_OptionEntry(scope, opt.name, origin, setting, order, rules))

    def bag(self, node: _Node) -> _OptionBag:
        bag = _OptionBag()
        for child in node.find_all("options"):
            self.options(child, bag)
        return bag

    def topic_set(self, node: _Node | None, scope: str, item_tag: str) -> _TopicSet:
        if node is None:
            return _TopicSet()
        order = node.attrib.get("order", "deny,allow").replace(" ", "").lower()
        tset = _TopicSet(self.names(node), order if order in ("deny,allow", "allow,deny") else "deny,allow")
        self.expect(node, {item_tag, "topic"} if item_tag != "topic" else {"topic"})
        for child in node.children:
            if child.tag not in (item_tag, "topic"):
                continue
            self.expect(child, {"options", "application-data"})
            name = child.attrib.get("topicname")
            pattern_text = child.attrib.get("pattern")
            if (name is None) == (pattern_text is None):
                self.error(f"<{child.tag}> needs exactly one of topicname or pattern", child)
                continue
            pattern = None
            if pattern_text is not None:
                try:
                    pattern = re.compile(pattern_text)
                except re.error as exc:
                    self.error(
                        f"invalid pattern {shorten_repr(pattern_text)}: {exc}", child, value=pattern_text
                    )
                    continue
            rule = child.attrib.get("rule")
            if rule is not None and rule not in ("allow", "deny"):
                self.error(f"invalid rule {shorten_repr(rule)}", child, value=rule, allowed="allow or deny")
                continue
            bag = self.bag(child)
            for entry in bag.entries:
                if entry.scope != scope:
                    self.error(
                        f'<options type="{entry.scope}"> cannot appear inside <{node.tag}>',
                        child,
                        allowed=f'<options type="{scope.replace("_", "-")}">',
                    )
            tset.topics.append(_Topic(name, pattern, pattern_text, rule, self.names(child), bag, child.line))
        return tset


def parse_xml_text(text: str, source: str) -> XmlConfig:
    """Parse and check the XML text of a UM configuration file."""
    root = _parse_tree(text, source)
    reader = _Reader(source)
    if root.tag != "um-configuration":
        raise ConfigError(
            f"the root element is <{shorten(root.tag)}>, not <um-configuration>; allowed: {_ROOT}",
            source=source,
            line=root.line,
        )
    version = root.attrib.get("version")
    if version not in VERSIONS:
        allowed = ", ".join(f'"{v}"' for v in VERSIONS)
        reader.error(
            (
                "<um-configuration> needs a version attribute"
                if version is None
                else f"<um-configuration> version {shorten_repr(version)} is not supported"
            )
            + f"; allowed: version={allowed}",
            root,
            value=version,
            allowed=f"version={allowed}",
        )
    reader.expect(root, {"templates", "applications"})
    templates: dict[str, dict[str, _OptionBag]] = {}
    for tnode in root.find_all("templates"):
        reader.expect(tnode, {"template"})
        for template in tnode.find_all("template"):
            name = template.attrib.get("name")
            if not name:
                reader.error("<template> needs a name", template)
                continue
            reader.expect(template, {"options"})
            by_scope: dict[str, _OptionBag] = {}
            bag = reader.bag(template)
            for entry in bag.entries:
                by_scope.setdefault(entry.scope, _OptionBag()).entries.append(entry)
            templates[name] = by_scope
    applications: list[_Application] = []
    for anode in root.find_all("applications"):
        reader.expect(anode, {"application"})
        for app in anode.find_all("application"):
            reader.expect(app, {"contexts", "event-queues", "application-data"})
            contexts: list[_Context] = []
            contexts_templates: list[str] = []
            for cnode in app.find_all("contexts"):
                contexts_templates += reader.names(cnode)
                reader.expect(cnode, {"context"})
                for ctx in cnode.find_all("context"):
                    reader.expect(
                        ctx, {"options", "sources", "receivers", "wildcard-receivers", "application-data"}
                    )
                    contexts.append(
                        _Context(
                            ctx.attrib.get("name") or None,
                            reader.names(ctx),
                            reader.bag(ctx),
                            reader.topic_set(ctx.find("sources"), "source", "topic"),
                            reader.topic_set(ctx.find("receivers"), "receiver", "topic"),
                            reader.topic_set(
                                ctx.find("wildcard-receivers"), "wildcard_receiver", "wildcard-receiver"
                            ),
                            ctx.line,
                        )
                    )
            queues: list[tuple[str | None, list[str], _OptionBag]] = []
            for qnode in app.find_all("event-queues"):
                reader.expect(qnode, {"event-queue"})
                for queue in qnode.find_all("event-queue"):
                    queues.append((queue.attrib.get("name") or None, reader.names(queue), reader.bag(queue)))
            applications.append(
                _Application(
                    app.attrib.get("name") or None,
                    reader.names(app),
                    contexts_templates,
                    contexts,
                    queues,
                    app.line,
                )
            )

    # Every template named anywhere must exist.
    def check_names(names: list[str], line: int) -> None:
        for name in names:
            if name not in templates:
                reader.errors.append(
                    ConfigError(
                        f"unknown template {shorten_repr(name)}",
                        source=source,
                        line=line,
                        value=name,
                        allowed="templates: " + (_names(sorted(templates)) or "(none defined)"),
                    )
                )

    for application in applications:
        check_names(application.templates, application.line)
        check_names(application.contexts_templates, application.line)
        for context in application.contexts:
            check_names(context.templates, context.line)
            for tset in (context.sources, context.receivers, context.wildcard_receivers):
                check_names(tset.templates, context.line)
                for topic in tset.topics:
                    check_names(topic.templates, topic.line)
    if reader.errors:
        raise ConfigError.collect(reader.errors)
    return XmlConfig(source, templates, applications)


def parse_xml_file(path: str | Path) -> XmlConfig:
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file: {exc.strerror or exc}", source=str(file)
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file is not UTF-8 text ({exc.reason})", source=str(file)) from None
    return parse_xml_text(text, str(file))


def _repr(name: str | None) -> str:
    return "None" if name is None else shorten_repr(name)


def _names(names: list[str], most: int = 20) -> str:
    """``a, b, c`` for a message: at most ``most`` names, each shortened."""
    shown = ", ".join(shorten(n) for n in names[:most])
    return shown if len(names) <= most else f"{shown} and {len(names) - most} more"


def looks_like_xml(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("<?xml", "<um-configuration", "<!--", "<!DOCTYPE"))
