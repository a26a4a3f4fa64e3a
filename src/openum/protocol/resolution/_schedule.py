"""Topic resolution phase schedules (seed 8.1.4-8.1.6).

One :class:`PhaseSchedule` drives either a source's advertisements or a receiver's queries:

- **initial**: the first send goes out at once; the next after ``min_initial`` and each interval doubles
  up to ``max_initial``; the phase lasts at least ``initial_duration`` (0: forever).  With the defaults
  for advertisements the sends are at 0, 10, 30, 70, 150, 310, 630, 1130 ms, then every 500 ms: 15 in the
  first 5 s.
- **sustaining**: one send every ``sustain_interval`` for ``sustain_duration`` (0: forever).
- **quiescent**: nothing, until :meth:`PhaseSchedule.restart_sustaining` (a query for a source, a topic
  resolution request, a receiver that lost sources).

An interval of 0 disables a phase (UM's "Disabling Aspects of Topic Resolution").  Times are integer
nanoseconds of the caller's clock.  The next send is computed from the *scheduled* time of the previous
one, so scheduler jitter does not accumulate; a send that is late by more than an interval (because a
rate limit held it back) re-anchors the schedule at the actual time, which is how rate limits stretch a
phase (its duration is a minimum).
"""

from __future__ import annotations

import enum
import heapq
import itertools
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

__all__ = ["DueIndex", "Phase", "PhaseParams", "PhaseSchedule"]

NS_PER_MS = 1_000_000


class Phase(enum.Enum):
    INITIAL = "initial"
    SUSTAINING = "sustaining"
    QUIESCENT = "quiescent"


@dataclass(frozen=True, slots=True)
class PhaseParams:
    """Phase timings in nanoseconds (0 keeps UM's meaning: interval 0 = phase off, duration 0 = forever)."""

    min_initial_ns: int
    max_initial_ns: int
    initial_duration_ns: int
    sustain_interval_ns: int
    sustain_duration_ns: int

    @classmethod
    def from_ms(
        cls,
        min_initial: int,
        max_initial: int,
        initial_duration: int,
        sustain_interval: int,
        sustain_duration: int,
    ) -> PhaseParams:
        return cls(
            min_initial * NS_PER_MS,
            max_initial * NS_PER_MS,
            initial_duration * NS_PER_MS,
            sustain_interval * NS_PER_MS,
            sustain_duration * NS_PER_MS,
        )

    @property
    def initial_enabled(self) -> bool:
        return self.min_initial_ns > 0 and self.max_initial_ns > 0

    @property
    def sustain_enabled(self) -> bool:
        return self.sustain_interval_ns > 0


