"""LBMPDM (pre-defined messages) codec.

Implements ``../shared/wire/lbmc-pdm-srs.md`` section 3 as tshark 4.0 decodes it: the 16-byte
message header in either byte order (3.1), the segment chain (3.2), the definition segment and the
38 field types (3.3), the offset table (3.4) and the data segment (3.5).  The field model follows
the guide's Pre-Defined Messages feature (seed 10.14; ``../shared/spec/05-...md`` section 3):
a definition (id, major/minor version, string or integer field names) lists fields that are
required or optional, fixed or variable length, scalars or arrays.  That model (field types, values,
field infos, definitions) lives in :mod:`openum.wire._pdm_types`; this module re-exports it.

Layout of one message (every multi-byte field in the byte order the magic selects)::

    header   magic A7 1C CA FE (big-endian) or FE CA 1C A7 (little-endian), ver<<4|type,
             first segment type, def major, def minor, u32 def id, u32 total length
    segment  u8 next segment type, u8 flags, u16 res, u32 body length, body
             2 DEFINITION (optional: "include definition"), 1 OFFSET TABLE, 0 DATA; 0xFF ends

The data segment starts with the fixed-required section (fields that are fixed *and* required,
back to back in definition order); every other set field sits at the offset the offset table gives,
and an unset optional field is simply absent (the guide's "null").  Wireshark only decodes field
values when the message has an offset table, so :func:`encode` always writes one (possibly empty).

Value layouts (section 3.5, with the dissector's element walk):

* fixed field: ``length`` bytes; an array of ``num_arr_elem`` elements splits them evenly; a fixed
  string occupies its ``fixed_str_len`` bytes NUL-padded (a shorter value is allowed).
* variable scalar: ``u32 length`` + value (strings without a NUL).
* variable array with a fixed element count: ``u32 total_length`` (bytes that follow) + per element
  ``u32 length`` + value.  [inferred: the dissector does not read total_length]
* array without an element count ("variable-size array"): ``u32 length`` + the elements, packed
  when the element size is fixed, else each ``u32 length`` + value.  [openum's choice: the
  dissector shows such a field as one value; the guide does not give the layout]

Values are Python objects: ``bool``, ``int``, ``float``, ``str`` (UTF-8, undecodable bytes kept
via ``surrogateescape``), :class:`PdmDecimal`, :class:`PdmTimestamp`, bytes-like for BLOB and
MESSAGE (decoded as zero-copy ``memoryview`` slices of the input; a MESSAGE is the encoded nested
PDM message, decode it with :func:`decode`), and tuples of those for arrays.

Decoders raise :class:`~openum.wire._common.WireError` and nothing else (PRACTICES.md 6).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from openum.wire._common import Buffer, WireError, as_view, need
from openum.wire._pdm_types import (
    PADDED_TEXT,
    U32_MAX,
    DefinitionKey,
    PdmDecimal,
    PdmDefinition,
    PdmFieldInfo,
    PdmFieldType,
    PdmScalar,
    PdmTimestamp,
    PdmValue,
    check_int,
)

__all__ = [
    "HEADER_LEN",
    "MAGIC_BIG_ENDIAN",
    "MAGIC_LITTLE_ENDIAN",
    "PDM_VERSION",
    "SEGMENT_HEADER_LEN",
    "DefinitionKey",
    "PdmDecimal",
    "PdmDefinition",
    "PdmFieldInfo",
    "PdmFieldType",
    "PdmHeader",
    "PdmMessage",
    "PdmScalar",
    "PdmSegmentType",
    "PdmTimestamp",
    "PdmValue",
    "decode",
    "decode_header",
    "encode",
]

HEADER_LEN: Final = 16
SEGMENT_HEADER_LEN: Final = 8
PDM_VERSION: Final = 1
MAGIC_BIG_ENDIAN: Final = b"\xa7\x1c\xca\xfe"
MAGIC_LITTLE_ENDIAN: Final = b"\xfe\xca\x1c\xa7"

_MAX_MESSAGE_LEN: Final = 0x7FFF_FFFF  # tshark's payload check: len <= INT_MAX (3.1)


class PdmSegmentType(IntEnum):
    """Segment types, the values of every ``next_hdr`` (section 3.1)."""

    DATA = 0
    OFFSET_TABLE = 1
    DEFINITION = 2
    END = 0xFF


T = PdmFieldType
_INT_FORMATS: Final[dict[PdmFieldType, str]] = {
    T.INT8: "b", T.UINT8: "B", T.INT16: "h", T.UINT16: "H",
    T.INT32: "i", T.UINT32: "I", T.INT64: "q", T.UINT64: "Q",
}  # fmt: skip
_FLOAT_FORMATS: Final[dict[PdmFieldType, str]] = {T.FLOAT: "f", T.DOUBLE: "d"}
_TEXT: Final = PADDED_TEXT | {T.STRING, T.UNICODE}
del T


class _Order:
    """The precompiled structs of one byte order."""

    __slots__ = ("dec", "dec_value", "fld", "hdr", "ofs", "scalar", "seg", "ts", "u16", "u32")

    def __init__(self, prefix: str) -> None:
        self.hdr = struct.Struct(prefix + "BBBBII")  # after the 4 magic bytes
        self.seg = struct.Struct(prefix + "BBHI")
        self.dec = struct.Struct(prefix + "IIBBBBII")  # definition segment head (20 bytes)
        self.fld = struct.Struct(prefix + "IIIIBBii")  # field info up to the name (26 bytes)
        self.ofs = struct.Struct(prefix + "II")
        self.u16 = struct.Struct(prefix + "H")
        self.u32 = struct.Struct(prefix + "I")
        self.ts = struct.Struct(prefix + "II")
        self.dec_value = struct.Struct(prefix + "bq")
        self.scalar = {t: struct.Struct(prefix + f) for t, f in {**_INT_FORMATS, **_FLOAT_FORMATS}.items()}


_SEGMENT_TYPES: Final = frozenset(int(t) for t in PdmSegmentType)
_BIG: Final = _Order(">")
_LITTLE: Final = _Order("<")


def _order(big_endian: bool) -> _Order:
    return _BIG if big_endian else _LITTLE


# --- header and message records -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PdmHeader:
    """The 16-byte message header (section 3.1)."""

    big_endian: bool
    msg_type: int
    first_segment: int
    def_id: int
    vers_major: int
    vers_minor: int
    length: int  # whole message, header included


@dataclass(frozen=True, slots=True)
class PdmMessage:
    """One PDM message: a definition and the values of its set fields, keyed by field id.

    Unset optional fields are absent from ``values``.  ``include_definition`` puts the definition
    segment in the message (the guide's ``setIncludeDefinition``); otherwise a receiver needs it
    from its cache.  Sequences given for array fields are stored as tuples.
    """

    definition: PdmDefinition
    values: Mapping[int, PdmValue]
    include_definition: bool = True
    big_endian: bool = True
    msg_type: int = 0  # low nibble of the header's ver/type byte; no values are named

    def __post_init__(self) -> None:
        if not isinstance(self.definition, PdmDefinition):
            raise WireError(f"definition must be a PdmDefinition, got {self.definition!r}")
        check_int("message type", self.msg_type, 0, 0xF)
        by_id = {f.field_id: f for f in self.definition.fields}
        values: dict[int, PdmValue] = {}
        for fid, value in self.values.items():
            if fid not in by_id:
                raise WireError(f"field id {fid!r} is not in definition {self.definition.def_id}")
            values[fid] = tuple(value) if isinstance(value, list) else value
        for info in self.definition.fields:
            if info.required and info.field_id not in values:
                raise WireError(f"required field {info.name!r} (id {info.field_id}) is not set")
        object.__setattr__(self, "values", values)

    def value(self, key: str | int) -> PdmValue:
        """The value of the field with this name or id (``KeyError`` when unset)."""
        return self.values[self.definition.field(key).field_id]


# --- scalar values --------------------------------------------------------------------------------


def _text_bytes(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{what} needs a str, got {type(value).__name__}")
    return value.encode("utf-8", "surrogateescape")


def _encode_scalar(base: PdmFieldType, value: object, o: _Order) -> bytes:
    """The natural encoding of one element (numbers at their size, text/bytes at their length)."""
    if base is PdmFieldType.BOOLEAN:
        if not isinstance(value, int) or value not in (0, 1):
            raise WireError(f"BOOLEAN needs a bool, got {value!r}")
        return b"\x01" if value else b"\x00"
    if base in _INT_FORMATS or base in _FLOAT_FORMATS:
        ok = isinstance(value, int) if base in _INT_FORMATS else isinstance(value, int | float)
        if not ok or isinstance(value, bool):
            raise WireError(f"{base.name} needs a number, got {value!r}")
        try:
            return o.scalar[base].pack(value)
        except (struct.error, OverflowError) as exc:
            raise WireError(f"{value!r} does not fit a {base.name}") from exc
    if base is PdmFieldType.DECIMAL:
        if not isinstance(value, PdmDecimal):
            raise WireError(f"DECIMAL needs a PdmDecimal, got {value!r}")
        return o.dec_value.pack(value.exponent, value.mantissa)
    if base is PdmFieldType.TIMESTAMP:
        if not isinstance(value, PdmTimestamp):
            raise WireError(f"TIMESTAMP needs a PdmTimestamp, got {value!r}")
        return o.ts.pack(value.seconds, value.microseconds)
    if base in _TEXT:
        raw = _text_bytes(value, base.name)
        if base in PADDED_TEXT and b"\x00" in raw:
            raise WireError(f"a {base.name} value cannot contain NUL (it is NUL-padded): {value!r}")
        return raw
    if not isinstance(value, bytes | bytearray | memoryview):
        raise WireError(f"{base.name} needs bytes, got {type(value).__name__}")
    return bytes(value)


def _decode_scalar(base: PdmFieldType, raw: memoryview, o: _Order, slot: bool = False) -> PdmScalar:
    """Decode one element; text read from a fixed-width ``slot`` ends at its NUL padding."""
    size = base.element_size
    if size is not None and len(raw) != size:
        raise WireError(f"a {base.name} value is {size} bytes, the message has {len(raw)}")
    if base is PdmFieldType.BOOLEAN:
        return raw[0] != 0
    if base in _INT_FORMATS or base in _FLOAT_FORMATS:
        number: int | float = o.scalar[base].unpack(raw)[0]
        return number
    if base is PdmFieldType.DECIMAL:
        exponent, mantissa = o.dec_value.unpack(raw)
        return PdmDecimal(mantissa, exponent)
    if base is PdmFieldType.TIMESTAMP:
        seconds, micros = o.ts.unpack(raw)
        return PdmTimestamp(seconds, micros)
    if base in _TEXT:
        data = bytes(raw)
        if slot or base in PADDED_TEXT:
            data = data.split(b"\x00", 1)[0]
        return data.decode("utf-8", "surrogateescape")
    return raw  # BLOB / MESSAGE: zero-copy slice of the input


def _slot(raw: bytes, base: PdmFieldType, value_len: int, slot_len: int) -> bytes:
    """Fit an element into its fixed slot: text is NUL-padded, everything else must match."""
    if base in _TEXT:
        if b"\x00" in raw:  # the padding is NULs, so a NUL would end the value early
            raise WireError(f"a {base.name} value in a fixed-width slot cannot contain NUL")
        if len(raw) > value_len:
            raise WireError(f"{base.name} value of {len(raw)} bytes exceeds its {value_len}-byte slot")
        return raw.ljust(slot_len, b"\x00")
    if len(raw) != value_len or value_len != slot_len:
        raise WireError(f"{base.name} value of {len(raw)} bytes does not fill its {slot_len}-byte slot")
    return raw


def _packed_size(info: PdmFieldInfo) -> int | None:
    """Element size inside a variable-size array (None when each element carries a length)."""
    if info.field_type.base in PADDED_TEXT:
        return info.fixed_str_len or None
    return info.field_type.element_size


# --- fields ---------------------------------------------------------------------------------------


def _elements(info: PdmFieldInfo, value: object) -> Sequence[object]:
    if info.field_type.is_array:
        if not isinstance(value, tuple | list):
            raise WireError(f"array field {info.name!r} needs a tuple or list, got {type(value).__name__}")
        if info.num_arr_elem and len(value) != info.num_arr_elem:
            raise WireError(f"array field {info.name!r} holds {info.num_arr_elem} elements, got {len(value)}")
        return value
    if isinstance(value, tuple | list):
        raise WireError(f"scalar field {info.name!r} got a sequence")
    return (value,)


def _encode_field(info: PdmFieldInfo, value: object, o: _Order) -> bytes:
    base = info.field_type.base
    items = [_encode_scalar(base, v, o) for v in _elements(info, value)]
    if info.fixed:
        slot_len = info.length // (info.num_arr_elem or 1)
        value_len = info.fixed_str_len or slot_len
        return b"".join(_slot(raw, base, value_len, slot_len) for raw in items)
    if info.field_type.is_array:  # only a variable-size array may pack its elements (3.5)
        size = _packed_size(info) if not info.num_arr_elem else None
        if size is None:
            body = b"".join(o.u32.pack(len(raw)) + raw for raw in items)
        else:
            body = b"".join(_slot(raw, base, size, size) for raw in items)
    else:
        body = items[0]
    if len(body) > U32_MAX:
        raise WireError(f"field {info.name!r} is too long: {len(body)} bytes")
    return o.u32.pack(len(body)) + body


def _read_u32(view: memoryview, pos: int, o: _Order, what: str) -> int:
    need(view, pos, 4, what)
    length: int = o.u32.unpack_from(view, pos)[0]
    return length


def _decode_field(info: PdmFieldInfo, view: memoryview, pos: int, o: _Order) -> tuple[PdmValue, int]:
    """Decode the field at ``pos`` of the data-segment body; return the value and the end offset."""
    base = info.field_type.base
    what = f"PDM field {info.name!r}"
    if info.fixed:
        need(view, pos, info.length, what)
        count = info.num_arr_elem or 1
        slot_len = info.length // count
        value_len = info.fixed_str_len or slot_len
        elems = tuple(
            _decode_scalar(base, view[p : p + value_len], o, slot=True)
            for p in range(pos, pos + info.length, slot_len)
        )
        end = pos + info.length
    else:
        body_len = _read_u32(view, pos, o, what)
        need(view, pos + 4, body_len, what)
        body = view[pos + 4 : pos + 4 + body_len]
        end = pos + 4 + body_len
        if info.field_type.is_array:
            size = _packed_size(info) if not info.num_arr_elem else None
            if size is not None:
                if body_len % size:
                    raise WireError(f"{what}: {body_len} bytes is not a whole number of {size}-byte elements")
                elems = tuple(
                    _decode_scalar(base, body[p : p + size], o, slot=True) for p in range(0, body_len, size)
                )
            else:
                elems = _decode_prefixed(base, body, o, what)
                if info.num_arr_elem and len(elems) != info.num_arr_elem:
                    raise WireError(
                        f"{what} holds {len(elems)} elements, the definition says {info.num_arr_elem}"
                    )
        else:
            elems = (_decode_scalar(base, body, o),)
    return (elems if info.field_type.is_array else elems[0]), end


def _decode_prefixed(base: PdmFieldType, body: memoryview, o: _Order, what: str) -> tuple[PdmScalar, ...]:
    out: list[PdmScalar] = []
    pos = 0
    while pos < len(body):
        length = _read_u32(body, pos, o, what)
        need(body, pos + 4, length, what)
        out.append(_decode_scalar(base, body[pos + 4 : pos + 4 + length], o))
        pos += 4 + length
    return tuple(out)


# --- segments -------------------------------------------------------------------------------------


def _encode_definition(defn: PdmDefinition, o: _Order) -> bytes:
    infos = []
    for info in defn.fields:
        common = (info.field_id, info.length, info.fixed_str_len, info.num_arr_elem)
        flags = (int(info.required), int(info.fixed))
        ftype = o.u16.pack(info.field_type)
        if isinstance(info.name, int):
            infos.append(o.fld.pack(*common, *flags, info.name, 0) + ftype)
        else:
            # The name length includes the NUL: tshark reads the name as a C string (3.3).
            name = info.name.encode("utf-8", "surrogateescape") + b"\x00"
            rest = o.fld.pack(*common, *flags, -1, len(name)) + name + ftype
            infos.append(o.u32.pack(len(rest)) + rest)
    info_bytes = b"".join(infos)
    names_type, finalized = int(defn.int_names), int(defn.finalized)
    head = o.dec.pack(
        defn.def_id,
        len(defn.fields),
        names_type,
        finalized,
        defn.vers_major,
        defn.vers_minor,
        defn.fixed_required_length,
        len(info_bytes),
    )
    return head + info_bytes


def _decode_definition(body: memoryview, o: _Order) -> PdmDefinition:
    need(body, 0, o.dec.size, "PDM definition segment")
    def_id, num_fields, names_type, finalized, major, minor, _fixed_len, _info_len = o.dec.unpack_from(
        body, 0
    )
    if names_type not in (0, 1):
        raise WireError(f"unknown PDM field-name type {names_type}")
    int_names = names_type == 1
    pos = o.dec.size
    fields = []
    for _ in range(num_fields):
        start = pos
        if int_names:
            end = pos + o.fld.size + 2
        else:
            # Walk by def_len, like the dissector; the name and type must fit inside it.
            end = pos + 4 + _read_u32(body, pos, o, "PDM field definition length")
            pos += 4
        need(body, start, end - start, "PDM field definition")
        need(body, pos, o.fld.size, "PDM field definition")
        fid, length, fsl, nae, req, fixed, int_name, name_len = o.fld.unpack_from(body, pos)
        pos += o.fld.size
        name: str | int = int_name
        if not int_names:
            if name_len < 0 or pos + name_len + 2 > end:
                raise WireError(f"PDM field name length {name_len} overruns its definition", offset=pos)
            name = bytes(body[pos : pos + name_len]).split(b"\x00", 1)[0].decode("utf-8", "surrogateescape")
            pos += name_len
        ftype = o.u16.unpack_from(body, pos)[0]
        fields.append(PdmFieldInfo(fid, ftype, name, req != 0, fixed != 0, length, fsl, nae))
        pos = end
    return PdmDefinition(def_id, tuple(fields), major, minor, int_names, finalized != 0)


def _encode_data(message: PdmMessage, o: _Order) -> tuple[bytes, bytes]:
    """The data segment body and the offset table body."""
    fixed = []
    rest = []
    table = []
    offset = 0
    for info in message.definition.fields:
        if info.fixed_required:
            raw = _encode_field(info, message.values[info.field_id], o)
            fixed.append(raw)
            offset += len(raw)
    for info in message.definition.fields:
        if not info.fixed_required and info.field_id in message.values:
            raw = _encode_field(info, message.values[info.field_id], o)
            table.append(o.ofs.pack(info.field_id, offset))
            rest.append(raw)
            offset += len(raw)
    return b"".join(fixed) + b"".join(rest), b"".join(table)


def _decode_data(
    defn: PdmDefinition, body: memoryview, offsets: Sequence[tuple[int, int]], o: _Order
) -> dict[int, PdmValue]:
    values: dict[int, PdmValue] = {}
    pos = 0
    for info in defn.fields:
        if info.fixed_required:
            values[info.field_id], pos = _decode_field(info, body, pos, o)
    by_id = {f.field_id: f for f in defn.fields}
    for fid, offset in offsets:
        placed = by_id.get(fid)
        if placed is None:
            raise WireError(f"offset table names field {fid}, unknown to definition {defn.def_id}")
        if fid in values:
            raise WireError(f"field {fid} is placed twice in the data segment")
        if offset > len(body):
            raise WireError(f"field {fid} offset {offset} is past the {len(body)}-byte data segment")
        values[fid], _ = _decode_field(placed, body, offset, o)
    for info in defn.fields:
        if info.required and info.field_id not in values:
            raise WireError(f"required field {info.name!r} (id {info.field_id}) is missing")
    return values


# --- messages -------------------------------------------------------------------------------------


def encode(message: PdmMessage) -> bytes:
    """Encode ``message``: header, [definition], offset table, data (section 3)."""
    o = _order(message.big_endian)
    data, table = _encode_data(message, o)
    segments: list[tuple[int, bytes]] = []
    if message.include_definition:
        segments.append((PdmSegmentType.DEFINITION, _encode_definition(message.definition, o)))
    segments.append((PdmSegmentType.OFFSET_TABLE, table))
    segments.append((PdmSegmentType.DATA, data))
    parts = []
    for i, (_, body) in enumerate(segments):
        nxt = segments[i + 1][0] if i + 1 < len(segments) else PdmSegmentType.END
        parts.append(o.seg.pack(nxt, 0, 0, len(body)))
        parts.append(body)
    total = HEADER_LEN + sum(len(p) for p in parts)
    if total > _MAX_MESSAGE_LEN:
        raise WireError(f"PDM message too long: {total} bytes")
    defn = message.definition
    magic = MAGIC_BIG_ENDIAN if message.big_endian else MAGIC_LITTLE_ENDIAN
    head = magic + o.hdr.pack(
        (PDM_VERSION << 4) | message.msg_type,
        segments[0][0],
        defn.vers_major,
        defn.vers_minor,
        defn.def_id,
        total,
    )
    return head + b"".join(parts)


def decode_header(buf: Buffer) -> PdmHeader:
    """Decode and check the 16-byte header (enough to frame a stream or look up a definition)."""
    view = as_view(buf)
    need(view, 0, HEADER_LEN, "PDM header")
    magic = bytes(view[0:4])
    if magic not in (MAGIC_BIG_ENDIAN, MAGIC_LITTLE_ENDIAN):
        raise WireError(f"bad PDM magic {magic.hex()}", offset=0)
    big = magic == MAGIC_BIG_ENDIAN
    ver_type, first, major, minor, def_id, length = _order(big).hdr.unpack_from(view, 4)
    if ver_type >> 4 != PDM_VERSION:
        raise WireError(f"unsupported PDM version {ver_type >> 4}", offset=4)
    if first not in _SEGMENT_TYPES:
        raise WireError(f"unknown first PDM segment type {first}", offset=5)
    if not HEADER_LEN <= length <= _MAX_MESSAGE_LEN:
        raise WireError(f"bad PDM message length {length}", offset=12)
    return PdmHeader(big, ver_type & 0xF, first, def_id, major, minor, length)


def decode(buf: Buffer, definitions: Mapping[DefinitionKey, PdmDefinition] | None = None) -> PdmMessage:
    """Decode one whole PDM message (``buf`` must hold exactly ``header.length`` bytes).

    The definition comes from the message's own definition segment, else from ``definitions``
    (the guide's definition cache, keyed by ``(id, major, minor)``).  A message whose definition is
    unknown cannot be decoded and raises :class:`WireError`.  BLOB and MESSAGE values are slices of
    ``buf``.
    """
    view = as_view(buf)
    header = decode_header(view)
    if header.length != len(view):
        raise WireError(f"PDM header says {header.length} bytes, buffer holds {len(view)}", offset=12)
    o = _order(header.big_endian)
    bodies: dict[int, memoryview] = {}
    seg_type = header.first_segment
    pos = HEADER_LEN
    while seg_type != PdmSegmentType.END:
        need(view, pos, SEGMENT_HEADER_LEN, "PDM segment header")
        nxt, _flags, _res, seg_len = o.seg.unpack_from(view, pos)
        need(view, pos + SEGMENT_HEADER_LEN, seg_len, "PDM segment")
        body = view[pos + SEGMENT_HEADER_LEN : pos + SEGMENT_HEADER_LEN + seg_len]
        if seg_type in bodies:
            raise WireError(f"PDM segment type {seg_type} appears twice", offset=pos)
        # Unknown segment types are skipped, as tshark does ("Unknown Segment", no error).
        if seg_type in (PdmSegmentType.DATA, PdmSegmentType.OFFSET_TABLE, PdmSegmentType.DEFINITION):
            bodies[seg_type] = body
        pos += SEGMENT_HEADER_LEN + seg_len
        seg_type = nxt
    if pos != len(view):
        raise WireError(f"{len(view) - pos} bytes after the last PDM segment", offset=pos)
    defn_body = bodies.get(PdmSegmentType.DEFINITION)
    if defn_body is not None:
        defn = _decode_definition(defn_body, o)
        if defn.key != (header.def_id, header.vers_major, header.vers_minor):
            raise WireError(f"PDM header names definition {header.def_id} but carries {defn.def_id}")
    else:
        found = (definitions or {}).get((header.def_id, header.vers_major, header.vers_minor))
        if found is None:
            raise WireError(
                f"PDM definition {header.def_id} v{header.vers_major}.{header.vers_minor} is unknown"
            )
        defn = found
    offsets = _decode_offsets(bodies.get(PdmSegmentType.OFFSET_TABLE), o)
    data = bodies.get(PdmSegmentType.DATA, view[0:0])
    values = _decode_data(defn, data, offsets, o)
    return PdmMessage(defn, values, defn_body is not None, header.big_endian, header.msg_type)


def _decode_offsets(body: memoryview | None, o: _Order) -> list[tuple[int, int]]:
    if body is None:
        return []
    if len(body) % o.ofs.size:
        raise WireError(f"PDM offset table of {len(body)} bytes is not a list of 8-byte entries")
    return [o.ofs.unpack_from(body, p) for p in range(0, len(body), o.ofs.size)]
