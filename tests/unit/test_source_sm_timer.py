"""A reliable source session's timer after a plain send (ReliableSourceSession._deliver's common case).

After a send only the next session message (SM) moves: to the minimum interval from now.  The session
re-arms its timer only when that is earlier than the time it is armed for, which happens after the SMs
of an idle session have backed off.  Driven by hand: an LBT-RM session on an event loop with a clock that
moves only when told (``ManualClock``), its SMs sent to a group on the loopback interface.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import closing

import pytest

from openum.config import ContextAttributes, SourceAttributes
from openum.protocol.reliable import RateController
from openum.runtime import EventLoop, ManualClock
from openum.transport.lbtrm import RmSourceSession, _multicast_sender

MS = 1_000_000
GROUP = "224.10.10.93"


class Rig:
    def __init__(self) -> None:
        self.clock = ManualClock(10**12)
        log = logging.getLogger("test.sm")
        self.loop = EventLoop(self.clock, log, "test")
        ctx = ContextAttributes()
        attrs = SourceAttributes()
        attrs.set("transport_lbtrm_sm_minimum_interval", 50)
        attrs.set("transport_lbtrm_sm_maximum_interval", 1600)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]  # a destination port nobody listens on
        sock = _multicast_sender("127.0.0.1", 0)
        sock.bind(("127.0.0.1", 0))
        rate = RateController.from_options(ctx.get, "lbtrm", now_ns=self.clock.now_ns())
        self.session = RmSourceSession(
            self.loop, log, attrs, ctx, GROUP, port, sock, 7, rate, threading.Lock()
        )
        self.session.start()

    @property
    def armed(self) -> int | None:
        return self.session.timer._when  # type: ignore[no-any-return]

    def send(self) -> None:
        with self.session.lock:
            self.session._deliver(b"\0" * 40)

    def advance_to(self, when: int) -> None:
        self.clock.set(when)
        self.loop.run_once(0)  # the timers due now

    def close(self) -> None:
        self.session.close()
        self.loop.close()


@pytest.fixture
def rig() -> Iterator[Rig]:
    with closing(Rig()) as r:
        yield r


def test_a_send_rearms_the_timer_only_when_the_next_sm_moved_earlier(rig: Rig) -> None:
    rig.send()
    assert rig.armed == rig.clock.now_ns() + 50 * MS  # the first SM, a minimum interval after the data
    rig.clock.advance(1 * MS)
    rig.send()
    assert rig.armed == rig.clock.now_ns() - 1 * MS + 50 * MS  # armed earlier than the new SM: kept
    # Idle: SMs at doubling intervals up to the maximum.
    intervals = []
    for _ in range(7):
        due = rig.armed
        assert due is not None
        rig.advance_to(due)
        nxt = rig.armed
        assert nxt is not None
        intervals.append((nxt - due) // MS)
    assert intervals[-2:] == [1600, 1600]
    # A send now moves the next SM 1,550 ms earlier than armed: the timer follows.
    rig.clock.advance(10 * MS)
    rig.send()
    assert rig.armed == rig.clock.now_ns() + 50 * MS
