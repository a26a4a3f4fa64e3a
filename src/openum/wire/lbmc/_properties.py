"""LBMC message properties: the typed name/value block at the tail of a message's payload.

Implements ``../shared/wire/lbmc-pdm-srs.md`` §2.6: the block's header (magic, which also gives the
byte order, count, version/type), one 16-byte descriptor per property, then keys and values; the
eight value types (:class:`PropertyType`).  The properties-length element that locates the block is
in :mod:`openum.wire.lbmc._chain`; the message encoder writes it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from openum.wire._common import Buffer, WireError, as_view
from openum.wire.lbmc._base import _utf8


class PropertyType(IntEnum):
    """Message-property value types (§2.6)."""

    BOOLEAN = 1
    BYTE = 2
    SHORT = 3
    INT = 4
    LONG = 5
    FLOAT = 6
    DOUBLE = 7
    STRING = 8


PropertyValue = bool | int | float | str
_PROPS_MAGIC_LE: Final = b"\xba\xda\xac\xab"  # magic 0xABACDABA written little-endian
_PROPS_MAGIC_BE: Final = b"\xab\xac\xda\xba"
_PROPS_MAGIC: Final = 0xABACDABA
_PROP_INT_FORMATS: Final = {
    PropertyType.BYTE: ("b", 1),
    PropertyType.SHORT: ("h", 2),
    PropertyType.INT: ("i", 4),
    PropertyType.LONG: ("q", 8),
    PropertyType.FLOAT: ("f", 4),
    PropertyType.DOUBLE: ("d", 8),
}
_PROP_STRUCTS: Final = {
    (t, order): struct.Struct(order + fmt) for t, (fmt, _) in _PROP_INT_FORMATS.items() for order in "<>"
}
_PROPS_HEAD: Final = {order: struct.Struct(order + "IHBB") for order in "<>"}
_PROPS_DESC: Final = {order: struct.Struct(order + "IIII") for order in "<>"}
_INT_LIMITS: Final = {
    PropertyType.BYTE: 1 << 7,
    PropertyType.SHORT: 1 << 15,
    PropertyType.INT: 1 << 31,
    PropertyType.LONG: 1 << 63,
}


@dataclass(frozen=True, slots=True)
class TypedValue:
    """A property value with an explicit type, for mappings where the inferred type is not wanted
    (e.g. ``{"qty": TypedValue(PropertyType.SHORT, 7)}``)."""

    type: PropertyType
    value: PropertyValue


@dataclass(frozen=True, slots=True)
class Property:
    """One message property: a name, a type and a value of that type.

    Integer types are signed (byte 8-bit .. long 64-bit); FLOAT is IEEE single precision (a value
    that is not exactly representable comes back rounded); STRING may not contain NUL.
    """

    name: str
    type: PropertyType
    value: PropertyValue

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "\x00" in self.name:
            raise WireError(f"property name must be a non-empty string without NUL, got {self.name!r}")
        _utf8("property name", self.name)
        if not isinstance(self.type, PropertyType):
            try:
                object.__setattr__(self, "type", PropertyType(self.type))
            except ValueError as exc:
                raise WireError(f"unknown property type {self.type!r}") from exc
        _check_property_value(self.name, self.type, self.value)


def _check_property_value(name: str, ptype: PropertyType, value: object) -> None:
    bad = f"property {name!r}: {value!r} is not a valid {ptype.name} value"
    if ptype is PropertyType.BOOLEAN:
        if not isinstance(value, bool):
            raise WireError(bad)
    elif ptype in _INT_LIMITS:
        limit = _INT_LIMITS[ptype]
        if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
            raise WireError(bad)
    elif ptype in (PropertyType.FLOAT, PropertyType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WireError(bad)
        try:  # out of range for the IEEE width (a huge int, or beyond float32's range)
            _PROP_STRUCTS[(ptype, ">")].pack(value)
        except (OverflowError, struct.error):
            raise WireError(bad) from None
    elif not isinstance(value, str) or "\x00" in value:
        raise WireError(bad)
    else:
        _utf8(f"property {name!r}", value)


def _infer_property(name: str, value: PropertyValue | TypedValue | Property) -> Property:
    if isinstance(value, Property):
        if value.name != name:
            raise WireError(f"property {name!r} given a Property named {value.name!r}")
        return value
    if isinstance(value, TypedValue):
        return Property(name, value.type, value.value)
    if isinstance(value, bool):
        return Property(name, PropertyType.BOOLEAN, value)
    if isinstance(value, int):
        ptype = PropertyType.INT if -(1 << 31) <= value < (1 << 31) else PropertyType.LONG
        return Property(name, ptype, value)
    if isinstance(value, float):
        return Property(name, PropertyType.DOUBLE, value)
    if isinstance(value, str):
        return Property(name, PropertyType.STRING, value)
    raise WireError(f"property {name!r}: cannot infer a type for {value!r}; use TypedValue")


@dataclass(frozen=True, slots=True)
class PropertiesBlock:
    """The message-properties block (§2.6): properties in order, and the byte order it is sent in."""

    properties: tuple[Property, ...] = ()
    big_endian: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.properties, tuple) or not all(
            isinstance(p, Property) for p in self.properties
        ):
            raise WireError("PropertiesBlock.properties must be a tuple of Property records")
        if len(self.properties) > 0xFFFF:
            raise WireError("too many message properties (at most 65535)")

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, PropertyValue | TypedValue | Property], *, big_endian: bool = False
    ) -> PropertiesBlock:
        """Build from ``{name: value}``; bool -> BOOLEAN, int -> INT (LONG when it does not fit),
        float -> DOUBLE, str -> STRING; :class:`TypedValue` picks the type explicitly."""
        return cls(tuple(_infer_property(name, value) for name, value in mapping.items()), big_endian)

    def to_dict(self) -> dict[str, PropertyValue]:
        """``{name: value}`` (a later duplicate name wins)."""
        return {p.name: p.value for p in self.properties}

    def get(self, name: str) -> Property | None:
        for prop in self.properties:
            if prop.name == name:
                return prop
        return None


PropertiesInput = PropertiesBlock | Mapping[str, PropertyValue | TypedValue | Property] | Iterable[Property]


def _as_block(props: PropertiesInput, big_endian: bool) -> PropertiesBlock:
    if isinstance(props, PropertiesBlock):
        return props
    if isinstance(props, Mapping):
        return PropertiesBlock.from_mapping(props, big_endian=big_endian)
    return PropertiesBlock(tuple(props), big_endian)


def encode_properties(props: PropertiesInput, *, big_endian: bool = False) -> bytes:
    """Encode a properties block (``big_endian`` applies unless ``props`` is a PropertiesBlock).

    Layout as verified with tshark: header, one 16-byte descriptor per property, then each key
    followed directly by its value; offsets are from the block start; ``hash`` is sent as 0 (§2.6).
    """
    block = _as_block(props, big_endian)
    order = ">" if block.big_endian else "<"
    count = len(block.properties)
    base = 8 + 16 * count
    descs = bytearray()
    data = bytearray()
    desc_struct = _PROPS_DESC[order]
    for prop in block.properties:
        key_off = base + len(data)
        data += _utf8("property name", prop.name) + b"\x00"
        value_off = base + len(data)
        if prop.type is PropertyType.BOOLEAN:
            data.append(1 if prop.value else 0)
        elif prop.type is PropertyType.STRING:
            data += _utf8("property value", str(prop.value)) + b"\x00"
        else:
            data += _PROP_STRUCTS[(prop.type, order)].pack(prop.value)
        descs += desc_struct.pack(key_off, value_off, 0, prop.type)
    if base + len(data) > 0xFFFFFFFF:
        raise WireError("message properties too large")
    return _PROPS_HEAD[order].pack(_PROPS_MAGIC, count, 0, 0) + bytes(descs) + bytes(data)


def _cstring_at(view: memoryview, offset: int, what: str) -> str:
    if not 0 <= offset < len(view):
        raise WireError(f"{what} offset out of range", offset=offset)
    raw = bytes(view[offset:])
    nul = raw.find(b"\x00")
    if nul < 0:
        raise WireError(f"{what} is not NUL-terminated", offset=offset)
    return raw[:nul].decode("utf-8", "surrogateescape")


def decode_properties(buf: Buffer) -> PropertiesBlock:
    """Decode a properties block (the whole of ``buf``); byte order from the magic (§2.6)."""
    view = as_view(buf)
    size = len(view)
    if size < 8:
        raise WireError(f"properties block of {size} bytes is shorter than its 8-byte header")
    magic = bytes(view[:4])
    if magic == _PROPS_MAGIC_LE:
        order = "<"
    elif magic == _PROPS_MAGIC_BE:
        order = ">"
    else:
        raise WireError(f"bad message-properties magic {magic.hex()}")
    _, count, ver_type, _ = _PROPS_HEAD[order].unpack_from(view, 0)
    if ver_type >> 4 != 0:
        raise WireError(f"unsupported message-properties version {ver_type >> 4}")
    if 8 + 16 * count > size:
        raise WireError(f"{count} property descriptors do not fit in {size} bytes")
    props = []
    desc_struct = _PROPS_DESC[order]
    for i in range(count):
        key_off, value_off, _hash, type_code = desc_struct.unpack_from(view, 8 + 16 * i)
        try:
            ptype = PropertyType(type_code)
        except ValueError:
            raise WireError(f"unknown message-property type {type_code}") from None
        name = _cstring_at(view, key_off, "property name")
        value: PropertyValue
        if ptype is PropertyType.STRING:
            value = _cstring_at(view, value_off, f"property {name!r} value")
        elif ptype is PropertyType.BOOLEAN:
            if not 0 <= value_off < size:
                raise WireError(f"property {name!r} value out of range", offset=value_off)
            value = view[value_off] != 0
        else:
            vstruct = _PROP_STRUCTS[(ptype, order)]
            if not 0 <= value_off <= size - vstruct.size:
                raise WireError(f"property {name!r} value out of range", offset=value_off)
            value = vstruct.unpack_from(view, value_off)[0]
        props.append(Property(name, ptype, value))
    return PropertiesBlock(tuple(props), order == ">")
