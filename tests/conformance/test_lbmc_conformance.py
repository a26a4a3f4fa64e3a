"""LBMC over LBT-TCP, decoded by tshark (lbmc-pdm-srs.md §2, §6; transports §5).

For every LBMC header kind: encode with :mod:`openum.wire.lbmc`, frame with :mod:`openum.wire.lbttcp`
(the stream starts with the TCP session-id message, §5.3), carry it in TCP segments from the source
port 14371, require a clean decode, and compare the fields tshark decodes with what was encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from openum.wire.lbmc import (
    AdvertisementHeader,
    AppHeader,
    AppHeaderChain,
    AuthenticationHeader,
    BatchHeader,
    ContextInfoHeader,
    ContextInstanceHeader,
    DestinationContextInstanceHeader,
    DestinationHeader,
    DomainHeader,
    ExtendedOptionHeader,
    FragmentHeader,
    GatewayCapabilitiesHeader,
    GatewayInfoElement,
    GatewayKeepaliveHeader,
    GatewayNameHeader,
    HmacHeader,
    HotFailoverElement,
    LateJoinInfoHeader,
    LateJoinInfoRequestHeader,
    LbmcMessage,
    MessageType,
    OriginatingDomainHeader,
    OtidHeader,
    PatternIndexHeader,
    PatternInterestHeader,
    PatternMultiDomainInterestHeader,
    PropertiesBlock,
    Property,
    PropertyType,
    RequestHeader,
    ResponseHeader,
    RetransmissionRequestHeader,
    ReturnContextInstanceHeader,
    RouteInfoHeader,
    RouteInfoNeighborHeader,
    SourceIndexHeader,
    SourceRegistrationInfoHeader,
    SourceRegistrationInfoRequestHeader,
    SsfControlRequestHeader,
    SsfInitHeader,
    StoreContextInstanceHeader,
    StreamHeader,
    TopicIndexHeader,
    TopicInterestHeader,
    TopicMultiDomainInterestHeader,
    TopicNameHeader,
    TopicSourceExtendedFunctionalityHeader,
    TopicSourceHeader,
    TsniHeader,
    UmeAckHeader,
    UmeAckIdHeader,
    UmeCapabilityHeader,
    UmeClientLifetimeHeader,
    UmeKeepaliveHeader,
    UmeProxySourceElectionHeader,
    UmeProxySourceElectionTokenHeader,
    UmeProxySourceHeader,
    UmeRangedAckHeader,
    UmeReceiverKeepaliveHeader,
    UmeRegistrationHeader,
    UmeRegistrationResponseHeader,
    UmeSessionIdHeader,
    UmeStoreDomainHeader,
    UmeStoreGroupHeader,
    UmeStoreIdHeader,
    UmeStoreInfoExtHeader,
    UmeStoreInfoHeader,
    UmeStoreNameHeader,
    UmqAckHeader,
    UmqKeepaliveHeader,
    UmqLoadFactorHeader,
    UmqMessageIdHeader,
    UmqRcrHeader,
    UmqRegistrationHeader,
    UmqResubmissionHeader,
    UmqResubmitRequestHeader,
    UmqSessionIdHeader,
    UmqSqdReceiveHeader,
    UmqUlbMessageHeader,
    control_message,
    data_message,
    encode_data,
    encode_message,
)
from openum.wire.lbttcp import StreamEncoder
from tests.conformance.tshark import TcpFlow, Tshark, write_pcap

pytestmark = pytest.mark.tshark

SOURCE, RECEIVER = "10.0.0.1", "10.0.0.2"
SESSION_ID = 0x5EED0001
CTX_A = bytes.fromhex("0102030405060708")
CTX_B = bytes.fromhex("1112131415161718")
OTID = bytes(range(0x20, 0x40))

Expected = dict[str, list[int | str | bytes]]


@dataclass
class Case:
    """TCP payloads sent after the session-id message, and the tshark fields they must decode to."""

    segments: list[bytes]
    expect: Expected
    info: list[str] = field(default_factory=list)  # Info column of the data frames, in order
    tshark: Tshark = field(default_factory=Tshark)


def one_each(*messages: LbmcMessage) -> list[bytes]:
    return [encode_message(m) for m in messages]


def _norm(value: int | str | bytes) -> str:
    """Compare numbers numerically (tshark prints some in hex) and bytes as bare hex."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, int):
        return str(value)
    try:
        return str(int(value, 0))
    except ValueError:
        return value.replace(":", "").lower() if all(c in "0123456789abcdefABCDEF:" for c in value) else value


