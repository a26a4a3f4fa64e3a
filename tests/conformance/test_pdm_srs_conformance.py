"""tshark 4.0 decodes openum's LBMPDM and LBMSRS bytes cleanly and to the values encoded.

Spec: ../shared/wire/lbmc-pdm-srs.md sections 3.6 (PDM carriers), 4.1 (SRS over TCP) and 6 (how
the verification script checks).  Every PDM field type and every SRS message id tshark 4.0 knows is
its own test: encode with openum, wrap in TCP frames with the carrier the spec documents, require a
clean decode and compare tshark's values (read from PDML, which also carries FT_NONE items such as
the DECIMAL value and the raw bytes of every item) with what was encoded.

Known tshark 4.0 behaviour worked around here (not openum bugs):

* It shows a registration response's ``local_domain_id`` as 1 byte and ``protocol_version`` as the
  next 4 (the two lengths are swapped); the test compares the raw bytes of the two items instead.
* An array without an element count ("variable-size array") is dissected as one value of the base
  type: a numeric one is flagged malformed and a STRING one gets "Trailing stray characters" (its
  element lengths hold NULs), so such arrays are only checked with BLOB elements.
"""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from openum.wire import pdm, srs
from openum.wire.pdm import PdmDecimal, PdmDefinition, PdmFieldInfo, PdmFieldType, PdmMessage, PdmTimestamp
from openum.wire.srs import (
    CancelFrame,
    ErrorFrame,
    KeepaliveFrame,
    OpaqueFrame,
    PayloadFrame,
    ReceiverDelete,
    ReceiverEnd,
    ReceiverInfo,
    RegistrationRequest,
    RegistrationResponse,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    SetupFrame,
    SourceDelete,
    SourceInfo,
    SourceLeave,
    StreamRequest,
    WildcardReceiverDelete,
    WildcardReceiverEnd,
    WildcardReceiverInfo,
)
from tests.conformance.tshark import PdmlItem as Item
from tests.conformance.tshark import TcpFlow, Tshark, write_pcap

pytestmark = pytest.mark.tshark

SOURCE, RECEIVER, SRS_HOST = "10.0.0.1", "10.0.0.2", "10.0.0.9"
PDM_PORT = 14375  # inside lbmpdm_tcp's default 14371-14390; decoded with explicit decode-as (3.6)
LBTTCP_PORT = 14371
PDM_DECODE = ("tcp.port==14375,lbmpdm_tcp",)
SRS_DECODE = ("tcp.port==27000,lbmsrs",)
FIRST_DATA_FRAME = 4  # after the three handshake frames


def shows(items: Sequence[Item], name: str) -> list[str]:
    return [i.show for i in items if i.name == name]


def only(items: Sequence[Item], name: str) -> Item:
    found = [i for i in items if i.name == name]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


def tcp_pcap(path: Path, segments: Sequence[tuple[bytes, bool]], client: str, cport: int, server: str,
             sport: int) -> Path:  # fmt: skip
    flow = TcpFlow(client, cport, server, sport).handshake()
    for payload, from_client in segments:
        flow.send(payload, from_client=from_client)
    return write_pcap(path, flow.frames)


# --- LBMPDM ---------------------------------------------------------------------------------------

