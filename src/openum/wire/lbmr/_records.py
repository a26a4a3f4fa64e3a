"""LBMR topic records: TQRs, wildcard TQRs and TIRs (W1 §4), keepalives (W1 §3.1), topic management (W1 §7).

These are the bodies of packet types 0-4: what seed chapter 8.1 resolves topics with (TIRs, TQRs,
wildcard TQRs) and the lbmrd keepalives of chapters 15-16.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntFlag
from typing import Final, cast

from openum.wire._common import WireError
from openum.wire.lbmr._base import (
    _HDR,
    _T_NORMAL,
    _T_RCV_ALIVE,
    _T_SRC_ALIVE,
    _T_TOPIC_MGMT,
    _T_WILDCARD,
    _U16,
    _Body,
    _check_options,
    _counted,
    _cstr,
    _items,
    _need,
    _read_name,
    _text,
    _u16,
    _uint,
)
from openum.wire.lbmr._options import (
    _TOPIC_OPTIONS,
    TopicOption,
    _decode_topic_options,
    _encode_topic_options,
)
from openum.wire.lbmr._transports import _TRANSPORTS, Transport, UnknownTransport, _Transport

# W1 §4.2 wildcard pattern types.
PATTERN_PCRE: Final = 1
PATTERN_REGEX: Final = 2
# W1 §7 topic management record types.
TMR_LEAVE: Final = 0
TMR_USE: Final = 1


class TopicManagementFlags(IntFlag):
    """Flags of a topic management record (W1 §7)."""

    RESPONSE = 0x80
    WILDCARD_PCRE = 0x40
    WILDCARD_REGEX = 0x20


_TIR_OPTIONS_BIT: Final = 0x80
_TIR: Final = struct.Struct(">BBHI")  # transport, tlen, ttl, topic index
_TMR: Final = struct.Struct(">HBB")

# ---- TQR / TIR (W1 §4)


@dataclass(frozen=True, slots=True)
class TopicQuery:
    """TQR: a receiver asks who sources ``topic`` (W1 §4.1)."""

    topic: str

    def __post_init__(self) -> None:
        _text(self.topic, "topic name")

    def _pack(self) -> bytes:
        return _cstr(self.topic, "topic name")


@dataclass(frozen=True, slots=True)
class WildcardQuery:
    """Wildcard TQR: a wildcard receiver asks for topics matching ``pattern`` (W1 §4.2)."""

    pattern: str
    pattern_type: int = PATTERN_PCRE

    def __post_init__(self) -> None:
        _text(self.pattern, "wildcard pattern")
        if self.pattern_type not in (PATTERN_PCRE, PATTERN_REGEX):
            raise WireError(f"wildcard pattern type must be 1 (PCRE) or 2 (regex), got {self.pattern_type!r}")

    def _pack(self) -> bytes:
        return bytes((self.pattern_type,)) + _cstr(self.pattern, "wildcard pattern")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """TIR: a source advertises ``topic`` as ``index`` on ``transport`` (W1 §4.3, §5, §6)."""

    topic: str
    index: int
    transport: Transport
    ttl: int = 0
    options: tuple[TopicOption, ...] = ()

    def __post_init__(self) -> None:
        _text(self.topic, "topic name")
        _uint(self.index, 32, "topic index")
        _uint(self.ttl, 16, "TIR TTL")
        if not isinstance(self.transport, (_Transport, UnknownTransport)):
            raise WireError(f"TIR transport: {type(self.transport).__name__} is not a transport")
        _check_options(self.options, _TOPIC_OPTIONS, "TIR options")

    def _pack(self) -> bytes:
        if isinstance(self.transport, UnknownTransport):
            ttype, tinfo = self.transport.type, self.transport.data
        else:
            ttype, tinfo = self.transport.TYPE, self.transport._pack()
        block = b""
        if self.options:
            ttype |= _TIR_OPTIONS_BIT
            block = _encode_topic_options(self.options)
        # the option block comes before the transport info (W1 §4.3)
        return (
            _cstr(self.topic, "topic name")
            + _TIR.pack(ttype, len(tinfo), self.ttl, self.index)
            + block
            + tinfo
        )


def _decode_tir(data: bytes, off: int, end: int) -> tuple[TopicInfo, int]:
    topic, off = _read_name(data, off, end, "TIR topic name")
    _need(off, _TIR.size, end, "TIR header")
    tbyte, tlen, ttl, index = _TIR.unpack_from(data, off)
    off += _TIR.size
    options: tuple[TopicOption, ...] = ()
    if tbyte & _TIR_OPTIONS_BIT:
        options, off = _decode_topic_options(data, off, end)
    _need(off, tlen, end, "TIR transport info")
    ttype = tbyte & 0x7F
    cls = _TRANSPORTS.get(ttype)
    transport: Transport
    if cls is None:
        transport = UnknownTransport(ttype, data[off : off + tlen])
    else:
        transport = cast(Transport, cls._unpack(data, off, tlen))
    return TopicInfo(topic, index, transport, ttl, options), off + tlen


# ---- bodies of types 0 and 1 (W1 §3.1, §3.2)


@dataclass(frozen=True, slots=True)
class TopicResolution(_Body):
    """Type 0: TQRs then TIRs.  Not empty: an empty type-0 packet is a :class:`ResolverKeepalive`."""

    queries: tuple[TopicQuery, ...] = ()
    infos: tuple[TopicInfo, ...] = ()

    def __post_init__(self) -> None:
        _items(self.queries, (TopicQuery,), "TQRs", 0xFF)  # the TQR count is 8 bits (W1 §3.2)
        _items(self.infos, (TopicInfo,), "TIRs")
        if not self.queries and not self.infos:
            raise WireError("a TopicResolution needs a TQR or a TIR; send ResolverKeepalive() instead")

    def _encode(self, vt: int) -> bytes:
        return _counted(vt | _T_NORMAL, [q._pack() for q in self.queries], [t._pack() for t in self.infos])


@dataclass(frozen=True, slots=True)
class WildcardResolution(_Body):
    """Type 1: wildcard TQRs, then TIRs (W1 §3.1)."""

    queries: tuple[WildcardQuery, ...] = ()
    infos: tuple[TopicInfo, ...] = ()

    def __post_init__(self) -> None:
        _items(self.queries, (WildcardQuery,), "wildcard TQRs", 0xFF)
        _items(self.infos, (TopicInfo,), "TIRs")

    def _encode(self, vt: int) -> bytes:
        return _counted(vt | _T_WILDCARD, [q._pack() for q in self.queries], [t._pack() for t in self.infos])


def _decode_topics(data: bytes, end: int) -> tuple[_Body, int]:
    wildcard = data[0] & 0x07 == _T_WILDCARD
    ntqr = data[1]
    ntir = _u16(data, 2)
    off = _HDR.size
    if not wildcard and ntqr == 0 and ntir == 0:
        return ResolverKeepalive(), off
    queries: list[TopicQuery | WildcardQuery] = []
    for _ in range(ntqr):
        if wildcard:
            _need(off, 1, end, "wildcard TQR")
            ptype = data[off]
            pattern, off = _read_name(data, off + 1, end, "wildcard pattern")
            queries.append(WildcardQuery(pattern, ptype))
        else:
            topic, off = _read_name(data, off, end, "TQR topic name")
            queries.append(TopicQuery(topic))
    infos: list[TopicInfo] = []
    for _ in range(ntir):
        tir, off = _decode_tir(data, off, end)
        infos.append(tir)
    if wildcard:
        return WildcardResolution(cast(tuple[WildcardQuery, ...], tuple(queries)), tuple(infos)), off
    return TopicResolution(cast(tuple[TopicQuery, ...], tuple(queries)), tuple(infos)), off


# ---- keepalives (W1 §3.1)


@dataclass(frozen=True, slots=True)
class ResolverKeepalive(_Body):
    """Type 0 with no records: the unicast resolver (lbmrd) keepalive (W1 §3.1)."""

    def _encode(self, vt: int) -> bytes:
        return _HDR.pack(vt | _T_NORMAL, 0, 0)


@dataclass(frozen=True, slots=True)
class ReceiverAlive(_Body):
    """Type 2: a receiving context's keepalive to lbmrd (W1 §3.1)."""

    def _encode(self, vt: int) -> bytes:
        return _HDR.pack(vt | _T_RCV_ALIVE, 0, 0)


