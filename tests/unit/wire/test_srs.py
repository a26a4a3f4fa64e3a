"""LBMSRS codec: the verified frames of the wire spec (section 6.1), every record and frame type,
batches, the TCP stream decoder, round trips and fuzzing.

Spec: ../shared/wire/lbmc-pdm-srs.md sections 4 and 6.1.
"""

from __future__ import annotations

import dataclasses
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.wire import srs
from openum.wire._common import WireError
from openum.wire.srs import (
    CancelFrame,
    ContextNameEnd,
    ContextNameInfo,
    ContextNameQuery,
    DomainInfo,
    ErrorFrame,
    FrameDecoder,
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
    RouteEnd,
    RouteInfo,
    SetupFrame,
    SourceDelete,
    SourceInfo,
    SourceLeave,
    StreamRequest,
    WildcardReceiverDelete,
    WildcardReceiverEnd,
    WildcardReceiverInfo,
)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace("|", " ").replace("_", ""))


OTID = bytes(range(0x20, 0x40))
CTX_A = bytes.fromhex("0102030405060708")
CTX_B = bytes.fromhex("1112131415161718")
MIME = b"application/octet-stream".hex()

# Section 6.1, case lbmsrs, verbatim.
SETUP_HEX = h(f"000044 00000000 0400 0001 0000 00001388 00007530 18 {MIME} 18 {MIME}")
REG_REQ_HEX = h("00001d 00000001 1000 | 0001 00 0a000001 3837 0000cafe 0a000001 01 01 00000000")
REG_RESP_HEX = h("000015 00000001 2860 | 0002 000000000000004d 00000000 01")
STREAM_REQ_HEX = h("00000d 00000003 1800 7fffffff | 0003 00")
SIR_FNF_HEX = h(
    "000083 00000005 1400 | 0004 " + OTID.hex() + " 07 4f726465727300 13 "
    + b"TCP:10.0.0.1:14371".hex() + "00 "
    "0a000001 00000007 00000000 0a000001 3837 00000000 00 00 00000000 00000000 0000000000000000 "
    "0102030405060708 00 00000000 00000000 0000 00000000"
)  # fmt: skip
KEEPALIVE_HEX = h("00000e 00000000 0c80 0000000000000000")
VERIFIED = [SETUP_HEX, REG_REQ_HEX, REG_RESP_HEX, STREAM_REQ_HEX, SIR_FNF_HEX, KEEPALIVE_HEX]

SIR = SourceInfo(OTID, "Orders", "TCP:10.0.0.1:14371", 0x0A000001, 7, 0, "10.0.0.1", 14391, 0, CTX_A)


# --- the verified frames -------------------------------------------------------------------------


def test_verified_setup() -> None:
    assert srs.decode(SETUP_HEX) == SetupFrame(5000, 30000)
    assert srs.encode(SetupFrame()) == SETUP_HEX


def test_verified_registration_request() -> None:
    frame = srs.decode(REG_REQ_HEX)
    assert isinstance(frame, RequestResponseFrame)
    assert frame.stream_id == 1
    assert frame.follows is False
    assert frame.metadata is None
    (rec,) = srs.decode_records(frame.data)
    assert rec == RegistrationRequest(
        app_type=srs.AppType.APPLICATION,
        client_addr="10.0.0.1",
        client_port=14391,
        session_id=0xCAFE,
        host_id=0x0A000001,
        protocol_version=1,
        interest_mode=srs.InterestMode.ADVERTISE_FILTER,
        local_domain_id=0,
    )
    assert srs.encode(RequestResponseFrame(1, srs.encode_records([rec]))) == REG_REQ_HEX


def test_verified_registration_response() -> None:
    frame = srs.decode(REG_RESP_HEX)
    assert frame == PayloadFrame(1, frame.data, complete=True, next=True)  # type: ignore[union-attr]
    assert srs.decode_records(frame.data) == (RegistrationResponse(77, 0, 1),)  # type: ignore[union-attr]
    assert srs.encode(frame) == REG_RESP_HEX


