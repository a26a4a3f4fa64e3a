"""LBMC UIM, routing and resolution-over-LBMC extension headers (DRO gateways, interest, auth).

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §2.4: CTXINST, STREAM, DESTINATION and TOPIC_IDX (UIM streams, routed destinations);
* §2.10: topic/pattern interest (single- and multi-domain), ADVERTISEMENT, CTXINFO, DOMAIN/ODOMAIN,
  PATIDX, the gateway (TNWG) capabilities, keepalive and name, ROUTE_INFO(_NEIGHBOR),
  AUTHENTICATION, HMAC and TOPIC_SOURCE(_EXFUNC).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from openum.wire._common import WireError
from openum.wire.lbmc._base import (
    _INT_RANGES,
    MAX_HEADER_BODY_LEN,
    Header,
    HeaderType,
    _check_int,
    _Fixed,
    _layout,
    _register,
)

# --------------------------------------------------------------------------------------------------
# Interest, advertisements, contexts and domains (§2.4, §2.10)
# --------------------------------------------------------------------------------------------------


@_layout(HeaderType.TOPIC_INTEREST, "flags:H domain_id:I")
@dataclass(frozen=True, slots=True)
class TopicInterestHeader(_Fixed):
    """TOPIC_INTEREST 0x39: 0x4000 cancel, 0x2000 refresh."""

    domain_id: int
    flags: int = 0


@_layout(HeaderType.PATTERN_INTEREST, "flags:B pattern_type:B domain_id:I index:Q")
@dataclass(frozen=True, slots=True)
class PatternInterestHeader(_Fixed):
    """PATTERN_INTEREST 0x3A."""

    pattern_type: int
    domain_id: int
    index: int
    flags: int = 0


@_layout(
    HeaderType.ADVERTISEMENT,
    "flags:B hop_count:B ad_flags:I cost:I transport_idx:I topic_idx:I low_seqno:I high_seqno:I "
    "domain_id:I pat_idx:Q ctxinst:8s",
)
@dataclass(frozen=True, slots=True)
class AdvertisementHeader(_Fixed):
    """ADVERTISEMENT 0x3B (48 bytes)."""

    hop_count: int
    ad_flags: int
    cost: int
    transport_idx: int
    topic_idx: int
    low_seqno: int
    high_seqno: int
    domain_id: int
    pat_idx: int
    ctxinst: bytes
    flags: int = 0


@_layout(
    HeaderType.CTXINFO,
    "flags:H reserved:B hop_count:B port:H addr:ip domain_id:I ctxinst:8s",
    tail="name:optname",
)
@dataclass(frozen=True, slots=True)
class ContextInfoHeader(_Fixed):
    """CTXINFO 0x40: 24 bytes plus an optional NUL-terminated context name."""

    hop_count: int
    port: int
    addr: str
    domain_id: int
    ctxinst: bytes
    name: str = ""
    flags: int = 0
    reserved: int = 0


@_layout(HeaderType.CTXINST, "flags:H ctxinst:8s")
@dataclass(frozen=True, slots=True)
class ContextInstanceHeader(_Fixed):
    """CTXINST 0x42."""

    ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.DOMAIN, "flags:H domain:I")
@dataclass(frozen=True, slots=True)
class DomainHeader(_Fixed):
    """DOMAIN 0x43: 0x4000 active."""

    domain: int
    flags: int = 0


@_layout(HeaderType.TNWG_CAPABILITIES, "version:H cap1:I cap2:I cap3:I cap4:I")
@dataclass(frozen=True, slots=True)
class GatewayCapabilitiesHeader(_Fixed):
    """TNWG_CAPABILITIES 0x44: ``version`` holds bit 15 ignore and a 15-bit version."""

    version: int
    cap1: int = 0
    cap2: int = 0
    cap3: int = 0
    cap4: int = 0


@_layout(HeaderType.PATIDX, "flags:H pattern_index:Q")
@dataclass(frozen=True, slots=True)
class PatternIndexHeader(_Fixed):
    """PATIDX 0x45."""

    pattern_index: int
    flags: int = 0


@_layout(HeaderType.ODOMAIN, "flags:H domain:I")
@dataclass(frozen=True, slots=True)
class OriginatingDomainHeader(_Fixed):
    """ODOMAIN 0x4A."""

    domain: int
    flags: int = 0


@_layout(HeaderType.STREAM, "flags:H stream_id:I sqn:I ctxinst:8s")
@dataclass(frozen=True, slots=True)
class StreamHeader(_Fixed):
    """STREAM 0x4B: UIM stream id, per-stream sqn and the sender's context instance."""

    stream_id: int
    sqn: int
    ctxinst: bytes
    flags: int = 0


