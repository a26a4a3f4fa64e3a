"""LBMC codec: the verified hex of the spec (lbmc-pdm-srs.md §6.1), round trips of every header
type, message properties, the hot path, and fuzzing (only WireError, never a crash or a loop)."""

from __future__ import annotations

import dataclasses
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.wire import lbmc
from openum.wire._common import WireError
from openum.wire.lbmc import (
    AppHeader,
    AppHeaderChain,
    BatchHeader,
    ChainElement,
    DestinationContextInstanceHeader,
    ExtendedOptionHeader,
    FragmentHeader,
    GatewayInfoElement,
    Header,
    HeaderType,
    HotFailoverElement,
    LateJoinInfoHeader,
    LateJoinInfoRequestHeader,
    LbmcMessage,
    MessageType,
    OtidHeader,
    PatternMultiDomainInterestHeader,
    PropertiesBlock,
    PropertiesLengthElement,
    Property,
    PropertyType,
    RequestHeader,
    ResponseHeader,
    RetransmissionRequestHeader,
    ReturnContextInstanceHeader,
    SessionIdHeader,
    StreamHeader,
    TopicMultiDomainInterestHeader,
    TopicNameHeader,
    TsniHeader,
    TypedValue,
    UmeAckHeader,
    UmeRegistrationHeader,
    UmqAckHeader,
    UnknownHeader,
    control_message,
    data_message,
    data_message_packer,
    decode_data_fast,
    decode_fragment_fields,
    decode_message,
    decode_message_at,
    decode_messages,
    decode_properties,
    encode_data,
    encode_data_into,
    encode_data_topic_into,
    encode_fragment_into,
    encode_message,
    encode_message_into,
    encode_properties,
    header_class,
    message_length,
    split_messages,
    topic_name_block,
)


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


OTID = bytes(range(0x20, 0x40))
CTX_A = bytes.fromhex("0102030405060708")
CTX_B = bytes.fromhex("1112131415161718")

# --------------------------------------------------------------------------------------------------
# §6.1 verified hex
# --------------------------------------------------------------------------------------------------

VERIFIED = {
    "tcp_sid": "086b000c ff080000 0000beef",
    "data_topicname": "0005001c 00000007 00000001 000b0000 4f726465 727300 68656c6c6f",
    "fragment_1": "0005002d 00000007 0000000a | 010b0000 4f726465727300 | 00100000 0000000a 00000000 0000000c"
    " | 414243444546",
    "fragment_2": "00010022 00000007 0000000b | 00100000 0000000a 00000006 0000000c | 4748494a4b4c",
    "batch": "000200130000000700000014 00040002 6f6e65 0000000f0000000700000015 74776f"
    " 000200150000000700000016 00040001 7468726565",
    "properties": "0007005b 00000007 00000003 | 000c0006 ff080000 00000039 | 6f726465722d64617461 |"
    " badaacab 0200 00 00 | 28000000 2c000000 00000000 04000000 | 30000000 34000000 00000000 08000000 |"
    " 71747900 64000000 73796d00 4141504c00",
    "tsni": "08200018 ff140002 00000007 0000002a 00000008 00000005",
    "request": "0005002b 00000007 00000004 | 040b0000 4f726465727300 | 00100000 00000001 38380000 0a000001"
    " | 7265713f",
    "apphdr": "0006001a 00000007 00000005 00081234 deadbeef 617070686472",
    "hf_chain": "0007001e 00000007 00000006 000c0002 ff080000 000003e9 68662d6d7367",
    "uim": "004b004e 00000000 00000000 | 0c140000 00000001 00000000 1112131415161718 |"
    " 0d0c0000 0102030405060708 | 050c0000 1112131415161718 | 000b0000 4f726465727300 |"
    " 75696d2d7061796c6f6164",
    "lji_req": "084e0028 ff240007 00000005 00000001 00000007 0a000002 9c480000 00000064 000003e8 0000000a",
    "ume_rxreq": "08150020 ff1c4000 00000006 00000001 00000007 00000096 9c480000 0a000002",
    "lj_info": "081e0014 ff100000 00000064 000000c8 00000005",
    "retrans": "0a0b0037 00000007 00000096 00240000 " + OTID.hex() + " 6f6c642d6d7367",
    "ume_preg": "08120020 ff1c0081 11223344 00000001 00000007 00000000 38380000 0a000001",
    "ume_ack": "08140018 ff140001 00000001 00000007 00000055 00000003",
}

