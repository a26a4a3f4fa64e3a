"""LBMC UME (persistence) extension headers: registration, acks, keepalives, stores, proxy sources.

Implements ``../shared/wire/lbmc-pdm-srs.md`` §2.8 (the UME_* codes, SRI/SRI_REQ).  Every header
here has a fixed layout declared with :func:`~openum.wire.lbmc._base._layout`; the retransmission
request and late-join headers (§2.7) live in :mod:`openum.wire.lbmc._headers_core`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from openum.wire.lbmc._base import HeaderType, _Fixed, _layout

# --------------------------------------------------------------------------------------------------
# Registration, acks and keepalives (§2.8)
# --------------------------------------------------------------------------------------------------


@_layout(
    HeaderType.UME_PREG,
    "flags:B marker:B reg_id:I transport_idx:I topic_idx:I src_reg_id:I resp_port:H reserved:H resp_ip:ip",
)
@dataclass(frozen=True, slots=True)
class UmeRegistrationHeader(_Fixed):
    """UME_PREG 0x12: persistent registration.  Marker 0x80 S = source registration, 0x7F = 1/2/3."""

    reg_id: int
    transport_idx: int
    topic_idx: int
    src_reg_id: int
    resp_port: int
    resp_ip: str
    marker: int = 0
    flags: int = 0
    reserved: int = 0

    SOURCE: ClassVar[int] = 0x80  # in ``marker``
    DEREGISTER: ClassVar[int] = 0x08  # in ``flags``


@_layout(
    HeaderType.UME_PREG_RESP,
    "response_code:B marker:B reg_id:I transport_idx:I topic_idx:I low_seqnum:I high_seqnum:I",
)
@dataclass(frozen=True, slots=True)
class UmeRegistrationResponseHeader(_Fixed):
    """UME_PREG_RESP 0x13: ``response_code`` is the dissector's "code" byte (0x40 O old client,
    0x20 E error with the error number in the low nibble, else 0x10 N no cache, 0x02 W, 0x01 D)."""

    reg_id: int
    transport_idx: int
    topic_idx: int
    low_seqnum: int
    high_seqnum: int
    response_code: int = 0
    marker: int = 0


@_layout(HeaderType.UME_ACK, "flags:B ack_type:B transport_idx:I id_2:I rcv_reg_id:I seqnum:I")
@dataclass(frozen=True, slots=True)
class UmeAckHeader(_Fixed):
    """UME_ACK 0x14: ack_type 0 CDELV (consumption), 1 STABLE."""

    ack_type: int
    transport_idx: int
    id_2: int
    rcv_reg_id: int
    seqnum: int
    flags: int = 0


@_layout(HeaderType.UME_KEEPALIVE, "flags:B ka_type:B transport_idx:I topic_idx:I reg_id:I")
@dataclass(frozen=True, slots=True)
class UmeKeepaliveHeader(_Fixed):
    """UME_KEEPALIVE 0x16: ka_type 0 store, 1 receiver, 2 source."""

    ka_type: int
    transport_idx: int
    topic_idx: int
    reg_id: int
    flags: int = 0


@_layout(HeaderType.UME_STOREID, "value:H")
@dataclass(frozen=True, slots=True)
class UmeStoreIdHeader(_Fixed):
    """UME_STOREID 0x17: bit 15 ignore, bits 0-14 the store id."""

    value: int

    @property
    def store_id(self) -> int:
        return self.value & 0x7FFF


@_layout(HeaderType.UME_RANGED_ACK, "flags:H first_seqnum:I last_seqnum:I")
@dataclass(frozen=True, slots=True)
class UmeRangedAckHeader(_Fixed):
    """UME_RANGED_ACK 0x18."""

    first_seqnum: int
    last_seqnum: int
    flags: int = 0


@_layout(HeaderType.UME_ACK_ID, "flags:H ack_id:I")
@dataclass(frozen=True, slots=True)
class UmeAckIdHeader(_Fixed):
    """UME_ACK_ID 0x19."""

    ack_id: int
    flags: int = 0


@_layout(HeaderType.UME_CAPABILITY, "flags:H")
@dataclass(frozen=True, slots=True)
class UmeCapabilityHeader(_Fixed):
    """UME_CAPABILITY 0x1A: 0x4000 quorum/consensus, 0x2000 client lifetime."""

    flags: int = 0


@_layout(HeaderType.UME_PROXY_SRC, "flags:H")
@dataclass(frozen=True, slots=True)
class UmeProxySourceHeader(_Fixed):
    """UME_PROXY_SRC 0x1B: 0x4000 enable, 0x2000 compatibility."""

    flags: int = 0


# --------------------------------------------------------------------------------------------------
# Stores, store groups and proxy-source election (§2.8)
# --------------------------------------------------------------------------------------------------


@_layout(HeaderType.UME_STORE_GROUP, "flags:B grp_idx:B grp_sz:H reserved:H")
@dataclass(frozen=True, slots=True)
class UmeStoreGroupHeader(_Fixed):
    """UME_STORE_GROUP 0x1C."""

    grp_idx: int
    grp_sz: int
    flags: int = 0
    reserved: int = 0


@_layout(
    HeaderType.UME_STORE_INFO,
    "flags:B grp_idx:B store_tcp_port:H store_idx:H store_ip:ip src_reg_id:I",
)
@dataclass(frozen=True, slots=True)
class UmeStoreInfoHeader(_Fixed):
    """UME_STORE_INFO 0x1D."""

    grp_idx: int
    store_tcp_port: int
    store_idx: int
    store_ip: str
    src_reg_id: int
    flags: int = 0


@_layout(HeaderType.UME_CTXINSTS, "flags:H ctxinst:8s")
@dataclass(frozen=True, slots=True)
class StoreContextInstanceHeader(_Fixed):
    """UME_CTXINSTS 0x3C: the store's context instance."""

    ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.UME_STORENAME, "flags:H", tail="name:name")
