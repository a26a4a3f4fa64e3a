"""The event loop's readiness pollers: epoll called directly, and the :mod:`selectors` fallback, give the
loop the same answers (``READ`` 0x1 / ``WRITE`` 0x2 per ready descriptor, an error or hang-up as both)."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import pytest

from openum.runtime import FdEvent
from openum.runtime._poller import EpollPoller, Poller, SelectorsPoller, default_poller

KINDS: list[type[EpollPoller] | type[SelectorsPoller]] = [SelectorsPoller]
if hasattr(select, "epoll"):
    KINDS.append(EpollPoller)


@pytest.fixture(params=KINDS, ids=lambda kind: kind.__name__)
def poller(request: pytest.FixtureRequest) -> Iterator[Poller]:
    p: Poller = request.param(FdEvent)
    yield p
    p.close()


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def ready(poller: Poller, timeout: float | None = 0) -> dict[int, FdEvent]:
    return {fd: poller.fired[mask] for fd, mask in poller.poll(timeout)}


def test_readable_writable_and_modify(poller: Poller, pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    poller.register(a.fileno(), FdEvent.READ)
    assert ready(poller) == {}  # nothing to read yet
    b.send(b"x")
    assert ready(poller, 1.0) == {a.fileno(): FdEvent.READ}
    poller.modify(a.fileno(), FdEvent.READ | FdEvent.WRITE)
    assert ready(poller) == {a.fileno(): FdEvent.READ | FdEvent.WRITE}
    a.recv(1)
    assert ready(poller) == {a.fileno(): FdEvent.WRITE}
    poller.unregister(a.fileno())
    assert ready(poller) == {}


def test_hang_up_wakes_a_reader_and_a_writer(
    poller: Poller, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, b = pair
    poller.register(a.fileno(), FdEvent.READ)
    b.close()
    got = ready(poller, 1.0)
    assert got[a.fileno()] & FdEvent.READ  # the next read finds the end of the stream
    assert a.recv(1) == b""


def test_a_wait_shorter_than_a_millisecond_waits(poller: Poller) -> None:
    # epoll counts whole milliseconds: 0.3 ms must not become a zero timeout (a spinning loop).
    start = time.monotonic()
    assert poller.poll(0.0003) == []
    assert time.monotonic() - start >= 0.0003


def test_fired_values_are_the_loops_event_type(
    poller: Poller, pair: tuple[socket.socket, socket.socket]
) -> None:
    a, _ = pair
    poller.register(a.fileno(), FdEvent.WRITE)
    ((fd, mask),) = poller.poll(1.0)
    assert fd == a.fileno()
    assert poller.fired[mask] == FdEvent.WRITE
    assert isinstance(poller.fired[mask], FdEvent)


def test_default_poller_is_epoll_where_available() -> None:
    p = default_poller(FdEvent)
    try:
        assert isinstance(p, EpollPoller if hasattr(select, "epoll") else SelectorsPoller)
    finally:
        p.close()