# --------------------------------------------------------------------------------------------------
# One builder per header kind
# --------------------------------------------------------------------------------------------------


def case_data() -> Case:
    payload = bytes(range(64))
    return Case(
        [
            encode_data(7, 1, payload),
            encode_message(data_message(8, 2, b"x", msg_type=MessageType.PROACTIVE_RETRANSMISSION)),
        ],
        {
            "lbmc.type": [8, 0, 2],
            "lbmc.tidx": [7, 8],
            "lbmc.sqn": [1, 2],
            "lbmc.msglen": [12, 76, 13],
            "data.data": [payload, b"x"],
        },
        ["DATA", "DATA"],
    )


def case_topic_name() -> Case:
    msg = data_message(7, 1, b"hello", TopicNameHeader("Market/US/IBM"))
    return Case(
        one_each(msg), {"lbmc.topicname.topic": ["Market/US/IBM"], "lbmc.tidx": [7], "data.data": [b"hello"]}
    )


def case_session_id() -> Case:
    # The session-id message sent first binds the connection to a transport channel (§5.3).
    return Case(
        [encode_data(1, 1, b"a")],
        {"lbmc.tcp_sid.sid": [SESSION_ID], "lbmc.tcp_sid.hdr_len": [8], "lbttcp.channel.client": [1]},
        ["DATA"],
    )


def case_fragment() -> Case:
    whole = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    first = data_message(7, 10, whole[:10], TopicNameHeader("Orders"), FragmentHeader(10, 0, len(whole)))
    second = data_message(7, 11, whole[10:20], FragmentHeader(10, 10, len(whole)))
    third = data_message(7, 12, whole[20:], FragmentHeader(10, 20, len(whole)))
    return Case(
        one_each(first, second, third),
        {
            "lbmc.frag.first_sqn": [10, 10, 10],
            "lbmc.frag.offset": [0, 10, 20],
            "lbmc.frag.len": [26, 26, 26],
            "lbmc.sqn": [10, 11, 12],
            "lbmc.reassembly.fragment": [5, 6, 7],
            "data.data": [whole[:10], whole[10:20], whole],  # two fragments, then the whole
        },
        tshark=Tshark(two_pass=True, prefs={"lbmc.reassemble_fragments": "TRUE"}),
    )


def case_batch() -> Case:
    batch = (
        data_message(7, 20, b"one", BatchHeader(BatchHeader.START)),
        data_message(7, 21, b"two"),
        data_message(7, 22, b"three", BatchHeader(BatchHeader.END)),
    )
    return Case(
        [b"".join(encode_message(m) for m in batch)],
        {
            "lbmc.sqn": [20, 21, 22],
            "lbmc.batch.flags.batch_start": [1, 0],
            "lbmc.batch.flags.batch_end": [0, 1],
            "data.data": [b"one", b"two", b"three"],
        },
    )


def case_split_across_segments() -> Case:
    first = encode_message(data_message(7, 30, b"split-me-across-two-segments", TopicNameHeader("Orders")))
    second = encode_data(7, 31, b"next")
    return Case(
        [first[:20], first[20:] + second],
        {
            "lbmc.sqn": [30, 31],
            "lbmc.topicname.topic": ["Orders"],
            "data.data": [b"split-me-across-two-segments", b"next"],
        },
    )


def case_request() -> Case:
    msg = data_message(7, 4, b"req?", TopicNameHeader("Orders"), RequestHeader(3, 14392, RECEIVER))
    return Case(
        one_each(msg),
        {
            "lbmc.tcp_request.qidx": [3],
            "lbmc.tcp_request.port": [14392],
            "lbmc.tcp_request.ipaddr": [RECEIVER],
            "lbmc.tcp_request.transport": [0],
        },
        ["DATA[REQ]"],
    )


def case_response() -> Case:
    msg = data_message(0, 0, b"answer", StreamHeader(2, 0, CTX_B), ResponseHeader(3))
    return Case(
        one_each(msg),
        {
            "lbmc.extopt.subtype": [0x4F52],
            "lbmc.extopt.flags.ignore_subtype": [1],
            "lbmc.extopt.data": [struct.pack(">I", 3)],
            "data.data": [b"answer"],
        },
        ["DATA"],
    )


