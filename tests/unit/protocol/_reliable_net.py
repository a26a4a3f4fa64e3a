"""A tiny deterministic network loop for the reliability engines (tests only).

Every datagram takes ``latency`` to arrive; a ``fate`` hook decides per copy whether it is dropped,
delivered (possibly later: reordering) or duplicated.  Time jumps to the next packet arrival or engine
deadline, so simulated seconds cost microseconds.  ``None`` destinations (LBT-RM multicast) go to
every group member.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from openum.protocol.reliable import (
    Address,
    Outgoing,
    RmReceiver,
    RmSource,
    RuReceiver,
    RuSource,
    SendResult,
)
from openum.protocol.reliable._nak import LossDetector

MS = 1_000_000
SRC: Address = ("10.0.0.1", 14390)

#: ``fate(src, dst, data, now) -> extra delays (ns) of the copies to deliver``; ``[]`` drops it.
Fate = Callable[[Address, Address, bytes, int], Sequence[int]]


def loss_detector(generation_ms: int = 10_000, seed: int = 7) -> LossDetector:
    """A loss detector alone, with NAK timers of the LBT-RM defaults' order (ms) and a seeded rng."""
    return LossDetector(
        initial_backoff_ns=50 * MS,
        backoff_ns=200 * MS,
        suppress_ns=1000 * MS,
        generation_ns=generation_ms * MS,
        send_naks=True,
        max_naks_per_packet=16,
        rng=random.Random(seed),
    )


def deliver_all(src: Address, dst: Address, data: bytes, now: int) -> Sequence[int]:
    return (0,)


Engine = RmSource | RmReceiver | RuSource | RuReceiver


@dataclass
class Node:
    addr: Address
    engine: Engine
    received: list[tuple[int, bytes, bool]] = field(default_factory=list)  # (sqn, payload, rx)
    events: list[tuple[int, object]] = field(default_factory=list)
    sent: list[tuple[int, Outgoing]] = field(default_factory=list)
    online: bool = True  # False: it neither receives nor polls (a crashed peer)

    def payloads(self) -> list[bytes]:
        return [p for _, p, _ in self.received]


@dataclass
class Net:
    latency: int = 1 * MS
    fate: Fate = deliver_all
    now: int = 0
    nodes: dict[Address, Node] = field(default_factory=dict)
    group: list[Address] = field(default_factory=list)
    wire: list[tuple[int, Address, Address, bytes]] = field(default_factory=list)  # all transmissions
    _queue: list[tuple[int, int, Address, Address, bytes]] = field(default_factory=list)
    _seq: int = 0

    def add(self, addr: Address, engine: Engine, *, member: bool = False) -> Node:
        node = Node(addr, engine)
        self.nodes[addr] = node
        if member:
            self.group.append(addr)
        return node

    # -- traffic -------------------------------------------------------------------------------------

    def emit(self, src: Address, outgoing: Sequence[Outgoing]) -> None:
        node = self.nodes.get(src)
        for out in outgoing:
            if node is not None:
                node.sent.append((self.now, out))
            dests = self.group if out.destination is None else [out.destination]
            for dst in dests:
                self.wire.append((self.now, src, dst, out.data))
                for extra in self.fate(src, dst, out.data, self.now):
                    self._seq += 1
                    heapq.heappush(
                        self._queue, (self.now + self.latency + extra, self._seq, src, dst, out.data)
                    )

    def send(self, src: Address, payload: bytes) -> SendResult:
        engine = self.nodes[src].engine
        assert isinstance(engine, RmSource | RuSource)
        result = engine.send(payload, self.now)
        self.emit(src, result.outgoing)
        return result

    def _deliver(self, src: Address, dst: Address, data: bytes) -> None:
        node = self.nodes.get(dst)
        if node is None or not node.online:
            return
        engine = node.engine
        now = self.now
        if isinstance(engine, RmSource):
            self.emit(dst, engine.datagram_received(data, src, now))
            return
        if isinstance(engine, RuSource):
            out, events = engine.datagram_received(data, src, now)
            node.events += [(now, e) for e in events]
            self.emit(dst, out)
            return
        received, out2, events2 = engine.datagram_received(data, src, now)
        node.received += [(r.transport_sqn, bytes(r.payload), r.retransmission) for r in received]
        node.events += [(now, e) for e in events2]
        self.emit(dst, out2)

    def _poll(self, node: Node) -> None:
        out: Sequence[Outgoing]
        events: Sequence[Any]
        out, events = node.engine.poll(self.now)
        node.events += [(self.now, e) for e in events]
        if isinstance(node.engine, RmReceiver | RuReceiver):
            released = node.engine.take_released()
            node.received += [(r.transport_sqn, bytes(r.payload), r.retransmission) for r in released]
        self.emit(node.addr, out)

    # -- time ----------------------------------------------------------------------------------------

    def next_time(self) -> int | None:
        times = [self._queue[0][0]] if self._queue else []
        for node in self.nodes.values():
            if node.online:
                d = node.engine.next_deadline()
                if d is not None:
                    times.append(max(d, self.now))
        return min(times) if times else None

    def run_until(self, until: int, *, max_steps: int = 1_000_000) -> None:
        """Deliver packets and run timers in time order up to ``until`` (inclusive)."""
        for _ in range(max_steps):
            t = self.next_time()
            if t is None or t > until:
                self.now = max(self.now, until)
                return
            self.now = t
            while self._queue and self._queue[0][0] <= t:
                _, _, src, dst, data = heapq.heappop(self._queue)
                self._deliver(src, dst, data)
            for node in list(self.nodes.values()):
                if node.online:
                    d = node.engine.next_deadline()
                    if d is not None and d <= t:
                        self._poll(node)
        raise AssertionError("network loop did not settle (a deadline that never advances?)")

    def run_for(self, duration: int) -> None:
        self.run_until(self.now + duration)

    def idle(self) -> bool:
        return not self._queue
