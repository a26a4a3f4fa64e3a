"""Option value types of the option registry (seed 5; UM Configuration Guide "value types").

Each type turns the text of a configuration file, a ``--option`` argument or a Python value into the
typed value openum uses, and back into text.  A refusal raises :class:`OptionValueError` whose
``allowed`` says what would have been accepted; the registry turns it into a
:class:`~openum.ConfigError` naming the option and scope.
"""

from __future__ import annotations

import abc
import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "AddressPort",
    "Bool",
    "CallbackType",
    "Enum",
    "IPv4",
    "Int",
    "Interface",
    "OptionType",
    "OptionValueError",
    "PortRange",
    "Str",
    "choices",
    "int_choices",
]


class OptionValueError(ValueError):
    """A value the type refuses; ``allowed`` describes what the type accepts."""

    def __init__(self, message: str, allowed: str) -> None:
        super().__init__(message)
        self.allowed = allowed


class OptionType(abc.ABC):
    """Base class: ``parse`` text, ``coerce`` Python values, ``format`` back to text."""

    kind: ClassVar[str] = "?"
    #: True when values may be set only from code (callbacks), never from files or text.
    code_only: ClassVar[bool] = False
    #: True when each setting appends to a list rather than replacing the value.
    multi: ClassVar[bool] = False

    @abc.abstractmethod
    def describe(self) -> str:
        """What values are allowed, for error messages and the docs."""

    @abc.abstractmethod
    def parse(self, text: str) -> Any:
        """Text from a file or the command line -> typed value."""

    def coerce(self, value: Any) -> Any:
        """A Python value (or text) -> typed value; refuses what does not fit."""
        if isinstance(value, str):
            return self.parse(value)
        raise OptionValueError(f"expected text or {self.kind}, got {type(value).__name__}", self.describe())

    def format(self, value: Any) -> str:
        """Typed value -> the text a flat configuration file would hold."""
        return str(value)

    def _bad(self, text: object) -> OptionValueError:
        return OptionValueError(f"invalid value {text!r}", self.describe())


_INT_RE = re.compile(r"^[+-]?(0[xX][0-9a-fA-F]+|\d+)$")


@dataclass(frozen=True, slots=True)
class Int(OptionType):
    """An integer with an optional inclusive range; decimal or ``0x`` hexadecimal text."""

    minimum: int | None = None
    maximum: int | None = None
    kind: ClassVar[str] = "int"

    def describe(self) -> str:
        if self.minimum is not None and self.maximum is not None:
            return f"an integer from {self.minimum} to {self.maximum}"
        if self.minimum is not None:
            return f"an integer >= {self.minimum}"
        if self.maximum is not None:
            return f"an integer <= {self.maximum}"
        return "an integer"

    def parse(self, text: str) -> int:
        stripped = text.strip()
        if not _INT_RE.match(stripped):
            raise self._bad(text)
        try:
            number = int(stripped, 0) if "x" in stripped.lower() else int(stripped, 10)
        except ValueError:  # more digits than int() converts (sys.get_int_max_str_digits())
            raise self._bad(text) from None
        return self._check(number)

    def coerce(self, value: Any) -> int:
        if isinstance(value, bool):
            raise OptionValueError(f"expected an integer, got {value!r}", self.describe())
        if isinstance(value, int):
            return self._check(value)
        if isinstance(value, float) and value.is_integer():
            return self._check(int(value))
        if isinstance(value, str):
            return self.parse(value)
        raise OptionValueError(f"expected an integer, got {value!r}", self.describe())

    def _check(self, value: int) -> int:
        if (self.minimum is not None and value < self.minimum) or (
            self.maximum is not None and value > self.maximum
        ):
            shown = str(value) if value.bit_length() < 4000 else f"a {value.bit_length()}-bit number"
            raise OptionValueError(f"{shown} is out of range", self.describe())
        return value


@dataclass(frozen=True, slots=True)
class Bool(OptionType):
    """A boolean written ``1`` or ``0`` (UM's convention); Python ``True``/``False`` from code."""

    kind: ClassVar[str] = "bool"

    def describe(self) -> str:
        return "1 (enabled) or 0 (disabled)"

    def parse(self, text: str) -> bool:
        stripped = text.strip()
        if stripped == "1":
            return True
        if stripped == "0":
            return False
        raise self._bad(text)

    def coerce(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str):
            return self.parse(value)
        raise OptionValueError(f"expected 1 or 0, got {value!r}", self.describe())

    def format(self, value: Any) -> str:
        return "1" if value else "0"


