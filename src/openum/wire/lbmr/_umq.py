"""LBMR UMQ queue resolution: QQRs and QIRs, the body of packet type 6 (W1 §8)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from openum.wire._common import ip_from_bytes
from openum.wire.lbmr._base import (
    _HDR,
    _T_QUEUE,
    _Body,
    _check_options,
    _counted,
    _cstr,
    _ip,
    _items,
    _need,
    _read_name,
    _text,
    _u16,
    _uint,
)
from openum.wire.lbmr._options import (
    _TOPIC_OPTIONS,
    TopicOption,
    _decode_topic_options,
    _encode_topic_options,
)

_QIR_OPTIONS_BIT: Final = 0x8000
_QIR: Final = struct.Struct(">IIIHH")
_QIR_GROUP: Final = struct.Struct(">HH")
_QIR_QUEUE: Final = struct.Struct(">4sHHHH")


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
        return _counted(
            vt | _T_QUEUE,
            [_cstr(q.queue, "queue name") for q in self.queries],
            [i._pack() for i in self.infos],
        )


def _decode_queues(data: bytes, end: int) -> tuple[_Body, int]:
    nqqr = data[1]
    nqir = _u16(data, 2)
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
