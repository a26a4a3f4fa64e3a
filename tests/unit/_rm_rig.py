"""An LBT-RM reception driven by hand over real sockets, for tests of the receiver's socket handling.

``RmReceiving`` on an event loop that is not running (its clock the test's choice), its readiness handler
called by the test, so what is queued when is under the test's control; would-be sources are UDP sockets
sending to the group on the loopback interface.
"""

from __future__ import annotations

import logging
import random
import select
import socket

from openum.protocol.reliable import RmReceiverParams
from openum.runtime import Clock, EventLoop, FdEvent, MonotonicClock
from openum.transport.lbtrm import RmReceiving
from openum.wire.lbmr import LbtrmTransport
from openum.wire.lbtrm import RmData, encode
from tests.helpers import wait_until

OTHER_HOST = "127.0.0.2"  # another address of the loopback interface: a sender on "another host"


def sender(host: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
    sock.bind((host, 0))
    return sock


class RmRig:
    """One context's LBT-RM reception on ``group`` and three would-be sources: ``src`` and ``src2`` on this
    host, ``stranger`` on another."""

    def __init__(self, group: str, clock: Clock | None = None) -> None:
        self.group_address = group
        log = logging.getLogger("test.lbtrm")
        self.loop = EventLoop(clock or MonotonicClock(), log, "test")
        attrs = {"transport_lbtrm_receiver_socket_buffer": 0}
        self.rm = RmReceiving(self.loop, attrs, "127.0.0.1", log, random.Random(1))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            self.port: int = probe.getsockname()[1]  # a destination port nobody else uses
        self.src = sender("127.0.0.1")
        self.src2 = sender("127.0.0.1")
        self.stranger = sender(OTHER_HOST)

    def join(self, src: socket.socket, sid: int) -> object:
        transport = LbtrmTransport("127.0.0.1", self.group_address, sid, self.port, src.getsockname()[1])
        return self.rm.join(transport, RmReceiverParams(), lambda: None, lambda reason: None)

    @property
    def group(self) -> object:
        return self.rm._groups[(self.group_address, self.port)]

    def data(self, src: socket.socket, sid: int, sqn: int, payload: bytes = b"x") -> bytes:
        return encode(
            RmData(ucast_port=src.getsockname()[1], session_id=sid, sqn=sqn, trail_sqn=0, payload=payload)
        )

    def send(self, sock: socket.socket, datagram: bytes) -> None:
        sock.sendto(datagram, (self.group_address, self.port))

    def event(self) -> None:
        """The group socket's readiness handler, once."""
        group = self.group
        self.rm._readable(group.sock.fileno(), FdEvent.READ, group)  # type: ignore[attr-defined]

    def readable(self) -> bool:
        if not select.select([self.group.sock], [], [], 0)[0]:  # type: ignore[attr-defined]
            return False
        self.event()
        return True

    def read_until(self, predicate: object) -> bool:
        return wait_until(lambda: (self.readable(), predicate())[1], 5)  # type: ignore[operator]

    def close(self) -> None:
        self.rm.close()
        self.loop.close()
        for sock in (self.src, self.src2, self.stranger):
            sock.close()