def case_apphdr() -> Case:
    msg = data_message(7, 5, b"body", AppHeader(0x1234, b"\xde\xad\xbe\xef\x01"))
    return Case(
        one_each(msg), {"lbmc.apphdr.code": [0x1234], "lbmc.apphdr.hdr_len": [9], "data.data": [b"body"]}
    )


def case_hot_failover() -> Case:
    hf32 = data_message(7, 6, b"hf", AppHeaderChain((HotFailoverElement(1001),)))
    hf64 = data_message(
        7, 7, b"hf", AppHeaderChain((HotFailoverElement(2**40 + 1, 64), GatewayInfoElement(b"gw")))
    )
    return Case(
        one_each(hf32, hf64),
        {
            "lbmc.apphdr_chain.first_chain_hdr": [2, 2],
            "lbmc.apphdr_chain.element.hdr_len": [8, 12, 6],
            "lbmc.apphdr_chain.element.next_hdr": [0xFF, 3, 3],
            "data.data": [b"hf", b"hf"],
        },
    )


PROPS = (
    Property("flag", PropertyType.BOOLEAN, True),
    Property("b", PropertyType.BYTE, -5),
    Property("s", PropertyType.SHORT, 300),
    Property("qty", PropertyType.INT, 100),
    Property("l", PropertyType.LONG, 2**40 + 3),
    Property("f", PropertyType.FLOAT, 1.5),
    Property("d", PropertyType.DOUBLE, -2.25),
    Property("sym", PropertyType.STRING, "AAPL"),
)


def _properties_case(big_endian: bool) -> Case:
    block = PropertiesBlock(PROPS, big_endian)
    msg = data_message(7, 8, b"order-data", AppHeaderChain((HotFailoverElement(5),)), properties=block)
    return Case(
        one_each(msg),
        {
            "lbmc.apphdr_chain.first_chain_hdr": [6],
            "lbmc.apphdr_chain.msgprop.proplen": [len(encode_message(msg)) - 12 - 20 - len(b"order-data")],
            "lbmc.lbm_msg_properties.data.num_fields": [8],
            "lbmc.lbm_msg_properties.hdr.key": [p.name for p in PROPS],
            "lbmc.lbm_msg_properties.hdr.type": [int(p.type) for p in PROPS],
            "lbmc.lbm_msg_properties.hdr.boolean_value": [1],
            "lbmc.lbm_msg_properties.hdr.byte_value": [0xFB],  # tshark shows the bits unsigned
            "lbmc.lbm_msg_properties.hdr.short_value": [300],
            "lbmc.lbm_msg_properties.hdr.int_value": [100],
            "lbmc.lbm_msg_properties.hdr.long_value": [2**40 + 3],
            "lbmc.lbm_msg_properties.hdr.float_value": ["1.5"],
            "lbmc.lbm_msg_properties.hdr.double_value": ["-2.25"],
            "lbmc.lbm_msg_properties.hdr.string_value": ["AAPL"],
            "data.data": [b"order-data"],
        },
    )


def case_properties_little_endian() -> Case:
    return _properties_case(False)


def case_properties_big_endian() -> Case:
    return _properties_case(True)


def case_tsni() -> Case:
    records = tuple((tidx, tidx * 10) for tidx in range(1, 32))
    msgs = (control_message(TsniHeader(records)), control_message(TsniHeader(((40, 4),))))
    return Case(
        one_each(*msgs),
        {
            "lbmc.tsni.num_recs": [31, 1],
            "lbmc.tsni.tsni_rec.tidx": [t for t, _ in records] + [40],
            "lbmc.tsni.tsni_rec.sqn": [s for _, s in records] + [4],
        },
        ["TSNI", "TSNI"],
    )


def case_uim() -> Case:
    msg = data_message(
        0,
        0,
        b"uim-payload",
        StreamHeader(1, 9, CTX_B),
        DestinationContextInstanceHeader(CTX_A),
        ReturnContextInstanceHeader(CTX_B),
        TopicNameHeader("Orders"),
    )
    return Case(
        one_each(msg),
        {
            "lbmc.stream.stream_id": [1],
            "lbmc.stream.sqn": [9],
            "lbmc.stream.ctxinst": [CTX_B],
            "lbmc.ctxinst.ctxinst": [CTX_A, CTX_B],
            "lbmc.topicname.topic": ["Orders"],
        },
    )


