"""A timer heap (the context's ``lbm_schedule_timer`` / ``lbm_cancel_timer``), pure and clock-free.

Timers are one-shot; a callback may schedule the next one.  Ties fire in scheduling order.
Cancellation is lazy: a cancelled entry stays in the heap until it reaches the top.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Timer", "TimerHeap"]


@dataclass(order=True, slots=True)
class Timer:
    deadline_ns: int
    seq: int
    timer_id: int = field(compare=False)
    callback: Callable[[Any], Any] = field(compare=False)
    clientd: Any = field(compare=False, default=None)
    event_queue: Any = field(compare=False, default=None)
    cancelled: bool = field(compare=False, default=False)


class TimerHeap:
    """Timers ordered by deadline; not thread-safe (the context guards it with its lock)."""

    __slots__ = ("_heap", "_ids", "_live", "_seq")

    def __init__(self) -> None:
        self._heap: list[Timer] = []
        self._live: dict[int, Timer] = {}
        self._ids = itertools.count(1)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def schedule(
        self, deadline_ns: int, callback: Callable[[Any], Any], clientd: Any = None, event_queue: Any = None
    ) -> Timer:
        timer = Timer(deadline_ns, next(self._seq), next(self._ids), callback, clientd, event_queue)
        heapq.heappush(self._heap, timer)
        self._live[timer.timer_id] = timer
        return timer

    def cancel(self, timer_id: int) -> Timer | None:
        """Cancel a pending timer; returns it, or None when it already fired or was cancelled."""
        timer = self._live.pop(timer_id, None)
        if timer is not None:
            timer.cancelled = True
        return timer

    def next_deadline(self) -> int | None:
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].deadline_ns if self._heap else None

    def pop_due(self, now_ns: int) -> list[Timer]:
        """Remove and return every live timer whose deadline is <= now, in firing order."""
        due: list[Timer] = []
        while self._heap and self._heap[0].deadline_ns <= now_ns:
            timer = heapq.heappop(self._heap)
            if not timer.cancelled:
                del self._live[timer.timer_id]
                due.append(timer)
        return due

    def clear(self) -> list[Timer]:
        pending = list(self._live.values())
        self._heap.clear()
        self._live.clear()
        return pending
