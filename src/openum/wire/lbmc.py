"""LBMC, UM's message layer: message header, extension headers, message properties.

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §1: carriers put several whole LBMC messages back to back in one datagram or TCP segment, each
  sized by its own ``msglen`` (:func:`decode_messages`, :func:`split_messages`);
* §2.1: the 12-byte data header (types 0, 2, 0xA) and the 4-byte control header (types 1, 8), with the
  ver/type byte (version nibble must be 0);
* §2.3: every extension-header type code; §2.4-§2.10: their byte layouts.  Every code Wireshark knows
  has a typed record; codes it does not know (and TGIDX 0x03) decode to :class:`UnknownHeader`, which
  keeps the bytes so that they round-trip;
* §2.5: APPHDR_CHAIN with its properties-length, hot-failover and gateway-info elements;
* §2.6: the message-properties block at the tail of the payload (:class:`PropertiesBlock`);
* §5: the gotchas (chain-element order, TGIDX, unknown codes are never emitted by openum's own code);
* §6.1: the verified hex (the unit tests decode it).

Two things the dissector does not define are openum conventions, marked as such where they live:
:class:`ResponseHeader` (a response's request index, carried in an EXTOPT header of openum's own
subtype) and the element order written in APPHDR_CHAIN (see :class:`AppHeaderChain`).

Two APIs.  The record API (:class:`LbmcMessage`, :func:`encode_message`, :func:`decode_message`) covers
every header.  The hot path (:func:`encode_data_into`, :func:`encode_data_topic_into`,
:func:`decode_data_fast`) builds no record: it packs/unpacks the 12-byte header of a plain data
message straight into/out of the caller's buffer and hands the payload back as a ``memoryview``.

Decoders raise :class:`~openum.wire._common.WireError` and nothing else (PRACTICES.md 6); records
validate on construction, so what can be built can be encoded.
"""

from __future__ import annotations

import builtins
import dataclasses
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, Final, TypeVar

from openum.wire._common import Buffer, WireError, as_view, ip_from_bytes, ip_to_bytes

__all__ = [
    "CONTROL_HEADER_LEN",
    "DATA_HEADER_LEN",
    "DATA_TYPES",
    "LBMC_VERSION",
    "MAX_HEADER_BODY_LEN",
    "MAX_MESSAGE_LEN",
    "MAX_TOPIC_NAME_LEN",
    "RESPONSE_EXTOPT_SUBTYPE",
    "AdvertisementHeader",
    "AppHeader",
    "AppHeaderChain",
    "AppHeaderElement",
    "AuthenticationHeader",
    "BatchHeader",
    "ChainElement",
    "ContextInfoHeader",
    "ContextInstanceHeader",
    "DestinationContextInstanceHeader",
    "DestinationHeader",
    "DomainHeader",
    "ExtendedOptionHeader",
    "FragmentHeader",
    "GatewayCapabilitiesHeader",
    "GatewayInfoElement",
    "GatewayKeepaliveHeader",
    "GatewayNameHeader",
    "Header",
    "HeaderType",
    "HmacHeader",
    "HotFailoverElement",
    "LateJoinInfoHeader",
    "LateJoinInfoRequestHeader",
    "LbmcMessage",
    "MessageType",
    "OriginatingDomainHeader",
    "OtidHeader",
    "PatternIndexHeader",
    "PatternInterestHeader",
    "PatternMultiDomainInterestHeader",
    "PropertiesBlock",
    "PropertiesInput",
    "PropertiesLengthElement",
    "Property",
    "PropertyType",
    "PropertyValue",
    "RequestHeader",
    "ResponseHeader",
    "RetransmissionRequestHeader",
    "ReturnContextInstanceHeader",
    "RouteInfoHeader",
    "RouteInfoNeighborHeader",
    "SessionIdHeader",
    "SourceIndexHeader",
    "SourceRegistrationInfoHeader",
    "SourceRegistrationInfoRequestHeader",
    "SsfControlRequestHeader",
    "SsfInitHeader",
    "StoreContextInstanceHeader",
    "StreamHeader",
    "TopicIndexHeader",
    "TopicInterestHeader",
    "TopicMultiDomainInterestHeader",
    "TopicNameHeader",
    "TopicSourceExtendedFunctionalityHeader",
    "TopicSourceHeader",
    "TsniHeader",
    "TypedValue",
    "UmeAckHeader",
    "UmeAckIdHeader",
    "UmeCapabilityHeader",
    "UmeClientLifetimeHeader",
    "UmeKeepaliveHeader",
    "UmeProxySourceElectionHeader",
    "UmeProxySourceElectionTokenHeader",
    "UmeProxySourceHeader",
    "UmeRangedAckHeader",
    "UmeReceiverKeepaliveHeader",
    "UmeRegistrationHeader",
    "UmeRegistrationResponseHeader",
    "UmeSessionIdHeader",
    "UmeStoreDomainHeader",
    "UmeStoreGroupHeader",
    "UmeStoreIdHeader",
    "UmeStoreInfoExtHeader",
    "UmeStoreInfoHeader",
    "UmeStoreNameHeader",
    "UmqAckHeader",
    "UmqCommandHeader",
    "UmqCommandResponseHeader",
    "UmqIndexCommandHeader",
    "UmqIndexCommandResponseHeader",
    "UmqKeepaliveHeader",
    "UmqLoadFactorHeader",
    "UmqMessageIdHeader",
    "UmqQueueManagementHeader",
    "UmqRcrHeader",
    "UmqRegistrationHeader",
    "UmqRegistrationResponseHeader",
    "UmqResubmissionHeader",
    "UmqResubmitRequestHeader",
    "UmqResubmitResponseHeader",
    "UmqRetransmissionRequestHeader",
    "UmqSessionIdHeader",
    "UmqSqdReceiveHeader",
    "UmqUlbMessageHeader",
    "UmqUlbRcrHeader",
    "UnknownHeader",
    "control_message",
    "data_message",
    "decode_data_fast",
    "decode_message",
    "decode_message_at",
    "decode_messages",
    "decode_properties",
    "encode_data",
    "encode_data_into",
    "encode_data_topic_into",
    "encode_message",
    "encode_message_into",
    "encode_properties",
    "header_class",
    "message_length",
    "split_messages",
    "topic_name_block",
]

# --------------------------------------------------------------------------------------------------
# Constants (spec §2.1, §2.3)
# --------------------------------------------------------------------------------------------------

LBMC_VERSION: Final = 0
#: ``msglen`` is a u16 and counts the whole message (§2.1); larger messages need fragmentation.
MAX_MESSAGE_LEN: Final = 0xFFFF
DATA_HEADER_LEN: Final = 12
CONTROL_HEADER_LEN: Final = 4
#: ``hdr_len`` is one byte and counts the two-byte next/len prefix (§2.1).
MAX_HEADER_BODY_LEN: Final = 253
#: TOPICNAME carries the name plus a NUL in at most 251 bytes (§2.4).
MAX_TOPIC_NAME_LEN: Final = 250
#: The smallest extension header Wireshark walks is 4 bytes (next, len, 16-bit flags); §2.1.
_MIN_HEADER_LEN: Final = 4

_NHDR_DATA: Final = 0x00
_NHDR_NONE: Final = 0xFF


class MessageType(IntEnum):
    """The low nibble of the ver/type byte (§2.1)."""

    DATA = 0x0
    EOT = 0x1
    PROACTIVE_RETRANSMISSION = 0x2
    CONTROL = 0x8
    RETRANSMISSION = 0xA


#: Types with the 12-byte data header (topic index and sequence number).
DATA_TYPES: Final = frozenset(
    {MessageType.DATA, MessageType.PROACTIVE_RETRANSMISSION, MessageType.RETRANSMISSION}
)
_TYPE_VALUES: Final = frozenset(int(t) for t in MessageType)
_DATA_TYPE_VALUES: Final = frozenset(int(t) for t in DATA_TYPES)


class HeaderType(IntEnum):
    """Extension-header type codes, the complete list known to Wireshark's dissector (§2.3)."""

    DATA = 0x00
    FRAG = 0x01
    BATCH = 0x02
    TGIDX = 0x03
    REQUEST = 0x04
    TOPICNAME = 0x05
    APPHDR = 0x06
    APPHDR_CHAIN = 0x07
    UMQ_MSGID = 0x08
    UMQ_SQD_RCV = 0x09
    UMQ_RESUB = 0x0A
    OTID = 0x0B
    CTXINSTD = 0x0C
    CTXINSTR = 0x0D
    SRCIDX = 0x0E
    UMQ_ULB_MSG = 0x0F
    SSF_INIT = 0x10
    SSF_CREQ = 0x11
    UME_PREG = 0x12
    UME_PREG_RESP = 0x13
    UME_ACK = 0x14
    UME_RXREQ = 0x15
    UME_KEEPALIVE = 0x16
    UME_STOREID = 0x17
    UME_RANGED_ACK = 0x18
    UME_ACK_ID = 0x19
    UME_CAPABILITY = 0x1A
    UME_PROXY_SRC = 0x1B
    UME_STORE_GROUP = 0x1C
    UME_STORE_INFO = 0x1D
    UME_LJ_INFO = 0x1E
    TSNI = 0x20
    UMQ_REG = 0x30
    UMQ_REG_RESP = 0x31
    UMQ_ACK = 0x32
    UMQ_RCR = 0x33
    UMQ_KA = 0x34
    UMQ_RXREQ = 0x35
    UMQ_QMGMT = 0x36
    UMQ_RESUB_REQ = 0x37
    UMQ_RESUB_RESP = 0x38
    TOPIC_INTEREST = 0x39
    PATTERN_INTEREST = 0x3A
    ADVERTISEMENT = 0x3B
    UME_CTXINSTS = 0x3C
    UME_STORENAME = 0x3D
    UMQ_ULB_RCR = 0x3E
    UMQ_LF = 0x3F
    CTXINFO = 0x40
    UME_PSER = 0x41
    CTXINST = 0x42
    DOMAIN = 0x43
    TNWG_CAPABILITIES = 0x44
    PATIDX = 0x45
    UME_CLIENT_LIFETIME = 0x46
    UME_SID = 0x47
    UMQ_IDX_CMD = 0x48
    UMQ_IDX_CMD_RESP = 0x49
    ODOMAIN = 0x4A
    STREAM = 0x4B
    TOPIC_MD_INTEREST = 0x4C
    PATTERN_MD_INTEREST = 0x4D
    LJI_REQ = 0x4E
    TNWG_KA = 0x4F
    UME_RCV_KEEPALIVE = 0x50
    UMQ_CMD = 0x51
    UMQ_CMD_RESP = 0x52
    SRI_REQ = 0x53
    UME_STORE_DOMAIN = 0x54
    SRI = 0x55
    ROUTE_INFO = 0x56
    ROUTE_INFO_NEIGHBOR = 0x57
    GATEWAY_NAME = 0x58
    AUTHENTICATION = 0x60
    HMAC = 0x62
    UMQ_SID = 0x63
    DESTINATION = 0x64
    TOPIC_IDX = 0x65
    TOPIC_SOURCE = 0x67  # 0x66 is not a code (§2.3)
    TOPIC_SOURCE_EXFUNC = 0x68
    UME_STORE_INFO_EXT = 0x69
    UME_PSRC_ELECTION_TOKEN = 0x6A
    TCP_SID = 0x6B
    EXTOPT = 0xFE
    NONE = 0xFF


