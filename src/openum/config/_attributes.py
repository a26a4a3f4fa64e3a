"""Attribute objects: the options of one scope for one object (seed 3.7).

An attribute object starts with every option of its scope at its default and records where each set
value came from (``default``, ``app.cfg:12``, ``--option``, ``code``).  Values are validated by the
option registry when set; a refused value leaves the object unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Self

from openum._errors import ConfigError
from openum.config._index import REGISTRY
from openum.config._registry import Option, normalize_scope

__all__ = [
    "Attributes",
    "ContextAttributes",
    "EventQueueAttributes",
    "ReceiverAttributes",
    "SourceAttributes",
    "WildcardReceiverAttributes",
    "check_ranges",
]

DEFAULT_ORIGIN = "default"
CODE_ORIGIN = "code"


class Attributes:
    """Options of one scope (``context``, ``source``, ``receiver``, ...), with defaults.

    ``attrs.set("transport", "lbtrm")`` takes UM's text form or a typed Python value;
    ``attrs.get("transport")`` returns the typed value; ``attrs.get_str(...)`` the text form.
    Options whose type adds one value per setting (``resolver_unicast_daemon``) append on each
    ``set`` of a single value and are replaced by ``set`` of a list.
    """

    __slots__ = ("_origins", "_values", "scope")

    scope_name: str = ""

    def __init__(self, scope: str | None = None, values: Mapping[str, Any] | None = None) -> None:
        chosen = scope or self.scope_name
        if not chosen:
            raise ConfigError("Attributes needs a scope", allowed=", ".join(_SCOPE_CLASSES))
        self.scope: str = normalize_scope(chosen)
        self._values: dict[str, Any] = {}
        self._origins: dict[str, str] = {}
        if values:
            self.update(values)

    # -- reading -------------------------------------------------------------------------------------
    def option(self, name: str) -> Option:
        return REGISTRY.lookup(self.scope, name)

    def get(self, name: str) -> Any:
        """The typed value of ``name`` (its default when not set)."""
        opt = self.option(name)
        if opt.name in self._values:
            return self._values[opt.name]
        return opt.default

    def get_str(self, name: str) -> str:
        """The value as a configuration file would write it."""
        opt = self.option(name)
        value = self.get(opt.name)
        return "" if value is None else opt.type.format(value)

    def is_set(self, name: str) -> bool:
        return self.option(name).name in self._values

    def origin(self, name: str) -> str:
        """Where the value came from: ``default``, ``FILE:LINE``, ``--option``, ``code``, ..."""
        return self._origins.get(self.option(name).name, DEFAULT_ORIGIN)

    def __getitem__(self, name: str) -> Any:
        return self.get(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.set(name, value)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and REGISTRY.get(self.scope, name.lower()) is not None

    def items(self) -> Iterator[tuple[str, Any]]:
        """Every option of the scope with its effective value, by name."""
        for name in REGISTRY.names(self.scope):
            yield name, self.get(name)

    def explicit(self) -> dict[str, Any]:
        """Only the options that were set (not defaults)."""
        return dict(self._values)

    def unimplemented(self) -> list[tuple[Option, Any, str]]:
        """``(option, value, origin)`` of every set option or value openum does not implement (only ever
        non-empty when they are let through: ``OPENUM_UNIMPLEMENTED_OPTIONS=warn``)."""
        found = []
        for name, value in self._values.items():
            opt = self.option(name)
            if not REGISTRY.permits(self.scope, opt, value):
                found.append((opt, value, self._origins.get(name, DEFAULT_ORIGIN)))
        return found

    # -- writing -------------------------------------------------------------------------------------
    def set(self, name: str, value: Any, *, origin: str = CODE_ORIGIN) -> None:
        """Set one option from text (UM's form) or a typed value; refused values change nothing."""
        opt, typed = REGISTRY.convert(self.scope, name, value, from_text=isinstance(value, str))
        self._store(opt, typed, origin)

    def set_typed(self, opt: Option, typed: Any, origin: str) -> None:
        """Store an already validated value (used by the configuration loaders)."""
        self._store(opt, typed, origin)

    def _store(self, opt: Option, typed: Any, origin: str) -> None:
        if opt.type.multi and not isinstance(typed, tuple) and typed is not None:
            current = self._values.get(opt.name) or ()
            typed = (*current, typed)
        self._values[opt.name] = typed
        self._origins[opt.name] = origin

    def update(self, values: Mapping[str, Any], *, origin: str = CODE_ORIGIN) -> None:
        """Set several options at once: all are validated first, and none is set if one is refused."""
        staged: list[tuple[Option, Any]] = []
        errors: list[ConfigError] = []
        for name, value in values.items():
            try:
                staged.append(REGISTRY.convert(self.scope, name, value, from_text=isinstance(value, str)))
            except ConfigError as exc:
                errors.append(exc)
        if errors:
            raise ConfigError.collect(errors)
        for opt, typed in staged:
            self._store(opt, typed, origin)

    def reset(self, name: str) -> None:
        """Return ``name`` to its default."""
        opt = self.option(name)
        self._values.pop(opt.name, None)
        self._origins.pop(opt.name, None)

    def copy(self) -> Self:
        clone = type(self).__new__(type(self))
        clone.scope = self.scope
        clone._values = dict(self._values)
        clone._origins = dict(self._origins)
        return clone

    def merged(self, other: Attributes) -> Self:
        """A copy of ``self`` with every option set in ``other`` applied on top."""
        if other.scope != self.scope:
            raise ConfigError(f"cannot merge {other.scope} attributes into {self.scope} attributes")
        clone = self.copy()
        clone._values.update(other._values)
        clone._origins.update(other._origins)
        return clone

    def validate(self) -> None:
        """Check relations between options (low <= high ranges); raise :class:`ConfigError`."""
        check_ranges(self)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attributes):
            return NotImplemented
        return self.scope == other.scope and dict(self.items()) == dict(other.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{k}={REGISTRY.lookup(self.scope, k).type.format(v)}" for k, v in self._values.items()
        )
        return f"<{type(self).__name__} {self.scope}: {shown or 'defaults'}>"


