"""Glue between the reliability engines and :class:`openum.testing.SimNetwork` (tests only).

The engines' methods return richer results than a list of datagrams (``SendResult``, ``(outgoing,
events)``, ``(received, outgoing, events)``), so the sources and receivers are wrapped in small
:class:`~openum.testing.SimNode` classes that keep what the engines hand upward (payloads, events)
and return the datagrams to send.  Also here: LBMC payloads that tshark decodes, the shared-loss
hook (one loss draw per datagram the source sends, applied to every receiver's copy), and an
ordered-delivery view of what a receiver handed up.

Spec: ``02-transports-and-resolution.md`` 2-3, ``03-architecture.md`` A34.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from openum.protocol.reliable import (
    Address,
    Outgoing,
    RateController,
    RmReceiver,
    RmReceiverParams,
    RmSource,
    RmSourceParams,
    RuReceiver,
    RuReceiverParams,
    RuSource,
    RuSourceParams,
)
from openum.testing import Fate, Out, Packet, SimNetwork, SimNode
from openum.wire import lbtrm, lbtru

MS = 1_000_000
US = 1_000
S = 1000 * MS

# UM's default ports (spec 02 3.3 [CG]), so that tshark's heuristics and decode-as rules find them:
# an LBT-RM source multicasts from its NAK port (14390-14399) to the destination port 14400 of a
# group from 224.10.10.10-14; LBT-RU sources use 14380-14389 and receivers 14360-14379.
RM_SRC: Address = ("10.0.0.1", 14390)
RM_GROUP: Address = ("224.10.10.10", 14400)
RM_SID = 0x1A2B3C4D
RU_SRC: Address = ("10.0.0.1", 14380)
RU_SID = 0x0BADCAFE

_LBMC_DATA = struct.Struct(">BBHII")  # ver/type (0: message), next_hdr (0: data), msglen, tidx, topic sqn


def lbmc_data(index: int, size: int = 0, tidx: int = 1) -> bytes:
    """One LBMC data message (lbmc-pdm-srs.md 2.1) carrying message ``index`` of topic ``tidx``.

    The application bytes name the index (and pad to ``size`` total bytes), so a delivered payload
    says which message it is; tshark decodes the whole thing as LBMC.
    """
    app = b"msg %06d " % index
    app += b"." * max(0, size - _LBMC_DATA.size - len(app))
    return _LBMC_DATA.pack(0x00, 0x00, _LBMC_DATA.size + len(app), tidx, index) + app


def rate(*, data: int = 10_000_000, retransmit: int = 5_000_000, interval_ms: int = 10) -> RateController:
    """A rate controller, by default with UM's LBT-RM defaults (10 Mbit/s, 5 Mbit/s, 10 ms)."""
    return RateController(
        data_rate_limit=data, retransmit_rate_limit=retransmit, rate_interval_ms=interval_ms, now_ns=0
    )


# --- nodes ------------------------------------------------------------------------------------------


class SourceNode(SimNode):
    """An :class:`RmSource` or :class:`RuSource` on the network; the test calls :meth:`send`."""

    def __init__(self, engine: RmSource | RuSource) -> None:
        self.engine = engine
        self.events: list[tuple[int, object]] = []
        #: Transport sqn -> (time sent, payload): what each sent datagram carried, and when.
        self.sent: dict[int, tuple[int, bytes]] = {}

    def send(self, payload: bytes, now_ns: int) -> Sequence[Outgoing]:
        """The application's send: the datagrams to :meth:`SimNetwork.emit`.  The tests keep within
        the data rate limit, so a queued (or refused) datagram is a test bug, not a result."""
        result = self.engine.send(payload, now_ns)
        assert not result.refused and not result.queued and result.sqn is not None, result
        self.sent[result.sqn] = (now_ns, payload)
        return result.outgoing

    def datagram_received(self, data: bytes, src: Address, now_ns: int) -> Iterable[Out]:
        engine = self.engine
        if isinstance(engine, RmSource):
            return engine.datagram_received(data, src, now_ns)
        out, events = engine.datagram_received(data, src, now_ns)
        if events:
            self.events += [(now_ns, e) for e in events]
        return out

    def poll(self, now_ns: int) -> Iterable[Out]:
        out, events = self.engine.poll(now_ns)
        if events:
            self.events += [(now_ns, e) for e in events]
        return out

    def next_deadline(self) -> int | None:
        return self.engine.next_deadline()


