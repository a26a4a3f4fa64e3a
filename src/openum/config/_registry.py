"""The option registry: lookup, validation and suggestions over the one option table.

The table itself is :mod:`openum.config._options` (ARCHITECTURE.md rule 4: one registry drives
validation, defaults, configuration files, the docs and the CLI; no option is parsed anywhere else).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from openum._errors import ConfigError
from openum.config._types import OptionType, OptionValueError

__all__ = [
    "SCOPES",
    "Option",
    "Registry",
    "normalize_scope",
]

#: The option scopes of UM (seed 5): each attribute object belongs to one.
SCOPES: Final[tuple[str, ...]] = (
    "context",
    "source",
    "receiver",
    "wildcard_receiver",
    "event_queue",
    "hfx",
    "xsp",
)

_SCOPE_ALIASES: Final[Mapping[str, str]] = {
    "wildcard-receiver": "wildcard_receiver",
    "event-queue": "event_queue",
    "topic": "source",
}


def normalize_scope(scope: str) -> str:
    """``wildcard-receiver`` (XML spelling) -> ``wildcard_receiver``; refuses unknown scopes."""
    key = scope.strip().lower()
    key = _SCOPE_ALIASES.get(key, key)
    if key not in SCOPES:
        close = difflib.get_close_matches(key, SCOPES, n=2, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ConfigError(
            f"unknown scope {scope!r}{hint} Scopes are: {', '.join(SCOPES)}",
            scope=scope,
            allowed=", ".join(SCOPES),
            suggestions=close,
        )
    return key


@dataclass(frozen=True, slots=True)
class Option:
    """One configuration option as UM names it.

    ``default_from`` says where the default comes from: ``"guide"`` (the Concepts Guide states it, at
    ``section``), ``"um"`` (UM's documented default from the UM Configuration Guide) or ``"openum"``
    (openum's own choice, explained in ``note``: e.g. loopback instead of the first interface).
    ``session`` marks options of a transport session: when several sources (receivers) share a
    session, the first one's value wins and later conflicting values are logged (seed 3.3.3, 3.4.1).
    """

    name: str
    scopes: tuple[str, ...]
    type: OptionType
    default: Any
    doc: str
    section: str = ""
    unit: str = ""
    default_from: str = "um"
    session: bool = False
    deprecated: bool = False
    note: str = ""
    #: For a spelling the Concepts Guide uses that is not UM's real name: the real option's name.
    #: Setting the alias sets the real option; the alias is listed so guide readers find it.
    alias_of: str = ""

    def __post_init__(self) -> None:
        for scope in self.scopes:
            if scope not in SCOPES:
                raise ValueError(f"option {self.name}: unknown scope {scope!r}")
        if self.default_from not in ("guide", "um", "openum"):
            raise ValueError(f"option {self.name}: default_from must be guide, um or openum")
        if self.default is not None and not self.type.code_only:
            # The table is checked when imported: every default must be a value its type accepts.
            try:
                checked = self.type.coerce(self.default)
            except OptionValueError as exc:
                raise ValueError(f"option {self.name}: default {self.default!r} invalid: {exc}") from None
            if checked != self.default:
                raise ValueError(
                    f"option {self.name}: default {self.default!r} is not normalised ({checked!r})"
                )

    @property
    def default_text(self) -> str:
        """The default as a flat configuration file would write it."""
        if self.default is None:
            return ""
        return self.type.format(self.default)

    @property
    def allowed(self) -> str:
        return self.type.describe()


class Registry:
    """Index of the option table by ``(scope, name)`` with UM's error reporting."""

    def __init__(self, options: tuple[Option, ...]) -> None:
        self._options = options
        self._index: dict[tuple[str, str], Option] = {}
        self._aliases: dict[tuple[str, str], str] = {}
        self._names_by_scope: dict[str, list[str]] = {s: [] for s in SCOPES}
        for opt in options:
            for scope in opt.scopes:
                key = (scope, opt.name)
                if key in self._index:
                    raise ValueError(f"option table lists ({scope}, {opt.name}) twice")
                self._index[key] = opt
                self._names_by_scope[scope].append(opt.name)
                if opt.alias_of:
                    self._aliases[key] = opt.alias_of
        for (scope, name), target in self._aliases.items():
            real = self._index.get((scope, target))
            if real is None or real.alias_of:
                raise ValueError(
                    f"alias ({scope}, {name}) names {target!r}, which is not an option of {scope}"
                )
            alias = self._index[(scope, name)]
            if alias.type != real.type or alias.default != real.default:
                raise ValueError(f"alias ({scope}, {name}) must have the type and default of {target}")
        for names in self._names_by_scope.values():
            names.sort()

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def pairs(self, scope: str | None = None) -> Iterator[tuple[str, Option]]:
        """Every ``(scope, option)`` pair, ordered by scope (as :data:`SCOPES`) then name."""
        for s in SCOPES if scope is None else (normalize_scope(scope),):
            for name in self._names_by_scope[s]:
                yield s, self._index[(s, name)]

    def names(self, scope: str, *, include_aliases: bool = False) -> list[str]:
        """Option names of ``scope`` (aliases only when asked: they duplicate a real option)."""
        norm = normalize_scope(scope)
        names = self._names_by_scope[norm]
        if include_aliases:
            return list(names)
        return [n for n in names if (norm, n) not in self._aliases]

    def get(self, scope: str, name: str) -> Option | None:
        """The option (an alias resolves to its real option), or None."""
        target = self._aliases.get((scope, name))
        return self._index.get((scope, target or name))

    def listed(self, scope: str, name: str) -> Option | None:
        """The row as listed (an alias row stays an alias row)."""
        return self._index.get((scope, name))

    def lookup(self, scope: str, name: str, *, value: Any = None) -> Option:
        """The option ``name`` of ``scope``; a :class:`ConfigError` with suggestions otherwise."""
        scope = normalize_scope(scope)
        key = name.strip().lower()
        opt = self.get(scope, key)
        if opt is not None:
            return opt
        other_scopes = [s for s in SCOPES if (s, key) in self._index]
        if other_scopes:
            raise ConfigError(
                f"option {key!r} does not exist in scope {scope!r}; it is an option of scope "
                f"{' and '.join(other_scopes)} (write e.g. '{other_scopes[0]} {key} ...')",
                option=key,
                scope=scope,
                value=value,
                allowed=f"scopes: {', '.join(other_scopes)}",
                suggestions=[f"{s} {key}" for s in other_scopes],
            )
        close = difflib.get_close_matches(key, self._names_by_scope[scope], n=3, cutoff=0.75)
        if not close:
            everywhere = sorted({n for names in self._names_by_scope.values() for n in names})
            close = difflib.get_close_matches(key, everywhere, n=3, cutoff=0.75)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ConfigError(
            f"unknown option {key!r} in scope {scope!r}{hint}",
            option=key,
            scope=scope,
            value=value,
            allowed="see 'openum config options --scope " + scope + "'",
            suggestions=close,
        )

    def convert(self, scope: str, name: str, value: Any, *, from_text: bool) -> tuple[Option, Any]:
        """Validate ``value`` for ``(scope, name)``; return the option and the typed value."""
        opt = self.lookup(scope, name, value=value)
        try:
            typed = opt.type.parse(value) if from_text else opt.type.coerce(value)
        except OptionValueError as exc:
            raise ConfigError(
                f"invalid value {value!r} for {normalize_scope(scope)} option {opt.name}: {exc}; "
                f"allowed: {exc.allowed}",
                option=opt.name,
                scope=normalize_scope(scope),
                value=value,
                allowed=exc.allowed,
            ) from None
        return opt, typed
