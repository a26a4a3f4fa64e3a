"""Topic resolution rate limits (seed 2.12.2, 8.1.4, 8.1.5).

Each kind of TR traffic (initial advertisements, sustaining advertisements, initial queries, sustaining
queries, wildcard queries) has a context-wide limit in records per second and in bits per second.  The
budget is refreshed every interval (100 ms) and does not accumulate.  The limiter is an approximation,
as in UM: at least one record goes out per interval, and a record that crosses the budget is still
sent (an overshoot of at most one topic's worth).  A value of 0 means "no limit".
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TR_RATE_INTERVAL_NS", "TrRateLimiter"]

#: UM's topic-resolution rate interval (implied by seed 2.12.2's worked example).
TR_RATE_INTERVAL_NS = 100_000_000


@dataclass(slots=True)
class TrRateLimiter:
    """A records-per-second and bits-per-second budget, refreshed every interval."""

    per_second: int
    bps: int
    interval_ns: int = TR_RATE_INTERVAL_NS
    _records_left: float = 0.0
    _bits_left: float = 0.0
    _sent_in_interval: int = 0
    _interval_end: int | None = None

    def _refresh(self, now_ns: int) -> None:
        if self._interval_end is None or now_ns >= self._interval_end:
            share = self.interval_ns / 1e9
            self._records_left = self.per_second * share if self.per_second else float("inf")
            self._bits_left = self.bps * share if self.bps else float("inf")
            self._sent_in_interval = 0
            self._interval_end = now_ns + self.interval_ns

    def allow(self, record_bytes: int, now_ns: int) -> bool:
        """Take one record of ``record_bytes`` from the budget; False: wait for the next interval."""
        self._refresh(now_ns)
        if self._sent_in_interval and (self._records_left <= 0 or self._bits_left <= 0):
            return False
        self._records_left -= 1
        self._bits_left -= record_bytes * 8
        self._sent_in_interval += 1
        return True

    def next_refresh_ns(self) -> int | None:
        """When a deferred record may go (None: nothing has been limited yet)."""
        return self._interval_end