def case_destination() -> Case:
    dest = DestinationHeader(3, "10.1.0.1", 14391, 4, "10.2.0.2", 14392, hops_taken=2)
    msg = data_message(
        0, 0, b"routed", StreamHeader(5, 1, CTX_A), dest, TopicIndexHeader(7), SourceIndexHeader(2**35)
    )
    return Case(
        one_each(msg),
        {
            "lbmc.destination.domain_id": [3],
            "lbmc.destination.ipaddr": ["10.1.0.1"],
            "lbmc.destination.port": [14391],
            "lbmc.destination.hops_taken": [2],
            "lbmc.destination.orig_domain_id": [4],
            "lbmc.destination.orig_ipaddr": ["10.2.0.2"],
            "lbmc.destination.orig_port": [14392],
            "lbmc.topic_idx.tidx": [7],
            "lbmc.srcidx.srcidx": [2**35],
        },
    )


def case_late_join() -> Case:
    req = LateJoinInfoRequestHeader(
        5, 1, 7, RECEIVER, 40008, 100, 1000, 10, flags=LateJoinInfoRequestHeader.LOW_SQN | 0x6
    )
    return Case(
        one_each(control_message(req), control_message(LateJoinInfoHeader(100, 200, 5))),
        {
            "lbmc.lji_req.request_idx": [5],
            "lbmc.lji_req.topic_idx": [7],
            "lbmc.lji_req.req_ip": [RECEIVER],
            "lbmc.lji_req.req_port": [40008],
            "lbmc.lji_req.tx_low_sqn": [100],
            "lbmc.lji_req.rx_req_max": [1000],
            "lbmc.lji_req.rx_req_outstanding_max": [10],
            "lbmc.ume_lj_info.low_seqnum": [100],
            "lbmc.ume_lj_info.high_seqnum": [200],
            "lbmc.ume_lj_info.qidx": [5],
        },
        ["LJI-REQ", "LJINFO"],
    )


def case_retransmission_request() -> Case:
    rxreq = RetransmissionRequestHeader(6, 1, 7, 150, 40008, RECEIVER, flags=RetransmissionRequestHeader.TSNI)
    retrans = data_message(7, 150, b"old-msg", OtidHeader(OTID), msg_type=MessageType.RETRANSMISSION)
    return Case(
        one_each(control_message(rxreq), retrans),
        {
            "lbmc.ume_rxreq.request_idx": [6],
            "lbmc.ume_rxreq.seqnum": [150],
            "lbmc.ume_rxreq.rx_ip": [RECEIVER],
            "lbmc.ume_rxreq.flags.t": [1],
            "lbmc.type": [8, 8, 10],  # session id, RXREQ, retransmission
            "lbmc.otid.otid": [OTID],
            "lbmc.sqn": [150],
        },
        ["RXREQ", "DATA"],  # RX-DATA is only shown off a known transport channel (spec §2.2),
    )


def case_ume_registration() -> Case:
    preg = UmeRegistrationHeader(0x11223344, 1, 7, 0, 14392, SOURCE, marker=UmeRegistrationHeader.SOURCE | 1)
    resp = UmeRegistrationResponseHeader(0x11223344, 1, 7, 10, 20, response_code=0x10, marker=0x81)
    return Case(
        one_each(control_message(preg), control_message(resp)),
        {
            "lbmc.ume_preg.reg_id": [0x11223344],
            "lbmc.ume_preg.s_flag": [1],
            "lbmc.ume_preg.marker": [1],
            "lbmc.ume_preg.resp_port": [14392],
            "lbmc.ume_preg.resp_ip": [SOURCE],
            "lbmc.ume_preg_resp.reg_id": [0x11223344],
            "lbmc.ume_preg_resp.low_seqnum": [10],
            "lbmc.ume_preg_resp.high_seqnum": [20],
            "lbmc.ume_preg_resp.code.n_flag": [1],
        },
        ["PREG", "PREG-RESP"],
    )


def case_ume_ack_keepalive() -> Case:
    msgs = (
        control_message(UmeAckHeader(1, 1, 7, 0x55, 3)),
        control_message(UmeKeepaliveHeader(2, 1, 7, 99, flags=0x40)),
        control_message(UmeRangedAckHeader(4, 9), UmeAckIdHeader(77), UmeCapabilityHeader(0x4000)),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.ume_ack.type": [1],
            "lbmc.ume_ack.rcv_reg_id": [0x55],
            "lbmc.ume_ack.seqnum": [3],
            "lbmc.ume_keepalive.type": [2],
            "lbmc.ume_keepalive.reg_id": [99],
            "lbmc.ume_ranged_ack.first_seqnum": [4],
            "lbmc.ume_ranged_ack.last_seqnum": [9],
            "lbmc.ume_ack_id.id": [77],
            "lbmc.ume_capability.flags": [0x4000],
        },
        ["ACK", "UME-KA", "UME-CAP"],
    )