def test_verified_stream_request() -> None:
    frame = srs.decode(STREAM_REQ_HEX)
    assert frame == RequestStreamFrame(3, 0x7FFFFFFF, b"\x00\x03\x00")
    assert srs.decode_records(frame.data) == (StreamRequest(0),)  # type: ignore[union-attr]


def test_verified_source_info() -> None:
    frame = srs.decode(SIR_FNF_HEX)
    assert isinstance(frame, RequestFnfFrame)
    assert frame.stream_id == 5
    (rec,) = srs.decode_records(frame.data)
    assert rec == SIR
    assert isinstance(rec, SourceInfo)
    assert rec.topic == "Orders"
    assert rec.source == "TCP:10.0.0.1:14371"
    assert rec.topic_idx == 7
    assert rec.request_port == 14391
    assert rec.context_instance == CTX_A
    assert rec.cost == 0
    assert rec.is_end is False
    assert len(frame.data) == 125  # section 4.4: 125 bytes for these two strings
    assert srs.encode(RequestFnfFrame(5, srs.encode_records([SIR]))) == SIR_FNF_HEX


def test_verified_keepalive() -> None:
    assert srs.decode(KEEPALIVE_HEX) == KeepaliveFrame(0, respond=True)
    assert srs.encode(KeepaliveFrame(0, respond=True)) == KEEPALIVE_HEX


def test_verified_session_as_one_stream() -> None:
    stream = b"".join(VERIFIED)
    frames = srs.decode_frames(stream)
    assert [type(f).__name__ for f in frames] == [
        "SetupFrame", "RequestResponseFrame", "PayloadFrame", "RequestStreamFrame",
        "RequestFnfFrame", "KeepaliveFrame",
    ]  # fmt: skip
    assert b"".join(srs.encode(f) for f in frames) == stream


# --- the verified batch, rebuilt with struct as the verification script builds it -----------------


def str8(text: str) -> bytes:
    raw = text.encode() + b"\x00"
    return bytes([len(raw)]) + raw


def rcv_like(msg_id: int, topic: str, ctx: bytes) -> bytes:
    return (
        struct.pack(">H", msg_id)
        + str8(topic)
        + struct.pack(">I", 0)
        + ctx
        + struct.pack(">BIII", 0, 0, 0, 0)
    )


BATCH_HEX = (
    SIR_FNF_HEX[9:]
    + struct.pack(">H", 5) + OTID + str8("Orders")
    + rcv_like(6, "Orders", CTX_B) + rcv_like(7, "Orders", CTX_B) + rcv_like(8, "Orders", CTX_B)
    + rcv_like(9, "^Ord.*", CTX_B) + rcv_like(10, "^Ord.*", CTX_B) + rcv_like(11, "^Ord.*", CTX_B)
    + struct.pack(">H", 12) + OTID + str8("Orders") + str8("TCP:10.0.0.1:14371") + CTX_A
    + struct.pack(">BIII", 0, 0, 0, 0)
)  # fmt: skip
BATCH = (
    SIR,
    SourceDelete(OTID, "Orders"),
    ReceiverInfo("Orders", 0, CTX_B),
    ReceiverDelete("Orders", 0, CTX_B),
    ReceiverEnd("Orders", 0, CTX_B),
    WildcardReceiverInfo("^Ord.*", 0, CTX_B),
    WildcardReceiverDelete("^Ord.*", 0, CTX_B),
    WildcardReceiverEnd("^Ord.*", 0, CTX_B),
    SourceLeave(OTID, "Orders", "TCP:10.0.0.1:14371", CTX_A),
)


def test_verified_batch_decodes_every_record() -> None:
    records = srs.decode_records(BATCH_HEX)
    assert records == BATCH
    assert [r.MESSAGE_ID for r in records] == list(range(4, 13))


def test_verified_batch_encodes_byte_for_byte() -> None:
    assert srs.encode_records(BATCH) == BATCH_HEX
    frame = srs.encode(PayloadFrame(3, BATCH_HEX))
    assert frame[:9] == struct.pack(">I", 6 + len(BATCH_HEX))[1:] + h("00000003 2820")


def test_source_end_record() -> None:
    ser = dataclasses.replace(SIR, cost=srs.SOURCE_END_COST)
    raw = srs.encode_records([ser])
    assert raw[-4:] == b"\xff\xff\xff\xff"
    (back,) = srs.decode_records(raw)
    assert isinstance(back, SourceInfo)
    assert back.is_end is True
    assert back == ser


