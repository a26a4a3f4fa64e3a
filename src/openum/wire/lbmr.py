"""LBMR: Ultra Messaging topic resolution datagrams (W1, ``shared/wire/lbmr-topic-resolution.md``).

Implements W1 §3 (normal and extended header), §4 (TQRs, wildcard TQRs, TIRs), §5 (transport info),
§6 (TIR topic options), §7 (topic management), §8 (UMQ QQRs/QIRs), §9 (extended types), §10 (LBMR
packet options) and the robust-parser rules of §13.  The byte layouts were checked against tshark 4.0.17
(W1 §14); where W1 is silent, Wireshark's ``packet-lbmr.c`` was read for facts.  The behaviour these
records serve is seed chapter 8.1 (UDP-based topic resolution: TIRs, TQRs, wildcard TQRs, packing several
records per datagram) and chapters 15-16 (lbmrd keepalives).

One UDP payload is one :class:`LbmrPacket`: a body record (for example :class:`TopicResolution` holding
:class:`TopicQuery` and :class:`TopicInfo` records) plus optional packet options.  :func:`encode_packet`
and :func:`decode_packet` convert; :func:`pack_records` packs many queries and advertisements into as few
datagrams as fit.  Every decoder raises :class:`~openum.wire._common.WireError` and nothing else.

Decoding is strict where the format is fixed (bytes left over after a body without packet options, a
wrong transport length, a zero-length option are all errors) and lenient where W1 says to skip
(unknown options by their length, padding after a NUL inside a record whose length is given).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntFlag
from typing import ClassVar, Final, Self, TypeAlias, cast

from openum.wire._common import Buffer, WireError, as_view, encode_cstring, ip_from_bytes, ip_to_bytes

__all__ = [
    "DEFAULT_MAX_DATAGRAM",
    "PATTERN_PCRE",
    "PATTERN_REGEX",
    "PSER_ELECTION",
    "PSER_REELECTION",
    "QMGMT_CNIL",
    "QMGMT_EC",
    "QMGMT_EV",
    "QMGMT_IKA",
    "QMGMT_IL",
    "QMGMT_JR",
    "QMGMT_JREJ",
    "QMGMT_QRO",
    "SOURCE_TYPE_APPLICATION",
    "SOURCE_TYPE_GATEWAY",
    "SOURCE_TYPE_STORE",
    "TMR_LEAVE",
    "TMR_USE",
    "TRANSPORT_LBTIPC",
    "TRANSPORT_LBTRDMA",
    "TRANSPORT_LBTRM",
    "TRANSPORT_LBTRU",
    "TRANSPORT_LBTSMX",
    "TRANSPORT_TCP",
    "Body",
    "ContextInfo",
    "ContextInfoFlags",
    "ContextInstanceOption",
    "CostOption",
    "DomainIdOption",
    "ExtendedFunctionalityOption",
    "Functionality",
    "GatewayAddressOption",
    "GatewayContextFlags",
    "GatewayContextInfo",
    "GatewayContextInstanceOption",
    "GatewayDomainOption",
    "GatewayInterest",
    "GatewayNameOption",
    "GatewayOption",
    "GatewayTopicResolutionRequest",
    "InterestFlags",
    "InterestRecord",
    "LateJoinFlags",
    "LateJoinOption",
    "LbmrPacket",
    "LbtipcTransport",
    "LbtrdmaTransport",
    "LbtrmTransport",
    "LbtruTransport",
    "LbtsmxTransport",
    "LocalDomainOption",
    "OtidOption",
    "PacketOption",
    "ProxySourceElection",
    "PserOption",
    "QueueContextInstanceOption",
    "QueueGroup",
    "QueueInfo",
    "QueueInfoFlags",
    "QueueInstance",
    "QueueManagement",
    "QueueManagementFlags",
    "QueueManagementInstance",
    "QueueQuery",
    "QueueResolution",
    "ReceiverAlive",
    "RemoteAddressOption",
    "RemoteContextInfo",
    "RemoteContextRecord",
    "RemoteDomainOption",
    "RemoteDomainRoute",
    "RemoteInstanceOption",
    "RemoteNameOption",
    "RemoteOption",
    "ResolutionRequestFlags",
    "ResolverKeepalive",
    "SourceAlive",
    "SourceIdOption",
    "SourceTypeOption",
    "StoreContextInstanceOption",
    "TcpTransport",
    "TopicInfo",
    "TopicManagement",
    "TopicManagementFlags",
    "TopicManagementRecord",
    "TopicOption",
    "TopicQuery",
    "TopicResolution",
    "TopicResolutionRequest",
    "Transport",
    "UlbOption",
    "UmeFlags",
    "UmeOption",
    "UmeStoreGroupOption",
    "UmeStoreOption",
    "UmqQueueInfoOption",
    "UmqRcrIndexOption",
    "UnknownOption",
    "UnknownTransport",
    "VersionFlags",
    "VersionOption",
    "WildcardQuery",
    "WildcardResolution",
    "decode_packet",
    "encode_packet",
    "pack_records",
]

# --------------------------------------------------------------------------------------- constants

#: The largest LBMR datagram a context sends by default: UM's ``resolver_datagram_max_size`` (8192 in
#: the UM configuration guide; the option is not in the seed's option table).
DEFAULT_MAX_DATAGRAM: Final = 8192

# W1 §3.1 packet types (low three bits of the first byte).
_T_NORMAL: Final = 0
_T_WILDCARD: Final = 1
_T_RCV_ALIVE: Final = 2
_T_SRC_ALIVE: Final = 3
_T_TOPIC_MGMT: Final = 4
_T_QUEUE: Final = 6
_T_EXT: Final = 7
_OPTS_BIT: Final = 0x08
# W1 §3.3 extended types (second byte when the type is 7).
_X_PSER: Final = 1
_X_QMGMT: Final = 2
_X_CTXINFO: Final = 3
_X_TRREQ: Final = 4
_X_TNWG: Final = 5
_X_RDR: Final = 6
_X_RCTXINFO: Final = 7

# W1 §5 transport types (TIR transport byte, bits 0x7F).
TRANSPORT_TCP: Final = 0x00
TRANSPORT_LBTRU: Final = 0x01
TRANSPORT_LBTSMX: Final = 0x04
TRANSPORT_LBTRM: Final = 0x10
TRANSPORT_LBTRDMA: Final = 0x20
TRANSPORT_LBTIPC: Final = 0x40
_TIR_OPTIONS_BIT: Final = 0x80

# W1 §4.2 wildcard pattern types.
PATTERN_PCRE: Final = 1
PATTERN_REGEX: Final = 2
# W1 §7 topic management record types.
TMR_LEAVE: Final = 0
TMR_USE: Final = 1
# W1 §9.1 proxy source election dependent types.
PSER_ELECTION: Final = 0
PSER_REELECTION: Final = 1
# W1 §9.2 queue management packet types.
QMGMT_IL: Final = 1
QMGMT_JR: Final = 2
QMGMT_JREJ: Final = 3
QMGMT_IKA: Final = 4
QMGMT_EC: Final = 5
QMGMT_EV: Final = 6
QMGMT_CNIL: Final = 7
QMGMT_QRO: Final = 8
# W1 §10 source types of the 0x82 packet option.
SOURCE_TYPE_APPLICATION: Final = 0
SOURCE_TYPE_GATEWAY: Final = 1
SOURCE_TYPE_STORE: Final = 2

# UM limits topic names to 256 bytes including the NUL (LBM_MAX_TOPIC_NAME_LEN).
_NAME_MAX: Final = 255
# A name inside a u8-length option: 255 - 4-byte option header - NUL.
_OPT_NAME_MAX: Final = 250


class UmeFlags(IntFlag):
    """Flags of the UME topic option (0x01)."""

    IGNORE = 0x8000
    LATE_JOIN = 0x4000
    STORE = 0x2000
    QUORUM_CAPABLE = 0x1000
    ACK_TO_SOURCE = 0x0800


class LateJoinFlags(IntFlag):
    """Flags of the late-join topic option (0x04)."""

    IGNORE = 0x8000
    ACK_TO_SOURCE = 0x4000


class QueueInfoFlags(IntFlag):
    """Flags of the UMQ queue-info topic option (0x06)."""

    IGNORE = 0x8000
    QUEUE = 0x4000
    RECEIVER_LISTEN = 0x2000
    CONTROL = 0x1000
    SOURCE_RECEIVER_LISTEN = 0x0800
    PARTICIPANTS_ONLY = 0x0400


class Functionality(IntFlag):
    """Functionality flags of the extended-functionality topic option (0x0E)."""

    LATE_JOIN = 0x1
    UME = 0x2
    UMQ = 0x4
    ULB = 0x8


class TopicManagementFlags(IntFlag):
    """Flags of a topic management record (W1 §7)."""

    RESPONSE = 0x80
    WILDCARD_PCRE = 0x40
    WILDCARD_REGEX = 0x20


class ContextInfoFlags(IntFlag):
    """Flags of a context-information message (W1 §9.3); the name flag 0x0001 follows ``name``."""

    QUERY = 0x8000
    IP = 0x4000
    INSTANCE = 0x2000
    GATEWAY_SOURCE = 0x1000
    GATEWAY_RECEIVER = 0x0800
    PROXY = 0x0400


class ResolutionRequestFlags(IntFlag):
    """What a topic resolution request (W1 §9.4) asks other contexts to resend."""

    GATEWAY_REMOTE_INTEREST = 0x40
    CONTEXT_QUERY = 0x20
    CONTEXT_ADVERTISEMENT = 0x10
    GATEWAY_META = 0x08
    ADVERTISEMENT = 0x04
    QUERY = 0x02
    WILDCARD_QUERY = 0x01


class VersionFlags(IntFlag):
    """Flags of the version packet option (0x83)."""

    IGNORE = 0x8000
    UME = 0x0001
    UMQ = 0x0002


class InterestFlags(IntFlag):
    """Flags of a gateway interest record (W1 §9.5)."""

    PATTERN = 0x80
    CANCEL = 0x40
    REFRESH = 0x20


class GatewayContextFlags(IntFlag):
    """``flags1`` of a gateway context-information message (W1 §9.5)."""

    QUERY = 0x80000000
    GATEWAY_SOURCE = 0x40000000
    GATEWAY_RECEIVER = 0x20000000
    PROXY = 0x10000000


class QueueManagementFlags(IntFlag):
    """Queue management flags (W1 §9.2); the N flag (0x40) follows ``queue_name``."""

    IGNORE = 0x80
    NEW_INSTANCE_LIST = 0x20
    KEEPALIVE_REQUESTED = 0x10


_QMGMT_NAME_BIT: Final = 0x40
_CTXINFO_NAME_BIT: Final = 0x0001
_PSER_OPTIONS_BIT: Final = 0x8000
_QIR_OPTIONS_BIT: Final = 0x8000
_REMOTE_QUERY_BIT: Final = 0x8000

# --------------------------------------------------------------------------------------- structs

_HDR: Final = struct.Struct(">BBH")  # ver_type, tqrs, tirs
_OPT_HDR: Final = struct.Struct(">BBH")  # type, len, flags (or total length)
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_TIR: Final = struct.Struct(">BBHI")  # transport, tlen, ttl, topic index
_XP_SID: Final = struct.Struct(">4sIH")  # ip, session id, port (TCP, LBT-RU, LBT-RDMA)
_XP_LEGACY: Final = struct.Struct(">4sH")  # ip, port (TCP, LBT-RU without session id)
_XP_LBTRM: Final = struct.Struct(">4s4sIHH")
_XP_HOST: Final = struct.Struct(">IIH")  # host id, session id, transport id (IPC, SMX)
_TOPT_UME: Final = struct.Struct(">BBHHH4s4sIIII")
_TOPT_UME_STORE: Final = struct.Struct(">BBBBHH4sI")
_TOPT_UME_STORE_GROUP: Final = struct.Struct(">BBBBHH")
_TOPT_LATEJOIN: Final = struct.Struct(">BBHHH4sIII")
_TOPT_U32: Final = struct.Struct(">BBHI")  # rcr index, domain id (also packet/gateway/remote options)
_TOPT_COST: Final = struct.Struct(">BBBBi")
_TOPT_OTID: Final = struct.Struct(">BBH32s")
_TOPT_CTXINST: Final = struct.Struct(">BBBB8s")
_TOPT_ULB: Final = struct.Struct(">BBHIQI4sHH")
_TOPT_EXFUNC: Final = struct.Struct(">BBHHH4sI")
_OPT_INSTANCE: Final = struct.Struct(">BBH8s")  # source id, gateway/remote context instance
_OPT_SRC_TYPE: Final = struct.Struct(">BBBB")
_TMR: Final = struct.Struct(">HBB")
_QIR: Final = struct.Struct(">IIIHH")
_QIR_GROUP: Final = struct.Struct(">HH")
_QIR_QUEUE: Final = struct.Struct(">4sHHHH")
_PSER: Final = struct.Struct(">BBHHH4s4sIIHH")
_QMGMT: Final = struct.Struct(">BBBB20sII4sHHHH")
_QMGMT_INST: Final = struct.Struct(">4sHHHH")
_QMGMT_EV: Final = struct.Struct(">II")
_CTXINFO: Final = struct.Struct(">BBBBHH4s8s")
_TNWG: Final = struct.Struct(">BBHHH")  # ver_type, ext, len, type, reserved
_TNWG_INTEREST_REC: Final = struct.Struct(">HBBI")
_TNWG_CTXINFO: Final = struct.Struct(">HBBII")
_TNWG_ADDRESS: Final = struct.Struct(">BBHHH4s")
_RDR: Final = struct.Struct(">BBH4sHHI")
_RCTX: Final = struct.Struct(">BBHHH")
_RCTX_ADDRESS: Final = struct.Struct(">BBHI4sHH")

# --------------------------------------------------------------------------------------- helpers


def _uint(value: object, bits: int, what: str) -> None:
    if not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise WireError(f"{what} must be an integer in 0..{(1 << bits) - 1}, got {value!r}")


def _blob(value: object, size: int | None, what: str, max_size: int = 0xFFFF) -> None:
    if not isinstance(value, bytes):
        raise WireError(f"{what} must be bytes, got {type(value).__name__}")
    if size is not None and len(value) != size:
        raise WireError(f"{what} must be {size} bytes, got {len(value)}")
    if len(value) > max_size:
        raise WireError(f"{what} is {len(value)} bytes; at most {max_size} fit")


def _text(value: object, what: str) -> None:
    if not isinstance(value, str):
        raise WireError(f"{what} must be a str, got {type(value).__name__}")


def _items(value: object, allowed: tuple[type, ...], what: str, limit: int = 0xFFFF) -> None:
    if not isinstance(value, tuple):
        raise WireError(f"{what} must be a tuple, got {type(value).__name__}")
    if len(value) > limit:
        raise WireError(f"{what}: {len(value)} items; at most {limit} fit")
    for item in value:
        if not isinstance(item, allowed):
            raise WireError(f"{what}: {type(item).__name__} does not belong here")


def _cstr(text: str, what: str, max_len: int = _NAME_MAX) -> bytes:
    try:
        return encode_cstring(text, what, max_len=max_len)
    except UnicodeEncodeError as exc:
        raise WireError(f"{what} cannot be encoded: {text!r}") from exc


def _ip(addr: str, what: str = "IPv4 address") -> bytes:
    if not isinstance(addr, str):
        raise WireError(f"{what} must be a dotted-quad str, got {type(addr).__name__}")
    return ip_to_bytes(addr)


def _need(off: int, size: int, end: int, what: str) -> None:
    if off + size > end:
        raise WireError(f"truncated {what}: need {size} bytes, {max(0, end - off)} left", offset=off)


def _read_name(data: bytes, off: int, end: int, what: str, max_len: int = _NAME_MAX) -> tuple[str, int]:
    """A NUL-terminated name in ``data[off:end]``; returns ``(name, offset after the NUL)``."""
    nul = data.find(b"\x00", off, end)
    if nul < 0:
        raise WireError(f"{what} is not NUL-terminated", offset=off)
    if nul - off > max_len:
        raise WireError(f"{what} is {nul - off} bytes long; at most {max_len} are allowed", offset=off)
    # surrogateescape: any byte sequence decodes and re-encodes unchanged
    return data[off:nul].decode("utf-8", "surrogateescape"), nul + 1


# --------------------------------------------------------------------------------------- options


class _Option:
    """Base of the fixed-type options; subclasses are frozen slotted dataclasses."""

    __slots__ = ()
    TYPE: ClassVar[int]
    #: Smallest valid ``len``; for fixed-size options the only valid one.
    SIZE: ClassVar[int]
    VARIABLE: ClassVar[bool] = False

    def _pack(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class UnknownOption:
    """An option whose type this codec does not know: kept so that it round-trips (W1 §6.1, §13)."""

    type: int
    flags: int
    data: bytes

    def __post_init__(self) -> None:
        _uint(self.type, 8, "option type")
        _uint(self.flags, 16, "option flags")
        _blob(self.data, None, "option data", 255 - 4)

    def _pack(self) -> bytes:
        return _OPT_HDR.pack(self.type, 4 + len(self.data), self.flags) + self.data


def _walk_options(
    data: bytes,
    off: int,
    end: int,
    table: Mapping[int, type[_Option]],
    *,
    exact: bool,
    what: str,
    skip: int = -1,
) -> tuple[_Option | UnknownOption, ...]:
    """Options of the common ``type, len, flags`` form in ``data[off:end]``, stepped by ``len``.

    ``exact``: the container's dissector steps known options by their fixed size, so ``len`` must equal
    it; otherwise a longer ``len`` is accepted and its extra bytes ignored (a newer peer's extension).
    ``skip``: a 4-byte option type that carries nothing worth keeping (the packet length option).
    """
    out: list[_Option | UnknownOption] = []
    while off < end:
        _need(off, 4, end, f"{what} option header")
        otype = data[off]
        olen = data[off + 1]
        if olen < 4:  # zero length would loop forever (W1 §6.1)
            raise WireError(f"{what} option 0x{otype:02x} has length {olen}", offset=off)
        _need(off, olen, end, f"{what} option 0x{otype:02x}")
        if otype == skip:
            if olen != 4:
                raise WireError(f"{what} length option has length {olen}", offset=off)
            off += 4
            continue
        cls = table.get(otype)
        if cls is None:
            out.append(UnknownOption(otype, _U16.unpack_from(data, off + 2)[0], data[off + 4 : off + olen]))
        else:
            if olen < cls.SIZE or (exact and not cls.VARIABLE and olen != cls.SIZE):
                raise WireError(f"{what} option 0x{otype:02x} has length {olen}, not {cls.SIZE}", offset=off)
            out.append(cls._unpack(data, off, olen))
        off += olen
    return tuple(out)


def _check_options(
    options: object, table: Mapping[int, type[_Option]], what: str, reserved: int = -1
) -> None:
    _items(options, (*table.values(), UnknownOption), what)
    for opt in cast(tuple[object, ...], options):
        if isinstance(opt, UnknownOption) and (opt.type in table or opt.type == reserved):
            raise WireError(f"{what}: UnknownOption type 0x{opt.type:02x} is reserved; use its class")


# ---- TIR topic options (W1 §6.2)


@dataclass(frozen=True, slots=True)
class UmeOption(_Option):
    """Topic option 0x01: the source is persistent (UME); flags :class:`UmeFlags`."""

    TYPE: ClassVar[int] = 0x01
    SIZE: ClassVar[int] = 32
    flags: int = 0
    store_port: int = 0
    source_port: int = 0
    store_ip: str = "0.0.0.0"
    source_ip: str = "0.0.0.0"
    source_registration_id: int = 0
    transport_index: int = 0
    high_sequence: int = 0
    low_sequence: int = 0

    def __post_init__(self) -> None:
        _uint(self.flags, 16, "UME flags")
        _uint(self.store_port, 16, "UME store port")
        _uint(self.source_port, 16, "UME source port")
        _uint(self.source_registration_id, 32, "UME source registration id")
        _uint(self.transport_index, 32, "UME transport index")
        _uint(self.high_sequence, 32, "UME high sequence number")
        _uint(self.low_sequence, 32, "UME low sequence number")

    def _pack(self) -> bytes:
        return _TOPT_UME.pack(
            self.TYPE,
            self.SIZE,
            self.flags,
            self.store_port,
            self.source_port,
            _ip(self.store_ip),
            _ip(self.source_ip),
            self.source_registration_id,
            self.transport_index,
            self.high_sequence,
            self.low_sequence,
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, store_port, src_port, store_ip, src_ip, reg, xidx, high, low = _TOPT_UME.unpack_from(
            data, off
        )
        return cls(
            flags, store_port, src_port, ip_from_bytes(store_ip), ip_from_bytes(src_ip), reg, xidx, high, low
        )


@dataclass(frozen=True, slots=True)
class UmeStoreOption(_Option):
    """Topic option 0x02: one store of the source (flags: 0x80 ignore)."""

    TYPE: ClassVar[int] = 0x02
    SIZE: ClassVar[int] = 16
    store_ip: str
    store_port: int
    store_index: int = 0
    group_index: int = 0
    source_registration_id: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.store_port, 16, "UME store port")
        _uint(self.store_index, 16, "UME store index")
        _uint(self.group_index, 8, "UME store group index")
        _uint(self.source_registration_id, 32, "UME store source registration id")
        _uint(self.flags, 8, "UME store flags")

    def _pack(self) -> bytes:
        return _TOPT_UME_STORE.pack(
            self.TYPE,
            self.SIZE,
            self.flags,
            self.group_index,
            self.store_port,
            self.store_index,
            _ip(self.store_ip),
            self.source_registration_id,
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, grp, port, idx, ip, reg = _TOPT_UME_STORE.unpack_from(data, off)
        return cls(ip_from_bytes(ip), port, idx, grp, reg, flags)


@dataclass(frozen=True, slots=True)
class UmeStoreGroupOption(_Option):
    """Topic option 0x03: a store group of the source (flags: 0x80 ignore)."""

    TYPE: ClassVar[int] = 0x03
    SIZE: ClassVar[int] = 8
    group_index: int
    group_size: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.group_index, 8, "UME store group index")
        _uint(self.group_size, 16, "UME store group size")
        _uint(self.flags, 8, "UME store group flags")

    def _pack(self) -> bytes:
        return _TOPT_UME_STORE_GROUP.pack(
            self.TYPE, self.SIZE, self.flags, self.group_index, self.group_size, 0
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, grp, size, _reserved = _TOPT_UME_STORE_GROUP.unpack_from(data, off)
        return cls(grp, size, flags)


@dataclass(frozen=True, slots=True)
class LateJoinOption(_Option):
    """Topic option 0x04: the source offers late join for ``low_sequence..high_sequence``."""

    TYPE: ClassVar[int] = 0x04
    SIZE: ClassVar[int] = 24
    source_ip: str
    source_port: int
    high_sequence: int = 0
    low_sequence: int = 0
    transport_index: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.source_port, 16, "late-join source port")
        _uint(self.high_sequence, 32, "late-join high sequence number")
        _uint(self.low_sequence, 32, "late-join low sequence number")
        _uint(self.transport_index, 32, "late-join transport index")
        _uint(self.flags, 16, "late-join flags")

    def _pack(self) -> bytes:
        return _TOPT_LATEJOIN.pack(
            self.TYPE,
            self.SIZE,
            self.flags,
            self.source_port,
            0,
            _ip(self.source_ip),
            self.transport_index,
            self.high_sequence,
            self.low_sequence,
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, port, _reserved, ip, xidx, high, low = _TOPT_LATEJOIN.unpack_from(data, off)
        return cls(ip_from_bytes(ip), port, high, low, xidx, flags)


@dataclass(frozen=True, slots=True)
class UmqRcrIndexOption(_Option):
    """Topic option 0x05: UMQ receiver control record index."""

    TYPE: ClassVar[int] = 0x05
    SIZE: ClassVar[int] = 8
    rcr_index: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.rcr_index, 32, "UMQ RCR index")
        _uint(self.flags, 16, "UMQ RCR index flags")

    def _pack(self) -> bytes:
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.rcr_index)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, idx = _TOPT_U32.unpack_from(data, off)
        return cls(idx, flags)


@dataclass(frozen=True, slots=True)
class UmqQueueInfoOption(_Option):
    """Topic option 0x06: UMQ queue information (flags :class:`QueueInfoFlags`)."""

    TYPE: ClassVar[int] = 0x06
    SIZE: ClassVar[int] = 5
    VARIABLE: ClassVar[bool] = True
    queue: str
    flags: int = 0

    def __post_init__(self) -> None:
        _text(self.queue, "UMQ queue name")
        _uint(self.flags, 16, "UMQ queue info flags")

    def _pack(self) -> bytes:
        name = _cstr(self.queue, "UMQ queue name", _OPT_NAME_MAX)
        return _OPT_HDR.pack(self.TYPE, 4 + len(name), self.flags) + name

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        name, _ = _read_name(data, off + 4, off + olen, "UMQ queue name", _OPT_NAME_MAX)
        return cls(name, _U16.unpack_from(data, off + 2)[0])


@dataclass(frozen=True, slots=True)
class CostOption(_Option):
    """Topic option 0x07: route cost (a signed 32-bit cost) and hop count."""

    TYPE: ClassVar[int] = 0x07
    SIZE: ClassVar[int] = 8
    cost: int
    hop_count: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.cost, int) or not -(1 << 31) <= self.cost < (1 << 31):
            raise WireError(f"cost must be a signed 32-bit integer, got {self.cost!r}")
        _uint(self.hop_count, 8, "cost hop count")
        _uint(self.flags, 8, "cost flags")

    def _pack(self) -> bytes:
        return _TOPT_COST.pack(self.TYPE, self.SIZE, self.flags, self.hop_count, self.cost)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, hops, cost = _TOPT_COST.unpack_from(data, off)
        return cls(cost, hops, flags)


@dataclass(frozen=True, slots=True)
class OtidOption(_Option):
    """Topic option 0x08: originating transport id (32 opaque bytes)."""

    TYPE: ClassVar[int] = 0x08
    SIZE: ClassVar[int] = 36
    otid: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.otid, 32, "OTID")
        _uint(self.flags, 16, "OTID flags")

    def _pack(self) -> bytes:
        return _TOPT_OTID.pack(self.TYPE, self.SIZE, self.flags, self.otid)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, otid = _TOPT_OTID.unpack_from(data, off)
        return cls(otid, flags)


@dataclass(frozen=True, slots=True)
class ContextInstanceOption(_Option):
    """Topic option 0x09: the source's context instance (8 opaque bytes)."""

    TYPE: ClassVar[int] = 0x09
    SIZE: ClassVar[int] = 12
    instance: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, "context instance")
        _uint(self.flags, 8, "context instance flags")

    def _pack(self) -> bytes:
        return _TOPT_CTXINST.pack(self.TYPE, self.SIZE, self.flags, 0, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, _reserved, inst = _TOPT_CTXINST.unpack_from(data, off)
        return cls(inst, flags)


@dataclass(frozen=True, slots=True)
class StoreContextInstanceOption(_Option):
    """Topic option 0x0A: a store's context instance with its index."""

    TYPE: ClassVar[int] = 0x0A
    SIZE: ClassVar[int] = 12
    instance: bytes
    index: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, "store context instance")
        _uint(self.index, 8, "store context instance index")
        _uint(self.flags, 8, "store context instance flags")

    def _pack(self) -> bytes:
        return _TOPT_CTXINST.pack(self.TYPE, self.SIZE, self.flags, self.index, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, idx, inst = _TOPT_CTXINST.unpack_from(data, off)
        return cls(inst, idx, flags)


@dataclass(frozen=True, slots=True)
class UlbOption(_Option):
    """Topic option 0x0B: UMQ ultra load balancing source."""

    TYPE: ClassVar[int] = 0x0B
    SIZE: ClassVar[int] = 28
    queue_id: int
    registration_id: int
    ulb_source_id: int
    source_ip: str
    source_port: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.queue_id, 32, "ULB queue id")
        _uint(self.registration_id, 64, "ULB registration id")
        _uint(self.ulb_source_id, 32, "ULB source id")
        _uint(self.source_port, 16, "ULB source port")
        _uint(self.flags, 16, "ULB flags")

    def _pack(self) -> bytes:
        return _TOPT_ULB.pack(
            self.TYPE,
            self.SIZE,
            self.flags,
            self.queue_id,
            self.registration_id,
            self.ulb_source_id,
            _ip(self.source_ip),
            self.source_port,
            0,
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, qid, reg, src_id, ip, port, _reserved = _TOPT_ULB.unpack_from(data, off)
        return cls(qid, reg, src_id, ip_from_bytes(ip), port, flags)


@dataclass(frozen=True, slots=True)
class QueueContextInstanceOption(_Option):
    """Topic option 0x0C: a queue's context instance with its index."""

    TYPE: ClassVar[int] = 0x0C
    SIZE: ClassVar[int] = 12
    instance: bytes
    index: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, "queue context instance")
        _uint(self.index, 8, "queue context instance index")
        _uint(self.flags, 8, "queue context instance flags")

    def _pack(self) -> bytes:
        return _TOPT_CTXINST.pack(self.TYPE, self.SIZE, self.flags, self.index, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, idx, inst = _TOPT_CTXINST.unpack_from(data, off)
        return cls(inst, idx, flags)


@dataclass(frozen=True, slots=True)
class DomainIdOption(_Option):
    """Topic option 0x0D: the source's topic resolution domain id.

    Keep ``flags`` 0: Wireshark registers them 8 bits wide (W1 §12.3).
    """

    TYPE: ClassVar[int] = 0x0D
    SIZE: ClassVar[int] = 8
    domain_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, "domain id")
        _uint(self.flags, 16, "domain id flags")

    def _pack(self) -> bytes:
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.domain_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain = _TOPT_U32.unpack_from(data, off)
        return cls(domain, flags)