def case_ume_store() -> Case:
    msgs = (
        control_message(
            UmeStoreIdHeader(5),
            UmeStoreGroupHeader(1, 3),
            UmeStoreInfoHeader(1, 14567, 2, "10.0.0.5", 33),
            UmeStoreNameHeader("store-1"),
        ),
        control_message(
            UmeStoreInfoExtHeader(1, 14568, 3, "10.0.0.6", 34, 4, 6),
            UmeProxySourceElectionTokenHeader(2, 0xDEAD),
            UmeProxySourceHeader(0x4000),
            StoreContextInstanceHeader(CTX_A),
        ),
        control_message(UmeProxySourceElectionHeader(SOURCE, "10.0.0.5", 1, 7, 14371, 14567, CTX_A, CTX_B)),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.ume_storeid.store_id": [5],
            "lbmc.ume_store_group.grp_sz": [3],
            "lbmc.ume_store.store_tcp_port": [14567],
            "lbmc.ume_store.store_ip_addr": ["10.0.0.5"],
            "lbmc.ume_storename.store": ["store-1"],
            "lbmc.ume_store_ext.store_tcp_port": [14568],
            "lbmc.ume_store_ext.domain_id": [4],
            "lbmc.ume_store_ext.version": [6],
            "lbmc.ume_psrc_election_token.token": [0xDEAD],
            "lbmc.ume_pser.source_ip": [SOURCE],
            "lbmc.ume_pser.store_port": [14567],
            "lbmc.ume_pser.store_ctxinst": [CTX_B],
            "lbmc.ctxinst.ctxinst": [CTX_A],
        },
    )


def case_ume_session() -> Case:
    msgs = (
        control_message(UmeClientLifetimeHeader(10, 20, 30), UmeSessionIdHeader(2**40 + 5)),
        control_message(UmeReceiverKeepaliveHeader(5, 2**33, CTX_B)),
        control_message(
            SourceRegistrationInfoRequestHeader(1, 7),
            SourceRegistrationInfoHeader(2, 10, 20, flags=0x3),
            UmeStoreDomainHeader(4),
        ),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.ume_client_lifetime.activity_tmo": [10],
            "lbmc.ume_client_lifetime.lifetime": [20],
            "lbmc.ume_client_lifetime.ttl": [30],
            "lbmc.ume_sid.sid": [2**40 + 5],
            "lbmc.ume_receiver_keepalive.rcv_regid": [5],
            "lbmc.ume_receiver_keepalive.session_id": [2**33],
            "lbmc.sri_req.topic_idx": [7],
            "lbmc.sri.low_sqn": [10],
            "lbmc.sri.high_sqn": [20],
            "lbmc.sri.flags.acktosrc": [1],
            "lbmc.ume_store_domain.domain": [4],
        },
        ["", "UME-RCV-KA", "SRI-REQ"],  # tshark has no label for UME_CLIENT_LIFETIME,
    )


def case_umq_data() -> Case:
    msgs = (
        data_message(7, 1, b"q1", UmqMessageIdHeader(5, 6), UmqSqdReceiveHeader(1, 2, 3, 4)),
        data_message(7, 2, b"q2", UmqResubmissionHeader(3, SOURCE, 14392, 1), UmqUlbMessageHeader(9, 8, 7)),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.umq_msgid.msgid_regid": [5],
            "lbmc.umq_msgid.msgid_stamp": [6],
            "lbmc.umq_sqd_rcv.queue_id": [1],
            "lbmc.umq_sqd_rcv.rcr_idx": [3],
            "lbmc.umq_resub.resp_ip": [SOURCE],
            "lbmc.umq_resub.resp_port": [14392],
            "lbmc.umq_ulb_msg.queue_id": [9],
            "lbmc.umq_ulb_msg.ulb_src_id": [8],
            "data.data": [b"q1", b"q2"],
        },
    )