@dataclass(frozen=True, slots=True)
class Delivery:
    """One payload a receiving engine handed upward."""

    sqn: int
    time_ns: int
    payload: bytes
    retransmission: bool


class ReceiverNode(SimNode):
    """An :class:`RmReceiver` or :class:`RuReceiver` on the network.

    ``delivered`` keeps what the engine handed upward; with ``record_arrivals`` also the transport
    sqn of every DATA datagram of the session that reached the node (copies and duplicates included),
    in arrival order, to check the engine's arrival-order contract against.
    """

    def __init__(self, engine: RmReceiver | RuReceiver, *, record_arrivals: bool = False) -> None:
        self.engine = engine
        self.delivered: list[Delivery] = []
        self.events: list[tuple[int, object]] = []
        self.arrivals: list[int] | None = [] if record_arrivals else None
        self.naks_sent_at: list[int] = []

    def datagram_received(self, data: bytes, src: Address, now_ns: int) -> Iterable[Out]:
        engine = self.engine
        if self.arrivals is not None and data[0] == lbtrm.TYPE_DATA:  # TYPE_DATA is 0 for both
            if isinstance(engine, RmReceiver):
                self.arrivals.append(lbtrm.decode_data_header(data)[2])
            else:
                self.arrivals.append(lbtru.decode_data_header(data)[1])
        received, out, events = engine.datagram_received(data, src, now_ns)
        for r in received:
            self.delivered.append(Delivery(r.transport_sqn, now_ns, bytes(r.payload), r.retransmission))
        if events:
            self.events += [(now_ns, e) for e in events]
        if out:
            self._count_naks(out, now_ns)
        return out

    def poll(self, now_ns: int) -> Iterable[Out]:
        out, events = self.engine.poll(now_ns)
        if events:
            self.events += [(now_ns, e) for e in events]
        for r in self.engine.take_released():  # held for head loss the timers gave up on
            self.delivered.append(Delivery(r.transport_sqn, now_ns, bytes(r.payload), r.retransmission))
        if out:
            self._count_naks(out, now_ns)
        return out

    def _count_naks(self, out: Sequence[Outgoing], now_ns: int) -> None:
        self.naks_sent_at += [now_ns for o in out if o.data[0] == lbtrm.TYPE_NAK]  # 3 for both

    def next_deadline(self) -> int | None:
        return self.engine.next_deadline()

    def sqns(self) -> list[int]:
        return [d.sqn for d in self.delivered]


# --- building sessions ----------------------------------------------------------------------------


def rm_source(
    net: SimNetwork, *, params: RmSourceParams | None = None, rc: RateController | None = None
) -> SourceNode:
    engine = RmSource(
        session_id=RM_SID,
        nak_port=RM_SRC[1],
        params=params or RmSourceParams(),
        rate=rc or rate(),
        now_ns=net.now_ns(),
    )
    return net.add(SourceNode(engine), RM_SRC, default_group=RM_GROUP)


def rm_receiver(
    net: SimNetwork,
    addr: Address,
    *,
    params: RmReceiverParams | None = None,
    record_arrivals: bool = False,
) -> ReceiverNode:
    engine = RmReceiver(
        session_id=RM_SID,
        source=RM_SRC,
        params=params or RmReceiverParams(),
        rng=net.rng(f"rm-receiver {addr}"),
        now_ns=net.now_ns(),
    )
    return net.add(ReceiverNode(engine, record_arrivals=record_arrivals), addr, groups=[RM_GROUP])


def ru_source(
    net: SimNetwork, *, params: RuSourceParams | None = None, rc: RateController | None = None
) -> SourceNode:
    engine = RuSource(
        session_id=RU_SID,
        params=params or RuSourceParams(),
        rate=rc or rate(interval_ms=100),  # LBT-RU's default rate interval is 100 ms
        now_ns=net.now_ns(),
    )
    return net.add(SourceNode(engine), RU_SRC)


