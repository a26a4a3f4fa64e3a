"""LBMR packets: one body plus packet options per UDP payload (W1 §3, §10, §13).

Packet options (W1 §10) follow the body and end with the 0x80 length option.  :func:`encode_packet` and
:func:`decode_packet` convert a whole datagram; :func:`pack_records` packs many TQRs and TIRs into as few
datagrams as fit (seed 8.1: several records per datagram).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntFlag
from typing import ClassVar, Final, Self, TypeAlias, cast

from openum.wire._common import Buffer, WireError, as_view
from openum.wire.lbmr._base import (
    _HDR,
    _OPT_HDR,
    _OPT_INSTANCE,
    _OPT_U32,
    _OPTS_BIT,
    _T_EXT,
    _T_NORMAL,
    _T_QUEUE,
    _T_RCV_ALIVE,
    _T_SRC_ALIVE,
    _T_TOPIC_MGMT,
    _T_WILDCARD,
    _X_CTXINFO,
    _X_PSER,
    _X_QMGMT,
    _X_RCTXINFO,
    _X_RDR,
    _X_TNWG,
    _X_TRREQ,
    UnknownOption,
    _blob,
    _Body,
    _check_options,
    _counted,
    _DomainOption,
    _Option,
    _u16,
    _uint,
    _walk_options,
)
from openum.wire.lbmr._extended import (
    ContextInfo,
    ProxySourceElection,
    QueueManagement,
    TopicResolutionRequest,
    _decode_ctxinfo,
    _decode_pser,
    _decode_qmgmt,
    _decode_trreq,
)
from openum.wire.lbmr._gateway import (
    GatewayContextInfo,
    GatewayInterest,
    GatewayTopicResolutionRequest,
    RemoteContextInfo,
    RemoteDomainRoute,
    _decode_rctxinfo,
    _decode_rdr,
    _decode_tnwg,
)
from openum.wire.lbmr._records import (
    ReceiverAlive,
    ResolverKeepalive,
    SourceAlive,
    TopicInfo,
    TopicManagement,
    TopicQuery,
    TopicResolution,
    WildcardQuery,
    WildcardResolution,
    _decode_alive,
    _decode_topic_management,
    _decode_topics,
)
from openum.wire.lbmr._umq import QueueResolution, _decode_queues

#: The largest LBMR datagram a context sends by default: UM's ``resolver_datagram_max_size`` (8192 in
#: the UM configuration guide; the option is not in the seed's option table).
DEFAULT_MAX_DATAGRAM: Final = 8192

# W1 §10 source types of the 0x82 packet option.
SOURCE_TYPE_APPLICATION: Final = 0
SOURCE_TYPE_GATEWAY: Final = 1
SOURCE_TYPE_STORE: Final = 2


class VersionFlags(IntFlag):
    """Flags of the version packet option (0x83)."""

    IGNORE = 0x8000
    UME = 0x0001
    UMQ = 0x0002


_OPT_SRC_TYPE: Final = struct.Struct(">BBBB")

# ---- LBMR packet options (W1 §10)


@dataclass(frozen=True, slots=True)
class SourceIdOption(_Option):
    """Packet option 0x81: the sender's source id (its context instance)."""

    TYPE: ClassVar[int] = 0x81
    SIZE: ClassVar[int] = 12
    source_id: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.source_id, 8, "source id")
        _uint(self.flags, 16, "source id flags")

    def _pack(self) -> bytes:
        return _OPT_INSTANCE.pack(self.TYPE, self.SIZE, self.flags, self.source_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, sid = _OPT_INSTANCE.unpack_from(data, off)
        return cls(sid, flags)


@dataclass(frozen=True, slots=True)
class SourceTypeOption(_Option):
    """Packet option 0x82: what sent the packet (``SOURCE_TYPE_*``)."""

    TYPE: ClassVar[int] = 0x82
    SIZE: ClassVar[int] = 4
    source_type: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.source_type, 8, "source type")
        _uint(self.flags, 8, "source type flags")

    def _pack(self) -> bytes:
        return _OPT_SRC_TYPE.pack(self.TYPE, self.SIZE, self.flags, self.source_type)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, src_type = _OPT_SRC_TYPE.unpack_from(data, off)
        return cls(src_type, flags)


@dataclass(frozen=True, slots=True)
class VersionOption(_Option):
    """Packet option 0x83: the sender's version and capabilities (:class:`VersionFlags`)."""

    TYPE: ClassVar[int] = 0x83
    SIZE: ClassVar[int] = 8
    version: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.version, 32, "version")
        _uint(self.flags, 16, "version flags")

    def _pack(self) -> bytes:
        return _OPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.version)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, version = _OPT_U32.unpack_from(data, off)
        return cls(version, flags)


