"""LBMSRS (Stateful Resolution Service) codec: RSocket framing over TCP and the SRS records.

Implements ``../shared/wire/lbmc-pdm-srs.md`` section 4 as tshark 4.0 decodes it: the RSocket
frame (4.1: ``u24`` length, ``u32`` stream id, 6-bit frame type + 10 flag bits, type-specific
fields, optional ``u24``-prefixed metadata, then data), the SRS payload (4.2: ``u16`` message id,
batches of records 4-18 back to back with no per-record length), registration request/response and
stream request (4.3), source info SIR/SER (4.4), receiver and wildcard-receiver records (4.5), the
source leave record and the UM 6.14 records 13-18 (4.6, known only to newer Wireshark).  The
service itself is described in the guide's SRS chapter (seed 6.x; ``../shared/spec/06-...md``).
The framing (4.1) lives in :mod:`openum.wire._rsocket`; this module re-exports its public names.

Everything is big-endian.  Strings are ``u8 length`` + bytes, and the encoder puts the NUL
*inside* the length: tshark builds its labels from a C string and runs past a string without one.

A connection, as verified (4.1): the client sends SETUP, a REQUEST_RESPONSE carrying a
:class:`RegistrationRequest` (answered by a PAYLOAD with a :class:`RegistrationResponse`), then a
REQUEST_STREAM carrying a :class:`StreamRequest`; records then flow as PAYLOAD / REQUEST_FNF data.
Records 1-3 must be alone in their frame; records 4-18 may be batched (:func:`encode_records`).
tshark 4.0 shows a registration response's ``local_domain_id`` as 1 byte and ``protocol_version``
as the next 4 (a dissector slip; the 13-byte layout of 4.3 is what newer dissectors read).

:class:`FrameDecoder` splits a TCP byte stream into frames.  Decoders raise
:class:`~openum.wire._common.WireError` and nothing else (PRACTICES.md 6).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any, ClassVar, Final, TypeAlias

from openum.wire._common import Buffer, WireError, as_view, ip_from_bytes, ip_to_bytes
from openum.wire._rsocket import (
    FRAME_FLAG_COMPLETE,
    FRAME_FLAG_FOLLOWS,
    FRAME_FLAG_IGNORE,
    FRAME_FLAG_LEASE,
    FRAME_FLAG_METADATA,
    FRAME_FLAG_NEXT,
    FRAME_FLAG_RESPOND,
    FRAME_FLAG_RESUME,
    MAX_FRAME_LEN,
    U8_MAX,
    U16_MAX,
    U32_MAX,
    U32S,
    U64_MAX,
    CancelFrame,
    ErrorCode,
    ErrorFrame,
    Frame,
    FrameDecoder,
    FrameType,
    KeepaliveFrame,
    OpaqueFrame,
    PayloadFrame,
    Reader,
    RequestChannelFrame,
    RequestFnfFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
    SetupFrame,
    check_blob,
    check_int,
    check_u32,
    decode,
    decode_frames,
    encode,
)

__all__ = [
    "DEFAULT_PORT",
    "FRAME_FLAG_COMPLETE",
    "FRAME_FLAG_FOLLOWS",
    "FRAME_FLAG_IGNORE",
    "FRAME_FLAG_LEASE",
    "FRAME_FLAG_METADATA",
    "FRAME_FLAG_NEXT",
    "FRAME_FLAG_RESPOND",
    "FRAME_FLAG_RESUME",
    "MAX_FRAME_LEN",
    "SOURCE_END_COST",
    "AppType",
    "CancelFrame",
    "ContextNameEnd",
    "ContextNameInfo",
    "ContextNameQuery",
    "ContextType",
    "DomainInfo",
    "ErrorCode",
    "ErrorFrame",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "InterestMode",
    "KeepaliveFrame",
    "MessageId",
    "OpaqueFrame",
    "PayloadFrame",
    "ReceiverDelete",
    "ReceiverEnd",
    "ReceiverInfo",
    "RegistrationRequest",
    "RegistrationResponse",
    "RequestChannelFrame",
    "RequestFnfFrame",
    "RequestNFrame",
    "RequestResponseFrame",
    "RequestStreamFrame",
    "RouteEnd",
    "RouteInfo",
    "SetupFrame",
    "SourceDelete",
    "SourceInfo",
    "SourceLeave",
    "SrsRecord",
    "StreamRequest",
    "WildcardReceiverDelete",
    "WildcardReceiverEnd",
    "WildcardReceiverInfo",
    "decode",
    "decode_frames",
    "decode_records",
    "encode",
    "encode_records",
]

DEFAULT_PORT: Final = 27000  # ARCHITECTURE.md 4: the SRS listens on TCP 27000
SOURCE_END_COST: Final = -1  # a SourceInfo with this cost is a "source end" record (SER, 4.4)

_OTID_LEN: Final = 32
_CTXINST_LEN: Final = 8


class MessageId(IntEnum):
    """SRS message ids (4.2).  tshark 4.0 knows 1-12; 13-18 are UM 6.14 records (4.6)."""

    REGISTRATION_REQUEST = 1
    REGISTRATION_RESPONSE = 2
    STREAM_REQUEST = 3
    SOURCE_INFO = 4
    SOURCE_DELETE = 5
    RECEIVER_INFO = 6
    RECEIVER_DELETE = 7
    RECEIVER_END = 8
    WILDCARD_RECEIVER_INFO = 9
    WILDCARD_RECEIVER_DELETE = 10
    WILDCARD_RECEIVER_END = 11
    SOURCE_LEAVE = 12
    ROUTE_INFO = 13
    ROUTE_END = 14
    DOMAIN_INFO = 15
    CONTEXT_NAME_QUERY = 16
    CONTEXT_NAME_INFO = 17
    CONTEXT_NAME_END = 18


class AppType(IntEnum):
    """``app_type`` of a registration request (4.3)."""

    APPLICATION = 0
    TNWGD = 1
    STORE = 2


class ContextType(IntEnum):
    """``context_type`` of the source, receiver and route records (4.4)."""

    APPLICATION = 0
    TNWGD = 1
    STORE = 2


class InterestMode(IntFlag):
    """``interest_mode`` bits (4.3).  tshark 4.0 names the values 0-3 FLOOD, FILTER,
    FLOOD_FORWARD_INTEREST and FILTER_FORWARD_INTEREST; both readings agree."""

    FLOOD = 0
    ADVERTISE_FILTER = 0x01
    INTEREST_FORWARD = 0x02
    CONTEXT_NAME_FILTER = 0x04


# --- validation helpers ---------------------------------------------------------------------------


def _str8(what: str, value: object) -> bytes:
    """A ``u8``-length-prefixed string with its NUL inside the length (4.2)."""
    if not isinstance(value, str):
        raise WireError(f"{what} must be a str, got {type(value).__name__}")
    raw = value.encode("utf-8", "surrogateescape")
    if b"\x00" in raw:
        raise WireError(f"{what} contains a NUL: {value!r}")
    if len(raw) > U8_MAX - 1:
        raise WireError(f"{what} is {len(raw)} bytes; at most {U8_MAX - 1} fit a u8 length with the NUL")
    return bytes((len(raw) + 1,)) + raw + b"\x00"


def _ip(what: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{what} must be a dotted-quad str, got {value!r}")
    return ip_to_bytes(value)


def _read_str8(rd: Reader, what: str) -> str:
    length = rd.take(1, what)[0]
    raw = bytes(rd.take(length, what))
    if raw.endswith(b"\x00"):  # the NUL is inside the length (4.2); tolerate its absence
        raw = raw[:-1]
    return raw.decode("utf-8", "surrogateescape")


# --- SRS records ----------------------------------------------------------------------------------
#
# Each record class declares its wire layout once, as "attribute:kind" tokens in wire order; the
# layout validates, encodes and decodes it.  Kinds: u8 u16 u32 u64 i32 (big-endian integers),
# ip (4 bytes, a dotted quad in Python), otid (32 bytes), ctx (8-byte context instance),
# str8 (u8 length + text + NUL) and domains (u16 count + that many u32).

_FIXED_CODES: Final = {
    "u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i32": "i",
    "ip": "4s", "otid": f"{_OTID_LEN}s", "ctx": f"{_CTXINST_LEN}s",
}  # fmt: skip
_RANGES: Final = {
    "u8": (0, U8_MAX), "u16": (0, U16_MAX), "u32": (0, U32_MAX), "u64": (0, U64_MAX),
    "i32": (-(1 << 31), (1 << 31) - 1),
}  # fmt: skip
_SIZES: Final = {"otid": _OTID_LEN, "ctx": _CTXINST_LEN}
_U16S: Final = struct.Struct(">H")  # message ids and domain counts


class _Layout:
    """The wire layout of one record kind; runs of fixed-size fields become one ``struct.Struct``."""

    __slots__ = ("fields", "steps")

    def __init__(self, spec: str) -> None:
        """``spec``: ``"name:kind"`` tokens in wire order, separated by spaces."""
        self.fields = tuple(tuple(token.split(":")) for token in spec.split())
        steps: list[tuple[struct.Struct | None, tuple[tuple[str, ...], ...]]] = []
        run: list[tuple[str, ...]] = []
        for name, kind in (*self.fields, ("", "")):  # the sentinel flushes the last run
            if kind in _FIXED_CODES:
                run.append((name, kind))
                continue
            if run:
                steps.append((struct.Struct(">" + "".join(_FIXED_CODES[k] for _, k in run)), tuple(run)))
                run = []
            if kind:
                steps.append((None, ((name, kind),)))
        self.steps = tuple(steps)

    def check(self, rec: object) -> None:
        for name, kind in self.fields:
            value = getattr(rec, name)
            if kind in _RANGES:
                check_int(name, value, *_RANGES[kind])
            elif kind == "ip":
                _ip(name, value)
            elif kind in _SIZES:
                check_blob(name, value, _SIZES[kind])
            elif kind == "str8":
                _str8(name, value)
            else:  # domains: store a tuple whatever sequence was given
                if not isinstance(value, tuple | list):
                    raise WireError(f"{name} must be a sequence of domain ids, got {value!r}")
                domains = tuple(value)
                object.__setattr__(rec, name, domains)
                if len(domains) > U16_MAX:
                    raise WireError(f"{len(domains)} domains do not fit the u16 count")
                for domain in domains:
                    check_u32("domain id", domain)

    def encode(self, rec: object) -> bytes:
        out = []
        for st, fields in self.steps:
            if st is None:
                name, kind = fields[0]
                value = getattr(rec, name)
                if kind == "str8":
                    out.append(_str8(name, value))
                else:
                    out.append(struct.pack(f">H{len(value)}I", len(value), *value))
            else:
                out.append(
                    st.pack(
                        *(ip_to_bytes(getattr(rec, n)) if k == "ip" else getattr(rec, n) for n, k in fields)
                    )
                )
        return b"".join(out)

    def decode(self, rd: Reader, what: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for st, fields in self.steps:
            if st is None:
                name, kind = fields[0]
                if kind == "str8":
                    values[name] = _read_str8(rd, f"{what} {name}")
                else:
                    (count,) = rd.unpack(_U16S, f"{what} domain count")
                    raw = rd.take(4 * count, f"{what} domains")
                    values[name] = tuple(d for (d,) in U32S.iter_unpack(raw))
            else:
                for (name, kind), value in zip(fields, rd.unpack(st, what), strict=True):
                    values[name] = ip_from_bytes(value) if kind == "ip" else value
        return values


# The tail shared by receiver, wildcard-receiver, domain and context-name-query records (4.5, 4.6).
_RECEIVER_TAIL: Final = (
    "domain_id:u32 context_instance:ctx context_type:u8 version:u32 version_flags:u32 reserved:u32"
)


class _Record:
    """The base of every record class: validates the record against its layout when built."""

    __slots__ = ()
    _LAYOUT: ClassVar[_Layout]

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class RegistrationRequest(_Record):
    """SRS_REGISTRATION_REQUEST (id 1, 4.3): a client announces itself; alone in its frame."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.REGISTRATION_REQUEST
    _LAYOUT: ClassVar[_Layout] = _Layout(
        "app_type:u8 client_addr:ip client_port:u16 session_id:u32 host_id:u32 "
        "protocol_version:u8 interest_mode:u8 local_domain_id:u32"
    )

    app_type: int
    client_addr: str
    client_port: int
    session_id: int
    host_id: int
    protocol_version: int = 1
    interest_mode: int = 0  # InterestMode bits
    local_domain_id: int = 0


