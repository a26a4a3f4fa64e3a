"""Source side of NAK-based repair, shared by LBT-RM and LBT-RU (seed 6.3.1, 6.3.2; spec 02 3.2-3.4).

What the source does with each NAKed sequence number:

* **not in the transmission window**: behind the trailing edge, it can never be repaired
  (``naks_shed``; answered with an NCF of reason "NAK shed" so receivers give up: the NCF's trailing
  edge is past it); never sent at all (ahead of the leading edge), it is garbage (``naks_shed``, no
  answer);
* **retransmitted less than ``ignore_interval`` ago**: ignored (``naks_ignored``), answered with an
  NCF of reason "NAK ignored";
* **already waiting for the retransmit budget**: ``naks_rx_delay_ignored``, NCF "retransmit delay";
* otherwise **queued for retransmission**.  The queue is served **oldest first** (seed 6.3.2) and as
  fast as ``retransmit_rate_limit`` allows: usually at once, in the same call.  NAKs that must wait
  for the budget count as ``naks_rx_delay_ignored`` and get an NCF "retransmit delay" ([CG]: the
  retransmission still goes out later, within the limit).

NCF damping (seed 6.3.1 item 4, UM 6.10 and later): only the **first** rejected NAK for a sequence
number within an ignore interval triggers an NCF; later ones in the same interval are silently
discarded.  So five NAKs for one sequence number within 100 ms give exactly one retransmission and one
NCF (spec 02 3.4).

The *key* tells receivers apart where repairs are per receiver: ``None`` for LBT-RM (a multicast
retransmission repairs everybody), the client address for LBT-RU (a unicast retransmission repairs
only the client that asked, so the ignore interval is per client).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Hashable, Sequence
from typing import Final

from openum.protocol.reliable._common import SQN_MASK
from openum.protocol.reliable._ratelimit import RateController
from openum.protocol.reliable._window import TransmissionWindow
from openum.wire.lbtrm import NcfReason

__all__ = ["RepairServer", "SmTimer"]

_SHED: Final = int(NcfReason.NAK_SHED)
_IGNORED: Final = int(NcfReason.NAK_IGNORED)
_RX_DELAY: Final = int(NcfReason.RETRANSMIT_DELAY)

Key = Hashable
#: ``(key, reason, wire sqn)``: one NCF entry to send.
NcfEntry = tuple[Key, int, int]


class _Expiring:
    """``key -> time`` entries that expire ``ttl_ns`` after they were set (pruned in time order)."""

    __slots__ = ("_map", "_order", "_ttl")

    def __init__(self, ttl_ns: int) -> None:
        self._ttl = ttl_ns
        self._map: dict[Key, int] = {}
        self._order: deque[tuple[int, Key]] = deque()

    def prune(self, now_ns: int) -> None:
        order, mapping, ttl = self._order, self._map, self._ttl
        while order and order[0][0] + ttl <= now_ns:
            t, key = order.popleft()
            if mapping.get(key) == t:
                del mapping[key]

    def active(self, key: Key, now_ns: int) -> bool:
        t = self._map.get(key)
        return t is not None and now_ns < t + self._ttl

    def set(self, key: Key, now_ns: int) -> None:
        if self._ttl > 0:
            self._map[key] = now_ns
            self._order.append((now_ns, key))

    def __len__(self) -> int:
        return len(self._map)


class RepairServer:
    """Ignore interval, NCF damping and the oldest-first retransmission queue of one source session."""

    __slots__ = (
        "_heap",
        "_ignore",
        "_ncfed",
        "_owner_rate",
        "_queued",
        "_retransmitted",
        "_tiebreak",
        "_window",
        "naks_ignored",
        "naks_rcved",
        "naks_rx_delay_ignored",
        "naks_shed",
        "ncfs_ignored",
        "ncfs_rx_delay",
        "ncfs_shed",
    )

    def __init__(self, window: TransmissionWindow, rate: RateController, *, ignore_interval_ns: int) -> None:
        self._window = window
        self._owner_rate = rate
        self._ignore = ignore_interval_ns
        self._retransmitted = _Expiring(ignore_interval_ns)  # (key, wire sqn) -> last retransmission
        self._ncfed = _Expiring(ignore_interval_ns)  # (key, wire sqn) -> last NCF
        self._heap: list[tuple[int, int, Key]] = []  # (absolute sqn, tiebreak, key): oldest first
        self._queued: set[tuple[Key, int]] = set()  # (key, absolute sqn) waiting in the heap
        self._tiebreak = 0
        self.naks_rcved = 0
        self.naks_ignored = 0
        self.naks_shed = 0
        self.naks_rx_delay_ignored = 0
        self.ncfs_ignored = 0
        self.ncfs_shed = 0
        self.ncfs_rx_delay = 0

    @property
    def pending(self) -> int:
        """Retransmissions waiting for the retransmit budget."""
        return len(self._queued)

    def _reject(self, key: Key, wire: int, reason: int, now_ns: int, ncfs: list[NcfEntry]) -> None:
        # seed 6.3.1 item 4: one NCF per sequence number (and receiver) per ignore interval
        k = (key, wire)
        if self._ncfed.active(k, now_ns):
            return
        self._ncfed.set(k, now_ns)
        ncfs.append((key, reason, wire))
        if reason == _SHED:
            self.ncfs_shed += 1
        elif reason == _IGNORED:
            self.ncfs_ignored += 1
        else:
            self.ncfs_rx_delay += 1

    def on_nak(
        self, key: Key, sqns: Sequence[int], now_ns: int
    ) -> tuple[list[tuple[Key, int]], list[NcfEntry]]:
        """Handle one NAK packet; return the retransmissions to send now ``(key, absolute sqn)``, in
        order, and the NCF entries to send."""
        self._retransmitted.prune(now_ns)
        self._ncfed.prune(now_ns)
        window = self._window
        ncfs: list[NcfEntry] = []
        fresh: list[int] = []
        self.naks_rcved += len(sqns)
        for wire in sqns:
            sqn = window.lookup(wire)
            if sqn is None:
                self.naks_shed += 1
                if not window.is_ahead(wire):
                    self._reject(key, wire, _SHED, now_ns, ncfs)
                continue
            if self._retransmitted.active((key, wire), now_ns):
                self.naks_ignored += 1
                self._reject(key, wire, _IGNORED, now_ns, ncfs)
                continue
            if (key, sqn) in self._queued:
                self.naks_rx_delay_ignored += 1
                self._reject(key, wire, _RX_DELAY, now_ns, ncfs)
                continue
            self._queued.add((key, sqn))
            self._tiebreak += 1
            heapq.heappush(self._heap, (sqn, self._tiebreak, key))
            fresh.append(sqn)
        out = self.poll(now_ns) if fresh else []
        for sqn in fresh:
            if (key, sqn) in self._queued:  # waits for the retransmit budget
                self.naks_rx_delay_ignored += 1
                self._reject(key, sqn & SQN_MASK, _RX_DELAY, now_ns, ncfs)
        return out, ncfs

    def poll(self, now_ns: int) -> list[tuple[Key, int]]:
        """Retransmissions the retransmit budget allows now, oldest first."""
        heap, queued, window, rate = self._heap, self._queued, self._window, self._owner_rate
        out: list[tuple[Key, int]] = []
        while heap:
            sqn, _, key = heap[0]
            datagram = window.get(sqn)
            if datagram is None:  # fell out of the window while waiting
                heapq.heappop(heap)
                queued.discard((key, sqn))
                continue
            if not rate.try_retransmit(len(datagram), now_ns):
                break
            heapq.heappop(heap)
            queued.discard((key, sqn))
            self._retransmitted.set((key, sqn & SQN_MASK), now_ns)
            out.append((key, sqn))
        return out

    def forget(self, key: Key) -> None:
        """Drop what is queued for ``key`` (an LBT-RU client that went away)."""
        if any(k == key for k, _ in self._queued):
            self._heap = [e for e in self._heap if e[2] != key]
            heapq.heapify(self._heap)
            self._queued = {q for q in self._queued if q[0] != key}


class SmTimer:
    """When the next session message is due (seed 8.10, 8.11.5; spec 03 A34).

    Nothing is sent before the session starts (its first datagram).  After every new datagram the first
    SM is due ``minimum`` later; while the session stays idle the interval doubles up to ``maximum``.
    """

    __slots__ = ("_interval", "_max", "_min", "due")

    def __init__(self, minimum_ns: int, maximum_ns: int) -> None:
        if minimum_ns <= 0 or maximum_ns < minimum_ns:
            raise ValueError("session message intervals need 0 < minimum <= maximum")
        self._min = minimum_ns
        self._max = maximum_ns
        self._interval = minimum_ns
        #: When the next SM is due (None: the session has not started).  Read-only for others.
        self.due: int | None = None

    def activity(self, now_ns: int) -> None:
        """Traffic went out: restart the idle backoff."""
        self._interval = self._min
        self.due = now_ns + self._min

    def fire(self, now_ns: int) -> bool:
        """True when an SM is due now (and schedule the next one, twice as far, capped)."""
        if self.due is None or now_ns < self.due:
            return False
        self._interval = min(self._interval * 2, self._max)
        self.due = now_ns + self._interval
        return True