EXPECTED: dict[str, list[LbmcMessage]] = {
    "tcp_sid": [control_message(SessionIdHeader(0xBEEF))],
    "data_topicname": [data_message(7, 1, b"hello", TopicNameHeader("Orders"))],
    "fragment_1": [data_message(7, 10, b"ABCDEF", TopicNameHeader("Orders"), FragmentHeader(10, 0, 12))],
    "fragment_2": [data_message(7, 11, b"GHIJKL", FragmentHeader(10, 6, 12))],
    "batch": [
        data_message(7, 20, b"one", BatchHeader(BatchHeader.START)),
        data_message(7, 21, b"two"),
        data_message(7, 22, b"three", BatchHeader(BatchHeader.END)),
    ],
    "properties": [
        data_message(
            7,
            3,
            b"order-data",
            properties=PropertiesBlock(
                (Property("qty", PropertyType.INT, 100), Property("sym", PropertyType.STRING, "AAPL"))
            ),
        )
    ],
    "tsni": [control_message(TsniHeader(((7, 42), (8, 5))))],
    "request": [data_message(7, 4, b"req?", TopicNameHeader("Orders"), RequestHeader(1, 14392, "10.0.0.1"))],
    "apphdr": [data_message(7, 5, b"apphdr", AppHeader(0x1234, bytes.fromhex("deadbeef")))],
    "hf_chain": [data_message(7, 6, b"hf-msg", AppHeaderChain((HotFailoverElement(1001),)))],
    "uim": [
        data_message(
            0,
            0,
            b"uim-payload",
            StreamHeader(1, 0, CTX_B),
            DestinationContextInstanceHeader(CTX_A),
            ReturnContextInstanceHeader(CTX_B),
            TopicNameHeader("Orders"),
        )
    ],
    "lji_req": [
        control_message(LateJoinInfoRequestHeader(5, 1, 7, "10.0.0.2", 40008, 100, 1000, 10, flags=7))
    ],
    "ume_rxreq": [
        control_message(
            RetransmissionRequestHeader(
                6, 1, 7, 150, 40008, "10.0.0.2", flags=RetransmissionRequestHeader.TSNI
            )
        )
    ],
    "lj_info": [control_message(LateJoinInfoHeader(100, 200, 5))],
    "retrans": [data_message(7, 150, b"old-msg", OtidHeader(OTID), msg_type=MessageType.RETRANSMISSION)],
    "ume_preg": [
        control_message(
            UmeRegistrationHeader(
                0x11223344, 1, 7, 0, 14392, "10.0.0.1", marker=UmeRegistrationHeader.SOURCE | 1
            )
        )
    ],
    "ume_ack": [control_message(UmeAckHeader(1, 1, 7, 0x55, 3))],
}


@pytest.mark.parametrize("case", sorted(VERIFIED))
def test_verified_hex_decodes_to_exact_values(case: str) -> None:
    raw = hx(VERIFIED[case])
    assert decode_messages(raw) == EXPECTED[case]
    assert b"".join(encode_message(m) for m in EXPECTED[case]) == raw


def test_verified_data_header_fields() -> None:
    msg = decode_message(hx(VERIFIED["data_topicname"]))
    assert (msg.type, msg.topic_index, msg.sqn, msg.topic_name) == (MessageType.DATA, 7, 1, "Orders")
    assert bytes(msg.payload) == b"hello"
    assert isinstance(msg.payload, memoryview)  # zero-copy
    assert message_length(hx(VERIFIED["data_topicname"])) == 28
    uim = decode_message(hx(VERIFIED["uim"]))
    stream = uim.header(StreamHeader)
    assert stream is not None
    assert (stream.stream_id, stream.ctxinst) == (1, CTX_B)
    preg = decode_message(hx(VERIFIED["ume_preg"])).header(UmeRegistrationHeader)
    assert preg is not None
    assert preg.marker == UmeRegistrationHeader.SOURCE | 1


def test_verified_properties_block_alone() -> None:
    block = hx(VERIFIED["properties"])[-57:]
    props = decode_properties(block)
    assert props.to_dict() == {"qty": 100, "sym": "AAPL"}
    assert not props.big_endian
    assert encode_properties({"qty": 100, "sym": "AAPL"}) == block


# --------------------------------------------------------------------------------------------------
# Hypothesis strategies for every header type
# --------------------------------------------------------------------------------------------------

NAME_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=40
)
IPS = st.ip_addresses(v=4).map(str)
LIMITS = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF, "Q": 0xFFFFFFFFFFFFFFFF}


def _kind_strategy(kind: str) -> st.SearchStrategy[Any]:
    if kind in LIMITS:
        return st.integers(0, LIMITS[kind])
    if kind == "ip":
        return IPS
    size = int(kind[:-1])
    return st.binary(min_size=size, max_size=size)


def _fixed_strategy(cls: Any) -> st.SearchStrategy[Header]:
    kwargs = {name: _kind_strategy(kind) for name, kind in cls._spec}
    if cls._tail is not None:
        name, kind = cls._tail
        room = lbmc.MAX_HEADER_BODY_LEN - cls._struct.size
        if kind == "bytes":
            kwargs[name] = st.binary(max_size=room)
        else:
            kwargs[name] = NAME_TEXT.filter(lambda t, room=room: len(t.encode("utf-8")) < room)
    return st.builds(cls, **kwargs)