@dataclass(frozen=True, slots=True)
class Str(OptionType):
    """Free text, optionally bounded in length or matched against a pattern."""

    max_length: int | None = None
    pattern: str | None = None
    pattern_doc: str | None = None
    kind: ClassVar[str] = "string"

    def describe(self) -> str:
        if self.pattern_doc:
            return self.pattern_doc
        if self.max_length is not None:
            return f"a string of at most {self.max_length} characters"
        return "a string"

    def parse(self, text: str) -> str:
        if self.max_length is not None and len(text) > self.max_length:
            raise OptionValueError(f"{len(text)} characters is too long", self.describe())
        if self.pattern is not None and not re.fullmatch(self.pattern, text):
            raise self._bad(text)
        return text


def _parse_ipv4(text: str) -> ipaddress.IPv4Address:
    try:
        return ipaddress.IPv4Address(text.strip())
    except (ipaddress.AddressValueError, ValueError):
        raise OptionValueError(
            f"invalid IPv4 address {text!r}", "an IPv4 address such as 127.0.0.1"
        ) from None


@dataclass(frozen=True, slots=True)
class IPv4(OptionType):
    """A dotted-quad IPv4 address; ``multicast=True`` requires 224.0.0.0-239.255.255.255."""

    multicast: bool = False
    kind: ClassVar[str] = "ipv4"

    def describe(self) -> str:
        if self.multicast:
            return "an IPv4 multicast address (224.0.0.0 - 239.255.255.255)"
        return "an IPv4 address such as 127.0.0.1"

    def parse(self, text: str) -> str:
        addr = _parse_ipv4(text)
        if self.multicast and not addr.is_multicast:
            raise OptionValueError(f"{text!r} is not a multicast address", self.describe())
        return str(addr)


_IFNAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:@-]{0,15}$")


@dataclass(frozen=True, slots=True)
class Interface(OptionType):
    """A network interface: an IPv4 address, a CIDR network (``10.1.0.0/16``) or a device name."""

    kind: ClassVar[str] = "interface"

    def describe(self) -> str:
        return "an IPv4 address, a network in CIDR form (a.b.c.d/n) or an interface name such as lo"

    def parse(self, text: str) -> str:
        stripped = text.strip()
        if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
            stripped = stripped[1:-1].strip()  # UM quotes device names: "eth0"
        if "/" in stripped:
            try:
                return str(ipaddress.IPv4Network(stripped, strict=False))
            except (ipaddress.AddressValueError, ipaddress.NetmaskValueError, ValueError):
                raise self._bad(text) from None
        if stripped and stripped[0].isdigit():
            return str(_parse_ipv4(stripped))
        if _IFNAME_RE.match(stripped):
            return stripped
        raise self._bad(text)


@dataclass(frozen=True, slots=True)
class AddressPort(OptionType):
    """``[Interface->]IP:Port`` (UM's daemon address form); parsed to a normalised string.

    ``with_interface`` allows the ``iface->`` prefix (``resolver_unicast_daemon``);
    ``with_suffix`` allows one extra ``:field`` (``ume_store``'s registration id).
    ``multi`` options append one address per setting.
    """

    with_interface: bool = False
    with_suffix: bool = False
    list_valued: bool = False
    kind: ClassVar[str] = "address:port"

    @property
    def multi(self) -> bool:  # type: ignore[override]
        return self.list_valued

    def describe(self) -> str:
        form = "IP:PORT"
        if self.with_interface:
            form = "[INTERFACE->]IP:PORT"
        if self.with_suffix:
            form += "[:ID]"
        extra = " (each setting adds one)" if self.list_valued else ""
        return f"{form}, e.g. 127.0.0.1:15380{extra}"

    def parse(self, text: str) -> str:
        stripped = text.strip()
        iface = ""
        if "->" in stripped:
            if not self.with_interface:
                raise self._bad(text)
            iface, stripped = stripped.split("->", 1)
            iface = Interface().parse(iface) + "->"
        parts = stripped.split(":")
        if len(parts) not in ((2, 3) if self.with_suffix else (2,)):
            raise self._bad(text)
        addr = str(_parse_ipv4(parts[0])) if parts[0] else ""
        if not addr:
            raise self._bad(text)
        port = Int(0, 65535).parse(parts[1]) if parts[1].strip().isdigit() else None
        if port is None:
            raise self._bad(text)
        suffix = f":{Int(0).parse(parts[2])}" if len(parts) == 3 else ""
        return f"{iface}{addr}:{port}{suffix}"

    def coerce(self, value: Any) -> Any:
        if self.list_valued and isinstance(value, list | tuple):
            return tuple(self.parse(str(v)) for v in value)
        if isinstance(value, tuple) and len(value) == 2 and not self.list_valued:
            return self.parse(f"{value[0]}:{value[1]}")
        return super(AddressPort, self).coerce(value)

    def format(self, value: Any) -> str:
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)


