"""An LBT-RM group socket serving one session is connected to its source: what gets through, and when.

Driven by hand over real sockets (tests.unit._rm_rig): ``RmReceiving`` on an event loop that is not running,
its readiness handler called by the test, so what is queued before and after the connect is under the
test's control.
"""

from __future__ import annotations

import select
from collections.abc import Iterator
from contextlib import closing

import pytest

from openum.transport._reliable import CAN_DISCONNECT
from tests.helpers import wait_until
from tests.unit._rm_rig import RmRig as Rig

pytestmark = pytest.mark.skipif(not CAN_DISCONNECT, reason="connected group sockets: Linux only")

GROUP = "224.10.10.91"


@pytest.fixture
def rig() -> Iterator[Rig]:
    with closing(Rig(GROUP)) as r:
        yield r


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
