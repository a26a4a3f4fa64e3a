"""The event queue (seed 3.5): moves callbacks from context threads to the application's threads.

Behaviour reproduced exactly from seed 3.5.1-3.5.4:

- unbounded, non-blocking enqueue; thresholds never stop enqueueing;
- ``dispatch(EventQueue.BLOCK)`` returns only when :meth:`EventQueue.unblock` is called;
- ``dispatch(EventQueue.POLL)`` processes exactly one queued event, or none, and returns at once;
- ``dispatch(msec)``: msec is a *minimum*: wait (unbounded) for an event, process it, then return if
  msec have passed, otherwise wait for the next event; with no further events it waits until
  ``unblock()``;
- dispatch returns the number of events processed;
- the monitor callback ``monitor(evq, event, evq_size, evq_delay_usec, clientd)`` is called at dequeue
  time, in the dispatching thread, with a bitmap of ``SIZE_WARNING``/``DELAY_WARNING`` when the queue
  size after the dequeue exceeds ``queue_size_warning`` or the event waited longer than
  ``queue_delay_warning`` microseconds; with ``queue_enqueue_notification`` it is also called on every
  enqueue with ``ENQUEUE_NOTIFICATION``, size 1 and delay 0.

Statistics (``lbm_event_queue_retrieve_stats``, UM Concepts Guide, section 3.5.1) cost time on every
event, so, as in UM, each group is kept only when its option is 1 (all are 0 by default):
``queue_count_enabled`` the counts by kind, ``queue_age_enabled`` the time events wait in the queue,
``queue_service_time_enabled`` the time their callbacks take.  Events discarded by ``shutdown()`` or
``close()`` are always counted (``dropped_tot``): nothing is lost without a trace.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from openum._errors import ClosedError, InvalidStateError
from openum.config import ENV_POLICY, REGISTRY, Config, EventQueueAttributes, default_config
from openum.runtime._threads import callback_scope, forbid_in_callback

__all__ = ["EventKind", "EventQueue", "EventQueueStatistics", "QueueMonitorEvent"]

log = logging.getLogger("openum.event_queue")


class QueueMonitorEvent(enum.IntFlag):
    """The ``event`` argument of the monitor callback (``LBM_EVENT_QUEUE_*``)."""

    SIZE_WARNING = 0x1
    DELAY_WARNING = 0x2
    ENQUEUE_NOTIFICATION = 0x4


class EventKind(enum.Enum):
    """What an event carries; counted separately in the statistics (UM's per-type counters).

    Only the kinds openum delivers: UM's context source event kind comes with context source events."""

    DATA = "data_msgs"  # a receiver's messages and events
    RESPONSE = "resp_msgs"  # a response to one of this context's requests (seed 10.12)
    TOPICLESS_IM = "topicless_im_msgs"  # a topicless immediate message (seed 10.7.3, 10.8.2)
    WILDCARD_RECEIVER = "wrcv_msgs"  # a wildcard receiver's messages and events
    IO = "io_events"  # an application descriptor became ready (Context.register_fd)
    TIMER = "timer_events"  # an application timer fired (Context.schedule_timer)
    SOURCE = "source_events"  # a source's CONNECT, DISCONNECT, WAKEUP... events
    CALLBACK = "callback_events"  # EventQueue.call()
    UNBLOCK = "unblock_events"  # EventQueue.unblock() (runs no callback)


@dataclass(frozen=True, slots=True)
class EventQueueStatistics:
    """A snapshot of an event queue's counters (UM's ``lbm_event_queue_stats_t`` names).

    With ``queue_count_enabled``: for each kind, ``<kind>`` is the number queued now and ``<kind>_tot``
    the total enqueued: ``data_msgs`` receiver messages and events, ``wrcv_msgs`` wildcard receiver
    messages and events, ``io_events`` descriptor callbacks, ``timer_events`` timer callbacks,
    ``source_events`` source events, ``resp_msgs`` responses to requests, ``topicless_im_msgs`` topicless
    immediate messages (and those with a topic no receiver took), ``callback_events``
    :meth:`EventQueue.call` callbacks,
    ``unblock_events`` :meth:`EventQueue.unblock` calls (queued: not yet consumed by a ``dispatch``).
    ``events``/``events_tot``: every kind but unblocks.  With ``queue_age_enabled``: ``age_min/mean/max``,
    how long dispatched events waited in the queue, in microseconds.  With ``queue_service_time_enabled``:
    ``data_msgs_svc_*``, ``wrcv_msgs_svc_*``, ``timer_events_svc_*`` (min/mean/max): how long their
    callbacks ran, in microseconds.  Always: ``dropped_tot``, events discarded by ``shutdown()`` or
    ``close()``, or refused after them.
    """

    events: int
    events_tot: int
    age_min: int
    age_mean: int
    age_max: int
    data_msgs: int
    data_msgs_tot: int
    data_msgs_svc_min: int
    data_msgs_svc_mean: int
    data_msgs_svc_max: int
    wrcv_msgs: int
    wrcv_msgs_tot: int
    wrcv_msgs_svc_min: int
    wrcv_msgs_svc_mean: int
    wrcv_msgs_svc_max: int
    io_events: int
    io_events_tot: int
    timer_events: int
    timer_events_tot: int
    timer_events_svc_min: int
    timer_events_svc_mean: int
    timer_events_svc_max: int
    source_events: int
    source_events_tot: int
    resp_msgs: int
    resp_msgs_tot: int
    topicless_im_msgs: int
    topicless_im_msgs_tot: int
    callback_events: int
    callback_events_tot: int
    unblock_events: int
    unblock_events_tot: int
    dropped_tot: int


class _MinMeanMax:
    __slots__ = ("count", "max", "min", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0
        self.min = 0
        self.max = 0

    def add(self, value: int) -> None:
        if self.count == 0 or value < self.min:
            self.min = value
        self.max = max(self.max, value)
        self.count += 1
        self.total += value

    @property
    def mean(self) -> int:
        return self.total // self.count if self.count else 0


_KINDS: Final = tuple(EventKind)
#: The kinds whose callback service time is measured (UM's ``*_svc_min/mean/max``).
_TIMED: Final = (EventKind.DATA, EventKind.WILDCARD_RECEIVER, EventKind.TIMER)

MonitorCallback = Callable[["EventQueue", QueueMonitorEvent, int, int, Any], Any]


class EventQueue:
    """An unbounded queue of callbacks run by :meth:`dispatch` on the application's thread(s).

    ``EventQueue(monitor=None, clientd=None, attrs=None, config=None, name=None)``: ``attrs`` is an
    :class:`~openum.config.EventQueueAttributes` or a mapping of event-queue options
    (``queue_size_warning``, ``queue_delay_warning``, ``queue_enqueue_notification``,
    ``queue_count_enabled``, ``queue_age_enabled``, ``queue_service_time_enabled``); ``name`` selects an
    ``<event-queue>`` of an XML configuration.
    """

    BLOCK: Final = -1
    POLL: Final = 0

    def __init__(
        self,
        monitor: MonitorCallback | None = None,
        clientd: Any = None,
        attrs: EventQueueAttributes | Mapping[str, Any] | None = None,
        *,
        config: Config | None = None,
        name: str | None = None,
    ) -> None:
        cfg = config if config is not None else default_config()
        self.attributes = cfg.attributes("event_queue", event_queue=name, overrides=attrs)
        self.name = name
        for (
            opt,
            value,
            origin,
        ) in self.attributes.unimplemented():  # let through: OPENUM_UNIMPLEMENTED_OPTIONS
            log.warning(
                "event queue %s: %s (set in %s; let through by %s=warn)",
                name or "(unnamed)",
                REGISTRY.unimplemented_text("event_queue", opt, value),
                origin,
                ENV_POLICY,
            )
        self._monitor = monitor
        self._monitor_clientd = clientd
        self._size_warning: int = self.attributes.get("queue_size_warning")
        self._delay_warning_us: int = self.attributes.get("queue_delay_warning")
        self._enqueue_notification: bool = self.attributes.get("queue_enqueue_notification")
        self._count: bool = self.attributes.get("queue_count_enabled")
        self._measure_age: bool = self.attributes.get("queue_age_enabled")
        self._measure_svc: bool = self.attributes.get("queue_service_time_enabled")
        # Enqueue times are read only when something uses them: ages, or the delay warning.
        self._stamp = self._measure_age or self._delay_warning_us > 0
        if (self._size_warning or self._delay_warning_us or self._enqueue_notification) and monitor is None:
            log.warning(
                "event queue %s: monitor thresholds are set but no monitor callback was given",
                name or "(unnamed)",
            )
        self._queue: deque[tuple[EventKind, Callable[..., Any], tuple[Any, ...], int]] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._unblock_pending = 0
        self._closed = False
        self._shut_down = False
        self._users: dict[int, Any] = {}
        self._dispatchers = 0
        self._queued = dict.fromkeys(_KINDS, 0)
        self._totals = dict.fromkeys(_KINDS, 0)
        self._age = _MinMeanMax()
        self._svc = {kind: _MinMeanMax() for kind in _TIMED}
        self._dropped = 0

    # -- producers (any thread) ------------------------------------------------------------------------
    def enqueue(self, kind: EventKind, callback: Callable[..., Any], *args: Any) -> bool:
        """Queue ``callback(*args)``; never blocks.  False if the queue was shut down (event dropped)."""
        with self._cond:
            if self._shut_down or self._closed:
                self._dropped += 1
                return False
            self._queue.append((kind, callback, args, time.monotonic_ns() if self._stamp else 0))
            if self._count:
                self._queued[kind] += 1
                self._totals[kind] += 1
            self._cond.notify()
        if self._enqueue_notification and self._monitor is not None:
            self._call_monitor(QueueMonitorEvent.ENQUEUE_NOTIFICATION, 1, 0)
        return True

    def call(self, callback: Callable[..., Any], *args: Any) -> bool:
        """Queue an application callback (a ``CALLBACK`` event)."""
        return self.enqueue(EventKind.CALLBACK, callback, *args)

    # -- consumers -------------------------------------------------------------------------------------
    def dispatch(self, timeout: int = BLOCK) -> int:
        """Run queued events on this thread; return how many ran (see the module docstring).

        ``timeout``: :attr:`BLOCK` (-1), :attr:`POLL` (0), or milliseconds (a minimum, not a maximum).
        """
        forbid_in_callback("EventQueue.dispatch()")
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < -1:
            raise ValueError(
                f"dispatch timeout must be EventQueue.BLOCK (-1), EventQueue.POLL (0) or a "
                f"positive number of milliseconds, not {timeout!r}"
            )
        if self._closed:
            raise ClosedError("dispatch() on a closed event queue")
        count = 0
        start = time.monotonic_ns()
        with self._cond:
            self._dispatchers += 1
        try:
            while True:
                with self._cond:
                    if timeout == self.POLL:
                        if not self._queue or self._shut_down:
                            return count
                    else:
                        while not self._queue and not self._unblock_pending and not self._shut_down:
                            self._cond.wait()
                        if self._unblock_pending:
                            self._unblock_pending -= 1
                            return count
                        if self._shut_down:
                            return count
                    kind, callback, args, t_enq = self._queue.popleft()
                    if self._count:
                        self._queued[kind] -= 1
                    size_after = len(self._queue)
                delay_us = 0
                if self._stamp:
                    delay_us = (time.monotonic_ns() - t_enq) // 1000
                    if self._measure_age:
                        with self._cond:
                            self._age.add(delay_us)
                self._check_thresholds(size_after, delay_us)
                self._run(kind, callback, args)
                count += 1
                if timeout == self.POLL:
                    return count
                if timeout > 0 and time.monotonic_ns() - start >= timeout * 1_000_000:
                    return count
        finally:
            with self._cond:
                self._dispatchers -= 1

    def _run(self, kind: EventKind, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        measure = self._measure_svc and kind in _TIMED
        t0 = time.monotonic_ns() if measure else 0
        try:
            callback(*args)
        except Exception:
            # An application callback's error must not kill the dispatch loop (UM ignores the
            # callback's return value too); it is logged with its traceback.
            log.exception("event queue %s: callback %r raised", self.name or "(unnamed)", callback)
        finally:
            if measure:
                elapsed_us = (time.monotonic_ns() - t0) // 1000
                with self._cond:
                    self._svc[kind].add(elapsed_us)

    def _check_thresholds(self, size: int, delay_us: int) -> None:
        if self._monitor is None:
            return
        bits = QueueMonitorEvent(0)
        if self._size_warning and size > self._size_warning:
            bits |= QueueMonitorEvent.SIZE_WARNING
        if self._delay_warning_us and delay_us > self._delay_warning_us:
            bits |= QueueMonitorEvent.DELAY_WARNING
        if bits:
            self._call_monitor(bits, size, delay_us)

    def _call_monitor(self, event: QueueMonitorEvent, size: int, delay_us: int) -> None:
        assert self._monitor is not None
        try:
            with callback_scope():
                self._monitor(self, event, size, delay_us, self._monitor_clientd)
        except Exception:
            log.exception("event queue %s: monitor callback raised", self.name or "(unnamed)")

    def unblock(self) -> None:
        """Make one blocked (or the next) ``dispatch()`` return (``lbm_event_dispatch_unblock``)."""
        with self._cond:
            self._unblock_pending += 1
            if self._count:
                self._totals[EventKind.UNBLOCK] += 1
            self._cond.notify_all()

    def size(self) -> int:
        """Number of events queued now (``lbm_event_queue_size``)."""
        with self._cond:
            return len(self._queue)

    def shutdown(self) -> int:
        """Discard every queued event and refuse new ones (``lbm_event_queue_shutdown``).

        Blocked dispatchers return.  Returns how many events were discarded.  Risky, as in UM: the
        discarded events' callbacks never run.
        """
        with self._cond:
            dropped = len(self._queue)
            self._queue.clear()
            self._queued = dict.fromkeys(_KINDS, 0)
            self._dropped += dropped
            self._shut_down = True
            self._cond.notify_all()
        return dropped

    # -- statistics ------------------------------------------------------------------------------------
    def statistics(self) -> EventQueueStatistics:
        with self._cond:
            q, t = self._queued, self._totals
            svc = self._svc
            data, wrcv, timer = svc[EventKind.DATA], svc[EventKind.WILDCARD_RECEIVER], svc[EventKind.TIMER]
            return EventQueueStatistics(
                events=sum(q.values()),
                events_tot=sum(v for k, v in t.items() if k is not EventKind.UNBLOCK),
                age_min=self._age.min,
                age_mean=self._age.mean,
                age_max=self._age.max,
                data_msgs=q[EventKind.DATA],
                data_msgs_tot=t[EventKind.DATA],
                data_msgs_svc_min=data.min,
                data_msgs_svc_mean=data.mean,
                data_msgs_svc_max=data.max,
                wrcv_msgs=q[EventKind.WILDCARD_RECEIVER],
                wrcv_msgs_tot=t[EventKind.WILDCARD_RECEIVER],
                wrcv_msgs_svc_min=wrcv.min,
                wrcv_msgs_svc_mean=wrcv.mean,
                wrcv_msgs_svc_max=wrcv.max,
                io_events=q[EventKind.IO],
                io_events_tot=t[EventKind.IO],
                timer_events=q[EventKind.TIMER],
                timer_events_tot=t[EventKind.TIMER],
                timer_events_svc_min=timer.min,
                timer_events_svc_mean=timer.mean,
                timer_events_svc_max=timer.max,
                source_events=q[EventKind.SOURCE],
                source_events_tot=t[EventKind.SOURCE],
                resp_msgs=q[EventKind.RESPONSE],
                resp_msgs_tot=t[EventKind.RESPONSE],
                topicless_im_msgs=q[EventKind.TOPICLESS_IM],
                topicless_im_msgs_tot=t[EventKind.TOPICLESS_IM],
                callback_events=q[EventKind.CALLBACK],
                callback_events_tot=t[EventKind.CALLBACK],
                unblock_events=self._unblock_pending if self._count else 0,
                unblock_events_tot=t[EventKind.UNBLOCK],
                dropped_tot=self._dropped,
            )

    def reset_statistics(self) -> None:
        """Zero the totals and min/mean/max (``lbm_event_queue_reset_stats``); queued counts stay."""
        with self._cond:
            self._totals = dict.fromkeys(_KINDS, 0)
            self._age = _MinMeanMax()
            self._svc = {kind: _MinMeanMax() for kind in _TIMED}
            self._dropped = 0

    # -- lifetime (seed 3.0 step 7) --------------------------------------------------------------------
    def attach(self, user: Any) -> None:
        """Record that ``user`` (a receiver, source, timer, context...) delivers through this queue."""
        with self._cond:
            if self._closed:
                raise ClosedError("this event queue is closed; create objects with an open queue")
            self._users[id(user)] = user

    def detach(self, user: Any) -> None:
        with self._cond:
            self._users.pop(id(user), None)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Delete the queue (``lbm_event_queue_delete``).

        Refused while objects that deliver through it are open, or while a thread is dispatching:
        close them, ``unblock()`` and join the dispatch thread first (seed 3.0, 3.5.1).
        """
        forbid_in_callback("EventQueue.close()")
        with self._cond:
            if self._closed:
                return
            if self._users:
                names = ", ".join(sorted({type(u).__name__ for u in self._users.values()}))
                raise InvalidStateError(
                    f"cannot close an event queue still used by {len(self._users)} open object(s) ({names}); "
                    f"close them first (seed 3.0: event queues are deleted last)"
                )
            if self._dispatchers:
                raise InvalidStateError(
                    "cannot close an event queue while a thread is in dispatch(); call unblock() and join "
                    "the dispatching thread first (seed 3.5.1)"
                )
            self._closed = True
            dropped = len(self._queue)
            self._queue.clear()
            self._queued = dict.fromkeys(_KINDS, 0)
            self._dropped += dropped

    def __enter__(self) -> EventQueue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self.size()} queued"
        return f"<EventQueue {self.name or '(unnamed)'} {state}>"
