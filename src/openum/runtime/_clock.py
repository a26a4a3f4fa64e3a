"""Clocks: the runtime reads time only through these (PRACTICES.md 4).

``MonotonicClock`` is the real clock; ``ManualClock`` is advanced by its owner: a sequential-mode
context driven with ``process_events_at(now_ns)`` or a simulation (``openum.testing.FakeClock``).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol

__all__ = ["NS_PER_MS", "Clock", "ManualClock", "MonotonicClock"]

NS_PER_MS = 1_000_000


class Clock(Protocol):
    def now_ns(self) -> int:
        """Monotonic time in nanoseconds."""
        ...


class MonotonicClock:
    """``time.monotonic_ns()``."""

    __slots__ = ()

    # The C function itself, not a method wrapping it: the send and receive paths read the clock once
    # per message or read, and a Python frame around it cost about as much as the call.
    now_ns = staticmethod(time.monotonic_ns)


class ManualClock:
    """A clock that only moves when told to; never goes backwards."""

    __slots__ = ("_lock", "_now")

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._lock = threading.Lock()

    def now_ns(self) -> int:
        return self._now

    def set(self, now_ns: int) -> None:
        with self._lock:
            if now_ns < self._now:
                raise ValueError(f"time cannot go backwards: {now_ns} < {self._now} ns")
            self._now = now_ns

    def advance(self, delta_ns: int) -> int:
        if delta_ns < 0:
            raise ValueError("cannot advance by a negative duration")
        with self._lock:
            self._now += delta_ns
            return self._now
