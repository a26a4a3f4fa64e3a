"""datagram_pending: whether a UDP socket holds another datagram, asked between the reads of one event."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import pytest

from openum.transport._reliable import datagram_pending
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