def ru_receiver(
    net: SimNetwork,
    addr: Address,
    *,
    params: RuReceiverParams | None = None,
    record_arrivals: bool = False,
) -> ReceiverNode:
    engine = RuReceiver(
        session_id=RU_SID,
        source=RU_SRC,
        params=params or RuReceiverParams(),
        rng=net.rng(f"ru-receiver {addr}"),
        now_ns=net.now_ns(),
    )
    return net.add(ReceiverNode(engine, record_arrivals=record_arrivals), addr)


# --- loss shared by every receiver ---------------------------------------------------------------


class SharedDrop:
    """A packet hook: loss on the source's *outgoing* path, before the multicast fans out.

    ``decide(data)`` is asked once per datagram the source sends (``Packet.send_index``) and its
    answer applies to every receiver's copy, so all receivers lose the same datagrams.
    """

    def __init__(self, source: Address, decide: Callable[[bytes], bool]) -> None:
        self.source = source
        self.decide = decide
        self._fates: dict[int, bool] = {}

    def __call__(self, packet: Packet) -> Packet | None:
        if packet.src != self.source:
            return None
        lost = self._fates.get(packet.send_index)
        if lost is None:
            lost = self._fates[packet.send_index] = self.decide(packet.data)
        return replace(packet, fate=Fate.DROPPED, arrival_ns=()) if lost else None


class SharedLoss(SharedDrop):
    """:class:`SharedDrop` at random: each datagram the source sends is lost with ``probability``.

    ``originals_only``: only original LBT-RM DATA datagrams can be lost (retransmissions, SMs and NCFs
    always get through).  ``lost_originals`` collects the sqns of the original DATA datagrams lost.
    """

    def __init__(
        self, source: Address, probability: float, rng: random.Random, *, originals_only: bool = False
    ) -> None:
        super().__init__(source, self._draw)
        self.probability = probability
        self.rng = rng
        self.originals_only = originals_only
        self.lost_originals: set[int] = set()
        self.lost_other = 0

    def _draw(self, data: bytes) -> bool:
        sqn = rm_original_sqn(data)
        if self.originals_only and sqn is None:
            return False
        lost = self.rng.random() < self.probability
        if lost and sqn is not None:
            self.lost_originals.add(sqn)
        elif lost:
            self.lost_other += 1
        return lost


def rm_original_sqn(data: bytes) -> int | None:
    """The sqn of an original (not retransmitted) LBT-RM DATA datagram; None for anything else."""
    if data[0] != lbtrm.TYPE_DATA:
        return None
    _, _, sqn, _, flags, _ = lbtrm.decode_data_header(data)
    return None if flags & lbtrm.FLAG_RX else sqn


def rm_retransmitted_sqn(data: bytes) -> int | None:
    """The sqn of an LBT-RM retransmission (DATA with the RX flag); None for anything else."""
    if data[0] != lbtrm.TYPE_DATA:
        return None
    _, _, sqn, _, flags, _ = lbtrm.decode_data_header(data)
    return sqn if flags & lbtrm.FLAG_RX else None


def ru_data_sqn(data: bytes) -> tuple[int, bool] | None:
    """``(sqn, retransmission)`` of an LBT-RU DATA datagram; None for anything else."""
    if data[0] != lbtru.TYPE_DATA:
        return None
    flags, sqn, _, _, _ = lbtru.decode_data_header(data)
    return sqn, bool(flags & lbtru.FLAG_RX)


# --- checks -----------------------------------------------------------------------------------------


def in_order(deliveries: Sequence[Delivery], first: int = 0) -> list[tuple[int, int]]:
    """What an ordered-delivery layer (``ordered_delivery 1``) above the transport would release:
    ``(sqn, time)`` in sqn order, each payload as soon as everything before it is there."""
    pending: set[int] = set()
    released: list[tuple[int, int]] = []
    ready = first
    for d in deliveries:
        pending.add(d.sqn)
        while ready in pending:
            pending.remove(ready)
            released.append((ready, d.time_ns))
            ready += 1
    return released


def first_arrivals(arrivals: Iterable[int]) -> list[int]:
    """Each sqn once, in the order its first copy arrived: what the arrival-order contract hands up."""
    return list(dict.fromkeys(arrivals))
