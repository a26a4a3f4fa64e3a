"""Every counter of the LBT-RM and LBT-RU statistics moves (issue 22: counters are live or absent).

One scenario per transport drives a source engine and a receiving session (the receiver engine behind
the LBMC demultiplexer, :class:`~openum.transport._reliable.ReliableReceiverSession`, as the transport
runs it, minus the socket) through what a session meets: data for subscribed and unsubscribed topics,
loss and repair, a lost retransmission, reordering, duplicates, the data and retransmit rate limits, a
window that moves past a loss, give-ups and a late repair, session messages, NCFs of every reason, and
garbage at both ends (LBT-RU also: connect, keepalives, a client timed out and reset).  Time is
simulated.  A snapshot of every statistics object (source, receiver, rate controller) is taken after
every datagram and timer; each field must differ from its first value in at least one of them.  So a
counter nothing moves, or one added without a way to move it here, fails these tests: add the situation
that moves it to the scenario, or remove the counter.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

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
    SendResult,
)
from openum.runtime import EventLoop
from openum.testing import FakeClock
from openum.transport._demux import TopicHandler
from openum.transport._reliable import ReliableReceiverSession
from openum.wire import lbtrm, lbtru
from openum.wire.lbtrm import NakFormat, NcfReason, RmData, RmNak, RmNcf
from openum.wire.lbtru import RuCreq, RuData, RuNak, RuNcf, make_options
from tests.unit.protocol._reliable_net import Net

from ._rm_sim import lbmc_data

MS = 1_000_000
S = 1000 * MS
RCV: Address = ("10.0.1.1", 50000)
OTHER: Address = ("10.0.1.9", 50000)  # a host that is no receiver of the session
SUBSCRIBED, UNSUBSCRIBED = 1, 2
# Rate limits that a step can exceed on purpose: 500 bytes of data and one 43-byte LBT-RM datagram of
# retransmissions per 10 ms interval (a datagram here: 20-byte LBT-RM header, 23-byte LBMC message).
DATA_BPS, RX_BPS, INTERVAL_MS = 400_000, 50_000, 10
WINDOW = 200  # payload bytes: the window holds the newest 8 datagrams


class Watch:
    """Snapshots of statistics objects: which fields ever differed from their first value."""

    def __init__(self, **readers: Callable[[], Any]) -> None:
        self._readers = readers
        self._first = {name: read() for name, read in readers.items()}
        self._moved: dict[str, set[str]] = {name: set() for name in readers}

    def look(self) -> None:
        for name, read in self._readers.items():
            snap, first = read(), self._first[name]
            self._moved[name] |= {
                f.name for f in fields(snap) if getattr(snap, f.name) != getattr(first, f.name)
            }

    def unmoved(self) -> dict[str, list[str]]:
        """``{statistics name: [fields that never moved]}`` for those with any."""
        out = {}
        for name, first in self._first.items():
            still = [f.name for f in fields(first) if f.name not in self._moved[name]]
            if still:
                out[name] = still
        return out


@dataclass
class WatchedNet(Net):
    """The engines' test network, looking at the statistics after every datagram, timer and send."""

    watch: Watch | None = None

    def _look(self) -> None:
        if self.watch is not None:
            self.watch.look()

    def _deliver(self, src: Address, dst: Address, data: bytes) -> None:
        super()._deliver(src, dst, data)
        self._look()

    def _poll(self, node: Any) -> None:
        super()._poll(node)
        self._look()

    def send(self, src: Address, payload: bytes) -> SendResult:
        result = super().send(src, payload)
        self._look()
        return result

    def craft(self, src: Address, data: bytes, dst: Address | None) -> None:
        """A datagram the engines would not send themselves (another peer's, or garbage)."""
        self.emit(src, [Outgoing(data, dst)])


class _Topic(TopicHandler):
    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages = 0

    def on_data(
        self, sqn: int, payload: Any, now_ns: int, fragment: Any, flags: int, properties: Any
    ) -> None:
        self.messages += 1

    def on_tsni(self, sqn: int, now_ns: int) -> None:
        pass


