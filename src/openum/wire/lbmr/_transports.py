"""LBMR transport information: where a TIR's source can be reached (W1 §5).

The TIR's transport byte (bits 0x7F) names the transport and ``tlen`` the size of what follows; each
known transport accepts only its documented sizes, and an unknown one is kept whole (W1 §13).
"""

from __future__ import annotations

import abc
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, Self, TypeAlias

from openum.wire._common import WireError, ip_from_bytes
from openum.wire.lbmr._base import _blob, _ip, _uint

# W1 §5 transport types (TIR transport byte, bits 0x7F).
TRANSPORT_TCP: Final = 0x00
TRANSPORT_LBTRU: Final = 0x01
TRANSPORT_LBTSMX: Final = 0x04
TRANSPORT_LBTRM: Final = 0x10
TRANSPORT_LBTRDMA: Final = 0x20
TRANSPORT_LBTIPC: Final = 0x40

_XP_SID: Final = struct.Struct(">4sIH")  # ip, session id, port (TCP, LBT-RU, LBT-RDMA)
_XP_LEGACY: Final = struct.Struct(">4sH")  # ip, port (TCP, LBT-RU without session id)
_XP_LBTRM: Final = struct.Struct(">4s4sIHH")
_XP_HOST: Final = struct.Struct(">IIH")  # host id, session id, transport id (IPC, SMX)


class _Transport(abc.ABC):
    __slots__ = ()
    TYPE: ClassVar[int]

    @abc.abstractmethod
    def _pack(self) -> bytes:
        """The transport information after its type and length bytes."""

    @classmethod
    @abc.abstractmethod
    def _unpack(cls, data: bytes, off: int, tlen: int) -> Self:
        """Decode ``tlen`` bytes of transport information at ``data[off:]``; WireError if malformed."""


def _wrong_tlen(name: str, tlen: int, allowed: str) -> WireError:
    return WireError(f"{name} transport info is {tlen} bytes; only {allowed} are valid (W1 §5)")


@dataclass(frozen=True, slots=True)
class _UnicastTransport(_Transport):
    """``ip, session id, port``, or the legacy ``ip, port`` when ``session_id`` is None: TCP, LBT-RU."""

    #: The transport's name in error messages.
    _NAME: ClassVar[str]
    ip: str
    port: int
    session_id: int | None

    def __post_init__(self) -> None:
        _uint(self.port, 16, f"{self._NAME} port")
        if self.session_id is not None:
            _uint(self.session_id, 32, f"{self._NAME} session id")

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
        raise _wrong_tlen(cls._NAME, tlen, "10 or 6")


@dataclass(frozen=True, slots=True)
class TcpTransport(_UnicastTransport):
    """LBT-TCP: the source listens on ``ip:port``; ``session_id`` None is the legacy 6-byte form."""

    TYPE: ClassVar[int] = TRANSPORT_TCP
    _NAME: ClassVar[str] = "TCP"


@dataclass(frozen=True, slots=True)
class LbtruTransport(_UnicastTransport):
    """LBT-RU: the source's unicast ``ip:port``; ``session_id`` None is the legacy 6-byte form."""

    TYPE: ClassVar[int] = TRANSPORT_LBTRU
    _NAME: ClassVar[str] = "LBT-RU"


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
class _HostTransport(_Transport):
    """``host id, session id, transport id``: the shared-memory transports LBT-IPC and LBT-SMX."""

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
class LbtipcTransport(_HostTransport):
    """LBT-IPC: a shared-memory transport on host ``host_id``."""

    TYPE: ClassVar[int] = TRANSPORT_LBTIPC


@dataclass(frozen=True, slots=True)
class LbtsmxTransport(_HostTransport):
    """LBT-SMX: a shared-memory transport on host ``host_id``."""

    TYPE: ClassVar[int] = TRANSPORT_LBTSMX


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