@dataclass(frozen=True, slots=True)
class ExtendedFunctionalityOption(_Option):
    """Topic option 0x0E: what the source offers (:class:`Functionality`) and where to reach it."""

    TYPE: ClassVar[int] = 0x0E
    SIZE: ClassVar[int] = 16
    source_ip: str
    source_port: int
    functionality: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.source_port, 16, "extended functionality source port")
        _uint(self.functionality, 32, "functionality flags")
        _uint(self.flags, 16, "extended functionality flags")

    def _pack(self) -> bytes:
        return _TOPT_EXFUNC.pack(
            self.TYPE, self.SIZE, self.flags, self.source_port, 0, _ip(self.source_ip), self.functionality
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, port, _reserved, ip, func = _TOPT_EXFUNC.unpack_from(data, off)
        return cls(ip_from_bytes(ip), port, func, flags)


TopicOption: TypeAlias = (
    UmeOption
    | UmeStoreOption
    | UmeStoreGroupOption
    | LateJoinOption
    | UmqRcrIndexOption
    | UmqQueueInfoOption
    | CostOption
    | OtidOption
    | ContextInstanceOption
    | StoreContextInstanceOption
    | UlbOption
    | QueueContextInstanceOption
    | DomainIdOption
    | ExtendedFunctionalityOption
    | UnknownOption
)

_TOPIC_OPTIONS: Final[Mapping[int, type[_Option]]] = {
    cls.TYPE: cls
    for cls in (
        UmeOption,
        UmeStoreOption,
        UmeStoreGroupOption,
        LateJoinOption,
        UmqRcrIndexOption,
        UmqQueueInfoOption,
        CostOption,
        OtidOption,
        ContextInstanceOption,
        StoreContextInstanceOption,
        UlbOption,
        QueueContextInstanceOption,
        DomainIdOption,
        ExtendedFunctionalityOption,
    )
}


def _encode_topic_options(options: tuple[TopicOption, ...]) -> bytes:
    """The option block: a 4-byte length option (type 0) whose total includes itself (W1 §6.1)."""
    body = b"".join(opt._pack() for opt in options)
    if len(body) + 4 > 0xFFFF:
        raise WireError(f"topic option block of {len(body) + 4} bytes does not fit its u16 length")
    return _OPT_HDR.pack(0x00, 4, len(body) + 4) + body


def _decode_topic_options(data: bytes, off: int, end: int) -> tuple[tuple[TopicOption, ...], int]:
    _need(off, 4, end, "topic option block")
    otype, olen, total = _OPT_HDR.unpack_from(data, off)
    if otype != 0x00 or olen != 4:
        raise WireError("topic option block does not start with a length option", offset=off)
    if total < 4:
        raise WireError(f"topic option block length {total} is shorter than its header", offset=off)
    _need(off, total, end, "topic option block")
    opts = _walk_options(data, off + 4, off + total, _TOPIC_OPTIONS, exact=False, what="topic")
    return cast(tuple[TopicOption, ...], opts), off + total


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
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.version)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, version = _TOPT_U32.unpack_from(data, off)
        return cls(version, flags)


