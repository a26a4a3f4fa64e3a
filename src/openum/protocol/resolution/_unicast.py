"""Choosing among unicast resolver daemons (lbmrd), seed 8.1.9.

Every TR datagram goes to one daemon at a time.  The client switches to the next *active* daemon every
``resolver_unicast_change_interval`` milliseconds, randomised to 50-150 % of it (250-750 ms with the
default 500), so that load spreads and a dead daemon is left quickly.  A daemon is active while it was
heard from within ``resolver_unicast_activity_timeout``; when none is active the client keeps rotating
through all of them.  Keepalives go to every daemon not otherwise sent to within
``resolver_unicast_keepalive_interval`` while the context has TR to take part in (or always, with
``resolver_unicast_force_alive``), so each daemon keeps the client in its table and answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openum.protocol._rng import Rng

__all__ = ["DaemonAddress", "UnicastDaemons"]

NS_PER_MS = 1_000_000

DaemonAddress = tuple[str, int]


@dataclass(slots=True)
class _Daemon:
    address: DaemonAddress
    last_heard_ns: int | None = None
    last_sent_ns: int | None = None
    datagrams_sent: int = 0
    datagrams_received: int = 0


@dataclass(slots=True)
class UnicastDaemons:
    """The configured daemons, the current one, and their liveness."""

    addresses: list[DaemonAddress]
    rng: Rng
    change_interval_ns: int = 500 * NS_PER_MS
    activity_timeout_ns: int = 1000 * NS_PER_MS
    keepalive_interval_ns: int = 500 * NS_PER_MS
    _daemons: list[_Daemon] = field(default_factory=list)
    _current: int = 0
    _next_switch_ns: int | None = None

    def __post_init__(self) -> None:
        if not self.addresses:
            raise ValueError("UnicastDaemons needs at least one daemon address")
        self._daemons = [_Daemon(a) for a in self.addresses]

    def is_active(self, index: int, now_ns: int) -> bool:
        heard = self._daemons[index].last_heard_ns
        return heard is not None and now_ns - heard <= self.activity_timeout_ns

    def active(self, now_ns: int) -> list[DaemonAddress]:
        return [d.address for i, d in enumerate(self._daemons) if self.is_active(i, now_ns)]

    def current(self, now_ns: int) -> DaemonAddress:
        """The daemon to send to now (switching when the randomised change interval has passed)."""
        if self._next_switch_ns is None:
            self._schedule_switch(now_ns)
        elif now_ns >= self._next_switch_ns:
            self._switch(now_ns)
        elif not self.is_active(self._current, now_ns) and self.active(now_ns):
            self._switch(now_ns)  # the current daemon went silent: leave it now
        return self._daemons[self._current].address

    def _schedule_switch(self, now_ns: int) -> None:
        base = self.change_interval_ns
        self._next_switch_ns = now_ns + int(base * self.rng.uniform(0.5, 1.5)) if base else None

    def _switch(self, now_ns: int) -> None:
        count = len(self._daemons)
        any_active = bool(self.active(now_ns))
        for step in range(1, count + 1):
            candidate = (self._current + step) % count
            if not any_active or self.is_active(candidate, now_ns):
                self._current = candidate
                break
        self._schedule_switch(now_ns)

    def heard_from(self, address: DaemonAddress, now_ns: int) -> bool:
        """A datagram arrived from ``address``; False if it is not a configured daemon."""
        for daemon in self._daemons:
            if daemon.address == address:
                daemon.last_heard_ns = now_ns
                daemon.datagrams_received += 1
                return True
        return False

    def sent_to(self, address: DaemonAddress, now_ns: int) -> None:
        for daemon in self._daemons:
            if daemon.address == address:
                daemon.last_sent_ns = now_ns
                daemon.datagrams_sent += 1

    def keepalives_due(self, now_ns: int) -> list[DaemonAddress]:
        """Daemons that have not been sent anything within the keepalive interval."""
        due = []
        for daemon in self._daemons:
            if daemon.last_sent_ns is None or now_ns - daemon.last_sent_ns >= self.keepalive_interval_ns:
                due.append(daemon.address)
        return due

    def next_deadline(self) -> int | None:
        times = [self._next_switch_ns] if self._next_switch_ns is not None else []
        for daemon in self._daemons:
            if daemon.last_sent_ns is not None:
                times.append(daemon.last_sent_ns + self.keepalive_interval_ns)
        return min(times) if times else None

    def snapshot(self) -> list[tuple[DaemonAddress, int, int, int | None]]:
        """(address, datagrams sent, datagrams received, last heard) per daemon."""
        return [(d.address, d.datagrams_sent, d.datagrams_received, d.last_heard_ns) for d in self._daemons]
