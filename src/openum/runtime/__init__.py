"""The runtime: clocks, timers, the context event loop and the event queue (ARCHITECTURE.md 3)."""

from openum.runtime._clock import NS_PER_MS, Clock, ManualClock, MonotonicClock
from openum.runtime._event_queue import EventKind, EventQueue, EventQueueStatistics, QueueMonitorEvent
from openum.runtime._loop import EventLoop, FdEvent
from openum.runtime._threads import callback_scope, callback_state, forbid_in_callback, in_context_callback
from openum.runtime._timers import Timer, TimerHeap

__all__ = [
    "NS_PER_MS",
    "Clock",
    "EventKind",
    "EventLoop",
    "EventQueue",
    "EventQueueStatistics",
    "FdEvent",
    "ManualClock",
    "MonotonicClock",
    "QueueMonitorEvent",
    "Timer",
    "TimerHeap",
    "callback_scope",
    "callback_state",
    "forbid_in_callback",
    "in_context_callback",
]