def test_strings_without_nul_decode() -> None:
    # the NUL belongs inside the length, but a sender that leaves it out still decodes (4.2)
    raw = struct.pack(">H", 5) + OTID + b"\x06Orders"
    assert srs.decode_records(raw) == (SourceDelete(OTID, "Orders"),)


def test_uniform_records_13_to_18() -> None:
    records = (
        RouteInfo((1, 2, 3), "10.0.0.5", 14000, CTX_A, 1, 2, 3, 4, 0),
        RouteEnd((), "10.0.0.6", 1, CTX_B),
        DomainInfo(9, CTX_A),
        ContextNameQuery("ctx-a", 9, CTX_A),
        ContextNameInfo("ctx-a", 9, "10.0.0.7", 15000, CTX_B, CTX_A),
        ContextNameEnd("ctx-a", 9, "10.0.0.7", 15000, CTX_B, CTX_A),
    )
    raw = srs.encode_records(records)
    route = (struct.pack(">HHIII", 13, 3, 1, 2, 3) + bytes([10, 0, 0, 5]) + struct.pack(">H", 14000)
             + CTX_A + struct.pack(">BIIHH", 1, 2, 3, 4, 0))  # fmt: skip
    assert raw.startswith(route)
    assert srs.decode_records(raw) == records


# --- single-record rules and malformed payloads --------------------------------------------------


def test_registration_records_must_be_alone() -> None:
    req = RegistrationRequest(0, "10.0.0.1", 1, 2, 3)
    with pytest.raises(WireError, match="alone"):
        srs.encode_records([req, SIR])
    with pytest.raises(WireError, match="alone"):
        srs.decode_records(srs.encode_records([req]) + b"\x00")
    with pytest.raises(WireError, match="batched"):
        srs.decode_records(srs.encode_records([SIR]) + srs.encode_records([StreamRequest()]))


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (b"\x00", "truncated"),
        (b"\x00\x13rest", "unknown SRS message id 19"),
        (b"\x00\x00", "unknown SRS message id 0"),
        (REG_REQ_HEX[9:-1], "truncated"),
        (BATCH_HEX[:-1], "truncated"),
        (BATCH_HEX + b"\x00", "truncated"),
        (struct.pack(">H", 5) + OTID + b"\x09Orders", "truncated"),
    ],
)
def test_decode_records_rejects_malformed(payload: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        srs.decode_records(payload)


@pytest.mark.parametrize(
    "build",
    [
        lambda: SourceDelete(OTID[:31], "x"),
        lambda: SourceDelete(OTID, "x\x00y"),
        lambda: SourceDelete(OTID, "x" * 255),
        lambda: ReceiverInfo("t", -1, CTX_A),
        lambda: ReceiverInfo("t", 0, CTX_A, context_type=256),
        lambda: RegistrationRequest(0, "not-an-ip", 1, 2, 3),
        lambda: RegistrationResponse(1 << 64),
        lambda: dataclasses.replace(SIR, cost=1 << 31),
        lambda: RouteInfo(tuple(range(70000)), "10.0.0.1", 1, CTX_A),
        lambda: PayloadFrame(-1),
        lambda: PayloadFrame(1 << 31),
        lambda: PayloadFrame(1, metadata="text"),  # type: ignore[arg-type]
        lambda: SetupFrame(metadata_mime="x" * 256),
        lambda: OpaqueFrame(10, 1),  # PAYLOAD has its own record
        lambda: OpaqueFrame(64, 1),
        lambda: KeepaliveFrame(-1),
    ],
)
def test_constructors_validate(build: object) -> None:
    with pytest.raises(WireError):
        build()  # type: ignore[operator]


def test_encode_records_rejects_non_records() -> None:
    with pytest.raises(WireError):
        srs.encode_records([])
    with pytest.raises(WireError):
        srs.encode_records([PayloadFrame(1)])  # type: ignore[list-item]


# --- frames --------------------------------------------------------------------------------------


def test_every_frame_type_layout() -> None:
    cases = [
        (KeepaliveFrame(7, respond=False, data=b"xy"), "00000000 0c00 0000000000000007 7879"),
        (RequestNFrame(3, 100), "00000003 2000 00000064"),
        (CancelFrame(3), "00000003 2400"),
        (ErrorFrame(3, srs.ErrorCode.APPLICATION_ERROR, b"oops"), "00000003 2c00 00000201 6f6f7073"),
        (RequestChannelFrame(9, 5, b"d", complete=True), "00000009 1c40 00000005 64"),
        (PayloadFrame(3, b"d", metadata=b"m", follows=True), "00000003 29a0 000001 6d 64"),
        (RequestFnfFrame(5, b"", metadata=b""), "00000005 1500 000000"),
        (OpaqueFrame(srs.FrameType.LEASE, 0, 0, b"\x00\x00\x00\x01"), "00000000 0800 00000001"),
        (OpaqueFrame(srs.FrameType.EXT, 4, 0x200, b"z"), "00000004 fe00 7a"),
        (
            SetupFrame(1, 2, "a", "b", lease=True, resume_token=b"t", metadata=b"", data=b"d"),
            "00000000 05c0 0001 0000 00000001 00000002 0001 74 01 61 01 62 000000 64",
        ),
    ]
    for frame, body in cases:
        raw = srs.encode(frame)
        assert raw[3:] == h(body), frame
        assert int.from_bytes(raw[:3], "big") == len(raw) - 3
        assert srs.decode(raw) == frame


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        (b"\x00\x00", "truncated"),
        (h("000005 00000000 0c"), "truncated"),
        (h("000006 00000001 0c00"), "stream 0"),  # KEEPALIVE on stream 1
        (h("000008 00000000 0c00 0000"), "truncated"),
        (h("000006 00000003 0000"), "reserved"),  # frame type 0
        (h("00000a 00000003 2100 00000064"), "no metadata"),  # REQUEST_N with M
        (h("00000b 00000003 2000 00000064 00"), "after"),  # REQUEST_N with trailing bytes
        (h("000009 00000003 2900 000005"), "truncated"),  # metadata longer than the frame
        (h("00000a 00000003 2000 00000064") + b"\x00", "follow"),
        (h("000006 80000003 2400"), "stream_id"),  # 32-bit stream id
    ],
)
def test_decode_rejects_malformed_frames(raw: bytes, match: str) -> None:
    with pytest.raises(WireError, match=match):
        srs.decode(raw)