# --------------------------------------------------------------------------------------------------
# Extension headers: the base, the table-driven fixed layouts, the registry
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Header:
    """One LBMC extension header.  ``code`` is its type code; ``encode_body`` gives the bytes after
    the two-byte ``next_hdr``/``hdr_len`` prefix (which the message encoder writes)."""

    code: ClassVar[int] = -1

    def type_code(self) -> int:
        """The wire type code (a class constant except for :class:`UnknownHeader`)."""
        return self.code

    def encode_body(self) -> bytes:
        raise NotImplementedError


_DECODERS: dict[int, Callable[[memoryview], Header]] = {}
_CLASSES: dict[int, type[Header]] = {}

_INT_RANGES: Final = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF, "Q": 0xFFFFFFFFFFFFFFFF}


def _check_int(owner: str, name: str, value: object, limit: int) -> None:
    if not isinstance(value, int) or not 0 <= value <= limit:
        raise WireError(f"{owner}.{name} must be an integer in 0..{limit:#x}, got {value!r}")


def _check_field(owner: str, name: str, kind: str, value: object) -> None:
    limit = _INT_RANGES.get(kind)
    if limit is not None:
        _check_int(owner, name, value, limit)
    elif kind == "ip":
        if not isinstance(value, str):
            raise WireError(f"{owner}.{name} must be a dotted-quad string, got {value!r}")
        ip_to_bytes(value)
    else:  # "<n>s": fixed-size opaque bytes (context instances, OTIDs, HMACs)
        size = int(kind[:-1])
        if not isinstance(value, bytes) or len(value) != size:
            raise WireError(f"{owner}.{name} must be {size} bytes, got {value!r}")


def _encode_name(owner: str, value: object, *, optional: bool) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{owner}: name must be a string, got {value!r}")
    if optional and not value:
        return b""
    raw = _utf8(owner, value)
    if b"\x00" in raw:
        raise WireError(f"{owner}: name contains a NUL byte: {value!r}")
    return raw + b"\x00"


def _utf8(owner: str, text: str) -> bytes:
    """UTF-8 with ``surrogateescape``, so names decoded from arbitrary bytes encode back unchanged."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise WireError(f"{owner}: {text!r} cannot be encoded as UTF-8") from exc


def _decode_name(owner: str, raw: bytes, *, optional: bool) -> str:
    """A name that fills the rest of a header: NUL-terminated (the NUL is optional, §2.4)."""
    if not raw:
        if optional:
            return ""
        raise WireError(f"{owner}: empty name (header length incorrect)")
    nul = raw.find(b"\x00")
    if nul >= 0:
        if raw[nul:].strip(b"\x00"):
            raise WireError(f"{owner}: bytes after the terminating NUL of the name")
        raw = raw[:nul]
    return raw.decode("utf-8", "surrogateescape")


@dataclass(frozen=True, slots=True)
class _Fixed(Header):
    """A header described by a layout table: fixed fields, optionally followed by a variable tail."""

    _struct: ClassVar[struct.Struct]
    _spec: ClassVar[tuple[tuple[str, str], ...]]
    _tail: ClassVar[tuple[str, str] | None]

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name, kind in self._spec:
            _check_field(owner, name, kind, getattr(self, name))
        self._tail_bytes()  # validates the tail and the total length

    def _tail_bytes(self) -> bytes:
        tail = self._tail
        if tail is None:
            return b""
        name, kind = tail
        value = getattr(self, name)
        owner = type(self).__name__
        if kind == "bytes":
            if not isinstance(value, bytes):
                raise WireError(f"{owner}.{name} must be bytes, got {value!r}")
            raw = value
        else:
            raw = _encode_name(owner, value, optional=kind == "optname")
        if self._struct.size + len(raw) > MAX_HEADER_BODY_LEN:
            raise WireError(f"{owner}.{name} is too long for a one-byte header length ({len(raw)} bytes)")
        return raw

    def encode_body(self) -> bytes:
        values = [ip_to_bytes(getattr(self, n)) if k == "ip" else getattr(self, n) for n, k in self._spec]
        return self._struct.pack(*values) + self._tail_bytes()

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        st = cls._struct
        size = len(body)
        if size < st.size or (cls._tail is None and size != st.size):
            raise WireError(f"{cls.__name__}: header length {size + 2}, layout needs {st.size + 2}")
        kwargs: dict[str, Any] = {}
        for (name, kind), value in zip(cls._spec, st.unpack_from(body, 0), strict=True):
            kwargs[name] = ip_from_bytes(value) if kind == "ip" else value
        if cls._tail is not None:
            name, kind = cls._tail
            raw = bytes(body[st.size :])
            kwargs[name] = (
                raw if kind == "bytes" else _decode_name(cls.__name__, raw, optional=kind == "optname")
            )
        return cls(**kwargs)


_F = TypeVar("_F", bound=type[_Fixed])
_H = TypeVar("_H", bound=type[Header])


def _register(code: int, decoder: Callable[[memoryview], Header], cls: type[Header]) -> None:
    if code in _DECODERS:  # a programming error caught at import time
        raise TypeError(f"LBMC header code {code:#04x} registered twice")
    _DECODERS[code] = decoder
    _CLASSES[code] = cls


def _layout(code: HeaderType, spec: str, *, tail: str | None = None) -> Callable[[_F], _F]:
    """Attach a layout (``"name:kind ..."``, kinds B/H/I/Q, ip, <n>s) to a header dataclass."""

    def apply(cls: _F) -> _F:
        items = tuple((tok.split(":")[0], tok.split(":")[1]) for tok in spec.split())
        tail_item = (tail.split(":")[0], tail.split(":")[1]) if tail else None
        fmt = ">" + "".join("4s" if kind == "ip" else kind for _, kind in items)
        names = {n for n, _ in items} | ({tail_item[0]} if tail_item else set())
        if names != {f.name for f in dataclasses.fields(cls)}:
            raise TypeError(f"{cls.__name__}: layout names {sorted(names)} do not match its fields")
        cls._struct = struct.Struct(fmt)
        cls._spec = items
        cls._tail = tail_item
        cls.code = int(code)
        _register(int(code), cls.decode_body, cls)
        return cls

    return apply


def header_class(code: int) -> type[Header] | None:
    """The record class decoding extension-header ``code`` (``None``: it decodes to UnknownHeader)."""
    return _CLASSES.get(code)


# --------------------------------------------------------------------------------------------------
# Core headers (§2.4)
# --------------------------------------------------------------------------------------------------

_IGNORE16: Final = 0x8000  # "May be ignored" in 16-bit flags (§2.1)
_IGNORE8: Final = 0x80


@_layout(HeaderType.FRAG, "flags:H first_sqn:I offset:I total_length:I")
@dataclass(frozen=True, slots=True)
class FragmentHeader(_Fixed):
    """FRAG 0x01: one fragment of a message; each fragment has its own (consecutive) topic sqn."""

    first_sqn: int
    offset: int
    total_length: int  # of the reassembled message, properties included
    flags: int = 0

    IGNORE: ClassVar[int] = _IGNORE16


@_layout(HeaderType.BATCH, "flags:H")
@dataclass(frozen=True, slots=True)
class BatchHeader(_Fixed):
    """BATCH 0x02: the first message of an explicit batch carries START, the last END."""

    flags: int = 0

    IGNORE: ClassVar[int] = _IGNORE16
    START: ClassVar[int] = 0x0002
    END: ClassVar[int] = 0x0001

    @property
    def start(self) -> bool:
        return bool(self.flags & self.START)

    @property
    def end(self) -> bool:
        return bool(self.flags & self.END)


@_layout(HeaderType.REQUEST, "flags:B transport:B request_index:I port:H reserved:H ip:ip")
@dataclass(frozen=True, slots=True)
class RequestHeader(_Fixed):
    """REQUEST 0x04: this data message is a request; respond over TCP to ``ip:port``."""

    request_index: int
    port: int
    ip: str
    transport: int = 0  # 0 = TCP, the only value
    flags: int = 0
    reserved: int = 0

    IGNORE: ClassVar[int] = _IGNORE8


@_layout(HeaderType.TOPICNAME, "flags:H", tail="topic:name")
@dataclass(frozen=True, slots=True)
class TopicNameHeader(_Fixed):
    """TOPICNAME 0x05: the topic name, sent NUL-terminated (at most 250 bytes)."""

    topic: str
    flags: int = 0

    IGNORE: ClassVar[int] = _IGNORE16


@dataclass(frozen=True, slots=True)
class AppHeader(Header):
    """APPHDR 0x06: bit 15 ignore, bits 0-14 application code, then opaque data (at least 1 byte)."""

    code: ClassVar[int] = HeaderType.APPHDR
    app_code: int
    data: bytes
    ignore: bool = False

    def __post_init__(self) -> None:
        _check_int("AppHeader", "app_code", self.app_code, 0x7FFF)
        if not isinstance(self.data, bytes) or not 1 <= len(self.data) <= MAX_HEADER_BODY_LEN - 2:
            raise WireError(f"AppHeader.data must be 1..{MAX_HEADER_BODY_LEN - 2} bytes")

    def encode_body(self) -> bytes:
        return _U16.pack(self.app_code | (_IGNORE16 if self.ignore else 0)) + self.data

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        if len(body) < 3:
            raise WireError("AppHeader: header length incorrect (no data)")
        (word,) = _U16.unpack_from(body, 0)
        return cls(word & 0x7FFF, bytes(body[2:]), bool(word & _IGNORE16))


_register(HeaderType.APPHDR, AppHeader.decode_body, AppHeader)


@_layout(HeaderType.UMQ_MSGID, "flags:H regid:Q stamp:Q")
@dataclass(frozen=True, slots=True)
class UmqMessageIdHeader(_Fixed):
    """UMQ_MSGID 0x08: the queue message id (registration id + stamp)."""

    regid: int
    stamp: int
    flags: int = 0


@_layout(HeaderType.UMQ_SQD_RCV, "flags:H queue_id:I queue_ver:I rcr_idx:I assign_id:I")
@dataclass(frozen=True, slots=True)
class UmqSqdReceiveHeader(_Fixed):
    """UMQ_SQD_RCV 0x09 (§2.9); an rcr_idx of 0 marks a queue command response."""

    queue_id: int
    queue_ver: int
    rcr_idx: int
    assign_id: int
    flags: int = 0


@_layout(HeaderType.UMQ_RESUB, "flags:H rcr_idx:I resp_ip:ip resp_port:H appset_idx:H")
@dataclass(frozen=True, slots=True)
class UmqResubmissionHeader(_Fixed):
    """UMQ_RESUB 0x0A (§2.9)."""

    rcr_idx: int
    resp_ip: str
    resp_port: int
    appset_idx: int = 0
    flags: int = 0


@_layout(HeaderType.OTID, "flags:H otid:32s")
@dataclass(frozen=True, slots=True)
class OtidHeader(_Fixed):
    """OTID 0x0B: the originating transport id (32 opaque bytes)."""

    otid: bytes
    flags: int = 0


@_layout(HeaderType.CTXINSTD, "flags:H ctxinst:8s")
@dataclass(frozen=True, slots=True)
class DestinationContextInstanceHeader(_Fixed):
    """CTXINSTD 0x0C: the destination context instance (UIMs)."""

    ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.CTXINSTR, "flags:H ctxinst:8s")
@dataclass(frozen=True, slots=True)
class ReturnContextInstanceHeader(_Fixed):
    """CTXINSTR 0x0D: the sender's (return) context instance (UIMs)."""

    ctxinst: bytes
    flags: int = 0