@dataclass(frozen=True, slots=True)
class UmeStoreNameHeader(_Fixed):
    """UME_STORENAME 0x3D."""

    name: str
    flags: int = 0


@_layout(
    HeaderType.UME_PSER,
    "flags:H source_ip:ip store_ip:ip transport_idx:I topic_idx:I source_port:H store_port:H "
    "source_ctxinst:8s store_ctxinst:8s",
)
@dataclass(frozen=True, slots=True)
class UmeProxySourceElectionHeader(_Fixed):
    """UME_PSER 0x41: proxy source election."""

    source_ip: str
    store_ip: str
    transport_idx: int
    topic_idx: int
    source_port: int
    store_port: int
    source_ctxinst: bytes
    store_ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.UME_CLIENT_LIFETIME, "flags:H activity_tmo:I lifetime:I ttl:I")
@dataclass(frozen=True, slots=True)
class UmeClientLifetimeHeader(_Fixed):
    """UME_CLIENT_LIFETIME 0x46."""

    activity_tmo: int
    lifetime: int
    ttl: int
    flags: int = 0


@_layout(HeaderType.UME_SID, "flags:H session_id:Q")
@dataclass(frozen=True, slots=True)
class UmeSessionIdHeader(_Fixed):
    """UME_SID 0x47: the UME session id."""

    session_id: int
    flags: int = 0


@_layout(HeaderType.UME_RCV_KEEPALIVE, "flags:H rcv_regid:I session_id:Q ctxinst:8s")
@dataclass(frozen=True, slots=True)
class UmeReceiverKeepaliveHeader(_Fixed):
    """UME_RCV_KEEPALIVE 0x50."""

    rcv_regid: int
    session_id: int
    ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.SRI_REQ, "flags:H transport_idx:I topic_idx:I")
@dataclass(frozen=True, slots=True)
class SourceRegistrationInfoRequestHeader(_Fixed):
    """SRI_REQ 0x53."""

    transport_idx: int
    topic_idx: int
    flags: int = 0


@_layout(HeaderType.UME_STORE_DOMAIN, "flags:H domain:I")
@dataclass(frozen=True, slots=True)
class UmeStoreDomainHeader(_Fixed):
    """UME_STORE_DOMAIN 0x54."""

    domain: int
    flags: int = 0


@_layout(HeaderType.SRI, "flags:H version:I low_sqn:I high_sqn:I")
@dataclass(frozen=True, slots=True)
class SourceRegistrationInfoHeader(_Fixed):
    """SRI 0x55: 0x0001 A ack to source, 0x0002 initial sqn known."""

    version: int
    low_sqn: int
    high_sqn: int
    flags: int = 0


@_layout(
    HeaderType.UME_STORE_INFO_EXT,
    "flags:B grp_idx:B store_tcp_port:H store_idx:H store_ip:ip src_reg_id:I domain_id:I version:I",
)
@dataclass(frozen=True, slots=True)
class UmeStoreInfoExtHeader(_Fixed):
    """UME_STORE_INFO_EXT 0x69: UME_STORE_INFO plus domain id and version."""

    grp_idx: int
    store_tcp_port: int
    store_idx: int
    store_ip: str
    src_reg_id: int
    domain_id: int
    version: int
    flags: int = 0


@_layout(HeaderType.UME_PSRC_ELECTION_TOKEN, "flags:B store_index:B token:I")
@dataclass(frozen=True, slots=True)
class UmeProxySourceElectionTokenHeader(_Fixed):
    """UME_PSRC_ELECTION_TOKEN 0x6A."""

    store_index: int
    token: int
    flags: int = 0
