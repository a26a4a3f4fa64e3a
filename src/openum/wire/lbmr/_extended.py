"""LBMR extended types 1-4 (W1 §9.1-9.4): proxy source election, queue management, context info, TR request.

Packet type 7 carries its extended type in the second byte (W1 §3.3); the gateway and remote-context
extended types 5-7 are in :mod:`openum.wire.lbmr._gateway`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntFlag
from typing import Final

from openum.wire._common import WireError, ip_from_bytes
from openum.wire.lbmr._base import (
    _HDR,
    _NAME_MAX,
    _T_EXT,
    _U16,
    _X_CTXINFO,
    _X_PSER,
    _X_QMGMT,
    _X_TRREQ,
    _blob,
    _Body,
    _cstr,
    _ip,
    _items,
    _need,
    _read_name,
    _text,
    _u16,
    _uint,
)

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


class QueueManagementFlags(IntFlag):
    """Queue management flags (W1 §9.2); the N flag (0x40) follows ``queue_name``."""

    IGNORE = 0x80
    NEW_INSTANCE_LIST = 0x20
    KEEPALIVE_REQUESTED = 0x10


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


_PSER_OPTIONS_BIT: Final = 0x8000
_QMGMT_NAME_BIT: Final = 0x40
_CTXINFO_NAME_BIT: Final = 0x0001

_U32: Final = struct.Struct(">I")
_PSER: Final = struct.Struct(">BBHHH4s4sIIHH")
_QMGMT: Final = struct.Struct(">BBBB20sII4sHHHH")
_QMGMT_INST: Final = struct.Struct(">4sHHHH")
_QMGMT_EV: Final = struct.Struct(">II")
_CTXINFO: Final = struct.Struct(">BBBBHH4s8s")

# ---- proxy source election (W1 §9.1)


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
        optlen = _u16(data, off + 2)
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


# ---- UMQ queue management (W1 §9.2)


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


# ---- context information (W1 §9.3)


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


# ---- topic resolution request (W1 §9.4)


@dataclass(frozen=True, slots=True)
class TopicResolutionRequest(_Body):
    """Extended type 4: ask other contexts to resend TR traffic (:class:`ResolutionRequestFlags`)."""

    flags: int

    def __post_init__(self) -> None:
        _uint(self.flags, 16, "topic resolution request flags")

    def _encode(self, vt: int) -> bytes:
        return _HDR.pack(vt | _T_EXT, _X_TRREQ, self.flags)


def _decode_trreq(data: bytes, end: int) -> tuple[_Body, int]:
    return TopicResolutionRequest(_u16(data, 2)), 4