ELEMENTS: st.SearchStrategy[Any] = st.one_of(
    st.builds(HotFailoverElement, st.integers(0, 2**32 - 1), st.just(32)),
    st.builds(HotFailoverElement, st.integers(0, 2**64 - 1), st.just(64)),
    st.builds(GatewayInfoElement, st.binary(min_size=1, max_size=30)),
    st.builds(
        ChainElement,
        st.integers(0, 0xFE).filter(lambda k: k not in (2, 3, 6)),
        st.binary(min_size=1, max_size=30),
    ),
)
U32 = st.integers(0, 2**32 - 1)

CUSTOM: dict[type[Header], st.SearchStrategy[Any]] = {
    AppHeader: st.builds(
        AppHeader, st.integers(0, 0x7FFF), st.binary(min_size=1, max_size=251), st.booleans()
    ),
    AppHeaderChain: st.builds(
        AppHeaderChain, st.lists(ELEMENTS, min_size=1, max_size=5).map(tuple), st.integers(0, 255)
    ),
    TsniHeader: st.builds(
        TsniHeader, st.lists(st.tuples(U32, U32), min_size=1, max_size=31).map(tuple), st.booleans()
    ),
    UmqAckHeader: st.builds(
        UmqAckHeader,
        st.integers(0, 255),
        st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), max_size=8).map(tuple),
        st.binary(max_size=100),
        st.sampled_from([0, 0x40, 0x20, 0x60, 0xF0]),
    ),
    TopicMultiDomainInterestHeader: st.builds(
        TopicMultiDomainInterestHeader,
        st.lists(U32, max_size=60).map(tuple),
        st.integers(0, 0xFFFF),
        st.integers(0, 0xFFFF),
    ),
    PatternMultiDomainInterestHeader: st.builds(
        PatternMultiDomainInterestHeader,
        st.integers(0, 255),
        st.integers(0, 2**64 - 1),
        st.lists(U32, max_size=59).map(tuple),
        st.integers(0, 255),
        st.integers(0, 0xFFFF),
    ),
    ResponseHeader: st.builds(ResponseHeader, U32),
    UnknownHeader: st.builds(
        UnknownHeader,
        st.integers(1, 0xFE).filter(lambda c: header_class(c) is None),
        st.binary(min_size=2, max_size=253),
    ),
}


def _safe_extopt(args: tuple[int, bytes, int, int, int]) -> bool:
    flags, option_id, subtype, frag = args[2], args[3], args[0], args[4]
    return (flags, option_id, subtype, frag, len(args[1])) != (0x40, 0, lbmc.RESPONSE_EXTOPT_SUBTYPE, 0, 4)


CUSTOM[ExtendedOptionHeader] = (
    st.tuples(
        st.integers(0, 0xFFFF),
        st.binary(max_size=200),
        st.integers(0, 255),
        st.integers(0, 255),
        st.integers(0, 0xFFFF),
    )
    .filter(_safe_extopt)
    .map(lambda a: ExtendedOptionHeader(*a))
)

ALL_HEADER_CLASSES: list[type[Header]] = sorted(
    {cls for code in range(256) if (cls := header_class(code)) is not None} | {ResponseHeader, UnknownHeader},
    key=lambda c: c.__name__,
)


def header_strategy(cls: type[Header]) -> st.SearchStrategy[Any]:
    return CUSTOM[cls] if cls in CUSTOM else _fixed_strategy(cls)


def test_every_known_code_has_a_record_class() -> None:
    known = {int(t) for t in HeaderType} - {0x00, 0xFF, 0x03}  # TGIDX is declared but never implemented
    assert {code for code in range(256) if header_class(code) is not None} == known
    assert len(ALL_HEADER_CLASSES) == len(known) + 2  # plus ResponseHeader and UnknownHeader


@pytest.mark.parametrize("cls", ALL_HEADER_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), as_control=st.booleans())
def test_header_round_trip(cls: type[Header], data: st.DataObject, as_control: bool) -> None:
    hdr = data.draw(header_strategy(cls))
    if as_control:
        msg = control_message(hdr)
    else:
        msg = data_message(data.draw(U32), data.draw(U32), data.draw(st.binary(max_size=40)), hdr)
    raw = encode_message(msg)
    decoded = decode_message(raw)
    assert decoded == msg
    assert type(decoded.headers[0]) is cls
    assert encode_message(decoded) == raw
    assert raw[1] == hdr.type_code()


MESSAGE_TYPES = st.sampled_from(sorted(lbmc.DATA_TYPES))
ANY_HEADER = st.sampled_from(ALL_HEADER_CLASSES).flatmap(header_strategy)
PLAIN_PROPS = st.lists(
    st.tuples(
        NAME_TEXT.filter(bool),
        st.one_of(
            st.booleans(),
            st.integers(-(2**63), 2**63 - 1),
            st.floats(allow_nan=False),
            NAME_TEXT,
        ),
    ),
    max_size=6,
    unique_by=lambda kv: kv[0],
).map(dict)