@dataclass(frozen=True, slots=True)
class PortRange(OptionType):
    """``LOW-HIGH`` with 0 <= LOW <= HIGH <= 65535, held as a ``(low, high)`` tuple."""

    kind: ClassVar[str] = "port-range"

    def describe(self) -> str:
        return "LOW-HIGH with 0 <= LOW <= HIGH <= 65535, e.g. 14371-14390"

    def parse(self, text: str) -> tuple[int, int]:
        match = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*", text)
        if not match:
            raise self._bad(text)
        return self.coerce((int(match.group(1)), int(match.group(2))))

    def coerce(self, value: Any) -> tuple[int, int]:
        if isinstance(value, str):
            return self.parse(value)
        if isinstance(value, tuple | list) and len(value) == 2 and all(type(v) is int for v in value):
            low, high = int(value[0]), int(value[1])
            if 0 <= low <= high <= 65535:
                return (low, high)
        raise self._bad(value)

    def format(self, value: Any) -> str:
        return f"{value[0]}-{value[1]}"


@dataclass(frozen=True, slots=True)
class Enum(OptionType):
    """One of a fixed set of names (case-insensitive), with aliases mapping to a canonical value.

    ``choices`` maps each canonical name to its typed value (often the name itself; ``ordered_delivery``
    maps ``"1"`` to ``1``). ``aliases`` maps extra spellings to canonical names (``lbt-rm`` -> ``lbtrm``).
    """

    choices: Mapping[str, Any] = field(default_factory=dict)
    aliases: Mapping[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "enum"

    def describe(self) -> str:
        names = list(self.choices)
        extra = [a for a in self.aliases if a not in self.choices]
        text = "one of: " + ", ".join(names)
        if extra:
            text += " (also accepted: " + ", ".join(extra) + ")"
        return text

    def parse(self, text: str) -> Any:
        key = text.strip().lower()
        key = self.aliases.get(key, key)
        for name, value in self.choices.items():
            if name.lower() == key:
                return value
        raise self._bad(text)

    def coerce(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.parse(value)
        if not isinstance(value, bool) and value in self.choices.values():
            return value
        raise self._bad(value)

    def format(self, value: Any) -> str:
        for name, typed in self.choices.items():
            if typed == value and type(typed) is type(value):
                return name
        return str(value)


@dataclass(frozen=True, slots=True)
class CallbackType(OptionType):
    """A function (plus optional client data) settable only from code (seed 3.7).

    From code, give a callable, a ``(callable, clientd)`` pair, or for create/delete notifications a
    ``(create, delete, clientd)`` triple; the value is held as that tuple.
    """

    signature: str = "callback(...)"
    kind: ClassVar[str] = "callback"
    code_only: ClassVar[bool] = True

    def describe(self) -> str:
        return f"a Python callable {self.signature}, set from code only (not from a file)"

    def parse(self, text: str) -> Any:
        raise OptionValueError(
            "callback options can only be set from code, not from a file or the command line",
            self.describe(),
        )

    def coerce(self, value: Any) -> tuple[Any, ...] | None:
        if value is None:
            return None
        if callable(value):
            return (value, None)
        if isinstance(value, tuple) and len(value) == 2 and callable(value[0]):
            return (value[0], value[1])
        if (
            isinstance(value, tuple)
            and len(value) == 3
            and callable(value[0])
            and (value[1] is None or callable(value[1]))
        ):
            return (value[0], value[1], value[2])  # (create, delete, clientd) notification pairs
        if isinstance(value, str):
            return self.parse(value)  # type: ignore[no-any-return]
        raise OptionValueError(f"expected a callable, got {type(value).__name__}", self.describe())

    def format(self, value: Any) -> str:
        if value is None:
            return "(none)"
        func = value[0]
        return f"<callback {getattr(func, '__qualname__', repr(func))}>"


def choices(*names: str, aliases: Mapping[str, str] | None = None) -> Enum:
    """Shorthand for an :class:`Enum` whose typed values are the canonical names."""
    return Enum({n: n for n in names}, dict(aliases or {}))


def int_choices(values: Sequence[int]) -> Enum:
    """An :class:`Enum` over integers written as decimal text (``ordered_delivery``: 0, 1, -1)."""
    return Enum({str(v): v for v in values})
