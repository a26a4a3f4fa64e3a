"""The source's retention buffer for Late Join and OTR (UM Concepts Guide, sections 2.6, 10.2.4, 10.3).

A source with ``late_join (source)`` keeps the messages it sent (fragments, as sent: guide 2.6 "the
retention buffer is circular and holds fragments") so that late-joining receivers and receivers doing
off-transport recovery can ask for them again.  The buffer is distinct from the transport's
retransmission window and is not pre-allocated: it grows with each message sent and shrinks by
evicting its **oldest** messages, by these rules (guide 10.2.4 and the UM Configuration Guide's
descriptions of the three options):

* Every message counts ``len(message) +`` :data:`RETENTION_MESSAGE_OVERHEAD` bytes (the guide: the size
  threshold counts "a small per-message overhead"; UM's exact overhead is not documented, the constant
  is openum's choice).
* ``retransmit_retention_size_limit`` (bytes) is a hard cap that takes precedence over everything:
  while the buffer holds more than the limit, its oldest message is evicted.  A single message larger
  than the limit is therefore not retained at all.
* ``retransmit_retention_size_threshold`` (bytes) and ``retransmit_retention_age_threshold`` (seconds)
  are minimums that combine as a logical AND: the oldest message may be evicted only when **both**
  allow it.  The size threshold allows it when the buffer *without* that message still holds at least
  the threshold ("the minimum size of the retained message buffer before UM can delete messages"); the
  age threshold allows it when the message is at least that old ("UM cannot delete any messages
  younger than this value").  A threshold of 0 always allows.  Put the other way round: a message is
  kept while either threshold says to keep it, and never beyond the limit.
* The newest message is never evicted by the thresholds, so with both thresholds 0 (the defaults) the
  source retains exactly one message, as the guide says (UM logs the NOTICE given by
  :meth:`RetentionParams.notice`).

Eviction runs on every :meth:`RetentionBuffer.add` and on :meth:`RetentionBuffer.expire` (age only
changes with time: the responder expires before it answers, so what it advertises is current).
Every operation is O(1) amortised: a deque gives the eviction order and a dict the lookup by sqn.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, NamedTuple, TypeVar

from openum.protocol.delivery import SQN_MASK

__all__ = [
    "RETENTION_MESSAGE_OVERHEAD",
    "RetainedMessage",
    "RetentionBuffer",
    "RetentionParams",
    "RetentionStatistics",
]

#: Bytes counted per retained message on top of its own length (module docstring; openum's choice).
RETENTION_MESSAGE_OVERHEAD: Final = 64

_HALF: Final = 0x8000_0000
_NS_PER_S: Final = 1_000_000_000

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RetentionParams:
    """Source-side options of Late Join and OTR (guide 10.2.2 / 10.3.3), UM's defaults.

    ``late_join``: offer Late Join and OTR at all.  ``size_threshold`` / ``size_limit``: bytes;
    ``age_threshold``: seconds (0: no age criterion).  See the module docstring for the rules."""

    late_join: bool = False
    size_threshold: int = 0
    size_limit: int = 25_165_824
    age_threshold: int = 0

    def __post_init__(self) -> None:
        if self.size_threshold < 0 or self.age_threshold < 0:
            raise ValueError(
                "retransmit_retention_size_threshold and retransmit_retention_age_threshold must be >= 0, "
                f"got {self.size_threshold} and {self.age_threshold}"
            )
        if self.size_limit < 1:
            raise ValueError(f"retransmit_retention_size_limit must be >= 1 byte, got {self.size_limit}")

    @classmethod
    def from_options(cls, source: Callable[[str], Any]) -> RetentionParams:
        """From a source attribute getter (``late_join``, ``retransmit_retention_*``)."""
        return cls(
            late_join=bool(source("late_join")),
            size_threshold=int(source("retransmit_retention_size_threshold")),
            size_limit=int(source("retransmit_retention_size_limit")),
            age_threshold=int(source("retransmit_retention_age_threshold")),
        )

    def notice(self, topic: str) -> str | None:
        """UM's NOTICE for a late-join source without retention settings (guide 10.2.4), else None."""
        if self.late_join and self.size_threshold == 0 and self.age_threshold == 0:
            return f'Source "{topic}" has no retention settings (1 message retained max)'
        return None


class RetainedMessage(NamedTuple, Generic[T]):
    """One retained message: its topic sqn, what the source gave, its counted size and when it was
    added."""

    sqn: int
    message: T
    size: int
    added_ns: int