@st.composite
def messages(draw: st.DrawFn) -> LbmcMessage:
    headers = draw(
        st.lists(ANY_HEADER, max_size=4).filter(lambda hs: sum(len(h.encode_body()) + 2 for h in hs) < 1500)
    )
    if draw(st.booleans()):
        return control_message(
            *headers, msg_type=draw(st.sampled_from([MessageType.CONTROL, MessageType.EOT]))
        )
    headers = [
        h
        for h in headers
        if not (
            isinstance(h, AppHeaderChain) and any(isinstance(e, PropertiesLengthElement) for e in h.elements)
        )
    ]
    fragment = any(isinstance(h, FragmentHeader) for h in headers)
    props = None
    if not fragment and draw(st.booleans()):
        props = PropertiesBlock.from_mapping(draw(PLAIN_PROPS), big_endian=draw(st.booleans()))
    return data_message(
        draw(U32),
        draw(U32),
        draw(st.binary(max_size=64)),
        *headers,
        properties=props,
        msg_type=draw(MESSAGE_TYPES),
    )


@settings(max_examples=150, deadline=None)
@given(batch=st.lists(messages(), min_size=1, max_size=5))
def test_batches_of_messages_round_trip(batch: list[LbmcMessage]) -> None:
    raw = b"".join(encode_message(m) for m in batch)
    assert decode_messages(raw) == batch
    assert [bytes(v) for v in split_messages(raw)] == [encode_message(m) for m in batch]


# --------------------------------------------------------------------------------------------------
# Message properties (§2.6)
# --------------------------------------------------------------------------------------------------

ALL_TYPES_PROPS = (
    Property("flag", PropertyType.BOOLEAN, True),
    Property("b", PropertyType.BYTE, -5),
    Property("s", PropertyType.SHORT, -30000),
    Property("i", PropertyType.INT, -2_000_000_000),
    Property("l", PropertyType.LONG, 2**62 + 5),
    Property("f", PropertyType.FLOAT, 1.5),
    Property("d", PropertyType.DOUBLE, -2.25e300),
    Property("str", PropertyType.STRING, "héllo"),
)


@pytest.mark.parametrize("big_endian", [False, True])
def test_all_eight_property_types_round_trip(big_endian: bool) -> None:
    block = PropertiesBlock(ALL_TYPES_PROPS, big_endian)
    raw = encode_properties(block)
    assert raw[:4] == (b"\xab\xac\xda\xba" if big_endian else b"\xba\xda\xac\xab")
    assert decode_properties(raw) == block
    msg = data_message(9, 10, b"app", properties=block)
    assert decode_message(encode_message(msg)) == msg


def test_property_type_inference_and_explicit_types() -> None:
    block = PropertiesBlock.from_mapping(
        {"b": True, "i": 7, "big": 2**40, "d": 0.5, "s": "x", "short": TypedValue(PropertyType.SHORT, 7)}
    )
    assert [p.type for p in block.properties] == [
        PropertyType.BOOLEAN,
        PropertyType.INT,
        PropertyType.LONG,
        PropertyType.DOUBLE,
        PropertyType.STRING,
        PropertyType.SHORT,
    ]
    assert block.to_dict()["short"] == 7
    assert block.get("big") == Property("big", PropertyType.LONG, 2**40)
    assert block.get("missing") is None


@pytest.mark.parametrize(
    ("ptype", "value"),
    [
        (PropertyType.BYTE, 128),
        (PropertyType.SHORT, -(2**15) - 1),
        (PropertyType.INT, 2**31),
        (PropertyType.LONG, 2**63),
        (PropertyType.BOOLEAN, 1),
        (PropertyType.INT, True),
        (PropertyType.FLOAT, 1e300),
        (PropertyType.DOUBLE, 10**400),
        (PropertyType.STRING, "a\x00b"),
        (PropertyType.STRING, 5),
        (PropertyType.STRING, "\ud800"),
    ],
)
def test_invalid_property_values_raise_wire_error(ptype: PropertyType, value: Any) -> None:
    with pytest.raises(WireError):
        Property("p", ptype, value)


def test_invalid_property_names_and_types_raise_wire_error() -> None:
    for name in ("", "a\x00"):
        with pytest.raises(WireError):
            Property(name, PropertyType.INT, 1)
    with pytest.raises(WireError):
        Property("p", 9, 1)  # type: ignore[arg-type]
    with pytest.raises(WireError):
        PropertiesBlock.from_mapping({"x": object()})  # type: ignore[dict-item]


