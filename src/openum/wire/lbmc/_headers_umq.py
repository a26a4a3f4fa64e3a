"""LBMC UMQ (queuing) extension headers: message ids, registration, acks, commands, ULB.

Implements ``../shared/wire/lbmc-pdm-srs.md`` §2.9.  Fixed parts are decoded field by field; the
type-specific records that follow some of them (registration, keepalive, command records) are kept
as bytes, so they round-trip.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar, Final

from openum.wire._common import WireError
from openum.wire.lbmc._base import (
    _F,
    _INT_RANGES,
    Header,
    HeaderType,
    _check_int,
    _Fixed,
    _layout,
    _register,
)

# Precompiled in the module that calls them, never imported (see the package docstring).
_U64X2: Final = struct.Struct(">QQ")


# --------------------------------------------------------------------------------------------------
# Queue message ids, submission and ULB messages (§2.9)
# --------------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------------
# Registration and command headers: one fixed part, a type-specific record (§2.9)
# --------------------------------------------------------------------------------------------------

_UMQ_CMD_SPEC: Final = "flags:B kind:B queue_id:I cmd_id:H inst_idx:H regid:Q"


def _umq_command(code: HeaderType) -> Callable[[_F], _F]:
    """The layout the six registration/command headers share: the fixed part, then the record."""
    return _layout(code, _UMQ_CMD_SPEC, tail="record:bytes")


@dataclass(frozen=True, slots=True)
class _UmqCommand(_Fixed):
    """The shared shape of UMQ_REG, UMQ_REG_RESP, UMQ_IDX_CMD(_RESP) and UMQ_CMD(_RESP):
    ``kind`` is the registration/response/command type, ``record`` its type-specific bytes."""

    kind: int
    queue_id: int
    cmd_id: int
    inst_idx: int
    regid: int
    record: bytes = b""
    flags: int = 0


@_umq_command(HeaderType.UMQ_REG)
@dataclass(frozen=True, slots=True)
class UmqRegistrationHeader(_UmqCommand):
    """UMQ_REG 0x30: ``kind`` is the registration type (1 context .. 8 observer dereg)."""


@_umq_command(HeaderType.UMQ_REG_RESP)
@dataclass(frozen=True, slots=True)
class UmqRegistrationResponseHeader(_UmqCommand):
    """UMQ_REG_RESP 0x31: ``kind`` is the response type (1-9, 0xFF error)."""


@_umq_command(HeaderType.UMQ_IDX_CMD)
@dataclass(frozen=True, slots=True)
class UmqIndexCommandHeader(_UmqCommand):
    """UMQ_IDX_CMD 0x48: fixed part plus the command record."""


@_umq_command(HeaderType.UMQ_IDX_CMD_RESP)
@dataclass(frozen=True, slots=True)
class UmqIndexCommandResponseHeader(_UmqCommand):
    """UMQ_IDX_CMD_RESP 0x49."""


@_umq_command(HeaderType.UMQ_CMD)
@dataclass(frozen=True, slots=True)
class UmqCommandHeader(_UmqCommand):
    """UMQ_CMD 0x51: topic list, message retrieve, message list."""


@_umq_command(HeaderType.UMQ_CMD_RESP)
@dataclass(frozen=True, slots=True)
class UmqCommandResponseHeader(_UmqCommand):
    """UMQ_CMD_RESP 0x52."""


# --------------------------------------------------------------------------------------------------
# Acks, receiver control records, keepalives, resubmission, load factor (§2.9)
# --------------------------------------------------------------------------------------------------


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


@_layout(HeaderType.UMQ_SID, "flags:H key:I sid:Q")
@dataclass(frozen=True, slots=True)
class UmqSessionIdHeader(_Fixed):
    """UMQ_SID 0x63."""

    key: int
    sid: int
    flags: int = 0
