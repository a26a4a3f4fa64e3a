"""LBMC core extension headers: what plain pub/sub, requests, late join and TCP sessions carry.

Implements ``../shared/wire/lbmc-pdm-srs.md``:

* §2.4: FRAG, BATCH, REQUEST, TOPICNAME, APPHDR, OTID, CTXINSTD/CTXINSTR, SRCIDX, and TCP_SID (the
  LBT-TCP session id, ``lbtrm-lbtru-lbttcp-transports.md`` §5.3);
* §2.7: late join and retransmission: UME_RXREQ, UME_LJ_INFO, LJI_REQ and TSNI;
* §2.10: SSF_INIT/SSF_CREQ and EXTOPT, with openum's own :class:`ResponseHeader` convention.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar, Final

from openum.wire._common import WireError
from openum.wire.lbmc._base import (
    _IGNORE8,
    _IGNORE16,
    MAX_HEADER_BODY_LEN,
    Header,
    HeaderType,
    _check_int,
    _Fixed,
    _layout,
    _register,
)

# Precompiled in the module that calls them, never imported (see the package docstring).
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_U32X2: Final = struct.Struct(">II")


# --------------------------------------------------------------------------------------------------
# Fragments, batches, requests, topic names, application headers, context instances (§2.4)
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Source-side filtering (§2.10)
# --------------------------------------------------------------------------------------------------


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
# Late join, retransmission and TSNI (§2.7)
# --------------------------------------------------------------------------------------------------


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


@_layout(HeaderType.UME_LJ_INFO, "flags:H low_seqnum:I high_seqnum:I request_idx:I")
@dataclass(frozen=True, slots=True)
class LateJoinInfoHeader(_Fixed):
    """UME_LJ_INFO 0x1E: the source's answer to LJI_REQ, the retained [low, high] range."""

    low_seqnum: int
    high_seqnum: int
    request_idx: int
    flags: int = 0


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


# --------------------------------------------------------------------------------------------------
# LBT-TCP session id (§2.4; lbtrm-lbtru-lbttcp-transports.md §5.3)
# --------------------------------------------------------------------------------------------------


@_layout(HeaderType.TCP_SID, "flags:H session_id:I")
@dataclass(frozen=True, slots=True)
class SessionIdHeader(_Fixed):
    """TCP_SID 0x6B: the LBT-TCP session id, sent in a control message at connection start."""

    session_id: int
    flags: int = 0


# --------------------------------------------------------------------------------------------------
# Extended options, and openum's response header carried in one (§2.10)
# --------------------------------------------------------------------------------------------------


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