class Receiving:
    """A receiving transport session on the test network: the engine behind the LBMC demultiplexer.

    What the session sends (NAKs; LBT-RU CREQs and ACKs) goes back onto the network; its timers are
    driven by the network, through the fake clock the session's event loop reads (the loop never runs).
    """

    def __init__(self, engine: RmReceiver | RuReceiver, clock: FakeClock, loop: EventLoop) -> None:
        self.engine = engine
        self.clock = clock
        self.ended: list[str] = []
        self._out: list[Outgoing] = []
        # The base class itself: a test class cannot subclass it where it is compiled (mypyc).
        self.session = ReliableReceiverSession(
            loop, engine, self._out.extend, lambda _s: None, lambda: None, self.ended.append
        )
        self.session.TRANSPORT = "test"  # what the subclasses of each transport set
        self.topic = _Topic()
        self.session.topics[SUBSCRIBED] = self.topic

    def _take(self) -> list[Outgoing]:
        out, self._out[:] = list(self._out), []
        return out

    def datagram_received(self, data: bytes, sender: Address, now: int) -> tuple[Sequence[Any], ...]:
        self.clock.set(now)
        self.session.datagram(memoryview(data), sender, now)
        return (), self._take(), ()

    def poll(self, now: int) -> tuple[list[Outgoing], list[Any]]:
        self.clock.set(now)
        self.session._poll()
        return self._take(), []

    def next_deadline(self) -> int | None:
        return None if self.session.closed else self.engine.next_deadline()

    def statistics(self) -> Any:
        return self.session.statistics()


def rig(source: RmSource | RuSource, rc: RateController, receiver: RmReceiver | RuReceiver, src: Address):
    clock = FakeClock()
    loop = EventLoop(clock, logging.getLogger("openum.test.counters"), "counters")
    rcv = Receiving(receiver, clock, loop)
    net = WatchedNet()
    net.add(src, source)
    net.add(RCV, rcv, member=True)  # type: ignore[arg-type]
    net.watch = Watch(source=source.statistics, receiver=rcv.statistics, rate=rc.statistics)
    return net, rcv, loop


def rate_controller() -> RateController:
    return RateController(
        data_rate_limit=DATA_BPS, retransmit_rate_limit=RX_BPS, rate_interval_ms=INTERVAL_MS, now_ns=0
    )