@dataclass(frozen=True, slots=True)
class LocalDomainOption(_Option):
    """Packet option 0x84: the sender's local topic resolution domain id."""

    TYPE: ClassVar[int] = 0x84
    SIZE: ClassVar[int] = 8
    domain_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, "local domain id")
        _uint(self.flags, 16, "local domain flags")

    def _pack(self) -> bytes:
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.domain_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain = _TOPT_U32.unpack_from(data, off)
        return cls(domain, flags)


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


# --------------------------------------------------------------------------------------- transports


class _Transport:
    __slots__ = ()
    TYPE: ClassVar[int]

    def _pack(self) -> bytes:
        raise NotImplementedError

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        raise NotImplementedError


def _wrong_tlen(name: str, tlen: int, allowed: str) -> WireError:
    return WireError(f"{name} transport info is {tlen} bytes; only {allowed} are valid (W1 §5)")


@dataclass(frozen=True, slots=True)
class TcpTransport(_Transport):
    """LBT-TCP: the source listens on ``ip:port``; ``session_id`` None is the legacy 6-byte form."""

    TYPE: ClassVar[int] = TRANSPORT_TCP
    ip: str
    port: int
    session_id: int | None

    def __post_init__(self) -> None:
        _uint(self.port, 16, "TCP port")
        if self.session_id is not None:
            _uint(self.session_id, 32, "TCP session id")

    def _pack(self) -> bytes:
        if self.session_id is None:
            return _XP_LEGACY.pack(_ip(self.ip), self.port)
        return _XP_SID.pack(_ip(self.ip), self.session_id, self.port)

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen == _XP_SID.size:
            ip, sid, port = _XP_SID.unpack_from(data, off)
            return cls(ip_from_bytes(ip), port, sid)
        if tlen == _XP_LEGACY.size:
            ip, port = _XP_LEGACY.unpack_from(data, off)
            return cls(ip_from_bytes(ip), port, None)
        raise _wrong_tlen("TCP", tlen, "10 or 6")


