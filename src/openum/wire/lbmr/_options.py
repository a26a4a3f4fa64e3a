"""LBMR TIR topic options (W1 §6).

Topic options ride in a TIR or a QIR behind a 4-byte length option whose total includes itself (W1
§6.1): the option block comes before the transport info of a TIR (W1 §4.3) and before the group and
queue blocks of a QIR (W1 §8).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntFlag
from typing import ClassVar, Final, Self, TypeAlias, cast

from openum.wire._common import WireError, ip_from_bytes
from openum.wire.lbmr._base import (
    _OPT_HDR,
    _OPT_NAME_MAX,
    _OPT_U32,
    UnknownOption,
    _blob,
    _cstr,
    _DomainOption,
    _ip,
    _need,
    _Option,
    _option_bytes,
    _read_name_option,
    _text,
    _uint,
    _walk_options,
)


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


_TOPT_UME: Final = struct.Struct(">BBHHH4s4sIIII")
_TOPT_UME_STORE: Final = struct.Struct(">BBBBHH4sI")
_TOPT_UME_STORE_GROUP: Final = struct.Struct(">BBBBHH")
_TOPT_LATEJOIN: Final = struct.Struct(">BBHHH4sIII")
_TOPT_COST: Final = struct.Struct(">BBBBi")
_TOPT_OTID: Final = struct.Struct(">BBH32s")
_TOPT_CTXINST: Final = struct.Struct(">BBBB8s")
_TOPT_ULB: Final = struct.Struct(">BBHIQI4sHH")
_TOPT_EXFUNC: Final = struct.Struct(">BBHHH4sI")

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
        return _OPT_U32.pack(self.TYPE, self.SIZE, self.flags, self.rcr_index)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, idx = _OPT_U32.unpack_from(data, off)
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
        return _option_bytes(self.TYPE, self.flags, _cstr(self.queue, "UMQ queue name", _OPT_NAME_MAX))

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        return cls(*_read_name_option(data, off, olen, "UMQ queue name"))


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
class _IndexedInstanceOption(_Option):
    """``type, len, flags (u8), index, 8-byte context instance``: topic options 0x0A and 0x0C."""

    SIZE: ClassVar[int] = 12
    _WHAT: ClassVar[str]
    instance: bytes
    index: int = 0
    flags: int = 0

    def __post_init__(self) -> None:
        _blob(self.instance, 8, self._WHAT)
        _uint(self.index, 8, f"{self._WHAT} index")
        _uint(self.flags, 8, f"{self._WHAT} flags")

    def _pack(self) -> bytes:
        return _TOPT_CTXINST.pack(self.TYPE, self.SIZE, self.flags, self.index, self.instance)

    @classmethod
    def _unpack(cls, data: bytes, off: int, olen: int) -> Self:
        _, _, flags, idx, inst = _TOPT_CTXINST.unpack_from(data, off)
        return cls(inst, idx, flags)


@dataclass(frozen=True, slots=True)
class StoreContextInstanceOption(_IndexedInstanceOption):
    """Topic option 0x0A: a store's context instance with its index."""

    TYPE: ClassVar[int] = 0x0A
    _WHAT: ClassVar[str] = "store context instance"


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
class QueueContextInstanceOption(_IndexedInstanceOption):
    """Topic option 0x0C: a queue's context instance with its index."""

    TYPE: ClassVar[int] = 0x0C
    _WHAT: ClassVar[str] = "queue context instance"


@dataclass(frozen=True, slots=True)
class DomainIdOption(_DomainOption):
    """Topic option 0x0D: the source's topic resolution domain id.

    Keep ``flags`` 0: Wireshark registers them 8 bits wide (W1 §12.3).
    """

    TYPE: ClassVar[int] = 0x0D
    _WHAT: ClassVar[str] = "domain id"
    _FLAGS_WHAT: ClassVar[str] = "domain id flags"


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