@settings(max_examples=100, deadline=None)
@given(mapping=PLAIN_PROPS, big_endian=st.booleans(), floats=st.lists(st.floats(width=32, allow_nan=False)))
def test_properties_round_trip(mapping: dict[str, Any], big_endian: bool, floats: list[float]) -> None:
    block = PropertiesBlock.from_mapping(
        {**mapping, **{f"f{i}": TypedValue(PropertyType.FLOAT, v) for i, v in enumerate(floats)}},
        big_endian=big_endian,
    )
    assert decode_properties(encode_properties(block)) == block


def test_properties_with_chain_and_fragments() -> None:
    # A hot-failover element stays in its chain; the properties-length element goes first (§2.5).
    msg = data_message(
        1, 2, b"data", AppHeaderChain((HotFailoverElement(77, 64),)), properties=PropertiesBlock()
    )
    raw = encode_message(msg)
    chain = raw[12:]
    assert chain[3] == 0x06  # first_chain_hdr = properties length
    assert (chain[4], chain[12]) == (0x02, 0x02)  # element 1 names element 2; element 2 names itself
    assert decode_message(raw) == msg
    # Fragments carry raw bytes and an explicit properties-length element.
    frag = data_message(1, 3, b"ab", FragmentHeader(3, 0, 30), AppHeaderChain((PropertiesLengthElement(8),)))
    assert decode_message(encode_message(frag)) == frag
    with pytest.raises(WireError):
        data_message(1, 3, b"ab", FragmentHeader(3, 0, 30), properties=PropertiesBlock())
    with pytest.raises(WireError):
        data_message(1, 3, b"ab", AppHeaderChain((PropertiesLengthElement(8),)))


def test_next_convention_chain_with_trailing_none_byte_decodes() -> None:
    # A writer using LBMC's usual "next" convention: element 1 says 0x02 follows, element 2 says
    # 0xFF (none).  Wireshark would call element 2 "None"; openum falls back to element 1's byte.
    body = bytes([0, 0x06, 0x02, 8, 0, 0]) + struct.pack(">I", 4) + bytes([0xFF, 8, 0, 0, 0, 0, 0, 9])
    chain = AppHeaderChain.decode_body(memoryview(body))
    assert chain == AppHeaderChain((PropertiesLengthElement(4), HotFailoverElement(9)))
    with pytest.raises(WireError):  # an element length below 4 would loop
        AppHeaderChain.decode_body(memoryview(bytes([0, 0x02, 0xFF, 0, 0, 0])))


# --------------------------------------------------------------------------------------------------
# Validation and malformed input
# --------------------------------------------------------------------------------------------------


INVALID_RECORDS: dict[str, Any] = {
    "topic_too_long": lambda: TopicNameHeader("x" * 251),
    "topic_with_nul": lambda: TopicNameHeader("a\x00b"),
    "topic_unencodable": lambda: TopicNameHeader("\ud800"),
    "negative_field": lambda: FragmentHeader(-1, 0, 0),
    "field_too_big": lambda: FragmentHeader(2**32, 0, 0),
    "bad_ip": lambda: RequestHeader(1, 2, "not-an-ip"),
    "short_ctxinst": lambda: StreamHeader(1, 1, b"short"),
    "apphdr_code": lambda: AppHeader(0x8000, b"x"),
    "apphdr_empty": lambda: AppHeader(1, b""),
    "tsni_32_records": lambda: TsniHeader(tuple((i, i) for i in range(32))),
    "tsni_empty": lambda: TsniHeader(()),
    "chain_empty": lambda: AppHeaderChain(()),
    "hf_too_big": lambda: HotFailoverElement(2**32, 32),
    "hf_width": lambda: HotFailoverElement(1, 16),
    "element_kind_with_class": lambda: ChainElement(6, b"xxxx"),
    "unknown_is_known": lambda: UnknownHeader(0x01, b"xx"),
    "unknown_none": lambda: UnknownHeader(0xFF, b"xx"),
    "extopt_is_response": lambda: ExtendedOptionHeader(lbmc.RESPONSE_EXTOPT_SUBTYPE, b"abcd", 0x40),
    "control_payload": lambda: LbmcMessage(MessageType.CONTROL, payload=b"x"),
    "eot_topic_index": lambda: LbmcMessage(MessageType.EOT, topic_index=1),
    "message_type": lambda: LbmcMessage(7),  # type: ignore[arg-type]
    "topic_index": lambda: data_message(2**32, 0),
    "message_too_long": lambda: encode_message(data_message(1, 1, b"x" * 65524)),
}


@pytest.mark.parametrize("case", sorted(INVALID_RECORDS))
def test_records_validate_on_construction(case: str) -> None:
    with pytest.raises(WireError):
        INVALID_RECORDS[case]()


def test_largest_message_encodes() -> None:
    assert len(encode_message(data_message(1, 1, b"x" * 65523))) == 65535