@dataclass(frozen=True, slots=True)
class LbtruTransport(_Transport):
    """LBT-RU: the source's unicast ``ip:port``; ``session_id`` None is the legacy 6-byte form."""

    TYPE: ClassVar[int] = TRANSPORT_LBTRU
    ip: str
    port: int
    session_id: int | None

    def __post_init__(self) -> None:
        _uint(self.port, 16, "LBT-RU port")
        if self.session_id is not None:
            _uint(self.session_id, 32, "LBT-RU session id")

    def _pack(self) -> bytes:
        if self.session_id is None:
            return _XP_LEGACY.pack(_ip(self.ip), self.port)
        return _XP_SID.pack(_ip(self.ip), self.session_id, self.port)

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen == _XP_SID.size:
            ip, sid, port = _XP_SID.unpack_from(data, off)
            return cls(ip_from_bytes(ip), port, sid)
        if tlen == _XP_LEGACY.size:
            ip, port = _XP_LEGACY.unpack_from(data, off)
            return cls(ip_from_bytes(ip), port, None)
        raise _wrong_tlen("LBT-RU", tlen, "10 or 6")


@dataclass(frozen=True, slots=True)
class LbtrmTransport(_Transport):
    """LBT-RM: data goes to ``group:dest_port``; NAKs go to ``source_ip:source_port``."""

    TYPE: ClassVar[int] = TRANSPORT_LBTRM
    source_ip: str
    group: str
    session_id: int
    dest_port: int
    source_port: int

    def __post_init__(self) -> None:
        _uint(self.session_id, 32, "LBT-RM session id")
        _uint(self.dest_port, 16, "LBT-RM destination port")
        _uint(self.source_port, 16, "LBT-RM source port")

    def _pack(self) -> bytes:
        return _XP_LBTRM.pack(
            _ip(self.source_ip), _ip(self.group), self.session_id, self.dest_port, self.source_port
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen != _XP_LBTRM.size:
            raise _wrong_tlen("LBT-RM", tlen, "16")
        src, group, sid, dport, sport = _XP_LBTRM.unpack_from(data, off)
        return cls(ip_from_bytes(src), ip_from_bytes(group), sid, dport, sport)


@dataclass(frozen=True, slots=True)
class LbtipcTransport(_Transport):
    """LBT-IPC: a shared-memory transport on host ``host_id``."""

    TYPE: ClassVar[int] = TRANSPORT_LBTIPC
    host_id: int
    session_id: int
    transport_id: int

    def __post_init__(self) -> None:
        _uint(self.host_id, 32, "host id")
        _uint(self.session_id, 32, "session id")
        _uint(self.transport_id, 16, "transport id")

    def _pack(self) -> bytes:
        return _XP_HOST.pack(self.host_id, self.session_id, self.transport_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen != _XP_HOST.size:
            raise _wrong_tlen(cls.__name__, tlen, "10")
        return cls(*_XP_HOST.unpack_from(data, off))


@dataclass(frozen=True, slots=True)
class LbtsmxTransport(_Transport):
    """LBT-SMX: a shared-memory transport on host ``host_id``."""

    TYPE: ClassVar[int] = TRANSPORT_LBTSMX
    host_id: int
    session_id: int
    transport_id: int

    def __post_init__(self) -> None:
        _uint(self.host_id, 32, "host id")
        _uint(self.session_id, 32, "session id")
        _uint(self.transport_id, 16, "transport id")

    def _pack(self) -> bytes:
        return _XP_HOST.pack(self.host_id, self.session_id, self.transport_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen != _XP_HOST.size:
            raise _wrong_tlen(cls.__name__, tlen, "10")
        return cls(*_XP_HOST.unpack_from(data, off))


@dataclass(frozen=True, slots=True)
class LbtrdmaTransport(_Transport):
    """LBT-RDMA (decoded for completeness; openum has no RDMA transport)."""

    TYPE: ClassVar[int] = TRANSPORT_LBTRDMA
    ip: str
    session_id: int
    port: int

    def __post_init__(self) -> None:
        _uint(self.session_id, 32, "LBT-RDMA session id")
        _uint(self.port, 16, "LBT-RDMA port")

    def _pack(self) -> bytes:
        return _XP_SID.pack(_ip(self.ip), self.session_id, self.port)

    @classmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        if tlen != _XP_SID.size:
            raise _wrong_tlen("LBT-RDMA", tlen, "10")
        ip, sid, port = _XP_SID.unpack_from(data, off)
        return cls(ip_from_bytes(ip), sid, port)


_TRANSPORTS: Final[Mapping[int, type[_Transport]]] = {
    cls.TYPE: cls
    for cls in (
        TcpTransport,
        LbtruTransport,
        LbtrmTransport,
        LbtipcTransport,
        LbtsmxTransport,
        LbtrdmaTransport,
    )
}


@dataclass(frozen=True, slots=True)
class UnknownTransport:
    """A transport type this codec does not know (TCP6, PGM, ...): skipped by ``tlen`` (W1 §13)."""

    type: int
    data: bytes

    def __post_init__(self) -> None:
        _uint(self.type, 7, "transport type")
        if self.type in _TRANSPORTS:
            raise WireError(f"transport type 0x{self.type:02x} is known; use its class")
        _blob(self.data, None, "transport info", 255)


Transport: TypeAlias = (
    TcpTransport
    | LbtruTransport
    | LbtrmTransport
    | LbtipcTransport
    | LbtsmxTransport
    | LbtrdmaTransport
    | UnknownTransport
)

# --------------------------------------------------------------------------------------- TQR / TIR


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


# --------------------------------------------------------------------------------------- bodies


class _Body:
    __slots__ = ()

    def _encode(self, vt: int) -> bytes:
        """The whole message; ``vt`` is the first byte's version and options bits."""
        raise NotImplementedError


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
        parts = [_HDR.pack(vt | _T_NORMAL, len(self.queries), len(self.infos))]
        parts.extend(q._pack() for q in self.queries)
        parts.extend(t._pack() for t in self.infos)
        return b"".join(parts)


@dataclass(frozen=True, slots=True)
class WildcardResolution(_Body):
    """Type 1: wildcard TQRs, then TIRs (W1 §3.1)."""

    queries: tuple[WildcardQuery, ...] = ()
    infos: tuple[TopicInfo, ...] = ()

    def __post_init__(self) -> None:
        _items(self.queries, (WildcardQuery,), "wildcard TQRs", 0xFF)
        _items(self.infos, (TopicInfo,), "TIRs")

    def _encode(self, vt: int) -> bytes:
        parts = [_HDR.pack(vt | _T_WILDCARD, len(self.queries), len(self.infos))]
        parts.extend(q._pack() for q in self.queries)
        parts.extend(t._pack() for t in self.infos)
        return b"".join(parts)


def _decode_topics(data: bytes, end: int) -> tuple[_Body, int]:
    wildcard = data[0] & 0x07 == _T_WILDCARD
    ntqr = data[1]
    ntir = _U16.unpack_from(data, 2)[0]
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
    count = _U16.unpack_from(data, off + 2)[0]  # the TMB length is not used by the dissector either
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


# ---- UMQ queue resolution (W1 §8)


@dataclass(frozen=True, slots=True)
class QueueQuery:
    """QQR: who serves queue ``queue``?"""

    queue: str

    def __post_init__(self) -> None:
        _text(self.queue, "queue name")


@dataclass(frozen=True, slots=True)
class QueueGroup:
    """A QIR group block."""

    index: int
    size: int

    def __post_init__(self) -> None:
        _uint(self.index, 16, "queue group index")
        _uint(self.size, 16, "queue group size")


@dataclass(frozen=True, slots=True)
class QueueInstance:
    """A QIR queue block: one queue instance at ``ip:port``."""

    ip: str
    port: int
    index: int = 0
    group_index: int = 0

    def __post_init__(self) -> None:
        _uint(self.port, 16, "queue instance port")
        _uint(self.index, 16, "queue instance index")
        _uint(self.group_index, 16, "queue instance group index")


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """QIR: queue ``queue`` serves ``topic`` from ``instances`` (W1 §8)."""

    queue: str
    topic: str
    queue_id: int
    queue_version: int = 0
    previous_version: int = 0
    groups: tuple[QueueGroup, ...] = ()
    instances: tuple[QueueInstance, ...] = ()
    options: tuple[TopicOption, ...] = ()

    def __post_init__(self) -> None:
        _text(self.queue, "queue name")
        _text(self.topic, "QIR topic name")
        _uint(self.queue_id, 32, "queue id")
        _uint(self.queue_version, 32, "queue version")
        _uint(self.previous_version, 32, "previous queue version")
        _items(self.groups, (QueueGroup,), "QIR group blocks", 0x7FFF)  # 0x8000 is the options bit
        _items(self.instances, (QueueInstance,), "QIR queue blocks")
        _check_options(self.options, _TOPIC_OPTIONS, "QIR options")

    def _pack(self) -> bytes:
        grp_blks = len(self.groups) | (_QIR_OPTIONS_BIT if self.options else 0)
        parts = [
            _cstr(self.queue, "queue name"),
            _cstr(self.topic, "QIR topic name"),
            _QIR.pack(
                self.queue_id, self.queue_version, self.previous_version, grp_blks, len(self.instances)
            ),
        ]
        if self.options:
            parts.append(_encode_topic_options(self.options))
        parts.extend(_QIR_GROUP.pack(g.index, g.size) for g in self.groups)
        parts.extend(_QIR_QUEUE.pack(_ip(q.ip), q.port, q.index, q.group_index, 0) for q in self.instances)
        return b"".join(parts)


def _decode_qir(data: bytes, off: int, end: int) -> tuple[QueueInfo, int]:
    queue, off = _read_name(data, off, end, "QIR queue name")
    topic, off = _read_name(data, off, end, "QIR topic name")
    _need(off, _QIR.size, end, "QIR")
    qid, qver, qprev, grp_blks, queue_blks = _QIR.unpack_from(data, off)
    off += _QIR.size
    options: tuple[TopicOption, ...] = ()
    if grp_blks & _QIR_OPTIONS_BIT:
        options, off = _decode_topic_options(data, off, end)
    ngroups = grp_blks & 0x7FFF
    _need(off, ngroups * _QIR_GROUP.size + queue_blks * _QIR_QUEUE.size, end, "QIR blocks")
    groups = []
    for _ in range(ngroups):
        groups.append(QueueGroup(*_QIR_GROUP.unpack_from(data, off)))
        off += _QIR_GROUP.size
    instances = []
    for _ in range(queue_blks):
        ip, port, idx, grp, _reserved = _QIR_QUEUE.unpack_from(data, off)
        instances.append(QueueInstance(ip_from_bytes(ip), port, idx, grp))
        off += _QIR_QUEUE.size
    return QueueInfo(queue, topic, qid, qver, qprev, tuple(groups), tuple(instances), options), off


@dataclass(frozen=True, slots=True)
class QueueResolution(_Body):
    """Type 6: QQRs then QIRs (W1 §8)."""

    queries: tuple[QueueQuery, ...] = ()
    infos: tuple[QueueInfo, ...] = ()

    def __post_init__(self) -> None:
        _items(self.queries, (QueueQuery,), "QQRs", 0xFF)
        _items(self.infos, (QueueInfo,), "QIRs")

    def _encode(self, vt: int) -> bytes:
        parts = [_HDR.pack(vt | _T_QUEUE, len(self.queries), len(self.infos))]
        parts.extend(_cstr(q.queue, "queue name") for q in self.queries)
        parts.extend(i._pack() for i in self.infos)
        return b"".join(parts)


def _decode_queues(data: bytes, end: int) -> tuple[_Body, int]:
    nqqr = data[1]
    nqir = _U16.unpack_from(data, 2)[0]
    off = _HDR.size
    queries = []
    for _ in range(nqqr):
        name, off = _read_name(data, off, end, "QQR queue name")
        queries.append(QueueQuery(name))
    infos = []
    for _ in range(nqir):
        qir, off = _decode_qir(data, off, end)
        infos.append(qir)
    return QueueResolution(tuple(queries), tuple(infos)), off


# ---- extended types (W1 §9)


@dataclass(frozen=True, slots=True)
class PserOption:
    """A proxy-source-election option: type 0 source / 1 store context instance (8 bytes in ``data``)."""

    type: int
    data: bytes

    def __post_init__(self) -> None:
        _uint(self.type, 8, "PSER option type")
        _blob(self.data, 8 if self.type in (0, 1) else None, "PSER option data", 255 - 2)


@dataclass(frozen=True, slots=True)
class ProxySourceElection(_Body):
    """Extended type 1: UME proxy source election (W1 §9.1)."""

    topic: str
    topic_index: int
    source_ip: str
    source_port: int
    store_ip: str
    store_port: int
    transport_index: int = 0
    dependent_type: int = PSER_ELECTION
    options: tuple[PserOption, ...] = ()

    def __post_init__(self) -> None:
        _text(self.topic, "PSER topic")
        _uint(self.topic_index, 32, "PSER topic index")
        _uint(self.source_port, 16, "PSER source port")
        _uint(self.store_port, 16, "PSER store port")
        _uint(self.transport_index, 32, "PSER transport index")
        _uint(self.dependent_type, 16, "PSER dependent type")
        _items(self.options, (PserOption,), "PSER options")

    def _encode(self, vt: int) -> bytes:
        topic = _cstr(self.topic, "PSER topic")
        flags = _PSER_OPTIONS_BIT if self.options else 0
        head = _PSER.pack(
            vt | _T_EXT,
            _X_PSER,
            self.dependent_type,
            _PSER.size + len(topic),
            flags,
            _ip(self.source_ip),
            _ip(self.store_ip),
            self.transport_index,
            self.topic_index,
            self.source_port,
            self.store_port,
        )
        if not self.options:
            return head + topic
        # the PSER option header stores len before type (W1 §12.6)
        opts = b"".join(bytes((2 + len(o.data), o.type)) + o.data for o in self.options)
        if len(opts) + 4 > 0xFFFF:
            raise WireError("PSER options do not fit their u16 length")
        return head + topic + _U16.pack(0) + _U16.pack(len(opts) + 4) + opts


def _decode_pser(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _PSER.size, end, "PSER")
    _, _, dep, plen, flags, src_ip, store_ip, xidx, tidx, sport, stport = _PSER.unpack_from(data, 0)
    if plen <= _PSER.size:
        raise WireError(f"PSER length {plen} leaves no room for a topic", offset=4)
    _need(0, plen, end, "PSER")
    topic, _ = _read_name(data, _PSER.size, plen, "PSER topic")
    off = plen
    options: list[PserOption] = []
    if flags & _PSER_OPTIONS_BIT:
        _need(off, 4, end, "PSER option header")
        optlen = _U16.unpack_from(data, off + 2)[0]
        if optlen < 4:
            raise WireError(f"PSER options length {optlen} is shorter than its header", offset=off)
        _need(off, optlen, end, "PSER options")
        pos, stop = off + 4, off + optlen
        while pos < stop:
            _need(pos, 2, stop, "PSER option")
            olen, otype = data[pos], data[pos + 1]
            if olen < 2 or (otype in (0, 1) and olen != 10):
                raise WireError(f"PSER option 0x{otype:02x} has length {olen}", offset=pos)
            _need(pos, olen, stop, "PSER option")
            options.append(PserOption(otype, data[pos + 2 : pos + olen]))
            pos += olen
        off = stop
    body = ProxySourceElection(
        topic, tidx, ip_from_bytes(src_ip), sport, ip_from_bytes(store_ip), stport, xidx, dep, tuple(options)
    )
    return body, off


@dataclass(frozen=True, slots=True)
class QueueManagementInstance:
    """An instance-list (IL) entry of a queue management message (flags: 0x8000 master, ...)."""

    ip: str
    port: int
    instance_index: int = 0
    group_index: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.port, 16, "instance port")
        _uint(self.instance_index, 16, "instance index")
        _uint(self.group_index, 16, "instance group index")
        _uint(self.flags, 16, "instance flags")


_QMGMT_TAIL_FIELDS: Final[Mapping[int, frozenset[str]]] = {
    QMGMT_IL: frozenset({"highest_rcr_tsp", "instances"}),
    QMGMT_EC: frozenset({"new_version", "value"}),
    QMGMT_EV: frozenset({"highest_rcr_tsp", "age", "value"}),
    QMGMT_QRO: frozenset({"highest_rcr_tsp", "value"}),
}


@dataclass(frozen=True, slots=True)
class QueueManagement(_Body):
    """Extended type 2: UMQ queue management (W1 §9.2).

    ``value`` is the type-dependent 16-bit field (JREJ rejection code, EV bias); for IL it is the
    instance count, taken from ``instances``.  Fields a packet type does not carry must stay 0/empty.
    """

    packet_type: int
    queue_id: int
    queue_version: int = 0
    ip: str = "0.0.0.0"
    port: int = 0
    instance_index: int = 0
    group_index: int = 0
    config_signature: bytes = bytes(20)
    flags: int = 0
    value: int = 0
    highest_rcr_tsp: int = 0
    new_version: int = 0
    age: int = 0
    instances: tuple[QueueManagementInstance, ...] = ()
    queue_name: str | None = None

    def __post_init__(self) -> None:
        if self.packet_type not in range(QMGMT_IL, QMGMT_QRO + 1):
            raise WireError(f"unknown queue management packet type {self.packet_type!r}")
        _uint(self.queue_id, 32, "queue id")
        _uint(self.queue_version, 32, "queue version")
        for name in ("port", "instance_index", "group_index", "value"):
            _uint(getattr(self, name), 16, f"queue management {name}")
        for name in ("highest_rcr_tsp", "new_version", "age"):
            _uint(getattr(self, name), 32, f"queue management {name}")
        _uint(self.flags, 8, "queue management flags")
        if self.flags & _QMGMT_NAME_BIT:
            raise WireError("the queue management N flag follows queue_name; do not set it in flags")
        _blob(self.config_signature, 20, "configuration signature")
        _items(self.instances, (QueueManagementInstance,), "queue management instances")
        if self.queue_name is not None:
            _text(self.queue_name, "queue name")
        carried = _QMGMT_TAIL_FIELDS.get(self.packet_type, frozenset({"value"}))
        for name in ("highest_rcr_tsp", "new_version", "age", "value", "instances"):
            if name not in carried and getattr(self, name):
                raise WireError(f"queue management packet type {self.packet_type} does not carry {name}")

    def _encode(self, vt: int) -> bytes:
        flags = self.flags | (_QMGMT_NAME_BIT if self.queue_name is not None else 0)
        dep16 = len(self.instances) if self.packet_type == QMGMT_IL else self.value
        parts = [
            _QMGMT.pack(
                vt | _T_EXT,
                _X_QMGMT,
                flags,
                self.packet_type,
                self.config_signature,
                self.queue_id,
                self.queue_version,
                _ip(self.ip),
                self.port,
                self.instance_index,
                self.group_index,
                dep16,
            )
        ]
        if self.packet_type == QMGMT_IL:
            parts.append(_U32.pack(self.highest_rcr_tsp))
            parts.extend(
                _QMGMT_INST.pack(_ip(i.ip), i.port, i.instance_index, i.group_index, i.flags)
                for i in self.instances
            )
        elif self.packet_type == QMGMT_EC:
            parts.append(_U32.pack(self.new_version))
        elif self.packet_type == QMGMT_EV:
            parts.append(_QMGMT_EV.pack(self.highest_rcr_tsp, self.age))
        elif self.packet_type == QMGMT_QRO:
            parts.append(_U32.pack(self.highest_rcr_tsp))
        if self.queue_name is not None:
            parts.append(_cstr(self.queue_name, "queue name"))
        return b"".join(parts)


def _decode_qmgmt(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _QMGMT.size, end, "queue management header")
    _, _, flags, ptype, sig, qid, qver, ip, port, inst, grp, dep16 = _QMGMT.unpack_from(data, 0)
    off = _QMGMT.size
    tsp = new_version = age = 0
    instances: list[QueueManagementInstance] = []
    value = dep16
    if ptype == QMGMT_IL:
        value = 0
        _need(off, 4 + dep16 * _QMGMT_INST.size, end, "instance list")
        tsp = _U32.unpack_from(data, off)[0]
        off += 4
        for _ in range(dep16):
            iip, iport, iidx, igrp, iflags = _QMGMT_INST.unpack_from(data, off)
            instances.append(QueueManagementInstance(ip_from_bytes(iip), iport, iidx, igrp, iflags))
            off += _QMGMT_INST.size
    elif ptype == QMGMT_EC:
        _need(off, 4, end, "queue management data")
        new_version = _U32.unpack_from(data, off)[0]
        off += 4
    elif ptype == QMGMT_QRO:
        _need(off, 4, end, "queue management data")
        tsp = _U32.unpack_from(data, off)[0]
        off += 4
    elif ptype == QMGMT_EV:
        _need(off, _QMGMT_EV.size, end, "queue management data")
        tsp, age = _QMGMT_EV.unpack_from(data, off)
        off += _QMGMT_EV.size
    queue_name = None
    if flags & _QMGMT_NAME_BIT:
        # the queue name is the rest of the body (W1 §9.2); a missing NUL is tolerated like tshark does
        rest = data[off:end]
        nul = rest.find(b"\x00")
        raw = rest if nul < 0 else rest[:nul]
        if not rest or len(raw) > _NAME_MAX:
            raise WireError("queue management N flag without a valid queue name", offset=off)
        queue_name = raw.decode("utf-8", "surrogateescape")
        off = end
    body = QueueManagement(
        ptype,
        qid,
        qver,
        ip_from_bytes(ip),
        port,
        inst,
        grp,
        sig,
        flags & ~_QMGMT_NAME_BIT,
        value,
        tsp,
        new_version,
        age,
        tuple(instances),
        queue_name,
    )
    return body, off


@dataclass(frozen=True, slots=True)
class ContextInfo(_Body):
    """Extended type 3: context-name query or context information (W1 §9.3).

    A query: ``flags=ContextInfoFlags.QUERY`` with a name; a response: ``IP | INSTANCE``.
    """

    flags: int = 0
    port: int = 0
    ip: str = "0.0.0.0"
    instance: bytes = bytes(8)
    name: str | None = None
    hop_count: int = 0

    def __post_init__(self) -> None:
        _uint(self.flags, 16, "context info flags")
        if self.flags & _CTXINFO_NAME_BIT:
            raise WireError("the context info name flag follows name; do not set it in flags")
        _uint(self.port, 16, "context info port")
        _blob(self.instance, 8, "context instance")
        _uint(self.hop_count, 8, "context info hop count")
        if self.name is not None:
            _text(self.name, "context name")

    def _encode(self, vt: int) -> bytes:
        name = b"" if self.name is None else _cstr(self.name, "context name", 255 - _CTXINFO.size - 1)
        flags = self.flags | (_CTXINFO_NAME_BIT if self.name is not None else 0)
        return (
            _CTXINFO.pack(
                vt | _T_EXT,
                _X_CTXINFO,
                _CTXINFO.size + len(name),
                self.hop_count,
                flags,
                self.port,
                _ip(self.ip),
                self.instance,
            )
            + name
        )


def _decode_ctxinfo(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _CTXINFO.size, end, "context info")
    _, _, rlen, hops, flags, port, ip, inst = _CTXINFO.unpack_from(data, 0)
    if rlen < _CTXINFO.size:
        raise WireError(f"context info length {rlen} is shorter than its header", offset=2)
    _need(0, rlen, end, "context info")
    name = None
    if flags & _CTXINFO_NAME_BIT:
        name, _ = _read_name(data, _CTXINFO.size, rlen, "context name")
    return ContextInfo(flags & ~_CTXINFO_NAME_BIT, port, ip_from_bytes(ip), inst, name, hops), rlen


@dataclass(frozen=True, slots=True)
class TopicResolutionRequest(_Body):
    """Extended type 4: ask other contexts to resend TR traffic (:class:`ResolutionRequestFlags`)."""

    flags: int

    def __post_init__(self) -> None:
        _uint(self.flags, 16, "topic resolution request flags")

    def _encode(self, vt: int) -> bytes:
        return _HDR.pack(vt | _T_EXT, _X_TRREQ, self.flags)


def _decode_trreq(data: bytes, end: int) -> tuple[_Body, int]:
    return TopicResolutionRequest(_U16.unpack_from(data, 2)[0]), 4


# ---- gateway (TNWG) messages (W1 §9.5)


@dataclass(frozen=True, slots=True)
class GatewayContextInstanceOption(_Option):
    """Gateway option 0: a context instance."""

    TYPE: ClassVar[int] = 0x00
    SIZE: ClassVar[int] = 12
    instance: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, "gateway context instance")
        _uint(self.flags, 16, "gateway option flags")

    def _pack(self) -> bytes:
        return _OPT_INSTANCE.pack(self.TYPE, self.SIZE, self.flags, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, inst = _OPT_INSTANCE.unpack_from(data, off)
        return cls(inst, flags)


@dataclass(frozen=True, slots=True)
class GatewayAddressOption(_Option):
    """Gateway option 1: an address."""

    TYPE: ClassVar[int] = 0x01
    SIZE: ClassVar[int] = 12
    ip: str
    port: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.port, 16, "gateway address port")
        _uint(self.flags, 16, "gateway option flags")

    def _pack(self) -> bytes:
        return _TNWG_ADDRESS.pack(self.TYPE, self.SIZE, self.flags, self.port, 0, _ip(self.ip))

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, port, _reserved, ip = _TNWG_ADDRESS.unpack_from(data, off)
        return cls(ip_from_bytes(ip), port, flags)


@dataclass(frozen=True, slots=True)
class GatewayDomainOption(_Option):
    """Gateway option 2: a domain id."""

    TYPE: ClassVar[int] = 0x02
    SIZE: ClassVar[int] = 8
    domain_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, "gateway domain id")
        _uint(self.flags, 16, "gateway option flags")

    def _pack(self) -> bytes:
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.domain_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain = _TOPT_U32.unpack_from(data, off)
        return cls(domain, flags)


