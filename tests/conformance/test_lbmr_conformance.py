"""LBMR conformance: openum's topic resolution datagrams as tshark 4.0 decodes them (W1 §11, §14).

Every record, transport, topic option, packet option and extended type openum can encode is one case.
All cases are written into one capture (sent to the resolver group 224.9.10.11:12965 so the LBMR
heuristic claims them, plus unicast lbmrd cases on 14402 -> 15380) and decoded once; each case then
checks its own frame: LBMR claimed it, no malformed flag, no warning/error expert item, and every listed
tshark field equals what was encoded.  ``assert_clean`` runs on the whole capture as well.

Cases that tshark is documented to warn about (unknown options/transports, W1 §14 probes) live in a
second capture whose expected warnings are allowed by message.

Known dissector limits these cases stay clear of (checked with tshark 4.0.17; the causes read in
packet-lbmr.c): a third option in a gateway context-info/TR-request message is Malformed (the option
walk adds lengths cumulatively; two are fine), and packet options after a queue-management message are
Malformed (they are looked for 2 bytes too late).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openum.wire.lbmr import (
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
    SOURCE_TYPE_GATEWAY,
    SOURCE_TYPE_STORE,
    TMR_LEAVE,
    TMR_USE,
    Body,
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
    LateJoinFlags,
    LateJoinOption,
    LbmrPacket,
    LbtipcTransport,
    LbtrdmaTransport,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    LocalDomainOption,
    OtidOption,
    PacketOption,
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
    TopicOption,
    TopicQuery,
    TopicResolution,
    TopicResolutionRequest,
    Transport,
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
from tests.conformance.tshark import (
    DEFAULT_DECODE_AS,
    SEVERITY_WARNING,
    Tshark,
    udp_frame,
    write_pcap,
)

pytestmark = pytest.mark.tshark

# W1 §1.1: the resolver group/port and the lbmrd ports the LBMR heuristic recognises
MULTICAST = {"src": "10.0.0.1", "dst": "224.9.10.11", "sport": 12965, "dport": 12965}
LBMRD_IN = {"src": "10.0.0.1", "dst": "10.0.0.9", "sport": 14402, "dport": 15380}
LBMRD_OUT = {"src": "10.0.0.9", "dst": "10.0.0.1", "sport": 15380, "dport": 14402}
DECODE_AS_PORT = 23456  # W1 §14 #26

CTX = bytes.fromhex("0102030405060708")
CTX2 = bytes.fromhex("a1a2a3a4a5a6a7a8")
SID = 0x1234ABCD


@dataclass(frozen=True)
class Case:
    """One datagram and the tshark fields it must decode to (every occurrence, in order)."""

    id: str
    packet: LbmrPacket
    expected: dict[str, list[Any]]
    info: str | None = None
    addr: dict[str, Any] = field(default_factory=lambda: MULTICAST)
    allowed: tuple[str, ...] = ()

    @property
    def payload(self) -> bytes:
        return encode_packet(self.packet)


def body_case(case_id: str, body: Body, expected: dict[str, list[Any]], **kw: Any) -> Case:
    return Case(case_id, LbmrPacket(body), expected, **kw)


def tir_case(
    case_id: str,
    transport: Transport,
    expected: dict[str, list[Any]],
    options: tuple[TopicOption, ...] = (),
    **kw: Any,
) -> Case:
    info = TopicInfo("Orders", 7, transport, ttl=3, options=options)
    common = {
        "lbmr.hdr.tirs": [1],
        "lbmr.tir.name": ["Orders"],
        "lbmr.tir.index": [7],
        "lbmr.tir.ttl": [3],
        "lbmr.tir.transport_opts": [1 if options else 0],
    }
    return body_case(
        case_id, TopicResolution(infos=(info,)), {**common, **expected}, info="TQRs 0 TIRs 1", **kw
    )


def option_case(case_id: str, option: TopicOption, expected: dict[str, list[Any]], **kw: Any) -> Case:
    tcp = TcpTransport("10.0.0.1", 14371, SID)
    total = 4 + len(option._pack())
    return tir_case(
        f"topic_option_{case_id}",
        tcp,
        {"lbmr.topt.len.total_len": [total], "lbmr.tir.tcp.port": [14371], **expected},
        (option,),
        **kw,
    )


def packet_option_case(
    case_id: str, options: tuple[PacketOption, ...], expected: dict[str, list[Any]]
) -> Case:
    packet = LbmrPacket(TopicResolution((TopicQuery("Orders"),)), options)
    total = 4 + sum(len(o._pack()) for o in options)
    common = {"lbmr.hdr.opts": [1], "lbmr.tqr.name": ["Orders"], "lbmr.opt.len.total_len": [total]}
    return Case(f"packet_option_{case_id}", packet, {**common, **expected}, info="TQRs 1 TIRs 0")


# ------------------------------------------------------------------------------ topic queries and TIRs

TOPIC_CASES = [
    body_case(
        "tqr",
        TopicResolution((TopicQuery("Orders"), TopicQuery("Market/US/IBM"))),
        {
            "lbmr.hdr.type": [0],
            "lbmr.hdr.tqrs": [2],
            "lbmr.hdr.tirs": [0],
            "lbmr.tqr.name": ["Orders", "Market/US/IBM"],
        },
        info="TQRs 2 TIRs 0",
    ),
    body_case(
        "wildcard_tqr_pcre",
        WildcardResolution((WildcardQuery("^Ord.*", PATTERN_PCRE),)),
        # W1 §4.2 quirk: the pattern field starts at the pattern-type byte
        {"lbmr.hdr.type": [1], "lbmr.tqr.pattern_type": [1], "lbmr.tqr.pattern": ["\x01^Ord.*"]},
        info="TQRs 1 TIRs 0",
    ),
    body_case(
        "wildcard_tqr_regex_with_tir",
        WildcardResolution(
            (WildcardQuery("^Mkt/[A-Z]+$", PATTERN_REGEX), WildcardQuery("x", PATTERN_REGEX)),
            (TopicInfo("Mkt/IBM", 4, TcpTransport("10.0.0.1", 14372, 9)),),
        ),
        {
            "lbmr.hdr.type": [1],
            "lbmr.tqr.pattern_type": [2, 2],
            "lbmr.tqr.pattern": ["\x02^Mkt/[A-Z]+$", "\x02x"],
            "lbmr.tir.name": ["Mkt/IBM"],
            "lbmr.tir.tcp.port": [14372],
        },
        info="TQRs 2 TIRs 1",
    ),
    tir_case(
        "tir_tcp",
        TcpTransport("10.0.0.1", 14371, SID),
        {
            "lbmr.tir.transport_type": [0x00],
            "lbmr.tir.tlen": [10],
            "lbmr.tir.tcp.ip": ["10.0.0.1"],
            "lbmr.tir.tcp.session_id": [SID],
            "lbmr.tir.tcp.port": [14371],
        },
    ),
    tir_case(
        "tir_tcp_legacy",
        TcpTransport("10.0.0.1", 14371, None),
        {
            "lbmr.tir.tlen": [6],
            "lbmr.tir.tcp.ip": ["10.0.0.1"],
            "lbmr.tir.tcp.port": [14371],
            "lbmr.tir.tcp.session_id": [],
        },
    ),
    tir_case(
        "tir_lbtru",
        LbtruTransport("10.0.0.1", 14380, 0x01020304),
        {
            "lbmr.tir.transport_type": [0x01],
            "lbmr.tir.tlen": [10],
            "lbmr.tir.lbtru.ip": ["10.0.0.1"],
            "lbmr.tir.lbtru.port": [14380],
            "lbmr.tir.lbtru.session_id": [0x01020304],
        },
    ),
    tir_case(
        "tir_lbtru_legacy",
        LbtruTransport("10.0.0.1", 14381, None),
        {
            "lbmr.tir.tlen": [6],
            "lbmr.tir.lbtru.ip": ["10.0.0.1"],
            "lbmr.tir.lbtru.port": [14381],
            "lbmr.tir.lbtru.session_id": [],
        },
    ),
    tir_case(
        "tir_lbtrm",
        LbtrmTransport("10.0.0.1", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
        {
            "lbmr.tir.transport_type": [0x10],
            "lbmr.tir.tlen": [16],
            "lbmr.tir.lbtrm.srcip": ["10.0.0.1"],
            "lbmr.tir.lbtrm.mcastip": ["224.10.10.10"],
            "lbmr.tir.lbtrm.sessid": [0xCAFEBABE],
            "lbmr.tir.lbtrm.dport": [14400],
            "lbmr.tir.lbtrm.sport": [14390],
        },
    ),
    tir_case(
        "tir_lbtipc",
        LbtipcTransport(0x0A000001, 0x55667788, 3),
        {
            "lbmr.tir.transport_type": [0x40],
            "lbmr.tir.lbtipc.host_id": [0x0A000001],
            "lbmr.tir.lbtipc.session_id": [0x55667788],
            "lbmr.tir.lbtipc.xport_id": [3],
        },
    ),
    tir_case(
        "tir_lbtsmx",
        LbtsmxTransport(0x0A000001, 0x99AABBCC, 4),
        {
            "lbmr.tir.transport_type": [0x04],
            "lbmr.tir.lbtsmx.host_id": [0x0A000001],
            "lbmr.tir.lbtsmx.session_id": [0x99AABBCC],
            "lbmr.tir.lbtsmx.xport_id": [4],
        },
    ),
    tir_case(
        "tir_lbtrdma",
        LbtrdmaTransport("10.0.0.1", 0x77, 14500),
        {
            "lbmr.tir.transport_type": [0x20],
            "lbmr.tir.lbtrdma.ip": ["10.0.0.1"],
            "lbmr.tir.lbtrdma.session_id": [0x77],
            "lbmr.tir.lbtrdma.port": [14500],
        },
    ),
    body_case(
        "tqrs_and_tirs_packed_together",
        TopicResolution(
            (TopicQuery("Q/1"), TopicQuery("Q/2"), TopicQuery("Q/3")),
            (
                TopicInfo("A", 1, TcpTransport("10.0.0.1", 14371, SID)),
                TopicInfo("B", 2, LbtrmTransport("10.0.0.1", "224.10.10.11", 5, 14400, 14391)),
                TopicInfo("C", 3, LbtruTransport("10.0.0.1", 14382, 6), options=(DomainIdOption(1),)),
                TopicInfo("D", 4, LbtipcTransport(1, 7, 8)),
            ),
        ),
        {
            "lbmr.tqr.name": ["Q/1", "Q/2", "Q/3"],
            "lbmr.tir.name": ["A", "B", "C", "D"],
            "lbmr.tir.index": [1, 2, 3, 4],
            "lbmr.tir.transport_type": [0x00, 0x10, 0x01, 0x40],
            "lbmr.tir.transport_opts": [0, 0, 1, 0],
            "lbmr.topt.domain_id.domain_id": [1],
        },
        info="TQRs 3 TIRs 4",
    ),
    Case(
        "version_1_header",
        LbmrPacket(TopicResolution((TopicQuery("Orders"),)), version=1),
        {"lbmr.hdr.ver": [1], "lbmr.tqr.name": ["Orders"]},
        info="TQRs 1 TIRs 0",
    ),
]

# ------------------------------------------------------------------------------ TIR topic options (W1 §6)

ALL_TOPIC_OPTIONS: tuple[TopicOption, ...] = (
    UmeOption(UmeFlags.LATE_JOIN, 0, 14371, "0.0.0.0", "10.0.0.1"),
    UmeStoreOption("10.0.0.2", 15000, 1, 0, 77),
    UmeStoreGroupOption(0, 1),
    LateJoinOption("10.0.0.1", 14371, 100, 1),
    UmqRcrIndexOption(3),
    UmqQueueInfoOption("Q1", QueueInfoFlags.QUEUE),
    CostOption(-5, 1),
    OtidOption(bytes(range(32))),
    ContextInstanceOption(CTX),
    StoreContextInstanceOption(CTX2, 1),
    UlbOption(11, 0x0001020304050607, 4, "10.0.0.3", 14371),
    QueueContextInstanceOption(CTX, 2),
    DomainIdOption(5),
    ExtendedFunctionalityOption("10.0.0.1", 14371, Functionality.LATE_JOIN | Functionality.UME),
)

OPTION_CASES = [
    option_case(
        "ume",
        UmeOption(
            UmeFlags.LATE_JOIN | UmeFlags.STORE | UmeFlags.ACK_TO_SOURCE,
            15000,
            14371,
            "10.0.0.2",
            "10.0.0.1",
            77,
            5,
            1000,
            10,
        ),
        {
            "lbmr.topt.ume.flags.latejoin": [1],
            "lbmr.topt.ume.flags.store": [1],
            "lbmr.topt.ume.flags.qccap": [0],
            "lbmr.topt.ume.flags.acktosrc": [1],
            "lbmr.topt.ume.store_tcp_port": [15000],
            "lbmr.topt.ume.src_tcp_port": [14371],
            "lbmr.topt.ume.store_tcp_addr": ["10.0.0.2"],
            "lbmr.topt.ume.src_tcp_addr": ["10.0.0.1"],
            "lbmr.topt.ume.src_reg_id": [77],
            "lbmr.topt.ume.transport_idx": [5],
            "lbmr.topt.ume.high_seqnum": [1000],
            "lbmr.topt.ume.low_seqnum": [10],
        },
    ),
    option_case(
        "ume_store",
        UmeStoreOption("10.0.0.2", 15000, 3, 1, 77),
        {
            "lbmr.topt.ume_store.store_ip_addr": ["10.0.0.2"],
            "lbmr.topt.ume_store.store_tcp_port": [15000],
            "lbmr.topt.ume_store.store_idx": [3],
            "lbmr.topt.ume_store.grp_idx": [1],
            "lbmr.topt.ume_store.src_reg_id": [77],
        },
    ),
    option_case(
        "ume_store_group",
        UmeStoreGroupOption(2, 3),
        {"lbmr.topt.ume_store_group.grp_idx": [2], "lbmr.topt.ume_store_group.grp_sz": [3]},
    ),
    option_case(
        "late_join",
        LateJoinOption("10.0.0.1", 14371, 100, 1, 2, LateJoinFlags.ACK_TO_SOURCE),
        {
            "lbmr.topt.latejoin.src_ip_addr": ["10.0.0.1"],
            "lbmr.topt.latejoin.src_tcp_port": [14371],
            "lbmr.topt.latejoin.high_seqnum": [100],
            "lbmr.topt.latejoin.low_seqnum": [1],
            "lbmr.topt.latejoin.transport_idx": [2],
            "lbmr.topt.latejoin.flags.acktosrc": [1],
        },
    ),
    option_case("umq_rcr_index", UmqRcrIndexOption(0x33), {"lbmr.topt.umq_rcridx.rcr_idx": [0x33]}),
    option_case(
        "umq_queue_info",
        UmqQueueInfoOption("Queue-1", QueueInfoFlags.QUEUE | QueueInfoFlags.RECEIVER_LISTEN),
        {
            "lbmr.topt.ume_qinfo.queue": ["Queue-1"],
            "lbmr.topt.umq_qinfo.flags.queue": [1],
            "lbmr.topt.umq_qinfo.flags.rcvlisten": [1],
            "lbmr.topt.umq_qinfo.flags.control": [0],
        },
    ),
    option_case("cost", CostOption(-5, 2), {"lbmr.topt.cost.cost": [-5], "lbmr.topt.cost.hop_count": [2]}),
    option_case(
        "otid", OtidOption(bytes(range(32))), {"lbmr.topt.otid.originating_transport": [bytes(range(32))]}
    ),
    option_case("context_instance", ContextInstanceOption(CTX), {"lbmr.topt.ctxinst.ctxinst": [CTX]}),
    option_case(
        "store_context_instance",
        StoreContextInstanceOption(CTX2, 2),
        {"lbmr.topt.ctxinsts.idx": [2], "lbmr.topt.ctxinsts.ctxinsts": [CTX2]},
    ),
    option_case(
        "ulb",
        UlbOption(11, 0x0001020304050607, 4, "10.0.0.3", 14373),
        {
            "lbmr.topt.ulb.queue_id": [11],
            "lbmr.topt.ulb.regid": [0x0001020304050607],
            "lbmr.topt.ulb.ulb_src_id": [4],
            "lbmr.topt.ulb.src_ip_addr": ["10.0.0.3"],
            "lbmr.topt.ulb.src_tcp_port": [14373],
        },
    ),
    option_case(
        "queue_context_instance",
        QueueContextInstanceOption(CTX, 3),
        {"lbmr.topt.ctxinstq.idx": [3], "lbmr.topt.ctxinstq.ctxinstq": [CTX]},
    ),
    option_case("domain_id", DomainIdOption(0xABCDEF), {"lbmr.topt.domain_id.domain_id": [0xABCDEF]}),
    option_case(
        "extended_functionality",
        ExtendedFunctionalityOption("10.0.0.1", 14371, Functionality.LATE_JOIN | Functionality.UMQ),
        {
            "lbmr.topt.exfunc.src_tcp_port": [14371],
            "lbmr.topt.exfunc.src_ip_addr": ["10.0.0.1"],
            "lbmr.topt.exfunc.functionality_flags.lj": [1],
            "lbmr.topt.exfunc.functionality_flags.ume": [0],
            "lbmr.topt.exfunc.functionality_flags.umq": [1],
            "lbmr.topt.exfunc.functionality_flags.ulb": [0],
        },
    ),
    tir_case(
        "topic_options_all_kinds",
        LbtrmTransport("10.0.0.1", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
        {
            "lbmr.topt.len.total_len": [4 + sum(len(o._pack()) for o in ALL_TOPIC_OPTIONS)],
            "lbmr.topt.ume.flags.latejoin": [1],
            "lbmr.topt.ume_store.src_reg_id": [77],
            "lbmr.topt.ume_store_group.grp_sz": [1],
            "lbmr.topt.latejoin.high_seqnum": [100],
            "lbmr.topt.umq_rcridx.rcr_idx": [3],
            "lbmr.topt.ume_qinfo.queue": ["Q1"],
            "lbmr.topt.cost.cost": [-5],
            "lbmr.topt.otid.originating_transport": [bytes(range(32))],
            "lbmr.topt.ctxinst.ctxinst": [CTX],
            "lbmr.topt.ctxinsts.ctxinsts": [CTX2],
            "lbmr.topt.ulb.queue_id": [11],
            "lbmr.topt.ctxinstq.idx": [2],
            "lbmr.topt.domain_id.domain_id": [5],
            "lbmr.topt.exfunc.functionality_flags.ume": [1],
            "lbmr.tir.lbtrm.sessid": [0xCAFEBABE],
        },
        ALL_TOPIC_OPTIONS,
    ),
]

# ------------------------------------------------------------------- keepalives, TMB, packet options

OTHER_CASES = [
    body_case(
        "resolver_keepalive",
        ResolverKeepalive(),
        {"lbmr.hdr.type": [0], "lbmr.hdr.tqrs": [0], "lbmr.hdr.tirs": [0]},
        info="Unicast Resolver Keepalive",
    ),
    body_case("receiver_alive", ReceiverAlive(), {"lbmr.hdr.type": [2]}, info="Receiver Alive"),
    body_case("source_alive", SourceAlive(), {"lbmr.hdr.type": [3]}, info="Source Alive"),
    body_case(
        "topic_management",
        TopicManagement(
            (
                TopicManagementRecord("Orders", TMR_USE),
                TopicManagementRecord("Quotes", TMR_LEAVE),
                TopicManagementRecord(
                    "^Mkt.*", TMR_USE, TopicManagementFlags.RESPONSE | TopicManagementFlags.WILDCARD_PCRE
                ),
            )
        ),
        {
            "lbmr.hdr.type": [4],
            "lbmr.tmb.len": [4 + 11 + 11 + 11],
            "lbmr.tmb.tmrs": [3],
            "lbmr.tmb.tmr.len": [11, 11, 11],
            "lbmr.tmb.tmr.name": ["Orders", "Quotes", "^Mkt.*"],
            "lbmr.tmb.tmr.type": [1, 0, 1],
            "lbmr.tmb.tmr.flags.response": [0, 0, 1],
            "lbmr.tmb.tmr.flags.wildcard_pcre": [0, 0, 1],
            "lbmr.tmb.tmr.flags.wildcard_regex": [0, 0, 0],
        },
        info="Topic Management",
    ),
    packet_option_case("source_id", (SourceIdOption(CTX),), {"lbmr.opt.src_id.src_id": [CTX]}),
    packet_option_case(
        "source_type",
        (SourceTypeOption(SOURCE_TYPE_STORE),),
        {"lbmr.opt.src_type.src_type": [SOURCE_TYPE_STORE]},
    ),
    packet_option_case(
        "version",
        (VersionOption(0x06000000, VersionFlags.UME | VersionFlags.UMQ),),
        {
            "lbmr.opt.version.version": [0x06000000],
            "lbmr.opt.version.flags.ume": [1],
            "lbmr.opt.version.flags.umq": [1],
        },
    ),
    packet_option_case(
        "local_domain", (LocalDomainOption(7),), {"lbmr.opt.local_domain.local_domain_id": [7]}
    ),
    packet_option_case(
        "all_kinds",
        (
            SourceIdOption(CTX2),
            VersionOption(0x06000000, VersionFlags.UME),
            LocalDomainOption(9),
            SourceTypeOption(SOURCE_TYPE_GATEWAY),
        ),
        {
            "lbmr.opt.src_id.src_id": [CTX2],
            "lbmr.opt.version.version": [0x06000000],
            "lbmr.opt.local_domain.local_domain_id": [9],
            "lbmr.opt.src_type.src_type": [SOURCE_TYPE_GATEWAY],
        },
    ),
    Case(
        "packet_options_after_tirs",
        LbmrPacket(
            TopicResolution(infos=(TopicInfo("Orders", 7, TcpTransport("10.0.0.1", 14371, SID)),)),
            (SourceIdOption(CTX),),
        ),
        {"lbmr.tir.name": ["Orders"], "lbmr.tir.tcp.session_id": [SID], "lbmr.opt.src_id.src_id": [CTX]},
        info="TQRs 0 TIRs 1",
    ),
]

# ------------------------------------------------------------------------------ UMQ (W1 §8)

QUEUE_CASES = [
    body_case(
        "queue_resolution",
        QueueResolution(
            (QueueQuery("Q1"), QueueQuery("Q2")),
            (
                QueueInfo(
                    "Q1",
                    "Orders",
                    11,
                    2,
                    1,
                    (QueueGroup(0, 2), QueueGroup(1, 1)),
                    (QueueInstance("10.0.0.7", 15001, 0, 0), QueueInstance("10.0.0.8", 15002, 1, 1)),
                ),
            ),
        ),
        {
            "lbmr.hdr.type": [6],
            "lbmr.hdr.qqrs": [2],
            "lbmr.hdr.qirs": [1],
            "lbmr.qqr.name": ["Q1", "Q2"],
            "lbmr.qir.qname": ["Q1"],
            "lbmr.qir.tname": ["Orders"],
            "lbmr.qir.queue_id": [11],
            "lbmr.qir.queue_ver": [2],
            "lbmr.qir.queue_prev_ver": [1],
            "lbmr.qir.grp_blks": [2],
            "lbmr.qir.queue_blks": [2],
            "lbmr.qir.grp.grp_idx": [0, 1],
            "lbmr.qir.grp.grp_sz": [2, 1],
            "lbmr.qir.queue.ip": ["10.0.0.7", "10.0.0.8"],
            "lbmr.qir.queue.port": [15001, 15002],
            "lbmr.qir.queue.idx": [0, 1],
            "lbmr.qir.queue.grp_idx": [0, 1],
        },
        info="QQRs 2 QIRs 1",
    ),
    body_case(
        "queue_info_with_options",
        QueueResolution(
            infos=(
                QueueInfo(
                    "Q9", "T", 9, options=(DomainIdOption(9),), instances=(QueueInstance("10.0.0.9", 1),)
                ),
            )
        ),
        {
            "lbmr.qir.qname": ["Q9"],
            "lbmr.qir.opts": [1],
            "lbmr.topt.domain_id.domain_id": [9],
            "lbmr.qir.queue.ip": ["10.0.0.9"],
        },
        info="QQRs 0 QIRs 1",
    ),
]

# ------------------------------------------------------------------------------ extended types (W1 §9)

QMGMT_COMMON = {"queue_version": 2, "ip": "10.0.0.7", "port": 15001, "instance_index": 1, "group_index": 2}
QMGMT_HEADER = {
    "lbmr.hdr.type": [7],
    "lbmr.hdr.ext_type": [2],
    "lbmr.qmgmt.queue_id": [11],
    "lbmr.qmgmt.queue_ver": [2],
    "lbmr.qmgmt.ip": ["10.0.0.7"],
    "lbmr.qmgmt.port": [15001],
    "lbmr.qmgmt.inst_idx": [1],
    "lbmr.qmgmt.grp_idx": [2],
}


def qmgmt_case(case_id: str, body: QueueManagement, expected: dict[str, list[Any]]) -> Case:
    return body_case(
        f"queue_management_{case_id}",
        body,
        {**QMGMT_HEADER, "lbmr.qmgmt.pckt_type": [body.packet_type], **expected},
        info="ExtType Queue Management",
    )


EXT_CASES = [
    body_case(
        "pser",
        ProxySourceElection("Orders", 7, "10.0.0.1", 14371, "10.0.0.2", 15000, 1, PSER_REELECTION),
        {
            "lbmr.hdr.ext_type": [1],
            "lbmr.pser.dep_type": [1],
            "lbmr.pser.len": [35],
            "lbmr.pser.flags.option": [0],
            "lbmr.pser.source_ip": ["10.0.0.1"],
            "lbmr.pser.store_ip": ["10.0.0.2"],
            "lbmr.pser.transport_idx": [1],
            "lbmr.pser.topic_idx": [7],
            "lbmr.pser.source_port": [14371],
            "lbmr.pser.store_port": [15000],
            "lbmr.pser.topic": ["Orders"],
        },
    ),
    body_case(
        "pser_with_options",
        ProxySourceElection(
            "Orders",
            7,
            "10.0.0.1",
            14371,
            "10.0.0.2",
            15000,
            options=(PserOption(0, CTX), PserOption(1, CTX2)),
        ),
        {
            "lbmr.pser.flags.option": [1],
            "lbmr.pser.topic": ["Orders"],
            "lbmr.pser.opt.optlen.optlen": [24],
            "lbmr.pser.opt.ctxinst.len": [10, 10],
            "lbmr.pser.opt.ctxinst.type": [0, 1],
            "lbmr.pser.opt.ctxinst.ctxinst": [CTX, CTX2],
        },
    ),
    qmgmt_case(
        "il",
        QueueManagement(
            QMGMT_IL,
            11,
            flags=QueueManagementFlags.NEW_INSTANCE_LIST | QueueManagementFlags.KEEPALIVE_REQUESTED,
            highest_rcr_tsp=99,
            instances=(
                QueueManagementInstance("10.0.0.7", 15001, 0, 0, 0x8000),
                QueueManagementInstance("10.0.0.8", 15002, 1, 0, 0x4000),
            ),
            **QMGMT_COMMON,
        ),
        {
            "lbmr.qmgmt.flags.il_l_flag": [1],
            "lbmr.qmgmt.flags.il_k_flag": [1],
            "lbmr.qmgmt.flags.n_flag": [0],
            "lbmr.qmgmt.il_num_insts": [2],
            "lbmr.qmgmt.il.highest_rcr_tsp": [99],
            "lbmr.qmgmt.il_inst.ip": ["10.0.0.7", "10.0.0.8"],
            "lbmr.qmgmt.il_inst.port": [15001, 15002],
            "lbmr.qmgmt.il_inst.inst_idx": [0, 1],
            "lbmr.qmgmt.il_inst.flags.m_flag": [1, 0],
            "lbmr.qmgmt.il_inst.flags.q_flag": [0, 1],
        },
    ),
    qmgmt_case(
        "jr",
        QueueManagement(QMGMT_JR, 11, config_signature=bytes(range(20)), **QMGMT_COMMON),
        {"lbmr.qmgmt.cfg_sig": [bytes(range(20))]},
    ),
    qmgmt_case(
        "jrej", QueueManagement(QMGMT_JREJ, 11, value=17, **QMGMT_COMMON), {"lbmr.qmgmt.jrej_code": [17]}
    ),
    qmgmt_case(
        "ika_named",
        QueueManagement(
            QMGMT_IKA, 11, flags=QueueManagementFlags.IGNORE, queue_name="Queue-1", **QMGMT_COMMON
        ),
        {"lbmr.qmgmt.flags.i_flag": [1], "lbmr.qmgmt.flags.n_flag": [1], "lbmr.qmgmt.qname": ["Queue-1"]},
    ),
    qmgmt_case(
        "ec",
        QueueManagement(QMGMT_EC, 11, new_version=3, **QMGMT_COMMON),
        {"lbmr.qmgmt.ec.queue_new_ver": [3]},
    ),
    qmgmt_case(
        "ev",
        QueueManagement(QMGMT_EV, 11, value=5, highest_rcr_tsp=44, age=1234, **QMGMT_COMMON),
        {"lbmr.qmgmt.ev_bias": [5], "lbmr.qmgmt.ev.highest_rcr_tsp": [44], "lbmr.qmgmt.ev.age": [1234]},
    ),
    qmgmt_case(
        "cnil",
        QueueManagement(QMGMT_CNIL, 11, value=0x1234, **QMGMT_COMMON),
        {"lbmr.qmgmt.pckt_type_dep16": [0x1234]},
    ),
    qmgmt_case(
        "qro",
        QueueManagement(QMGMT_QRO, 11, highest_rcr_tsp=77, **QMGMT_COMMON),
        {"lbmr.qmgmt.qro.highest_rcr_tsp": [77]},
    ),
    body_case(
        "context_info_query",
        ContextInfo(ContextInfoFlags.QUERY, name="ctxA"),
        {
            "lbmr.hdr.ext_type": [3],
            "lbmr.ctxinfo.len": [25],
            "lbmr.ctxinfo.flags.query": [1],
            "lbmr.ctxinfo.flags.name": [1],
            "lbmr.ctxinfo.name": ["ctxA"],
        },
        info="ExtType Context Information",
    ),
    body_case(
        "context_info_response",
        ContextInfo(
            ContextInfoFlags.IP
            | ContextInfoFlags.INSTANCE
            | ContextInfoFlags.GATEWAY_SOURCE
            | ContextInfoFlags.PROXY,
            14371,
            "10.0.0.1",
            CTX,
            "ctx-B",
            2,
        ),
        {
            "lbmr.ctxinfo.len": [26],
            "lbmr.ctxinfo.hop_count": [2],
            "lbmr.ctxinfo.flags.query": [0],
            "lbmr.ctxinfo.flags.ip": [1],
            "lbmr.ctxinfo.flags.instance": [1],
            "lbmr.ctxinfo.flags.tnwg_src": [1],
            "lbmr.ctxinfo.flags.tnwg_rcv": [0],
            "lbmr.ctxinfo.flags.proxy": [1],
            "lbmr.ctxinfo.port": [14371],
            "lbmr.ctxinfo.ip": ["10.0.0.1"],
            "lbmr.ctxinfo.instance": [CTX],
            "lbmr.ctxinfo.name": ["ctx-B"],
        },
    ),
    body_case(
        "context_info_without_name",
        ContextInfo(ContextInfoFlags.IP, 14371, "10.0.0.1"),
        {"lbmr.ctxinfo.len": [20], "lbmr.ctxinfo.flags.name": [0], "lbmr.ctxinfo.name": []},
    ),
    body_case(
        "topic_resolution_request",
        TopicResolutionRequest(
            ResolutionRequestFlags.ADVERTISEMENT
            | ResolutionRequestFlags.QUERY
            | ResolutionRequestFlags.WILDCARD_QUERY
            | ResolutionRequestFlags.CONTEXT_QUERY
        ),
        {
            "lbmr.hdr.ext_type": [4],
            "lbmr.topic_res_request.flags.advertisement": [1],
            "lbmr.topic_res_request.flags.query": [1],
            "lbmr.topic_res_request.flags.wildcard_query": [1],
            "lbmr.topic_res_request.flags.context_query": [1],
            "lbmr.topic_res_request.flags.context_advertisement": [0],
            "lbmr.topic_res_request.flags.gateway_meta": [0],
            "lbmr.topic_res_request.flags.gw_remote_interest": [0],
        },
        info="ExtType Topic Resolution Request",
    ),
    body_case(
        "gateway_interest",
        GatewayInterest(
            (
                InterestRecord("Orders", 1),
                InterestRecord("^Ord", 1, InterestFlags.PATTERN, PATTERN_PCRE),
                InterestRecord("Old", 2, InterestFlags.CANCEL | InterestFlags.REFRESH),
            )
        ),
        {
            "lbmr.hdr.ext_type": [5],
            "lbmr.tnwg.type": [0],
            "lbmr.tnwg.len": [8 + 4 + 15 + 13 + 12],
            "lbmr.tnwg.interest.len": [4 + 15 + 13 + 12],
            "lbmr.tnwg.interest.count": [3],
            "lbmr.tnwg.interest_rec.len": [15, 13, 12],
            "lbmr.tnwg.interest_rec.symbol": ["Orders", "^Ord", "Old"],
            "lbmr.tnwg.interest_rec.domain_id": [1, 1, 2],
            "lbmr.tnwg.interest_rec.pattype": [0, 1, 0],
            "lbmr.tnwg.interest_rec.flags.pattern": [0, 1, 0],
            "lbmr.tnwg.interest_rec.flags.cancel": [0, 0, 1],
            "lbmr.tnwg.interest_rec.flags.refresh": [0, 0, 1],
        },
        info="ExtType Gateway Message",
    ),
    body_case(
        "gateway_context_info_name_option",
        GatewayContextInfo(
            GatewayContextFlags.QUERY | GatewayContextFlags.PROXY, 0x5, 3, (GatewayNameOption("gw-1"),)
        ),
        {
            "lbmr.tnwg.type": [1],
            "lbmr.tnwg.ctxinfo.len": [12 + 9],
            "lbmr.tnwg.ctxinfo.hop_count": [3],
            "lbmr.tnwg.ctxinfo.flags1.query": [1],
            "lbmr.tnwg.ctxinfo.flags1.tnwg_src": [0],
            "lbmr.tnwg.ctxinfo.flags1.proxy": [1],
            "lbmr.tnwg.ctxinfo.flags2": [5],
            "lbmr.tnwg.opt_name.name": ["gw-1"],
        },
    ),
    body_case(
        "gateway_context_info_instance_option",
        GatewayContextInfo(GatewayContextFlags.GATEWAY_SOURCE, options=(GatewayContextInstanceOption(CTX),)),
        {
            "lbmr.tnwg.ctxinfo.flags1.tnwg_src": [1],
            "lbmr.tnwg.ctxinfo.flags1.tnwg_rcv": [0],
            "lbmr.tnwg.opt_ctxinst.instance": [CTX],
        },
    ),
    body_case(
        "gateway_context_info_two_options",
        GatewayContextInfo(options=(GatewayNameOption("gw"), GatewayDomainOption(3))),
        {
            "lbmr.tnwg.ctxinfo.len": [12 + 7 + 8],
            "lbmr.tnwg.opt_name.name": ["gw"],
            "lbmr.tnwg.opt_domain.domain_id": [3],
        },
    ),
    body_case(
        "gateway_tr_request_address_option",
        GatewayTopicResolutionRequest((GatewayAddressOption("10.0.0.4", 14390),)),
        {
            "lbmr.tnwg.type": [2],
            "lbmr.tnwg.trreq.len": [2 + 12],
            "lbmr.tnwg.opt_address.ip": ["10.0.0.4"],
            "lbmr.tnwg.opt_address.port": [14390],
        },
    ),
    body_case(
        "gateway_tr_request_domain_option",
        GatewayTopicResolutionRequest((GatewayDomainOption(42),)),
        {"lbmr.tnwg.trreq.len": [2 + 8], "lbmr.tnwg.opt_domain.domain_id": [42]},
    ),
    body_case(
        "remote_domain_route",
        RemoteDomainRoute("10.0.0.5", 15000, (1, 2, 300)),
        {
            "lbmr.hdr.ext_type": [6],
            "lbmr.remote_domain_route.num_domains": [3],
            "lbmr.remote_domain_route.ip": ["10.0.0.5"],
            "lbmr.remote_domain_route.port": [15000],
            "lbmr.remote_domain_route.length": [16 + 12],
            "lbmr.remote_domain_route.domain": [1, 2, 300],
        },
        info="ExtType Remote Domain Route",
    ),
    body_case(
        "remote_context_info",
        RemoteContextInfo(
            (
                RemoteContextRecord((RemoteNameOption("wanted"),), query=True),
                RemoteContextRecord(
                    (
                        RemoteAddressOption(1, "10.0.0.5", 14371),
                        RemoteInstanceOption(CTX),
                        RemoteDomainOption(2),
                        RemoteNameOption("ctxA"),
                    )
                ),
            )
        ),
        {
            "lbmr.hdr.ext_type": [7],
            "lbmr.rctxinfo.num_recs": [2],
            "lbmr.rctxinfo.len": [8 + 15 + 49],
            "lbmr.rctxinfo.rec.len": [15, 49],
            "lbmr.rctxinfo.rec.flags.query": [1, 0],
            "lbmr.rctxinfo.rec.address.domain_id": [1],
            "lbmr.rctxinfo.rec.address.ip": ["10.0.0.5"],
            "lbmr.rctxinfo.rec.address.port": [14371],
            "lbmr.rctxinfo.rec.instance.instance": [CTX],
            "lbmr.rctxinfo.rec.odomain.domain_id": [2],
            "lbmr.rctxinfo.rec.name.name": ["wanted", "ctxA"],
        },
        info="ExtType Remote Context Information",
    ),
]

# ------------------------------------------------------------------------------ unicast resolver (lbmrd)

UNICAST_CASES = [
    body_case(
        "lbmrd_tqr_14402_to_15380",
        TopicResolution((TopicQuery("Orders"),)),
        {"lbmr.tqr.name": ["Orders"]},
        info="TQRs 1 TIRs 0",
        addr=LBMRD_IN,
    ),
    body_case(
        "lbmrd_source_alive_14402_to_15380",
        SourceAlive(),
        {"lbmr.hdr.type": [3]},
        info="Source Alive",
        addr=LBMRD_IN,
    ),
    body_case(
        "lbmrd_tir_15380_to_14402",
        TopicResolution(infos=(TopicInfo("Orders", 7, TcpTransport("10.0.0.1", 14371, SID)),)),
        {"lbmr.tir.name": ["Orders"], "lbmr.tir.tcp.session_id": [SID]},
        addr=LBMRD_OUT,
    ),
    body_case(
        "lbmrd_keepalive_15380_to_14402",
        ResolverKeepalive(),
        {"lbmr.hdr.tqrs": [0]},
        info="Unicast Resolver Keepalive",
        addr=LBMRD_OUT,
    ),
]

CLEAN_CASES = TOPIC_CASES + OPTION_CASES + OTHER_CASES + QUEUE_CASES + EXT_CASES + UNICAST_CASES

# ------------------------------------------------------------------------------ documented warnings

WARNED_CASES = [
    option_case(
        "unknown_skipped_by_length",
        UnknownOption(0x7E, 0x8000, b"\x00\x01\x02\x03"),
        {"lbmr.topt.unknown.data": [b"\x00\x01\x02\x03"]},
        allowed=(r"Unknown option 0x7e",),
    ),
    Case(
        "topic_option_unknown_between_known",
        LbmrPacket(
            TopicResolution(
                infos=(
                    TopicInfo(
                        "Orders",
                        7,
                        TcpTransport("10.0.0.1", 14371, SID),
                        options=(
                            DomainIdOption(5),
                            UnknownOption(0x70, 0, b"zz"),
                            ContextInstanceOption(CTX),
                        ),
                    ),
                    TopicInfo("Next", 8, TcpTransport("10.0.0.1", 14371, SID)),
                )
            )
        ),
        {
            "lbmr.topt.domain_id.domain_id": [5],
            "lbmr.topt.ctxinst.ctxinst": [CTX],
            "lbmr.tir.name": ["Orders", "Next"],
            "lbmr.tir.tcp.port": [14371, 14371],
        },
        allowed=(r"Unknown option 0x70",),
    ),
    Case(
        "packet_option_unknown",
        LbmrPacket(ResolverKeepalive(), (UnknownOption(0x90, 0x8000, b"abcd"), SourceIdOption(CTX))),
        {
            "lbmr.opt.unknown.type": [0x90],
            "lbmr.opt.unknown.data": [b"abcd"],
            "lbmr.opt.src_id.src_id": [CTX],
        },
        allowed=(r"Unknown LBMR option type 0x90",),
    ),
    Case(
        "tir_unknown_transport_skipped_by_tlen",
        LbmrPacket(
            TopicResolution(
                infos=(
                    TopicInfo("Six", 1, UnknownTransport(0x02, bytes(range(18)))),
                    TopicInfo("Next", 2, TcpTransport("10.0.0.1", 14371, SID)),
                )
            )
        ),
        {
            "lbmr.tir.name": ["Six", "Next"],
            "lbmr.tir.transport_type": [0x02, 0x00],
            "lbmr.tir.tcp.port": [14371],
        },
        allowed=(r"Unknown LBMR TIR transport 0x02",),
    ),
]

# ------------------------------------------------------------------------------ helpers

BASE_FIELDS = (
    "frame.number",
    "frame.protocols",
    "_ws.malformed",
    "_ws.expert.severity",
    "_ws.expert.message",
    "_ws.col.Info",
)


def normalise(values: Sequence[str], want: Sequence[Any]) -> list[Any]:
    """tshark's text for a field, read back as the type of the expected value."""
    out: list[Any] = []
    for text, expected in zip(values, want, strict=False):
        if isinstance(expected, int):  # decimal, hex (0x...) and booleans (1/0) alike
            out.append(int(text, 0))
        elif isinstance(expected, bytes):
            out.append(bytes.fromhex(text.replace(":", "")))
        else:
            out.append(text)
    return out


