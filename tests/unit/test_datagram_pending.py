"""datagram_pending and DrainGate: whether a UDP socket holds another datagram, asked between the reads of one
event, and when to ask."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from openum.transport._reliable import LOOK_EVERY, MAX_DRAIN, QUIET_EVENTS, DrainGate, datagram_pending
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


def event(gate: DrainGate, rx: socket.socket) -> int:
    """One readiness event as the LBT-RM/RU receivers drain it; the datagrams it read."""
    fd = rx.fileno()
    for i in range(MAX_DRAIN):
        if 0 < i < 3 and not gate.more(fd, i):
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
    gate = DrainGate()
    send(tx, rx, 5)
    assert event(gate, rx) == 5
    assert not datagram_pending(rx.fileno(), bytearray(4))


def test_drain_gate_stops_looking_in_round_trips_and_finds_a_new_burst(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """After QUIET_EVENTS events without a burst (one datagram, or two: an answer that arrived while the
    first's callback ran), an event reads one datagram and leaves the rest to the next event, except on
    every LOOK_EVERY-th event, which finds a burst and drains it."""
    rx, tx = pair
    gate = DrainGate()
    # QUIET_EVENTS events without a burst, and one more: it still looks (every LOOK_EVERY-th event does).
    for n in range(QUIET_EVENTS + 1):
        send(tx, rx, 1 + n % 2)
        assert event(gate, rx) == 1 + n % 2
    burst = 2 * LOOK_EVERY + 2
    send(tx, rx, burst)
    reads = [event(gate, rx) for _ in range(LOOK_EVERY)]
    assert reads == [1] * (LOOK_EVERY - 1) + [burst - (LOOK_EVERY - 1)], reads
    assert not datagram_pending(rx.fileno(), bytearray(4))  # the look drained the rest
    send(tx, rx, 3)
    assert event(gate, rx) == 3  # after a burst the gate looks on every event again