@_layout(HeaderType.SRCIDX, "flags:H source_index:Q")
@dataclass(frozen=True, slots=True)
class SourceIndexHeader(_Fixed):
    """SRCIDX 0x0E: the source index."""

    source_index: int
    flags: int = 0


@_layout(HeaderType.UMQ_ULB_MSG, "flags:H queue_id:I ulb_src_id:I assign_id:I appset_idx:H num_ras:H")
@dataclass(frozen=True, slots=True)
class UmqUlbMessageHeader(_Fixed):
    """UMQ_ULB_MSG 0x0F (§2.9)."""

    queue_id: int
    ulb_src_id: int
    assign_id: int
    appset_idx: int = 0
    num_ras: int = 0
    flags: int = 0


@_layout(
    HeaderType.SSF_INIT, "flags:B transport:B transport_idx:I client_idx:I ssf_port:H reserved:H ssf_ip:ip"
)
@dataclass(frozen=True, slots=True)
class SsfInitHeader(_Fixed):
    """SSF_INIT 0x10: source-side filtering initialisation (§2.10)."""

    transport_idx: int
    client_idx: int
    ssf_port: int
    ssf_ip: str
    transport: int = 0
    flags: int = 0
    reserved: int = 0


@_layout(HeaderType.SSF_CREQ, "flags:B mode:B transport_idx:I topic_idx:I client_idx:I")
@dataclass(frozen=True, slots=True)
class SsfControlRequestHeader(_Fixed):
    """SSF_CREQ 0x11: mode 0 include, 1 exclude (§2.10)."""

    mode: int
    transport_idx: int
    topic_idx: int
    client_idx: int
    flags: int = 0


# --------------------------------------------------------------------------------------------------
# UME (persistence) headers (§2.8) and late join / retransmission (§2.7)
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


@_layout(
    HeaderType.UME_RXREQ,
    "flags:H request_idx:I transport_idx:I id_2:I seqnum:I rx_port:H reserved:H rx_ip:ip",
)
@dataclass(frozen=True, slots=True)
class RetransmissionRequestHeader(_Fixed):
    """UME_RXREQ 0x15: retransmission request (late join, OTR, UME).  Flag 0x4000 T = TSNI request."""

    request_idx: int
    transport_idx: int
    id_2: int  # topic index when sent by a store, registration id when sent by a receiver
    seqnum: int
    rx_port: int
    rx_ip: str
    flags: int = 0
    reserved: int = 0

    TSNI: ClassVar[int] = 0x4000


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


@_layout(HeaderType.UME_LJ_INFO, "flags:H low_seqnum:I high_seqnum:I request_idx:I")
@dataclass(frozen=True, slots=True)
class LateJoinInfoHeader(_Fixed):
    """UME_LJ_INFO 0x1E: the source's answer to LJI_REQ, the retained [low, high] range."""

    low_seqnum: int
    high_seqnum: int
    request_idx: int
    flags: int = 0


@dataclass(frozen=True, slots=True)
class TsniHeader(Header):
    """TSNI 0x20: (topic index, last sqn) records, at most 31 per header (§2.7)."""

    code: ClassVar[int] = HeaderType.TSNI
    records: tuple[tuple[int, int], ...]
    ignore: bool = False

    MAX_RECORDS: ClassVar[int] = 31

    def __post_init__(self) -> None:
        if not isinstance(self.records, tuple) or not 1 <= len(self.records) <= self.MAX_RECORDS:
            raise WireError(f"TsniHeader needs a tuple of 1..{self.MAX_RECORDS} (tidx, sqn) records")
        for rec in self.records:
            if not isinstance(rec, tuple) or len(rec) != 2:
                raise WireError(f"TsniHeader record must be a (tidx, sqn) pair, got {rec!r}")
            _check_int("TsniHeader", "tidx", rec[0], 0xFFFFFFFF)
            _check_int("TsniHeader", "sqn", rec[1], 0xFFFFFFFF)

    def encode_body(self) -> bytes:
        head = _U16.pack(len(self.records) | (_IGNORE16 if self.ignore else 0))
        return head + b"".join(_U32X2.pack(t, s) for t, s in self.records)

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        size = len(body)
        if size < 2 or (size - 2) % 8:
            raise WireError(f"TsniHeader: header length {size + 2} is not 4 + 8n")
        (word,) = _U16.unpack_from(body, 0)
        count = (size - 2) // 8
        if word & 0x7FFF != count:
            raise WireError(f"TsniHeader: num_recs {word & 0x7FFF} but the header holds {count}")
        records = tuple(_U32X2.unpack_from(body, 2 + 8 * i) for i in range(count))
        return cls(records, bool(word & _IGNORE16))


_register(HeaderType.TSNI, TsniHeader.decode_body, TsniHeader)


@_layout(
    HeaderType.LJI_REQ,
    "flags:H request_idx:I transport_idx:I topic_idx:I req_ip:ip req_port:H reserved:H "
    "tx_low_sqn:I rx_req_max:I rx_req_outstanding_max:I",
)
@dataclass(frozen=True, slots=True)
class LateJoinInfoRequestHeader(_Fixed):
    """LJI_REQ 0x4E: late-join information request.  Flags L/M/O say which limits are present."""

    request_idx: int
    transport_idx: int
    topic_idx: int
    req_ip: str
    req_port: int
    tx_low_sqn: int = 0
    rx_req_max: int = 0
    rx_req_outstanding_max: int = 0
    flags: int = 0
    reserved: int = 0

    LOW_SQN: ClassVar[int] = 0x0001
    RX_REQ_MAX: ClassVar[int] = 0x0002
    RX_REQ_OUTSTANDING_MAX: ClassVar[int] = 0x0004


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


# --------------------------------------------------------------------------------------------------
# UMQ (queuing) headers (§2.9): fixed parts decoded, type-specific records kept as bytes
# --------------------------------------------------------------------------------------------------

_UMQ_CMD_SPEC: Final = "flags:B kind:B queue_id:I cmd_id:H inst_idx:H regid:Q"