T = PdmFieldType
INNER = pdm.encode(PdmMessage(PdmDefinition(77, (PdmFieldInfo.define(0, "n", T.INT8),)), {0: 5}))
SCALAR_SAMPLES: dict[PdmFieldType, object] = {
    T.BOOLEAN: True,
    T.INT8: -100,
    T.UINT8: 250,
    T.INT16: -30000,
    T.UINT16: 65000,
    T.INT32: -2_000_000_000,
    T.UINT32: 4_000_000_000,
    T.INT64: -(1 << 62) - 7,
    T.UINT64: (1 << 64) - 2,
    T.FLOAT: 3.75,
    T.DOUBLE: -1234.5678,
    T.DECIMAL: PdmDecimal(-12345, -2),
    T.TIMESTAMP: PdmTimestamp(1_700_000_000, 123_456),
    T.FIX_STRING: "Hello",
    T.STRING: "AAPL",
    T.FIX_UNICODE: "h\u00e9llo",
    T.UNICODE: "a\u00f1b\u20ac",
    T.BLOB: b"\x00\x01\xfe\xff",
    T.MESSAGE: INNER,
}
ARRAY_SAMPLES: dict[PdmFieldType, tuple[object, ...]] = {
    T.BOOLEAN: (True, False, True),
    T.INT8: (-1, 0, 127),
    T.UINT8: (0, 1, 255),
    T.INT16: (-32768, 2, 32767),
    T.UINT16: (0, 3, 65535),
    T.INT32: (-(1 << 31), 4, (1 << 31) - 1),
    T.UINT32: (0, 5, (1 << 32) - 1),
    T.INT64: (-(1 << 63), 6, (1 << 63) - 1),
    T.UINT64: (0, 7, (1 << 64) - 1),
    T.FLOAT: (0.5, -2.0, 1024.25),
    T.DOUBLE: (0.125, -3.5, 1e10),
    T.DECIMAL: (PdmDecimal(1, 0), PdmDecimal(-5, 3), PdmDecimal(12345, -4)),
    T.TIMESTAMP: (PdmTimestamp(0, 0), PdmTimestamp(1, 1), PdmTimestamp(1_700_000_000, 999_999)),
    T.FIX_STRING: ("ab", "cde", "f"),
    T.STRING: ("x", "yz", ""),
    T.FIX_UNICODE: ("\u00e9", "ab", "c"),
    T.UNICODE: ("\u20ac", "", "q"),
    T.BLOB: (b"\x01", b"", b"\x02\x03"),
    T.MESSAGE: (INNER, INNER, INNER),
}
VALUE_FIELD = {
    T.BOOLEAN: "boolean", T.INT8: "int8", T.UINT8: "uint8", T.INT16: "int16", T.UINT16: "uint16",
    T.INT32: "int32", T.UINT32: "uint32", T.INT64: "int64", T.UINT64: "uint64", T.FLOAT: "float",
    T.DOUBLE: "double", T.DECIMAL: "decimal", T.TIMESTAMP: "timestamp", T.FIX_STRING: "fixed_string",
    T.STRING: "string", T.FIX_UNICODE: "fixed_unicode", T.UNICODE: "unicode", T.BLOB: "blob",
    T.MESSAGE: "message",
}  # fmt: skip


