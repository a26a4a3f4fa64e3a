"""LBMPDM codec: the verified message of the wire spec (section 6.1), the guide's PDM acceptance
tests, round trips for every field type, and fuzzing.

Spec: ../shared/wire/lbmc-pdm-srs.md sections 3 and 6.1; ../shared/spec/05-...md section 3 (seed 10.14).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from openum.wire import pdm
from openum.wire._common import WireError
from openum.wire.pdm import (
    PdmDecimal,
    PdmDefinition,
    PdmFieldInfo,
    PdmFieldType,
    PdmMessage,
    PdmTimestamp,
)

T = PdmFieldType
F = PdmFieldInfo


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " "))


# Section 6.1, case lbmpdm_tcp, verbatim (152 bytes, big-endian).
VERIFIED_HEX = h(
    "a71ccafe 10 02 01 00 000003e9 00000098 |"
    "01 00 0000 0000005c |"
    "000003e9 00000002 00 01 01 00 00000004 00000048 |"
    "00000020 00000000 00000004 00000000 00000000 01 01 ffffffff 00000004 71747900 0005 |"
    "00000020 00000001 00000000 00000000 00000000 01 00 ffffffff 00000004 73796d00 000e |"
    "00 00 0000 00000008  00000001 00000004 |"
    "ff 00 0000 0000000c  00000064 00000004 4141504c"
)
QTY_SYM = PdmDefinition(1001, (F.define(0, "qty", T.INT32), F.define(1, "sym", T.STRING)))


# --- the verified message ------------------------------------------------------------------------


def test_verified_message_decodes_exactly() -> None:
    msg = pdm.decode(VERIFIED_HEX)
    assert msg.big_endian is True
    assert msg.include_definition is True
    assert msg.msg_type == 0
    defn = msg.definition
    assert (defn.def_id, defn.vers_major, defn.vers_minor) == (1001, 1, 0)
    assert defn.int_names is False
    assert defn.finalized is True
    qty, sym = defn.fields
    assert qty == PdmFieldInfo(0, T.INT32, "qty", required=True, fixed=True, length=4)
    assert sym == PdmFieldInfo(1, T.STRING, "sym", required=True, fixed=False, length=0)
    assert defn.fixed_required_length == 4
    assert msg.values == {0: 100, 1: "AAPL"}
    assert msg.value("qty") == 100
    assert msg.value("sym") == "AAPL"


def test_verified_message_encodes_byte_for_byte() -> None:
    assert pdm.encode(PdmMessage(QTY_SYM, {0: 100, 1: "AAPL"})) == VERIFIED_HEX
    assert pdm.encode(pdm.decode(VERIFIED_HEX)) == VERIFIED_HEX


def test_verified_header() -> None:
    hdr = pdm.decode_header(VERIFIED_HEX)
    assert hdr == pdm.PdmHeader(True, 0, pdm.PdmSegmentType.DEFINITION, 1001, 1, 0, 152)


def test_little_endian_message_layout() -> None:
    raw = pdm.encode(PdmMessage(QTY_SYM, {0: 100, 1: "AAPL"}, big_endian=False))
    assert raw[:4] == b"\xfe\xca\x1c\xa7"
    assert raw[4:8] == b"\x10\x02\x01\x00"
    assert struct.unpack_from("<II", raw, 8) == (1001, len(raw))
    # the same segments as the big-endian message, every word byte-swapped
    assert raw[-12:] == struct.pack("<iI", 100, 4) + b"AAPL"
    msg = pdm.decode(raw)
    assert msg.big_endian is False
    assert msg.values == {0: 100, 1: "AAPL"}


# --- the guide's acceptance tests (spec/05 section 3.15) -----------------------------------------


def guide_definition(def_id: int = 1001) -> PdmDefinition:
    return PdmDefinition(
        def_id,
        (
            F.define(0, "Field100", T.BOOLEAN),
            F.define(1, "Field101", T.INT32),
            F.define(2, "Field102", T.FLOAT),
            F.define(3, "Field103", T.INT8, required=False),
            F.define(4, "Field104", T.FIX_STRING, fixed_len=12),
            F.define(5, "Field105", T.STRING),
            F.define(6, "Field106", T.BOOLEAN_ARR, array_size=3),
            F.define(7, "Field107", T.INT32_ARR, required=False),
            F.define(8, "Field108", T.FIX_STRING_ARR, fixed_len=5, array_size=2),
        ),
    )


GUIDE_VALUES = {
    0: True,
    1: 12345,
    2: 3.5,
    4: "Hello World!",
    5: "variable",
    6: (True, False, True),
    7: (1, 2, 3, 4),
    8: ("aaaaa", "bbbbb"),
}


def test_guide_round_trip_with_unset_optional_field() -> None:
    msg = PdmMessage(guide_definition(), GUIDE_VALUES)
    back = pdm.decode(pdm.encode(msg))
    assert back == msg
    assert 3 not in back.values  # Field103 unset: "null"
    with pytest.raises(KeyError):
        back.value("Field103")
    assert [f.name for f in back.definition.fields] == [f"Field{n}" for n in range(100, 109)]


def test_guide_fixed_required_classification() -> None:
    defn = guide_definition()
    fixed_required = [f.name for f in defn.fields if f.fixed_required]
    assert fixed_required == ["Field100", "Field101", "Field102", "Field104", "Field106", "Field108"]
    assert defn.fixed_required_length == 1 + 4 + 4 + 12 + 3 + 10


def test_guide_required_field_missing_raises() -> None:
    values = {k: v for k, v in GUIDE_VALUES.items() if k != 1}
    with pytest.raises(WireError, match="Field101"):
        PdmMessage(guide_definition(), values)


def test_guide_fixed_string_length_does_not_change_message_length() -> None:
    short = pdm.encode(PdmMessage(guide_definition(), {**GUIDE_VALUES, 4: "a"}))
    full = pdm.encode(PdmMessage(guide_definition(), {**GUIDE_VALUES, 4: "Hello World!"}))
    assert len(short) == len(full)
    assert pdm.decode(short).value("Field104") == "a"


def test_guide_self_describing_and_cache_parse() -> None:
    defn = guide_definition(2001)
    bare = pdm.encode(PdmMessage(defn, GUIDE_VALUES, include_definition=False))
    with pytest.raises(WireError, match="2001"):
        pdm.decode(bare)
    back = pdm.decode(bare, {defn.key: defn})
    assert back.values == PdmMessage(defn, GUIDE_VALUES).values
    assert back.include_definition is False
    assert len(bare) < len(pdm.encode(PdmMessage(defn, GUIDE_VALUES)))


def test_embedded_definition_wins_over_cache() -> None:
    embedded = guide_definition()
    other = PdmDefinition(1001, (F.define(0, "x", T.INT8),))
    raw = pdm.encode(PdmMessage(embedded, GUIDE_VALUES))
    assert pdm.decode(raw, {other.key: other}).definition == embedded


def test_definition_version_is_part_of_the_key() -> None:
    v1 = guide_definition()
    v2 = PdmDefinition(1001, v1.fields, vers_major=2)
    raw = pdm.encode(PdmMessage(v2, GUIDE_VALUES, include_definition=False))
    with pytest.raises(WireError, match=r"v2\.0"):
        pdm.decode(raw, {v1.key: v1})
    assert pdm.decode(raw, {v2.key: v2}).definition == v2


# --- more layouts --------------------------------------------------------------------------------


def test_integer_names_definition() -> None:
    defn = PdmDefinition(7, (F.define(0, 100, T.INT16), F.define(1, -5, T.STRING)), int_names=True)
    raw = pdm.encode(PdmMessage(defn, {0: -2, 1: "x"}))
    # field info with integer names is exactly 28 bytes (section 3.3): no def_len, no name
    defn_body_len = struct.unpack_from(">I", raw, 16 + 4)[0]
    assert defn_body_len == 20 + 2 * 28
    back = pdm.decode(raw)
    assert back.definition == defn
    assert back.values == {0: -2, 1: "x"}
    assert back.value(0) == -2  # an int key looks a field up by id


def test_decimal_and_timestamp_layout() -> None:
    defn = PdmDefinition(1, (F.define(0, "d", T.DECIMAL), F.define(1, "t", T.TIMESTAMP)))
    raw = pdm.encode(PdmMessage(defn, {0: PdmDecimal(-12345, -2), 1: PdmTimestamp(1_700_000_000, 123_456)}))
    data = raw[-17:]  # the data segment body: fixed-required only
    assert data == struct.pack(">bqII", -2, -12345, 1_700_000_000, 123_456)


def test_variable_array_layouts() -> None:
    defn = PdmDefinition(
        1,
        (
            F.define(0, "counted", T.STRING_ARR, array_size=2),
            F.define(1, "ints", T.INT32_ARR),
            F.define(2, "strs", T.STRING_ARR),
            F.define(3, "fixed", T.FIX_STRING_ARR, fixed_len=3),
        ),
    )
    msg = PdmMessage(defn, {0: ("a", "bc"), 1: (1, 2), 2: ("x",), 3: ("ab", "c")})
    raw = pdm.encode(msg)
    counted = struct.pack(">I", 11) + struct.pack(">I", 1) + b"a" + struct.pack(">I", 2) + b"bc"
    ints = struct.pack(">Iii", 8, 1, 2)
    strs = struct.pack(">II", 5, 1) + b"x"
    fixed = struct.pack(">I", 6) + b"ab\x00c\x00\x00"
    assert raw.endswith(counted + ints + strs + fixed)
    assert pdm.decode(raw) == msg


def test_optional_fixed_field_goes_through_the_offset_table() -> None:
    defn = PdmDefinition(1, (F.define(0, "a", T.INT32), F.define(1, "b", T.INT16, required=False)))
    raw = pdm.encode(PdmMessage(defn, {0: 1, 1: 2}))
    assert raw.endswith(h("00 00 0000 00000008 00000001 00000004 | ff 00 0000 00000006 00000001 0002"))
    assert pdm.decode(pdm.encode(PdmMessage(defn, {0: 1}))).values == {0: 1}


def test_nested_message_field() -> None:
    inner = pdm.encode(PdmMessage(QTY_SYM, {0: 1, 1: "IBM"}))
    outer_defn = PdmDefinition(2, (F.define(0, "inner", T.MESSAGE), F.define(1, "list", T.MESSAGE_ARR)))
    outer = pdm.decode(pdm.encode(PdmMessage(outer_defn, {0: inner, 1: [inner, inner]})))
    assert outer.values[0] == inner
    assert pdm.decode(outer.values[0]).values == {0: 1, 1: "IBM"}  # type: ignore[arg-type]
    assert outer.values[1] == (inner, inner)


def test_blob_values_are_zero_copy_views() -> None:
    defn = PdmDefinition(1, (F.define(0, "blob", T.BLOB),))
    buf = bytearray(pdm.encode(PdmMessage(defn, {0: b"\x01\x02\x03"})))
    value = pdm.decode(buf).values[0]
    assert isinstance(value, memoryview)
    assert value == b"\x01\x02\x03"
    buf[-1] = 0x09  # the view follows the buffer: no copy was made
    assert bytes(value) == b"\x01\x02\x09"


def test_unknown_segment_types_are_skipped() -> None:
    # header -> offset table -> unknown segment 7 -> data; tshark shows "Unknown Segment", no error
    table = struct.pack(">BBHI", 7, 0, 0, 8) + struct.pack(">II", 1, 4)
    unknown = struct.pack(">BBHI", 0, 0, 0, 2) + b"\xab\xcd"
    data = struct.pack(">BBHI", 0xFF, 0, 0, 12) + struct.pack(">iI", 100, 4) + b"AAPL"
    body = table + unknown + data
    head = pdm.MAGIC_BIG_ENDIAN + struct.pack(">BBBBII", 0x10, 1, 1, 0, 1001, 16 + len(body))
    assert pdm.decode(head + body, {QTY_SYM.key: QTY_SYM}).values == {0: 100, 1: "AAPL"}


def test_foreign_fixed_string_field_round_trips() -> None:
    # A definition from elsewhere may mark a STRING fixed-length: its slot is NUL-padded like a
    # FIX_STRING's, and a NUL inside the value cannot be represented.
    field = PdmFieldInfo(0, T.STRING, "s", required=True, fixed=True, length=6)
    defn = PdmDefinition(1, (field,))
    raw = pdm.encode(PdmMessage(defn, {0: "abc"}))
    assert raw.endswith(b"abc\x00\x00\x00")
    assert pdm.decode(raw).values == {0: "abc"}
    with pytest.raises(WireError, match="NUL"):
        pdm.encode(PdmMessage(defn, {0: "a\x00b"}))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (F.define(0, "a", T.INT8), 128),
        (F.define(0, "a", T.UINT16), -1),
        (F.define(0, "a", T.INT32), "1"),
        (F.define(0, "a", T.INT32), True),
        (F.define(0, "a", T.FLOAT), 1e300),
        (F.define(0, "a", T.BOOLEAN), 2),
        (F.define(0, "a", T.FIX_STRING, fixed_len=3), "toolong"),
        (F.define(0, "a", T.FIX_STRING, fixed_len=3), "a\x00"),
        (F.define(0, "a", T.STRING), b"bytes"),
        (F.define(0, "a", T.BLOB), "text"),
        (F.define(0, "a", T.DECIMAL), 1.5),
        (F.define(0, "a", T.TIMESTAMP), 5),
        (F.define(0, "a", T.INT32_ARR, array_size=2), (1, 2, 3)),
        (F.define(0, "a", T.INT32_ARR), 5),
        (F.define(0, "a", T.INT32), (5,)),
    ],
)
def test_encode_rejects_bad_values(field: PdmFieldInfo, value: object) -> None:
    msg = PdmMessage(PdmDefinition(1, (field,)), {0: value})  # type: ignore[dict-item]
    with pytest.raises(WireError):
        pdm.encode(msg)


@pytest.mark.parametrize(
    "build",
    [
        lambda: F.define(0, "a", T.FIX_STRING),  # needs fixed_len
        lambda: F.define(0, "a", T.INT32, fixed_len=3),
        lambda: F.define(0, "a", T.INT32, array_size=2),  # not an array type
        lambda: F(0, T.INT32, "a", fixed=True, length=2),  # an INT32 is 4 bytes
        lambda: F(0, T.INT32_ARR, "a", fixed=True, length=8),  # fixed array without a count
        lambda: F(0, T.INT32, "a", num_arr_elem=3),
        lambda: F(-1, T.INT32, "a"),
        lambda: F(0, 99, "a"),  # type: ignore[arg-type]
        lambda: F(0, T.INT32, "a\x00b"),
        lambda: PdmDefinition(1, (F.define(0, "a", T.INT8), F.define(0, "b", T.INT8))),
        lambda: PdmDefinition(1, (F.define(0, "a", T.INT8), F.define(1, "a", T.INT8))),
        lambda: PdmDefinition(1, (F.define(0, "a", T.INT8),), int_names=True),
        lambda: PdmMessage(QTY_SYM, {0: 1, 1: "x", 5: 3}),
        lambda: PdmDecimal(0, 200),
        lambda: PdmTimestamp(0, 1_000_000),
    ],
)
def test_constructors_validate(build: object) -> None:
    with pytest.raises(WireError):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda b: b[:15], "truncated"),
        (lambda b: b"\x00" + b[1:], "magic"),
        (lambda b: b[:4] + b"\x20" + b[5:], "version"),
        (lambda b: b[:5] + b"\x05" + b[6:], "segment type"),
        (lambda b: b + b"\x00", "buffer holds"),
        (lambda b: b[:12] + struct.pack(">I", 10) + b[16:], "length"),
        (lambda b: b[:-1], "buffer holds"),
    ],
)
def test_decode_rejects_malformed(mutate: object, match: str) -> None:
    with pytest.raises(WireError, match=match):
        pdm.decode(mutate(VERIFIED_HEX))  # type: ignore[operator]


def test_decode_rejects_bad_offsets() -> None:
    raw = bytearray(VERIFIED_HEX)
    struct.pack_into(">I", raw, 16 + 8 + 0x5C + 8 + 4, 1000)  # sym's offset past the data
    with pytest.raises(WireError, match="past"):
        pdm.decode(bytes(raw))
    struct.pack_into(">II", raw, 16 + 8 + 0x5C + 8, 0, 0)  # places fixed-required qty again
    with pytest.raises(WireError, match="twice"):
        pdm.decode(bytes(raw))


# --- round trips for every field type ------------------------------------------------------------

_INT_RANGES = {
    T.INT8: (-(1 << 7), (1 << 7) - 1), T.UINT8: (0, (1 << 8) - 1),
    T.INT16: (-(1 << 15), (1 << 15) - 1), T.UINT16: (0, (1 << 16) - 1),
    T.INT32: (-(1 << 31), (1 << 31) - 1), T.UINT32: (0, (1 << 32) - 1),
    T.INT64: (-(1 << 63), (1 << 63) - 1), T.UINT64: (0, (1 << 64) - 1),
}  # fmt: skip
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_PADDED_TEXT = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")


def scalars(info: PdmFieldInfo) -> st.SearchStrategy[object]:
    base = info.field_type.base
    if base is T.BOOLEAN:
        return st.booleans()
    if base in _INT_RANGES:
        return st.integers(*_INT_RANGES[base])
    if base is T.FLOAT:
        return st.floats(width=32, allow_nan=False)
    if base is T.DOUBLE:
        return st.floats(allow_nan=False)
    if base is T.DECIMAL:
        return st.builds(PdmDecimal, st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-128, 127))
    if base is T.TIMESTAMP:
        return st.builds(PdmTimestamp, st.integers(0, (1 << 32) - 1), st.integers(0, 999_999))
    if base in (T.FIX_STRING, T.FIX_UNICODE):
        limit = info.fixed_str_len
        return st.text(_PADDED_TEXT, max_size=limit).filter(lambda s: len(s.encode()) <= limit)
    if base in (T.STRING, T.UNICODE):
        return _TEXT
    return st.binary(max_size=12)


def field_values(info: PdmFieldInfo) -> st.SearchStrategy[object]:
    if not info.field_type.is_array:
        return scalars(info)
    size = info.num_arr_elem
    return st.lists(scalars(info), min_size=size, max_size=size if size else 4).map(tuple)


ANY_TYPE = st.sampled_from(PdmFieldType)


@st.composite
def field_infos(draw: st.DrawFn, ftype: PdmFieldType, field_id: int, name: str | int) -> PdmFieldInfo:
    padded = ftype.base in (T.FIX_STRING, T.FIX_UNICODE)
    return F.define(
        field_id,
        name,
        ftype,
        required=draw(st.booleans()),
        fixed_len=draw(st.integers(1, 16)) if padded else None,
        array_size=draw(st.none() | st.integers(1, 4)) if ftype.is_array else None,
    )


@st.composite
def messages(draw: st.DrawFn, types: st.SearchStrategy[PdmFieldType] = ANY_TYPE) -> PdmMessage:
    count = draw(st.integers(1, 6))
    ids = draw(st.lists(st.integers(0, 500), min_size=count, max_size=count, unique=True))
    int_names = draw(st.booleans())
    infos = []
    for n, fid in enumerate(ids):
        name: str | int = draw(st.integers(-1000, 1000)) + 5000 * n if int_names else f"f{n}"
        infos.append(draw(field_infos(draw(types), fid, name)))
    defn = PdmDefinition(
        draw(st.integers(0, (1 << 32) - 1)),
        tuple(infos),
        vers_major=draw(st.integers(0, 255)),
        vers_minor=draw(st.integers(0, 255)),
        int_names=int_names,
        finalized=draw(st.booleans()),
    )
    values = {}
    for info in infos:
        if info.required or draw(st.booleans()):
            values[info.field_id] = draw(field_values(info))
    return PdmMessage(
        defn,
        values,
        include_definition=draw(st.booleans()),
        big_endian=draw(st.booleans()),
        msg_type=draw(st.integers(0, 15)),
    )


ROUND_TRIP = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("ftype", list(PdmFieldType), ids=lambda t: t.name)
@ROUND_TRIP
@given(data=st.data())
def test_round_trip_each_field_type(ftype: PdmFieldType, data: st.DataObject) -> None:
    msg = data.draw(messages(st.just(ftype)))
    raw = pdm.encode(msg)
    defn = msg.definition
    assert pdm.decode(raw, {defn.key: defn}) == msg
    assert pdm.decode_header(raw).length == len(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_round_trip_mixed_messages(msg: PdmMessage) -> None:
    raw = pdm.encode(msg)
    back = pdm.decode(raw, {msg.definition.key: msg.definition})
    assert back == msg
    assert pdm.encode(back) == raw


# --- fuzzing: anything malformed raises WireError and nothing else --------------------------------

FUZZ = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SAMPLES = [VERIFIED_HEX, pdm.encode(PdmMessage(guide_definition(), GUIDE_VALUES, big_endian=False))]


def decode_or_wire_error(raw: bytes, cache: dict[tuple[int, int, int], PdmDefinition] | None = None) -> None:
    try:
        msg = pdm.decode(raw, cache)
    except WireError:
        return
    assert isinstance(msg, PdmMessage)
    pdm.encode(msg)  # whatever decodes must encode again


@pytest.mark.parametrize("sample", SAMPLES, ids=["verified", "guide-le"])
def test_every_truncation_raises_wire_error(sample: bytes) -> None:
    for cut in range(len(sample)):
        with pytest.raises(WireError):
            pdm.decode(sample[:cut])


@pytest.mark.parametrize("sample", SAMPLES, ids=["verified", "guide-le"])
def test_every_truncation_with_a_matching_length_raises_wire_error(sample: bytes) -> None:
    # the header length follows the cut, so the segment, definition and data parsers meet the end
    order = ">" if sample[:4] == pdm.MAGIC_BIG_ENDIAN else "<"
    for cut in range(pdm.HEADER_LEN, len(sample)):
        raw = bytearray(sample[:cut])
        struct.pack_into(order + "I", raw, 12, cut)
        with pytest.raises(WireError):
            pdm.decode(bytes(raw))


@FUZZ
@given(st.sampled_from(SAMPLES), st.data())
def test_byte_flips_raise_only_wire_error(sample: bytes, data: st.DataObject) -> None:
    raw = bytearray(sample)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    decode_or_wire_error(bytes(raw), {guide_definition().key: guide_definition()})


@FUZZ
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_wire_error(raw: bytes) -> None:
    decode_or_wire_error(raw)


@FUZZ
@given(st.sampled_from([pdm.MAGIC_BIG_ENDIAN, pdm.MAGIC_LITTLE_ENDIAN]), st.binary(max_size=200), st.data())
def test_random_bodies_after_a_valid_header_raise_only_wire_error(
    magic: bytes, body: bytes, data: st.DataObject
) -> None:
    # A plausible header (right magic, version 1, known first segment, true length) gets the fuzzer
    # past the header checks into the segment, definition and data parsers.
    order = ">" if magic == pdm.MAGIC_BIG_ENDIAN else "<"
    first = data.draw(st.sampled_from([0, 1, 2, 0xFF]))
    head = magic + struct.pack(order + "BBBBII", 0x10, first, 1, 0, 1001, 16 + len(body))
    decode_or_wire_error(head + body, {QTY_SYM.key: QTY_SYM})


@FUZZ
@given(messages(), st.data())
def test_flips_in_generated_messages_raise_only_wire_error(msg: PdmMessage, data: st.DataObject) -> None:
    raw = bytearray(pdm.encode(msg))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    assume(bytes(raw) != pdm.encode(msg))
    decode_or_wire_error(bytes(raw), {msg.definition.key: msg.definition})


def test_fuzzers_reach_the_data_parser() -> None:
    # guards the fuzzers above against only ever exercising the header checks: a flipped byte in
    # the data segment is parsed (sym's length 4 -> 3 decodes, 4 -> 5 runs past the segment)
    flipped = bytearray(VERIFIED_HEX)
    flipped[-5] = 3
    assert pdm.decode(bytes(flipped)).values[1] == "AAP"
    flipped[-5] = 5
    with pytest.raises(WireError, match="truncated PDM field 'sym'"):
        pdm.decode(bytes(flipped))
