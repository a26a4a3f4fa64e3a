"""Readiness polling for the event loop: ``select.epoll`` where the platform has it, :mod:`selectors`
elsewhere.

The loop waits in :meth:`Poller.poll` once per iteration, so on the round-trip path of every message.
:class:`selectors.EpollSelector` wraps ``epoll.poll`` in Python (a key lookup and a tuple per ready
descriptor, and its own event-mask arithmetic); :class:`EpollPoller` returns epoll's own list and leaves
the mask to a lookup table, :attr:`Poller.fired`, that turns each mask into the loop's
:class:`~openum.runtime.FdEvent` value (``READ`` 0x1, ``WRITE`` 0x2) with a single dict read.  An error or
hang-up on a descriptor is reported as both, as :mod:`selectors` reports it, so the callback's next read
or write finds the error.
"""

from __future__ import annotations

import select
import selectors
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["EpollPoller", "Poller", "SelectorsPoller", "default_poller"]

READ = 0x1  # FdEvent.READ, selectors.EVENT_READ
WRITE = 0x2  # FdEvent.WRITE, selectors.EVENT_WRITE


class _Fired(dict[int, Any]):
    """A poller's ready mask -> ``READ``/``WRITE`` bits, filled on first sight of each mask."""

    def __init__(self, decode: Any, wrap: Any) -> None:
        super().__init__()
        self._decode = decode
        self._wrap = wrap

    def __missing__(self, mask: int) -> Any:
        value = self._wrap(self._decode(mask))
        self[mask] = value
        return value


class Poller(Protocol):
    """What the loop needs of a readiness poller: ``events`` are ``READ``/``WRITE`` bits."""

    fired: dict[int, Any]
    """The masks :meth:`poll` returns -> the loop's event value (look up with ``fired[mask]``)."""

    def register(self, fd: int, events: int) -> None: ...

    def modify(self, fd: int, events: int) -> None: ...

    def unregister(self, fd: int) -> None: ...

    def poll(self, timeout_s: float | None) -> list[tuple[int, int]]:
        """Wait up to ``timeout_s`` seconds (None: no limit, 0: do not wait); ``(fd, mask)`` per ready
        descriptor."""
        ...

    wait: Callable[[float | None], list[tuple[int, int]]]
    """:meth:`poll` for a ``timeout_s`` that is None or >= 0, as the cheapest callable the platform has
    (the loop's call on every iteration): epoll's own ``poll``, which rounds a wait up to whole
    milliseconds itself, with no Python frame around it."""

    def close(self) -> None: ...


class EpollPoller:
    """Linux epoll, level-triggered, called directly."""

    def __init__(self, wrap: Any = int) -> None:
        self._epoll = select.epoll()
        self.fired: dict[int, Any] = _Fired(self._decode, wrap)
        self.wait: Callable[[float | None], list[tuple[int, int]]] = self._epoll.poll

    @staticmethod
    def _epoll_events(events: int) -> int:
        mask = 0
        if events & READ:
            mask |= select.EPOLLIN
        if events & WRITE:
            mask |= select.EPOLLOUT
        return mask

    @staticmethod
    def _decode(mask: int) -> int:
        # As selectors.EpollSelector reads it: anything but EPOLLIN (out, error, hang-up) wakes a writer,
        # anything but EPOLLOUT wakes a reader.
        events = 0
        if mask & ~select.EPOLLIN:
            events |= WRITE
        if mask & ~select.EPOLLOUT:
            events |= READ
        return events

    def register(self, fd: int, events: int) -> None:
        self._epoll.register(fd, self._epoll_events(events))

    def modify(self, fd: int, events: int) -> None:
        self._epoll.modify(fd, self._epoll_events(events))

    def unregister(self, fd: int) -> None:
        self._epoll.unregister(fd)

    def poll(self, timeout_s: float | None) -> list[tuple[int, int]]:
        if timeout_s is None:
            return self._epoll.poll(-1)
        if timeout_s <= 0:
            return self._epoll.poll(0)
        # epoll counts whole milliseconds and select.epoll rounds up, so a wait shorter than 1 ms waits
        # (rather than returning at once and spinning the loop until the timer it waits for is due).
        return self._epoll.poll(timeout_s)

    def close(self) -> None:
        self._epoll.close()


class SelectorsPoller:
    """:func:`selectors.DefaultSelector` (platforms without epoll)."""

    def __init__(self, wrap: Any = int) -> None:
        self._selector = selectors.DefaultSelector()
        self.fired: dict[int, Any] = _Fired(int, wrap)
        self.wait: Callable[[float | None], list[tuple[int, int]]] = self.poll

    def register(self, fd: int, events: int) -> None:
        self._selector.register(fd, events)

    def modify(self, fd: int, events: int) -> None:
        self._selector.modify(fd, events)

    def unregister(self, fd: int) -> None:
        self._selector.unregister(fd)

    def poll(self, timeout_s: float | None) -> list[tuple[int, int]]:
        if timeout_s is not None and timeout_s < 0:
            timeout_s = 0
        return [(key.fd, mask) for key, mask in self._selector.select(timeout_s)]

    def close(self) -> None:
        self._selector.close()


def default_poller(wrap: Any = int) -> EpollPoller | SelectorsPoller:
    """epoll where the platform has it, else the best :mod:`selectors` offers.  ``wrap`` turns the
    ``READ``/``WRITE`` bits into the value callbacks are given (the loop passes ``FdEvent``)."""
    if hasattr(select, "epoll"):
        return EpollPoller(wrap)
    return SelectorsPoller(wrap)