def case_umq_control() -> Case:
    msgs = (
        control_message(UmqRegistrationHeader(2, 11, 3, 4, 5, record=struct.pack(">II", 1, 7))),
        control_message(UmqKeepaliveHeader(1, 11, 5, 0, record=struct.pack(">II", 6, 2))),
        control_message(UmqSessionIdHeader(1, 2**36), UmqLoadFactorHeader(1, 2, 3)),
        control_message(UmqRcrHeader(11, 12, 13, 14, 15, 16, 17, 18, 19, 20)),
        control_message(UmqResubmitRequestHeader(21, 22, 23, SOURCE, 14392)),
        control_message(UmqAckHeader(1, ((31, 32),), struct.pack(">II", 33, 34))),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.umq_reg.reg_type": [2],
            "lbmc.umq_reg.queue_id": [11],
            "lbmc.umq_reg.regid": [5],
            "lbmc.umq_reg.reg_src.transport_idx": [1],
            "lbmc.umq_reg.reg_src.topic_idx": [7],
            "lbmc.umq_ka.queue_id": [11],
            "lbmc.umq_ka.src.transport_idx": [6],
            "lbmc.umq_ka.src.topic_idx": [2],
            "lbmc.umq_sid.sid": [2**36],
            "lbmc.umq_lf.lf": [3],
            "lbmc.umq_rcr.queue_id": [11],
            "lbmc.umq_rcr.queue_ver": [20],
            "lbmc.umq_resub_req.resp_ip": [SOURCE],
            "lbmc.umq_ack.ack_type": [1],
        },
        ["UMQ-REG", "UMQ-KA", "UMQ-LF", "UMQ-RCR", "UMQ-RESUB-REQ", "UMQ-ACK"],
    )


def case_interest_and_advertisement() -> Case:
    msgs = (
        control_message(TopicInterestHeader(3, flags=0x2000), PatternInterestHeader(1, 2, 3)),
        control_message(
            TopicMultiDomainInterestHeader((4, 5, 6)), PatternMultiDomainInterestHeader(1, 9, (7, 8))
        ),
        control_message(AdvertisementHeader(1, 0x80000000, 2, 3, 4, 5, 6, 7, 8, CTX_A)),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.topic_interest.domain_id": [3],
            "lbmc.pattern_interest.domain_id": [2],
            "lbmc.topic_md_interest.domain_count": [3],
            "lbmc.topic_md_interest.domain_id": [4, 5, 6],
            "lbmc.pattern_md_interest.index": [9],
            "lbmc.pattern_md_interest.domain_id": [7, 8],
            "lbmc.advertisement.topic_idx": [4],
            "lbmc.advertisement.high_seqno": [6],
            "lbmc.advertisement.ctxinst": [CTX_A],
        },
    )


def case_context_and_domain() -> Case:
    msgs = (
        control_message(ContextInfoHeader(1, 14391, SOURCE, 5, CTX_A, name="ctx-1", flags=0x3800)),
        control_message(
            ContextInstanceHeader(CTX_B),
            DomainHeader(9, flags=0x4000),
            OriginatingDomainHeader(10),
            GatewayCapabilitiesHeader(1, 0x80000000),
            PatternIndexHeader(2**33),
        ),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.ctxinfo.port": [14391],
            "lbmc.ctxinfo.addr": [SOURCE],
            "lbmc.ctxinfo.name": ["ctx-1"],
            "lbmc.ctxinfo.ctxinst": [CTX_A],
            "lbmc.ctxinst.ctxinst": [CTX_B],
            "lbmc.domain.domain": [9],
            "lbmc.odomain.domain": [10],
            "lbmc.tnwg_capabilities.capabilities1.ume": [1],
            "lbmc.patidx.patidx": [2**33],
        },
        ["CTXINFO", "DOMAIN"],
    )


def case_gateway() -> Case:
    msgs = (
        control_message(GatewayKeepaliveHeader(1, 1_700_000_000, 5)),
        control_message(
            RouteInfoHeader(1, 2, 3, 4, 5, 6, 7), RouteInfoNeighborHeader(8, 9, 10), GatewayNameHeader("gw")
        ),
    )
    return Case(
        one_each(*msgs),
        {
            "lbmc.tnwg_ka.ts_seconds": [1_700_000_000],
            "lbmc.tnwg_ka.ts_microseconds": [5],
            "lbmc.route_info.node_id": [3],
            "lbmc.route_info.ttl": [7],
            "lbmc.route_info_neighbor.egress_cost": [10],
            "lbmc.gateway_name.gateway_name": ["gw"],
        },
        ["TNWG-KA", "RTE-INFO"],
    )


