"""Unit tests of the LBMR codec (W1, ``shared/wire/lbmr-topic-resolution.md``).

- the verified datagrams of W1 §14 decode to exactly the expected records and re-encode byte for byte;
- hand-picked cases for every edge the spec names (legacy forms, unknown options, zero lengths, ...);
- Hypothesis round trips ``decode(encode(x)) == x`` for every body, option and transport kind;
- fuzzing: truncated, byte-flipped and random datagrams raise ``WireError`` and nothing else, and what
  does decode re-encodes to the same records.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.wire._common import WireError
from openum.wire.lbmr import (
    DEFAULT_MAX_DATAGRAM,
    PATTERN_PCRE,
    PATTERN_REGEX,
    PSER_REELECTION,
    QMGMT_CNIL,
    QMGMT_EC,
    QMGMT_EV,
    QMGMT_IKA,
    QMGMT_IL,
    QMGMT_JR,
    QMGMT_JREJ,
    QMGMT_QRO,
    SOURCE_TYPE_APPLICATION,
    SOURCE_TYPE_STORE,
    TMR_LEAVE,
    TMR_USE,
    ContextInfo,
    ContextInfoFlags,
    ContextInstanceOption,
    CostOption,
    DomainIdOption,
    ExtendedFunctionalityOption,
    Functionality,
    GatewayAddressOption,
    GatewayContextFlags,
    GatewayContextInfo,
    GatewayContextInstanceOption,
    GatewayDomainOption,
    GatewayInterest,
    GatewayNameOption,
    GatewayTopicResolutionRequest,
    InterestFlags,
    InterestRecord,
    LateJoinOption,
    LbmrPacket,
    LbtipcTransport,
    LbtrdmaTransport,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    LocalDomainOption,
    OtidOption,
    ProxySourceElection,
    PserOption,
    QueueContextInstanceOption,
    QueueGroup,
    QueueInfo,
    QueueInfoFlags,
    QueueInstance,
    QueueManagement,
    QueueManagementFlags,
    QueueManagementInstance,
    QueueQuery,
    QueueResolution,
    ReceiverAlive,
    RemoteAddressOption,
    RemoteContextInfo,
    RemoteContextRecord,
    RemoteDomainOption,
    RemoteDomainRoute,
    RemoteInstanceOption,
    RemoteNameOption,
    ResolutionRequestFlags,
    ResolverKeepalive,
    SourceAlive,
    SourceIdOption,
    SourceTypeOption,
    StoreContextInstanceOption,
    TcpTransport,
    TopicInfo,
    TopicManagement,
    TopicManagementFlags,
    TopicManagementRecord,
    TopicQuery,
    TopicResolution,
    TopicResolutionRequest,
    UlbOption,
    UmeFlags,
    UmeOption,
    UmeStoreGroupOption,
    UmeStoreOption,
    UmqQueueInfoOption,
    UmqRcrIndexOption,
    UnknownOption,
    UnknownTransport,
    VersionFlags,
    VersionOption,
    WildcardQuery,
    WildcardResolution,
    decode_packet,
    encode_packet,
    pack_records,
)

CTX = bytes.fromhex("0102030405060708")
TCP_ORDERS = TcpTransport("127.0.0.1", 14371, 0x1234ABCD)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def tir_packet(*infos: TopicInfo) -> LbmrPacket:
    return LbmrPacket(TopicResolution(infos=infos))


# ------------------------------------------------------------------------------ W1 §14 verified datagrams

SECTION_14: dict[str, tuple[str, LbmrPacket]] = {
    "01_tqr": ("00 01 0000 4f7264657273 00", LbmrPacket(TopicResolution((TopicQuery("Orders"),)))),
    "02_tir_tcp": (
        "00 00 0001 4f726465727300 00 0a 0000 00000007 7f000001 1234abcd 3823",
        tir_packet(TopicInfo("Orders", 7, TCP_ORDERS)),
    ),
    "03_tir_lbtrm": (
        "00 00 0001 4f726465727300 10 10 0000 00000003 0a000001 e00a0a0a cafebabe 3840 3836",
        tir_packet(
            TopicInfo("Orders", 3, LbtrmTransport("10.0.0.1", "224.10.10.10", 0xCAFEBABE, 14400, 14390))
        ),
    ),
    "04_wildcard_pcre": (
        "01 01 0000 01 5e4f72642e2a 00",
        LbmrPacket(WildcardResolution((WildcardQuery("^Ord.*", PATTERN_PCRE),))),
    ),
    "05_tir_lbtru": (
        "0000000151756f74657300010a0000000000090a00000101020304382c",
        tir_packet(TopicInfo("Quotes", 9, LbtruTransport("10.0.0.1", 14380, 16909060))),
    ),
    "06_tir_lbtipc": (
        "00000001497063546f70696300400a0000000000010a000001556677880001",
        tir_packet(TopicInfo("IpcTopic", 1, LbtipcTransport(0x0A000001, 0x55667788, 1))),
    ),
    "07_tir_lbtsmx": (
        "00000001536d78546f70696300040a0000000000020a00000199aabbcc0002",
        tir_packet(TopicInfo("SmxTopic", 2, LbtsmxTransport(0x0A000001, 0x99AABBCC, 2))),
    ),
    "08_tir_options": (
        "000000014f726465727300800a000000000007 00040060"
        "01204000 00003823 00000000 7f000001 00000000 00000000 00000000 00000000"
        "04180000 38230000 7f000001 00000000 00000064 00000001"
        "090c0000 0102030405060708 0d080000 00000005 0e100000 38230000 7f000001 00000001"
        "7f0000011234abcd3823",
        tir_packet(
            TopicInfo(
                "Orders",
                7,
                TCP_ORDERS,
                options=(
                    UmeOption(flags=UmeFlags.LATE_JOIN, source_port=14371, source_ip="127.0.0.1"),
                    LateJoinOption("127.0.0.1", 14371, high_sequence=100, low_sequence=1),
                    ContextInstanceOption(CTX),
                    DomainIdOption(5),
                    ExtendedFunctionalityOption("127.0.0.1", 14371, Functionality.LATE_JOIN),
                ),
            )
        ),
    ),
    "09_tqr_two_tirs": (
        "00010002547261646573004f726465727300000a0000000000077f0000011234abcd382351756f74657300000a"
        "0000000000087f0000011234abcd3823",
        LbmrPacket(
            TopicResolution(
                (TopicQuery("Trades"),),
                (TopicInfo("Orders", 7, TCP_ORDERS), TopicInfo("Quotes", 8, TCP_ORDERS)),
            )
        ),
    ),
    "10_wildcard_regex": (
        "01010000025e4f726400",
        LbmrPacket(WildcardResolution((WildcardQuery("^Ord", PATTERN_REGEX),))),
    ),
    "11_keepalive": ("00000000", LbmrPacket(ResolverKeepalive())),
    "12_topic_mgmt": (
        "04000000001a0002000b01004f726465727300000b000051756f74657300",
        LbmrPacket(
            TopicManagement(
                (TopicManagementRecord("Orders", TMR_USE), TopicManagementRecord("Quotes", TMR_LEAVE))
            )
        ),
    ),
    "13_packet_options_len_last": (
        "080100004f726465727300810c00000102030405060708830800010600000084080000000000078204000080040024",
        LbmrPacket(
            TopicResolution((TopicQuery("Orders"),)),
            (
                SourceIdOption(CTX),
                VersionOption(0x06000000, VersionFlags.UME),
                LocalDomainOption(7),
                SourceTypeOption(SOURCE_TYPE_APPLICATION),
            ),
        ),
    ),
    "14_packet_options_len_first": (
        "080100004f72646572730080040024810c000001020304050607088308000106000000840800000000000782040000",
        LbmrPacket(
            TopicResolution((TopicQuery("Orders"),)),
            (
                SourceIdOption(CTX),
                VersionOption(0x06000000, VersionFlags.UME),
                LocalDomainOption(7),
                SourceTypeOption(SOURCE_TYPE_APPLICATION),
            ),
        ),
    ),
    "15_ctxinfo_query": (
        "07031900800100000000000000000000000000006374784100",
        LbmrPacket(ContextInfo(ContextInfoFlags.QUERY, name="ctxA")),
    ),
    "16_ctxinfo_response": (
        "07031900600138237f00000101020304050607086374784100",
        LbmrPacket(
            ContextInfo(ContextInfoFlags.IP | ContextInfoFlags.INSTANCE, 14371, "127.0.0.1", CTX, "ctxA")
        ),
    ),
    "17_topic_res_request": ("07040007", LbmrPacket(TopicResolutionRequest(7))),
    "18_pser": (
        "07010000002300000a0000010a000002000000010000000738233a984f726465727300",
        LbmrPacket(ProxySourceElection("Orders", 7, "10.0.0.1", 14371, "10.0.0.2", 15000, transport_index=1)),
    ),
    "19_remote_domain_route": (
        "070600020a0000053a980000000000180000000100000002",
        LbmrPacket(RemoteDomainRoute("10.0.0.5", 15000, (1, 2))),
    ),
    "20_rctxinfo": (
        "07070039000100000031000001100000000000010a00000538230000020c000001020304050607080308000000000002"
        "040900006374784100",
        LbmrPacket(
            RemoteContextInfo(
                (
                    RemoteContextRecord(
                        (
                            RemoteAddressOption(1, "10.0.0.5", 14371),
                            RemoteInstanceOption(CTX),
                            RemoteDomainOption(2),
                            RemoteNameOption("ctxA"),
                        )
                    ),
                )
            )
        ),
    ),
    "21_tnwg_interest": (
        "070500280000000000200002000f0000000000014f726465727300000d8001000000015e4f726400",
        LbmrPacket(
            GatewayInterest(
                (
                    InterestRecord("Orders", 1),
                    InterestRecord("^Ord", 1, InterestFlags.PATTERN, PATTERN_PCRE),
                )
            )
        ),
    ),
    "22_umq_qqr_qir": (
        "060100015131005131004f7264657273000000000b000000020000000100010001000000010a0000073a99000000000000",
        LbmrPacket(
            QueueResolution(
                (QueueQuery("Q1"),),
                (
                    QueueInfo(
                        "Q1", "Orders", 11, 2, 1, (QueueGroup(0, 1),), (QueueInstance("10.0.0.7", 15001),)
                    ),
                ),
            )
        ),
    ),
    "23_tir_other_options": (
        "000000014f726465727300800a0000000000070004008b021000003a9800000a0000020000004d0308000000010000"
        "05080000000000030607400051310007080001fffffffb08240000000102030405060708090a0b0c0d0e0f10111213"
        "1415161718191a1b1c1d1e1f0a0c000001020304050607080b1c00000000000b0001020304050607000000040a0000"
        "03382300000c0c000101020304050607087f0000011234abcd3823",
        tir_packet(
            TopicInfo(
                "Orders",
                7,
                TCP_ORDERS,
                options=(
                    UmeStoreOption("10.0.0.2", 15000, source_registration_id=77),
                    UmeStoreGroupOption(0, 1),
                    UmqRcrIndexOption(3),
                    UmqQueueInfoOption("Q1", QueueInfoFlags.QUEUE),
                    CostOption(-5, hop_count=1),
                    OtidOption(bytes(range(32))),
                    StoreContextInstanceOption(CTX, 0),
                    UlbOption(11, int.from_bytes(bytes(range(8)), "big"), 4, "10.0.0.3", 14371),
                    QueueContextInstanceOption(CTX, 1),
                ),
            )
        ),
    ),
    "24_qmgmt_ika": (
        "07020004" + "00" * 20 + "0000000b000000020a0000073a99000000000000",
        LbmrPacket(QueueManagement(QMGMT_IKA, 11, 2, "10.0.0.7", 15001)),
    ),
    "25_unicast_tqr": ("000100004f726465727300", LbmrPacket(TopicResolution((TopicQuery("Orders"),)))),
    "26_decode_as_tir": (
        "000000014f726465727300000a0000000000077f0000011234abcd3823",
        tir_packet(TopicInfo("Orders", 7, TCP_ORDERS)),
    ),
}


@pytest.mark.parametrize("name", sorted(SECTION_14))
def test_section_14_datagram_decodes_to_expected_records(name: str) -> None:
    raw, expected = SECTION_14[name]
    assert decode_packet(h(raw)) == expected


@pytest.mark.parametrize("name", sorted(set(SECTION_14) - {"14_packet_options_len_first"}))
def test_section_14_datagram_reencodes_byte_for_byte(name: str) -> None:
    raw, expected = SECTION_14[name]
    assert encode_packet(expected) == h(raw)


def test_packet_length_option_is_always_written_last() -> None:
    # W1 §10 recommends the length option last; case #14 (first) re-encodes as case #13
    assert encode_packet(SECTION_14["14_packet_options_len_first"][1]) == h(
        SECTION_14["13_packet_options_len_last"][0]
    )


def test_section_14_field_values_spelled_out() -> None:
    tir = decode_packet(h(SECTION_14["02_tir_tcp"][0])).body
    assert isinstance(tir, TopicResolution)
    info = tir.infos[0]
    assert (info.topic, info.index, info.ttl, info.options) == ("Orders", 7, 0, ())
    assert info.transport == TcpTransport(ip="127.0.0.1", port=14371, session_id=0x1234ABCD)
    pser = decode_packet(h(SECTION_14["18_pser"][0])).body
    assert isinstance(pser, ProxySourceElection)
    assert (pser.topic, pser.topic_index, pser.store_port, pser.dependent_type) == ("Orders", 7, 15000, 0)


def test_decode_accepts_bytearray_and_memoryview() -> None:
    raw = h(SECTION_14["02_tir_tcp"][0])
    expected = SECTION_14["02_tir_tcp"][1]
    assert decode_packet(bytearray(raw)) == expected
    assert decode_packet(memoryview(raw)) == expected
    assert decode_packet(memoryview(b"xx" + raw)[2:]) == expected


# ------------------------------------------------------------------------------ specific cases


def test_legacy_six_byte_tcp_and_lbtru_forms_round_trip() -> None:
    packet = tir_packet(
        TopicInfo("A", 1, TcpTransport("10.1.2.3", 14371, None)),
        TopicInfo("B", 2, LbtruTransport("10.1.2.4", 14380, None)),
    )
    raw = encode_packet(packet)
    # the transport info of both is 6 bytes: tlen byte after the name
    assert raw[6] == 0x00
    assert raw[7] == 6
    assert decode_packet(raw) == packet


def test_lbtrdma_transport_round_trips() -> None:
    packet = tir_packet(TopicInfo("R", 4, LbtrdmaTransport("10.0.0.9", 77, 14500)))
    raw = encode_packet(packet)
    assert raw[6:8] == b"\x20\x0a"
    assert decode_packet(raw) == packet


def test_unknown_transport_is_skipped_by_tlen_and_kept() -> None:
    # TCP6 (0x02) is unknown to Wireshark too; the following TIR must still be found
    raw = h("00000002 4100 020300000000000b aabbcc 4200 000a0000 0000000c 7f000001 00000001 3823")
    packet = decode_packet(raw)
    assert isinstance(packet.body, TopicResolution)
    first, second = packet.body.infos
    assert first == TopicInfo("A", 11, UnknownTransport(0x02, b"\xaa\xbb\xcc"))
    assert second == TopicInfo("B", 12, TcpTransport("127.0.0.1", 14371, 1))
    assert encode_packet(packet) == raw


def test_unknown_topic_option_is_skipped_by_length_and_kept() -> None:
    block = h("0004000c 7e088000 01020304")
    raw = h("00000001 4f726465727300 800a0000 00000007") + block + TCP_ORDERS._pack()
    info = decode_packet(raw).body.infos[0]  # type: ignore[union-attr]
    assert info.options == (UnknownOption(0x7E, 0x8000, b"\x01\x02\x03\x04"),)
    assert info.transport == TCP_ORDERS
    assert encode_packet(decode_packet(raw)) == raw


def test_longer_known_topic_option_is_accepted_and_extra_bytes_ignored() -> None:
    # a newer peer may extend an option; the dissector steps by len, so do we
    raw = (
        h("00000001 4f726465727300 800a0000 00000007 00040010 0d0c0000 00000005 ffffffff")
        + TCP_ORDERS._pack()
    )
    assert decode_packet(raw).body.infos[0].options == (DomainIdOption(5),)  # type: ignore[union-attr]


def test_empty_topic_option_block_decodes_to_no_options() -> None:
    raw = h("00000001 4f726465727300 800a0000 00000007 00040004") + TCP_ORDERS._pack()
    assert decode_packet(raw) == tir_packet(TopicInfo("Orders", 7, TCP_ORDERS))


def test_unknown_packet_option_is_kept() -> None:
    packet = LbmrPacket(ResolverKeepalive(), (UnknownOption(0x90, 0x8000, b"xyz"), SourceIdOption(CTX)))
    raw = encode_packet(packet)
    assert raw[0] == 0x08
    assert raw[-4:] == h("80040017")
    assert decode_packet(raw) == packet


def test_packet_options_without_length_option_are_walked_from_the_body_end() -> None:
    raw = h("08010000 4f726465727300 82040002")
    assert decode_packet(raw) == LbmrPacket(
        TopicResolution((TopicQuery("Orders"),)), (SourceTypeOption(SOURCE_TYPE_STORE),)
    )


def test_options_bit_with_only_a_length_option_is_a_packet_without_options() -> None:
    assert decode_packet(h("08010000 4f726465727300 80040004")) == SECTION_14["01_tqr"][1]


def test_version_one_header_round_trips() -> None:
    packet = LbmrPacket(TopicResolutionRequest(ResolutionRequestFlags.QUERY), version=1)
    raw = encode_packet(packet)
    assert raw == h("17040002")
    assert decode_packet(raw) == packet


def test_receiver_and_source_alive() -> None:
    assert encode_packet(LbmrPacket(ReceiverAlive())) == h("02000000")
    assert encode_packet(LbmrPacket(SourceAlive())) == h("03000000")
    assert decode_packet(h("02000000")).body == ReceiverAlive()
    assert decode_packet(h("03000000")).body == SourceAlive()


def test_topic_management_flags_and_lengths() -> None:
    body = TopicManagement(
        (
            TopicManagementRecord(
                "^A.*", TMR_USE, TopicManagementFlags.RESPONSE | TopicManagementFlags.WILDCARD_PCRE
            ),
        )
    )
    raw = encode_packet(LbmrPacket(body))
    assert raw == h("04000000 000d 0001 0009 01c0 5e412e2a00")
    assert decode_packet(raw).body == body


def test_pser_with_context_instance_options() -> None:
    body = ProxySourceElection(
        "T",
        3,
        "10.0.0.1",
        14371,
        "10.0.0.2",
        15000,
        2,
        PSER_REELECTION,
        (PserOption(0, CTX), PserOption(1, CTX)),
    )
    raw = encode_packet(LbmrPacket(body))
    # flags 0x8000, then after the topic: options header (type 0, length 4 + 2 * 10), len before type
    assert raw[6:8] == b"\x80\x00"
    assert raw[30:] == h("0000 0018 0a00") + CTX + h("0a01") + CTX
    assert decode_packet(raw).body == body


@pytest.mark.parametrize(
    "body",
    [
        QueueManagement(
            QMGMT_IL,
            5,
            flags=QueueManagementFlags.NEW_INSTANCE_LIST,
            highest_rcr_tsp=9,
            instances=(
                QueueManagementInstance("10.0.0.1", 1, 2, 3, 0x8000),
                QueueManagementInstance("10.0.0.2", 4),
            ),
        ),
        QueueManagement(QMGMT_JR, 5, config_signature=bytes(range(20))),
        QueueManagement(QMGMT_JREJ, 5, value=17),
        QueueManagement(QMGMT_IKA, 5, queue_name="Q1"),
        QueueManagement(QMGMT_EC, 5, new_version=8),
        QueueManagement(QMGMT_EV, 5, value=3, highest_rcr_tsp=10, age=11),
        QueueManagement(QMGMT_CNIL, 5, flags=QueueManagementFlags.IGNORE),
        QueueManagement(QMGMT_QRO, 5, highest_rcr_tsp=12, queue_name="QueueName"),
    ],
    ids=lambda b: f"type{b.packet_type}",
)
def test_queue_management_packet_types_round_trip(body: QueueManagement) -> None:
    raw = encode_packet(LbmrPacket(body))
    assert raw[3] == body.packet_type
    assert bool(raw[2] & 0x40) == (body.queue_name is not None)
    assert decode_packet(raw).body == body


def test_queue_management_name_without_nul_is_tolerated() -> None:
    raw = encode_packet(LbmrPacket(QueueManagement(QMGMT_IKA, 5, queue_name="Q1")))
    assert decode_packet(raw[:-1]).body == QueueManagement(QMGMT_IKA, 5, queue_name="Q1")


def test_queue_info_with_topic_options() -> None:
    qir = QueueInfo("Q", "T", 1, options=(DomainIdOption(4),), instances=(QueueInstance("10.0.0.1", 9),))
    raw = encode_packet(LbmrPacket(QueueResolution(infos=(qir,))))
    assert raw[4 + 4 + 12 : 4 + 4 + 14] == b"\x80\x00"  # grp_blks: options bit, no groups
    assert decode_packet(raw).body == QueueResolution(infos=(qir,))


def test_gateway_messages_round_trip() -> None:
    for body in (
        GatewayContextInfo(GatewayContextFlags.QUERY, 7, 2, (GatewayNameOption("gw"),)),
        GatewayContextInfo(0, 0, 0, (GatewayAddressOption("10.0.0.1", 80), GatewayDomainOption(3))),
        GatewayTopicResolutionRequest((GatewayContextInstanceOption(CTX), UnknownOption(9, 0x8000, b"ab"))),
        GatewayTopicResolutionRequest(),
    ):
        raw = encode_packet(LbmrPacket(body))
        assert int.from_bytes(raw[2:4], "big") == len(raw)  # TNWG length: the whole message
        assert decode_packet(raw).body == body


def test_remote_context_query_flag() -> None:
    body = RemoteContextInfo((RemoteContextRecord(query=True), RemoteContextRecord((RemoteNameOption("x"),))))
    raw = encode_packet(LbmrPacket(body))
    assert raw[8:12] == h("0004 8000")
    assert decode_packet(raw).body == body


# ------------------------------------------------------------------------------ malformed input


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", "shorter than"),
        ("000100", "shorter than"),
        ("05000000", "unknown LBMR packet type"),
        ("0709000000", "unknown LBMR extended type"),
        ("20000000", "unknown LBMR version"),
        ("000100004f7264", "not NUL-terminated"),
        ("00010000 4f726465727300 ff", "left after"),
        ("00000001 4f726465727300 000800000000000 77f0000011234abcd", "transport info is 8 bytes"),
        ("00000001 4f726465727300 10100000 00000003 0a000001", "truncated"),
        ("00000001 4f726465727300 800a0000 00000007 00040008 7e000000", "has length 0"),
        ("00000001 4f726465727300 800a0000 00000007 01040008 7e040000", "does not start with a length"),
        ("00000001 4f726465727300 800a0000 00000007 0004000c 01080000 00000000", "has length 8, not 32"),
        ("00000001 4f726465727300 800a0000 00000007 000400ff", "truncated topic option block"),
        ("01010000 03 5e4100", "pattern type"),
        ("02010000", "zero record counts"),
        ("08010000 4f726465727300 81040000", "has length 4, not 12"),
        ("08010000 4f726465727300 80040040", "does not fit"),
        ("07031300 80010000 00000000 0000000000000000", "shorter than its header"),
        ("07050008 00090000", "unknown gateway message type"),
        ("0702000b" + "00" * 40, "unknown queue management packet type"),
        ("07070008 00010000 00020000", "shorter than its header"),
        ("04000000 0008 0001 0004 0100", "no room"),
    ],
)
def test_malformed_datagrams_raise_wire_error(raw: str, message: str) -> None:
    with pytest.raises(WireError, match=message):
        decode_packet(h(raw))


def test_decode_of_a_non_buffer_raises_wire_error() -> None:
    with pytest.raises(WireError):
        decode_packet("00000000")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "make",
    [
        TopicResolution,
        lambda: TopicResolution(tuple(TopicQuery(str(i)) for i in range(256))),
        lambda: TopicInfo("T", 1 << 32, TCP_ORDERS),
        lambda: TopicInfo("T", 1, "tcp"),
        lambda: TopicInfo("T", 1, TCP_ORDERS, options=(SourceIdOption(CTX),)),
        lambda: TopicInfo("T", 1, TCP_ORDERS, options=(UnknownOption(0x01, 0, b""),)),
        lambda: TopicInfo("T", 1, TCP_ORDERS, options=[DomainIdOption(1)]),
        lambda: TcpTransport("127.0.0.1", 70000, 1),
        lambda: UnknownTransport(0x10, b""),
        lambda: UnknownTransport(0x80, b""),
        lambda: WildcardQuery("x", 3),
        lambda: ContextInstanceOption(b"short"),
        lambda: ContextInfo(flags=0x0001, name="x"),
        lambda: QueueManagement(QMGMT_IKA, 1, flags=0x40),
        lambda: QueueManagement(QMGMT_IKA, 1, age=3),
        lambda: QueueManagement(QMGMT_IL, 1, value=2),
        lambda: QueueManagement(9, 1),
        lambda: LbmrPacket(ResolverKeepalive(), (UnknownOption(0x80, 0, b""),)),
        lambda: LbmrPacket(ResolverKeepalive(), version=2),
        lambda: LbmrPacket(TopicQuery("x")),  # type: ignore[arg-type]
        lambda: PserOption(0, b"123"),
        lambda: CostOption(1 << 31),
        lambda: QueueInfo("Q", "T", 1, groups=tuple(QueueGroup(0, 0) for _ in range(0x8000))),
    ],
)
def test_constructors_reject_what_cannot_be_encoded(make: Callable[[], object]) -> None:
    with pytest.raises(WireError):
        make()


@pytest.mark.parametrize(
    "packet",
    [
        tir_packet(TopicInfo("T", 1, TcpTransport("300.0.0.1", 1, 1))),
        tir_packet(TopicInfo("T\x00", 1, TCP_ORDERS)),
        tir_packet(TopicInfo("x" * 256, 1, TCP_ORDERS)),
        tir_packet(TopicInfo("\ud800", 1, TCP_ORDERS)),
        LbmrPacket(ContextInfo(name="n" * 235)),
        LbmrPacket(
            TopicResolution(infos=(TopicInfo("T", 1, TCP_ORDERS, options=(UmqQueueInfoOption("q" * 251),)),))
        ),
    ],
)
def test_encode_rejects_bad_fields(packet: LbmrPacket) -> None:
    with pytest.raises(WireError):
        encode_packet(packet)


def test_longest_names_fit() -> None:
    packet = tir_packet(TopicInfo("x" * 255, 1, TCP_ORDERS))
    assert decode_packet(encode_packet(packet)) == packet
    ctx = LbmrPacket(ContextInfo(name="n" * 234))
    assert encode_packet(ctx)[2] == 255
    assert decode_packet(encode_packet(ctx)) == ctx


# ------------------------------------------------------------------------------ pack_records


def _decoded(datagrams: list[bytes]) -> list[LbmrPacket]:
    return [decode_packet(d) for d in datagrams]


def test_pack_records_fills_datagrams_up_to_max_size_and_keeps_order() -> None:
    infos = [TopicInfo(f"Topic/{i:04d}", i, TCP_ORDERS) for i in range(300)]
    queries = [TopicQuery(f"Query/{i}") for i in range(10)]
    datagrams = pack_records(queries, infos, 1400)
    assert all(len(d) <= 1400 for d in datagrams)
    packets = _decoded(datagrams)
    got_q = [q for p in packets for q in p.body.queries]  # type: ignore[union-attr]
    got_i = [t for p in packets for t in p.body.infos]  # type: ignore[union-attr]
    assert got_q == queries
    assert got_i == infos
    # greedy: all but the last datagram are too full to take one more TIR (27 bytes each)
    assert all(len(d) > 1400 - 27 for d in datagrams[:-1])
    assert len(datagrams) == -(-(sum(len(t._pack()) for t in infos) + 10 * 12) // (1400 - 4))


def test_pack_records_respects_the_255_tqr_limit() -> None:
    queries = [TopicQuery(f"Q{i}") for i in range(600)]
    packets = _decoded(pack_records(queries, (), DEFAULT_MAX_DATAGRAM))
    counts = [len(p.body.queries) for p in packets]  # type: ignore[union-attr]
    assert counts == [255, 255, 90]


def test_pack_records_puts_wildcard_queries_into_type_1_datagrams_with_options() -> None:
    opts = (SourceIdOption(CTX),)
    datagrams = pack_records([TopicQuery("a"), WildcardQuery("^b", PATTERN_REGEX)], (), 200, options=opts)
    packets = _decoded(datagrams)
    assert [type(p.body) for p in packets] == [TopicResolution, WildcardResolution]
    assert all(p.options == opts for p in packets)


def test_pack_records_of_nothing_is_no_datagram() -> None:
    assert pack_records((), (), 100) == []


def test_pack_records_rejects_a_record_larger_than_a_datagram() -> None:
    with pytest.raises(WireError, match="does not fit"):
        pack_records((), [TopicInfo("x" * 200, 1, TCP_ORDERS)], 100)
    with pytest.raises(WireError):
        pack_records([TopicInfo("x", 1, TCP_ORDERS)], ())  # type: ignore[list-item]


# ------------------------------------------------------------------------------ hypothesis strategies

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, (1 << 64) - 1)
ips = st.tuples(u8, u8, u8, u8).map(lambda t: ".".join(map(str, t)))
names = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20)
inst8 = st.binary(min_size=8, max_size=8)


def tuples_of(strategy: st.SearchStrategy[Any], max_size: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(strategy, max_size=max_size).map(tuple)


def unknown_options(known: set[int]) -> st.SearchStrategy[UnknownOption]:
    return st.builds(UnknownOption, u8.filter(lambda t: t not in known), u16, st.binary(max_size=12))


TRANSPORTS: dict[str, st.SearchStrategy[Any]] = {
    "tcp": st.builds(TcpTransport, ips, u16, u32),
    "tcp_legacy": st.builds(TcpTransport, ips, u16, st.none()),
    "lbtru": st.builds(LbtruTransport, ips, u16, u32),
    "lbtru_legacy": st.builds(LbtruTransport, ips, u16, st.none()),
    "lbtrm": st.builds(LbtrmTransport, ips, ips, u32, u16, u16),
    "lbtipc": st.builds(LbtipcTransport, u32, u32, u16),
    "lbtsmx": st.builds(LbtsmxTransport, u32, u32, u16),
    "lbtrdma": st.builds(LbtrdmaTransport, ips, u32, u16),
    "unknown": st.builds(
        UnknownTransport,
        st.integers(0, 0x7F).filter(lambda t: t not in {0x00, 0x01, 0x04, 0x10, 0x20, 0x40}),
        st.binary(max_size=20),
    ),
}
any_transport = st.one_of(*TRANSPORTS.values())

TOPIC_OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "ume": st.builds(UmeOption, u16, u16, u16, ips, ips, u32, u32, u32, u32),
    "ume_store": st.builds(UmeStoreOption, ips, u16, u16, u8, u32, u8),
    "ume_store_group": st.builds(UmeStoreGroupOption, u8, u16, u8),
    "late_join": st.builds(LateJoinOption, ips, u16, u32, u32, u32, u16),
    "umq_rcr_index": st.builds(UmqRcrIndexOption, u32, u16),
    "umq_queue_info": st.builds(UmqQueueInfoOption, names, u16),
    "cost": st.builds(CostOption, st.integers(-(1 << 31), (1 << 31) - 1), u8, u8),
    "otid": st.builds(OtidOption, st.binary(min_size=32, max_size=32), u16),
    "context_instance": st.builds(ContextInstanceOption, inst8, u8),
    "store_context_instance": st.builds(StoreContextInstanceOption, inst8, u8, u8),
    "ulb": st.builds(UlbOption, u32, u64, u32, ips, u16, u16),
    "queue_context_instance": st.builds(QueueContextInstanceOption, inst8, u8, u8),
    "domain_id": st.builds(DomainIdOption, u32, u16),
    "extended_functionality": st.builds(ExtendedFunctionalityOption, ips, u16, u32, u16),
    "unknown": unknown_options(set(range(0x01, 0x0F))),
}
any_topic_option = st.one_of(*TOPIC_OPTIONS.values())

PACKET_OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "source_id": st.builds(SourceIdOption, inst8, u16),
    "source_type": st.builds(SourceTypeOption, u8, u8),
    "version": st.builds(VersionOption, u32, u16),
    "local_domain": st.builds(LocalDomainOption, u32, u16),
    "unknown": unknown_options({0x80, 0x81, 0x82, 0x83, 0x84}),
}
any_packet_options = tuples_of(st.one_of(*PACKET_OPTIONS.values()))

gateway_options = tuples_of(
    st.one_of(
        st.builds(GatewayContextInstanceOption, inst8, u16),
        st.builds(GatewayAddressOption, ips, u16, u16),
        st.builds(GatewayDomainOption, u32, u16),
        st.builds(GatewayNameOption, names, u16),
        unknown_options({0, 1, 2, 3}),
    )
)
remote_options = tuples_of(
    st.one_of(
        st.builds(RemoteAddressOption, u32, ips, u16, u16),
        st.builds(RemoteInstanceOption, inst8, u16),
        st.builds(RemoteDomainOption, u32, u16),
        st.builds(RemoteNameOption, names, u16),
        unknown_options({1, 2, 3, 4}),
    )
)
tirs = st.builds(TopicInfo, names, u32, any_transport, u16, tuples_of(any_topic_option))
tqrs = st.builds(TopicQuery, names)
wildcard_tqrs = st.builds(WildcardQuery, names, st.sampled_from([PATTERN_PCRE, PATTERN_REGEX]))
qirs = st.builds(
    QueueInfo,
    names,
    names,
    u32,
    u32,
    u32,
    tuples_of(st.builds(QueueGroup, u16, u16)),
    tuples_of(st.builds(QueueInstance, ips, u16, u16, u16)),
    tuples_of(any_topic_option, 2),
)


@st.composite
def queue_management(draw: st.DrawFn) -> QueueManagement:
    ptype = draw(st.integers(QMGMT_IL, QMGMT_QRO))
    kw: dict[str, Any] = {
        "queue_version": draw(u32),
        "ip": draw(ips),
        "port": draw(u16),
        "instance_index": draw(u16),
        "group_index": draw(u16),
        "config_signature": draw(st.binary(min_size=20, max_size=20)),
        "flags": draw(st.sampled_from([0, 0x80, 0x20, 0x10, 0xB0])),
        "queue_name": draw(st.none() | names),
    }
    if ptype == QMGMT_IL:
        kw["highest_rcr_tsp"] = draw(u32)
        kw["instances"] = draw(tuples_of(st.builds(QueueManagementInstance, ips, u16, u16, u16, u16)))
    else:
        kw["value"] = draw(u16)
    if ptype in (QMGMT_EV, QMGMT_QRO):
        kw["highest_rcr_tsp"] = draw(u32)
    if ptype == QMGMT_EV:
        kw["age"] = draw(u32)
    if ptype == QMGMT_EC:
        kw["new_version"] = draw(u32)
    return QueueManagement(ptype, draw(u32), **kw)


BODIES: dict[str, st.SearchStrategy[Any]] = {
    "topic_resolution": st.tuples(tuples_of(tqrs), tuples_of(tirs))
    .filter(lambda t: t[0] or t[1])
    .map(lambda t: TopicResolution(*t)),
    "wildcard_resolution": st.builds(WildcardResolution, tuples_of(wildcard_tqrs), tuples_of(tirs)),
    "resolver_keepalive": st.just(ResolverKeepalive()),
    "receiver_alive": st.just(ReceiverAlive()),
    "source_alive": st.just(SourceAlive()),
    "topic_management": st.builds(
        TopicManagement, tuples_of(st.builds(TopicManagementRecord, names, u8, u8))
    ),
    "queue_resolution": st.builds(QueueResolution, tuples_of(st.builds(QueueQuery, names)), tuples_of(qirs)),
    "proxy_source_election": st.builds(
        ProxySourceElection,
        names,
        u32,
        ips,
        u16,
        ips,
        u16,
        u32,
        u16,
        tuples_of(
            st.builds(PserOption, st.sampled_from([0, 1]), inst8)
            | st.builds(PserOption, st.integers(2, 255), st.binary(max_size=10))
        ),
    ),
    "queue_management": queue_management(),
    "context_info": st.builds(ContextInfo, u16.map(lambda f: f & ~1), u16, ips, inst8, st.none() | names, u8),
    "topic_resolution_request": st.builds(TopicResolutionRequest, u16),
    "gateway_interest": st.builds(GatewayInterest, tuples_of(st.builds(InterestRecord, names, u32, u8, u8))),
    "gateway_context_info": st.builds(GatewayContextInfo, u32, u32, u8, gateway_options),
    "gateway_tr_request": st.builds(GatewayTopicResolutionRequest, gateway_options),
    "remote_domain_route": st.builds(RemoteDomainRoute, ips, u16, tuples_of(u32, 5)),
    "remote_context_info": st.builds(
        RemoteContextInfo, tuples_of(st.builds(RemoteContextRecord, remote_options, st.booleans()))
    ),
}
any_packet = st.builds(LbmrPacket, st.one_of(*BODIES.values()), any_packet_options, st.sampled_from([0, 1]))

ROUND_TRIP = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("kind", sorted(BODIES))
@ROUND_TRIP
@given(data=st.data())
def test_body_round_trip(kind: str, data: st.DataObject) -> None:
    packet = LbmrPacket(
        data.draw(BODIES[kind]), data.draw(any_packet_options), data.draw(st.sampled_from([0, 1]))
    )
    assert decode_packet(encode_packet(packet)) == packet


@pytest.mark.parametrize("kind", sorted(TOPIC_OPTIONS))
@ROUND_TRIP
@given(data=st.data())
def test_topic_option_round_trip(kind: str, data: st.DataObject) -> None:
    options = tuple(data.draw(st.lists(TOPIC_OPTIONS[kind], min_size=1, max_size=3)))
    packet = tir_packet(
        TopicInfo(data.draw(names), data.draw(u32), data.draw(any_transport), options=options)
    )
    assert decode_packet(encode_packet(packet)) == packet


@pytest.mark.parametrize("kind", sorted(TRANSPORTS))
@ROUND_TRIP
@given(data=st.data())
def test_transport_round_trip(kind: str, data: st.DataObject) -> None:
    packet = tir_packet(
        TopicInfo(data.draw(names), data.draw(u32), data.draw(TRANSPORTS[kind]), data.draw(u16))
    )
    assert decode_packet(encode_packet(packet)) == packet


@pytest.mark.parametrize("kind", sorted(PACKET_OPTIONS))
@ROUND_TRIP
@given(data=st.data())
def test_packet_option_round_trip(kind: str, data: st.DataObject) -> None:
    options = tuple(data.draw(st.lists(PACKET_OPTIONS[kind], min_size=1, max_size=3)))
    packet = LbmrPacket(data.draw(BODIES["topic_resolution"]), options)
    raw = encode_packet(packet)
    assert raw[0] & 0x08
    assert raw[-4] == 0x80
    assert decode_packet(raw) == packet


@ROUND_TRIP
@given(queries=st.lists(tqrs | wildcard_tqrs, max_size=40), infos=st.lists(tirs, max_size=40))
def test_pack_records_round_trip(queries: list[Any], infos: list[TopicInfo]) -> None:
    datagrams = pack_records(queries, infos, 600)
    assert all(len(d) <= 600 for d in datagrams)
    packets = _decoded(datagrams)
    # type-0 datagrams (topic queries) come before type-1 datagrams (wildcard queries)
    expected = sorted(queries, key=lambda q: isinstance(q, WildcardQuery))
    assert [q for p in packets for q in p.body.queries] == expected
    assert [t for p in packets for t in p.body.infos] == infos


# ------------------------------------------------------------------------------ fuzzing


def decode_or_wire_error(raw: bytes) -> LbmrPacket | None:
    """Decode; on success the records must re-encode and decode to themselves."""
    try:
        packet = decode_packet(raw)
    except WireError:
        return None
    assert decode_packet(encode_packet(packet)) == packet
    return packet


@FUZZ
@given(packet=any_packet, data=st.data())
def test_truncated_datagrams_raise_only_wire_error(packet: LbmrPacket, data: st.DataObject) -> None:
    raw = encode_packet(packet)
    cut = data.draw(st.integers(0, len(raw) - 1))
    decode_or_wire_error(raw[:cut])


@FUZZ
@given(packet=any_packet, data=st.data())
def test_byte_flipped_datagrams_raise_only_wire_error(packet: LbmrPacket, data: st.DataObject) -> None:
    raw = bytearray(encode_packet(packet))
    for _ in range(data.draw(st.integers(1, 3))):
        raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    decode_or_wire_error(bytes(raw))


@FUZZ
@given(raw=st.binary(max_size=120))
def test_random_datagrams_raise_only_wire_error(raw: bytes) -> None:
    decode_or_wire_error(raw)


@FUZZ
@given(
    first=st.sampled_from([0x00, 0x01, 0x02, 0x03, 0x04, 0x06, 0x07, 0x08, 0x09, 0x0C, 0x0E, 0x0F, 0x17]),
    second=st.integers(0, 8),
    rest=st.binary(max_size=120),
)
def test_random_bodies_behind_valid_headers_raise_only_wire_error(
    first: int, second: int, rest: bytes
) -> None:
    decode_or_wire_error(bytes((first, second)) + rest)


def test_every_prefix_of_a_rich_datagram_is_handled() -> None:
    raw = h(SECTION_14["08_tir_options"][0]) + b""
    outcomes = [decode_or_wire_error(raw[:cut]) for cut in range(len(raw))]
    # a TIR datagram is only complete at its full length
    assert outcomes == [None] * len(raw)
    assert decode_or_wire_error(raw) == SECTION_14["08_tir_options"][1]


def test_huge_counts_with_short_bodies_fail_fast() -> None:
    # 65535 TIRs announced, none present: must raise, not loop or allocate per announced record
    with pytest.raises(WireError):
        decode_packet(h("00ffffff") + b"A\x00")
    with pytest.raises(WireError):
        decode_packet(h("07020001" + "00" * 36 + "ffff 00000000"))