def check_ranges(attrs: Attributes) -> None:
    """Every (low, high) option pair of the scope must satisfy low <= high."""
    from openum.config._options import RANGE_PAIRS
    from openum.config._types import IPv4

    errors: list[ConfigError] = []
    for scope, low_name, high_name in RANGE_PAIRS:
        if scope != attrs.scope:
            continue
        low, high = attrs.get(low_name), attrs.get(high_name)
        if low is None or high is None:
            continue
        if "interval" in low_name and (low == 0 or high == 0):
            continue  # an interval of 0 turns that phase off; the pair is not a range then
        opt = attrs.option(low_name)
        if isinstance(opt.type, IPv4):
            key_low = tuple(int(p) for p in str(low).split("."))
            key_high = tuple(int(p) for p in str(high).split("."))
            bad = key_low > key_high
        else:
            bad = low > high
        if bad:
            source, line = _split_origin(
                attrs.origin(high_name) if attrs.is_set(high_name) else attrs.origin(low_name)
            )
            errors.append(
                ConfigError(
                    f"{scope} option {low_name} ({attrs.get_str(low_name)}, from "
                    f"{attrs.origin(low_name)}) is greater than {high_name} ({attrs.get_str(high_name)}, "
                    f"from {attrs.origin(high_name)})",
                    option=low_name,
                    scope=scope,
                    value=attrs.get_str(low_name),
                    allowed=f"a value <= {high_name} ({attrs.get_str(high_name)})",
                    source=source,
                    line=line,
                )
            )
    if errors:
        raise ConfigError.collect(errors)


def _split_origin(origin: str) -> tuple[str | None, int | None]:
    """``"app.cfg:12"`` -> ``("app.cfg", 12)``; other origins name no file."""
    path, sep, line = origin.rpartition(":")
    if sep and line.isdigit() and path:
        return path, int(line)
    return None, None


class ContextAttributes(Attributes):
    """Context-scope options (``lbm_context_attr_t``)."""

    __slots__ = ()
    scope_name = "context"


class SourceAttributes(Attributes):
    """Source (topic) scope options (``lbm_src_topic_attr_t``)."""

    __slots__ = ()
    scope_name = "source"


class ReceiverAttributes(Attributes):
    """Receiver scope options (``lbm_rcv_topic_attr_t``)."""

    __slots__ = ()
    scope_name = "receiver"


class WildcardReceiverAttributes(Attributes):
    """Wildcard-receiver scope options (``lbm_wildcard_rcv_attr_t``)."""

    __slots__ = ()
    scope_name = "wildcard_receiver"


class EventQueueAttributes(Attributes):
    """Event-queue scope options (``lbm_event_queue_attr_t``)."""

    __slots__ = ()
    scope_name = "event_queue"


_SCOPE_CLASSES: dict[str, type[Attributes]] = {
    "context": ContextAttributes,
    "source": SourceAttributes,
    "receiver": ReceiverAttributes,
    "wildcard_receiver": WildcardReceiverAttributes,
    "event_queue": EventQueueAttributes,
}


def attributes_for(scope: str) -> Attributes:
    """A fresh attribute object of the right class for ``scope``."""
    scope = normalize_scope(scope)
    cls = _SCOPE_CLASSES.get(scope)
    return cls() if cls is not None else Attributes(scope)