@_layout(HeaderType.UMQ_REG, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqRegistrationHeader(_Fixed):
    """UMQ_REG 0x30: ``kind`` is the registration type (1 context .. 8 observer dereg)."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_REG_RESP, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqRegistrationResponseHeader(_Fixed):
    """UMQ_REG_RESP 0x31: ``kind`` is the response type (1-9, 0xFF error)."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@dataclass(frozen=True, slots=True)
class UmqAckHeader(Header):
    """UMQ_ACK 0x32: ``u8 msgs`` (flags high nibble, id count low nibble), ``u8 ack_type``, message
    ids (regid, stamp), then a type-specific record kept as bytes."""

    code: ClassVar[int] = HeaderType.UMQ_ACK
    ack_type: int
    msg_ids: tuple[tuple[int, int], ...] = ()
    record: bytes = b""
    flags: int = 0  # high nibble of ``msgs``: 0x40 T, 0x20 D

    def __post_init__(self) -> None:
        _check_int("UmqAckHeader", "ack_type", self.ack_type, 0xFF)
        if not isinstance(self.flags, int) or self.flags & ~0xF0:
            raise WireError("UmqAckHeader.flags may only use the high nibble (0xF0)")
        if not isinstance(self.msg_ids, tuple) or len(self.msg_ids) > 15:
            raise WireError("UmqAckHeader.msg_ids must be a tuple of at most 15 (regid, stamp) pairs")
        for pair in self.msg_ids:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise WireError(f"UmqAckHeader message id must be a (regid, stamp) pair, got {pair!r}")
            _check_int("UmqAckHeader", "regid", pair[0], _INT_RANGES["Q"])
            _check_int("UmqAckHeader", "stamp", pair[1], _INT_RANGES["Q"])
        if not isinstance(self.record, bytes) or 2 + 16 * len(self.msg_ids) + len(self.record) > 253:
            raise WireError("UmqAckHeader is too long for a one-byte header length")

    def encode_body(self) -> bytes:
        ids = b"".join(_U64X2.pack(r, s) for r, s in self.msg_ids)
        return bytes((self.flags | len(self.msg_ids), self.ack_type)) + ids + self.record

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        if len(body) < 2:
            raise WireError("UmqAckHeader: header too short")
        count = body[0] & 0x0F
        end = 2 + 16 * count
        if end > len(body):
            raise WireError(f"UmqAckHeader: {count} message ids do not fit in the header")
        ids = tuple(_U64X2.unpack_from(body, 2 + 16 * i) for i in range(count))
        return cls(body[1], ids, bytes(body[end:]), body[0] & 0xF0)


_register(HeaderType.UMQ_ACK, UmqAckHeader.decode_body, UmqAckHeader)


@_layout(
    HeaderType.UMQ_RCR,
    "flags:H queue_id:I rcr_idx:I regid:Q stamp:Q topic_tsp:I q_tsp:I assign_id:I appset_idx:H "
    "num_ras:H queue_ver:I",
)
@dataclass(frozen=True, slots=True)
class UmqRcrHeader(_Fixed):
    """UMQ_RCR 0x33 (48 bytes; layout from tshark 4.0.17's field order)."""

    queue_id: int
    rcr_idx: int
    regid: int
    stamp: int
    topic_tsp: int
    q_tsp: int
    assign_id: int
    appset_idx: int
    num_ras: int
    queue_ver: int
    flags: int = 0


@_layout(HeaderType.UMQ_KA, "flags:B ka_type:B queue_id:I regid:Q inst_idx:H reserved:H", tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqKeepaliveHeader(_Fixed):
    """UMQ_KA 0x34: fixed part plus a ka_type-specific record (types 0-3, responses 0x10-0x13)."""

    ka_type: int
    queue_id: int
    regid: int
    inst_idx: int
    record: bytes = b""
    flags: int = 0
    reserved: int = 0


@_layout(HeaderType.UMQ_RXREQ, "flags:B rxreq_type:B", tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqRetransmissionRequestHeader(_Fixed):
    """UMQ_RXREQ 0x35: rxreq_type (1-7) plus its record."""

    rxreq_type: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_QMGMT, "flags:H", tail="data:bytes")
@dataclass(frozen=True, slots=True)
class UmqQueueManagementHeader(_Fixed):
    """UMQ_QMGMT 0x36: opaque queue-management data."""

    data: bytes = b""
    flags: int = 0


@_layout(
    HeaderType.UMQ_RESUB_REQ,
    "flags:H regid:Q stamp:Q rcr_idx:I resp_ip:ip resp_port:H appset_idx:H",
)
@dataclass(frozen=True, slots=True)
class UmqResubmitRequestHeader(_Fixed):
    """UMQ_RESUB_REQ 0x37 (32 bytes)."""

    regid: int
    stamp: int
    rcr_idx: int
    resp_ip: str
    resp_port: int
    appset_idx: int = 0
    flags: int = 0


@_layout(HeaderType.UMQ_RESUB_RESP, "flags:B resp_code:B regid:Q stamp:Q rcr_idx:I reserved:H appset_idx:H")
@dataclass(frozen=True, slots=True)
class UmqResubmitResponseHeader(_Fixed):
    """UMQ_RESUB_RESP 0x38 (28 bytes)."""

    resp_code: int
    regid: int
    stamp: int
    rcr_idx: int
    appset_idx: int = 0
    flags: int = 0
    reserved: int = 0


@_layout(
    HeaderType.UMQ_ULB_RCR,
    "flags:H queue_id:I ulb_src_id:I regid:Q stamp:Q topic_tsp:I assign_id:I appset_idx:H num_ras:H",
)
@dataclass(frozen=True, slots=True)
class UmqUlbRcrHeader(_Fixed):
    """UMQ_ULB_RCR 0x3E (40 bytes)."""

    queue_id: int
    ulb_src_id: int
    regid: int
    stamp: int
    topic_tsp: int
    assign_id: int
    appset_idx: int
    num_ras: int
    flags: int = 0


@_layout(HeaderType.UMQ_LF, "flags:B lf_type:B num_srcs:H lf:H")
@dataclass(frozen=True, slots=True)
class UmqLoadFactorHeader(_Fixed):
    """UMQ_LF 0x3F: load factor."""

    lf_type: int
    num_srcs: int
    lf: int
    flags: int = 0


@_layout(HeaderType.UMQ_IDX_CMD, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqIndexCommandHeader(_Fixed):
    """UMQ_IDX_CMD 0x48: fixed part plus the command record."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_IDX_CMD_RESP, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqIndexCommandResponseHeader(_Fixed):
    """UMQ_IDX_CMD_RESP 0x49."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_CMD, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqCommandHeader(_Fixed):
    """UMQ_CMD 0x51: topic list, message retrieve, message list."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_CMD_RESP, _UMQ_CMD_SPEC, tail="record:bytes")
@dataclass(frozen=True, slots=True)
class UmqCommandResponseHeader(_Fixed):
    """UMQ_CMD_RESP 0x52."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_layout(HeaderType.UMQ_SID, "flags:H key:I sid:Q")
@dataclass(frozen=True, slots=True)
class UmqSessionIdHeader(_Fixed):
    """UMQ_SID 0x63."""

    key: int
    sid: int
    flags: int = 0


# --------------------------------------------------------------------------------------------------
# UIM / routing / resolution-over-LBMC headers (§2.4, §2.10)
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


@_layout(HeaderType.TCP_SID, "flags:H session_id:I")
@dataclass(frozen=True, slots=True)
class SessionIdHeader(_Fixed):
    """TCP_SID 0x6B: the LBT-TCP session id, sent in a control message at connection start."""

    session_id: int
    flags: int = 0


#: The EXTOPT subtype openum uses for :class:`ResponseHeader`; subtypes 0x0100/0x0101 are UM's.
RESPONSE_EXTOPT_SUBTYPE: Final = 0x4F52
_EXTOPT: Final = struct.Struct(">BBHH")
_EXTOPT_IGNORE_SUBTYPE: Final = 0x40


@dataclass(frozen=True, slots=True)
class ExtendedOptionHeader(Header):
    """EXTOPT 0xFE: ``u8 flags, u8 id, u16 subtype, u16 fragment_offset`` then data (§2.10)."""

    code: ClassVar[int] = HeaderType.EXTOPT
    subtype: int
    data: bytes = b""
    flags: int = 0
    option_id: int = 0
    fragment_offset: int = 0

    IGNORE: ClassVar[int] = 0x80
    IGNORE_SUBTYPE: ClassVar[int] = 0x40
    MORE_FRAGMENTS: ClassVar[int] = 0x20
    CONFIG_OPTION: ClassVar[int] = 0x0100
    MESSAGE_SELECTOR: ClassVar[int] = 0x0101

    def __post_init__(self) -> None:
        owner = "ExtendedOptionHeader"
        _check_int(owner, "subtype", self.subtype, 0xFFFF)
        _check_int(owner, "flags", self.flags, 0xFF)
        _check_int(owner, "option_id", self.option_id, 0xFF)
        _check_int(owner, "fragment_offset", self.fragment_offset, 0xFFFF)
        if not isinstance(self.data, bytes) or len(self.data) > MAX_HEADER_BODY_LEN - _EXTOPT.size:
            raise WireError(f"{owner}.data must be at most {MAX_HEADER_BODY_LEN - _EXTOPT.size} bytes")
        if _is_response_extopt(
            self.flags, self.option_id, self.subtype, self.fragment_offset, len(self.data)
        ):
            raise WireError(f"{owner}: this is openum's response option; use ResponseHeader")

    def encode_body(self) -> bytes:
        return _EXTOPT.pack(self.flags, self.option_id, self.subtype, self.fragment_offset) + self.data


@dataclass(frozen=True, slots=True)
class ResponseHeader(Header):
    """Marks a data message as a response to request ``request_index`` (the REQUEST header's qidx).

    Wireshark knows no response header (§2.4: a response is a UIM on the requester's request port and
    the dissector does not show how it is tied back to ``qidx``).  openum therefore carries the index
    in an EXTOPT header (0xFE) of its own subtype :data:`RESPONSE_EXTOPT_SUBTYPE` with the
    "ignore subtype" flag set, so UM receivers may skip it and tshark decodes it cleanly.  This is an
    openum convention, not UM's (unverified) encoding.
    """

    code: ClassVar[int] = HeaderType.EXTOPT
    request_index: int

    def __post_init__(self) -> None:
        _check_int("ResponseHeader", "request_index", self.request_index, 0xFFFFFFFF)

    def encode_body(self) -> bytes:
        head = _EXTOPT.pack(_EXTOPT_IGNORE_SUBTYPE, 0, RESPONSE_EXTOPT_SUBTYPE, 0)
        return head + _U32.pack(self.request_index)


def _is_response_extopt(flags: int, option_id: int, subtype: int, frag: int, size: int) -> bool:
    return (flags, option_id, subtype, frag, size) == (
        _EXTOPT_IGNORE_SUBTYPE,
        0,
        RESPONSE_EXTOPT_SUBTYPE,
        0,
        4,
    )


def _decode_extopt(body: memoryview) -> Header:
    if len(body) < _EXTOPT.size:
        raise WireError("ExtendedOptionHeader: header too short")
    flags, option_id, subtype, frag = _EXTOPT.unpack_from(body, 0)
    data = bytes(body[_EXTOPT.size :])
    if _is_response_extopt(flags, option_id, subtype, frag, len(data)):
        return ResponseHeader(_U32.unpack(data)[0])
    return ExtendedOptionHeader(subtype, data, flags, option_id, frag)


_register(HeaderType.EXTOPT, _decode_extopt, ExtendedOptionHeader)


@dataclass(frozen=True, slots=True)
class UnknownHeader(Header):
    """A header whose type code openum (and Wireshark) does not know, e.g. TGIDX 0x03.

    Decoding keeps its bytes so that a message forwarded unchanged round-trips.  openum never
    creates one itself: Wireshark flags unknown codes as Error/Malformed (§2.3).
    """

    header_code: int
    body: bytes

    def __post_init__(self) -> None:
        _check_int("UnknownHeader", "header_code", self.header_code, 0xFF)
        if self.header_code in (_NHDR_DATA, _NHDR_NONE) or self.header_code in _DECODERS:
            raise WireError(f"UnknownHeader: code {self.header_code:#04x} is not an unknown header type")
        if not isinstance(self.body, bytes) or not 2 <= len(self.body) <= MAX_HEADER_BODY_LEN:
            raise WireError(f"UnknownHeader.body must be 2..{MAX_HEADER_BODY_LEN} bytes")

    def type_code(self) -> int:
        return self.header_code

    def encode_body(self) -> bytes:
        return self.body


# --------------------------------------------------------------------------------------------------
# APPHDR_CHAIN (§2.5)
# --------------------------------------------------------------------------------------------------

_CHAIN_CHANNEL: Final = 0x01
_CHAIN_HF_SQN: Final = 0x02
_CHAIN_GATEWAY_INFO: Final = 0x03
_CHAIN_PROPERTIES_LENGTH: Final = 0x06
_CHAIN_ELEMENT_HEADER: Final = 4
_CHAIN_MAX_DATA: Final = MAX_HEADER_BODY_LEN - 2 - _CHAIN_ELEMENT_HEADER


@dataclass(frozen=True, slots=True)
class PropertiesLengthElement:
    """Chain element 0x06: the length of the message-properties block at the payload's tail.

    The message encoder writes it; build one yourself only for fragments (the block belongs to the
    reassembled message, §2.6)."""

    kind: ClassVar[int] = _CHAIN_PROPERTIES_LENGTH
    length: int

    def __post_init__(self) -> None:
        _check_int("PropertiesLengthElement", "length", self.length, 0xFFFFFFFF)

    def data(self) -> bytes:
        return _U32.pack(self.length)


@dataclass(frozen=True, slots=True)
class HotFailoverElement:
    """Chain element 0x02: the hot-failover sequence number, 32- or 64-bit big-endian (§2.5; the
    width real UM uses is [inferred], both decode cleanly)."""

    kind: ClassVar[int] = _CHAIN_HF_SQN
    sqn: int
    width: int = 32

    def __post_init__(self) -> None:
        if self.width not in (32, 64):
            raise WireError(f"HotFailoverElement.width must be 32 or 64, got {self.width!r}")
        _check_int("HotFailoverElement", "sqn", self.sqn, (1 << self.width) - 1)

    def data(self) -> bytes:
        return (_U32 if self.width == 32 else _U64).pack(self.sqn)


@dataclass(frozen=True, slots=True)
class GatewayInfoElement:
    """Chain element 0x03: gateway (DRO) information, opaque as far as the dissector documents."""

    kind: ClassVar[int] = _CHAIN_GATEWAY_INFO
    info: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.info, bytes) or not 1 <= len(self.info) <= _CHAIN_MAX_DATA:
            raise WireError(f"GatewayInfoElement.info must be 1..{_CHAIN_MAX_DATA} bytes")

    def data(self) -> bytes:
        return self.info


@dataclass(frozen=True, slots=True)
class ChainElement:
    """Any other chain element (0x01 channel, 0x04 non-chained apphdr, 0x05 user data, ...)."""

    kind: int
    payload: bytes

    def __post_init__(self) -> None:
        _check_int("ChainElement", "kind", self.kind, 0xFE)
        if self.kind in (_CHAIN_HF_SQN, _CHAIN_GATEWAY_INFO, _CHAIN_PROPERTIES_LENGTH):
            raise WireError(f"ChainElement: kind {self.kind} has its own element class")
        if not isinstance(self.payload, bytes) or not 1 <= len(self.payload) <= _CHAIN_MAX_DATA:
            raise WireError(f"ChainElement.payload must be 1..{_CHAIN_MAX_DATA} bytes")

    def data(self) -> bytes:
        return self.payload


AppHeaderElement = PropertiesLengthElement | HotFailoverElement | GatewayInfoElement | ChainElement
_ELEMENT_TYPES: Final = (PropertiesLengthElement, HotFailoverElement, GatewayInfoElement, ChainElement)


def _decode_element(kind: int, data: bytes) -> AppHeaderElement:
    if kind == _CHAIN_PROPERTIES_LENGTH:
        if len(data) != 4:
            raise WireError(f"properties-length chain element has {len(data)} data bytes, not 4")
        return PropertiesLengthElement(_U32.unpack(data)[0])
    if kind == _CHAIN_HF_SQN:
        if len(data) == 4:
            return HotFailoverElement(_U32.unpack(data)[0], 32)
        if len(data) == 8:
            return HotFailoverElement(_U64.unpack(data)[0], 64)
        raise WireError(f"hot-failover chain element has {len(data)} data bytes, not 4 or 8")
    if kind == _CHAIN_GATEWAY_INFO:
        return GatewayInfoElement(data)
    if kind == _NHDR_NONE:
        raise WireError("chain element of type 0xFF (none)")
    return ChainElement(kind, data)


@dataclass(frozen=True, slots=True)
class AppHeaderChain(Header):
    """APPHDR_CHAIN 0x07: ``u8 res, u8 first_chain_hdr`` then elements ``[b0][len][u16 res][data]``.

    Element order on the wire (spec §2.5 and §5.2): Wireshark takes element 1's type from
    ``first_chain_hdr`` and every later element's type from *its own* first byte.  openum writes
    each later element's own type there (so Wireshark labels every element right) and, in element 1,
    the type of element 2 (0xFF when alone), so a reader following LBMC's usual "next" convention
    also reads chains of up to two elements right.  The message encoder puts the properties-length
    element first, as the spec recommends.  Decoding follows Wireshark, except that a 0xFF own-type
    byte (never a valid type) falls back to the previous element's "next" byte.
    """

    code: ClassVar[int] = HeaderType.APPHDR_CHAIN
    elements: tuple[AppHeaderElement, ...]
    res: int = 0

    def __post_init__(self) -> None:
        _check_int("AppHeaderChain", "res", self.res, 0xFF)
        if not isinstance(self.elements, tuple) or not self.elements:
            raise WireError("AppHeaderChain needs a non-empty tuple of elements")
        if not all(isinstance(e, _ELEMENT_TYPES) for e in self.elements):
            raise WireError("AppHeaderChain.elements must be chain element records")
        size = 2 + sum(_CHAIN_ELEMENT_HEADER + len(e.data()) for e in self.elements)
        if size > MAX_HEADER_BODY_LEN:
            raise WireError(f"AppHeaderChain is {size + 2} bytes; at most 255 fit a one-byte length")

    def encode_body(self) -> bytes:
        elems = self.elements
        parts = [bytes((self.res, elems[0].kind))]
        for i, elem in enumerate(elems):
            data = elem.data()
            lead = elem.kind
            if i == 0:
                lead = elems[1].kind if len(elems) > 1 else _NHDR_NONE
            parts.append(_ELEM_HDR.pack(lead, _CHAIN_ELEMENT_HEADER + len(data), 0))
            parts.append(data)
        return b"".join(parts)

    @classmethod
    def decode_body(cls, body: memoryview) -> Header:
        size = len(body)
        if size < 2:
            raise WireError("AppHeaderChain: header too short")
        res, kind = body[0], body[1]
        pos = 2
        prev_lead = kind
        elements: list[AppHeaderElement] = []
        while pos < size:
            if pos + _CHAIN_ELEMENT_HEADER > size:
                raise WireError("AppHeaderChain: truncated chain element", offset=pos)
            lead, elen = body[pos], body[pos + 1]
            if elen < _CHAIN_ELEMENT_HEADER or pos + elen > size:
                raise WireError(f"AppHeaderChain: element length {elen} is invalid", offset=pos)
            if elements:
                kind = lead if lead != _NHDR_NONE else prev_lead
            elements.append(_decode_element(kind, bytes(body[pos + _CHAIN_ELEMENT_HEADER : pos + elen])))
            prev_lead = lead
            pos += elen
        return cls(tuple(elements), res)


_register(HeaderType.APPHDR_CHAIN, AppHeaderChain.decode_body, AppHeaderChain)


# --------------------------------------------------------------------------------------------------
# Message properties (§2.6)
# --------------------------------------------------------------------------------------------------


class PropertyType(IntEnum):
    """Message-property value types (§2.6)."""

    BOOLEAN = 1
    BYTE = 2
    SHORT = 3
    INT = 4
    LONG = 5
    FLOAT = 6
    DOUBLE = 7
    STRING = 8


PropertyValue = bool | int | float | str
_PROPS_MAGIC_LE: Final = b"\xba\xda\xac\xab"  # magic 0xABACDABA written little-endian
_PROPS_MAGIC_BE: Final = b"\xab\xac\xda\xba"
_PROPS_MAGIC: Final = 0xABACDABA
_PROP_INT_FORMATS: Final = {
    PropertyType.BYTE: ("b", 1),
    PropertyType.SHORT: ("h", 2),
    PropertyType.INT: ("i", 4),
    PropertyType.LONG: ("q", 8),
    PropertyType.FLOAT: ("f", 4),
    PropertyType.DOUBLE: ("d", 8),
}
_PROP_STRUCTS: Final = {
    (t, order): struct.Struct(order + fmt) for t, (fmt, _) in _PROP_INT_FORMATS.items() for order in "<>"
}
_PROPS_HEAD: Final = {order: struct.Struct(order + "IHBB") for order in "<>"}
_PROPS_DESC: Final = {order: struct.Struct(order + "IIII") for order in "<>"}
_INT_LIMITS: Final = {
    PropertyType.BYTE: 1 << 7,
    PropertyType.SHORT: 1 << 15,
    PropertyType.INT: 1 << 31,
    PropertyType.LONG: 1 << 63,
}


@dataclass(frozen=True, slots=True)
class TypedValue:
    """A property value with an explicit type, for mappings where the inferred type is not wanted
    (e.g. ``{"qty": TypedValue(PropertyType.SHORT, 7)}``)."""

    type: PropertyType
    value: PropertyValue


@dataclass(frozen=True, slots=True)
class Property:
    """One message property: a name, a type and a value of that type.

    Integer types are signed (byte 8-bit .. long 64-bit); FLOAT is IEEE single precision (a value
    that is not exactly representable comes back rounded); STRING may not contain NUL.
    """

    name: str
    type: PropertyType
    value: PropertyValue

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "\x00" in self.name:
            raise WireError(f"property name must be a non-empty string without NUL, got {self.name!r}")
        _utf8("property name", self.name)
        if not isinstance(self.type, PropertyType):
            try:
                object.__setattr__(self, "type", PropertyType(self.type))
            except ValueError as exc:
                raise WireError(f"unknown property type {self.type!r}") from exc
        _check_property_value(self.name, self.type, self.value)


def _check_property_value(name: str, ptype: PropertyType, value: object) -> None:
    bad = f"property {name!r}: {value!r} is not a valid {ptype.name} value"
    if ptype is PropertyType.BOOLEAN:
        if not isinstance(value, bool):
            raise WireError(bad)
    elif ptype in _INT_LIMITS:
        limit = _INT_LIMITS[ptype]
        if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
            raise WireError(bad)
    elif ptype in (PropertyType.FLOAT, PropertyType.DOUBLE):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WireError(bad)
        try:  # out of range for the IEEE width (a huge int, or beyond float32's range)
            _PROP_STRUCTS[(ptype, ">")].pack(value)
        except (OverflowError, struct.error):
            raise WireError(bad) from None
    elif not isinstance(value, str) or "\x00" in value:
        raise WireError(bad)
    else:
        _utf8(f"property {name!r}", value)


def _infer_property(name: str, value: PropertyValue | TypedValue | Property) -> Property:
    if isinstance(value, Property):
        if value.name != name:
            raise WireError(f"property {name!r} given a Property named {value.name!r}")
        return value
    if isinstance(value, TypedValue):
        return Property(name, value.type, value.value)
    if isinstance(value, bool):
        return Property(name, PropertyType.BOOLEAN, value)
    if isinstance(value, int):
        ptype = PropertyType.INT if -(1 << 31) <= value < (1 << 31) else PropertyType.LONG
        return Property(name, ptype, value)
    if isinstance(value, float):
        return Property(name, PropertyType.DOUBLE, value)
    if isinstance(value, str):
        return Property(name, PropertyType.STRING, value)
    raise WireError(f"property {name!r}: cannot infer a type for {value!r}; use TypedValue")


@dataclass(frozen=True, slots=True)
class PropertiesBlock:
    """The message-properties block (§2.6): properties in order, and the byte order it is sent in."""

    properties: tuple[Property, ...] = ()
    big_endian: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.properties, tuple) or not all(
            isinstance(p, Property) for p in self.properties
        ):
            raise WireError("PropertiesBlock.properties must be a tuple of Property records")
        if len(self.properties) > 0xFFFF:
            raise WireError("too many message properties (at most 65535)")

    @classmethod
    def from_mapping(
        cls, mapping: Mapping[str, PropertyValue | TypedValue | Property], *, big_endian: bool = False
    ) -> PropertiesBlock:
        """Build from ``{name: value}``; bool -> BOOLEAN, int -> INT (LONG when it does not fit),
        float -> DOUBLE, str -> STRING; :class:`TypedValue` picks the type explicitly."""
        return cls(tuple(_infer_property(name, value) for name, value in mapping.items()), big_endian)

    def to_dict(self) -> dict[str, PropertyValue]:
        """``{name: value}`` (a later duplicate name wins)."""
        return {p.name: p.value for p in self.properties}

    def get(self, name: str) -> Property | None:
        for prop in self.properties:
            if prop.name == name:
                return prop
        return None


PropertiesInput = PropertiesBlock | Mapping[str, PropertyValue | TypedValue | Property] | Iterable[Property]


def _as_block(props: PropertiesInput, big_endian: bool) -> PropertiesBlock:
    if isinstance(props, PropertiesBlock):
        return props
    if isinstance(props, Mapping):
        return PropertiesBlock.from_mapping(props, big_endian=big_endian)
    return PropertiesBlock(tuple(props), big_endian)


def encode_properties(props: PropertiesInput, *, big_endian: bool = False) -> bytes:
    """Encode a properties block (``big_endian`` applies unless ``props`` is a PropertiesBlock).

    Layout as verified with tshark: header, one 16-byte descriptor per property, then each key
    followed directly by its value; offsets are from the block start; ``hash`` is sent as 0 (§2.6).
    """
    block = _as_block(props, big_endian)
    order = ">" if block.big_endian else "<"
    count = len(block.properties)
    base = 8 + 16 * count
    descs = bytearray()
    data = bytearray()
    desc_struct = _PROPS_DESC[order]
    for prop in block.properties:
        key_off = base + len(data)
        data += _utf8("property name", prop.name) + b"\x00"
        value_off = base + len(data)
        if prop.type is PropertyType.BOOLEAN:
            data.append(1 if prop.value else 0)
        elif prop.type is PropertyType.STRING:
            data += _utf8("property value", str(prop.value)) + b"\x00"
        else:
            data += _PROP_STRUCTS[(prop.type, order)].pack(prop.value)
        descs += desc_struct.pack(key_off, value_off, 0, prop.type)
    if base + len(data) > 0xFFFFFFFF:
        raise WireError("message properties too large")
    return _PROPS_HEAD[order].pack(_PROPS_MAGIC, count, 0, 0) + bytes(descs) + bytes(data)


def _cstring_at(view: memoryview, offset: int, what: str) -> str:
    if not 0 <= offset < len(view):
        raise WireError(f"{what} offset out of range", offset=offset)
    raw = bytes(view[offset:])
    nul = raw.find(b"\x00")
    if nul < 0:
        raise WireError(f"{what} is not NUL-terminated", offset=offset)
    return raw[:nul].decode("utf-8", "surrogateescape")


def decode_properties(buf: Buffer) -> PropertiesBlock:
    """Decode a properties block (the whole of ``buf``); byte order from the magic (§2.6)."""
    view = as_view(buf)
    size = len(view)
    if size < 8:
        raise WireError(f"properties block of {size} bytes is shorter than its 8-byte header")
    magic = bytes(view[:4])
    if magic == _PROPS_MAGIC_LE:
        order = "<"
    elif magic == _PROPS_MAGIC_BE:
        order = ">"
    else:
        raise WireError(f"bad message-properties magic {magic.hex()}")
    _, count, ver_type, _ = _PROPS_HEAD[order].unpack_from(view, 0)
    if ver_type >> 4 != 0:
        raise WireError(f"unsupported message-properties version {ver_type >> 4}")
    if 8 + 16 * count > size:
        raise WireError(f"{count} property descriptors do not fit in {size} bytes")
    props = []
    desc_struct = _PROPS_DESC[order]
    for i in range(count):
        key_off, value_off, _hash, type_code = desc_struct.unpack_from(view, 8 + 16 * i)
        try:
            ptype = PropertyType(type_code)
        except ValueError:
            raise WireError(f"unknown message-property type {type_code}") from None
        name = _cstring_at(view, key_off, "property name")
        value: PropertyValue
        if ptype is PropertyType.STRING:
            value = _cstring_at(view, value_off, f"property {name!r} value")
        elif ptype is PropertyType.BOOLEAN:
            if not 0 <= value_off < size:
                raise WireError(f"property {name!r} value out of range", offset=value_off)
            value = view[value_off] != 0
        else:
            vstruct = _PROP_STRUCTS[(ptype, order)]
            if not 0 <= value_off <= size - vstruct.size:
                raise WireError(f"property {name!r} value out of range", offset=value_off)
            value = vstruct.unpack_from(view, value_off)[0]
        props.append(Property(name, ptype, value))
    return PropertiesBlock(tuple(props), order == ">")


# --------------------------------------------------------------------------------------------------
# Messages (§2.1) and the record API
# --------------------------------------------------------------------------------------------------

_DATA_HDR: Final = struct.Struct(">BBHII")
_CTL_HDR: Final = struct.Struct(">BBH")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_U64: Final = struct.Struct(">Q")
_U32X2: Final = struct.Struct(">II")
_U64X2: Final = struct.Struct(">QQ")
_ELEM_HDR: Final = struct.Struct(">BBH")
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


_HT = TypeVar("_HT", bound=Header)


@dataclass(frozen=True, slots=True)
class LbmcMessage:
    """One LBMC message.

    ``headers`` are the extension headers in chain order.  ``payload`` is the application data (for
    decoded messages a zero-copy ``memoryview`` into the decoded buffer).  ``properties`` is the
    message-properties block; the encoder appends it to the payload and writes the
    properties-length chain element itself (decoding removes that element again), so a record
    round-trips.  A message with a :class:`FragmentHeader` carries raw fragment bytes instead: the
    block belongs to the reassembled message, and its :class:`PropertiesLengthElement` is explicit.
    Control messages (EOT, CONTROL) have no topic index, sqn or payload.
    """

    type: MessageType = MessageType.DATA
    topic_index: int = 0
    sqn: int = 0
    headers: tuple[Header, ...] = ()
    payload: Buffer = b""
    properties: PropertiesBlock | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.type, MessageType):
            try:
                object.__setattr__(self, "type", MessageType(self.type))
            except ValueError as exc:
                raise WireError(f"unknown LBMC message type {self.type!r}") from exc
        if not isinstance(self.headers, tuple):
            object.__setattr__(self, "headers", tuple(self.headers))
        if not all(isinstance(h, Header) for h in self.headers):
            raise WireError("LbmcMessage.headers must be Header records")
        _check_int("LbmcMessage", "topic_index", self.topic_index, 0xFFFFFFFF)
        _check_int("LbmcMessage", "sqn", self.sqn, 0xFFFFFFFF)
        if not isinstance(self.payload, bytes | bytearray | memoryview):
            raise WireError("LbmcMessage.payload must be a bytes-like object")
        if self.properties is not None and not isinstance(self.properties, PropertiesBlock):
            raise WireError("LbmcMessage.properties must be a PropertiesBlock or None")
        fragment = any(isinstance(h, FragmentHeader) for h in self.headers)
        explicit_proplen = any(
            isinstance(h, AppHeaderChain) and any(isinstance(e, PropertiesLengthElement) for e in h.elements)
            for h in self.headers
        )
        if self.type in DATA_TYPES:
            if self.properties is not None and fragment:
                raise WireError("a fragment carries raw bytes; encode properties into the whole message")
            if explicit_proplen and not fragment:
                raise WireError("the properties-length element is written by the encoder; set properties")
        elif self.topic_index or self.sqn or len(self.payload) or self.properties is not None:
            raise WireError(f"a {self.type.name} message has no topic index, sqn, payload or properties")

    @property
    def is_data(self) -> bool:
        return self.type in DATA_TYPES

    def header(self, cls: builtins.type[_HT]) -> _HT | None:
        """The first header of class ``cls``, or ``None``."""
        for hdr in self.headers:
            if isinstance(hdr, cls):
                return hdr
        return None

    @property
    def topic_name(self) -> str | None:
        hdr = self.header(TopicNameHeader)
        return None if hdr is None else hdr.topic