class PhaseSchedule:
    """When the next advertisement (or query) of one topic is due."""

    __slots__ = (
        "_interval",
        "_last_scheduled",
        "_listener",
        "_next",
        "_phase_start",
        "params",
        "phase",
        "sent",
    )

    def __init__(self, params: PhaseParams, listener: Callable[[int | None], None] | None = None) -> None:
        self.params = params
        self.phase = Phase.QUIESCENT
        self._listener = listener
        self._next: int | None = None
        self._phase_start = 0
        self._interval = 0
        self._last_scheduled: int | None = None
        self.sent = 0

    @property
    def next_ns(self) -> int | None:
        """When the next send is due (None: nothing scheduled)."""
        return self._next

    @next_ns.setter
    def next_ns(self, value: int | None) -> None:
        self._next = value
        if self._listener is not None:
            self._listener(value)  # lets an index of due schedules follow the change

    # -- starting and restarting ---------------------------------------------------------------------
    def start(self, now_ns: int, *, send_now: bool = True) -> None:
        """A new source or receiver: initial phase (or sustaining if it is off), first send now.

        ``send_now=False`` (``resolver_send_initial_advertisement 0``) skips the immediate first send:
        the first goes out one interval later.
        """
        if self.params.initial_enabled:
            first = now_ns if send_now else now_ns + self.params.min_initial_ns
            self._enter(Phase.INITIAL, now_ns, first)
            self._interval = self.params.min_initial_ns
            if not send_now:
                self._last_scheduled = now_ns  # the skipped send at 0 counts: the ladder doubles from here
        elif self.params.sustain_enabled:
            first = now_ns if send_now else now_ns + self.params.sustain_interval_ns
            self._enter(Phase.SUSTAINING, now_ns, first)
        else:
            self._quiesce()

    def restart_sustaining(self, now_ns: int, *, send_now: bool = True) -> None:
        """Run another full sustaining phase (a query reached a source, seed 8.1.5; a TR request).

        During the initial phase the schedule is not restarted (seed 8.1.4): the caller answers at once
        and :meth:`answered` counts the answer as the nearest scheduled send.
        """
        if self.phase is Phase.INITIAL:
            return
        if not self.params.sustain_enabled:
            return
        self._enter(
            Phase.SUSTAINING, now_ns, now_ns if send_now else now_ns + self.params.sustain_interval_ns
        )

    def prolong_sustaining(self, now_ns: int) -> None:
        """A query reached a source that does not answer at once: its next scheduled advertisement is
        the answer, and the sustaining phase runs in full from now (seed 8.1.5).

        A send already scheduled is not put off (queries arriving faster than the interval would starve
        the answer); a quiescent source starts a sustaining phase whose first send is one interval away.
        During the initial phase nothing changes: its next send answers.
        """
        if self.phase is Phase.SUSTAINING:
            self._phase_start = now_ns
        elif self.phase is Phase.QUIESCENT:
            self.restart_sustaining(now_ns, send_now=False)

    def stop(self) -> None:
        """No more sends (e.g. a receiver that reached its source threshold)."""
        self._quiesce()

    def _enter(self, phase: Phase, start_ns: int, first_ns: int) -> None:
        self.phase = phase
        self._phase_start = start_ns
        self.next_ns = first_ns
        self._last_scheduled = None

    def _quiesce(self) -> None:
        self.phase = Phase.QUIESCENT
        self.next_ns = None
        self._last_scheduled = None

    # -- sending -------------------------------------------------------------------------------------
    def due(self, now_ns: int) -> bool:
        return self.next_ns is not None and self.next_ns <= now_ns

    def mark_sent(self, now_ns: int) -> None:
        """The due send went out at ``now_ns``; compute the next one."""
        if self.next_ns is None:
            return
        self.sent += 1
        scheduled = self.next_ns
        self._advance(scheduled, now_ns)

    def answered(self, now_ns: int) -> None:
        """An immediate answer to a query went out during the initial phase: it counts as the nearest
        scheduled send, and the doubling carries on from there (seed 8.1.4)."""
        if self.phase is not Phase.INITIAL or self.next_ns is None:
            return
        self.sent += 1
        previous = self._last_scheduled
        if previous is None or abs(self.next_ns - now_ns) <= abs(now_ns - previous):
            self._advance(self.next_ns, now_ns)

    def _advance(self, scheduled: int, now_ns: int) -> None:
        p = self.params
        self._last_scheduled = scheduled
        if self.phase is Phase.INITIAL:
            if scheduled != self._phase_start:  # every send after the first doubles the interval
                self._interval = min(self._interval * 2, p.max_initial_ns)
            candidate = self._anchor(scheduled + self._interval, now_ns, self._interval)
            if p.initial_duration_ns and candidate - self._phase_start >= p.initial_duration_ns:
                if p.sustain_enabled:
                    first = self._anchor(scheduled + p.sustain_interval_ns, now_ns, p.sustain_interval_ns)
                    self._enter(Phase.SUSTAINING, first, first)
                    self._last_scheduled = scheduled
                else:
                    self._quiesce()
                return
            self.next_ns = candidate
            return
        if self.phase is Phase.SUSTAINING:
            candidate = self._anchor(scheduled + p.sustain_interval_ns, now_ns, p.sustain_interval_ns)
            if p.sustain_duration_ns and candidate - self._phase_start >= p.sustain_duration_ns:
                self._quiesce()
                return
            self.next_ns = candidate

    @staticmethod
    def _anchor(candidate: int, now_ns: int, interval: int) -> int:
        # Late by more than an interval (held back by a rate limit): re-anchor on the actual send time.
        return candidate if candidate > now_ns else now_ns + interval

    def __repr__(self) -> str:
        return f"<PhaseSchedule {self.phase.value} next={self.next_ns} sent={self.sent}>"


class DueIndex:
    """The schedules that are due, earliest first: a heap with lazy deletion.

    Thousands of topics make scanning every schedule on every tick too slow; the index holds one entry
    per change of a schedule's ``next_ns`` and drops entries that no longer match when it meets them.
    """

    __slots__ = ("_heap", "_lookup", "_seq")

    def __init__(self, lookup: Callable[[Hashable], int | None]) -> None:
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = itertools.count()
        self._lookup = lookup  # key -> the schedule's current next_ns (None: gone or idle)

    def update(self, key: Hashable, next_ns: int | None) -> None:
        if next_ns is not None:
            heapq.heappush(self._heap, (next_ns, next(self._seq), key))

    def _clean(self) -> None:
        heap = self._heap
        while heap and self._lookup(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)

    def earliest(self) -> int | None:
        self._clean()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ns: int) -> Iterator[tuple[int, Hashable]]:
        """Yield ``(due time, key)`` of each due schedule once; the caller re-``update``s what it defers."""
        heap = self._heap
        seen: set[Hashable] = set()
        while heap and heap[0][0] <= now_ns:
            due, _, key = heapq.heappop(heap)
            if self._lookup(key) != due or key in seen:
                continue
            seen.add(key)
            yield due, key

    def __len__(self) -> int:
        return len(self._heap)