def test_unknown_header_is_preserved() -> None:
    # TGIDX 0x03 is declared by Wireshark but never implemented: kept as an UnknownHeader.
    raw = struct.pack(">BBHII", 0, 0x03, 12 + 6 + 2, 5, 6) + bytes([0x00, 6]) + b"\x80\x00ab" + b"hi"
    msg = decode_message(raw)
    assert msg.headers == (UnknownHeader(0x03, b"\x80\x00ab"),)
    assert bytes(msg.payload) == b"hi"
    assert encode_message(msg) == raw


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\x00\x00\x00",
        struct.pack(">BBHII", 0x10, 0, 12, 0, 0),  # version 1
        struct.pack(">BBHII", 0x03, 0, 12, 0, 0),  # type 3
        struct.pack(">BBHII", 0x00, 0, 0, 0, 0),  # msglen 0 must not loop
        struct.pack(">BBHII", 0x00, 0, 11, 0, 0),  # msglen below the header
        struct.pack(">BBHII", 0x00, 0, 40, 0, 0),  # msglen past the end
        struct.pack(">BBHII", 0x00, 0x05, 16, 0, 0) + b"\x00\x00\x00\x00",  # hdr_len 0 must not loop
        struct.pack(">BBHII", 0x00, 0x05, 16, 0, 0) + b"\x00\x09\x00\x00",  # header past the end
        struct.pack(">BBHII", 0x00, 0x05, 14, 0, 0) + b"\x00\x04",  # truncated header
        struct.pack(">BBHII", 0x00, 0x01, 16, 0, 0) + b"\x00\x04\x00\x00",  # FRAG of the wrong length
        struct.pack(">BBH", 0x08, 0x00, 4),  # control chain ends with DATA
        struct.pack(">BBH", 0x08, 0xFF, 6) + b"xx",  # bytes after a control message
        struct.pack(">BBHII", 0x00, 0xFF, 12, 0, 0),  # data chain ends with NONE
        struct.pack(">BBHII", 0x00, 0x0B, 20, 0, 0)
        + b"\x00\x04\x00\x00"
        + b"\x00\x04\x00\x00",  # OTID too short
        hx(VERIFIED["tsni"])[:-1],
        hx(VERIFIED["tsni"]) + b"\x00",
    ],
)
def test_malformed_messages_raise_wire_error(raw: bytes) -> None:
    with pytest.raises(WireError):
        decode_message(raw)


def test_decode_at_offsets_and_into_buffers() -> None:
    first = encode_message(data_message(1, 2, b"abc"))
    second = encode_message(control_message(TsniHeader(((1, 2),))))
    buf = bytearray(64)
    end = encode_message_into(buf, 3, data_message(1, 2, b"abc"))
    end = encode_message_into(buf, end, control_message(TsniHeader(((1, 2),))))
    assert bytes(buf[3:end]) == first + second
    msg, nxt = decode_message_at(buf, 3)
    assert bytes(msg.payload) == b"abc"
    assert decode_message_at(buf, nxt)[1] == end
    with pytest.raises(WireError):
        encode_message_into(bytearray(5), 0, data_message(1, 2, b"abc"))
    assert message_length(b"\x00\x00\x01") is None


# --------------------------------------------------------------------------------------------------
# Hot path
# --------------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(tidx=U32, sqn=U32, payload=st.binary(max_size=200), offset=st.integers(0, 16))
def test_hot_path_matches_record_api(tidx: int, sqn: int, payload: bytes, offset: int) -> None:
    buf = bytearray(offset + 12 + len(payload) + 300)
    end = encode_data_into(buf, offset, tidx, sqn, payload)
    assert (
        bytes(buf[offset:end])
        == encode_message(data_message(tidx, sqn, payload))
        == encode_data(tidx, sqn, payload)
    )
    got = decode_data_fast(memoryview(buf), offset)
    assert got is not None
    assert (got[0], got[1], bytes(got[2]), got[3]) == (tidx, sqn, payload, end)
    block = topic_name_block("Market/US/IBM")
    end2 = encode_data_topic_into(buf, end, tidx, sqn, block, payload)
    assert bytes(buf[end:end2]) == encode_message(
        data_message(tidx, sqn, payload, TopicNameHeader("Market/US/IBM"))
    )
    assert decode_data_fast(memoryview(buf), end) is None  # has a header: slow path
    assert decode_message_at(buf, end)[0].topic_name == "Market/US/IBM"


@settings(max_examples=100, deadline=None)
@given(
    tidx=U32, sqn=U32, payload=st.binary(max_size=200), offset=st.integers(0, 16), as_bytearray=st.booleans()
)
def test_data_message_packer_writes_what_encode_data_into_writes(
    tidx: int, sqn: int, payload: bytes, offset: int, as_bytearray: bool
) -> None:
    pack = data_message_packer(len(payload))
    buf = bytearray(b"\xee" * (offset + 12 + len(payload) + 4))  # not zeroed: the pad bytes must be written
    pack(buf, offset, 12 + len(payload), tidx, sqn, bytearray(payload) if as_bytearray else payload)
    assert bytes(buf[offset : offset + 12 + len(payload)]) == encode_data(tidx, sqn, payload)
    assert buf[offset + 12 + len(payload) :] == b"\xee" * 4  # nothing beyond the message


