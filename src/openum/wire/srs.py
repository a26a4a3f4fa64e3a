"""LBMSRS (Stateful Resolution Service) codec: RSocket framing over TCP and the SRS records.

Implements ``../shared/wire/lbmc-pdm-srs.md`` section 4 as tshark 4.0 decodes it: the RSocket
frame (4.1: ``u24`` length, ``u32`` stream id, 6-bit frame type + 10 flag bits, type-specific
fields, optional ``u24``-prefixed metadata, then data), the SRS payload (4.2: ``u16`` message id,
batches of records 4-18 back to back with no per-record length), registration request/response and
stream request (4.3), source info SIR/SER (4.4), receiver and wildcard-receiver records (4.5), the
source leave record and the UM 6.14 records 13-18 (4.6, known only to newer Wireshark).  The
service itself is described in the guide's SRS chapter (seed 6.x; ``../shared/spec/06-...md``).

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

from openum.wire._common import Buffer, WireError, as_view, ip_from_bytes, ip_to_bytes, need

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
MAX_FRAME_LEN: Final = 0xFF_FFFF  # the u24 frame length (bytes after the length field)
SOURCE_END_COST: Final = -1  # a SourceInfo with this cost is a "source end" record (SER, 4.4)

# Flag bits of the 16-bit type/flags word (4.1).  The per-type bits share values.
FRAME_FLAG_IGNORE: Final = 0x0200
FRAME_FLAG_METADATA: Final = 0x0100
FRAME_FLAG_FOLLOWS: Final = 0x0080
FRAME_FLAG_RESUME: Final = 0x0080  # SETUP
FRAME_FLAG_RESPOND: Final = 0x0080  # KEEPALIVE
FRAME_FLAG_COMPLETE: Final = 0x0040
FRAME_FLAG_LEASE: Final = 0x0040  # SETUP
FRAME_FLAG_NEXT: Final = 0x0020

_U8: Final = 0xFF
_U16: Final = 0xFFFF
_U32: Final = 0xFFFF_FFFF
_U64: Final = 0xFFFF_FFFF_FFFF_FFFF
_STREAM_ID_MAX: Final = 0x7FFF_FFFF  # RSocket stream ids are 31 bits
_OTID_LEN: Final = 32
_CTXINST_LEN: Final = 8


class FrameType(IntEnum):
    """RSocket frame types (4.1)."""

    SETUP = 1
    LEASE = 2
    KEEPALIVE = 3
    REQUEST_RESPONSE = 4
    REQUEST_FNF = 5
    REQUEST_STREAM = 6
    REQUEST_CHANNEL = 7
    REQUEST_N = 8
    CANCEL = 9
    PAYLOAD = 10
    ERROR = 11
    METADATA_PUSH = 12
    RESUME = 13
    RESUME_OK = 14
    EXT = 63


class ErrorCode(IntEnum):
    """RSocket ERROR frame codes (4.1)."""

    INVALID_SETUP = 0x001
    UNSUPPORTED_SETUP = 0x002
    REJECTED_SETUP = 0x003
    REJECTED_RESUME = 0x004
    CONNECTION_ERROR = 0x101
    CONNECTION_CLOSE = 0x102
    APPLICATION_ERROR = 0x201
    REJECTED = 0x202
    CANCELED = 0x203
    INVALID = 0x204


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


def _int(what: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or not low <= value <= high:
        raise WireError(f"{what} must be an integer in [{low}, {high}], got {value!r}")


def _u8(what: str, value: object) -> None:
    _int(what, value, 0, _U8)


def _u16(what: str, value: object) -> None:
    _int(what, value, 0, _U16)


def _u32(what: str, value: object) -> None:
    _int(what, value, 0, _U32)


def _blob(what: str, value: object, size: int | None = None) -> None:
    if not isinstance(value, bytes):
        raise WireError(f"{what} must be bytes, got {type(value).__name__}")
    if size is not None and len(value) != size:
        raise WireError(f"{what} must be {size} bytes, got {len(value)}")


def _str8(what: str, value: object) -> bytes:
    """A ``u8``-length-prefixed string with its NUL inside the length (4.2)."""
    if not isinstance(value, str):
        raise WireError(f"{what} must be a str, got {type(value).__name__}")
    raw = value.encode("utf-8", "surrogateescape")
    if b"\x00" in raw:
        raise WireError(f"{what} contains a NUL: {value!r}")
    if len(raw) > _U8 - 1:
        raise WireError(f"{what} is {len(raw)} bytes; at most {_U8 - 1} fit a u8 length with the NUL")
    return bytes((len(raw) + 1,)) + raw + b"\x00"


def _ip(what: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{what} must be a dotted-quad str, got {value!r}")
    return ip_to_bytes(value)


class _Reader:
    """A bounds-checked cursor over one SRS payload."""

    __slots__ = ("pos", "view")

    def __init__(self, view: memoryview, pos: int = 0) -> None:
        self.view = view
        self.pos = pos

    def take(self, size: int, what: str) -> memoryview:
        need(self.view, self.pos, size, what)
        out = self.view[self.pos : self.pos + size]
        self.pos += size
        return out

    def unpack(self, st: struct.Struct, what: str) -> tuple[Any, ...]:
        return st.unpack(self.take(st.size, what))

    def str8(self, what: str) -> str:
        length = self.take(1, what)[0]
        raw = bytes(self.take(length, what))
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
    "u8": "B", "u16": "H", "u32": "I", "u64": "Q", "i32": "i", "ip": "4s", "otid": "32s", "ctx": "8s",
}  # fmt: skip
_RANGES: Final = {
    "u8": (0, _U8), "u16": (0, _U16), "u32": (0, _U32), "u64": (0, _U64), "i32": (-(1 << 31), (1 << 31) - 1),
}  # fmt: skip
_SIZES: Final = {"otid": 32, "ctx": 8}
_MSG_ID: Final = struct.Struct(">H")
_U32S: Final = struct.Struct(">I")


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
                _int(name, value, *_RANGES[kind])
            elif kind == "ip":
                _ip(name, value)
            elif kind in _SIZES:
                _blob(name, value, _SIZES[kind])
            elif kind == "str8":
                _str8(name, value)
            else:  # domains: store a tuple whatever sequence was given
                if not isinstance(value, tuple | list):
                    raise WireError(f"{name} must be a sequence of domain ids, got {value!r}")
                domains = tuple(value)
                object.__setattr__(rec, name, domains)
                if len(domains) > _U16:
                    raise WireError(f"{len(domains)} domains do not fit the u16 count")
                for domain in domains:
                    _u32("domain id", domain)

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

    def decode(self, rd: _Reader, what: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for st, fields in self.steps:
            if st is None:
                name, kind = fields[0]
                if kind == "str8":
                    values[name] = rd.str8(f"{what} {name}")
                else:
                    (count,) = rd.unpack(_MSG_ID, f"{what} domain count")
                    raw = rd.take(4 * count, f"{what} domains")
                    values[name] = tuple(d for (d,) in _U32S.iter_unpack(raw))
            else:
                for (name, kind), value in zip(fields, rd.unpack(st, what), strict=True):
                    values[name] = ip_from_bytes(value) if kind == "ip" else value
        return values


# The tail shared by receiver, wildcard-receiver, domain and context-name-query records (4.5, 4.6).
_RECEIVER_TAIL: Final = (
    "domain_id:u32 context_instance:ctx context_type:u8 version:u32 version_flags:u32 reserved:u32"
)


@dataclass(frozen=True, slots=True)
class RegistrationRequest:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class RegistrationResponse:
    """SRS_REGISTRATION_RESPONSE (id 2, 4.3): the SRS assigns a client id; alone in its frame."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.REGISTRATION_RESPONSE
    _LAYOUT: ClassVar[_Layout] = _Layout("client_id:u64 local_domain_id:u32 protocol_version:u8")

    client_id: int
    local_domain_id: int = 0
    protocol_version: int = 1

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """SRS_STREAM_REQUEST (id 3, 4.3): opens the record stream; alone in its frame."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.STREAM_REQUEST
    _LAYOUT: ClassVar[_Layout] = _Layout("unused:u8")

    unused: int = 0

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class SourceInfo:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)

    @property
    def is_end(self) -> bool:
        """True for a "source end" record (SER): cost −1 (4.4)."""
        return self.cost == SOURCE_END_COST


@dataclass(frozen=True, slots=True)
class SourceDelete:
    """SRS_SRC_DELETE (id 5, SDR): the source of ``otid`` no longer publishes ``topic``."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.SOURCE_DELETE
    _LAYOUT: ClassVar[_Layout] = _Layout("otid:otid topic:str8")

    otid: bytes
    topic: str

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class _ReceiverRecord:
    """The layout of ids 6-8 (4.5): topic, domain, context instance and type, versions."""

    _LAYOUT: ClassVar[_Layout] = _Layout("topic:str8 " + _RECEIVER_TAIL)

    topic: str
    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


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
class _WildcardRecord:
    """The layout of ids 9-11 (4.5): a receiver record with a pattern in place of the topic."""

    _LAYOUT: ClassVar[_Layout] = _Layout("pattern:str8 " + _RECEIVER_TAIL)

    pattern: str
    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


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
class SourceLeave:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class _RouteRecord:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class RouteInfo(_RouteRecord):
    """SRS_ROUTE_INFO (id 13, RTI; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.ROUTE_INFO


@dataclass(frozen=True, slots=True)
class RouteEnd(_RouteRecord):
    """SRS_ROUTE_END (id 14, RTE; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.ROUTE_END


@dataclass(frozen=True, slots=True)
class DomainInfo:
    """SRS_DOMAIN_INFO (id 15, DMI; UM 6.14, unknown to tshark 4.0)."""

    MESSAGE_ID: ClassVar[MessageId] = MessageId.DOMAIN_INFO
    _LAYOUT: ClassVar[_Layout] = _Layout(_RECEIVER_TAIL)

    domain_id: int
    context_instance: bytes
    context_type: int = ContextType.APPLICATION
    version: int = 0
    version_flags: int = 0
    reserved: int = 0

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class ContextNameQuery:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


@dataclass(frozen=True, slots=True)
class _ContextNameRecord:
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

    def __post_init__(self) -> None:
        self._LAYOUT.check(self)


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
        out.append(_MSG_ID.pack(msg_id) + rec._LAYOUT.encode(rec))
    return b"".join(out)


def decode_records(data: Buffer) -> tuple[SrsRecord, ...]:
    """Decode an SRS payload (the data of one RSocket frame) into its records (4.2).

    Ids 1-3 must fill the payload exactly; ids 4-18 are walked back to back until the end.
    An empty payload decodes to no records.
    """
    rd = _Reader(as_view(data))
    records: list[SrsRecord] = []
    while rd.pos < len(rd.view):
        start = rd.pos
        (msg_id,) = rd.unpack(_MSG_ID, "SRS message id")
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


# --- RSocket frames -------------------------------------------------------------------------------

_FRAME_HEAD: Final = struct.Struct(">IH")  # stream id, type<<10 | flags
_SETUP: Final = struct.Struct(">HHII")  # major, minor, keepalive interval, max lifetime
_U64S: Final = struct.Struct(">Q")


def _stream_id(value: object) -> None:
    _int("stream_id", value, 0, _STREAM_ID_MAX)


def _metadata(value: object) -> None:
    if value is None:
        return
    if not isinstance(value, bytes) or len(value) > MAX_FRAME_LEN:
        raise WireError(f"metadata must be bytes shorter than 16 MiB, got {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class SetupFrame:
    """SETUP (type 1, stream 0): protocol version, keepalive interval and lifetime (ms), MIME types.

    The defaults are those of the verified session (section 6.1), not values UM is known to use.
    """

    keepalive_interval: int = 5000
    max_lifetime: int = 30000
    metadata_mime: str = "application/octet-stream"
    data_mime: str = "application/octet-stream"
    major: int = 1
    minor: int = 0
    lease: bool = False
    resume_token: bytes | None = None
    metadata: bytes | None = None
    data: bytes = b""

    def __post_init__(self) -> None:
        _u32("keepalive_interval", self.keepalive_interval)
        _u32("max_lifetime", self.max_lifetime)
        for what, mime in (("metadata_mime", self.metadata_mime), ("data_mime", self.data_mime)):
            if not isinstance(mime, str) or len(mime.encode("utf-8", "surrogateescape")) > _U8:
                raise WireError(f"{what} must be a str of at most 255 bytes, got {mime!r}")
        _u16("major", self.major)
        _u16("minor", self.minor)
        if self.resume_token is not None:
            _blob("resume_token", self.resume_token)
            if len(self.resume_token) > _U16:
                raise WireError("resume token longer than a u16 length")
        _metadata(self.metadata)
        _blob("data", self.data)


@dataclass(frozen=True, slots=True)
class KeepaliveFrame:
    """KEEPALIVE (type 3, stream 0)."""

    last_received_position: int = 0
    respond: bool = False
    data: bytes = b""

    def __post_init__(self) -> None:
        _int("last_received_position", self.last_received_position, 0, _U64)
        _blob("data", self.data)


@dataclass(frozen=True, slots=True)
class RequestResponseFrame:
    """REQUEST_RESPONSE (type 4): carries a registration request (4.1)."""

    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _blob("data", self.data)
        _metadata(self.metadata)


@dataclass(frozen=True, slots=True)
class RequestFnfFrame:
    """REQUEST_FNF (type 5, fire and forget): carries records from a client."""

    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _blob("data", self.data)
        _metadata(self.metadata)


@dataclass(frozen=True, slots=True)
class RequestStreamFrame:
    """REQUEST_STREAM (type 6): carries the stream request; ``initial_request_n`` credits."""

    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _u32("initial_request_n", self.initial_request_n)
        _blob("data", self.data)
        _metadata(self.metadata)


@dataclass(frozen=True, slots=True)
class RequestChannelFrame:
    """REQUEST_CHANNEL (type 7)."""

    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _u32("initial_request_n", self.initial_request_n)
        _blob("data", self.data)
        _metadata(self.metadata)


@dataclass(frozen=True, slots=True)
class RequestNFrame:
    """REQUEST_N (type 8): more credits for a stream."""

    stream_id: int
    request_n: int

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _u32("request_n", self.request_n)


@dataclass(frozen=True, slots=True)
class CancelFrame:
    """CANCEL (type 9)."""

    stream_id: int

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)


@dataclass(frozen=True, slots=True)
class PayloadFrame:
    """PAYLOAD (type 10): the SRS pushes record batches on the client's stream with these."""

    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    next: bool = True

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _blob("data", self.data)
        _metadata(self.metadata)


@dataclass(frozen=True, slots=True)
class ErrorFrame:
    """ERROR (type 11): ``error_code`` (:class:`ErrorCode`) and an optional UTF-8 message.

    tshark tries to read any data as SRS records and flags text as an invalid message id, so a
    Wireshark-clean sender leaves ``data`` empty.
    """

    stream_id: int
    error_code: int
    data: bytes = b""

    def __post_init__(self) -> None:
        _stream_id(self.stream_id)
        _u32("error_code", self.error_code)
        _blob("data", self.data)


@dataclass(frozen=True, slots=True)
class OpaqueFrame:
    """Any other frame type (LEASE, METADATA_PUSH, RESUME, RESUME_OK, EXT, ...): kept as raw bytes.

    tshark 4.0 dissects none of them beyond the type, so their bodies are not interpreted here.
    """

    frame_type: int
    stream_id: int
    flags: int = 0  # the 10 flag bits
    body: bytes = b""  # everything after the 6-byte stream id + type/flags

    def __post_init__(self) -> None:
        _int("frame_type", self.frame_type, 1, 63)
        if self.frame_type in _TYPED:
            raise WireError(f"frame type {self.frame_type} has its own record")
        _int("stream_id", self.stream_id, 0, _U32)
        _int("flags", self.flags, 0, 0x3FF)
        _blob("body", self.body)


Frame: TypeAlias = (
    SetupFrame
    | KeepaliveFrame
    | RequestResponseFrame
    | RequestFnfFrame
    | RequestStreamFrame
    | RequestChannelFrame
    | RequestNFrame
    | CancelFrame
    | PayloadFrame
    | ErrorFrame
    | OpaqueFrame
)

_TYPED: Final = frozenset({1, 3, 4, 5, 6, 7, 8, 9, 10, 11})


def _with_metadata(metadata: bytes | None, data: bytes) -> bytes:
    if metadata is None:
        return data
    return len(metadata).to_bytes(3, "big") + metadata + data


def _frame_parts(frame: Frame) -> tuple[int, int, int, bytes]:
    """(frame type, stream id, flags, body after the type/flags word)."""
    meta = FRAME_FLAG_METADATA if getattr(frame, "metadata", None) is not None else 0
    if isinstance(frame, SetupFrame):
        flags = meta | (FRAME_FLAG_LEASE if frame.lease else 0)
        body = _SETUP.pack(frame.major, frame.minor, frame.keepalive_interval, frame.max_lifetime)
        if frame.resume_token is not None:
            flags |= FRAME_FLAG_RESUME
            body += len(frame.resume_token).to_bytes(2, "big") + frame.resume_token
        for mime in (frame.metadata_mime, frame.data_mime):
            raw = mime.encode("utf-8", "surrogateescape")
            body += bytes((len(raw),)) + raw
        return FrameType.SETUP, 0, flags, body + _with_metadata(frame.metadata, frame.data)
    if isinstance(frame, KeepaliveFrame):
        flags = FRAME_FLAG_RESPOND if frame.respond else 0
        return FrameType.KEEPALIVE, 0, flags, _U64S.pack(frame.last_received_position) + frame.data
    if isinstance(frame, RequestResponseFrame | RequestFnfFrame):
        ftype = (
            FrameType.REQUEST_RESPONSE if isinstance(frame, RequestResponseFrame) else FrameType.REQUEST_FNF
        )
        flags = meta | (FRAME_FLAG_FOLLOWS if frame.follows else 0)
        return ftype, frame.stream_id, flags, _with_metadata(frame.metadata, frame.data)
    if isinstance(frame, RequestStreamFrame | RequestChannelFrame):
        flags = meta | (FRAME_FLAG_FOLLOWS if frame.follows else 0)
        ftype = FrameType.REQUEST_STREAM
        if isinstance(frame, RequestChannelFrame):
            ftype = FrameType.REQUEST_CHANNEL
            flags |= FRAME_FLAG_COMPLETE if frame.complete else 0
        body = _U32S.pack(frame.initial_request_n) + _with_metadata(frame.metadata, frame.data)
        return ftype, frame.stream_id, flags, body
    if isinstance(frame, RequestNFrame):
        return FrameType.REQUEST_N, frame.stream_id, 0, _U32S.pack(frame.request_n)
    if isinstance(frame, CancelFrame):
        return FrameType.CANCEL, frame.stream_id, 0, b""
    if isinstance(frame, PayloadFrame):
        flags = meta | (FRAME_FLAG_FOLLOWS if frame.follows else 0)
        flags |= (FRAME_FLAG_COMPLETE if frame.complete else 0) | (FRAME_FLAG_NEXT if frame.next else 0)
        return FrameType.PAYLOAD, frame.stream_id, flags, _with_metadata(frame.metadata, frame.data)
    if isinstance(frame, ErrorFrame):
        return FrameType.ERROR, frame.stream_id, 0, _U32S.pack(frame.error_code) + frame.data
    if isinstance(frame, OpaqueFrame):
        return frame.frame_type, frame.stream_id, frame.flags, frame.body
    raise WireError(f"not an RSocket frame: {frame!r}")


def encode(frame: Frame) -> bytes:
    """One RSocket frame with its 3-byte length prefix, ready for the TCP stream (4.1)."""
    ftype, stream_id, flags, body = _frame_parts(frame)
    length = _FRAME_HEAD.size + len(body)
    if length > MAX_FRAME_LEN:
        raise WireError(f"RSocket frame of {length} bytes exceeds the u24 length")
    return length.to_bytes(3, "big") + _FRAME_HEAD.pack(stream_id, (ftype << 10) | flags) + body


def _split_metadata(rd: _Reader, flags: int, what: str) -> tuple[bytes | None, bytes]:
    metadata = None
    if flags & FRAME_FLAG_METADATA:
        length = int.from_bytes(rd.take(3, f"{what} metadata length"), "big")
        metadata = bytes(rd.take(length, f"{what} metadata"))
    return metadata, bytes(rd.view[rd.pos :])


def _no_metadata(flags: int, what: str) -> None:
    if flags & FRAME_FLAG_METADATA:
        raise WireError(f"{what} frames carry no metadata")


def _decode_body(view: memoryview) -> Frame:
    """Decode a frame body (the bytes after the u24 length)."""
    need(view, 0, _FRAME_HEAD.size, "RSocket frame header")
    stream_id, word = _FRAME_HEAD.unpack_from(view, 0)
    ftype, flags = word >> 10, word & 0x3FF
    rd = _Reader(view, _FRAME_HEAD.size)
    if ftype in (FrameType.SETUP, FrameType.KEEPALIVE) and stream_id:
        raise WireError(f"frame type {ftype} must use stream 0, got {stream_id}")
    if ftype == FrameType.SETUP:
        major, minor, keepalive, lifetime = rd.unpack(_SETUP, "SETUP")
        token = None
        if flags & FRAME_FLAG_RESUME:
            token_len = int.from_bytes(rd.take(2, "SETUP resume token length"), "big")
            token = bytes(rd.take(token_len, "SETUP resume token"))
        mimes = []
        for what in ("SETUP metadata MIME type", "SETUP data MIME type"):
            raw = bytes(rd.take(rd.take(1, what)[0], what))
            mimes.append(raw.decode("utf-8", "surrogateescape"))
        metadata, data = _split_metadata(rd, flags, "SETUP")
        return SetupFrame(
            keepalive,
            lifetime,
            mimes[0],
            mimes[1],
            major,
            minor,
            bool(flags & FRAME_FLAG_LEASE),
            token,
            metadata,
            data,
        )
    if ftype == FrameType.KEEPALIVE:
        _no_metadata(flags, "KEEPALIVE")
        (position,) = rd.unpack(_U64S, "KEEPALIVE position")
        return KeepaliveFrame(position, bool(flags & FRAME_FLAG_RESPOND), bytes(view[rd.pos :]))
    follows = bool(flags & FRAME_FLAG_FOLLOWS)
    if ftype in (FrameType.REQUEST_RESPONSE, FrameType.REQUEST_FNF):
        metadata, data = _split_metadata(rd, flags, "request")
        kind = RequestResponseFrame if ftype == FrameType.REQUEST_RESPONSE else RequestFnfFrame
        return kind(stream_id, data, metadata, follows)
    if ftype in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL):
        (request_n,) = rd.unpack(_U32S, "initial request_n")
        metadata, data = _split_metadata(rd, flags, "request")
        if ftype == FrameType.REQUEST_STREAM:
            return RequestStreamFrame(stream_id, request_n, data, metadata, follows)
        complete = bool(flags & FRAME_FLAG_COMPLETE)
        return RequestChannelFrame(stream_id, request_n, data, metadata, follows, complete)
    if ftype == FrameType.PAYLOAD:
        metadata, data = _split_metadata(rd, flags, "PAYLOAD")
        complete, nxt = bool(flags & FRAME_FLAG_COMPLETE), bool(flags & FRAME_FLAG_NEXT)
        return PayloadFrame(stream_id, data, metadata, follows, complete, nxt)
    if ftype in (FrameType.REQUEST_N, FrameType.CANCEL, FrameType.ERROR):
        _no_metadata(flags, FrameType(ftype).name)
        if ftype == FrameType.CANCEL:
            frame: Frame = CancelFrame(stream_id)
        else:
            (number,) = rd.unpack(_U32S, FrameType(ftype).name)
            if ftype == FrameType.ERROR:
                return ErrorFrame(stream_id, number, bytes(view[rd.pos :]))
            frame = RequestNFrame(stream_id, number)
        if rd.pos != len(view):
            raise WireError(f"{len(view) - rd.pos} bytes after a {FrameType(ftype).name} frame")
        return frame
    if ftype == 0:
        raise WireError("RSocket frame type 0 is reserved")
    return OpaqueFrame(ftype, stream_id, flags, bytes(view[rd.pos :]))


