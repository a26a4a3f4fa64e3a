"""An LBT-RM group socket serving one session is connected to its source: what gets through, and when.

Driven by hand over real sockets: ``RmReceiving`` on an event loop that is not running, its readiness
handler called by the test, so what is queued before and after the connect is under the test's control.
"""

from __future__ import annotations

import logging
import random
import select
import socket
from collections.abc import Iterator

import pytest

from openum.protocol.reliable import RmReceiverParams
from openum.runtime import EventLoop, FdEvent, MonotonicClock
from openum.transport._reliable import CAN_DISCONNECT
from openum.transport.lbtrm import RmReceiving
from openum.wire.lbmr import LbtrmTransport
from openum.wire.lbtrm import RmData, encode
from tests.helpers import wait_until

pytestmark = pytest.mark.skipif(not CAN_DISCONNECT, reason="connected group sockets: Linux only")

GROUP = "224.10.10.91"
OTHER_HOST = "127.0.0.2"  # another address of the loopback interface: a sender on "another host"


def _sender(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    sock.bind((host, 0))
    return sock


class Rig:
    """One receiving context's LBT-RM reception and two would-be sources on one group."""

    def __init__(self) -> None:
        self.loop = EventLoop(MonotonicClock(), logging.getLogger("test.lbtrm"), "test")
        attrs = {"transport_lbtrm_receiver_socket_buffer": 0}
        self.rm = RmReceiving(
            self.loop, attrs, "127.0.0.1", logging.getLogger("test.lbtrm"), random.Random(1)
        )
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]  # a destination port nobody else uses
        self.src = _sender("127.0.0.1")
        self.src2 = _sender("127.0.0.1")
        self.stranger = _sender(OTHER_HOST)

    def join(self, src: socket.socket, sid: int) -> object:
        transport = LbtrmTransport("127.0.0.1", GROUP, sid, self.port, src.getsockname()[1])
        return self.rm.join(transport, RmReceiverParams(), lambda: None, lambda reason: None)

    @property
    def group(self) -> object:
        return self.rm._groups[(GROUP, self.port)]

    def data(self, src: socket.socket, sid: int, sqn: int, payload: bytes = b"x") -> bytes:
        return encode(
            RmData(ucast_port=src.getsockname()[1], session_id=sid, sqn=sqn, trail_sqn=0, payload=payload)
        )

    def send(self, sock: socket.socket, datagram: bytes) -> None:
        sock.sendto(datagram, (GROUP, self.port))

    def readable(self) -> bool:
        group = self.group
        sock = group.sock  # type: ignore[attr-defined]
        if not select.select([sock], [], [], 0)[0]:
            return False
        self.rm._readable(sock.fileno(), FdEvent.READ, group)  # type: ignore[arg-type]
        return True

    def read_until(self, predicate: object) -> bool:
        return wait_until(lambda: (self.readable(), predicate())[1], 5)  # type: ignore[operator]

    def close(self) -> None:
        self.rm.close()
        self.loop.close()
        for sock in (self.src, self.src2, self.stranger):
            sock.close()


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    try:
        yield r
    finally:
        r.close()


def _stats(session: object) -> object:
    return session.engine.statistics()  # type: ignore[attr-defined]


def test_connected_on_the_first_datagram_from_the_source_then_strangers_stay_off(rig: Rig) -> None:
    session = rig.join(rig.src, 7)
    group = rig.group
    assert group.only is None  # type: ignore[attr-defined]
    rig.send(rig.src, rig.data(rig.src, 7, 0))
    assert rig.read_until(lambda: _stats(session).msgs_rcved == 1)  # type: ignore[attr-defined]
    assert group.only is session  # type: ignore[attr-defined]
    assert group.sock.getpeername() == rig.src.getsockname()  # type: ignore[attr-defined]
    # Another sender on this host (the context's own source, say) and another host: kept off by the kernel.
    rig.send(rig.src2, rig.data(rig.src2, 8, 0))
    rig.send(rig.stranger, rig.data(rig.src, 7, 1, b"forged"))
    rig.send(rig.src, rig.data(rig.src, 7, 1))
    assert rig.read_until(lambda: _stats(session).msgs_rcved == 2)  # type: ignore[attr-defined]
    assert rig.rm.dgrams_dropped_unknown == 0
    assert _stats(session).bytes_rcved == 2 * len(rig.data(rig.src, 7, 0))  # type: ignore[attr-defined]


def test_datagrams_queued_before_the_connect_are_read_with_their_sender(rig: Rig) -> None:
    session = rig.join(rig.src, 7)
    # Queued before the socket is connected: a forgery naming the session, from another host.
    rig.send(rig.stranger, rig.data(rig.src, 7, 0, b"forged"))
    assert wait_until(lambda: bool(select.select([rig.group.sock], [], [], 0)[0]), 5)  # type: ignore[attr-defined]
    assert rig.rm._connect(rig.group, session)  # type: ignore[arg-type]  # as on the source's first datagram
    rig.send(rig.src, rig.data(rig.src, 7, 0))
    assert rig.read_until(lambda: _stats(session).msgs_rcved == 1)  # type: ignore[attr-defined]
    assert rig.rm.dgrams_dropped_unknown == 1  # the forgery: its sender is not the session's
    assert _stats(session).duplicate_data == 0  # type: ignore[attr-defined]  # the real sqn 0 was the first
    assert rig.group.settled  # type: ignore[attr-defined]


def test_a_second_session_on_the_socket_dissolves_the_connection_for_good(rig: Rig) -> None:
    first = rig.join(rig.src, 7)
    rig.send(rig.src, rig.data(rig.src, 7, 0))
    assert rig.read_until(lambda: _stats(first).msgs_rcved == 1)  # type: ignore[attr-defined]
    group = rig.group
    assert group.only is first  # type: ignore[attr-defined]
    second = rig.join(rig.src2, 8)
    assert group.only is None  # type: ignore[attr-defined]
    with pytest.raises(OSError, match="not connected"):
        group.sock.getpeername()  # type: ignore[attr-defined]
    rig.send(rig.stranger, b"\x00\x01garbage")
    rig.send(rig.src2, rig.data(rig.src2, 8, 0))
    rig.send(rig.src, rig.data(rig.src, 7, 1))
    assert rig.read_until(
        lambda: _stats(first).msgs_rcved == 2 and _stats(second).msgs_rcved == 1  # type: ignore[attr-defined]
    )
    assert rig.rm.dgrams_dropped_unknown == 1  # another host's datagram reaches the socket again
    assert group.only is None  # type: ignore[attr-defined]  # never connected again


def test_a_source_sending_from_another_port_than_its_nak_port_is_never_connected_to(rig: Rig) -> None:
    session = rig.join(rig.src, 7)
    rig.send(rig.src2, rig.data(rig.src, 7, 0))  # the session's datagram, from another port
    assert rig.read_until(lambda: _stats(session).msgs_rcved == 1)  # type: ignore[attr-defined]
    assert rig.group.only is None  # type: ignore[attr-defined]
    rig.send(rig.src2, rig.data(rig.src, 7, 1))
    assert rig.read_until(lambda: _stats(session).msgs_rcved == 2)  # type: ignore[attr-defined]
