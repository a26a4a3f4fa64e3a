"""Driving a sans-I/O engine's deadlines with the context loop's timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openum.runtime import NS_PER_MS, EventLoop

__all__ = ["EngineTimer"]


class EngineTimer:
    """Keeps one loop timer armed for ``deadline()``; ``fire()`` runs when it expires.

    Call :meth:`reschedule` after every interaction with the engine, holding whatever lock guards the
    engine (``deadline()`` reads it); ``fire()`` must call :meth:`reschedule` itself when it is done
    (the engine's ``poll`` must tolerate being called before anything is due).
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
        """Arm the timer for the engine's deadline, unless it is armed for an earlier time already.

        Deadlines that move later (a session-message or activity timer pushed out by every datagram)
        cost nothing here: the timer fires at the older time, the engine finds nothing due, and the
        timer is re-armed then.  That keeps timer churn per datagram at zero.
        """
        if self.closed:
            return
        when = self._deadline()
        if self._timer is not None and (when is None or (self._when is not None and self._when <= when)):
            return
        if self._timer is not None:
            self._loop.cancel_timer(self._timer)
            self._timer = None
        self._when = when
        if when is None:
            return
        delay_ms = max(0.0, (when - self._loop.clock.now_ns()) / NS_PER_MS)
        self._timer = self._loop.schedule_timer(delay_ms, self._expired)

    def armed_by(self, when: int) -> bool:
        """The timer is armed for ``when`` or earlier: a deadline that moved to ``when`` needs no
        :meth:`reschedule` (it fires at the armed time and re-arms)."""
        armed = self._when
        return self._timer is not None and armed is not None and armed <= when

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