def data_message(
    topic_index: int,
    sqn: int,
    payload: Buffer = b"",
    *headers: Header,
    properties: PropertiesBlock | None = None,
    msg_type: MessageType = MessageType.DATA,
) -> LbmcMessage:
    """A data message (type DATA unless ``msg_type`` says RETRANSMISSION/PROACTIVE_RETRANSMISSION)."""
    return LbmcMessage(msg_type, topic_index, sqn, headers, payload, properties)


def control_message(*headers: Header, msg_type: MessageType = MessageType.CONTROL) -> LbmcMessage:
    """A control message carrying ``headers`` (TSNI, UME, TCP session id, ...)."""
    return LbmcMessage(msg_type, 0, 0, headers)


def _with_properties_length(headers: tuple[Header, ...], length: int) -> tuple[Header, ...]:
    elem = PropertiesLengthElement(length)
    for i, hdr in enumerate(headers):
        if isinstance(hdr, AppHeaderChain):
            merged = AppHeaderChain((elem, *hdr.elements), hdr.res)
            return (*headers[:i], merged, *headers[i + 1 :])
    return (*headers, AppHeaderChain((elem,)))


def _encode_parts(msg: LbmcMessage) -> list[bytes | bytearray | memoryview]:
    headers = msg.headers
    payload: bytes | bytearray | memoryview = msg.payload
    tail = b""
    if msg.properties is not None:
        tail = encode_properties(msg.properties)
        headers = _with_properties_length(headers, len(tail))
    is_data = msg.type in DATA_TYPES
    terminator = _NHDR_DATA if is_data else _NHDR_NONE
    parts: list[bytes | bytearray | memoryview] = [b""]
    size = DATA_HEADER_LEN if is_data else CONTROL_HEADER_LEN
    count = len(headers)
    for i, hdr in enumerate(headers):
        body = hdr.encode_body()
        if len(body) > MAX_HEADER_BODY_LEN:
            raise WireError(f"{type(hdr).__name__} is too long ({len(body) + 2} bytes)")
        nxt = headers[i + 1].type_code() if i + 1 < count else terminator
        parts.append(bytes((nxt, len(body) + 2)))
        parts.append(body)
        size += len(body) + 2
    first = headers[0].type_code() if headers else terminator
    size += len(payload) + len(tail)
    if size > MAX_MESSAGE_LEN:
        raise WireError(f"LBMC message of {size} bytes exceeds {MAX_MESSAGE_LEN}; fragment it")
    if is_data:
        parts[0] = _DATA_HDR.pack(msg.type, first, size, msg.topic_index, msg.sqn)
        parts.append(payload)
        if tail:
            parts.append(tail)
    else:
        parts[0] = _CTL_HDR.pack(msg.type, first, size)
    return parts


