"""datagram_pending and DrainGate: whether a UDP socket holds another datagram, asked between the reads of one
event, and when to ask."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from openum.transport._reliable import BURST_IDLE_NS, MAX_DRAIN, QUIET_EVENTS, DrainGate, datagram_pending
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


def event(gate: DrainGate, rx: socket.socket, clock: Clock) -> int:
    """One readiness event as the LBT-RM/RU receivers drain it; the datagrams it read."""
    fd = rx.fileno()
    began = clock()
    for i in range(MAX_DRAIN):
        if 0 < i < 3 and not gate.more(fd, i, began):
            return i
        try:
            rx.recv(100)
        except BlockingIOError:
            return i
    return MAX_DRAIN


def send(tx: socket.socket, rx: socket.socket, count: int) -> None:
    for _ in range(count):
        tx.sendto(b"x", rx.getsockname())
    assert wait_until(lambda: datagram_pending(rx.fileno(), bytearray(4)), 5)


def test_drain_gate_drains_a_burst(pair: tuple[socket.socket, socket.socket]) -> None:
    rx, tx = pair
    clock = Clock()
    gate = DrainGate(clock)
    send(tx, rx, 5)
    assert event(gate, rx, clock) == 5
    assert not datagram_pending(rx.fileno(), bytearray(4))


def quiet_gate(rx: socket.socket, tx: socket.socket, clock: Clock) -> DrainGate:
    """A gate after QUIET_EVENTS events without a burst: one datagram, or two (an answer that arrived
    while the first's callback ran), a round trip's idle time apart."""
    gate = DrainGate(clock)
    for n in range(QUIET_EVENTS):
        clock.idle(ROUND_TRIP_IDLE)
        send(tx, rx, 1 + n % 2)
        assert event(gate, rx, clock) == 1 + n % 2
    return gate


def test_a_quiet_gate_stops_looking_in_round_trips(pair: tuple[socket.socket, socket.socket]) -> None:
    """An event a round trip after the previous one reads one datagram and leaves the rest to the next
    event, which comes at once (level-triggered epoll) and so looks."""
    rx, tx = pair
    clock = Clock()
    gate = quiet_gate(rx, tx, clock)
    for _ in range(3):
        clock.idle(ROUND_TRIP_IDLE)
        send(tx, rx, 2)
        assert event(gate, rx, clock) == 1  # no look: the second stays queued
        clock.idle(BURST_IDLE)
        assert event(gate, rx, clock) == 1  # readable again at once: it looks, and finds nothing more
    assert not datagram_pending(rx.fileno(), bytearray(4))


def test_a_quiet_gate_finds_a_burst_on_its_second_event_and_drains_it(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    rx, tx = pair
    clock = Clock()
    gate = quiet_gate(rx, tx, clock)
    clock.idle(ROUND_TRIP_IDLE)
    send(tx, rx, 10)
    assert event(gate, rx, clock) == 1  # the burst's first event: after a round trip's idle time
    clock.idle(BURST_IDLE)
    assert event(gate, rx, clock) == 9  # the next, at once: it looks, finds a third waiting, drains
    assert not datagram_pending(rx.fileno(), bytearray(4))
    clock.idle(ROUND_TRIP_IDLE)
    send(tx, rx, 3)
    assert event(gate, rx, clock) == 3  # after a burst the gate looks on every event again


def test_the_idle_limit_tells_a_burst_from_a_round_trip() -> None:
    assert BURST_IDLE < BURST_IDLE_NS < ROUND_TRIP_IDLE