def test_encode_rejects_oversized_frame() -> None:
    with pytest.raises(WireError, match="u24"):
        srs.encode(PayloadFrame(1, bytes(srs.MAX_FRAME_LEN)))


# --- the TCP stream decoder ----------------------------------------------------------------------

STREAM = b"".join(VERIFIED) + srs.encode(PayloadFrame(3, BATCH_HEX))
STREAM_FRAMES = srs.decode_frames(STREAM)


def test_stream_split_at_every_position() -> None:
    for cut in range(len(STREAM) + 1):
        dec = FrameDecoder()
        first = dec.feed(STREAM[:cut])
        second = dec.feed(STREAM[cut:])
        assert tuple(first + second) == STREAM_FRAMES
        assert dec.buffered == 0


def test_stream_byte_at_a_time() -> None:
    dec = FrameDecoder()
    frames = []
    for i in range(len(STREAM)):
        frames += dec.feed(STREAM[i : i + 1])
        assert dec.buffered <= 600
    assert tuple(frames) == STREAM_FRAMES
    assert len(frames) == 7


def test_stream_holds_a_partial_frame() -> None:
    dec = FrameDecoder()
    assert dec.feed(SIR_FNF_HEX[:50]) == []
    assert dec.buffered == 50
    assert dec.feed(SIR_FNF_HEX[50:] + KEEPALIVE_HEX[:2]) == [srs.decode(SIR_FNF_HEX)]
    assert dec.buffered == 2


def test_stream_returns_good_frames_before_failing() -> None:
    bad = h("000006 00000003 0000")  # frame type 0
    dec = FrameDecoder()
    assert dec.feed(SETUP_HEX + KEEPALIVE_HEX + bad) == [srs.decode(SETUP_HEX), srs.decode(KEEPALIVE_HEX)]
    with pytest.raises(WireError, match="reserved"):
        dec.feed()
    with pytest.raises(WireError, match="already failed"):
        dec.feed(KEEPALIVE_HEX)