@dataclass(frozen=True, slots=True)
class GatewayNameOption(_Option):
    """Gateway option 3: a name."""

    TYPE: ClassVar[int] = 0x03
    SIZE: ClassVar[int] = 5
    VARIABLE: ClassVar[bool] = True
    name: str
    flags: int = 0

    def __post_init__(self) -> None:
        _text(self.name, "gateway name")
        _uint(self.flags, 16, "gateway option flags")

    def _pack(self) -> bytes:
        name = _cstr(self.name, "gateway name", _OPT_NAME_MAX)
        return _OPT_HDR.pack(self.TYPE, 4 + len(name), self.flags) + name

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        name, _ = _read_name(data, off + 4, off + olen, "gateway name", _OPT_NAME_MAX)
        return cls(name, _U16.unpack_from(data, off + 2)[0])


GatewayOption: TypeAlias = (
    GatewayContextInstanceOption
    | GatewayAddressOption
    | GatewayDomainOption
    | GatewayNameOption
    | UnknownOption
)
_GATEWAY_OPTIONS: Final[Mapping[int, type[_Option]]] = {
    cls.TYPE: cls
    for cls in (GatewayContextInstanceOption, GatewayAddressOption, GatewayDomainOption, GatewayNameOption)
}
_TNWG_TYPE_INTEREST: Final = 0
_TNWG_TYPE_CTXINFO: Final = 1
_TNWG_TYPE_TRREQ: Final = 2