@dataclass(frozen=True, slots=True)
class RegistrationResponse(_Record):
    """SRS_REGISTRATION_RESPONSE (id 2, 4.3): the SRS assigns a client id; alone in its frame."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.REGISTRATION_RESPONSE
    _LAYOUT: ClassVar[_Layout] = _Layout("client_id:u64 local_domain_id:u32 protocol_version:u8")

    client_id: int
    local_domain_id: int = 0
    protocol_version: int = 1


@dataclass(frozen=True, slots=True)
class StreamRequest(_Record):
    """SRS_STREAM_REQUEST (id 3, 4.3): opens the record stream; alone in its frame."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.STREAM_REQUEST
    _LAYOUT: ClassVar[_Layout] = _Layout("unused:u8")

    unused: int = 0


@dataclass(frozen=True, slots=True)
class SourceInfo(_Record):
    """SRS_SRC_INFO (id 4, 4.4): a source advertisement (SIR); with ``cost == -1`` a source end (SER)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.SOURCE_INFO
    _LAYOUT: ClassVar[_Layout] = _Layout(
        "otid:otid topic:str8 source:str8 host_id:u32 topic_idx:u32 functionality_flags:u32 "
        "request_ip:ip request_port:u16 domain_id:u32 encryption:u8 compression:u8 ulb_src_id:u32 "
        "ulb_queue_id:u32 ulb_reg_id:u64 context_instance:ctx context_type:u8 version:u32 "
        "version_flags:u32 ttl:u16 cost:i32"
    )

    otid: bytes
    topic: str
    source: str  # the transport string, e.g. "TCP:10.0.0.1:14371"
    host_id: int
    topic_idx: int  # the LBMC tidx the source uses for this topic
    functionality_flags: int
    request_ip: str
    request_port: int
    domain_id: int
    context_instance: bytes
    encryption: int = 0
    compression: int = 0
    ulb_src_id: int = 0
    ulb_queue_id: int = 0
    ulb_reg_id: int = 0
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    ttl: int = 0
    cost: int = 0

    @property
    def is_end(self) -> bool:
        """True for a "source end" record (SER): cost −1 (4.4)."""
        return self.cost == SOURCE_END_COST


@dataclass(frozen=True, slots=True)
class SourceDelete(_Record):
    """SRS_SRC_DELETE (id 5, SDR): the source of ``otid`` no longer publishes ``topic``."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.SOURCE_DELETE
    _LAYOUT: ClassVar[_Layout] = _Layout("otid:otid topic:str8")

    otid: bytes
    topic: str