def test_stream_rejects_a_too_short_length() -> None:
    dec = FrameDecoder()
    with pytest.raises(WireError, match="shorter"):
        dec.feed(h("000002 0000"))


# --- round trips ---------------------------------------------------------------------------------

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)
u64 = st.integers(0, (1 << 64) - 1)
sid = st.integers(0, 0x7FFF_FFFF)
ips = st.builds(lambda n: ".".join(str(b) for b in n.to_bytes(4, "big")), u32)
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40).filter(
    lambda s: len(s.encode()) <= 254
)
otids = st.binary(min_size=32, max_size=32)
ctxs = st.binary(min_size=8, max_size=8)
blobs = st.binary(max_size=64)
metas = st.none() | st.binary(max_size=16)

RECORDS = {
    RegistrationRequest: st.builds(RegistrationRequest, u8, ips, u16, u32, u32, u8, u8, u32),
    RegistrationResponse: st.builds(RegistrationResponse, u64, u32, u8),
    StreamRequest: st.builds(StreamRequest, u8),
    SourceInfo: st.builds(
        SourceInfo,
        otids,
        text,
        text,
        u32,
        u32,
        u32,
        ips,
        u16,
        u32,
        ctxs,
        u8,
        u8,
        u32,
        u32,
        u64,
        u8,
        u32,
        u32,
        u16,
        st.integers(-(1 << 31), (1 << 31) - 1),
    ),
    SourceDelete: st.builds(SourceDelete, otids, text),
    SourceLeave: st.builds(SourceLeave, otids, text, text, ctxs, u8, u32, u32, u32),
    DomainInfo: st.builds(DomainInfo, u32, ctxs, u8, u32, u32, u32),
    ContextNameQuery: st.builds(ContextNameQuery, text, u32, ctxs, u8, u32, u32, u32),
}
for _kind in (ReceiverInfo, ReceiverDelete, ReceiverEnd, WildcardReceiverInfo, WildcardReceiverDelete,
              WildcardReceiverEnd):  # fmt: skip
    RECORDS[_kind] = st.builds(_kind, text, u32, ctxs, u8, u32, u32, u32)
for _kind in (RouteInfo, RouteEnd):
    RECORDS[_kind] = st.builds(
        _kind, st.lists(u32, max_size=5).map(tuple), ips, u16, ctxs, u8, u32, u32, u16, u16
    )
for _kind in (ContextNameInfo, ContextNameEnd):
    RECORDS[_kind] = st.builds(_kind, text, u32, ips, u16, ctxs, ctxs, u8, u32, u32, u32)
assert len(RECORDS) == 18

FRAMES = {
    SetupFrame: st.builds(
        SetupFrame,
        u32,
        u32,
        text.filter(lambda s: len(s.encode()) <= 255),
        text,
        u16,
        u16,
        st.booleans(),
        st.none() | st.binary(max_size=8),
        metas,
        blobs,
    ),
    KeepaliveFrame: st.builds(KeepaliveFrame, u64, st.booleans(), blobs),
    RequestResponseFrame: st.builds(RequestResponseFrame, sid, blobs, metas, st.booleans()),
    RequestFnfFrame: st.builds(RequestFnfFrame, sid, blobs, metas, st.booleans()),
    RequestStreamFrame: st.builds(RequestStreamFrame, sid, u32, blobs, metas, st.booleans()),
    RequestChannelFrame: st.builds(RequestChannelFrame, sid, u32, blobs, metas, st.booleans(), st.booleans()),
    RequestNFrame: st.builds(RequestNFrame, sid, u32),
    CancelFrame: st.builds(CancelFrame, sid),
    PayloadFrame: st.builds(PayloadFrame, sid, blobs, metas, st.booleans(), st.booleans(), st.booleans()),
    ErrorFrame: st.builds(ErrorFrame, sid, u32, blobs),
    OpaqueFrame: st.builds(
        OpaqueFrame, st.sampled_from([2, 12, 13, 14, 15, 40, 63]), u32, st.integers(0, 0x3FF), blobs
    ),
}
ROUND_TRIP = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("kind", list(RECORDS), ids=lambda k: k.__name__)
@ROUND_TRIP
@given(data=st.data())
def test_record_round_trip(kind: type, data: st.DataObject) -> None:
    rec = data.draw(RECORDS[kind])
    raw = srs.encode_records([rec])
    assert raw[:2] == struct.pack(">H", rec.MESSAGE_ID)
    assert srs.decode_records(raw) == (rec,)