@dataclass(frozen=True, slots=True)
class SourceAlive(_Body):
    """Type 3: a sourcing context's keepalive to lbmrd (W1 §3.1)."""

    def _encode(self, vt: int) -> bytes:
        return _HDR.pack(vt | _T_SRC_ALIVE, 0, 0)


def _decode_alive(data: bytes, end: int) -> tuple[_Body, int]:
    if data[1] or data[2] or data[3]:
        raise WireError("a keepalive must have zero record counts")
    return (ReceiverAlive() if data[0] & 0x07 == _T_RCV_ALIVE else SourceAlive()), _HDR.size


# ---- topic management (W1 §7)


@dataclass(frozen=True, slots=True)
class TopicManagementRecord:
    """TMR: ``TMR_USE`` or ``TMR_LEAVE`` of ``topic`` (flags :class:`TopicManagementFlags`)."""

    topic: str
    type: int = TMR_USE
    flags: int = 0

    def __post_init__(self) -> None:
        _text(self.topic, "TMR topic name")
        _uint(self.type, 8, "TMR type")
        _uint(self.flags, 8, "TMR flags")

    def _pack(self) -> bytes:
        name = _cstr(self.topic, "TMR topic name")
        return _TMR.pack(_TMR.size + len(name), self.type, self.flags) + name


@dataclass(frozen=True, slots=True)
class TopicManagement(_Body):
    """Type 4: one topic management block of TMRs (W1 §7)."""

    records: tuple[TopicManagementRecord, ...] = ()

    def __post_init__(self) -> None:
        _items(self.records, (TopicManagementRecord,), "TMRs")

    def _encode(self, vt: int) -> bytes:
        tmrs = b"".join(r._pack() for r in self.records)
        if len(tmrs) + 4 > 0xFFFF:
            raise WireError("topic management block does not fit its u16 length")
        # both header counts are 0; the TMB length excludes the LBMR header (W1 §7)
        return (
            _HDR.pack(vt | _T_TOPIC_MGMT, 0, 0)
            + _U16.pack(len(tmrs) + 4)
            + _U16.pack(len(self.records))
            + tmrs
        )


def _decode_topic_management(data: bytes, end: int) -> tuple[_Body, int]:
    off = _HDR.size
    _need(off, 4, end, "topic management block header")
    count = _u16(data, off + 2)  # the TMB length is not used by the dissector either
    off += 4
    records: list[TopicManagementRecord] = []
    for _ in range(count):
        _need(off, _TMR.size, end, "TMR header")
        tlen, ttype, flags = _TMR.unpack_from(data, off)
        if tlen <= _TMR.size:
            raise WireError(f"TMR length {tlen} leaves no room for a topic name", offset=off)
        _need(off, tlen, end, "TMR")
        topic, _ = _read_name(data, off + _TMR.size, off + tlen, "TMR topic name")
        records.append(TopicManagementRecord(topic, ttype, flags))
        off += tlen
    return TopicManagement(tuple(records)), off
