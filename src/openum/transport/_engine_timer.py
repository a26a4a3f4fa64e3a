"""Driving a sans-I/O engine's deadlines with the context loop's timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openum.runtime import NS_PER_MS, EventLoop

__all__ = ["EngineTimer"]


class EngineTimer:
    """Keeps one loop timer armed for ``deadline()``; ``fire()`` runs when it expires.

    Call :meth:`reschedule` after every interaction with the engine, holding whatever lock guards the
    engine (``deadline()`` reads it); ``fire()`` must call :meth:`reschedule` itself when it is done.
    The loop's timer calls are thread-safe, so any thread may reschedule.
    """

    __slots__ = ("_deadline", "_fire", "_loop", "_timer", "_when", "closed")

    def __init__(self, loop: EventLoop, fire: Callable[[], None], deadline: Callable[[], int | None]) -> None:
        self._loop = loop
        self._fire = fire
        self._deadline = deadline
        self._timer: int | None = None
        self._when: int | None = None
        self.closed = False

    def reschedule(self) -> None:
        if self.closed:
            return
        when = self._deadline()
        if when == self._when and self._timer is not None:
            return
        if self._timer is not None:
            self._loop.cancel_timer(self._timer)
            self._timer = None
        self._when = when
        if when is None:
            return
        delay_ms = max(0.0, (when - self._loop.clock.now_ns()) / NS_PER_MS)
        self._timer = self._loop.schedule_timer(delay_ms, self._expired)

    def _expired(self, _clientd: Any) -> None:
        self._timer = None
        self._when = None
        if not self.closed:
            self._fire()

    def cancel(self) -> None:
        self.closed = True
        if self._timer is not None:
            try:
                self._loop.cancel_timer(self._timer)
            except Exception:  # the loop may be closed already
                pass
            self._timer = None
