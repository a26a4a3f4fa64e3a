"""Layered configuration: defaults, XML files, flat files, mappings, ``--option`` and code.

Precedence, lowest first (as UM applies them, seed 5 and the UM Configuration Guide):

1. the registry's defaults;
2. XML configuration files (per application, context, topic and event queue);
3. flat files, Python mappings and ``--option`` settings, in the order they were loaded (the last
   setting of an option wins);
4. attributes set from code when the object is created.

XML ``<allow>``/``<deny>`` rules are checked against the final value.  The process-wide default
configuration (like UM's ``lbm_config()``) is read once from ``LBM_DEFAULT_CONFIG_FILE`` or
``OPENUM_CONFIG_FILE`` (flat or XML) and ``LBM_XML_CONFIG_FILENAME`` with
``LBM_XML_CONFIG_APPNAME``; :func:`load_config` adds files to it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from openum._errors import ConfigError
from openum.config._attributes import Attributes, attributes_for
from openum.config._flat import Setting, parse_flat_text, parse_option_line, settings_from_mapping
from openum.config._index import REGISTRY
from openum.config._registry import normalize_scope
from openum.config._xml import XmlConfig, looks_like_xml, parse_xml_text

__all__ = [
    "Config",
    "ConfigSource",
    "default_config",
    "load_config",
    "reset_default_config",
]

ENV_FLAT = ("LBM_DEFAULT_CONFIG_FILE", "OPENUM_CONFIG_FILE")
ENV_XML_FILE = "LBM_XML_CONFIG_FILENAME"
ENV_XML_APP = "LBM_XML_CONFIG_APPNAME"


class Config:
    """An ordered set of configuration sources, resolved per object.

    ``Config("app.cfg", {"context": {"operational_mode": "sequential"}})`` loads both (files are
    flat or XML, told apart by their content). ``application`` selects the XML ``<application>``.
    """

    def __init__(self, *sources: ConfigSource, application: str | None = None) -> None:
        self.application = application
        self._settings: list[Setting] = []
        self._xml: list[XmlConfig] = []
        self._files: list[str] = []
        for source in sources:
            self.load(source)

    # -- loading (each call is all-or-nothing) ---------------------------------------------------------
    def load(self, source: ConfigSource) -> Config:
        """Add a file path, mapping or :class:`Config`; refused sources change nothing."""
        if isinstance(source, Config):
            self._settings.extend(source._settings)
            self._xml.extend(source._xml)
            self._files.extend(source._files)
            if self.application is None:
                self.application = source.application
        elif isinstance(source, Mapping):
            self._settings.extend(settings_from_mapping(source))
        elif isinstance(source, str | os.PathLike):
            self.load_file(source)
        else:
            raise ConfigError(
                f"cannot load configuration from {type(source).__name__}",
                allowed="a file path, a mapping or a Config",
            )
        return self

    def load_file(self, path: str | os.PathLike[str]) -> Config:
        """Load a flat or XML configuration file (detected from its content)."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError("configuration file not found", source=str(file)) from None
        except OSError as exc:
            raise ConfigError(
                f"cannot read configuration file: {exc.strerror or exc}", source=str(file)
            ) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"configuration file is not UTF-8 text ({exc.reason})", source=str(file)
            ) from None
        if looks_like_xml(text):
            self._xml.append(parse_xml_text(text, str(file)))
        else:
            self._settings.extend(parse_flat_text(text, str(file)))
        self._files.append(str(file))
        return self

    def set_option(self, line: str, *, source: str = "--option") -> Config:
        """Apply one ``scope option value`` line (as ``--option`` does)."""
        self._settings.append(parse_option_line(line, source=source))
        return self

    def set_options(self, lines: Iterable[str], *, source: str = "--option") -> Config:
        """Apply several lines; none is applied if one is refused."""
        staged: list[Setting] = []
        errors: list[ConfigError] = []
        for line in lines:
            try:
                staged.append(parse_option_line(line, source=source))
            except ConfigError as exc:
                errors.append(exc)
        if errors:
            raise ConfigError.collect(errors)
        self._settings.extend(staged)
        return self

    def set(self, scope: str, option: str, value: Any, *, source: str = "code") -> Config:
        norm = normalize_scope(scope)
        opt, typed = REGISTRY.convert(norm, option, value, from_text=isinstance(value, str))
        self._settings.append(Setting(norm, opt, typed, source))
        return self

    def copy(self) -> Config:
        return Config(self, application=self.application)

    # -- reading ---------------------------------------------------------------------------------------
    @property
    def files(self) -> list[str]:
        return list(self._files)

    @property
    def settings(self) -> list[Setting]:
        """The flat settings (files, mappings, ``--option``) in load order."""
        return list(self._settings)

    def attributes(
        self,
        scope: str,
        *,
        context: str | None = None,
        topic: str | None = None,
        event_queue: str | None = None,
        overrides: Attributes | Mapping[str, Any] | None = None,
    ) -> Attributes:
        """The effective attributes of one object, checked (ranges and XML allow/deny rules)."""
        norm = normalize_scope(scope)
        attrs = attributes_for(norm)
        rules = []
        for xml in self._xml:
            obj = xml.rules_for(
                norm, application=self.application, context=context, topic=topic, event_queue=event_queue
            )
            for setting in obj.settings:
                attrs.set_typed(setting.option, setting.value, setting.origin)
            rules.append(obj)
        for setting in self._settings:
            if setting.scope == norm:
                attrs.set_typed(setting.option, setting.value, setting.origin)
        if overrides is not None:
            if isinstance(overrides, Attributes):
                attrs = attrs.merged(overrides)
            else:
                attrs.update(overrides)
        attrs.validate()
        if rules:
            text_values = {name: attrs.get_str(name) for name, _ in attrs.items()}
            for obj in rules:
                obj.check(norm, text_values)
        return attrs

    def unimplemented(self) -> list[Setting]:
        """The settings (files, mappings, ``--option``, XML anywhere) of options or values openum does not
        implement: only ever non-empty when they are let through (``OPENUM_UNIMPLEMENTED_OPTIONS=warn``)."""
        found = [s for s in self._settings if not REGISTRY.permits(s.scope, s.option, s.value)]
        for xml in self._xml:
            found += [s for s in xml.settings() if not REGISTRY.permits(s.scope, s.option, s.value)]
        return found

    def topic_permitted(self, scope: str, topic: str, *, context: str | None = None) -> bool:
        """False when an XML file's topic rules deny ``topic`` for sources/receivers of ``context``."""
        return all(
            xml.topic_permitted(scope, topic, application=self.application, context=context)
            for xml in self._xml
        )

    def check(self) -> None:
        """Resolve the context-level attributes of every scope once, so range errors surface now."""
        for scope in ("context", "source", "receiver", "wildcard_receiver", "event_queue"):
            self.attributes(scope)

    def __repr__(self) -> str:
        return f"<Config files={self._files} settings={len(self._settings)} application={self.application!r}>"