def _tnwg(vt: int, tnwg_type: int, inner: bytes) -> bytes:
    if len(inner) + _TNWG.size > 0xFFFF:
        raise WireError("gateway message does not fit its u16 length")
    # W1 §15: the length is not checked by the dissector; UM's convention is taken as the whole message
    return _TNWG.pack(vt | _T_EXT, _X_TNWG, _TNWG.size + len(inner), tnwg_type, 0) + inner


@dataclass(frozen=True, slots=True)
class InterestRecord:
    """A gateway interest record: ``symbol`` is a topic or, with ``InterestFlags.PATTERN``, a pattern."""

    symbol: str
    domain_id: int = 0
    flags: int = 0
    pattern_type: int = 0

    def __post_init__(self) -> None:
        _text(self.symbol, "interest symbol")
        _uint(self.domain_id, 32, "interest domain id")
        _uint(self.flags, 8, "interest flags")
        _uint(self.pattern_type, 8, "interest pattern type")

    def _pack(self) -> bytes:
        sym = _cstr(self.symbol, "interest symbol")
        return (
            _TNWG_INTEREST_REC.pack(
                _TNWG_INTEREST_REC.size + len(sym), self.flags, self.pattern_type, self.domain_id
            )
            + sym
        )


@dataclass(frozen=True, slots=True)
class GatewayInterest(_Body):
    """Extended type 5, gateway type 0: a gateway's topic/pattern interest."""

    records: tuple[InterestRecord, ...] = ()

    def __post_init__(self) -> None:
        _items(self.records, (InterestRecord,), "interest records")

    def _encode(self, vt: int) -> bytes:
        recs = b"".join(r._pack() for r in self.records)
        if len(recs) + 4 > 0xFFFF:
            raise WireError("interest records do not fit their u16 length")
        return _tnwg(vt, _TNWG_TYPE_INTEREST, _U16.pack(len(recs) + 4) + _U16.pack(len(self.records)) + recs)