def test_data_message_packer_refuses_what_does_not_fit() -> None:
    with pytest.raises(ValueError, match="payload size"):
        data_message_packer(65524)
    with pytest.raises(struct.error):
        data_message_packer(8)(bytearray(10), 0, 20, 1, 1, b"x" * 8)  # 20 bytes into 10
    with pytest.raises(struct.error):
        data_message_packer(8)(bytearray(40), 0, 20, 2**32, 1, b"x" * 8)


def test_hot_path_batch_and_slow_path_fallbacks() -> None:
    buf = bytearray(64 * 80)
    pos = 0
    for sqn in range(64):
        pos = encode_data_into(buf, pos, 3, sqn, bytes([sqn]) * 52)
    view = memoryview(buf)[:pos]
    got = []
    off = 0
    while off < pos:
        res = decode_data_fast(view, off)
        assert res is not None
        got.append((res[1], bytes(res[2][:1])))
        off = res[3]
    assert got == [(sqn, bytes([sqn])) for sqn in range(64)]
    retrans = encode_message(data_message(1, 1, b"x", msg_type=MessageType.RETRANSMISSION))
    assert decode_data_fast(memoryview(retrans), 0) is None
    assert decode_data_fast(memoryview(retrans[:11]), 0) is None
    assert decode_data_fast(memoryview(encode_data(1, 1, b"xyz"))[:-1], 0) is None


def test_hot_path_payload_types_and_cached_layouts() -> None:
    """The first message of a size takes the general path, later ones a cached struct: same bytes."""
    expected = encode_message(data_message(5, 6, b"0123456789abc"))
    block = topic_name_block("T")
    expected_topic = encode_message(data_message(5, 6, b"0123456789abc", TopicNameHeader("T")))
    for payload in (b"0123456789abc", bytearray(b"0123456789abc"), memoryview(b"0123456789abc")) * 2:
        buf = bytearray(40)
        assert encode_data_into(buf, 2, 5, 6, payload) == 2 + len(expected)
        assert bytes(buf[2 : 2 + len(expected)]) == expected
        assert encode_data_topic_into(buf, 0, 5, 6, block, payload) == len(expected_topic)
        assert bytes(buf[: len(expected_topic)]) == expected_topic
    for bad in (
        lambda: encode_data_into(bytearray(20), 0, 5, 6, b"0123456789abc"),
        lambda: encode_data_into(bytearray(40), 0, 2**32, 6, b"0123456789abc"),
        lambda: encode_data_into(bytearray(40), -1, 5, 6, b"0123456789abc"),
        lambda: encode_data_topic_into(bytearray(20), 0, 5, 6, block, b"0123456789abc"),
        lambda: encode_data_topic_into(bytearray(40), 0, 5, -6, block, b"0123456789abc"),
    ):
        with pytest.raises(WireError):
            bad()


def test_hot_path_errors_are_wire_errors() -> None:
    with pytest.raises(WireError):
        encode_data_into(bytearray(10), 0, 1, 1, b"")
    with pytest.raises(WireError):
        encode_data_into(bytearray(20), 0, 1, 1, b"x" * 9)  # would silently grow a bytearray
    with pytest.raises(WireError):
        encode_data_into(bytearray(20), 0, 2**32, 1, b"")
    with pytest.raises(WireError):
        encode_data_into(bytearray(70000), 0, 1, 1, b"x" * 65524)
    with pytest.raises(WireError):
        encode_data_topic_into(bytearray(20), 0, 1, 1, topic_name_block("t"), b"x" * 9)


# --------------------------------------------------------------------------------------------------
# Fuzzing: truncated, byte-flipped and random input raise WireError only
# --------------------------------------------------------------------------------------------------

CORPUS = [hx(v) for v in VERIFIED.values()] + [
    encode_message(data_message(1, 2, b"p", properties=PropertiesBlock(ALL_TYPES_PROPS))),
    encode_message(
        data_message(1, 2, b"p", AppHeaderChain((GatewayInfoElement(b"gw"), HotFailoverElement(3))))
    ),
    encode_message(control_message(UmqAckHeader(1, ((1, 2), (3, 4)), b"rec", 0x40))),
    encode_message(control_message(PatternMultiDomainInterestHeader(1, 2, (3, 4)))),
    encode_message(data_message(1, 2, b"r", ResponseHeader(42))),
]