def encode_message(msg: LbmcMessage) -> bytes:
    """Encode one message (the record API; see :func:`encode_data_into` for the hot path)."""
    return b"".join(_encode_parts(msg))


def encode_message_into(buf: bytearray | memoryview, offset: int, msg: LbmcMessage) -> int:
    """Encode ``msg`` into ``buf`` at ``offset``; return the offset after it."""
    raw = encode_message(msg)
    end = offset + len(raw)
    if offset < 0 or end > len(buf):
        raise WireError(f"buffer too small: need {end} bytes, have {len(buf)}")
    buf[offset:end] = raw
    return end


def message_length(buf: Buffer, offset: int = 0) -> int | None:
    """The ``msglen`` of the message at ``offset``, or ``None`` when fewer than 4 bytes are there."""
    if offset < 0 or offset + 4 > len(buf):
        return None
    value: int = _U16.unpack_from(buf, offset + 2)[0]
    return value


def _decode_chain(view: memoryview, pos: int, end: int, code: int) -> tuple[list[Header], int, int]:
    headers: list[Header] = []
    while code not in (_NHDR_DATA, _NHDR_NONE):
        if pos + _MIN_HEADER_LEN > end:
            raise WireError(f"truncated LBMC header {code:#04x}", offset=pos)
        nxt = view[pos]
        hlen = view[pos + 1]
        if hlen < _MIN_HEADER_LEN:  # 0 would loop forever; the dissector aborts (§2.1)
            raise WireError(f"LBMC header {code:#04x} has length {hlen}", offset=pos)
        if pos + hlen > end:
            raise WireError(f"LBMC header {code:#04x} runs past the message end", offset=pos)
        body = view[pos + 2 : pos + hlen]
        decoder = _DECODERS.get(code)
        try:
            hdr = UnknownHeader(code, bytes(body)) if decoder is None else decoder(body)
        except WireError as exc:
            raise WireError(str(exc), offset=pos) from None
        headers.append(hdr)
        pos += hlen
        code = nxt
    return headers, pos, code