@dataclass(frozen=True, slots=True)
class _ReceiverRecord(_Record):
    """The layout of ids 6-8 (4.5): topic, domain, context instance and type, versions."""

    _LAYOUT: ClassVar[_Layout] = _Layout("topic:str8 " + _RECEIVER_TAIL)

    topic: str
    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class ReceiverInfo(_ReceiverRecord):
    """SRS_RCV_INFO (id 6, RIR): a receiver's interest in ``topic``."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.RECEIVER_INFO


@dataclass(frozen=True, slots=True)
class ReceiverDelete(_ReceiverRecord):
    """SRS_RCV_DELETE (id 7, RDR)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.RECEIVER_DELETE


@dataclass(frozen=True, slots=True)
class ReceiverEnd(_ReceiverRecord):
    """SRS_RCV_END (id 8, RER)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.RECEIVER_END


@dataclass(frozen=True, slots=True)
class _WildcardRecord(_Record):
    """The layout of ids 9-11 (4.5): a receiver record with a pattern in place of the topic."""

    _LAYOUT: ClassVar[_Layout] = _Layout("pattern:str8 " + _RECEIVER_TAIL)

    pattern: str
    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class WildcardReceiverInfo(_WildcardRecord):
    """SRS_WRCV_INFO (id 9, WIR): a wildcard receiver's interest in ``pattern``."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.WILDCARD_RECEIVER_INFO