def case_topic_source() -> Case:
    msg = control_message(
        TopicSourceHeader(3, flags=0x4000), TopicSourceExtendedFunctionalityHeader(SOURCE, 14371, 3)
    )
    return Case(
        one_each(msg),
        {
            "lbmc.topic_source.domain_id": [3],
            "lbmc.topic_source.flags.eos": [1],
            "lbmc.topic_source_exfunc.src_ip": [SOURCE],
            "lbmc.topic_source_exfunc.src_port": [14371],
            "lbmc.topic_source_exfunc.functionality_flags.ume": [1],
        },
        ["TOPIC-SRC"],
    )


def case_source_side_filtering() -> Case:
    msg = control_message(SsfInitHeader(1, 2, 14400, SOURCE), SsfControlRequestHeader(1, 3, 4, 5))
    return Case(
        one_each(msg),
        {
            "lbmc.ssf_init.transport_idx": [1],
            "lbmc.ssf_init.ssf_port": [14400],
            "lbmc.ssf_init.ssf_ip": [SOURCE],
            "lbmc.ssf_creq.mode": [1],
            "lbmc.ssf_creq.client_idx": [5],
        },
        ["SSF-INIT"],
    )


def case_authentication_hmac() -> Case:
    msg = control_message(AuthenticationHeader(1, bytes([4]) + b"user"), HmacHeader(bytes(range(20))))
    return Case(
        one_each(msg),
        {
            "lbmc.auth_request.opid": [1],
            "lbmc.auth_request.user_name": ["user"],
            "lbmc.hmac.data": [bytes(range(20))],
        },
    )


def case_extended_option() -> Case:
    selector = b"JMSPriority > 3\x00"
    msg = control_message(ExtendedOptionHeader(ExtendedOptionHeader.MESSAGE_SELECTOR, selector))
    return Case(
        one_each(msg),
        {"lbmc.extopt.subtype": [0x0101], "lbmc.extopt.msgsel": ["JMSPriority > 3"]},
        ["EXTOPT"],
    )


def case_stream_encoder() -> Case:
    """StreamEncoder's hot path writes its own session-id message before its first data message
    (here after the one every test sends first, so tshark sees both ids)."""
    buf = bytearray(256)
    enc = StreamEncoder(SESSION_ID + 1)
    end = enc.encode_data_into(buf, 0, 1, 5, b"hot")
    end = enc.encode_data_into(buf, end, 1, 6, b"path")
    return Case(
        [bytes(buf[:end])],
        {
            "lbmc.tcp_sid.sid": [SESSION_ID, SESSION_ID + 1],
            "lbmc.sqn": [5, 6],
            "data.data": [b"hot", b"path"],
        },
    )


CASES: dict[str, Callable[[], Case]] = {
    name.removeprefix("case_"): builder for name, builder in globals().items() if name.startswith("case_")
}


def test_enough_header_kinds() -> None:
    assert len(CASES) >= 18


@pytest.mark.parametrize("kind", sorted(CASES))
def test_lbmc_kind_over_lbttcp(kind: str, tshark_bin: str, pcap_dir: Path) -> None:
    case = CASES[kind]()
    flow = TcpFlow(RECEIVER, 40000, SOURCE, 14371).handshake()
    flow.send(StreamEncoder(SESSION_ID).opening())
    for segment in case.segments:
        flow.send(segment)
    pcap = write_pcap(pcap_dir / f"lbmc_{kind}.pcap", flow.frames)
    rows = case.tshark.assert_clean(
        pcap, fields=["frame.number", "_ws.col.Info", "lbmc.tcp_sid.sid", *case.expect]
    )
    assert rows[3]["_ws.col.Info"] == ["TCP-SID"]
    if "lbmc.tcp_sid.sid" not in case.expect:
        assert [_norm(v) for row in rows for v in row.get("lbmc.tcp_sid.sid", [])] == [_norm(SESSION_ID)]
    for name, values in case.expect.items():
        got = [_norm(v) for row in rows for v in row.get(name, [])]
        assert got == [_norm(v) for v in values], f"{name}: tshark decoded {got}"
    if case.info:
        assert [row.get("_ws.col.Info", [""])[0] for row in rows[4:]] == case.info
