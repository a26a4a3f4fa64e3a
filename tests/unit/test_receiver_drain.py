"""When an LBT-RM receiver reads past the first datagram of an event (transport._reliable.DrainGate).

Driven by hand over real sockets (tests.unit._rm_rig): ``RmReceiving`` on an event loop that is not
running, with a clock that moves only when told (``ManualClock``), its readiness handler called by the test.
The test-only receive hook (``_drop``), which the receiver runs on each datagram it read before handling it,
stands in for a callback whose send makes a peer on the same CPU answer at once.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from contextlib import closing

import pytest

from openum.runtime import ManualClock
from openum.transport._reliable import BURST_IDLE_NS, CAN_DISCONNECT
from tests.helpers import wait_until
from tests.unit._rm_rig import RmRig

pytestmark = pytest.mark.skipif(not CAN_DISCONNECT, reason="connected group sockets: Linux only")

GROUP = "224.10.10.92"
SID = 7


class Rig(RmRig):
    """One LBT-RM session received from ``src``, on a clock that stands still unless moved."""

    def __init__(self) -> None:
        self.clock = ManualClock(10**12)
        super().__init__(GROUP, self.clock)
        self.session = self.join(self.src, SID)
        self.sqn = 0
        # The first datagram connects the group socket to the source, and its event reads until the socket
        # is empty (what was queued before the connect may be anyone's): no gate yet.
        self.send_next(1)
        assert wait_until(lambda: (self.event(), self.received == 1)[1], 5)
        self.sock = self.group.sock  # type: ignore[attr-defined]

    @property
    def received(self) -> int:
        return int(self.session.engine.statistics().msgs_rcved)  # type: ignore[attr-defined]

    def send_next(self, count: int) -> None:
        for _ in range(count):
            self.send(self.src, self.data(self.src, SID, self.sqn))
            self.sqn += 1

    def pending(self) -> bool:
        return bool(select.select([self.sock], [], [], 0)[0])

    def wait_pending(self) -> None:
        assert wait_until(self.pending, 5), "the datagram sent did not arrive"


@pytest.fixture
def rig() -> Iterator[Rig]:
    with closing(Rig()) as r:
        yield r


def _rx_queue(rig: Rig) -> int:
    """The memory the group socket's queued datagrams take (``rx_queue`` of /proc/net/udp)."""
    inode = os.fstat(rig.sock.fileno()).st_ino
    with open("/proc/net/udp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if int(fields[9]) == inode:
                return int(fields[4].split(":")[1], 16)
    raise AssertionError("the group socket is not in /proc/net/udp")


def queue(rig: Rig, count: int) -> None:
    """Send ``count`` datagrams and wait until all of them are queued (equal datagrams take equal memory)."""
    assert not rig.pending()
    rig.send_next(1)
    rig.wait_pending()
    one = _rx_queue(rig)
    rig.send_next(count - 1)
    assert wait_until(lambda: _rx_queue(rig) == count * one, 5), "the datagrams sent did not all arrive"


def test_an_event_that_begins_at_once_drains_a_burst(rig: Rig) -> None:
    queue(rig, 5)
    rig.event()  # the clock stood still since the last event: it began at once, and a datagram waits
    assert rig.received == 6
    assert not rig.pending()


def test_an_event_after_a_wait_reads_one_datagram(rig: Rig) -> None:
    queue(rig, 3)
    rig.clock.advance(BURST_IDLE_NS + 1)
    rig.event()
    assert rig.received == 2
    assert rig.pending()


def test_an_answer_to_the_handling_is_left_to_the_next_event(rig: Rig) -> None:
    """The gate looks before the datagram is handled: the answer its handling caused is no burst."""
    answered: list[int] = []

    def answer(_data: bytes) -> bool:
        if not answered:
            answered.append(rig.sqn)
            rig.send_next(1)
            rig.wait_pending()
        return False  # handled as usual

    rig.rm._drop = answer
    queue(rig, 1)
    rig.event()  # began at once (the clock stood still), read one datagram, looked: nothing else waited
    assert answered, "the hook did not run"
    assert rig.received == 2
    assert rig.pending()  # the answer waits for the next event
    rig.event()
    assert rig.received == 3
    assert not rig.pending()
