"""Context runtime: timers in sequential mode under an injected clock and in embedded mode,
application descriptors, event-queue delivery, lifetime rules and logging."""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import pytest

import openum
from openum import Context, EventQueue, FdEvent, ManualClock
from openum.runtime import in_context_callback
from tests.helpers import wait_until

MS = 1_000_000
WAIT = 5.0


def sequential(**kw: Any) -> Context:
    return Context(options=["context operational_mode sequential"], clock=ManualClock(0), **kw)


def test_timers_fire_in_order_at_expected_times_under_injected_clock() -> None:
    ctx = sequential()
    fired: list[tuple[str, int]] = []
    for delay, label in ((30, "c"), (10, "a"), (20, "b"), (10, "a2")):
        ctx.schedule_timer(delay, lambda lbl: fired.append((lbl, ctx.now_ns())), label)
    ctx.process_events_at(9 * MS)
    assert fired == []
    ctx.process_events_at(10 * MS)
    assert fired == [("a", 10 * MS), ("a2", 10 * MS)]  # ties fire in scheduling order
    ctx.process_events_at(29 * MS)
    assert [f[0] for f in fired] == ["a", "a2", "b"]
    assert ctx.next_deadline_ns() == 30 * MS
    ctx.process_events_at(1000 * MS)
    assert [f[0] for f in fired] == ["a", "a2", "b", "c"]
    ctx.close()


