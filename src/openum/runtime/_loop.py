"""The context's event loop: a poller, a timer heap and a wake-up descriptor (ARCHITECTURE.md 3).

One loop serves one context.  In embedded mode a context thread runs :meth:`EventLoop.run` until
stopped; in sequential mode the application drives it with :meth:`EventLoop.process_for` (real time)
or :meth:`EventLoop.process_at` (the caller's clock: deterministic tests and simulations).

Everything the loop calls (timer callbacks, file-descriptor callbacks, queued calls) runs inside
:func:`~openum.runtime._threads.callback_scope`, so blocking APIs refuse to run from there.  A callback
that raises is logged and the loop goes on: a bad callback never stops message delivery.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from openum._errors import InvalidStateError
from openum.runtime._clock import NS_PER_MS, Clock, ManualClock, MonotonicClock
from openum.runtime._deadline import DeadlineFd, deadline_fd
from openum.runtime._event_queue import EventKind, EventQueue
from openum.runtime._poller import default_poller
from openum.runtime._threads import callback_state as _state
from openum.runtime._timers import Timer, TimerHeap

__all__ = ["EventLoop", "FdEvent"]


class FdEvent(enum.IntFlag):
    """File-descriptor events (UM's ``LBM_FD_EVENT_*``)."""

    READ = 0x1
    WRITE = 0x2


@dataclass(slots=True)
class _FdRegistration:
    fd: int
    events: FdEvent
    callback: Callable[[int, FdEvent, Any], Any]
    clientd: Any
    event_queue: EventQueue | None
    paused: bool = False


#: Busy-wait polls between two looks at descriptors and timers while the pollers find nothing.
SPIN_ROUNDS: Final = 200


class EventLoop:
    """Timers, descriptors and cross-thread calls for one context."""

    def __init__(
        self, clock: Clock, log: logging.Logger | logging.LoggerAdapter[logging.Logger], name: str
    ) -> None:
        self.clock = clock
        self.log = log
        self.name = name
        self._lock = threading.RLock()
        self._timers = TimerHeap()
        self._poller = default_poller(FdEvent)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poller.register(self._wake_r, FdEvent.READ)
        # Waits for a timer end on this descriptor, not on the poller's timeout (see _deadline).
        self._deadline: DeadlineFd | None = deadline_fd()
        if self._deadline is not None:
            self._poller.register(self._deadline.fd, FdEvent.READ)
        self._wait = self._poller.wait
        self._fds: dict[int, _FdRegistration] = {}
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        # Busy-wait pollers (LBT-IPC busy_wait, LBT-SMX receivers): called on every iteration, which then
        # never sleeps; each returns how much work it did.
        self._spinners: list[Callable[[], int]] = []
        self._stop = False
        self._unblock = False
        self._running_thread: threading.Thread | None = None
        self._closed = False
        self.iterations = 0
        #: How many callback scopes (``callback_state.depth``) the thread running this loop entered for it:
        #: one for a whole ``run`` or ``process_for``, or around one iteration's callbacks (``_enter``).
        #: Code that runs only on the loop's thread (message delivery) reads this plain attribute to know
        #: the thread is in a callback scope already, instead of the thread-local.
        self.in_callback = 0

    @property
    def running(self) -> bool:
        """A thread is processing this loop's events now (the context thread, or a sequential-mode
        application inside ``process_events``)."""
        return self._running_thread is not None

    # -- wake-up -------------------------------------------------------------------------------------
    def wake(self) -> None:
        """Interrupt a blocked select (from any thread; a no-op on the loop's own thread)."""
        if self._running_thread is not None and threading.current_thread() is self._running_thread:
            return  # the loop re-checks its timers and calls before it selects again
        try:
            os.write(self._wake_w, b"\x00")
        except BlockingIOError:
            pass  # the pipe is full: the loop is going to wake anyway
        except OSError:
            if not self._closed:
                raise

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    # -- timers --------------------------------------------------------------------------------------
    def schedule_timer(
        self,
        delay_ms: float,
        callback: Callable[[Any], Any],
        clientd: Any = None,
        event_queue: EventQueue | None = None,
    ) -> int:
        if delay_ms < 0:
            raise ValueError(f"timer delay must be >= 0 ms, not {delay_ms}")
        deadline = self.clock.now_ns() + int(delay_ms * NS_PER_MS)
        with self._lock:
            self._check_open()
            if event_queue is not None:
                event_queue.attach(self)
            before = self._timers.next_deadline()
            timer = self._timers.schedule(deadline, callback, clientd, event_queue)
        if before is None or deadline < before:
            self.wake()
        return timer.timer_id

    def cancel_timer(self, timer_id: int) -> bool:
        """Cancel a pending timer; False if it already fired or was cancelled."""
        with self._lock:
            timer = self._timers.cancel(timer_id)
        if timer is None:
            return False
        self._release_timer(timer)
        return True

    def _release_timer(self, timer: Timer) -> None:
        if timer.event_queue is not None:
            with self._lock:
                still_used = any(t.event_queue is timer.event_queue for t in self._timers._live.values())
            if not still_used:
                timer.event_queue.detach(self)

    @property
    def pending_timers(self) -> int:
        with self._lock:
            return len(self._timers)

    def next_deadline(self) -> int | None:
        with self._lock:
            return self._timers.next_deadline()

    # -- descriptors ---------------------------------------------------------------------------------
    def register_fd(
        self,
        fd: int,
        events: FdEvent,
        callback: Callable[[int, FdEvent, Any], Any],
        clientd: Any = None,
        event_queue: EventQueue | None = None,
    ) -> None:
        if not events or events & ~(FdEvent.READ | FdEvent.WRITE):
            raise ValueError("events must be FdEvent.READ, FdEvent.WRITE or both")
        with self._lock:
            self._check_open()
            if fd in self._fds:
                raise InvalidStateError(f"file descriptor {fd} is already registered with this context")
            if event_queue is not None:
                event_queue.attach(self)
            self._fds[fd] = _FdRegistration(fd, events, callback, clientd, event_queue)
            self._poller.register(fd, int(events))
        self.wake()

    def modify_fd(self, fd: int, events: FdEvent) -> None:
        """Change which events of a registered descriptor are watched (from any thread)."""
        if not events or events & ~(FdEvent.READ | FdEvent.WRITE):
            raise ValueError("events must be FdEvent.READ, FdEvent.WRITE or both")
        with self._lock:
            reg = self._fds.get(fd)
            if reg is None:
                raise InvalidStateError(f"file descriptor {fd} is not registered with this context")
            if reg.events == events:
                return
            reg.events = events
            if not reg.paused:
                self._poller.modify(fd, int(events))
        self.wake()

    def unregister_fd(self, fd: int) -> bool:
        with self._lock:
            reg = self._fds.pop(fd, None)
            if reg is None:
                return False
            if not reg.paused:
                self._poller.unregister(fd)
            if reg.event_queue is not None and not any(
                r.event_queue is reg.event_queue for r in self._fds.values()
            ):
                reg.event_queue.detach(self)
        self.wake()
        return True

    # -- busy-wait pollers ---------------------------------------------------------------------------
    def add_spinner(self, poll: Callable[[], int]) -> None:
        """Call ``poll()`` on every iteration of the loop, which then never sleeps (busy-wait receivers,
        UM Concepts Guide 6.4.2 and 6.5: the thread runs at 100% of a CPU).  ``poll`` returns how much
        work it did (0: none); between descriptor and timer checks the loop polls up to
        :data:`SPIN_ROUNDS` times while there is none."""
        with self._lock:
            self._check_open()
            self._spinners = [*self._spinners, poll]
        self.wake()

    def remove_spinner(self, poll: Callable[[], int]) -> bool:
        with self._lock:
            if poll not in self._spinners:
                return False
            self._spinners = [p for p in self._spinners if p is not poll]
        return True

    def _spin(self, rounds: int) -> int:
        """Run the busy-wait pollers until one did work, at most ``rounds`` times."""
        spinners = self._spinners
        for _ in range(rounds):
            work = 0
            for poll in spinners:
                try:
                    work += poll()
                except Exception:
                    self.log.exception("context %s: busy-wait poller %r raised", self.name, poll)
            if work:
                return work
        return 0

    # -- cross-thread calls --------------------------------------------------------------------------
    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the loop's thread at its next iteration (from any thread)."""
        with self._lock:
            self._check_open()
            self._calls.append((callback, args))
        self.wake()

    # -- running -------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise InvalidStateError("the context's event loop is closed")

    def _invoke(self, what: str, callback: Callable[..., Any], *args: Any) -> None:
        # In the callback scope the loop entered when it started running (_enter).
        try:
            callback(*args)
        except Exception:
            self.log.exception("context %s: %s callback %r raised", self.name, what, callback)

    def run_once(self, timeout_ns: int | None) -> int:
        """One iteration: wait up to ``timeout_ns`` (None: until the next timer or a wake-up).

        Returns the number of callbacks run.
        """
        self.iterations += 1
        wait_ns = timeout_ns
        spun = 0
        if self._spinners:  # busy-wait pollers: poll them, and never sleep
            if not self.in_callback:
                _state.depth += 1
                self.in_callback += 1
                try:
                    spun = self._spin(1)
                finally:
                    self.in_callback -= 1
                    _state.depth -= 1
            else:
                spun = self._spin(1)
            wait_ns = 0
        if self._calls:  # no lock needed to peek: call_soon appends first, then wakes the poller
            wait_ns = 0
        elif wait_ns != 0:
            # The next timer bounds the wait.  A peek at the heap (heapq operations are atomic) unless a
            # cancelled timer is on top, which next_deadline() discards under the lock.
            heap = self._timers._heap
            if heap:
                try:
                    top = heap[0]
                except IndexError:  # emptied by another thread (close) since the test
                    top = None
                deadline = None if top is None else self.next_deadline() if top.cancelled else top.deadline_ns
                if deadline is not None:
                    until_timer = max(0, deadline - self.clock.now_ns())
                    if wait_ns is not None and wait_ns <= until_timer:
                        pass  # the caller's timeout ends the wait first
                    elif until_timer and self._deadline is not None and type(self.clock) is MonotonicClock:
                        # The deadline descriptor ends the wait: armed only when the deadline moves
                        # earlier (a later one is met by one early, empty wake-up), never per wait.
                        armed = self._deadline.armed_ns
                        if not armed or deadline < armed:
                            self._deadline.arm(deadline)
                        wait_ns = None
                    else:
                        wait_ns = until_timer
        events = self._wait(None if wait_ns is None else wait_ns / 1e9)  # wait_ns is None or >= 0
        if self.in_callback:  # the thread is in the callback scope for its whole run (_enter)
            return spun + self._run_ready(events)
        # A single iteration (process_events(0), a busy poll, or process_at): the scope is entered only
        # when something is ready, so that an empty poll stays cheap.
        if not events and not self._calls and not self._timer_due(self.clock.now_ns()):
            return spun
        _state.depth += 1
        self.in_callback += 1
        try:
            return spun + self._run_ready(events)
        finally:
            self.in_callback -= 1
            _state.depth -= 1

    def _run_ready(self, events: list[tuple[int, int]]) -> int:
        ran = self._fire_fds(events) if events else 0
        if self._calls:
            ran += self._run_calls()
        return ran + self._fire_timers(self.clock.now_ns())

    def _fire_fds(self, events: list[tuple[int, int]]) -> int:
        """Run the callbacks of the ready descriptors (``(fd, poller mask)`` pairs).

        The hot path of every received message: each callback called directly, in the callback scope
        the loop entered when it started running (:meth:`_enter`)."""
        fds = self._fds  # a dict read is atomic; the callbacks run outside the lock anyway
        fired = self._poller.fired
        ran = 0
        for fd, mask in events:
            reg = fds.get(fd)
            if reg is None:
                if fd == self._wake_r:
                    self._drain_wake()
                elif self._deadline is not None and fd == self._deadline.fd:
                    self._deadline.clear()  # the timers due run after the descriptors
                continue  # unregistered since the poll
            if reg.paused:
                continue
            if reg.event_queue is not None:
                ran += self._queue_fd(reg, fired[mask])
                continue
            ran += 1
            try:
                reg.callback(fd, fired[mask], reg.clientd)
            except Exception:
                self.log.exception("context %s: file descriptor callback %r raised", self.name, reg.callback)
        return ran

    def _queue_fd(self, reg: _FdRegistration, fired: FdEvent) -> int:
        """Hand a ready descriptor's callback to its event queue; 1 when queued."""
        with self._lock:
            if self._fds.get(reg.fd) is not reg or reg.paused:
                return 0
            # The descriptor stays ready until the application reads it; pause it until the queued
            # callback has run so a level-triggered descriptor does not flood the queue.
            reg.paused = True
            self._poller.unregister(reg.fd)
        assert reg.event_queue is not None
        if not reg.event_queue.enqueue(EventKind.IO, self._queued_fd_callback, reg, fired):
            self._resume_fd(reg)
        return 1

    def _queued_fd_callback(self, reg: _FdRegistration, fired: FdEvent) -> None:
        try:
            reg.callback(reg.fd, fired, reg.clientd)
        finally:
            if not self._closed:
                self.call_soon(self._resume_fd, reg)

    def _resume_fd(self, reg: _FdRegistration) -> None:
        with self._lock:
            if self._fds.get(reg.fd) is reg and reg.paused:
                reg.paused = False
                self._poller.register(reg.fd, int(reg.events))

    def _run_calls(self) -> int:
        if not self._calls:  # the common case, without taking the lock
            return 0
        ran = 0
        while True:
            with self._lock:
                if not self._calls:
                    return ran
                callback, args = self._calls.popleft()
            self._invoke("queued", callback, *args)
            ran += 1

    def _timer_due(self, now_ns: int) -> bool:
        heap = self._timers._heap
        try:
            return bool(heap) and heap[0].deadline_ns <= now_ns  # a peek; heapq ops are atomic
        except IndexError:  # emptied by another thread (close) since the test
            return False

    def _fire_timers(self, now_ns: int) -> int:
        if not self._timer_due(now_ns):
            return 0
        ran = 0
        # A timer may schedule another that is already due (a zero delay): keep going until none is.
        while True:
            with self._lock:
                due = self._timers.pop_due(now_ns)
            if not due:
                return ran
            for timer in due:
                ran += 1
                if timer.event_queue is not None:
                    timer.event_queue.enqueue(EventKind.TIMER, timer.callback, timer.clientd)
                    self._release_timer(timer)
                else:
                    self._invoke("timer", timer.callback, timer.clientd)

    def _enter(self, scope: bool = True) -> None:
        """This thread starts running the loop.  Everything the loop runs from here to :meth:`_leave` is a
        context callback, so for a run of many iterations (``scope``) the thread enters the callback scope
        once (``callback_scope()``, inlined), not around each iteration's callbacks: reading or writing a
        thread-local attribute costs about 500 instructions, and each scope takes four (over 2,000
        instructions per received message in a round trip).  A single iteration enters it in
        :meth:`run_once`, only when something is ready."""
        self._running_thread = threading.current_thread()
        if scope:
            _state.depth += 1
            self.in_callback += 1

    def _leave(self, scope: bool = True) -> None:
        if scope:
            self.in_callback -= 1
            _state.depth -= 1
        self._running_thread = None

    def run(self) -> None:
        """Run until :meth:`stop` (the embedded-mode context thread)."""
        self._enter()
        try:
            while not self._stop:
                if self._spinners:
                    self._spin(SPIN_ROUNDS)
                self.run_once(None)
            # stop() may land while a callback runs: calls queued before it (the context's cleanup when it
            # closes) must still run, so drain them, including calls they queue themselves.
            while self._run_calls():
                pass
        finally:
            self._leave()

    def process_for(self, msec: int) -> int:
        """Sequential mode: run for ``msec`` milliseconds of the loop's clock, or until :meth:`unblock`."""
        if msec <= 0:
            if msec < 0:
                raise ValueError(f"process_events needs msec >= 0, not {msec}")
            # process_events(0), a busy-waiting application's poll: one iteration that does not wait.
            self._enter(scope=False)
            try:
                return self.run_once(0)
            finally:
                self._leave(scope=False)
                self._unblock = False
        end = self.clock.now_ns() + msec * NS_PER_MS
        ran = 0
        self._unblock = False
        self._enter()
        try:
            while True:
                remaining = end - self.clock.now_ns()
                ran += self.run_once(max(0, remaining))
                if self._unblock or self._stop:
                    self._unblock = False
                    return ran
                if self.clock.now_ns() >= end:
                    return ran
        finally:
            self._leave()

    def process_at(self, now_ns: int) -> int:
        """Sequential mode on the caller's clock: move a :class:`ManualClock` to ``now_ns`` and run every
        ready descriptor, queued call and due timer without waiting."""
        if not isinstance(self.clock, ManualClock):
            raise InvalidStateError("process_at() needs a context created with a manual clock")
        self.clock.set(now_ns)
        self._enter(scope=False)
        try:
            return self.run_once(0)
        finally:
            self._leave(scope=False)

    @property
    def running_thread(self) -> threading.Thread | None:
        return self._running_thread

    def unblock(self) -> None:
        """Make a running ``process_for`` return early (``lbm_context_unblock``)."""
        self._unblock = True
        self.wake()

    def stop(self) -> None:
        self._stop = True
        self.wake()

    def close(self) -> list[Timer]:
        """Release the poller and pipe; returns the timers that never fired."""
        with self._lock:
            if self._closed:
                return []
            self._closed = True
            pending = self._timers.clear()
            queues = {id(t.event_queue): t.event_queue for t in pending if t.event_queue is not None}
            queues.update({id(r.event_queue): r.event_queue for r in self._fds.values() if r.event_queue})
            self._fds.clear()
            self._calls.clear()
        for queue in queues.values():
            if queue is not None:
                queue.detach(self)
        self._poller.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        if self._deadline is not None:
            self._deadline.close()
        return pending