@dataclass(frozen=True, slots=True)
class RetentionStatistics:
    """A snapshot of a retention buffer's counters.

    ``messages``/``bytes``: retained now (bytes as counted: payload plus overhead).  ``added``: messages
    ever added.  ``evicted_by_thresholds``: evicted because both thresholds allowed it.
    ``evicted_by_limit``: evicted to stay within ``retransmit_retention_size_limit``.  ``lookups`` /
    ``lookups_missed``: :meth:`RetentionBuffer.get` calls, and those that found nothing."""

    messages: int
    bytes: int
    added: int
    evicted_by_thresholds: int
    evicted_by_limit: int
    lookups: int
    lookups_missed: int


class RetentionBuffer(Generic[T]):
    """The retained messages of one source (one topic), oldest first; rules in the module docstring.

    ``message`` may be anything (encoded bytes, or a record the source re-encodes); its counted size is
    its ``len()`` unless ``size`` is given.  The buffer keeps a reference: pass immutable objects.
    Sequence numbers are u32 and must increase (they may skip); ``now_ns`` must not decrease."""

    __slots__ = (
        "_added",
        "_age_ns",
        "_by_sqn",
        "_bytes",
        "_ev_limit",
        "_ev_thresh",
        "_last",
        "_limit",
        "_lookups",
        "_missed",
        "_order",
        "_threshold",
    )

    def __init__(self, params: RetentionParams) -> None:
        self._threshold = params.size_threshold
        self._limit = params.size_limit
        self._age_ns = params.age_threshold * _NS_PER_S
        self._order: deque[RetainedMessage[T]] = deque()
        self._by_sqn: dict[int, RetainedMessage[T]] = {}
        self._bytes = 0
        self._last: int | None = None  # the last sqn ever added (retained or not)
        self._added = 0
        self._ev_thresh = 0
        self._ev_limit = 0
        self._lookups = 0
        self._missed = 0

    def add(self, sqn: int, message: T, now_ns: int, *, size: int | None = None) -> int:
        """Retain the message just sent as ``sqn``; returns how many messages were evicted."""
        if not 0 <= sqn <= SQN_MASK:
            raise ValueError(f"sqn must be a u32, got {sqn}")
        last = self._last
        if last is not None and not 0 < ((sqn - last) & SQN_MASK) < _HALF:
            raise ValueError(f"sqn {sqn} does not follow the last retained sqn {last}")
        if size is None:
            if not isinstance(message, (bytes, bytearray, memoryview)):
                raise TypeError(f"size is required for a message of type {type(message).__name__}")
            size = len(message)
        elif size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        entry = RetainedMessage(sqn, message, size + RETENTION_MESSAGE_OVERHEAD, now_ns)
        self._order.append(entry)
        self._by_sqn[sqn] = entry
        self._bytes += entry.size
        self._last = sqn
        self._added += 1
        return self._evict(now_ns)

    def expire(self, now_ns: int) -> int:
        """Apply the age rule at ``now_ns`` (nothing was added); returns how many were evicted."""
        return self._evict(now_ns)

    def range(self) -> tuple[int, int] | None:
        """``(low, high)``: the oldest and newest retained sqns, or None when nothing is retained."""
        if not self._order:
            return None
        return self._order[0].sqn, self._order[-1].sqn

    def get(self, sqn: int) -> T | None:
        """The retained message ``sqn``, or None if it is not (or no longer) retained."""
        self._lookups += 1
        entry = self._by_sqn.get(sqn)
        if entry is None:
            self._missed += 1
            return None
        return entry.message

    @property
    def last_sqn(self) -> int | None:
        """The last sqn ever added, retained or not (None before the first message)."""
        return self._last

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, sqn: object) -> bool:
        return sqn in self._by_sqn

    def statistics(self) -> RetentionStatistics:
        return RetentionStatistics(
            messages=len(self._order),
            bytes=self._bytes,
            added=self._added,
            evicted_by_thresholds=self._ev_thresh,
            evicted_by_limit=self._ev_limit,
            lookups=self._lookups,
            lookups_missed=self._missed,
        )

    # ------------------------------------------------------------------------------------ internals

    def _evict(self, now_ns: int) -> int:
        order = self._order
        evicted = 0
        while order and self._bytes > self._limit:  # the hard limit first (it takes precedence)
            self._drop_oldest()
            self._ev_limit += 1
            evicted += 1
        threshold = self._threshold
        age_ns = self._age_ns
        while len(order) > 1:  # the newest is never evicted by the thresholds
            oldest = order[0]
            if threshold and self._bytes - oldest.size < threshold:
                break  # the size threshold keeps it
            if age_ns and now_ns - oldest.added_ns < age_ns:
                break  # the age threshold keeps it
            self._drop_oldest()
            self._ev_thresh += 1
            evicted += 1
        return evicted

    def _drop_oldest(self) -> None:
        entry = self._order.popleft()
        del self._by_sqn[entry.sqn]
        self._bytes -= entry.size