def decode(buf: Buffer) -> Frame:
    """Decode exactly one RSocket frame, its 3-byte length prefix included."""
    view = as_view(buf)
    need(view, 0, 3, "RSocket frame length")
    length = int.from_bytes(view[0:3], "big")
    if length != len(view) - 3:
        raise WireError(f"RSocket frame length {length} but {len(view) - 3} bytes follow", offset=0)
    return _decode_body(view[3:])


def decode_frames(buf: Buffer) -> tuple[Frame, ...]:
    """Decode a buffer of whole frames back to back (e.g. one captured TCP segment)."""
    view = as_view(buf)
    frames = []
    pos = 0
    while pos < len(view):
        need(view, pos, 3, "RSocket frame length")
        length = int.from_bytes(view[pos : pos + 3], "big")
        need(view, pos + 3, length, "RSocket frame")
        frames.append(_decode_body(view[pos + 3 : pos + 3 + length]))
        pos += 3 + length
    return tuple(frames)


class FrameDecoder:
    """Splits an SRS TCP byte stream into RSocket frames (sans I/O).

    Feed whatever ``recv`` returned; :meth:`feed` returns the frames completed so far and keeps a
    partial frame for the next call.  A malformed frame raises :class:`WireError`, after the good
    frames before it have been returned; once that happens the stream has lost its framing and every
    later call raises too (close the connection).
    """

    __slots__ = ("_buf", "_error")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._error: WireError | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)

    def feed(self, chunk: Buffer = b"") -> list[Frame]:
        if self._error is not None:
            raise WireError(f"SRS stream already failed: {self._error}")
        self._buf += chunk
        frames: list[Frame] = []
        pos = 0
        buf = self._buf
        try:
            while len(buf) - pos >= 3:
                length = int.from_bytes(buf[pos : pos + 3], "big")
                if length < _FRAME_HEAD.size:
                    raise WireError(f"RSocket frame length {length} is shorter than its header")
                if len(buf) - pos - 3 < length:
                    break
                body = bytes(buf[pos + 3 : pos + 3 + length])  # a copy: buf is resized below
                try:
                    frames.append(_decode_body(memoryview(body)))
                except WireError:
                    if frames:  # hand over the good frames first; the bad one raises next time
                        break
                    raise
                pos += 3 + length
        except WireError as exc:
            self._error = exc
            self._buf.clear()
            raise
        del buf[:pos]
        return frames
