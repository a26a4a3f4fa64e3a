"""EventQueue semantics of seed 3.5.1-3.5.4 (dispatch modes, unblock, monitor bitmap, statistics)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import openum
from openum import EventQueue, QueueMonitorEvent
from openum.runtime import EventKind

WAIT = 5.0  # generous upper bound for events that must happen


def _dispatch_in_thread(evq: EventQueue, timeout: int) -> tuple[threading.Thread, threading.Event, list[int]]:
    done = threading.Event()
    result: list[int] = []

    def run() -> None:
        result.append(evq.dispatch(timeout))
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, done, result


def test_poll_dispatches_exactly_one_event() -> None:
    evq = EventQueue()
    ran: list[int] = []
    for i in range(3):
        evq.call(ran.append, i)
    assert evq.dispatch(EventQueue.POLL) == 1
    assert ran == [0]
    assert evq.size() == 2
    assert evq.dispatch(EventQueue.POLL) == 1
    assert evq.dispatch(EventQueue.POLL) == 1
    assert evq.dispatch(EventQueue.POLL) == 0  # empty: returns at once
    assert ran == [0, 1, 2]
    evq.close()


def test_block_runs_events_until_unblock_and_counts_them() -> None:
    evq = EventQueue()
    seen = threading.Event()
    ran: list[str] = []
    thread, done, result = _dispatch_in_thread(evq, EventQueue.BLOCK)
    evq.call(ran.append, "a")
    evq.call(lambda: (ran.append("b"), seen.set()))
    assert seen.wait(WAIT)
    assert not done.wait(0.2), "BLOCK dispatch returned without unblock()"
    evq.unblock()
    assert done.wait(WAIT)
    thread.join(WAIT)
    assert result == [2] and ran == ["a", "b"]
    assert evq.statistics().unblock_events_tot == 1
    evq.close()


def test_timeout_is_a_minimum_not_a_maximum() -> None:
    evq = EventQueue()
    thread, done, result = _dispatch_in_thread(evq, 100)
    # No event arrives: dispatch(100 ms) waits for one, well past 100 ms, until unblocked.
    assert not done.wait(0.4)
    evq.unblock()
    assert done.wait(WAIT)
    thread.join(WAIT)
    assert result == [0]
    # With events waiting, it processes one, sees that 100 ms have not passed, processes more...
    gate = threading.Event()
    count = threading.Event()
    evq.call(gate.wait, 0.15)  # the first handler takes longer than the timeout
    evq.call(count.set)
    n = evq.dispatch(100)
    assert n == 1, "dispatch must return after the first event once the minimum time has passed"
    assert evq.dispatch(EventQueue.POLL) == 1 and count.is_set()
    evq.close()


def test_timeout_keeps_dispatching_before_the_minimum_has_passed() -> None:
    evq = EventQueue()
    for _ in range(5):
        evq.call(lambda: None)
    stop = threading.Timer(0.5, evq.unblock)
    stop.start()
    try:
        n = evq.dispatch(60_000)  # one minute minimum: returns only through unblock()
    finally:
        stop.cancel()
    assert n == 5


def test_size_warning_monitor_with_bitmap() -> None:
    calls: list[tuple[Any, ...]] = []

    def monitor(q: EventQueue, event: QueueMonitorEvent, size: int, delay: int, clientd: Any) -> None:
        calls.append((q, event, size, delay, clientd))

    evq = EventQueue(monitor, "cd", {"queue_size_warning": 100})
    for _ in range(500):
        evq.call(lambda: None)
    while evq.dispatch(EventQueue.POLL):
        pass
    assert len(calls) == 399  # once per dequeue while more than 100 remain
    assert all(c[0] is evq and c[4] == "cd" for c in calls)
    assert all(c[1] & QueueMonitorEvent.SIZE_WARNING for c in calls)
    assert all(c[2] > 100 for c in calls)
    assert [c[2] for c in calls[:3]] == [499, 498, 497]
    evq.close()


def test_delay_warning_monitor_with_bitmap() -> None:
    calls: list[tuple[QueueMonitorEvent, int, int]] = []
    evq = EventQueue(lambda q, e, s, d, c: calls.append((e, s, d)), None, {"queue_delay_warning": 1000})
    evq.call(lambda: None)
    threading.Event().wait(0.02)  # let the event age 20 ms in the queue (> 1000 us)
    assert evq.dispatch(EventQueue.POLL) == 1
    assert len(calls) == 1
    event, size, delay_us = calls[0]
    assert event == QueueMonitorEvent.DELAY_WARNING
    assert not event & QueueMonitorEvent.SIZE_WARNING
    assert size == 0 and delay_us >= 1000
    evq.close()


def test_both_warnings_in_one_bitmap() -> None:
    calls: list[QueueMonitorEvent] = []
    evq = EventQueue(
        lambda q, e, s, d, c: calls.append(e), None, {"queue_size_warning": 1, "queue_delay_warning": 1000}
    )
    for _ in range(3):
        evq.call(lambda: None)
    threading.Event().wait(0.02)
    evq.dispatch(EventQueue.POLL)
    assert calls == [QueueMonitorEvent.SIZE_WARNING | QueueMonitorEvent.DELAY_WARNING]
    evq.shutdown()
    evq.close()


def test_enqueue_notification_on_every_enqueue() -> None:
    calls: list[tuple[QueueMonitorEvent, int, int]] = []
    evq = EventQueue(lambda q, e, s, d, c: calls.append((e, s, d)), None, {"queue_enqueue_notification": 1})
    for _ in range(4):
        evq.call(lambda: None)
    assert calls == [(QueueMonitorEvent.ENQUEUE_NOTIFICATION, 1, 0)] * 4
    evq.shutdown()
    evq.close()


def test_shutdown_discards_and_refuses() -> None:
    evq = EventQueue()
    ran: list[int] = []
    for i in range(3):
        evq.call(ran.append, i)
    assert evq.shutdown() == 3
    assert evq.size() == 0
    assert evq.call(ran.append, 9) is False
    assert evq.dispatch(EventQueue.BLOCK) == 0  # a shut-down queue never blocks
    assert ran == []
    assert evq.statistics().dropped_tot == 4
    evq.close()


def test_statistics_count_by_kind_and_reset() -> None:
    evq = EventQueue()
    evq.enqueue(EventKind.DATA, lambda: None)
    evq.enqueue(EventKind.TIMER, lambda: None)
    evq.call(lambda: None)
    stats = evq.statistics()
    assert (stats.events, stats.events_tot, stats.data_msgs, stats.timer_events, stats.callback_events) == (
        3,
        3,
        1,
        1,
        1,
    )
    assert evq.dispatch(EventQueue.POLL) == 1
    stats = evq.statistics()
    assert stats.data_msgs == 0 and stats.data_msgs_tot == 1 and stats.events == 2
    evq.reset_statistics()
    assert evq.statistics().events_tot == 0 and evq.statistics().events == 2
    evq.shutdown()
    evq.close()


def test_a_raising_callback_does_not_stop_dispatch(caplog: pytest.LogCaptureFixture) -> None:
    evq = EventQueue()
    ran: list[int] = []
    evq.call(lambda: 1 / 0)
    evq.call(ran.append, 1)
    assert evq.dispatch(EventQueue.POLL) == 1
    assert evq.dispatch(EventQueue.POLL) == 1
    assert ran == [1]
    assert any("raised" in r.getMessage() for r in caplog.records)
    evq.close()


def test_close_refused_while_referenced_or_dispatching() -> None:
    evq = EventQueue()
    user = object()
    evq.attach(user)
    with pytest.raises(openum.InvalidStateError, match="still used"):
        evq.close()
    evq.detach(user)
    thread, done, _ = _dispatch_in_thread(evq, EventQueue.BLOCK)
    try:
        for _ in range(100):  # wait until the thread is inside dispatch
            if evq._dispatchers:
                break
            done.wait(0.01)
        with pytest.raises(openum.InvalidStateError, match="dispatch"):
            evq.close()
    finally:
        evq.unblock()
        thread.join(WAIT)
    evq.close()
    assert evq.closed
    with pytest.raises(openum.ClosedError):
        evq.dispatch(EventQueue.POLL)


def test_bad_timeout_is_refused() -> None:
    evq = EventQueue()
    with pytest.raises(ValueError, match="BLOCK"):
        evq.dispatch(-5)
    evq.close()


def test_event_queue_options_from_configuration() -> None:
    config = openum.Config({"event_queue": {"queue_size_warning": 7}})
    evq = EventQueue(config=config)
    assert evq.attributes.get("queue_size_warning") == 7
    evq.close()
    with pytest.raises(openum.ConfigError):
        EventQueue(attrs={"queue_size_warning": -1})
