"""EventQueue semantics of seed 3.5.1-3.5.4 (dispatch modes, unblock, monitor bitmap, statistics)."""

from __future__ import annotations

import threading
import time
from dataclasses import asdict
from typing import Any

import pytest

import openum
from openum import EventQueue, QueueMonitorEvent
from openum.runtime import EventKind

WAIT = 5.0  # generous upper bound for events that must happen
#: Every statistics group on (each is off by default, as in UM).
ALL_STATS = {"queue_count_enabled": 1, "queue_age_enabled": 1, "queue_service_time_enabled": 1}


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
    evq = EventQueue(attrs={"queue_count_enabled": 1})
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
    evq = EventQueue(attrs={"queue_count_enabled": 1})
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


def _spin(us: int) -> None:
    """Take at least ``us`` microseconds: a callback with a known minimum service time."""
    end = time.monotonic_ns() + us * 1000
    while time.monotonic_ns() < end:
        pass


def _run_all(evq: EventQueue) -> int:
    ran = 0
    while evq.dispatch(EventQueue.POLL):
        ran += 1
    return ran


def _fill(evq: EventQueue) -> None:
    """One event of each kind an application can queue directly, the first two slow."""
    evq.enqueue(EventKind.DATA, _spin, 1000)
    evq.enqueue(EventKind.WILDCARD_RECEIVER, _spin, 2000)
    evq.enqueue(EventKind.TIMER, _spin, 0)
    evq.enqueue(EventKind.IO, _spin, 0)
    evq.enqueue(EventKind.SOURCE, _spin, 0)
    evq.call(_spin, 0)


def test_statistics_are_kept_only_when_their_option_is_set() -> None:
    # queue_count_enabled, queue_age_enabled and queue_service_time_enabled are 0 by default: the
    # counters stay at 0 while events run, except events discarded, which are always counted.
    evq = EventQueue()
    _fill(evq)
    assert _run_all(evq) == 6
    evq.unblock()
    _fill(evq)
    evq.shutdown()
    stats = evq.statistics()
    assert stats.dropped_tot == 6
    assert {name: value for name, value in asdict(stats).items() if value} == {"dropped_tot": 6}
    evq.close()


def test_counts_by_kind_with_queue_count_enabled() -> None:
    evq = EventQueue(attrs={"queue_count_enabled": 1})
    _fill(evq)
    evq.unblock()  # nobody dispatches: it stays queued
    queued = evq.statistics()
    for kind in ("data_msgs", "wrcv_msgs", "timer_events", "io_events", "source_events", "callback_events"):
        assert (getattr(queued, kind), getattr(queued, f"{kind}_tot")) == (1, 1), kind
    assert (queued.events, queued.events_tot) == (6, 6)
    assert (queued.unblock_events, queued.unblock_events_tot) == (1, 1)
    assert evq.dispatch(EventQueue.BLOCK) == 0  # the pending unblock: returns at once
    assert (evq.statistics().unblock_events, evq.statistics().unblock_events_tot) == (0, 1)
    assert _run_all(evq) == 6
    done = evq.statistics()
    assert (done.events, done.events_tot, done.wrcv_msgs, done.wrcv_msgs_tot) == (0, 6, 0, 1)
    # Nothing else was asked for.
    assert done.age_max == done.data_msgs_svc_max == done.wrcv_msgs_svc_max == 0
    evq.close()


def test_ages_and_service_times_when_enabled() -> None:
    evq = EventQueue(attrs=ALL_STATS)
    _fill(evq)
    assert _run_all(evq) == 6
    stats = evq.statistics()
    # The events behind the two slow callbacks waited at least 3 ms; the first hardly at all.
    assert stats.age_max >= 3000
    assert stats.age_min <= stats.age_mean <= stats.age_max
    assert stats.data_msgs_svc_min >= 1000 and stats.data_msgs_svc_max >= 1000
    assert stats.wrcv_msgs_svc_min >= 2000 and stats.wrcv_msgs_svc_mean >= 2000
    assert stats.timer_events_svc_min <= stats.timer_events_svc_max
    evq.reset_statistics()
    reset = evq.statistics()
    assert reset.age_max == reset.data_msgs_svc_max == reset.wrcv_msgs_svc_max == reset.events_tot == 0
    evq.close()


def test_close_discards_what_is_queued_and_counts_it() -> None:
    evq = EventQueue(attrs={"queue_count_enabled": 1})
    _fill(evq)
    evq.close()
    stats = evq.statistics()
    assert (stats.dropped_tot, stats.events, stats.data_msgs) == (6, 0, 0)
    assert evq.enqueue(EventKind.DATA, _spin, 0) is False
    assert evq.statistics().dropped_tot == 7


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