def check_frame(row: dict[str, list[str]], case: Case) -> None:
    assert row.get("frame.protocols", [""])[0].endswith(":lbmr"), row.get("frame.protocols")
    assert not row.get("_ws.malformed"), "tshark marked the frame malformed"
    allowed = [re.compile(p) for p in case.allowed]
    problems = [
        msg
        for sev, msg in zip(
            row.get("_ws.expert.severity", []), row.get("_ws.expert.message", []), strict=False
        )
        if int(sev, 0) >= SEVERITY_WARNING and not any(p.search(msg) for p in allowed)
    ]
    assert not problems, problems
    for name, want in case.expected.items():
        got = row.get(name, [])
        assert len(got) == len(want), f"{name}: tshark {got!r}, encoded {want!r}"
        assert normalise(got, want) == want, f"{name}: tshark {got!r}, encoded {want!r}"
    if case.info is not None:
        assert row.get("_ws.col.Info") == [case.info]


@dataclass
class Decoded:
    pcap: Path
    rows: dict[str, dict[str, list[str]]]


def decode_cases(tshark: Tshark, path: Path, cases: Sequence[Case]) -> Decoded:
    frames = [udp_frame(c.payload, ident=i + 1, **c.addr) for i, c in enumerate(cases)]
    pcap = write_pcap(path, frames)
    names = sorted({*BASE_FIELDS, *(name for c in cases for name in c.expected)})
    rows = tshark.fields(pcap, names)
    assert len(rows) == len(cases)
    return Decoded(pcap, {c.id: row for c, row in zip(cases, rows, strict=True)})