def test_timer_rescheduling_itself_and_cancel() -> None:
    ctx = sequential()
    ticks: list[int] = []

    def tick(_: Any) -> None:
        ticks.append(ctx.now_ns() // MS)
        if len(ticks) < 5:
            ctx.schedule_timer(100, tick)

    ctx.schedule_timer(100, tick)
    for t in range(0, 1001, 50):
        ctx.process_events_at(t * MS)
    assert ticks == [100, 200, 300, 400, 500]
    tid = ctx.schedule_timer(10, ticks.append, "never")
    assert ctx.cancel_timer(tid) is True
    assert ctx.cancel_timer(tid) is False
    ctx.process_events_at(2000 * MS)
    assert "never" not in ticks
    ctx.close()


def test_zero_delay_timer_scheduled_from_a_timer_fires_in_the_same_pass() -> None:
    ctx = sequential()
    order: list[str] = []
    ctx.schedule_timer(5, lambda _: (order.append("first"), ctx.schedule_timer(0, order.append, "second")))
    ctx.process_events_at(5 * MS)
    assert order == ["first", "second"]
    ctx.close()


def test_embedded_timers_fire_in_order_never_early() -> None:
    with Context() as ctx:
        assert ctx.thread is not None and ctx.thread.is_alive()
        done = threading.Event()
        fired: list[tuple[int, int]] = []
        start = ctx.now_ns()
        delays = [40, 10, 30, 20, 50]
        for delay in delays:
            ctx.schedule_timer(
                delay,
                lambda d: (fired.append((d, ctx.now_ns() - start)), len(fired) == len(delays) and done.set()),
                delay,
            )
        assert done.wait(WAIT)
        assert [d for d, _ in fired] == sorted(delays)
        for delay, elapsed in fired:
            assert elapsed >= delay * MS  # never early
            assert elapsed < (delay + 1000) * MS  # tolerance a loaded 2-core machine meets
        assert threading.current_thread() is not ctx.thread


def test_embedded_timer_callbacks_run_on_the_context_thread() -> None:
    with Context() as ctx:
        seen: list[threading.Thread] = []
        done = threading.Event()
        ctx.schedule_timer(0, lambda _: (seen.append(threading.current_thread()), done.set()))
        assert done.wait(WAIT)
        assert seen == [ctx.thread]


def test_timer_through_an_event_queue_runs_on_the_dispatching_thread() -> None:
    evq = EventQueue()
    with Context() as ctx:
        ran: list[threading.Thread] = []
        ctx.schedule_timer(5, lambda _: ran.append(threading.current_thread()), event_queue=evq)
        with pytest.raises(openum.InvalidStateError):
            evq.close()  # the pending timer still references the queue
        assert wait_until(lambda: evq.size() == 1)
        assert evq.dispatch(EventQueue.POLL) == 1
        assert ran == [threading.current_thread()]
    evq.close()


def test_sequential_process_events_real_time_and_unblock() -> None:
    with Context(options=["context operational_mode sequential"]) as ctx:
        assert ctx.thread is None
        fired = threading.Event()
        ctx.schedule_timer(20, lambda _: fired.set())
        ctx.process_events(200)
        assert fired.is_set()
        stopper = threading.Timer(0.05, ctx.unblock)
        stopper.start()
        t0 = ctx.now_ns()
        ctx.process_events(60_000)  # returns early through unblock()
        stopper.join()
        assert ctx.now_ns() - t0 < 50_000 * MS


def test_sequential_apis_refused_in_embedded_mode() -> None:
    with Context() as ctx, pytest.raises(openum.InvalidStateError, match="sequential"):
        ctx.process_events(1)


def test_application_descriptor_callback() -> None:
    r, w = socket.socketpair()
    try:
        with Context() as ctx:
            got = threading.Event()
            seen: list[tuple[int, FdEvent, Any]] = []

            def on_ready(fd: int, events: FdEvent, clientd: Any) -> None:
                seen.append((fd, events, clientd))
                r.recv(100)
                got.set()

            fd = ctx.register_fd(r, on_ready, "cd")
            w.send(b"x")
            assert got.wait(WAIT)
            assert seen[0] == (fd, FdEvent.READ, "cd")
            assert ctx.unregister_fd(r) is True
            assert ctx.unregister_fd(r) is False
    finally:
        r.close()
        w.close()


def test_descriptor_events_through_an_event_queue() -> None:
    rfd, wfd = os.pipe()
    evq = EventQueue()
    try:
        with Context() as ctx:
            seen: list[threading.Thread] = []
            ctx.register_fd(
                rfd,
                lambda fd, ev, cd: (os.read(fd, 10), seen.append(threading.current_thread())),
                event_queue=evq,
            )
            os.write(wfd, b"a")
            assert wait_until(lambda: evq.size() == 1)
            assert evq.dispatch(EventQueue.POLL) == 1
            assert seen == [threading.current_thread()]
            ctx.unregister_fd(rfd)
    finally:
        os.close(rfd)
        os.close(wfd)
    evq.close()


class _Child:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.closed = False
        ctx._add_child(self)

    def close(self) -> None:
        self.closed = True
        self.ctx._remove_child(self)


def test_closing_a_context_with_open_objects_is_refused() -> None:
    ctx = sequential()
    child = _Child(ctx)
    with pytest.raises(openum.InvalidStateError, match="still open"):
        ctx.close()
    assert not ctx.closed
    child.close()
    ctx.close()
    assert ctx.closed
    ctx.close()  # idempotent
    with pytest.raises(openum.ClosedError):
        ctx.schedule_timer(1, print)
    with pytest.raises(openum.ClosedError):
        _Child(ctx)


def test_with_block_closes_children_newest_first() -> None:
    order: list[str] = []

    class Named(_Child):
        def __init__(self, ctx: Context, name: str) -> None:
            super().__init__(ctx)
            self.name = name

        def close(self) -> None:
            order.append(self.name)
            super().close()

    with Context() as ctx:
        Named(ctx, "first")
        Named(ctx, "second")
    assert order == ["second", "first"]
    assert ctx.closed


def test_blocking_calls_refused_from_context_thread_callbacks() -> None:
    evq = EventQueue()
    errors: list[BaseException] = []
    done = threading.Event()
    with Context() as ctx:

        def in_callback(_: Any) -> None:
            for call in (ctx.close, lambda: evq.dispatch(EventQueue.POLL), evq.close):
                try:
                    call()
                except openum.InvalidStateError as exc:
                    errors.append(exc)
            done.set()

        ctx.schedule_timer(0, in_callback)
        assert done.wait(WAIT)
        assert not ctx.closed
    assert len(errors) == 3
    assert all("callback" in str(e) for e in errors)
    evq.close()


@pytest.mark.parametrize("how", ["busy poll", "wait", "manual clock"])
def test_callbacks_run_in_the_callback_scope_however_a_sequential_context_runs(how: str) -> None:
    """process_events(0) (one iteration, entering the scope only when something is ready), process_events
    with a wait (one scope for the whole call) and process_events_at: a timer callback is a context
    callback every time, and the application's thread is not, before or after."""
    ctx = sequential() if how == "manual clock" else Context(options=["context operational_mode sequential"])
    seen: list[bool] = []
    ctx.schedule_timer(0, lambda _: seen.append(in_context_callback()))
    ctx.schedule_timer(0, lambda _: seen.append(in_context_callback()))
    for _ in range(200):
        assert not in_context_callback()
        if how == "busy poll":
            ctx.process_events(0)
        elif how == "wait":
            ctx.process_events(20)
        else:
            ctx.process_events_at(MS)
        assert not in_context_callback()
        assert ctx._loop.in_callback == 0
        if len(seen) == 2:
            break
    assert seen == [True, True]
    ctx.close()


def test_closing_while_another_thread_processes_events_is_refused() -> None:
    ctx = Context(options=["context operational_mode sequential"])
    inside = threading.Event()
    ctx.schedule_timer(0, lambda _: inside.set())
    worker = threading.Thread(target=ctx.process_events, args=(60_000,), daemon=True)
    worker.start()
    assert inside.wait(WAIT)
    with pytest.raises(openum.InvalidStateError, match="unblock"):
        ctx.close()
    ctx.unblock()
    worker.join(WAIT)
    assert not worker.is_alive()
    ctx.close()


def test_a_raising_timer_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    ctx = sequential()
    ran: list[int] = []
    ctx.schedule_timer(1, lambda _: 1 / 0)
    ctx.schedule_timer(2, ran.append, 2)
    ctx.process_events_at(5 * MS)
    assert ran == [2]
    assert any("raised" in r.getMessage() for r in caplog.records)
    ctx.close()


def test_duplicate_context_names_log_a_warning_and_both_work(caplog: pytest.LogCaptureFixture) -> None:
    messages: list[tuple[int, str]] = []
    with caplog.at_level(logging.WARNING, logger="openum"):
        a = Context(name="A", options=["context operational_mode sequential"])
        b = Context(
            name="A",
            options=["context operational_mode sequential"],
            log_callback=lambda lv, m: messages.append((lv, m)),
        )
    try:
        assert a.name == b.name == "A"
        assert any("already used" in r.getMessage() for r in caplog.records)
        assert messages and messages[0][0] == logging.WARNING and "already used" in messages[0][1]
    finally:
        a.close()
        b.close()


def test_manual_clock_requires_sequential_mode() -> None:
    with pytest.raises(openum.ConfigError, match="sequential"):
        Context(clock=ManualClock(0))
    ctx = Context(options=["context operational_mode sequential"])
    ctx.process_events(1)
    with pytest.raises(openum.InvalidStateError):
        ctx.process_events_at(5)
    ctx.close()
