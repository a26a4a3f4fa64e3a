"""The fake clock of the simulated network (PRACTICES.md 4 and 7).

It is a :class:`openum.runtime.ManualClock`, so anything that reads time through the runtime's
``Clock`` (a sequential-mode context, timers) can share it with a :class:`SimNetwork`, which jumps it
from one deadline to the next.
"""

from __future__ import annotations

from openum.runtime import ManualClock

__all__ = ["FakeClock"]


def _check_int(name: str, value: object) -> int:
    # Nanoseconds are integers: a float (``0.5 * MS``) silently loses precision and determinism.
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int number of nanoseconds, got {value!r}")
    return value


class FakeClock(ManualClock):
    """Integer nanoseconds that move only when told to, and never backwards."""

    __slots__ = ()

    def __init__(self, start_ns: int = 0) -> None:
        super().__init__(_check_int("start_ns", start_ns))

    def set(self, now_ns: int) -> None:
        super().set(_check_int("now_ns", now_ns))

    def advance(self, delta_ns: int) -> int:
        """Move forward by ``delta_ns`` (>= 0); returns the new time."""
        return super().advance(_check_int("delta_ns", delta_ns))

    def advance_to(self, now_ns: int) -> int:
        """Move forward to ``now_ns``; ValueError if that is in the past.  Returns the new time."""
        self.set(now_ns)
        return self.now_ns()

    def __repr__(self) -> str:
        return f"FakeClock(now_ns={self.now_ns()})"
