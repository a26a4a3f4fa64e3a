"""datagram_pending and DrainGate: whether a UDP socket holds another datagram, asked after the first read of
an event and before its datagram is handled, and when to ask."""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator

import pytest

from openum.transport._reliable import BURST_IDLE_NS, MAX_DRAIN, SKIP_EVENTS, DrainGate, datagram_pending
from tests.helpers import wait_until


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setblocking(False)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        yield rx, tx
    finally:
        rx.close()
        tx.close()


def test_pending_follows_the_queue(pair: tuple[socket.socket, socket.socket]) -> None:
    rx, tx = pair
    scratch = bytearray(4)
    assert not datagram_pending(rx.fileno(), scratch)
    tx.sendto(b"first", rx.getsockname())
    tx.sendto(b"second", rx.getsockname())
    assert wait_until(lambda: datagram_pending(rx.fileno(), scratch), 5)
    assert rx.recv(100) == b"first"
    assert wait_until(lambda: datagram_pending(rx.fileno(), scratch), 5)
    assert rx.recv(100) == b"second"
    assert not datagram_pending(rx.fileno(), scratch)


def test_an_empty_datagram_reads_as_nothing_pending_but_stays_readable(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Its size is 0, so the drain stops; the socket stays readable and the next event reads it."""
    rx, tx = pair
    tx.sendto(b"", rx.getsockname())
    assert wait_until(lambda: bool(select.select([rx], [], [], 0)[0]), 5)
    assert not datagram_pending(rx.fileno(), bytearray(4))
    assert rx.recvfrom(100)[0] == b""


class Clock:
    """The loop's clock, moved by the test: ``idle`` passes between two events."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        return self.now

    def idle(self, ns: int) -> None:
        self.now += ns


ROUND_TRIP_IDLE = 20_000  # ns between two events of a round trip across processes here
BURST_IDLE = 1_000  # ns between two events of a burst: the loop's way back through epoll


def event(gate: DrainGate, rx: socket.socket, clock: Clock, answer: Callable[[], None] | None = None) -> int:
    """One readiness event as the LBT-RM/RU receivers read it; the datagrams it read.  ``answer`` runs
    as each datagram's callback would (a peer on the same CPU answering the callback's send)."""
    fd = rx.fileno()
    began = clock()
    drain = False
    read = 0
    for i in range(MAX_DRAIN):
        if i and not drain:
            break
        try:
            rx.recv(100)
        except BlockingIOError:
            break
        read += 1
        if not i:
            drain = gate.drain(fd, began)
        if answer is not None:
            answer()
    gate.ended()
    return read


@pytest.fixture
def gated(pair: tuple[socket.socket, socket.socket]) -> tuple[socket.socket, socket.socket, Clock, DrainGate]:
    """The socket pair, and a gate on a clock the test moves."""
    clock = Clock()
    return (*pair, clock, DrainGate(clock))


def send(tx: socket.socket, rx: socket.socket, count: int) -> None:
    for _ in range(count):
        tx.sendto(b"x", rx.getsockname())
    assert wait_until(lambda: datagram_pending(rx.fileno(), bytearray(4)), 5)


def pending(rx: socket.socket) -> bool:
    return datagram_pending(rx.fileno(), bytearray(4))


def test_an_event_after_a_wait_reads_one_datagram(
    gated: tuple[socket.socket, socket.socket, Clock, DrainGate],
) -> None:
    """The datagram that woke the loop is no burst: the rest waits for the next event."""
    rx, tx, clock, gate = gated
    clock.idle(ROUND_TRIP_IDLE)
    send(tx, rx, 5)
    assert event(gate, rx, clock) == 1
    assert pending(rx)


def test_an_event_at_once_after_the_previous_finds_a_burst_and_drains_it(
    gated: tuple[socket.socket, socket.socket, Clock, DrainGate],
) -> None:
    rx, tx, clock, gate = gated
    clock.idle(ROUND_TRIP_IDLE)
    send(tx, rx, 10)
    assert event(gate, rx, clock) == 1  # the burst's first event: after a wait
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == 9  # the next, at once: a datagram already waits, so it drains
    assert not pending(rx)


def test_a_drain_stops_at_max_drain(gated: tuple[socket.socket, socket.socket, Clock, DrainGate]) -> None:
    rx, tx, clock, gate = gated
    send(tx, rx, 1 + MAX_DRAIN + 5)
    assert event(gate, rx, clock) == 1
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == MAX_DRAIN  # the loop's other work runs, then the next event
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == 5


def test_an_answer_that_arrives_during_the_callback_is_no_burst(
    gated: tuple[socket.socket, socket.socket, Clock, DrainGate],
) -> None:
    """Round trips on one CPU: the callback's send lets the peer run, its answer waits when the callback
    returns, and the next event begins at once.  The gate looks before the callback, when nothing waits
    yet, so every event reads one datagram and leaves the answer to the next one."""
    rx, tx, clock, gate = gated
    send(tx, rx, 1)
    for n in range(2 * SKIP_EVENTS + 2):  # looking (empty) and not looking alike
        clock.idle(BURST_IDLE)
        assert event(gate, rx, clock, answer=lambda: send(tx, rx, 1)) == 1, f"event {n} read the answer"
        assert pending(rx)
    rx.recv(100)
    assert not pending(rx)


def test_after_an_empty_look_a_burst_is_found_within_skip_events(
    gated: tuple[socket.socket, socket.socket, Clock, DrainGate],
) -> None:
    rx, tx, clock, gate = gated
    clock.idle(ROUND_TRIP_IDLE)
    send(tx, rx, 2)
    assert event(gate, rx, clock) == 1  # after a wait: no look
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == 1  # at once: it looks, nothing more waits, so it stops looking
    send(tx, rx, SKIP_EVENTS + 10)
    for _ in range(SKIP_EVENTS):
        clock.idle(BURST_IDLE)
        assert event(gate, rx, clock) == 1
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == 10  # it looks again, and drains
    assert not pending(rx)


def test_the_idle_limit_tells_a_burst_from_a_round_trip() -> None:
    assert BURST_IDLE < BURST_IDLE_NS < ROUND_TRIP_IDLE