@pytest.fixture(scope="module")
def clean_capture(tshark_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Decoded:
    return decode_cases(Tshark(), tmp_path_factory.mktemp("lbmr") / "lbmr_clean.pcap", CLEAN_CASES)


@pytest.fixture(scope="module")
def warned_capture(tshark_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Decoded:
    return decode_cases(Tshark(), tmp_path_factory.mktemp("lbmr") / "lbmr_warned.pcap", WARNED_CASES)


# ------------------------------------------------------------------------------ tests


def test_cases_have_unique_ids_and_cover_many_kinds() -> None:
    ids = [c.id for c in CLEAN_CASES + WARNED_CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 20


@pytest.mark.parametrize("case", CLEAN_CASES, ids=lambda c: c.id)
def test_tshark_decodes_openum_lbmr(case: Case, clean_capture: Decoded) -> None:
    # openum itself reads back what it wrote, then tshark must agree field by field
    assert decode_packet(case.payload) == case.packet
    check_frame(clean_capture.rows[case.id], case)


@pytest.mark.parametrize("case", WARNED_CASES, ids=lambda c: c.id)
def test_tshark_skips_unknown_items_like_openum(case: Case, warned_capture: Decoded) -> None:
    assert decode_packet(case.payload) == case.packet
    check_frame(warned_capture.rows[case.id], case)


def test_whole_clean_capture_is_clean(clean_capture: Decoded, tshark: Tshark) -> None:
    tshark.assert_clean(clean_capture.pcap)


def test_whole_warned_capture_has_only_the_documented_warnings(
    warned_capture: Decoded, tshark: Tshark
) -> None:
    allowed = [p for c in WARNED_CASES for p in c.allowed]
    tshark.assert_clean(warned_capture.pcap, allowed_expert=allowed)
    # and the warnings really are there: tshark does not know these items
    seen = [m for row in warned_capture.rows.values() for m in row.get("_ws.expert.message", [])]
    assert len(seen) >= len(WARNED_CASES)


def test_pack_records_datagrams_decode_cleanly(tshark: Tshark, pcap_dir: Path) -> None:
    infos = [
        TopicInfo(f"Market/US/{i:03d}", i, TcpTransport("10.0.0.1", 14371, SID), options=(DomainIdOption(i),))
        for i in range(120)
    ]
    queries = [TopicQuery(f"Want/{i}") for i in range(300)] + [WildcardQuery("^Market/.*")]
    datagrams = pack_records(queries, infos, 1400, options=(SourceIdOption(CTX),))
    assert all(len(d) <= 1400 for d in datagrams)
    pcap = write_pcap(
        pcap_dir / "packed.pcap", [udp_frame(d, ident=i + 1, **MULTICAST) for i, d in enumerate(datagrams)]
    )
    rows = tshark.assert_clean(
        pcap,
        fields=[
            "lbmr.hdr.tqrs",
            "lbmr.tqr.name",
            "lbmr.tqr.pattern",
            "lbmr.tir.name",
            "lbmr.topt.domain_id.domain_id",
            "lbmr.opt.src_id.src_id",
        ],
    )
    assert len(rows) == len(datagrams)
    assert all(int(r["lbmr.hdr.tqrs"][0]) <= 255 for r in rows)
    assert [n for r in rows for n in r.get("lbmr.tqr.name", [])] == [q.topic for q in queries[:-1]]
    assert [p for r in rows for p in r.get("lbmr.tqr.pattern", [])] == ["\x01^Market/.*"]
    assert [n for r in rows for n in r.get("lbmr.tir.name", [])] == [t.topic for t in infos]
    assert [int(d) for r in rows for d in r.get("lbmr.topt.domain_id.domain_id", [])] == list(range(120))
    assert all(r["lbmr.opt.src_id.src_id"] == [CTX.hex()] for r in rows)


# ------------------------------------------------------------------------------ W1 §14 verified datagrams


@dataclass(frozen=True)
class Verified:
    """A W1 §14 datagram: what openum must decode from it and the fields the spec checked with tshark."""

    id: str
    hex: str
    check: Callable[[LbmrPacket], object]
    want: object
    tshark: dict[str, list[Any]]
    addr: dict[str, Any] = field(default_factory=lambda: MULTICAST)

    @property
    def raw(self) -> bytes:
        return bytes.fromhex(self.hex.replace(" ", ""))


def _b(p: LbmrPacket) -> Any:
    return p.body


SPEC_14 = [
    Verified(
        "01_tqr",
        "00 01 0000 4f7264657273 00",
        lambda p: _b(p).queries,
        (TopicQuery("Orders"),),
        {"lbmr.hdr.type": [0], "lbmr.hdr.tqrs": [1], "lbmr.hdr.tirs": [0], "lbmr.tqr.name": ["Orders"]},
    ),
    Verified(
        "02_tir_tcp",
        "00 00 0001 4f726465727300 00 0a 0000 00000007 7f000001 1234abcd 3823",
        lambda p: _b(p).infos,
        (TopicInfo("Orders", 7, TcpTransport("127.0.0.1", 14371, 0x1234ABCD)),),
        {
            "lbmr.tir.name": ["Orders"],
            "lbmr.tir.transport_type": [0],
            "lbmr.tir.tlen": [10],
            "lbmr.tir.ttl": [0],
            "lbmr.tir.index": [7],
            "lbmr.tir.tcp.ip": ["127.0.0.1"],
            "lbmr.tir.tcp.session_id": [0x1234ABCD],
            "lbmr.tir.tcp.port": [14371],
        },
    ),
    Verified(
        "03_tir_lbtrm",
        "00 00 0001 4f726465727300 10 10 0000 00000003 0a000001 e00a0a0a cafebabe 3840 3836",
        lambda p: _b(p).infos[0].transport,
        LbtrmTransport("10.0.0.1", "224.10.10.10", 0xCAFEBABE, 14400, 14390),
        {
            "lbmr.tir.transport_type": [0x10],
            "lbmr.tir.tlen": [16],
            "lbmr.tir.index": [3],
            "lbmr.tir.lbtrm.srcip": ["10.0.0.1"],
            "lbmr.tir.lbtrm.mcastip": ["224.10.10.10"],
            "lbmr.tir.lbtrm.sessid": [0xCAFEBABE],
            "lbmr.tir.lbtrm.dport": [14400],
            "lbmr.tir.lbtrm.sport": [14390],
        },
    ),
    Verified(
        "04_wildcard_pcre",
        "01 01 0000 01 5e4f72642e2a 00",
        lambda p: _b(p).queries,
        (WildcardQuery("^Ord.*", PATTERN_PCRE),),
        {"lbmr.hdr.type": [1], "lbmr.tqr.pattern_type": [1], "lbmr.tqr.pattern": ["\x01^Ord.*"]},
    ),
    Verified(
        "05_tir_lbtru",
        "0000000151756f74657300010a0000000000090a00000101020304382c",
        lambda p: _b(p).infos[0].transport,
        LbtruTransport("10.0.0.1", 14380, 16909060),
        {
            "lbmr.tir.transport_type": [1],
            "lbmr.tir.tlen": [10],
            "lbmr.tir.lbtru.ip": ["10.0.0.1"],
            "lbmr.tir.lbtru.port": [14380],
            "lbmr.tir.lbtru.session_id": [16909060],
        },
    ),
    Verified(
        "06_tir_lbtipc",
        "00000001497063546f70696300400a0000000000010a000001556677880001",
        lambda p: _b(p).infos[0].transport,
        LbtipcTransport(0x0A000001, 0x55667788, 1),
        {
            "lbmr.tir.transport_type": [0x40],
            "lbmr.tir.lbtipc.host_id": [0x0A000001],
            "lbmr.tir.lbtipc.session_id": [0x55667788],
            "lbmr.tir.lbtipc.xport_id": [1],
        },
    ),
    Verified(
        "07_tir_lbtsmx",
        "00000001536d78546f70696300040a0000000000020a00000199aabbcc0002",
        lambda p: _b(p).infos[0].transport,
        LbtsmxTransport(0x0A000001, 0x99AABBCC, 2),
        {
            "lbmr.tir.transport_type": [0x04],
            "lbmr.tir.lbtsmx.session_id": [0x99AABBCC],
            "lbmr.tir.lbtsmx.xport_id": [2],
        },
    ),
    Verified(
        "08_tir_options",
        "000000014f726465727300800a000000000007 00040060"
        "01204000 00003823 00000000 7f000001 00000000 00000000 00000000 00000000"
        "04180000 38230000 7f000001 00000000 00000064 00000001"
        "090c0000 0102030405060708 0d080000 00000005 0e100000 38230000 7f000001 00000001"
        "7f0000011234abcd3823",
        lambda p: [type(o).__name__ for o in _b(p).infos[0].options],
        [
            "UmeOption",
            "LateJoinOption",
            "ContextInstanceOption",
            "DomainIdOption",
            "ExtendedFunctionalityOption",
        ],
        {
            "lbmr.tir.transport_opts": [1],
            "lbmr.topt.len.total_len": [96],
            "lbmr.topt.ume.flags.latejoin": [1],
            "lbmr.topt.latejoin.high_seqnum": [100],
            "lbmr.topt.ctxinst.ctxinst": [CTX],
            "lbmr.topt.domain_id.domain_id": [5],
            "lbmr.topt.exfunc.functionality_flags.lj": [1],
        },
    ),
    Verified(
        "09_tqr_two_tirs",
        "00010002547261646573004f726465727300000a0000000000077f0000011234abcd382351756f74657300000a"
        "0000000000087f0000011234abcd3823",
        lambda p: ([q.topic for q in _b(p).queries], [(t.topic, t.index) for t in _b(p).infos]),
        (["Trades"], [("Orders", 7), ("Quotes", 8)]),
        {"lbmr.tqr.name": ["Trades"], "lbmr.tir.name": ["Orders", "Quotes"], "lbmr.tir.index": [7, 8]},
    ),
    Verified(
        "10_wildcard_regex",
        "01010000025e4f726400",
        lambda p: _b(p).queries,
        (WildcardQuery("^Ord", PATTERN_REGEX),),
        {"lbmr.tqr.pattern_type": [2]},
    ),
    Verified(
        "11_keepalive", "00000000", _b, ResolverKeepalive(), {"lbmr.hdr.tqrs": [0], "lbmr.hdr.tirs": [0]}
    ),
    Verified(
        "12_topic_mgmt",
        "04000000001a0002000b01004f726465727300000b000051756f74657300",
        lambda p: [(r.topic, r.type) for r in _b(p).records],
        [("Orders", 1), ("Quotes", 0)],
        {"lbmr.tmb.tmrs": [2], "lbmr.tmb.tmr.type": [1, 0]},
    ),
    Verified(
        "13_packet_options",
        "080100004f726465727300810c00000102030405060708830800010600000084080000000000078204000080040024",
        lambda p: p.options,
        (SourceIdOption(CTX), VersionOption(0x06000000, 1), LocalDomainOption(7), SourceTypeOption(0)),
        {
            "lbmr.hdr.opts": [1],
            "lbmr.opt.src_id.src_id": [CTX],
            "lbmr.opt.version.version": [100663296],
            "lbmr.opt.local_domain.local_domain_id": [7],
            "lbmr.opt.len.total_len": [36],
        },
    ),
    Verified(
        "14_packet_options_len_first",
        "080100004f72646572730080040024810c000001020304050607088308000106000000840800000000000782040000",
        lambda p: p.options,
        (SourceIdOption(CTX), VersionOption(0x06000000, 1), LocalDomainOption(7), SourceTypeOption(0)),
        {
            "lbmr.hdr.opts": [1],
            "lbmr.opt.src_id.src_id": [CTX],
            "lbmr.opt.version.version": [100663296],
            "lbmr.opt.local_domain.local_domain_id": [7],
        },
    ),
    Verified(
        "15_ctxinfo_query",
        "07031900800100000000000000000000000000006374784100",
        _b,
        ContextInfo(ContextInfoFlags.QUERY, name="ctxA"),
        {
            "lbmr.hdr.ext_type": [3],
            "lbmr.ctxinfo.flags.query": [1],
            "lbmr.ctxinfo.flags.name": [1],
            "lbmr.ctxinfo.name": ["ctxA"],
            "lbmr.ctxinfo.len": [25],
        },
    ),
    Verified(
        "16_ctxinfo_response",
        "07031900600138237f00000101020304050607086374784100",
        _b,
        ContextInfo(ContextInfoFlags.IP | ContextInfoFlags.INSTANCE, 14371, "127.0.0.1", CTX, "ctxA"),
        {
            "lbmr.ctxinfo.flags.ip": [1],
            "lbmr.ctxinfo.flags.instance": [1],
            "lbmr.ctxinfo.port": [14371],
            "lbmr.ctxinfo.ip": ["127.0.0.1"],
        },
    ),
    Verified(
        "17_topic_res_request",
        "07040007",
        _b,
        TopicResolutionRequest(7),
        {
            "lbmr.topic_res_request.flags.query": [1],
            "lbmr.topic_res_request.flags.advertisement": [1],
            "lbmr.topic_res_request.flags.wildcard_query": [1],
        },
    ),
    Verified(
        "18_pser",
        "07010000002300000a0000010a000002000000010000000738233a984f726465727300",
        _b,
        ProxySourceElection("Orders", 7, "10.0.0.1", 14371, "10.0.0.2", 15000, 1),
        {"lbmr.pser.len": [35], "lbmr.pser.topic": ["Orders"], "lbmr.pser.topic_idx": [7]},
    ),
    Verified(
        "19_remote_domain_route",
        "070600020a0000053a980000000000180000000100000002",
        _b,
        RemoteDomainRoute("10.0.0.5", 15000, (1, 2)),
        {"lbmr.remote_domain_route.num_domains": [2], "lbmr.remote_domain_route.domain": [1, 2]},
    ),
    Verified(
        "20_rctxinfo",
        "07070039000100000031000001100000000000010a00000538230000020c000001020304050607080308000000000002"
        "040900006374784100",
        lambda p: _b(p).records[0].options[3],
        RemoteNameOption("ctxA"),
        {"lbmr.rctxinfo.num_recs": [1], "lbmr.rctxinfo.rec.name.name": ["ctxA"]},
    ),
    Verified(
        "21_tnwg_interest",
        "070500280000000000200002000f0000000000014f726465727300000d8001000000015e4f726400",
        lambda p: [r.symbol for r in _b(p).records],
        ["Orders", "^Ord"],
        {"lbmr.tnwg.interest.count": [2], "lbmr.tnwg.interest_rec.symbol": ["Orders", "^Ord"]},
    ),
    Verified(
        "22_umq_qqr_qir",
        "060100015131005131004f7264657273000000000b000000020000000100010001000000010a0000073a99000000000000",
        lambda p: (_b(p).queries[0].queue, _b(p).infos[0].topic, _b(p).infos[0].instances[0].port),
        ("Q1", "Orders", 15001),
        {
            "lbmr.hdr.qqrs": [1],
            "lbmr.hdr.qirs": [1],
            "lbmr.qir.tname": ["Orders"],
            "lbmr.qir.queue.port": [15001],
        },
    ),
    Verified(
        "23_tir_other_options",
        "000000014f726465727300800a0000000000070004008b021000003a9800000a0000020000004d0308000000010000"
        "05080000000000030607400051310007080001fffffffb08240000000102030405060708090a0b0c0d0e0f10111213"
        "1415161718191a1b1c1d1e1f0a0c000001020304050607080b1c00000000000b0001020304050607000000040a0000"
        "03382300000c0c000101020304050607087f0000011234abcd3823",
        lambda p: (
            _b(p).infos[0].options[0].store_port,
            _b(p).infos[0].options[4].cost,
            _b(p).infos[0].options[3].queue,
            _b(p).infos[0].options[8].index,
        ),
        (15000, -5, "Q1", 1),
        {
            "lbmr.topt.ume_store.store_tcp_port": [15000],
            "lbmr.topt.cost.cost": [-5],
            "lbmr.topt.ume_qinfo.queue": ["Q1"],
            "lbmr.topt.ulb.src_tcp_port": [14371],
        },
    ),
    Verified(
        "24_qmgmt_ika",
        "0702000400" + "00" * 19 + "0000000b000000020a0000073a99000000000000",
        _b,
        QueueManagement(QMGMT_IKA, 11, 2, "10.0.0.7", 15001),
        {"lbmr.hdr.ext_type": [2], "lbmr.qmgmt.pckt_type": [4]},
    ),
    Verified(
        "25_unicast_tqr",
        "000100004f726465727300",
        lambda p: _b(p).queries,
        (TopicQuery("Orders"),),
        {"lbmr.tqr.name": ["Orders"]},
        LBMRD_IN,
    ),
    Verified(
        "26_decode_as_tir",
        "000000014f726465727300000a0000000000077f0000011234abcd3823",
        lambda p: _b(p).infos[0].topic,
        "Orders",
        {"lbmr.tir.name": ["Orders"]},
        {"src": "10.0.0.1", "dst": "10.0.0.2", "sport": 40000, "dport": DECODE_AS_PORT},
    ),
]


@pytest.fixture(scope="module")
def spec_capture(tshark_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Decoded:
    frames = [udp_frame(v.raw, ident=i + 1, **v.addr) for i, v in enumerate(SPEC_14)]
    pcap = write_pcap(tmp_path_factory.mktemp("lbmr") / "w1_section14.pcap", frames)
    ts = Tshark(decode_as=(*DEFAULT_DECODE_AS, f"udp.port=={DECODE_AS_PORT},lbmr"))
    names = sorted({*BASE_FIELDS, *(n for v in SPEC_14 for n in v.tshark)})
    rows = ts.fields(pcap, names)
    return Decoded(pcap, {v.id: row for v, row in zip(SPEC_14, rows, strict=True)})


@pytest.mark.parametrize("verified", SPEC_14, ids=lambda v: v.id)
def test_section_14_datagram_decodes_alike_in_openum_and_tshark(
    verified: Verified, spec_capture: Decoded
) -> None:
    packet = decode_packet(verified.raw)
    assert verified.check(packet) == verified.want
    if verified.id != "14_packet_options_len_first":  # openum writes the length option last (W1 §10)
        assert encode_packet(packet) == verified.raw
    check_frame(spec_capture.rows[verified.id], Case(verified.id, packet, verified.tshark))