@dataclass(frozen=True, slots=True)
class WildcardReceiverDelete(_WildcardRecord):
    """SRS_WRCV_DELETE (id 10, WDR)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.WILDCARD_RECEIVER_DELETE


@dataclass(frozen=True, slots=True)
class WildcardReceiverEnd(_WildcardRecord):
    """SRS_WRCV_END (id 11, WER)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.WILDCARD_RECEIVER_END


@dataclass(frozen=True, slots=True)
class SourceLeave(_Record):
    """SRS_LEAVE_INFO (id 12, SLI): a source leaves ``topic``."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.SOURCE_LEAVE
    _LAYOUT: ClassVar[_Layout] = _Layout(
        "otid:otid topic:str8 source:str8 context_instance:ctx context_type:u8 version:u32 "
        "version_flags:u32 reserved:u32"
    )

    otid: bytes
    topic: str
    source: str
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class _RouteRecord(_Record):
    """The layout of ids 13-14 (4.6, UM 6.14): a DRO route to a list of domains."""

    _LAYOUT: ClassVar[_Layout] = _Layout(
        "domains:domains ip:ip port:u16 context_instance:ctx context_type:u8 version:u32 "
        "version_flags:u32 route_index:u16 reserved:u16"
    )

    domains: tuple[int, ...]
    ip: str
    port: int
    context_instance: bytes
    context_type: int = ContextType.TNWGD
    version: int = 0
    version_flags: int = 0
    route_index: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class RouteInfo(_RouteRecord):
    """SRS_ROUTE_INFO (id 13, RTI; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.ROUTE_INFO


@dataclass(frozen=True, slots=True)
class RouteEnd(_RouteRecord):
    """SRS_ROUTE_END (id 14, RTE; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.ROUTE_END


@dataclass(frozen=True, slots=True)
class DomainInfo(_Record):
    """SRS_DOMAIN_INFO (id 15, DMI; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.DOMAIN_INFO
    _LAYOUT: ClassVar[_Layout] = _Layout(_RECEIVER_TAIL)

    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class ContextNameQuery(_Record):
    """SRS_CONTEXT_NAME_QUERY (id 16, CNQ; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.CONTEXT_NAME_QUERY
    _LAYOUT: ClassVar[_Layout] = _Layout("name:str8 " + _RECEIVER_TAIL)

    name: str
    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class _ContextNameRecord(_Record):
    """The layout of ids 17-18 (4.6, UM 6.14): a context name and where that context lives."""

    _LAYOUT: ClassVar[_Layout] = _Layout(
        "name:str8 domain_id:u32 ip:ip port:u16 origin_context_instance:ctx context_instance:ctx "
        "context_type:u8 version:u32 version_flags:u32 reserved:u32"
    )

    name: str
    domain_id: int
    ip: str
    port: int
    origin_context_instance: bytes
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0


@dataclass(frozen=True, slots=True)
class ContextNameInfo(_ContextNameRecord):
    """SRS_CONTEXT_NAME_INFO (id 17, CNI; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.CONTEXT_NAME_INFO


@dataclass(frozen=True, slots=True)
class ContextNameEnd(_ContextNameRecord):
    """SRS_CONTEXT_NAME_END (id 18, CNE; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.CONTEXT_NAME_END


SrsRecord: TypeAlias = (
    RegistrationRequest
    | RegistrationResponse
    | StreamRequest
    | SourceInfo
    | SourceDelete
    | ReceiverInfo
    | ReceiverDelete
    | ReceiverEnd
    | WildcardReceiverInfo
    | WildcardReceiverDelete
    | WildcardReceiverEnd
    | SourceLeave
    | RouteInfo
    | RouteEnd
    | DomainInfo
    | ContextNameQuery
    | ContextNameInfo
    | ContextNameEnd
)

_RECORD_TYPES: Final[dict[int, Callable[..., SrsRecord]]] = {
    cls.MESSAGE_ID: cls
    for cls in (
        RegistrationRequest,
        RegistrationResponse,
        StreamRequest,
        SourceInfo,
        SourceDelete,
        ReceiverInfo,
        ReceiverDelete,
        ReceiverEnd,
        WildcardReceiverInfo,
        WildcardReceiverDelete,
        WildcardReceiverEnd,
        SourceLeave,
        RouteInfo,
        RouteEnd,
        DomainInfo,
        ContextNameQuery,
        ContextNameInfo,
        ContextNameEnd,
    )
}
# tshark decodes ids 1-3 only when the frame data is exactly that one record (4.2).
_SINGLE: Final = frozenset(
    {MessageId.REGISTRATION_REQUEST, MessageId.REGISTRATION_RESPONSE, MessageId.STREAM_REQUEST}
)


def encode_records(records: Sequence[SrsRecord]) -> bytes:
    """The SRS payload (the data of one RSocket frame) carrying ``records`` (4.2).

    A registration request, registration response or stream request must be the only record.
    """
    if not records:
        raise WireError("an SRS payload needs at least one record")
    out = []
    for rec in records:
        msg_id = getattr(rec, "MESSAGE_ID", None)
        if msg_id not in _RECORD_TYPES or type(rec) is not _RECORD_TYPES[msg_id]:
            raise WireError(f"not an SRS record: {rec!r}")
        if msg_id in _SINGLE and len(records) > 1:
            raise WireError("registration and stream requests must be alone in their frame")
        out.append(_U16S.pack(msg_id) + rec._LAYOUT.encode(rec))
    return b"".join(out)


def decode_records(data: Buffer) -> tuple[SrsRecord, ...]:
    """Decode an SRS payload (the data of one RSocket frame) into its records (4.2).

    Ids 1-3 must fill the payload exactly; ids 4-18 are walked back to back until the end.
    An empty payload decodes to no records.
    """
    rd = Reader(as_view(data))
    records: list[SrsRecord] = []
    while rd.pos < len(rd.view):
        start = rd.pos
        (msg_id,) = rd.unpack(_U16S, "SRS message id")
        kind = _RECORD_TYPES.get(msg_id)
        if kind is None:
            raise WireError(f"unknown SRS message id {msg_id}", offset=start)
        if msg_id in _SINGLE and start:
            raise WireError(f"SRS message {msg_id} cannot be batched", offset=start)
        layout: _Layout = getattr(kind, "_LAYOUT")  # noqa: B009 - a ClassVar of every record class
        records.append(kind(**layout.decode(rd, MessageId(msg_id).name)))
        if msg_id in _SINGLE and rd.pos != len(rd.view):
            raise WireError(f"SRS message {msg_id} must be alone, {len(rd.view) - rd.pos} bytes follow")
    return tuple(records)