@dataclass(frozen=True, slots=True)
class LocalDomainOption(_DomainOption):
    """Packet option 0x84: the sender's local topic resolution domain id."""

    TYPE: ClassVar[int] = 0x84
    _WHAT: ClassVar[str] = "local domain id"
    _FLAGS_WHAT: ClassVar[str] = "local domain flags"


PacketOption: TypeAlias = (
    SourceIdOption | SourceTypeOption | VersionOption | LocalDomainOption | UnknownOption
)

_PACKET_OPT_LEN: Final = 0x80
_PACKET_OPTIONS: Final[Mapping[int, type[_Option]]] = {
    cls.TYPE: cls for cls in (SourceIdOption, SourceTypeOption, VersionOption, LocalDomainOption)
}


def _encode_packet_options(options: tuple[PacketOption, ...]) -> bytes:
    """Options then the 0x80 length option last, where the dissector looks for it (W1 §10)."""
    body = b"".join(opt._pack() for opt in options)
    if len(body) + 4 > 0xFFFF:
        raise WireError(f"packet options of {len(body) + 4} bytes do not fit their u16 length")
    return body + _OPT_HDR.pack(_PACKET_OPT_LEN, 4, len(body) + 4)


def _decode_packet_options(data: bytes, off: int, end: int) -> tuple[PacketOption, ...]:
    # the length option may sit first or last (W1 §14 #13, #14); it is rebuilt on encode
    opts = _walk_options(data, off, end, _PACKET_OPTIONS, exact=True, what="packet", skip=_PACKET_OPT_LEN)
    return cast(tuple[PacketOption, ...], opts)


# ---- packets (W1 §3)


Body: TypeAlias = (
    TopicResolution
    | WildcardResolution
    | ResolverKeepalive
    | ReceiverAlive
    | SourceAlive
    | TopicManagement
    | QueueResolution
    | ProxySourceElection
    | QueueManagement
    | ContextInfo
    | TopicResolutionRequest
    | GatewayInterest
    | GatewayContextInfo
    | GatewayTopicResolutionRequest
    | RemoteDomainRoute
    | RemoteContextInfo
)


@dataclass(frozen=True, slots=True)
class LbmrPacket:
    """One LBMR datagram: a body and its packet options (W1 §3, §10).

    ``version`` is the header's version nibble: 0 normally, 1 for the gateway version (W1 §3.1).
    """

    body: Body
    options: tuple[PacketOption, ...] = ()
    version: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.body, _Body):
            raise WireError(f"LBMR body: {type(self.body).__name__} is not an LBMR body record")
        # the length option is written by the encoder, never held as a record
        _check_options(self.options, _PACKET_OPTIONS, "packet options", reserved=_PACKET_OPT_LEN)
        if self.version not in (0, 1):
            raise WireError(f"LBMR version must be 0 or 1, got {self.version!r}")


def encode_packet(packet: LbmrPacket) -> bytes:
    """The UDP payload for ``packet``; :class:`WireError` when a field cannot be encoded."""
    if not isinstance(packet, LbmrPacket):
        raise WireError(f"encode_packet needs an LbmrPacket, got {type(packet).__name__}")
    vt = packet.version << 4
    if not packet.options:
        return packet.body._encode(vt)
    return packet.body._encode(vt | _OPTS_BIT) + _encode_packet_options(packet.options)


_DECODERS: Final[Mapping[int, Callable[[bytes, int], tuple[_Body, int]]]] = {
    _T_NORMAL: _decode_topics,
    _T_WILDCARD: _decode_topics,
    _T_RCV_ALIVE: _decode_alive,
    _T_SRC_ALIVE: _decode_alive,
    _T_TOPIC_MGMT: _decode_topic_management,
    _T_QUEUE: _decode_queues,
}
_EXT_DECODERS: Final[Mapping[int, Callable[[bytes, int], tuple[_Body, int]]]] = {
    _X_PSER: _decode_pser,
    _X_QMGMT: _decode_qmgmt,
    _X_CTXINFO: _decode_ctxinfo,
    _X_TRREQ: _decode_trreq,
    _X_TNWG: _decode_tnwg,
    _X_RDR: _decode_rdr,
    _X_RCTXINFO: _decode_rctxinfo,
}