def shown_value(base: PdmFieldType, item: Item) -> object:
    """What tshark shows for one value, turned back into the Python value openum encodes."""
    if base is T.BOOLEAN:
        return bool(int(item.show))
    if base in (T.INT8, T.UINT8, T.INT16, T.UINT16, T.INT32, T.UINT32, T.INT64, T.UINT64):
        return int(item.show)
    if base in (T.FLOAT, T.DOUBLE):
        return float(item.show)
    if base is T.DECIMAL:  # FT_NONE: only the label, "DECIMAL Value: -123.45 (-12345e-2)"
        match = re.fullmatch(r"DECIMAL Value: (\S+) \((-?\d+)e(-?\d+)\)", item.showname)
        assert match, item.showname
        value = PdmDecimal(int(match[2]), int(match[3]))
        assert Decimal(match[1]) == Decimal(value.mantissa).scaleb(value.exponent)
        return value
    if base is T.TIMESTAMP:  # "Nov 14, 2023 22:13:20.123456000 UTC"
        match = re.fullmatch(r"(.+)\.(\d{9}) UTC", item.show)
        assert match, item.show
        when = datetime.strptime(match[1], "%b %d, %Y %H:%M:%S").replace(tzinfo=UTC)
        return PdmTimestamp(int(when.timestamp()), int(match[2]) // 1000)
    if base in (T.FIX_STRING, T.STRING):
        return item.show
    raw = bytes.fromhex(item.value)  # FT_BYTES in tshark 4.0: compare the bytes
    if base is T.FIX_UNICODE:
        return raw.split(b"\x00", 1)[0].decode()
    if base is T.UNICODE:
        return raw.decode()
    return raw


def field_for(ftype: PdmFieldType, field_id: int = 0, name: str = "fld") -> PdmFieldInfo:
    fixed_len = 8 if ftype.base in (T.FIX_STRING, T.FIX_UNICODE) else None
    return PdmFieldInfo.define(
        field_id, name, ftype, fixed_len=fixed_len, array_size=3 if ftype.is_array else None
    )


def sample_for(ftype: PdmFieldType) -> object:
    return ARRAY_SAMPLES[ftype.base] if ftype.is_array else SCALAR_SAMPLES[ftype]


def check_pdm_values(items: Sequence[Item], msg: PdmMessage) -> None:
    """Definition, field metadata and every value of ``msg`` as tshark decoded them."""
    defn = msg.definition
    assert shows(items, "lbmpdm.def_id")[0] == str(defn.def_id)
    assert shows(items, "lbmpdm.encoding")[0] == ("Big-Endian" if msg.big_endian else "Little-Endian")
    assert shows(items, "lbmpdm.field.id") == [str(f) for f in decoded_order(msg)]
    for info in defn.fields:
        if info.field_id not in msg.values:
            continue
        base = info.field_type.base
        # the items of this field: the generated id item starts each field
        start = next(
            n for n, i in enumerate(items) if i.name == "lbmpdm.field.id" and i.show == str(info.field_id)
        )
        end = next(
            (n for n in range(start + 1, len(items)) if items[n].name == "lbmpdm.field.id"), len(items)
        )
        mine = items[start:end]
        assert shows(mine, "lbmpdm.field.type") == [str(int(info.field_type))]
        name_field = "lbmpdm.field.int_name" if defn.int_names else "lbmpdm.field.string_name"
        assert shows(mine, name_field) == [str(info.name)]
        got = [shown_value(base, i) for i in mine if i.name == f"lbmpdm.field.value_{VALUE_FIELD[base]}"]
        value = msg.values[info.field_id]
        assert got == (list(value) if isinstance(value, tuple) else [value]), info  # type: ignore[arg-type]


def decoded_order(msg: PdmMessage) -> list[int]:
    """The order tshark shows fields in: the fixed-required section, then by field id (3.5)."""
    fields = msg.definition.fields
    fixed = [f.field_id for f in fields if f.fixed_required]
    rest = sorted(f.field_id for f in fields if not f.fixed_required and f.field_id in msg.values)
    return fixed + rest


def check_pdm_definition(items: Sequence[Item], defn: PdmDefinition) -> None:
    assert shows(items, "lbmpdm.segment_def.num_fields") == [str(len(defn.fields))]
    assert shows(items, "lbmpdm.segment_def.fixed_req_section_len") == [str(defn.fixed_required_length)]
    per_field = {
        "lbmpdm.segment_def.field.id": [f.field_id for f in defn.fields],
        "lbmpdm.segment_def.field.fld_type": [int(f.field_type) for f in defn.fields],
        "lbmpdm.segment_def.field.len": [f.length for f in defn.fields],
        "lbmpdm.segment_def.field.fixed_str_len": [f.fixed_str_len for f in defn.fields],
        "lbmpdm.segment_def.field.num_arr_elem": [f.num_arr_elem for f in defn.fields],
        "lbmpdm.segment_def.field.req": [int(f.required) for f in defn.fields],
        "lbmpdm.segment_def.field.fixed": [int(f.fixed) for f in defn.fields],
    }
    for name, expected in per_field.items():
        assert [int(s, 0) for s in shows(items, name)] == expected, name
    if defn.int_names:
        assert shows(items, "lbmpdm.segment_def.field.fld_int_name") == [str(f.name) for f in defn.fields]
    else:
        assert shows(items, "lbmpdm.segment_def.field.str_name") == [f.name for f in defn.fields]


@pytest.mark.parametrize("ftype", list(PdmFieldType), ids=lambda t: f"pdm-{t.name.lower()}")
def test_pdm_field_type_over_tcp(ftype: PdmFieldType, tshark: Tshark, pcap_dir: Path) -> None:
    info = field_for(ftype)
    # a required INT32 anchor before the field under test keeps the data offsets non-zero
    defn = PdmDefinition(
        1001, (PdmFieldInfo.define(0, "anchor", T.INT32), dataclasses.replace(info, field_id=1))
    )
    msg = PdmMessage(defn, {0: 42, 1: sample_for(ftype)})
    raw = pdm.encode(msg)
    assert pdm.decode(raw) == msg
    pcap = tcp_pcap(pcap_dir / "pdm.pcap", [(raw, False)], RECEIVER, 40011, SOURCE, PDM_PORT)
    ts = dataclasses.replace(tshark, decode_as=PDM_DECODE)
    items = ts.assert_clean_pdml(pcap)[FIRST_DATA_FRAME]
    assert shows(items, "lbmpdm.len") == [str(len(raw))]
    assert shows(items, "lbmpdm.next_hdr") == [str(int(pdm.PdmSegmentType.DEFINITION))]
    check_pdm_definition(items, defn)
    check_pdm_values(items, msg)


def mixed_definition(int_names: bool = False) -> PdmDefinition:
    def name(n: int) -> str | int:
        return 100 + n if int_names else f"Field{100 + n}"

    return PdmDefinition(
        2001,
        (
            PdmFieldInfo.define(0, name(0), T.BOOLEAN),
            PdmFieldInfo.define(1, name(1), T.INT32),
            PdmFieldInfo.define(2, name(2), T.FLOAT),
            PdmFieldInfo.define(3, name(3), T.INT8, required=False),
            PdmFieldInfo.define(4, name(4), T.FIX_STRING, fixed_len=12),
            PdmFieldInfo.define(5, name(5), T.STRING),
            PdmFieldInfo.define(6, name(6), T.BOOLEAN_ARR, array_size=3),
            PdmFieldInfo.define(7, name(7), T.UINT16, required=False),
            PdmFieldInfo.define(8, name(8), T.FIX_STRING_ARR, fixed_len=5, array_size=2),
        ),
        vers_major=2,
        vers_minor=3,
        int_names=int_names,
    )


MIXED_VALUES = {0: True, 1: 12345, 2: 2.5, 4: "Hello World!", 5: "variable", 6: (True, False, True),
                7: 7, 8: ("aaaaa", "bb")}  # fmt: skip


def split_messages(items: Sequence[Item]) -> list[list[Item]]:
    """The items of each PDM message in a frame (each starts at its magic)."""
    starts = [n for n, i in enumerate(items) if i.name == "lbmpdm.magic"]
    return [list(items[a:b]) for a, b in zip(starts, [*starts[1:], len(items)], strict=True)]


Checks = list[tuple[int, PdmMessage]]  # (frame number, message), one per PDM message in that frame
Case = tuple[Path, Checks, "Tshark | None"]


def _little_endian(pcap_dir: Path) -> Case:
    msg = PdmMessage(mixed_definition(), MIXED_VALUES, big_endian=False)
    return _pdm_flow(pcap_dir, [msg]), [(FIRST_DATA_FRAME, msg)], None


def _integer_names(pcap_dir: Path) -> Case:
    msg = PdmMessage(mixed_definition(int_names=True), MIXED_VALUES)
    return _pdm_flow(pcap_dir, [msg]), [(FIRST_DATA_FRAME, msg)], None


def _definition_from_earlier_message(pcap_dir: Path) -> Case:
    # the guide's "definition cache": tshark learns the definition on the channel (3.5 (a))
    first = PdmMessage(mixed_definition(), MIXED_VALUES)
    second = PdmMessage(mixed_definition(), {**MIXED_VALUES, 1: -1, 5: "later"}, include_definition=False)
    return _pdm_flow(pcap_dir, [first, second]), [(FIRST_DATA_FRAME + 1, second)], None


def _optional_fields_unset(pcap_dir: Path) -> Case:
    values = {k: v for k, v in MIXED_VALUES.items() if k != 7}
    msg = PdmMessage(mixed_definition(), values)
    return _pdm_flow(pcap_dir, [msg]), [(FIRST_DATA_FRAME, msg)], None


def _two_messages_one_segment(pcap_dir: Path) -> Case:
    first = PdmMessage(mixed_definition(), MIXED_VALUES)
    second = PdmMessage(PdmDefinition(5, (field_for(T.UINT64),)), {0: 99})
    raw = pdm.encode(first) + pdm.encode(second)
    pcap = tcp_pcap(pcap_dir / "pdm.pcap", [(raw, False)], RECEIVER, 40011, SOURCE, PDM_PORT)
    return pcap, [(FIRST_DATA_FRAME, first), (FIRST_DATA_FRAME, second)], None


def _inside_lbmc(pcap_dir: Path) -> Case:
    # 3.6: the payload of an LBMC data message (12-byte header + TOPICNAME "Orders"), built by hand
    msg = PdmMessage(mixed_definition(), MIXED_VALUES)
    raw = pdm.encode(msg)
    topic = b"Orders\x00"
    ext = bytes([0x00, 4 + len(topic)]) + b"\x00\x00" + topic
    lbmc = struct.pack(">BBHII", 0x00, 0x05, 12 + len(ext) + len(raw), 7, 9) + ext + raw
    pcap = tcp_pcap(pcap_dir / "lbmc.pcap", [(lbmc, False)], RECEIVER, 40012, SOURCE, LBTTCP_PORT)
    ts = Tshark(decode_as=(f"tcp.port=={LBTTCP_PORT},lbttcp",), prefs={"lbmc.dissect_lbmpdm": "TRUE"})
    return pcap, [(FIRST_DATA_FRAME, msg)], ts


def _pdm_flow(pcap_dir: Path, messages: Sequence[PdmMessage]) -> Path:
    segments = [(pdm.encode(m), False) for m in messages]
    return tcp_pcap(pcap_dir / "pdm.pcap", segments, RECEIVER, 40011, SOURCE, PDM_PORT)


PDM_CARRIER_CASES: dict[str, Callable[[Path], Case]] = {
    "pdm-little-endian": _little_endian,
    "pdm-integer-names": _integer_names,
    "pdm-definition-learnt-on-channel": _definition_from_earlier_message,
    "pdm-optional-unset": _optional_fields_unset,
    "pdm-two-messages-one-segment": _two_messages_one_segment,
    "pdm-inside-lbmc": _inside_lbmc,
}


@pytest.mark.parametrize("case", list(PDM_CARRIER_CASES))
def test_pdm_message_forms(case: str, tshark: Tshark, pcap_dir: Path) -> None:
    pcap, checks, custom = PDM_CARRIER_CASES[case](pcap_dir)
    ts = custom or dataclasses.replace(tshark, decode_as=PDM_DECODE)
    decoded = ts.assert_clean_pdml(pcap)
    seen: dict[int, int] = {}
    for frame, msg in checks:
        everything = decoded[frame]
        items = split_messages(everything)[seen.get(frame, 0)]
        seen[frame] = seen.get(frame, 0) + 1
        if msg.include_definition:
            check_pdm_definition(items, msg.definition)
        else:
            assert shows(items, "lbmpdm.segment_def.num_fields") == []
        check_pdm_values(items, msg)
        if case == "pdm-optional-unset":  # unset optional fields have no offset-table entry
            assert shows(items, "lbmpdm.segment_ofs.entry.id") == ["5"]
        if case == "pdm-two-messages-one-segment":
            assert shows(everything, "lbmpdm.def_id") == ["2001", "5"]
        if case == "pdm-inside-lbmc":
            assert shows(everything, "lbmc.tidx") == ["7"]
            assert shows(everything, "lbmc.topicname.topic") == ["Orders"]


def test_pdm_variable_size_blob_array(tshark: Tshark, pcap_dir: Path) -> None:
    # An array without an element count: tshark 4.0 shows it as one length-prefixed value of the base
    # type.  That is clean for BLOB (bytes); STRING would add "Trailing stray characters" (the
    # element lengths hold NULs) and numbers are flagged malformed, so only BLOB_ARR is checked.
    defn = PdmDefinition(9, (PdmFieldInfo.define(0, "chunks", T.BLOB_ARR),))
    msg = PdmMessage(defn, {0: (b"ab", b"c")})
    raw = pdm.encode(msg)
    pcap = tcp_pcap(pcap_dir / "pdm.pcap", [(raw, False)], RECEIVER, 40011, SOURCE, PDM_PORT)
    ts = dataclasses.replace(tshark, decode_as=PDM_DECODE)
    items = ts.assert_clean_pdml(pcap)[FIRST_DATA_FRAME]
    assert shows(items, "lbmpdm.field.length") == [str(4 + 2 + 4 + 1)]
    body = only(items, "lbmpdm.field.value_blob")
    assert bytes.fromhex(body.value) == struct.pack(">I", 2) + b"ab" + struct.pack(">I", 1) + b"c"
    assert pdm.decode(raw) == msg


# --- LBMSRS ---------------------------------------------------------------------------------------

OTID = bytes(range(0x20, 0x40))
CTX_A = bytes.fromhex("0102030405060708")
CTX_B = bytes.fromhex("a1b2c3d4e5f60718")
SIR = SourceInfo(
    OTID, "Orders", "TCP:10.0.0.1:14371:beef", 0x0A000001, 7, 0x3, "10.0.0.1", 14391, 5, CTX_A,
    encryption=1, compression=2, ulb_src_id=9, ulb_queue_id=10, ulb_reg_id=(1 << 40) + 11, context_type=1,
    version=12, version_flags=13, ttl=14, cost=15,
)  # fmt: skip
PREFIX = {
    RegistrationRequest: "lbmsrs.registration_request",
    RegistrationResponse: "lbmsrs.registration_response",
    StreamRequest: "lbmsrs.stream_req",
    SourceInfo: "lbmsrs.sir",
    SourceDelete: "lbmsrs.sdr",
    ReceiverInfo: "lbmsrs.rir",
    ReceiverDelete: "lbmsrs.rdr",
    ReceiverEnd: "lbmsrs.rer",
    WildcardReceiverInfo: "lbmsrs.wir",
    WildcardReceiverDelete: "lbmsrs.wdr",
    WildcardReceiverEnd: "lbmsrs.wer",
    SourceLeave: "lbmsrs.sli",
}


def check_record(items: Sequence[Item], rec: srs.SrsRecord, index: int = 0) -> None:
    """Every field of ``rec`` as tshark 4.0 shows it (the ``index``-th record with this prefix)."""
    prefix = PREFIX[type(rec)]
    for field in dataclasses.fields(rec):
        value = getattr(rec, field.name)
        if isinstance(rec, RegistrationResponse) and field.name != "client_id":
            continue  # checked as raw bytes below: tshark 4.0 swaps these two item lengths
        item = [i for i in items if i.name == f"{prefix}.{field.name}"][index]
        if isinstance(value, bytes):
            assert bytes.fromhex(item.value) == value, field.name
        elif isinstance(value, str):
            assert item.show == value, field.name
            length = [i for i in items if i.name in (f"{prefix}.{field.name}_len",)]
            if length:  # the NUL is inside the u8 length
                assert int(length[index].show) == len(value.encode()) + 1
        else:
            assert int(item.show, 0) == value, field.name
    if isinstance(rec, RegistrationResponse):
        raw = only(items, f"{prefix}.local_domain_id").value + only(items, f"{prefix}.protocol_version").value
        assert bytes.fromhex(raw) == struct.pack(">IB", rec.local_domain_id, rec.protocol_version)


def receiver_like(kind: type, text: str) -> srs.SrsRecord:
    rec: srs.SrsRecord = kind(text, 0x01020304, CTX_B, 2, 3, 4, 0)
    return rec


# (frame, sent by the client?) for each SRS message id tshark 4.0 knows (4.2), plus SER.
SRS_RECORD_CASES: dict[str, tuple[srs.Frame, bool]] = {
    "srs-1-registration-request": (
        RequestResponseFrame(
            1,
            srs.encode_records(
                [
                    RegistrationRequest(
                        srs.AppType.STORE,
                        "10.0.0.1",
                        14391,
                        0xCAFE,
                        0x0A000001,
                        1,
                        srs.InterestMode.ADVERTISE_FILTER | srs.InterestMode.INTEREST_FORWARD,
                        0x00112233,
                    )
                ]
            ),
        ),
        True,
    ),
    "srs-2-registration-response": (
        PayloadFrame(
            1, srs.encode_records([RegistrationResponse(0x1122334455667788, 0xA0B0C0D0, 7)]), complete=True
        ),
        False,
    ),
    "srs-3-stream-request": (RequestStreamFrame(3, 0x7FFFFFFF, srs.encode_records([StreamRequest(0)])), True),
    "srs-4-source-info": (RequestFnfFrame(5, srs.encode_records([SIR])), True),
    "srs-4-source-end": (PayloadFrame(3, srs.encode_records([dataclasses.replace(SIR, cost=-1)])), False),
    "srs-5-source-delete": (PayloadFrame(3, srs.encode_records([SourceDelete(OTID, "Orders")])), False),
    "srs-6-receiver-info": (
        PayloadFrame(3, srs.encode_records([receiver_like(ReceiverInfo, "Orders")])),
        False,
    ),
    "srs-7-receiver-delete": (
        PayloadFrame(3, srs.encode_records([receiver_like(ReceiverDelete, "Q")])),
        False,
    ),
    "srs-8-receiver-end": (
        PayloadFrame(3, srs.encode_records([receiver_like(ReceiverEnd, "Orders/US")])),
        False,
    ),
    "srs-9-wildcard-receiver-info": (
        PayloadFrame(3, srs.encode_records([receiver_like(WildcardReceiverInfo, "^Ord.*")])),
        False,
    ),
    "srs-10-wildcard-receiver-delete": (
        PayloadFrame(3, srs.encode_records([receiver_like(WildcardReceiverDelete, "^Ord.*")])),
        False,
    ),
    "srs-11-wildcard-receiver-end": (
        PayloadFrame(3, srs.encode_records([receiver_like(WildcardReceiverEnd, "Market/.*")])),
        False,
    ),
    "srs-12-source-leave": (
        RequestFnfFrame(
            5, srs.encode_records([SourceLeave(OTID, "Orders", "TCP:10.0.0.1:14371", CTX_A, 1, 2, 3, 0)])
        ),
        True,
    ),
}
INFO_LABEL = {4: "SIR", 5: "SDR", 6: "RIR", 7: "RDR", 8: "RER", 9: "WIR", 10: "WDR", 11: "WER", 12: "SLI"}


def srs_tally(items: Sequence[Item]) -> dict[str, int]:
    """tshark's per-frame record count, a text item "SRS:[SIR:1 SER:0 ...]"."""
    (tally,) = [i.show for i in items if not i.name and i.show.startswith("SRS:[")]
    return {kind: int(count) for kind, count in re.findall(r"([A-Z]{3}):(\d+)", tally)}


def srs_pcap(pcap_dir: Path, segments: Sequence[tuple[bytes, bool]]) -> Path:
    return tcp_pcap(pcap_dir / "srs.pcap", segments, SOURCE, 40013, SRS_HOST, srs.DEFAULT_PORT)


def check_frame_header(items: Sequence[Item], frame: srs.Frame, raw: bytes) -> None:
    assert shows(items, "lbmsrs.rsocket.frame_len")[0] == str(len(raw) - 3)
    ftype = raw[7] >> 2
    assert shows(items, "lbmsrs.rsocket.frame_type")[0] == str(ftype)
    assert shows(items, "lbmsrs.rsocket.stream_id")[0] == str(getattr(frame, "stream_id", 0))


@pytest.mark.parametrize("case", list(SRS_RECORD_CASES))
def test_srs_message_over_tcp(case: str, tshark: Tshark, pcap_dir: Path) -> None:
    frame, from_client = SRS_RECORD_CASES[case]
    raw = srs.encode(frame)
    assert srs.decode(raw) == frame
    pcap = srs_pcap(pcap_dir, [(raw, from_client)])
    ts = dataclasses.replace(tshark, decode_as=SRS_DECODE)
    items = ts.assert_clean_pdml(pcap)[FIRST_DATA_FRAME]
    check_frame_header(items, frame, raw)
    (rec,) = srs.decode_records(getattr(frame, "data", b""))
    assert shows(items, "lbmsrs.message_id") == [str(rec.MESSAGE_ID)]
    check_record(items, rec)
    if isinstance(frame, RequestStreamFrame):
        assert shows(items, "lbmsrs.rsocket.request_n") == [str(frame.initial_request_n)]
    if rec.MESSAGE_ID >= 4:  # batch records: tshark tallies them, SER when cost is -1 (4.4)
        label = "SER" if isinstance(rec, SourceInfo) and rec.is_end else INFO_LABEL[rec.MESSAGE_ID]
        assert {k: v for k, v in srs_tally(items).items() if v} == {label: 1}
        text = getattr(rec, "pattern", None) or getattr(rec, "topic", "")  # wildcard records: the pattern
        assert only(items, PREFIX[type(rec)]).showname == f"{label}:Topic:{text}"


def test_srs_batch_of_every_record(tshark: Tshark, pcap_dir: Path) -> None:
    records = [
        SIR,
        dataclasses.replace(SIR, topic="Gone", cost=-1),
        SourceDelete(OTID, "Orders"),
        receiver_like(ReceiverInfo, "Orders"),
        receiver_like(ReceiverDelete, "Orders"),
        receiver_like(ReceiverEnd, "Orders"),
        receiver_like(WildcardReceiverInfo, "^Ord.*"),
        receiver_like(WildcardReceiverDelete, "^Ord.*"),
        receiver_like(WildcardReceiverEnd, "^Ord.*"),
        SourceLeave(OTID, "Orders", "TCP:10.0.0.1:14371", CTX_A),
    ]
    frame = PayloadFrame(3, srs.encode_records(records))
    pcap = srs_pcap(pcap_dir, [(srs.encode(frame), False)])
    ts = dataclasses.replace(tshark, decode_as=SRS_DECODE)
    items = ts.assert_clean_pdml(pcap)[FIRST_DATA_FRAME]
    assert shows(items, "lbmsrs.message_id") == [str(r.MESSAGE_ID) for r in records]
    check_record(items, records[0], 0)
    check_record(items, records[1], 1)
    for rec in records[2:]:
        check_record(items, rec)
    assert srs_tally(items) == dict.fromkeys(
        ["SIR", "SER", "SDR", "RIR", "RER", "RDR", "WIR", "WER", "WDR", "SLI"], 1
    )


def test_srs_session_with_every_frame_type(tshark: Tshark, pcap_dir: Path) -> None:
    # tshark's packet check needs the first frame of a segment to carry SRS data (or be SETUP /
    # KEEPALIVE), so data-less REQUEST_N, CANCEL, ERROR and LEASE frames ride behind a PAYLOAD.
    rir = srs.encode_records([receiver_like(ReceiverInfo, "A")])
    frames: list[tuple[list[srs.Frame], bool]] = [
        ([SetupFrame(5000, 30000)], True),
        (
            [
                SetupFrame(
                    1000,
                    9000,
                    "text/plain",
                    "application/x-srs",
                    lease=True,
                    resume_token=b"tok",
                    metadata=b"md",
                    data=rir,
                )
            ],
            True,
        ),
        ([KeepaliveFrame(123456789, respond=True)], False),
        ([RequestChannelFrame(9, 5, rir, metadata=b"m", complete=True)], True),
        (
            [
                PayloadFrame(3, rir, follows=False, complete=True),
                RequestNFrame(3, 100),
                CancelFrame(7),
                ErrorFrame(3, srs.ErrorCode.APPLICATION_ERROR),
                OpaqueFrame(srs.FrameType.LEASE, 0, 0, bytes(8)),
            ],
            False,
        ),
    ]
    segments = [(b"".join(srs.encode(f) for f in group), from_client) for group, from_client in frames]
    pcap = srs_pcap(pcap_dir, segments)
    ts = dataclasses.replace(tshark, decode_as=SRS_DECODE)
    decoded = ts.assert_clean_pdml(pcap)

    setup = decoded[FIRST_DATA_FRAME]
    assert shows(setup, "lbmsrs.rsocket.keepalive.interval") == ["5000"]
    assert shows(setup, "lbmsrs.rsocket.max_lifetime") == ["30000"]
    assert shows(setup, "lbmsrs.rsocket.mdata_mime_type") == ["application/octet-stream"]
    assert shows(setup, "lbmsrs.rsocket.version.major") == ["1"]

    resume = decoded[FIRST_DATA_FRAME + 1]
    assert shows(resume, "lbmsrs.rsocket.flags.resume") == ["1"]
    assert shows(resume, "lbmsrs.rsocket.flags.lease") == ["1"]
    assert shows(resume, "lbmsrs.rsocket.resume.token") == ["tok"]
    assert shows(resume, "lbmsrs.rsocket.data_mime_type") == ["application/x-srs"]
    assert shows(resume, "lbmsrs.rsocket.metadata") == ["md"]
    assert shows(resume, "lbmsrs.rir.topic") == ["A"]

    keepalive = decoded[FIRST_DATA_FRAME + 2]
    assert shows(keepalive, "lbmsrs.rsocket.frame_type") == ["3"]
    assert shows(keepalive, "lbmsrs.rsocket.flags.respond") == ["1"]
    assert shows(keepalive, "lbmsrs.rsocket.keepalive_last_received_position") == ["123456789"]

    channel = decoded[FIRST_DATA_FRAME + 3]
    assert shows(channel, "lbmsrs.rsocket.frame_type") == ["7"]
    assert shows(channel, "lbmsrs.rsocket.flags.complete") == ["1"]
    assert shows(channel, "lbmsrs.rsocket.request_n") == ["5"]
    assert shows(channel, "lbmsrs.rsocket.metadata_len") == ["1"]

    control = decoded[FIRST_DATA_FRAME + 4]
    assert shows(control, "lbmsrs.rsocket.frame_type") == ["10", "8", "9", "11", "2"]
    assert shows(control, "lbmsrs.rsocket.stream_id") == ["3", "3", "7", "3", "0"]
    assert shows(control, "lbmsrs.rsocket.request_n") == ["100"]
    assert shows(control, "lbmsrs.rsocket.error_code") == [str(int(srs.ErrorCode.APPLICATION_ERROR))]
    assert shows(control, "lbmsrs.rsocket.flags.complete")[0] == "1"


def test_srs_frame_split_across_segments(tshark: Tshark, pcap_dir: Path) -> None:
    # A PAYLOAD frame cut in two TCP segments (and glued to the next frame): tshark reassembles it
    # by the u24 length, and openum's FrameDecoder does the same with the same two reads.
    batch = PayloadFrame(3, srs.encode_records([SIR, SourceDelete(OTID, "Orders")]))
    raw = srs.encode(batch) + srs.encode(KeepaliveFrame(1))
    cut = 40
    pcap = srs_pcap(pcap_dir, [(raw[:cut], False), (raw[cut:], False)])
    ts = dataclasses.replace(tshark, decode_as=SRS_DECODE)
    items = ts.assert_clean_pdml(pcap)[FIRST_DATA_FRAME + 1]
    assert shows(items, "lbmsrs.message_id") == ["4", "5"]
    check_record(items, SIR)
    assert shows(items, "lbmsrs.rsocket.frame_type") == ["10", "3"]
    decoder = srs.FrameDecoder()
    assert decoder.feed(raw[:cut]) == []
    assert decoder.feed(raw[cut:]) == [batch, KeepaliveFrame(1)]
