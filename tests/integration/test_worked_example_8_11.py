"""The guide's extended messaging example (seed 8.11, spec A35), step by step, on a fake clock.

Publisher: sources A, B and C on one LBT-RM transport session.  Subscriber: receivers for A and B.  Both
contexts run in sequential mode on manual clocks that the test moves together, so the 5 s TSNI, the
10 s NAK generation interval, the 15 s topic-level loss and the 60 s activity timeout take milliseconds;
datagrams travel over real sockets on 127.0.0.1.  A loss shim (the receiving context's test drop hook)
loses the datagrams the example loses.  The whole callback sequence is asserted, with its (fake) times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

import openum
from openum import MsgType, SendFlags
from openum.runtime import ManualClock
from openum.wire import WireError
from openum.wire.lbtrm import FLAG_RX, RmData
from openum.wire.lbtrm import decode as rm_decode
from tests.helpers import wait_until
from tests.integration.pubsub import Ports

MS = 1_000_000
S = 1_000 * MS
DATA, BOS, EOS, LOSS = MsgType.DATA, MsgType.BOS, MsgType.EOS, MsgType.UNRECOVERABLE_LOSS


@dataclass(frozen=True)
class Callback:
    receiver: str
    type: MsgType
    sqn: int
    size: int
    at_ns: int


class Shim:
    """Drops LBT-RM DATA datagrams by transport sequence number (originals, and repairs when asked)."""

    def __init__(self) -> None:
        self.lose_once: set[int] = set()
        self.lose_always: set[int] = set()
        self.dropped: list[tuple[int, bool]] = []

    def __call__(self, datagram: bytes) -> bool:
        try:
            record = rm_decode(datagram)
        except WireError:
            return False
        if not isinstance(record, RmData):
            return False
        rx = bool(record.flags & FLAG_RX)
        if record.sqn in self.lose_always or (record.sqn in self.lose_once and not rx):
            self.lose_once.discard(record.sqn)
            self.dropped.append((record.sqn, rx))
            return True
        return False


class World:
    """Two sequential contexts on manual clocks moved together."""

    def __init__(self, ports: Ports) -> None:
        self.now = 0
        common = [
            "context operational_mode sequential",
            "context transport_lbtrm_multicast_address_low 224.10.10.13",  # one group: one TS for A, B, C
            "context transport_lbtrm_multicast_address_high 224.10.10.13",
        ]
        self.pub = openum.Context(options=ports.options(*common), clock=ManualClock(0))
        self.sub = openum.Context(options=ports.options(*common), clock=ManualClock(0))
        self.log: list[Callback] = []

    def receiver(self, name: str) -> Callable[[openum.Message], None]:
        def on_message(msg: openum.Message) -> None:
            self.log.append(Callback(name, msg.type, msg.sequence_number, len(msg.data), self.now))

        return on_message

    def settle(self) -> None:
        """Run both contexts at the current instant until nothing more happens (datagrams in flight on
        loopback arrive within the same instant)."""
        for _ in range(1000):
            ran = self.pub.process_events_at(self.now) + self.sub.process_events_at(self.now)
            if not ran:
                return
        raise AssertionError("the contexts never settled")

    def run_until(self, t_ns: int) -> None:
        """Move both clocks to ``t_ns``, stopping at every timer deadline on the way."""
        self.settle()
        for _ in range(1_000_000):
            deadlines = [
                d for d in (self.pub.next_deadline_ns(), self.sub.next_deadline_ns()) if d is not None
            ]
            if not deadlines or min(deadlines) > t_ns:
                break
            self.now = max(self.now, min(deadlines))
            self.settle()
        else:
            raise AssertionError("a timer deadline never advances")
        self.now = max(self.now, t_ns)
        self.settle()

    def wait(self, condition: Callable[[], bool], what: str) -> None:
        """Process the current instant until ``condition`` (a datagram may take a moment on loopback)."""
        assert wait_until(lambda: (self.settle(), condition())[1], 10), what

    def since(self, n: int) -> list[tuple[str, MsgType, int]]:
        return [(c.receiver, c.type, c.sqn) for c in self.log[n:]]

    def close(self) -> None:
        for ctx in (self.pub, self.sub):
            for child in reversed(ctx.open_objects):
                child.close()
            ctx.close()


@pytest.fixture
def shim() -> Shim:
    return Shim()


@pytest.fixture
def world(shim: Shim) -> Iterator[World]:
    w = World(Ports.allocate())
    try:
        yield w
    finally:
        w.close()


def test_seed_8_11_step_by_step(world: World, shim: Shim) -> None:
    w = world
    sources = {name: w.pub.create_source(f"8.11/{name}", {"transport": "lbtrm"}) for name in "ABC"}
    assert len({s.info.transport for s in sources.values()}) == 1  # one transport session
    for name in "AB":
        w.sub.create_receiver(f"8.11/{name}", w.receiver(name))
    # Topic resolution on the fake clock: the subscriber joins the session and makes a DC per topic.
    for _ in range(200):
        w.run_until(w.now + 10 * MS)
        if len(w.sub._subscriptions.topics) == 2:
            break
    assert len(w.sub._subscriptions.topics) == 2, "the subscriber did not resolve A and B"
    # The loss shim becomes the receiving context's test drop hook (OPENUM_TEST_DROP's place).
    rm_receiving = w.sub._subscriptions._rm
    assert rm_receiving is not None
    rm_receiving._drop = shim
    assert w.sub.statistics().lbtrm_rcv_sessions == 1  # joined once: the first discovery joins the TS
    assert w.log == []  # "created but not started": the TS sends nothing before the first message

    def rcv_stats() -> object:
        return w.sub.retrieve_transport_stats(sources["A"].source_string)

    # 8.11.1 First message: A with FLUSH, topic sqn 0 on transport sqn 0.  BOS for A *and* B.
    n = len(w.log)
    assert sources["A"].send(b"A0", SendFlags.FLUSH) == 0
    w.wait(lambda: len(w.log) >= n + 3, "BOS, BOS, A0")
    assert sorted(w.since(n)[:2]) == [("A", BOS, 0), ("B", BOS, 0)]
    assert w.since(n)[2] == ("A", DATA, 0)

    # 8.11.2 Batching: B without a flag, then C with FLUSH: one datagram (transport sqn 1); C is dropped.
    n = len(w.log)
    assert sources["B"].send(b"B0") == 0
    assert sources["C"].send(b"C0", SendFlags.FLUSH) == 0
    w.wait(lambda: len(w.log) >= n + 1, "B0")
    assert w.since(n) == [("B", DATA, 0)]
    stats = rcv_stats()
    assert stats.msgs_rcved == 2 and stats.lbm_msgs_no_topic_rcved == 1  # type: ignore[attr-defined]

    # 8.11.3 Fragmentation: a message larger than a datagram becomes topic sqns 1 and 2 (transport 2, 3);
    # the application gets one callback with sequence_number 2.
    n = len(w.log)
    assert sources["A"].send(bytes(10_000), SendFlags.FLUSH) == 2
    w.wait(lambda: len(w.log) >= n + 1, "the reassembled message")
    assert w.since(n) == [("A", DATA, 2)] and w.log[-1].size == 10_000
    assert rcv_stats().msgs_rcved == 4  # type: ignore[attr-defined]

    # 8.11.4 Loss recovery: C's second message (transport sqn 4) is lost; B and C are deleted.
    shim.lose_once.add(4)
    assert sources["C"].send(b"C1", SendFlags.FLUSH) == 1
    w.settle()
    sources["B"].close()
    sources["C"].close()
    w.settle()
    assert shim.dropped == [(4, False)]
    # A (topic sqn 3, transport sqn 5) is delivered at once although #4 is missing: no head-of-line
    # blocking across topics.  #4 is NAKed, repaired, and discarded (C has no receiver here).
    n = len(w.log)
    t_send = w.now
    assert sources["A"].send(b"A3", SendFlags.FLUSH) == 3
    w.wait(lambda: len(w.log) >= n + 1, "A3")
    assert w.since(n) == [("A", DATA, 3)] and w.log[-1].at_ns == t_send
    w.run_until(w.now + 500 * MS)
    stats = rcv_stats()
    assert stats.lost == 1 and stats.naks_sent >= 1 and stats.rxs_rcved == 1  # type: ignore[attr-defined]
    assert stats.lbm_msgs_no_topic_rcved == 2  # type: ignore[attr-defined]  # C0, and the repaired C1
    assert w.since(n) == [("A", DATA, 3)]  # nothing else reached the application

    # 8.11.5 Unrecoverable loss: A's topic sqn 4 (transport #6) is lost and never repaired.
    shim.lose_always.add(6)
    w.run_until(w.now + 1 * S)
    t0 = w.now
    n = len(w.log)
    assert sources["A"].send(b"A4", SendFlags.FLUSH) == 4
    # T=0.2 an SM shows #6 missing; NAKs go out and fail.  T=5 a TSNI for A: the DC starts its own 10 s
    # timer.  T=10.2 the transport gives up on #6 (unrecovered_tmo): no event for the application.
    tsnis = sources["A"].statistics().tsnis_sent
    w.run_until(t0 + 400 * MS)
    assert rcv_stats().naks_sent > stats.naks_sent  # type: ignore[attr-defined]
    w.run_until(t0 + 4_990 * MS)
    assert sources["A"].statistics().tsnis_sent == tsnis
    w.run_until(t0 + 5_010 * MS)
    assert sources["A"].statistics().tsnis_sent == tsnis + 1
    w.run_until(t0 + 10_150 * MS)
    assert rcv_stats().unrecovered_tmo == 0  # type: ignore[attr-defined]
    w.run_until(t0 + 10_400 * MS)
    assert rcv_stats().unrecovered_tmo == 1  # type: ignore[attr-defined]
    assert w.since(n) == []
    # T=15: the A DC declares topic sqn 4 lost.
    w.run_until(t0 + 14_900 * MS)
    assert w.since(n) == []
    w.run_until(t0 + 15_300 * MS)
    assert w.since(n) == [("A", LOSS, 4)]
    assert 15_000 * MS <= w.log[-1].at_ns - t0 <= 15_300 * MS
    assert ("A", DATA, 4) not in w.since(0)

    # 8.11.6 Transport deletion: A, the last source on the TS, is deleted; nothing is sent.  The
    # subscriber's transport times out after 60 s of silence: EOS to every DC, A and B.
    n = len(w.log)
    sources["A"].close()
    t_del = w.now
    w.run_until(t_del + 59 * S)
    assert w.since(n) == []
    w.run_until(t_del + 61 * S)
    assert sorted((name, kind) for name, kind, _ in w.since(n)) == [("A", EOS), ("B", EOS)]
    assert w.sub.statistics().lbtrm_rcv_sessions == 0
    assert len(w.sub.open_objects) == 2  # the receiver objects survive