def decode_packet(buf: Buffer) -> LbmrPacket:
    """Decode one LBMR UDP payload; :class:`WireError` (and nothing else) when it is malformed."""
    try:
        data = buf if isinstance(buf, bytes) else bytes(as_view(buf))
    except TypeError as exc:  # not a buffer at all
        raise WireError(f"cannot decode a {type(buf).__name__}") from exc
    n = len(data)
    if n < _HDR.size:
        raise WireError(f"LBMR datagram of {n} bytes is shorter than its 4-byte header")
    vt = data[0]
    version = vt >> 4
    if version > 1:
        raise WireError(f"unknown LBMR version {version}", offset=0)
    ptype = vt & 0x07
    has_opts = bool(vt & _OPTS_BIT)
    # W1 §10: a trailing 0x80 length option marks where the body ends
    end = n
    end_known = False
    if has_opts and n >= _HDR.size + 4 and data[n - 4] == _PACKET_OPT_LEN and data[n - 3] == 4:
        total = _u16(data, n - 2)
        if not 4 <= total <= n - _HDR.size:
            raise WireError(f"packet options length {total} does not fit the datagram", offset=n - 4)
        end, end_known = n - total, True
    if ptype == _T_EXT:
        decoder = _EXT_DECODERS.get(data[1])
        if decoder is None:
            raise WireError(f"unknown LBMR extended type 0x{data[1]:02x}", offset=1)
    else:
        decoder = _DECODERS.get(ptype)
        if decoder is None:
            raise WireError(f"unknown LBMR packet type {ptype}", offset=0)
    body, off = decoder(data, end)
    if off != end and (end_known or not has_opts):
        raise WireError(f"{end - off} bytes left after the LBMR body", offset=off)
    options = _decode_packet_options(data, off, n) if has_opts else ()
    return LbmrPacket(cast(Body, body), options, version)


def _packed_records(
    queries: Iterable[TopicQuery | WildcardQuery], infos: Iterable[TopicInfo]
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """The packed TQRs, wildcard TQRs and TIRs of :func:`pack_records`, each in the order given."""
    topic_queries: list[bytes] = []
    wildcard_queries: list[bytes] = []
    for q in queries:
        if isinstance(q, TopicQuery):
            topic_queries.append(q._pack())
        elif isinstance(q, WildcardQuery):
            wildcard_queries.append(q._pack())
        else:
            raise WireError(f"pack_records: {type(q).__name__} is not a TopicQuery or WildcardQuery")
    tirs: list[bytes] = []
    for t in infos:
        if not isinstance(t, TopicInfo):
            raise WireError(f"pack_records: {type(t).__name__} is not a TopicInfo")
        tirs.append(t._pack())
    return topic_queries, wildcard_queries, tirs


def pack_records(
    queries: Iterable[TopicQuery | WildcardQuery] = (),
    infos: Iterable[TopicInfo] = (),
    max_size: int = DEFAULT_MAX_DATAGRAM,
    *,
    options: Sequence[PacketOption] = (),
    version: int = 0,
) -> list[bytes]:
    """Pack TQRs and TIRs into as few datagrams of at most ``max_size`` bytes as they fit.

    Type-0 datagrams carry TQRs first, then TIRs (at most 255 TQRs each: the count is 8 bits); wildcard
    queries go into type-1 datagrams after them.  ``options`` are appended to every datagram.  A record
    that cannot fit even alone raises :class:`WireError`.
    """
    opts = tuple(options)
    LbmrPacket(ResolverKeepalive(), opts, version)  # validates options and version
    tail = _encode_packet_options(opts) if opts else b""
    vt = (version << 4) | (_OPTS_BIT if opts else 0)
    room = max_size - _HDR.size - len(tail)
    topic_queries, wildcard_queries, tirs = _packed_records(queries, infos)

    out: list[bytes] = []
    cur_q: list[bytes] = []
    cur_i: list[bytes] = []
    size = 0

    def flush(ptype: int) -> None:
        nonlocal size
        if cur_q or cur_i:
            out.append(_counted(vt | ptype, cur_q, cur_i) + tail)
        cur_q.clear()
        cur_i.clear()
        size = 0

    def add(rec: bytes, into: list[bytes], limit: int, ptype: int) -> None:
        nonlocal size
        if len(rec) > room:
            raise WireError(f"a {len(rec)}-byte record does not fit a {max_size}-byte datagram")
        if len(into) == limit or size + len(rec) > room:
            flush(ptype)
        into.append(rec)
        size += len(rec)

    for rec in topic_queries:
        add(rec, cur_q, 0xFF, _T_NORMAL)
    for rec in tirs:
        add(rec, cur_i, 0xFFFF, _T_NORMAL)
    flush(_T_NORMAL)
    for rec in wildcard_queries:
        add(rec, cur_q, 0xFF, _T_WILDCARD)
    flush(_T_WILDCARD)
    return out