def _split_properties(
    headers: list[Header], payload: memoryview
) -> tuple[tuple[Header, ...], memoryview, PropertiesBlock | None]:
    if not any(isinstance(h, AppHeaderChain) for h in headers) or any(
        isinstance(h, FragmentHeader) for h in headers
    ):
        return tuple(headers), payload, None
    total = 0
    found = False
    kept: list[Header] = []
    for hdr in headers:
        if isinstance(hdr, AppHeaderChain):
            rest = tuple(e for e in hdr.elements if not isinstance(e, PropertiesLengthElement))
            if len(rest) != len(hdr.elements):
                found = True
                total += sum(e.length for e in hdr.elements if isinstance(e, PropertiesLengthElement))
                if rest:
                    kept.append(AppHeaderChain(rest, hdr.res))
                continue
        kept.append(hdr)
    if not found:
        return tuple(headers), payload, None
    if total > len(payload):
        raise WireError(f"properties length {total} exceeds the payload ({len(payload)} bytes)")
    if total == 0:
        return tuple(kept), payload, None
    split = len(payload) - total
    return tuple(kept), payload[:split], decode_properties(payload[split:])


_MESSAGE_TYPES: Final = {int(t): t for t in MessageType}
_new_object = object.__new__
_set_field = object.__setattr__