@ROUND_TRIP
@given(st.lists(st.one_of([s for k, s in RECORDS.items() if k.MESSAGE_ID >= 4]), min_size=1, max_size=8))
def test_batch_round_trip(records: list[srs.SrsRecord]) -> None:
    raw = srs.encode_records(records)
    assert srs.decode_records(raw) == tuple(records)


@pytest.mark.parametrize("kind", list(FRAMES), ids=lambda k: k.__name__)
@ROUND_TRIP
@given(data=st.data())
def test_frame_round_trip(kind: type, data: st.DataObject) -> None:
    frame = data.draw(FRAMES[kind])
    raw = srs.encode(frame)
    assert srs.decode(raw) == frame
    assert srs.decode_frames(raw + raw) == (frame, frame)


@ROUND_TRIP
@given(st.lists(st.one_of(list(FRAMES.values())), min_size=1, max_size=6), st.data())
def test_stream_decoder_round_trip(frames: list[srs.Frame], data: st.DataObject) -> None:
    stream = b"".join(srs.encode(f) for f in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    dec = FrameDecoder()
    out: list[srs.Frame] = []
    for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        out += dec.feed(stream[a:b])
    assert out == frames
    assert dec.buffered == 0


# --- fuzzing: anything malformed raises WireError and nothing else --------------------------------

FUZZ = settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_or_wire_error(raw: bytes) -> None:
    try:
        frame = srs.decode(raw)
    except WireError:
        pass
    else:
        srs.encode(frame)
    try:
        records = srs.decode_records(raw[9:])
    except WireError:
        pass
    else:
        if records:
            srs.encode_records(records)


@pytest.mark.parametrize("sample", [*VERIFIED, srs.encode(PayloadFrame(3, BATCH_HEX))], ids=range(7))
def test_every_truncation_raises_wire_error(sample: bytes) -> None:
    for cut in range(len(sample)):
        with pytest.raises(WireError):
            srs.decode(sample[:cut])
    for cut in range(10, len(sample)):
        try:
            records = srs.decode_records(sample[9:cut])
        except WireError:
            continue
        # a batch cut exactly between two records is a shorter, valid batch
        assert srs.encode_records(records) == sample[9:cut]


@FUZZ
@given(st.sampled_from([*VERIFIED, srs.encode(PayloadFrame(3, BATCH_HEX))]), st.data())
def test_byte_flips_raise_only_wire_error(sample: bytes, data: st.DataObject) -> None:
    raw = bytearray(sample)
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(u8)
    decode_or_wire_error(bytes(raw))


@FUZZ
@given(st.binary(max_size=120))
def test_random_bytes_raise_only_wire_error(raw: bytes) -> None:
    decode_or_wire_error(raw)
    try:
        srs.decode_records(raw)
    except WireError:
        pass


@FUZZ
@given(st.integers(1, 18), st.binary(max_size=120))
def test_random_record_bodies_raise_only_wire_error(msg_id: int, body: bytes) -> None:
    try:
        records = srs.decode_records(struct.pack(">H", msg_id) + body)
    except WireError:
        return
    assert msg_id == records[0].MESSAGE_ID


@FUZZ
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=5))
def test_stream_decoder_on_garbage_raises_only_wire_error(raw: bytes, cuts: list[int]) -> None:
    dec = FrameDecoder()
    bounds = sorted({min(c, len(raw)) for c in cuts})
    try:
        for a, b in zip([0, *bounds], [*bounds, len(raw)], strict=True):
            dec.feed(raw[a:b])
        dec.feed()
    except WireError:
        with pytest.raises(WireError):
            dec.feed()