@dataclass(frozen=True, slots=True)
class GatewayContextInfo(_Body):
    """Extended type 5, gateway type 1: gateway context information (flags1 :class:`GatewayContextFlags`).

    Wireshark 4.0 misparses a third option here (its option walk adds lengths cumulatively).
    """

    flags1: int = 0
    flags2: int = 0
    hop_count: int = 0
    options: tuple[GatewayOption, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.flags1, 32, "gateway context flags1")
        _uint(self.flags2, 32, "gateway context flags2")
        _uint(self.hop_count, 8, "gateway context hop count")
        _check_options(self.options, _GATEWAY_OPTIONS, "gateway context info options")

    def _encode(self, vt: int) -> bytes:
        opts = b"".join(o._pack() for o in self.options)
        rlen = _TNWG_CTXINFO.size + len(opts)
        if rlen > 0xFFFF:
            raise WireError("gateway context info does not fit its u16 length")
        return _tnwg(
            vt,
            _TNWG_TYPE_CTXINFO,
            _TNWG_CTXINFO.pack(rlen, self.hop_count, 0, self.flags1, self.flags2) + opts,
        )


@dataclass(frozen=True, slots=True)
class GatewayTopicResolutionRequest(_Body):
    """Extended type 5, gateway type 2: a gateway's topic resolution request."""

    options: tuple[GatewayOption, ...] = ()

    def __post_init__(self) -> None:
        _check_options(self.options, _GATEWAY_OPTIONS, "gateway TR request options")

    def _encode(self, vt: int) -> bytes:
        opts = b"".join(o._pack() for o in self.options)
        if len(opts) + 2 > 0xFFFF:
            raise WireError("gateway TR request does not fit its u16 length")
        return _tnwg(vt, _TNWG_TYPE_TRREQ, _U16.pack(2 + len(opts)) + opts)


