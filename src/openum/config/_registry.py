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
from openum.config._implemented import ENV_POLICY, unimplemented_policy
from openum.config._types import OptionType, OptionValueError

__all__ = [
    "SCOPES",
    "Option",
    "Registry",
    "Support",
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


@dataclass(frozen=True, slots=True)
class Support:
    """How much of one ``(scope, option)`` openum implements (ARCHITECTURE.md rule 6: live or refused).

    ``values`` is None when every value is implemented, else the typed values that are (``transport``:
    tcp, lbtrm, lbtru).  The option's default is always accepted: it is what openum does.
    """

    implemented: bool
    values: tuple[Any, ...] | None = None

    @property
    def text(self) -> str:
        """``implemented``, ``not implemented`` or ``partial: A, B`` (as ``openum config options`` shows)."""
        if not self.implemented:
            return "not implemented"
        if self.values is None:
            return "implemented"
        return "partial: " + ", ".join(str(v) for v in self.values)

    def permits(self, opt: Option, typed: Any) -> bool:
        """Whether setting ``opt`` to ``typed`` takes effect (or is the default, which changes nothing)."""
        if _same(typed, opt.default):
            return True
        if not self.implemented:
            return False
        return self.values is None or any(_same(typed, v) for v in self.values)


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python, but a bool option's True is not an int option's 1: compare types as well.
    return type(a) is type(b) and a == b


NOT_IMPLEMENTED: Final = Support(False)
IMPLEMENTED_FULLY: Final = Support(True)


class Registry:
    """Index of the option table by ``(scope, name)`` with UM's error reporting.

    ``implemented`` maps each scope to the options openum implements there (a name, or ``(name,
    (value, ...))`` when only some values are); see :mod:`openum.config._implemented`.  Without it every
    option counts as implemented.
    """

    def __init__(
        self,
        options: tuple[Option, ...],
        implemented: Mapping[str, tuple[str | tuple[str, tuple[str, ...]], ...]] | None = None,
    ) -> None:
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
        self._support: dict[tuple[str, str], Support] = {}
        if implemented is not None:
            self._support = self._build_support(implemented)

    def _build_support(
        self, implemented: Mapping[str, tuple[str | tuple[str, tuple[str, ...]], ...]]
    ) -> dict[tuple[str, str], Support]:
        support = dict.fromkeys(self._index, NOT_IMPLEMENTED)
        for scope, entries in implemented.items():
            if scope not in SCOPES:
                raise ValueError(f"implemented options: unknown scope {scope!r}")
            for entry in entries:
                name, texts = (entry, None) if isinstance(entry, str) else entry
                opt = self._index.get((scope, name))
                if opt is None or opt.alias_of:
                    raise ValueError(f"implemented options: ({scope}, {name}) is not an option of the table")
                if support[(scope, name)] is not NOT_IMPLEMENTED:
                    raise ValueError(f"implemented options list ({scope}, {name}) twice")
                if texts is None:
                    support[(scope, name)] = IMPLEMENTED_FULLY
                    continue
                try:
                    values = tuple(opt.type.parse(text) for text in texts)
                except OptionValueError as exc:
                    raise ValueError(f"implemented options: ({scope}, {name}): {exc}") from None
                support[(scope, name)] = Support(True, values)
        for key, alias in self._aliases.items():
            support[key] = support[(key[0], alias)]
        return support

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

    def support(self, scope: str, name: str) -> Support:
        """What openum implements of ``(scope, name)`` (an alias answers for its real option)."""
        opt = self.lookup(scope, name)
        return self._support.get((normalize_scope(scope), opt.name), IMPLEMENTED_FULLY)

    def permits(self, scope: str, opt: Option, typed: Any) -> bool:
        """Whether setting ``opt`` of ``scope`` to ``typed`` takes effect in openum (or is the default)."""
        return self._support.get((scope, opt.name), IMPLEMENTED_FULLY).permits(opt, typed)

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
        # No UM option name is anywhere near 100 characters: no suggestions (difflib is quadratic).
        close = (
            difflib.get_close_matches(key, self._names_by_scope[scope], n=3, cutoff=0.75)
            if len(key) <= 100
            else []
        )
        if not close and len(key) <= 100:
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
        """Validate ``value`` for ``(scope, name)``; return the option and the typed value.

        A value openum does not implement is refused here too (unless the process lets unimplemented
        options through: :func:`~openum.config.set_unimplemented_policy`), so every way of setting an
        option (files, XML, ``--option``, mappings, attributes from code) refuses it alike.
        """
        scope = normalize_scope(scope)
        opt = self.lookup(scope, name, value=value)
        try:
            typed = opt.type.parse(value) if from_text else opt.type.coerce(value)
        except OptionValueError as exc:
            raise ConfigError(
                f"invalid value {value!r} for {scope} option {opt.name}: {exc}; allowed: {exc.allowed}",
                option=opt.name,
                scope=scope,
                value=value,
                allowed=exc.allowed,
            ) from None
        if not self.permits(scope, opt, typed) and unimplemented_policy() == "refuse":
            raise self.not_implemented(scope, opt, typed)
        return opt, typed

    def not_implemented(self, scope: str, opt: Option, typed: Any) -> ConfigError:
        """The error refusing ``typed`` for ``(scope, opt)``, which openum does not implement."""
        support = self._support.get((scope, opt.name), NOT_IMPLEMENTED)
        how = (
            f"a migrated UM configuration can let unimplemented options through with a warning: "
            f"{ENV_POLICY}=warn or --allow-unimplemented"
        )
        if support.implemented and support.values is not None:
            implemented = ", ".join(opt.type.format(v) for v in support.values)
            return ConfigError(
                f"{self.unimplemented_text(scope, opt, typed)}; {how}",
                option=opt.name,
                scope=scope,
                value=opt.type.format(typed),
                allowed=implemented,
            )
        default = opt.default_text or "unset"
        return ConfigError(
            f"{scope} option {opt.name} is not implemented in this version of openum, so only its default "
            f"({default}) is accepted; {how}",
            option=opt.name,
            scope=scope,
            value=opt.type.format(typed),
            allowed=f"the default ({default})",
        )

    def unimplemented_text(self, scope: str, opt: Option, typed: Any) -> str:
        """``context option use_tls 1 is not implemented ... and has no effect`` (for refusals and the
        warnings about options let through)."""
        support = self._support.get((scope, opt.name), NOT_IMPLEMENTED)
        head = f"{scope} option {opt.name} {opt.type.format(typed)} is not implemented in this version of "
        head += "openum"
        if support.implemented and support.values is not None:
            return f"{head} (implemented: {', '.join(opt.type.format(v) for v in support.values)})"
        return f"{head} and has no effect"
