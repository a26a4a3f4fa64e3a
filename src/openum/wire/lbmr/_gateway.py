"""LBMR gateway and remote-context messages: extended types 5-7 (W1 §9.5-9.7).

What a UM gateway (DRO) and the contexts behind it exchange: topic/pattern interest, gateway context
information and TR requests (TNWG, W1 §9.5), remote domain routes (W1 §9.6) and remote context
information (W1 §9.7).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntFlag
from typing import ClassVar, Final, Self, TypeAlias, cast

from openum.wire._common import WireError, ip_from_bytes
from openum.wire.lbmr._base import (
    _T_EXT,
    _U16,
    _X_RCTXINFO,
    _X_RDR,
    _X_TNWG,
    UnknownOption,
    _Body,
    _check_options,
    _cstr,
    _DomainOption,
    _InstanceOption,
    _ip,
    _items,
    _NameOption,
    _need,
    _Option,
    _read_name,
    _text,
    _u16,
    _uint,
    _walk_options,
)


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


_REMOTE_QUERY_BIT: Final = 0x8000

_TNWG: Final = struct.Struct(">BBHHH")  # ver_type, ext, len, type, reserved
_TNWG_INTEREST_REC: Final = struct.Struct(">HBBI")
_TNWG_CTXINFO: Final = struct.Struct(">HBBII")
_TNWG_ADDRESS: Final = struct.Struct(">BBHHH4s")
_RDR: Final = struct.Struct(">BBH4sHHI")
_RCTX: Final = struct.Struct(">BBHHH")
_RCTX_ADDRESS: Final = struct.Struct(">BBHI4sHH")

# ---- gateway (TNWG) messages (W1 §9.5)


@dataclass(frozen=True, slots=True)
class GatewayContextInstanceOption(_InstanceOption):
    """Gateway option 0: a context instance."""

    TYPE: ClassVar[int] = 0x00
    _WHAT: ClassVar[str] = "gateway context instance"
    _FLAGS_WHAT: ClassVar[str] = "gateway option flags"


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
class GatewayDomainOption(_DomainOption):
    """Gateway option 2: a domain id."""

    TYPE: ClassVar[int] = 0x02
    _WHAT: ClassVar[str] = "gateway domain id"
    _FLAGS_WHAT: ClassVar[str] = "gateway option flags"


@dataclass(frozen=True, slots=True)
class GatewayNameOption(_NameOption):
    """Gateway option 3: a name."""

    TYPE: ClassVar[int] = 0x03
    _WHAT: ClassVar[str] = "gateway name"
    _FLAGS_WHAT: ClassVar[str] = "gateway option flags"


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
    tnwg_type = _u16(data, 4)
    off = _TNWG.size
    if tnwg_type == _TNWG_TYPE_INTEREST:
        _need(off, 4, end, "interest header")
        count = _u16(data, off + 2)
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
        rlen = _u16(data, off)
        if rlen < 2:
            raise WireError(f"gateway TR request length {rlen} is shorter than its header", offset=off)
        _need(off, rlen, end, "gateway TR request")
        opts = _walk_options(data, off + 2, off + rlen, _GATEWAY_OPTIONS, exact=False, what="gateway")
        return GatewayTopicResolutionRequest(cast(tuple[GatewayOption, ...], opts)), off + rlen
    raise WireError(f"unknown gateway message type {tnwg_type}", offset=4)


# ---- remote domain route (W1 §9.6)


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
class RemoteInstanceOption(_InstanceOption):
    """Remote context option 2: the context instance."""

    TYPE: ClassVar[int] = 0x02
    _WHAT: ClassVar[str] = "remote context instance"
    _FLAGS_WHAT: ClassVar[str] = "remote option flags"


@dataclass(frozen=True, slots=True)
class RemoteDomainOption(_DomainOption):
    """Remote context option 3: the originating domain."""

    TYPE: ClassVar[int] = 0x03
    _WHAT: ClassVar[str] = "originating domain id"
    _FLAGS_WHAT: ClassVar[str] = "remote option flags"


@dataclass(frozen=True, slots=True)
class RemoteNameOption(_NameOption):
    """Remote context option 4: the context name."""

    TYPE: ClassVar[int] = 0x04
    _WHAT: ClassVar[str] = "remote context name"
    _FLAGS_WHAT: ClassVar[str] = "remote option flags"


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
    count = _u16(data, 4)
    off = _RCTX.size
    records: list[RemoteContextRecord] = []
    for _ in range(count):
        _need(off, 4, end, "remote context record")
        rlen = _u16(data, off)
        flags = _u16(data, off + 2)
        if rlen < 4:
            raise WireError(f"remote context record length {rlen} is shorter than its header", offset=off)
        _need(off, rlen, end, "remote context record")
        opts = _walk_options(data, off + 4, off + rlen, _REMOTE_OPTIONS, exact=True, what="remote context")
        records.append(
            RemoteContextRecord(cast(tuple[RemoteOption, ...], opts), bool(flags & _REMOTE_QUERY_BIT))
        )
        off += rlen
    return RemoteContextInfo(tuple(records)), off