def _decode_tnwg(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _TNWG.size, end, "gateway message header")
    tnwg_type = _U16.unpack_from(data, 4)[0]
    off = _TNWG.size
    if tnwg_type == _TNWG_TYPE_INTEREST:
        _need(off, 4, end, "interest header")
        count = _U16.unpack_from(data, off + 2)[0]
        off += 4
        recs: list[InterestRecord] = []
        for _ in range(count):
            _need(off, _TNWG_INTEREST_REC.size, end, "interest record")
            rlen, flags, ptype, domain = _TNWG_INTEREST_REC.unpack_from(data, off)
            if rlen <= _TNWG_INTEREST_REC.size:
                raise WireError(f"interest record length {rlen} leaves no room for a symbol", offset=off)
            _need(off, rlen, end, "interest record")
            sym, _ = _read_name(data, off + _TNWG_INTEREST_REC.size, off + rlen, "interest symbol")
            recs.append(InterestRecord(sym, domain, flags, ptype))
            off += rlen
        return GatewayInterest(tuple(recs)), off
    if tnwg_type == _TNWG_TYPE_CTXINFO:
        _need(off, _TNWG_CTXINFO.size, end, "gateway context info")
        rlen, hops, _reserved, flags1, flags2 = _TNWG_CTXINFO.unpack_from(data, off)
        if rlen < _TNWG_CTXINFO.size:
            raise WireError(f"gateway context info length {rlen} is shorter than its header", offset=off)
        _need(off, rlen, end, "gateway context info")
        opts = _walk_options(
            data, off + _TNWG_CTXINFO.size, off + rlen, _GATEWAY_OPTIONS, exact=False, what="gateway"
        )
        return GatewayContextInfo(flags1, flags2, hops, cast(tuple[GatewayOption, ...], opts)), off + rlen
    if tnwg_type == _TNWG_TYPE_TRREQ:
        _need(off, 2, end, "gateway TR request")
        rlen = _U16.unpack_from(data, off)[0]
        if rlen < 2:
            raise WireError(f"gateway TR request length {rlen} is shorter than its header", offset=off)
        _need(off, rlen, end, "gateway TR request")
        opts = _walk_options(data, off + 2, off + rlen, _GATEWAY_OPTIONS, exact=False, what="gateway")
        return GatewayTopicResolutionRequest(cast(tuple[GatewayOption, ...], opts)), off + rlen
    raise WireError(f"unknown gateway message type {tnwg_type}", offset=4)


@dataclass(frozen=True, slots=True)
class RemoteDomainRoute(_Body):
    """Extended type 6: a gateway at ``ip:port`` routes to ``domains`` (W1 §9.6)."""

    ip: str
    port: int
    domains: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _uint(self.port, 16, "remote domain route port")
        _items(self.domains, (int,), "remote domain ids")
        for domain in self.domains:
            _uint(domain, 32, "domain id")

    def _encode(self, vt: int) -> bytes:
        n = len(self.domains)
        head = _RDR.pack(vt | _T_EXT, _X_RDR, n, _ip(self.ip), self.port, 0, _RDR.size + 4 * n)
        return head + struct.pack(f">{n}I", *self.domains)


def _decode_rdr(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _RDR.size, end, "remote domain route")
    _, _, n, ip, port, _reserved, _length = _RDR.unpack_from(data, 0)
    _need(_RDR.size, 4 * n, end, "remote domain ids")
    domains = struct.unpack_from(f">{n}I", data, _RDR.size)
    return RemoteDomainRoute(ip_from_bytes(ip), port, domains), _RDR.size + 4 * n


# ---- remote context information (W1 §9.7)


@dataclass(frozen=True, slots=True)
class RemoteAddressOption(_Option):
    """Remote context option 1: the context's domain and address."""

    TYPE: ClassVar[int] = 0x01
    SIZE: ClassVar[int] = 16
    domain_id: int
    ip: str
    port: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, "remote address domain id")
        _uint(self.port, 16, "remote address port")
        _uint(self.flags, 16, "remote option flags")

    def _pack(self) -> bytes:
        return _RCTX_ADDRESS.pack(
            self.TYPE, self.SIZE, self.flags, self.domain_id, _ip(self.ip), self.port, 0
        )

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain, ip, port, _reserved = _RCTX_ADDRESS.unpack_from(data, off)
        return cls(domain, ip_from_bytes(ip), port, flags)


@dataclass(frozen=True, slots=True)
class RemoteInstanceOption(_Option):
    """Remote context option 2: the context instance."""

    TYPE: ClassVar[int] = 0x02
    SIZE: ClassVar[int] = 12
    instance: bytes
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, "remote context instance")
        _uint(self.flags, 16, "remote option flags")

    def _pack(self) -> bytes:
        return _OPT_INSTANCE.pack(self.TYPE, self.SIZE, self.flags, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, inst = _OPT_INSTANCE.unpack_from(data, off)
        return cls(inst, flags)


@dataclass(frozen=True, slots=True)
class RemoteDomainOption(_Option):
    """Remote context option 3: the originating domain."""

    TYPE: ClassVar[int] = 0x03
    SIZE: ClassVar[int] = 8
    domain_id: int
    flags: int = 0

    def __post_init__(self) -> None:
        _uint(self.domain_id, 32, "originating domain id")
        _uint(self.flags, 16, "remote option flags")

    def _pack(self) -> bytes:
        return _TOPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.domain_id)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, domain = _TOPT_U32.unpack_from(data, off)
        return cls(domain, flags)


@dataclass(frozen=True, slots=True)
class RemoteNameOption(_Option):
    """Remote context option 4: the context name."""

    TYPE: ClassVar[int] = 0x04
    SIZE: ClassVar[int] = 5
    VARIABLE: ClassVar[bool] = True
    name: str
    flags: int = 0

    def __post_init__(self) -> None:
        _text(self.name, "remote context name")
        _uint(self.flags, 16, "remote option flags")

    def _pack(self) -> bytes:
        name = _cstr(self.name, "remote context name", _OPT_NAME_MAX)
        return _OPT_HDR.pack(self.TYPE, 4 + len(name), self.flags) + name

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        name, _ = _read_name(data, off + 4, off + olen, "remote context name", _OPT_NAME_MAX)
        return cls(name, _U16.unpack_from(data, off + 2)[0])


RemoteOption: TypeAlias = (
    RemoteAddressOption | RemoteInstanceOption | RemoteDomainOption | RemoteNameOption | UnknownOption
)
_REMOTE_OPTIONS: Final[Mapping[int, type[_Option]]] = {
    cls.TYPE: cls for cls in (RemoteAddressOption, RemoteInstanceOption, RemoteDomainOption, RemoteNameOption)
}


@dataclass(frozen=True, slots=True)
class RemoteContextRecord:
    """One remote context: its options; ``query`` asks for the context's information."""

    options: tuple[RemoteOption, ...] = ()
    query: bool = False

    def __post_init__(self) -> None:
        _check_options(self.options, _REMOTE_OPTIONS, "remote context options")
        if not isinstance(self.query, bool):
            raise WireError("remote context query must be a bool")

    def _pack(self) -> bytes:
        opts = b"".join(o._pack() for o in self.options)
        if len(opts) + 4 > 0xFFFF:
            raise WireError("remote context record does not fit its u16 length")
        return _U16.pack(len(opts) + 4) + _U16.pack(_REMOTE_QUERY_BIT if self.query else 0) + opts


@dataclass(frozen=True, slots=True)
class RemoteContextInfo(_Body):
    """Extended type 7: remote context information records (W1 §9.7)."""

    records: tuple[RemoteContextRecord, ...] = ()

    def __post_init__(self) -> None:
        _items(self.records, (RemoteContextRecord,), "remote context records")

    def _encode(self, vt: int) -> bytes:
        recs = b"".join(r._pack() for r in self.records)
        if len(recs) + _RCTX.size > 0xFFFF:
            raise WireError("remote context info does not fit its u16 length")
        return _RCTX.pack(vt | _T_EXT, _X_RCTXINFO, _RCTX.size + len(recs), len(self.records), 0) + recs


def _decode_rctxinfo(data: bytes, end: int) -> tuple[_Body, int]:
    _need(0, _RCTX.size, end, "remote context info")
    count = _U16.unpack_from(data, 4)[0]
    off = _RCTX.size
    records: list[RemoteContextRecord] = []
    for _ in range(count):
        _need(off, 4, end, "remote context record")
        rlen = _U16.unpack_from(data, off)[0]
        flags = _U16.unpack_from(data, off + 2)[0]
        if rlen < 4:
            raise WireError(f"remote context record length {rlen} is shorter than its header", offset=off)
        _need(off, rlen, end, "remote context record")
        opts = _walk_options(data, off + 4, off + rlen, _REMOTE_OPTIONS, exact=True, what="remote context")
        records.append(
            RemoteContextRecord(cast(tuple[RemoteOption, ...], opts), bool(flags & _REMOTE_QUERY_BIT))
        )
        off += rlen
    return RemoteContextInfo(tuple(records)), off


# --------------------------------------------------------------------------------------- packet

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
        total = _U16.unpack_from(data, n - 2)[0]
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

    out: list[bytes] = []
    cur_q: list[bytes] = []
    cur_i: list[bytes] = []
    size = 0

    def flush(ptype: int) -> None:
        nonlocal size
        if cur_q or cur_i:
            out.append(
                _HDR.pack(vt | ptype, len(cur_q), len(cur_i)) + b"".join(cur_q) + b"".join(cur_i) + tail
            )
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
