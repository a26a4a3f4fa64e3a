"""The event loop's deadline descriptor (``openum.runtime._deadline``): waits for a timer end on a timerfd
armed once per deadline, not on the poller's timeout (docs/performance.md, pass 13)."""

from __future__ import annotations

import logging
import os
import select
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from openum.runtime import EventLoop, FdEvent, ManualClock, MonotonicClock
from openum.runtime._deadline import DeadlineFd, deadline_fd

MS = 1_000_000
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux's")


@pytest.fixture
def loop() -> Iterator[EventLoop]:
    lp = EventLoop(MonotonicClock(), logging.getLogger("test.deadline"), "deadline")
    yield lp
    lp.close()


class Spy:
    """Records the loop's waits (their timeouts) and its deadline descriptor's armings."""

    def __init__(self, lp: EventLoop) -> None:
        self.waits: list[float | None] = []
        self.armed: list[int] = []
        wait = lp._wait
        lp._wait = lambda timeout: (self.waits.append(timeout), wait(timeout))[1]
        deadline = lp._deadline
        if deadline is not None:
            arm = deadline.arm
            deadline.arm = lambda ns: (self.armed.append(ns), arm(ns))[0]  # type: ignore[method-assign]


@linux_only
def test_deadline_fd_becomes_readable_at_its_deadline_only() -> None:
    fd = deadline_fd()
    assert isinstance(fd, DeadlineFd)
    poller = select.epoll()
    try:
        poller.register(fd.fd, select.EPOLLIN)
        fd.arm(time.monotonic_ns() + 60_000 * MS)  # a minute away
        assert poller.poll(0) == []
        assert fd.armed_ns > 0
        fd.arm(time.monotonic_ns() + 2 * MS)  # re-armed earlier: replaces the minute
        assert poller.poll(30) == [(fd.fd, select.EPOLLIN)]
        fd.clear()
        assert fd.armed_ns == 0
        assert poller.poll(0) == []  # read: no longer readable
        fd.clear()  # a second clear finds nothing to read and says nothing
    finally:
        poller.close()
        fd.close()


@linux_only
def test_loop_waits_for_a_timer_without_a_timeout_and_arms_once(loop: EventLoop) -> None:
    spy = Spy(loop)
    fired: list[int] = []
    start = time.monotonic_ns()
    loop.schedule_timer(40, lambda _: fired.append(time.monotonic_ns()))
    deadline = loop.next_deadline()
    assert deadline is not None
    # Descriptor events before the deadline: each wait ends early, none re-arms the timer.
    r, w = os.pipe()
    try:
        loop.register_fd(r, FdEvent.READ, lambda fd, _ev, _c: os.read(fd, 1))
        for _ in range(5):
            os.write(w, b"x")
            loop.run_once(None)
        assert fired == []
        while not fired:
            loop.run_once(None)
    finally:
        loop.unregister_fd(r)
        os.close(r)
        os.close(w)
    assert spy.armed == [deadline]
    assert set(spy.waits) == {None}  # never a timeout: the descriptor ends the wait
    assert fired[0] >= deadline > start  # on time or after, never early


@linux_only
def test_loop_rearms_only_for_an_earlier_deadline(loop: EventLoop) -> None:
    spy = Spy(loop)
    fired: list[str] = []
    late = loop.schedule_timer(500, lambda _: fired.append("late"))
    r, w = os.pipe()
    try:
        loop.register_fd(r, FdEvent.READ, lambda fd, _ev, _c: os.read(fd, 1))
        os.write(w, b"x")
        loop.run_once(None)  # armed for the late timer, woken by the pipe
        loop.schedule_timer(20, lambda _: fired.append("early"))
        early_deadline = loop.next_deadline()
        while not fired:
            loop.run_once(None)
        assert fired == ["early"]
        assert spy.armed[-1] == early_deadline
        assert len(spy.armed) == 2
        # Cancelled, the late timer leaves nothing to wait for: the loop still never spins.
        assert loop.cancel_timer(late)
    finally:
        loop.unregister_fd(r)
        os.close(r)
        os.close(w)


def test_manual_clock_loop_never_arms_the_descriptor() -> None:
    lp = EventLoop(ManualClock(0), logging.getLogger("test.deadline"), "manual")
    try:
        spy = Spy(lp)
        fired: list[int] = []
        lp.schedule_timer(10, lambda _: fired.append(1))
        lp.run_once(0)
        assert fired == []
        lp.clock.set(10 * MS)  # type: ignore[attr-defined]
        lp.run_once(0)
        assert fired == [1]
        assert spy.armed == []
    finally:
        lp.close()


def test_caller_timeout_shorter_than_the_timer_is_a_plain_wait(loop: EventLoop) -> None:
    # process_events(msec) in sequential mode: the caller's timeout ends the wait first.
    spy = Spy(loop)
    loop.schedule_timer(10_000, lambda _: None)
    loop.run_once(1 * MS)
    assert spy.armed == []
    assert spy.waits == [0.001]


def test_without_a_timerfd_the_loop_waits_with_a_timeout(monkeypatch: Any) -> None:
    import openum.runtime._loop as loop_module

    monkeypatch.setattr(loop_module, "deadline_fd", lambda: None)
    lp = EventLoop(MonotonicClock(), logging.getLogger("test.deadline"), "fallback")
    try:
        assert lp._deadline is None
        spy = Spy(lp)
        fired: list[int] = []
        lp.schedule_timer(5, lambda _: fired.append(1))
        while not fired:
            lp.run_once(None)
        assert spy.waits and all(t is not None and 0 <= t <= 0.005 for t in spy.waits)
    finally:
        lp.close()