# --------------------------------------------------------------------------------------------------
# Multi-domain interest: a fixed part, then a count of u32 domain ids (§2.10)
# --------------------------------------------------------------------------------------------------

_MD_TOPIC: Final = struct.Struct(">HHH")
_MD_PATTERN: Final = struct.Struct(">BBHHQ")


def _check_domains(owner: str, domains: object, fixed: int) -> None:
    if not isinstance(domains, tuple) or fixed + 4 * len(domains) > MAX_HEADER_BODY_LEN:
        raise WireError(
            f"{owner}.domains must be a tuple of at most {(MAX_HEADER_BODY_LEN - fixed) // 4} ids"
        )
    for dom in domains:
        _check_int(owner, "domain", dom, 0xFFFFFFFF)


def _pack_u32s(values: Sequence[int]) -> bytes:
    return struct.pack(f">{len(values)}I", *values)


def _unpack_u32s(body: memoryview, offset: int, count: int) -> tuple[int, ...]:
    if offset + 4 * count != len(body):
        raise WireError(f"domain count {count} does not match the header length {len(body) + 2}")
    return struct.unpack_from(f">{count}I", body, offset)


@dataclass(frozen=True, slots=True)
class TopicMultiDomainInterestHeader(Header):
    """TOPIC_MD_INTEREST 0x4C: ``u16 flags, u16 domain_count, u16 res`` then the domain ids."""

    code: ClassVar[int] = HeaderType.TOPIC_MD_INTEREST
    domains: tuple[int, ...]
    flags: int = 0
    reserved: int = 0

    def __post_init__(self) -> None:
        _check_int("TopicMultiDomainInterestHeader", "flags", self.flags, 0xFFFF)
        _check_int("TopicMultiDomainInterestHeader", "reserved", self.reserved, 0xFFFF)
        _check_domains("TopicMultiDomainInterestHeader", self.domains, 6)

    def encode_body(self) -> bytes:
        return _MD_TOPIC.pack(self.flags, len(self.domains), self.reserved) + _pack_u32s(self.domains)

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        if len(body) < _MD_TOPIC.size:
            raise WireError("TopicMultiDomainInterestHeader: header too short")
        flags, count, reserved = _MD_TOPIC.unpack_from(body, 0)
        return cls(_unpack_u32s(body, _MD_TOPIC.size, count), flags, reserved)


_register(
    HeaderType.TOPIC_MD_INTEREST, TopicMultiDomainInterestHeader.decode_body, TopicMultiDomainInterestHeader
)


@dataclass(frozen=True, slots=True)
class PatternMultiDomainInterestHeader(Header):
    """PATTERN_MD_INTEREST 0x4D: ``u8 flags, u8 type, u16 domain_count, u16 res, u64 index``, ids."""

    code: ClassVar[int] = HeaderType.PATTERN_MD_INTEREST
    pattern_type: int
    index: int
    domains: tuple[int, ...]
    flags: int = 0
    reserved: int = 0

    def __post_init__(self) -> None:
        owner = "PatternMultiDomainInterestHeader"
        _check_int(owner, "flags", self.flags, 0xFF)
        _check_int(owner, "pattern_type", self.pattern_type, 0xFF)
        _check_int(owner, "reserved", self.reserved, 0xFFFF)
        _check_int(owner, "index", self.index, _INT_RANGES["Q"])
        _check_domains(owner, self.domains, _MD_PATTERN.size)

    def encode_body(self) -> bytes:
        head = _MD_PATTERN.pack(self.flags, self.pattern_type, len(self.domains), self.reserved, self.index)
        return head + _pack_u32s(self.domains)

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        if len(body) < _MD_PATTERN.size:
            raise WireError("PatternMultiDomainInterestHeader: header too short")
        flags, ptype, count, reserved, index = _MD_PATTERN.unpack_from(body, 0)
        return cls(ptype, index, _unpack_u32s(body, _MD_PATTERN.size, count), flags, reserved)


_register(
    HeaderType.PATTERN_MD_INTEREST,
    PatternMultiDomainInterestHeader.decode_body,
    PatternMultiDomainInterestHeader,
)