#: What :class:`Config` accepts as a source: a file path, a mapping or another :class:`Config`.
ConfigSource = str | os.PathLike[str] | Mapping[Any, Any] | Config

_default_lock = threading.Lock()
_default: Config | None = None


def _from_environment() -> Config:
    config = Config(application=os.environ.get(ENV_XML_APP) or None)
    for var in ENV_FLAT:
        path = os.environ.get(var)
        if path:
            try:
                config.load_file(path)
            except ConfigError as exc:
                raise ConfigError(
                    f"{exc} (file named by ${var})",
                    source=exc.source,
                    line=exc.line,
                    option=exc.option,
                    scope=exc.scope,
                    value=exc.value,
                    allowed=exc.allowed,
                    errors=exc.errors if len(exc.errors) > 1 else (),
                ) from None
    xml_path = os.environ.get(ENV_XML_FILE)
    if xml_path:
        config.load_file(xml_path)
    return config


def default_config() -> Config:
    """The process-wide configuration (environment files plus :func:`load_config` calls)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = _from_environment()
        return _default


def load_config(source: ConfigSource, *, application: str | None = None) -> None:
    """Add a configuration file or mapping to the process-wide defaults (UM's ``lbm_config()``).

    Affects objects created afterwards.  Nothing is applied if the source has an error.
    """
    staged = Config(source, application=application)
    config = default_config()
    with _default_lock:
        config.load(staged)
        if application is not None:
            config.application = application


def reset_default_config() -> None:
    """Forget the process-wide configuration (it is re-read from the environment on next use)."""
    global _default
    with _default_lock:
        _default = None