def _trusted_message(  # noqa: PLR0917 - internal, positional for speed on the decode path
    mtype: MessageType,
    tidx: int,
    sqn: int,
    headers: tuple[Header, ...],
    payload: memoryview,
    props: PropertiesBlock | None,
) -> LbmcMessage:
    """Build a decoded message without re-running the validation its parts already passed."""
    msg: LbmcMessage = _new_object(LbmcMessage)
    _set_field(msg, "type", mtype)
    _set_field(msg, "topic_index", tidx)
    _set_field(msg, "sqn", sqn)
    _set_field(msg, "headers", headers)
    _set_field(msg, "payload", payload)
    _set_field(msg, "properties", props)
    return msg


def _decode_at(view: memoryview, offset: int) -> tuple[LbmcMessage, int]:
    size = len(view)
    if offset < 0 or offset + CONTROL_HEADER_LEN > size:
        raise WireError("truncated LBMC message header", offset=offset)
    ver_type, first, msglen = _CTL_HDR.unpack_from(view, offset)
    mtype = _MESSAGE_TYPES.get(ver_type)  # version nibble 0 and a known type
    if mtype is None:
        if ver_type >> 4 != LBMC_VERSION:
            raise WireError(f"LBMC version {ver_type >> 4} (only 0 exists)", offset=offset)
        raise WireError(f"invalid LBMC type {ver_type & 0x0F:#04x}", offset=offset)
    is_data = ver_type in _DATA_TYPE_VALUES
    hdr_len = DATA_HEADER_LEN if is_data else CONTROL_HEADER_LEN
    if msglen < hdr_len:
        raise WireError(f"LBMC msglen {msglen} is shorter than its {hdr_len}-byte header", offset=offset)
    end = offset + msglen
    if end > size:
        raise WireError(f"LBMC message of {msglen} bytes truncated to {size - offset}", offset=offset)
    if is_data:
        tidx, sqn = _U32X2.unpack_from(view, offset + CONTROL_HEADER_LEN)
        if first == _NHDR_DATA:  # the common case: no extension headers
            return _trusted_message(mtype, tidx, sqn, (), view[offset + hdr_len : end], None), end
    headers, pos, last = _decode_chain(view, offset + hdr_len, end, first)
    if is_data:
        if last != _NHDR_DATA:
            raise WireError("data message header chain does not end with DATA (0x00)", offset=pos)
        hdrs, payload, props = _split_properties(headers, view[pos:end])
        return _trusted_message(mtype, tidx, sqn, hdrs, payload, props), end
    if last != _NHDR_NONE:
        raise WireError("control message header chain does not end with NONE (0xFF)", offset=pos)
    if pos != end:
        raise WireError(f"{end - pos} bytes after a control message's headers", offset=pos)
    return _trusted_message(mtype, 0, 0, tuple(headers), view[end:end], None), end


def decode_message_at(buf: Buffer, offset: int = 0) -> tuple[LbmcMessage, int]:
    """Decode the message at ``offset``; return it and the offset of the next message."""
    return _decode_at(as_view(buf), offset)


def decode_message(buf: Buffer) -> LbmcMessage:
    """Decode a buffer holding exactly one LBMC message."""
    view = as_view(buf)
    msg, end = _decode_at(view, 0)
    if end != len(view):
        raise WireError(f"{len(view) - end} bytes after the LBMC message", offset=end)
    return msg


def decode_messages(buf: Buffer) -> list[LbmcMessage]:
    """Decode every message of a datagram or segment holding LBMC messages back to back (§1)."""
    view = as_view(buf)
    out: list[LbmcMessage] = []
    pos = 0
    size = len(view)
    while pos < size:
        msg, pos = _decode_at(view, pos)
        out.append(msg)
    return out


def split_messages(buf: Buffer) -> list[memoryview]:
    """Split a datagram into its messages (zero-copy views) by ``msglen``, without decoding them."""
    view = as_view(buf)
    out: list[memoryview] = []
    pos = 0
    size = len(view)
    while pos < size:
        if pos + CONTROL_HEADER_LEN > size:
            raise WireError("truncated LBMC message header", offset=pos)
        msglen = _U16.unpack_from(view, pos + 2)[0]
        if msglen < CONTROL_HEADER_LEN or pos + msglen > size:
            raise WireError(f"LBMC msglen {msglen} is impossible here", offset=pos)
        out.append(view[pos : pos + msglen])
        pos += msglen
    return out


# --------------------------------------------------------------------------------------------------
# Hot path: plain data messages without records
# --------------------------------------------------------------------------------------------------

_pack_data_hdr = _DATA_HDR.pack_into
_unpack_data_hdr = _DATA_HDR.unpack_from
# One struct per payload size packs header and payload in a single call (about twice as fast as
# packing the header and slice-assigning the payload).  Bounded: sizes beyond it take the slow way.
_DATA_STRUCTS: dict[int, struct.Struct] = {}
_DATA_TOPIC_STRUCTS: dict[tuple[int, int], struct.Struct] = {}
_MAX_CACHED_SIZES: Final = 4096


def _encode_error(offset: int, size: int, buf: bytearray | memoryview, exc: Exception) -> WireError:
    if size > MAX_MESSAGE_LEN:
        return WireError(f"LBMC message of {size} bytes exceeds {MAX_MESSAGE_LEN}; fragment it")
    return WireError(f"cannot encode a {size}-byte data message at {offset} in {len(buf)} bytes: {exc}")


def encode_data_into(
    buf: bytearray | memoryview, offset: int, topic_index: int, sqn: int, payload: Buffer
) -> int:
    """Write a plain data message (no extension headers) at ``offset``; return the end offset."""
    st = _DATA_STRUCTS.get(len(payload))
    if st is not None and offset >= 0 and type(payload) is bytes:
        try:
            st.pack_into(buf, offset, 0, 0, st.size, topic_index, sqn, payload)
        except struct.error as exc:
            raise _encode_error(offset, st.size, buf, exc) from None
        return offset + st.size
    size = DATA_HEADER_LEN + len(payload)
    end = offset + size
    if size > MAX_MESSAGE_LEN or end > len(buf) or offset < 0:
        raise _encode_error(offset, size, buf, ValueError("out of range"))
    try:
        _pack_data_hdr(buf, offset, 0, 0, size, topic_index, sqn)
    except struct.error as exc:
        raise _encode_error(offset, size, buf, exc) from None
    buf[offset + DATA_HEADER_LEN : end] = payload
    if len(_DATA_STRUCTS) < _MAX_CACHED_SIZES:
        _DATA_STRUCTS[len(payload)] = struct.Struct(f">BBHII{len(payload)}s")
    return end


def topic_name_block(topic: str) -> bytes:
    """The TOPICNAME header (next = DATA) for :func:`encode_data_topic_into`; build it once."""
    body = TopicNameHeader(topic).encode_body()
    return bytes((_NHDR_DATA, len(body) + 2)) + body


def encode_data_topic_into(  # noqa: PLR0917 - positional on purpose: the per-message hot path
    buf: bytearray | memoryview, offset: int, topic_index: int, sqn: int, topic_block: bytes, payload: Buffer
) -> int:
    """Like :func:`encode_data_into` with a TOPICNAME header (``topic_block`` from
    :func:`topic_name_block`), as on a source's first message of a topic."""
    key = (len(topic_block), len(payload))
    st = _DATA_TOPIC_STRUCTS.get(key)
    if st is not None and offset >= 0 and type(payload) is bytes and type(topic_block) is bytes:
        try:
            st.pack_into(
                buf, offset, 0, HeaderType.TOPICNAME, st.size, topic_index, sqn, topic_block, payload
            )
        except struct.error as exc:
            raise _encode_error(offset, st.size, buf, exc) from None
        return offset + st.size
    hdr_end = offset + DATA_HEADER_LEN + len(topic_block)
    end = hdr_end + len(payload)
    if end - offset > MAX_MESSAGE_LEN or end > len(buf) or offset < 0:
        raise _encode_error(offset, end - offset, buf, ValueError("out of range"))
    try:
        _pack_data_hdr(buf, offset, 0, HeaderType.TOPICNAME, end - offset, topic_index, sqn)
    except struct.error as exc:
        raise _encode_error(offset, end - offset, buf, exc) from None
    buf[offset + DATA_HEADER_LEN : hdr_end] = topic_block
    buf[hdr_end:end] = payload
    if len(_DATA_TOPIC_STRUCTS) < _MAX_CACHED_SIZES:
        _DATA_TOPIC_STRUCTS[key] = struct.Struct(f">BBHII{key[0]}s{key[1]}s")
    return end


def encode_data(topic_index: int, sqn: int, payload: Buffer) -> bytes:
    """A plain data message as bytes (convenience over :func:`encode_data_into`)."""
    buf = bytearray(DATA_HEADER_LEN + len(payload))
    encode_data_into(buf, 0, topic_index, sqn, payload)
    return bytes(buf)


def decode_data_fast(view: memoryview, offset: int = 0) -> tuple[int, int, memoryview, int] | None:
    """Decode a plain data message at ``offset`` without building a record.

    Returns ``(topic_index, sqn, payload_view, next_offset)`` when the message is version 0, type
    DATA, has no extension headers and fits in ``view``; otherwise ``None``: use
    :func:`decode_message_at`, which decodes everything else or raises WireError.
    """
    try:
        ver_type, first, msglen, tidx, sqn = _unpack_data_hdr(view, offset)
    except struct.error:
        return None
    end = offset + msglen
    if ver_type or first or msglen < DATA_HEADER_LEN or end > len(view) or offset < 0:
        return None
    return tidx, sqn, view[offset + DATA_HEADER_LEN : end], end