# --------------------------------------------------------------------------------------------------
# Gateways, routing, authentication, routed destinations and topic sources (§2.4, §2.10)
# --------------------------------------------------------------------------------------------------


@_layout(
    HeaderType.TNWG_KA,
    "flags:H index:I ts_seconds:Q ts_microseconds:I reserved1:I reserved:40s",
)
@dataclass(frozen=True, slots=True)
class GatewayKeepaliveHeader(_Fixed):
    """TNWG_KA 0x4F (64 bytes): 0x4000 Q, 0x2000 R."""

    index: int
    ts_seconds: int
    ts_microseconds: int
    flags: int = 0
    reserved1: int = 0
    reserved: bytes = bytes(40)


@_layout(
    HeaderType.ROUTE_INFO,
    "flags:H gateway_version:I config_signature:I node_id:Q topology:I vers:H route_sqn:H ttl:B "
    "reserved1:B reserved2:H",
)
@dataclass(frozen=True, slots=True)
class RouteInfoHeader(_Fixed):
    """ROUTE_INFO 0x56 (32 bytes)."""

    gateway_version: int
    config_signature: int
    node_id: int
    topology: int
    vers: int
    route_sqn: int
    ttl: int
    flags: int = 0
    reserved1: int = 0
    reserved2: int = 0


@_layout(HeaderType.ROUTE_INFO_NEIGHBOR, "flags:H node_id:Q ingress_cost:I egress_cost:I")
@dataclass(frozen=True, slots=True)
class RouteInfoNeighborHeader(_Fixed):
    """ROUTE_INFO_NEIGHBOR 0x57."""

    node_id: int
    ingress_cost: int
    egress_cost: int
    flags: int = 0


@_layout(HeaderType.GATEWAY_NAME, "flags:H", tail="name:name")
@dataclass(frozen=True, slots=True)
class GatewayNameHeader(_Fixed):
    """GATEWAY_NAME 0x58."""

    name: str
    flags: int = 0


@_layout(HeaderType.AUTHENTICATION, "flags:B opid:B", tail="data:bytes")
@dataclass(frozen=True, slots=True)
class AuthenticationHeader(_Fixed):
    """AUTHENTICATION 0x60: opid 1 request, 2 challenge, 3 challenge response, 4 result; the
    operation's fields are kept as bytes."""

    opid: int
    data: bytes = b""
    flags: int = 0


@_layout(HeaderType.HMAC, "flags:B padding:B data:20s")
@dataclass(frozen=True, slots=True)
class HmacHeader(_Fixed):
    """HMAC 0x62: 20 bytes of HMAC."""

    data: bytes
    flags: int = 0
    padding: int = 0


@_layout(
    HeaderType.DESTINATION,
    "flags:H domain_id:I ip:ip port:H hops_taken:H orig_domain_id:I orig_ip:ip orig_port:H reserved:H",
)
@dataclass(frozen=True, slots=True)
class DestinationHeader(_Fixed):
    """DESTINATION 0x64: routed (DRO) UIM destination and origin."""

    domain_id: int
    ip: str
    port: int
    orig_domain_id: int
    orig_ip: str
    orig_port: int
    hops_taken: int = 0
    flags: int = 0
    reserved: int = 0


@_layout(HeaderType.TOPIC_IDX, "flags:H topic_index:I")
@dataclass(frozen=True, slots=True)
class TopicIndexHeader(_Fixed):
    """TOPIC_IDX 0x65."""

    topic_index: int
    flags: int = 0


@_layout(HeaderType.TOPIC_SOURCE, "flags:H domain_id:I")
@dataclass(frozen=True, slots=True)
class TopicSourceHeader(_Fixed):
    """TOPIC_SOURCE 0x67: 0x4000 EOS."""

    domain_id: int
    flags: int = 0


@_layout(HeaderType.TOPIC_SOURCE_EXFUNC, "flags:H src_ip:ip src_port:H unused:H functionality_flags:I")
@dataclass(frozen=True, slots=True)
class TopicSourceExtendedFunctionalityHeader(_Fixed):
    """TOPIC_SOURCE_EXFUNC 0x68: functionality 0x1 late join, 0x2 UME, 0x4 UMQ, 0x8 ULB."""

    src_ip: str
    src_port: int
    functionality_flags: int
    flags: int = 0
    unused: int = 0
