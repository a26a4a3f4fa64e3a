"""UM flat configuration files: one ``scope option value`` per line (seed 5).

Blank lines and lines starting with ``#`` are ignored; a ``#`` preceded by white space ends the value
(an inline comment).  The value is the rest of the line, so values may contain spaces.  Every line
is checked before anything is applied: a file with one bad line applies nothing, and the error lists
every bad line as ``FILE:LINE: message``; a long value is shown as its head and its size.  An empty
file (nothing but white space) is refused: it is more likely a mistake than a wish for no settings,
which a file holding only a comment says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openum._errors import ConfigError, shorten_repr
from openum.config._index import REGISTRY
from openum.config._registry import Option, normalize_scope

__all__ = ["Setting", "parse_flat_file", "parse_flat_text", "parse_option_line", "settings_from_mapping"]

_INLINE_COMMENT = re.compile(r"\s#.*$")


@dataclass(frozen=True, slots=True)
class Setting:
    """One validated option setting and where it came from (``FILE:LINE``, ``--option``, ...)."""

    scope: str
    option: Option
    value: Any
    origin: str

    @property
    def line_text(self) -> str:
        """The setting as a flat-file line."""
        return f"{self.scope} {self.option.name} {self.option.type.format(self.value)}"


def _located(exc: ConfigError, source: str, line: int | None) -> ConfigError:
    return ConfigError(
        exc.reason,
        option=exc.option,
        scope=exc.scope,
        value=exc.value,
        allowed=exc.allowed,
        source=source,
        line=line,
        suggestions=exc.suggestions,
    )


def parse_option_line(text: str, *, source: str = "--option", line: int | None = None) -> Setting:
    """Parse ``scope option value`` (a flat-file line or a ``--option`` argument)."""
    parts = text.strip().split(None, 2)
    if len(parts) < 3:
        raise ConfigError(
            f"expected 'SCOPE OPTION VALUE', got {shorten_repr(text.strip())}",
            value=text,
            allowed="SCOPE OPTION VALUE, e.g. 'context resolver_multicast_port 12965'",
            source=source,
            line=line,
        )
    scope_text, name, value = parts
    try:
        scope = normalize_scope(scope_text)
        opt, typed = REGISTRY.convert(scope, name, value.strip(), from_text=True)
    except ConfigError as exc:
        raise _located(exc, source, line) from None
    origin = f"{source}:{line}" if line is not None else source
    return Setting(scope, opt, typed, origin)


def parse_flat_text(text: str, source: str) -> list[Setting]:
    """Every setting of a flat file's text; :class:`ConfigError` listing every bad line."""
    if not text or text.isspace():
        raise ConfigError(
            "the configuration file is empty; allowed: 'SCOPE OPTION VALUE' lines (a flat file), "
            "comments starting with '#', or an XML <um-configuration> document",
            source=source,
        )
    settings: list[Setting] = []
    errors: list[ConfigError] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        stripped = _INLINE_COMMENT.sub("", stripped)
        try:
            settings.append(parse_option_line(stripped, source=source, line=number))
        except ConfigError as exc:
            errors.append(exc)
    if errors:
        raise ConfigError.collect(errors)
    return settings


def parse_flat_file(path: str | Path) -> list[Setting]:
    """Read and check a flat configuration file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"cannot read configuration file: {exc.strerror or exc}", source=str(file)
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file is not UTF-8 text ({exc.reason})", source=str(file)) from None
    return parse_flat_text(text, str(file))


def settings_from_mapping(values: Mapping[str, Any], source: str = "dict") -> list[Setting]:
    """Settings from a Python mapping.

    Two shapes are accepted: ``{"context": {"option": value}, "source": {...}}`` (scope first), or
    ``{"context option": value}`` / ``{("context", "option"): value}``.  Values may be text or typed.
    """
    settings: list[Setting] = []
    errors: list[ConfigError] = []

    def add(scope: str, name: str, value: Any) -> None:
        try:
            norm = normalize_scope(scope)
            opt, typed = REGISTRY.convert(norm, name, value, from_text=isinstance(value, str))
            settings.append(Setting(norm, opt, typed, source))
        except ConfigError as exc:
            errors.append(_located(exc, source, None))

    for key, value in values.items():
        if isinstance(key, tuple) and len(key) == 2:
            add(str(key[0]), str(key[1]), value)
        elif isinstance(key, str) and isinstance(value, Mapping):
            for name, inner in value.items():
                add(key, str(name), inner)
        elif isinstance(key, str) and len(key.split()) == 2:
            scope, name = key.split()
            add(scope, name, value)
        else:
            errors.append(
                ConfigError(
                    f"cannot read configuration key {shorten_repr(str(key))}",
                    value=key,
                    allowed="{'scope': {'option': value}}, {'scope option': value} or "
                    "{('scope', 'option'): value}",
                    source=source,
                )
            )
    if errors:
        raise ConfigError.collect(errors)
    return settings


def format_settings(settings: Iterable[Setting]) -> str:
    """Flat-file text for ``settings`` (one per line)."""
    return "".join(s.line_text + "\n" for s in settings)
