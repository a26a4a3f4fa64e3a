"""The LBMPDM field model: field types, values, field infos and definitions.

Implements the data model of ``../shared/wire/lbmc-pdm-srs.md`` section 3.3 (the 38 field types and
the field-info wire fields) and the value kinds of section 3.5, following the guide's Pre-Defined
Messages feature (seed 10.14; ``../shared/spec/05-...md`` section 3): a definition (id,
major/minor version, string or integer field names) lists fields that are required or optional,
fixed or variable length, scalars or arrays.  The byte layouts live in :mod:`openum.wire.pdm`,
which re-exports every public name here.

Constructors raise :class:`~openum.wire._common.WireError` for values that cannot be encoded.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Final, TypeAlias

from openum.wire._common import WireError

__all__ = [
    "PADDED_TEXT",
    "U32_MAX",
    "DefinitionKey",
    "PdmDecimal",
    "PdmDefinition",
    "PdmFieldInfo",
    "PdmFieldType",
    "PdmScalar",
    "PdmTimestamp",
    "PdmValue",
    "check_int",
]

U32_MAX: Final = 0xFFFF_FFFF
_U8_MAX: Final = 0xFF
# Wireshark reads field ids into an int32 offset table and throws on negative ones (3.4).
_MAX_FIELD_ID: Final = 0x7FFF_FFFF


class PdmFieldType(IntEnum):
    """``fld_type`` values (section 3.3); 19-37 are the array forms of 0-18 in the same order."""

    BOOLEAN = 0
    INT8 = 1
    UINT8 = 2
    INT16 = 3
    UINT16 = 4
    INT32 = 5
    UINT32 = 6
    INT64 = 7
    UINT64 = 8
    FLOAT = 9
    DOUBLE = 10
    DECIMAL = 11
    TIMESTAMP = 12
    FIX_STRING = 13
    STRING = 14
    FIX_UNICODE = 15
    UNICODE = 16
    BLOB = 17
    MESSAGE = 18
    BOOLEAN_ARR = 19
    INT8_ARR = 20
    UINT8_ARR = 21
    INT16_ARR = 22
    UINT16_ARR = 23
    INT32_ARR = 24
    UINT32_ARR = 25
    INT64_ARR = 26
    UINT64_ARR = 27
    FLOAT_ARR = 28
    DOUBLE_ARR = 29
    DECIMAL_ARR = 30
    TIMESTAMP_ARR = 31
    FIX_STRING_ARR = 32
    STRING_ARR = 33
    FIX_UNICODE_ARR = 34
    UNICODE_ARR = 35
    BLOB_ARR = 36
    MESSAGE_ARR = 37

    @property
    def is_array(self) -> bool:
        return self >= PdmFieldType.BOOLEAN_ARR

    @property
    def base(self) -> PdmFieldType:
        """The element type: ``INT32`` for both ``INT32`` and ``INT32_ARR``."""
        return PdmFieldType(self - PdmFieldType.BOOLEAN_ARR) if self.is_array else self

    @property
    def element_size(self) -> int | None:
        """Wire size of one element of a numeric, decimal or timestamp type; ``None`` otherwise."""
        return _SIZES.get(self.base)


T = PdmFieldType
_SIZES: Final[dict[PdmFieldType, int]] = {
    T.BOOLEAN: 1, T.INT8: 1, T.UINT8: 1, T.INT16: 2, T.UINT16: 2, T.INT32: 4, T.UINT32: 4,
    T.INT64: 8, T.UINT64: 8, T.FLOAT: 4, T.DOUBLE: 8,
    T.DECIMAL: 9,  # i8 exponent + i64 mantissa
    T.TIMESTAMP: 8,  # u32 seconds + u32 microseconds
}  # fmt: skip
#: The fixed-width text types: a value sits NUL-padded in its ``fixed_str_len`` bytes (3.5).
PADDED_TEXT: Final = frozenset({T.FIX_STRING, T.FIX_UNICODE})
del T


def check_int(what: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or not low <= value <= high:
        raise WireError(f"{what} must be an integer in [{low}, {high}], got {value!r}")
    return value


# --- value records --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdmDecimal:
    """A DECIMAL value: ``mantissa * 10**exponent`` (the guide's ``PDMDecimal(long, byte)``)."""

    mantissa: int
    exponent: int

    def __post_init__(self) -> None:
        check_int("decimal mantissa", self.mantissa, -(1 << 63), (1 << 63) - 1)
        check_int("decimal exponent", self.exponent, -128, 127)


@dataclass(frozen=True, slots=True)
class PdmTimestamp:
    """A TIMESTAMP value: seconds and microseconds since the epoch (two ``u32``)."""

    seconds: int
    microseconds: int = 0

    def __post_init__(self) -> None:
        check_int("timestamp seconds", self.seconds, 0, U32_MAX)
        # tshark turns the microseconds into nanoseconds of an int: keep them a real fraction.
        check_int("timestamp microseconds", self.microseconds, 0, 999_999)


PdmScalar: TypeAlias = bool | int | float | str | bytes | memoryview | PdmDecimal | PdmTimestamp
PdmValue: TypeAlias = PdmScalar | tuple[PdmScalar, ...]
DefinitionKey: TypeAlias = tuple[int, int, int]  # (definition id, major version, minor version)


# --- definitions ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdmFieldInfo:
    """One field of a definition, with the wire fields of section 3.3.

    Build it with :meth:`define`, which derives ``fixed``, ``length`` and the other wire fields from
    the type the way the guide's ``addFieldInfo`` overloads do.  The raw constructor keeps whatever a
    decoded definition said.
    """

    field_id: int
    field_type: PdmFieldType
    name: str | int
    required: bool = True
    fixed: bool = False
    length: int = 0  # fixed fields: total bytes (all elements); 0 for variable fields
    fixed_str_len: int = 0  # FIX_STRING / FIX_UNICODE: bytes reserved per value
    num_arr_elem: int = 0  # arrays: fixed element count; 0 = scalar or variable-size array

    def __post_init__(self) -> None:
        check_int("field id", self.field_id, 0, _MAX_FIELD_ID)
        try:
            ftype = PdmFieldType(self.field_type)
        except ValueError as exc:
            raise WireError(f"unknown PDM field type {self.field_type!r}") from exc
        object.__setattr__(self, "field_type", ftype)
        if isinstance(self.name, str):
            if "\x00" in self.name:
                raise WireError(f"PDM field name contains a NUL: {self.name!r}")
        else:
            check_int("integer field name", self.name, -(1 << 31), (1 << 31) - 1)
        check_int("field length", self.length, 0, U32_MAX)
        check_int("fixed string length", self.fixed_str_len, 0, U32_MAX)
        check_int("array element count", self.num_arr_elem, 0, U32_MAX)
        if not ftype.is_array and self.num_arr_elem:
            raise WireError(f"{ftype.name} is not an array type but has {self.num_arr_elem} elements")
        if self.fixed:
            if ftype.is_array and not self.num_arr_elem:
                raise WireError(f"a fixed-length {ftype.name} field needs an element count")
            count = self.num_arr_elem or 1
            if self.length % count:
                raise WireError(f"field length {self.length} does not split into {count} elements")
            slot = self.length // count
            if not slot:  # an empty slot would make a huge element count cost nothing on the wire
                raise WireError(f"a fixed-length {ftype.name} field needs at least one byte per element")
            size = ftype.element_size
            if size is not None and slot != size:
                raise WireError(f"a {ftype.base.name} element is {size} bytes, the definition says {slot}")
            if self.fixed_str_len > slot:
                raise WireError(f"fixed string length {self.fixed_str_len} exceeds the {slot}-byte slot")

    @classmethod
    def define(
        cls,
        field_id: int,
        name: str | int,
        field_type: PdmFieldType,
        *,
        required: bool = True,
        fixed_len: int | None = None,
        array_size: int | None = None,
    ) -> PdmFieldInfo:
        """A field as the guide's ``addFieldInfo`` defines it (seed 10.14.2-3).

        ``fixed_len`` is the byte length of a FIX_STRING / FIX_UNICODE value (required for those
        types); ``array_size`` fixes the element count of an array type (omit it for a
        variable-size array).
        """
        ftype = PdmFieldType(field_type)
        base = ftype.base
        if base in PADDED_TEXT:
            if fixed_len is None or fixed_len <= 0:
                raise WireError(f"{ftype.name} needs a positive fixed_len")
        elif fixed_len is not None:
            raise WireError(f"fixed_len only applies to fixed strings, not {ftype.name}")
        if array_size is not None and (not ftype.is_array or array_size <= 0):
            raise WireError(f"array_size needs an array type and a positive count, got {ftype.name}")
        count = array_size or 0
        slot = ftype.element_size if base not in PADDED_TEXT else fixed_len
        fixed = slot is not None and (not ftype.is_array or count > 0)
        return cls(
            field_id=field_id,
            field_type=ftype,
            name=name,
            required=required,
            fixed=fixed,
            length=(slot or 0) * max(count, 1) if fixed else 0,
            fixed_str_len=fixed_len or 0,
            num_arr_elem=count,
        )

    @property
    def fixed_required(self) -> bool:
        """True when the field lives in the fixed-required section (section 3.5)."""
        return self.fixed and self.required


@dataclass(frozen=True, slots=True)
class PdmDefinition:
    """A message definition (section 3.3): id, version, name kind and fields in definition order."""

    def_id: int
    fields: tuple[PdmFieldInfo, ...]
    vers_major: int = 1
    vers_minor: int = 0
    int_names: bool = False  # field-name type: 0 string names, 1 integer names
    finalized: bool = True

    def __post_init__(self) -> None:
        check_int("definition id", self.def_id, 0, U32_MAX)
        check_int("major version", self.vers_major, 0, _U8_MAX)
        check_int("minor version", self.vers_minor, 0, _U8_MAX)
        fields = tuple(self.fields)
        object.__setattr__(self, "fields", fields)
        ids: set[int] = set()
        names: set[str | int] = set()
        for info in fields:
            if not isinstance(info, PdmFieldInfo):
                raise WireError(f"definition fields must be PdmFieldInfo, got {info!r}")
            if isinstance(info.name, int) != self.int_names:
                kind = "integer" if self.int_names else "string"
                raise WireError(f"field {info.field_id} name {info.name!r} is not a {kind} name")
            if info.field_id in ids or info.name in names:
                raise WireError(f"duplicate field id or name: {info.field_id} / {info.name!r}")
            ids.add(info.field_id)
            names.add(info.name)

    @property
    def key(self) -> DefinitionKey:
        """The cache key of the guide's definition cache: ``(id, major, minor)`` (seed 10.14)."""
        return (self.def_id, self.vers_major, self.vers_minor)

    @property
    def fixed_required_length(self) -> int:
        return sum(f.length for f in self.fields if f.fixed_required)

    def field(self, key: str | int) -> PdmFieldInfo:
        """The field with this name (string-named definitions) or this field id."""
        for info in self.fields:
            if info.name == key if isinstance(key, str) else info.field_id == key:
                return info
        raise KeyError(key)