def next_interval(net: Net) -> None:
    """Run to the start of the next rate interval: a step starts with fresh budgets."""
    net.run_until((net.now // (INTERVAL_MS * MS) + 1) * INTERVAL_MS * MS)


Sqn = Callable[[bytes], tuple[int, bool] | None]  # (sqn, retransmission) of a DATA datagram, else None


def fate(
    data_sqn: Sqn,
    *,
    drop: Sequence[int] = (),
    delay: dict[int, int] | None = None,
    drop_first_rx: Sequence[int] = (),
    delay_rx: dict[int, int] | None = None,
    double_rx: bool = False,
    cut: tuple[Address, Address] | None = None,
) -> Callable[[Address, Address, bytes, int], Sequence[int]]:
    """A network fate: originals of ``drop`` lost, of ``delay`` late (ns); the first retransmission of
    each of ``drop_first_rx`` lost; retransmissions of ``delay_rx`` late; every retransmission
    delivered twice with ``double_rx``; nothing from ``cut[0]`` to ``cut[1]``."""
    first_rx_lost: set[int] = set()

    def decide(src: Address, dst: Address, data: bytes, now: int) -> Sequence[int]:
        if cut is not None and (src, dst) == cut:
            return ()
        got = data_sqn(data)
        if got is None:
            return (0,)
        sqn, rx = got
        if not rx:
            if sqn in drop:
                return ()
            return ((delay or {}).get(sqn, 0),)
        if sqn in drop_first_rx and sqn not in first_rx_lost:
            first_rx_lost.add(sqn)
            return ()
        if delay_rx and sqn in delay_rx:
            return (delay_rx[sqn],)
        return (0, 0) if double_rx else (0,)

    return decide


def rm_sqn(data: bytes) -> tuple[int, bool] | None:
    if data[0] != lbtrm.TYPE_DATA or len(data) < lbtrm.DATA_HEADER_LEN:
        return None
    _, _, sqn, _, flags, _ = lbtrm.decode_data_header(data)
    return sqn, bool(flags & lbtrm.FLAG_RX)


def ru_sqn(data: bytes) -> tuple[int, bool] | None:
    if data[0] != lbtru.TYPE_DATA or len(data) < lbtru.DATA_HEADER_LEN:
        return None
    flags, sqn, _, _, _ = lbtru.decode_data_header(data)
    return sqn, bool(flags & lbtru.FLAG_RX)


def common_steps(
    net: WatchedNet,
    src: Address,
    data_sqn: Sqn,
    nak: Callable[[tuple[int, ...]], bytes],
    ncf: Callable[[int, int], bytes],
) -> None:
    """What LBT-RM and LBT-RU share, from sequence number 0 on: ``nak(sqns)`` is the receiver's NAK,
    ``ncf(sqn, reason)`` the source's NCF."""
    sent = 0

    def send(count: int, tidx: int = SUBSCRIBED) -> list[SendResult]:
        nonlocal sent
        results = [net.send(src, lbmc_data(sent + i, tidx=tidx)) for i in range(count)]
        sent += sum(1 for r in results if not r.refused)
        return results

    # Data, for a subscribed topic and one nobody here subscribes to.
    send(2)
    send(1, tidx=UNSUBSCRIBED)
    net.run_for(5 * MS)
    # 3 lost, 4 and 5 reveal the gap; the first retransmission of 3 is lost too, so the receiver NAKs
    # again within the ignore interval (NCF "NAK ignored"), then again after the NCF's suppression; the
    # repair arrives twice.
    next_interval(net)
    net.fate = fate(data_sqn, drop=[3], drop_first_rx=[3], double_rx=True)
    send(3)
    net.run_for(2 * S)
    # Reordering: 7 overtakes 6, which fills the gap before any repair (LBT-RU NAKs at once).
    next_interval(net)
    net.fate = fate(data_sqn, delay={6: MS // 2})
    send(2)
    net.run_for(100 * MS)
    # Two losses NAKed together, one retransmission per interval: the second waits (NCF "retransmit
    # delay") for the next interval's budget.
    next_interval(net)
    net.fate = fate(data_sqn, drop=[8, 9])
    send(3)
    net.run_for(S)
    # The data rate limit: 11 datagrams fit the interval, the 12th is queued (the send succeeds), the
    # 13th refused; the queued one goes out when the interval refreshes.
    next_interval(net)
    net.fate = fate(data_sqn)
    results = send(13)
    assert [(r.queued, r.refused) for r in results[-2:]] == [(True, False), (False, True)]
    net.run_for(100 * MS)
    # A NAK for data the window no longer holds (NCF "NAK shed"), and one for data never sent.
    net.craft(RCV, nak((0,)), src)
    net.craft(RCV, nak((sent + 1000,)), src)
    net.run_for(10 * MS)
    # The window moves past a loss: of 9 datagrams only the last arrives, its trailing edge says the
    # first is gone; the rest are repaired.
    next_interval(net)
    first = sent
    net.fate = fate(data_sqn, drop=list(range(first, first + 8)))
    send(9)
    net.run_for(2 * S)
    # A loss that is not repaired within the NAK generation interval (every retransmission is 3 s
    # late), then repaired after all.
    next_interval(net)
    lost = sent
    net.fate = fate(data_sqn, drop=[lost], delay_rx={lost: 3 * S})
    send(2)
    net.run_for(5 * S)
    # An NCF with a reason openum sources never send ("do not retry") for a missing datagram.
    next_interval(net)
    lost = sent
    net.fate = fate(data_sqn, drop=[lost])
    send(2)
    net.run_for(2 * MS)
    net.craft(src, ncf(lost, NcfReason.DO_NOT_RETRY), RCV)
    net.run_for(S)
    net.fate = fate(data_sqn)


def test_every_lbtrm_counter_moves() -> None:
    sid, port = 0x1A2B3C4D, 14390
    src: Address = ("10.0.0.1", port)
    rc = rate_controller()
    source = RmSource(
        session_id=sid,
        nak_port=port,
        params=RmSourceParams(transmission_window_size=WINDOW),
        rate=rc,
        now_ns=0,
    )
    receiver = RmReceiver(
        session_id=sid,
        source=src,
        params=RmReceiverParams(nak_generation_interval=2000),
        rng=random.Random(1),
        now_ns=0,
    )
    net, rcv, loop = rig(source, rc, receiver, src)
    try:

        def nak(sqns: tuple[int, ...], *, fmt: int = NakFormat.SELECTIVE, sid_: int = sid) -> bytes:
            return lbtrm.encode(RmNak(port, sid_, sqns, fmt))

        def ncf(sqn: int, reason: int) -> bytes:
            return lbtrm.encode(RmNcf(port, sid, source.trail_sqn, (sqn,), reason))

        common_steps(net, src, rm_sqn, nak, ncf)
        # Garbage at the receiver, from the source's address (as a UM peer's bug or a forger would send
        # it): a truncated DATA, version 1, a NAK (receivers take none), an NCF whose count overruns it,
        # and DATA naming another NAK port.
        good = lbtrm.encode(RmData(port, sid, source.next_sqn, source.trail_sqn, lbmc_data(0)))
        ncf_bytes = ncf(0, NcfReason.NAK_SHED)
        for junk in (
            good[:12],
            bytes([0x10]) + good[1:],
            nak((0,)),
            ncf_bytes[:-4],
            lbtrm.encode(RmData(port + 1, sid, 0, 0, b"x")),
            # a forged sequence number half the sequence space ahead: dropped, out of the window
            lbtrm.encode(RmData(port, sid, (source.next_sqn + 0x7FFF_FFF0) & 0xFFFF_FFFF, 0, b"x")),
        ):
            net.craft(src, junk, RCV)
        # Garbage at the source's NAK port: too short, version 1, an NCF (sources take only NAKs), a NAK
        # whose count overruns it, a NAK of another session, a parity NAK (FEC, which openum lacks).
        for junk in (
            b"\x03\x00",
            bytes([0x13]) + nak((0,))[1:],
            ncf_bytes,
            nak((1, 2))[:-4],
            nak((1,), sid_=sid ^ 1),
            nak((1,), fmt=NakFormat.PARITY),
        ):
            net.craft(OTHER, junk, src)
        net.run_for(S)
        assert rcv.topic.messages > 0 and rcv.ended == []
        assert net.watch is not None
        assert net.watch.unmoved() == {}
    finally:
        loop.close()


def test_every_lbtru_counter_moves() -> None:
    sid = 0x0BADCAFE
    src: Address = ("10.0.0.1", 14380)
    opts = make_options(sid)
    rc = rate_controller()
    source = RuSource(
        session_id=sid,
        params=RuSourceParams(transmission_window_size=WINDOW, client_activity_timeout=1000),
        rate=rc,
        now_ns=0,
    )
    receiver = RuReceiver(
        session_id=sid,
        source=src,
        params=RuReceiverParams(nak_generation_interval=2000),
        rng=random.Random(1),
        now_ns=0,
    )
    net, rcv, loop = rig(source, rc, receiver, src)
    try:
        net.run_for(10 * MS)  # CREQ, SM SYN: connected, with a client ID
        assert receiver.client_id == 1

        def nak(sqns: tuple[int, ...], *, fmt: int = NakFormat.SELECTIVE, options: Any = opts) -> bytes:
            return lbtru.encode(RuNak(sqns, fmt, options))

        def ncf(sqn: int, reason: int) -> bytes:
            return lbtru.encode(RuNcf(source.trail_sqn, (sqn,), reason, options=opts))

        common_steps(net, src, ru_sqn, nak, ncf)
        # Garbage at the receiver, from the source's address: too short, version 1, a CREQ (receivers
        # take none), an NCF whose count overruns it, DATA of another session.
        ncf_bytes = ncf(0, NcfReason.NAK_SHED)
        for junk in (
            b"\x00",
            bytes([0x10]) + ncf_bytes[1:],
            lbtru.encode(RuCreq(options=opts)),
            ncf_bytes[:-4],
            lbtru.encode(RuData(0, 0, b"x", options=make_options(sid ^ 1))),
            lbtru.encode(RuData((source.next_sqn + 0x7FFF_FFF0) & 0xFFFF_FFFF, 0, b"x", options=opts)),
        ):
            net.craft(src, junk, RCV)
        # Garbage at the source, from its client: too short, version 1, DATA (sources take none), a NAK
        # whose count overruns it, a NAK of another session, a parity NAK.
        for junk in (
            b"\x03",
            bytes([0x13]) + nak((0,))[1:],
            lbtru.encode(RuData(0, 0, b"x", options=opts)),
            nak((1, 2))[:-4],
            nak((1,), options=make_options(sid ^ 1)),
            nak((1,), fmt=NakFormat.PARITY),
        ):
            net.craft(RCV, junk, src)
        net.run_for(100 * MS)
        # The client goes silent (its datagrams no longer reach the source): timed out; when it is heard
        # again (an ACK) the source resets it; the bare RST is checked with a CREQ, which the source
        # answers by taking the client back, so the receiving session goes on.
        net.fate = fate(ru_sqn, cut=(RCV, src))
        net.run_for(1500 * MS)
        assert source.clients == ()
        net.fate = fate(ru_sqn)
        net.run_for(S)
        assert rcv.ended == [] and rcv.topic.messages > 0 and source.clients == (RCV,)
        assert net.watch is not None
        assert net.watch.unmoved() == {}
    finally:
        loop.close()