def _decode_all(raw: bytes) -> None:
    try:
        for msg in decode_messages(raw):
            encode_message(msg)  # whatever decodes must encode again
    except WireError:
        pass


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, len(CORPUS) - 1), cut=st.integers(0, 200))
def test_fuzz_truncated(index: int, cut: int) -> None:
    raw = CORPUS[index]
    cut %= len(raw)
    ends = {0}
    for view in split_messages(raw):
        ends.add(max(ends) + len(view))
    if cut in ends:  # a cut between the messages of a batch leaves whole messages
        assert len(decode_messages(raw[:cut])) == len([e for e in ends if 0 < e <= cut])
    else:
        with pytest.raises(WireError):
            decode_messages(raw[:cut])


@settings(max_examples=500, deadline=None)
@given(
    index=st.integers(0, len(CORPUS) - 1), flips=st.lists(st.tuples(st.integers(0, 500), st.integers(1, 255)))
)
def test_fuzz_byte_flipped(index: int, flips: list[tuple[int, int]]) -> None:
    raw = bytearray(CORPUS[index])
    for pos, xor in flips:
        raw[pos % len(raw)] ^= xor
    _decode_all(bytes(raw))


@settings(max_examples=500, deadline=None)
@given(raw=st.binary(max_size=300))
def test_fuzz_random_bytes(raw: bytes) -> None:
    _decode_all(raw)
    try:
        decode_properties(raw)
    except WireError:
        pass
    try:
        split_messages(raw)
    except WireError:
        pass
    res = decode_data_fast(memoryview(raw), 0)
    assert res is None or res[3] <= len(raw)


@settings(max_examples=300, deadline=None)
@given(code=st.integers(0, 255), body=st.binary(max_size=60), data_type=st.booleans())
def test_fuzz_every_header_code(code: int, body: bytes, data_type: bool) -> None:
    """Any code with any body: a record or WireError, never another exception."""
    chain = bytes([0x00 if data_type else 0xFF, min(255, len(body) + 2)]) + body
    if data_type:
        raw = struct.pack(">BBHII", 0, code, 12 + len(chain), 1, 2) + chain
    else:
        raw = struct.pack(">BBH", 8, code, 4 + len(chain)) + chain
    _decode_all(raw)


def test_dataclass_records_are_frozen() -> None:
    hdr = FragmentHeader(1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        hdr.first_sqn = 5  # type: ignore[misc]
    assert not hasattr(hdr, "__dict__")


@given(
    tidx=U32,
    sqn=U32,
    first=U32,
    frag_offset=U32,
    total=U32,
    payload=st.binary(max_size=300),
    offset=st.integers(0, 16),
    as_view=st.booleans(),
)
def test_fragment_hot_path_matches_record_api(
    tidx: int, sqn: int, first: int, frag_offset: int, total: int, payload: bytes, offset: int, as_view: bool
) -> None:
    record = LbmcMessage(MessageType.DATA, tidx, sqn, (FragmentHeader(first, frag_offset, total),), payload)
    expected = encode_message(record)
    buf = bytearray(b"\xee" * (offset + len(expected) + 4))
    end = encode_fragment_into(
        buf, offset, tidx, sqn, first, frag_offset, total, memoryview(payload) if as_view else payload
    )
    assert end == offset + len(expected) == offset + lbmc.FRAGMENT_HEADER_LEN + len(payload)
    assert bytes(buf[offset:end]) == expected
    assert buf[end:] == b"\xee" * 4
    # and back: the receiver's hot path reads what the record decoder reads
    view = memoryview(buf)
    assert decode_fragment_fields(view, offset, len(expected)) == (first, frag_offset, total)
    decoded, _ = decode_message_at(view, offset)
    assert decoded.header(FragmentHeader) == FragmentHeader(first, frag_offset, total)
    assert bytes(decoded.payload) == payload


def test_fragment_fields_refuse_other_shapes() -> None:
    frag = FragmentHeader(1, 0, 10)
    with_batch = encode_message(
        LbmcMessage(MessageType.DATA, 1, 1, (frag, BatchHeader(BatchHeader.START)), b"x")
    )
    assert decode_fragment_fields(memoryview(with_batch), 0, len(with_batch)) is None  # FRAG not alone
    plain = encode_fragment_into(bytearray(40), 0, 1, 1, 1, 0, 10, b"x")
    assert plain == 29
    assert decode_fragment_fields(memoryview(bytearray(29)), 0, 27) is None  # shorter than the header


@pytest.mark.parametrize(
    ("size", "offset", "sqn"),
    [(20, 0, 0), (40, -1, 0), (40, 0, 1 << 32), (lbmc.MAX_MESSAGE_LEN + 100, 0, 0)],
)
def test_encode_fragment_into_refuses_with_wire_error(size: int, offset: int, sqn: int) -> None:
    payload = b"p" * (lbmc.MAX_MESSAGE_LEN if size > lbmc.MAX_MESSAGE_LEN else 1)
    with pytest.raises(WireError):
        encode_fragment_into(bytearray(size), offset, 1, sqn, 0, 0, 1, payload)
