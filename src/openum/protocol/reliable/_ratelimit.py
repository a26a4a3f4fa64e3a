"""The transport rate controller of LBT-RM and LBT-RU (seed 2.12, 2.12.1; spec 01 section 2.12.1).

Time is cut into intervals of ``transport_*_rate_interval``; each interval's budget is
``limit_bps x interval``.  New data and retransmissions have separate budgets
(``transport_*_data_rate_limit`` and ``transport_*_retransmit_rate_limit``): retransmissions can never
starve new data (seed 6.3.2).  A limit of 0 means "no limit".

New data, exactly as seed 2.12.1 says:

1. A datagram that fits the budget is sent (:attr:`RateDecision.SEND`).
2. The first datagram that does not fit is **queued** and the send **succeeds**
   (:attr:`RateDecision.QUEUE`); the controller is now *blocked*.
3. Every later send while blocked is refused (:attr:`RateDecision.REFUSE`): the transport raises
   ``WouldBlock`` or waits.
4. At the end of the interval the budget is refreshed, the queued datagram is released (its owner
   collects it with :meth:`RateController.take_release`) and the controller is unblocked, so the
   transport can deliver ``WAKEUP``.  With tiny limits one interval's budget may be smaller than the
   queued datagram: the budget then *accumulates* over intervals until it fits.

Unused budget does not carry over to the next interval (only a waiting datagram accumulates it), so
the wire rate never exceeds the limit measured over any whole interval.

Retransmissions are never refused to an application; the source keeps them in its oldest-first
queue and asks :meth:`RateController.try_retransmit` for each.  A retransmission bigger than one
interval's budget accumulates budget the same way.

Budgets are kept in milli-bits (``bits x 1000``) so that ``limit_bps x interval_ms`` is exact
integer arithmetic, even for a 1 bit/s limit.  One controller may be shared by several transport
sessions of a context (the options are context-scoped): they then share the budgets and the blocked
state, and the queued datagram belongs to whichever session queued it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from openum.protocol.reliable._common import NS_PER_MS

__all__ = ["RateController", "RateControllerStatistics", "RateDecision"]


class RateDecision(enum.Enum):
    """What the controller says about one new-data datagram."""

    SEND = "send"  # within the budget: write it now
    QUEUE = "queue"  # over the budget: held, the send succeeds, the controller is now blocked
    REFUSE = "refuse"  # blocked: nothing accepted (WouldBlock)


# The members as plain module constants: reading ``RateDecision.SEND`` runs Python code in 3.11's enum
# (~60 ns), and offer_data runs for every datagram.
_SEND: Final = RateDecision.SEND
_QUEUE: Final = RateDecision.QUEUE
_REFUSE: Final = RateDecision.REFUSE


#: Each transport's rate options, spelled out so that the registry's read check finds them
#: (tests/unit/config/test_implemented.py): data limit, retransmission limit, interval.
_RATE_OPTIONS: dict[str, tuple[str, str, str]] = {
    "lbtrm": (
        "transport_lbtrm_data_rate_limit",
        "transport_lbtrm_retransmit_rate_limit",
        "transport_lbtrm_rate_interval",
    ),
    "lbtru": (
        "transport_lbtru_data_rate_limit",
        "transport_lbtru_retransmit_rate_limit",
        "transport_lbtru_rate_interval",
    ),
}


@dataclass(frozen=True, slots=True)
class RateControllerStatistics:
    """A snapshot of one rate controller.

    ``data_bytes``/``rx_bytes``: bytes charged to the data and retransmit budgets.
    ``rctlr_data_msgs``: data datagrams queued by the controller (UM's name).
    ``rctlr_rx_msgs``: times a retransmission had to wait for the retransmit budget (UM's name).
    ``sends_refused``: sends refused while blocked.  ``blocked``: a datagram waits now.
    """

    data_bytes: int
    rx_bytes: int
    rctlr_data_msgs: int
    rctlr_rx_msgs: int
    sends_refused: int
    blocked: bool


class RateController:
    """Data and retransmit budgets per rate interval, with seed 2.12.1's queue-one-then-block rule."""

    __slots__ = (
        "_data_allow",
        "_data_avail",
        "_data_bytes",
        "_end",
        "_interval",
        "_last_release",
        "_queued_need",
        "_queued_owner",
        "_queued_total",
        "_refused",
        "_released",
        "_rx_allow",
        "_rx_avail",
        "_rx_bytes",
        "_rx_need",
        "_rx_waits",
    )

    def __init__(
        self,
        *,
        data_rate_limit: int,
        retransmit_rate_limit: int,
        rate_interval_ms: int,
        now_ns: int,
    ) -> None:
        if data_rate_limit < 0 or retransmit_rate_limit < 0:
            raise ValueError("rate limits must be >= 0 (0: no limit)")
        if rate_interval_ms <= 0:
            raise ValueError(f"rate_interval_ms must be > 0, got {rate_interval_ms}")
        self._interval = rate_interval_ms * NS_PER_MS
        self._end = now_ns + self._interval
        # milli-bits per interval: limit [bit/s] x interval [ms]; 0 = unlimited
        self._data_allow = data_rate_limit * rate_interval_ms
        self._rx_allow = retransmit_rate_limit * rate_interval_ms
        self._data_avail = self._data_allow
        self._rx_avail = self._rx_allow
        self._queued_owner: object | None = None
        self._queued_need = 0
        self._released: list[tuple[object, int]] = []  # (owner, when) of released datagrams
        self._last_release = now_ns
        self._rx_need = 0
        self._data_bytes = 0
        self._rx_bytes = 0
        self._queued_total = 0
        self._refused = 0
        self._rx_waits = 0

    @classmethod
    def from_options(
        cls, get: Callable[[str], Any], transport: Literal["lbtrm", "lbtru"], *, now_ns: int
    ) -> RateController:
        """Build from context options (``get`` is e.g. ``ContextAttributes.get``)."""
        data, retransmit, interval = _RATE_OPTIONS[transport]
        return cls(
            data_rate_limit=int(get(data)),
            retransmit_rate_limit=int(get(retransmit)),
            rate_interval_ms=int(get(interval)),
            now_ns=now_ns,
        )

    # -- time ------------------------------------------------------------------------------------------

    def _refresh(self, now_ns: int) -> None:
        if now_ns < self._end:
            return
        k = (now_ns - self._end) // self._interval + 1  # interval boundaries crossed
        self._end += k * self._interval  # boundary i (1..k) was at self._end - (k - i + 1) * interval
        allow = self._data_allow
        if self._queued_owner is not None:
            need = self._queued_need
            # intervals of budget the queued datagram still needs (at least the boundary just crossed);
            # while it waits the refreshed budgets accumulate (tiny limits)
            j = max(1, -(-(need - self._data_avail) // allow))
            if j <= k:
                self._last_release = self._end - (k - j + 1) * self._interval
                self._released.append((self._queued_owner, self._last_release))
                self._queued_owner = None
                self._data_bytes += need // 8000
                # the release happened at boundary j; later boundaries start fresh intervals
                self._data_avail = allow if k > j else self._data_avail + j * allow - need
            else:
                self._data_avail += k * allow
        else:
            self._data_avail = allow
        rx_allow = self._rx_allow
        if self._rx_need > rx_allow:  # a retransmission bigger than one interval accumulates budget
            self._rx_avail = min(self._rx_avail + k * rx_allow, self._rx_need)
        else:
            self._rx_avail = rx_allow

    def next_refresh_ns(self) -> int:
        """When the current interval ends (the next moment anything waiting may go)."""
        return self._end

    # -- new data --------------------------------------------------------------------------------------

    def take_data(self, nbytes: int, now_ns: int) -> bool:
        """Charge a new-data datagram of ``nbytes`` (on the wire, all copies) that may go now, as
        :meth:`offer_data` does when it answers "send"; False, charging nothing, when it would not."""
        self._refresh(now_ns)
        if self._queued_owner is not None:
            return False
        if self._data_allow:
            need = nbytes * 8000
            if need > self._data_avail:
                return False
            self._data_avail -= need
        self._data_bytes += nbytes
        return True

    def offer_data(self, owner: object, nbytes: int, now_ns: int) -> RateDecision:
        """Charge a new-data datagram of ``nbytes`` (on the wire, all copies) to the data budget."""
        if self.take_data(nbytes, now_ns):
            return _SEND
        if self._queued_owner is not None:
            self._refused += 1
            return _REFUSE
        need = nbytes * 8000
        self._queued_owner = owner
        self._queued_need = need
        self._queued_total += 1
        # The rest of this interval's budget is too small for it and is forfeited: the datagram goes out
        # from the next interval's fresh budget, so no interval ever carries more than its own budget.
        self._data_avail = 0
        return _QUEUE

    def take_release(self, owner: object, now_ns: int) -> bool:
        """True once when ``owner``'s queued datagram has been released: write it now."""
        self._refresh(now_ns)
        for i, (who, _) in enumerate(self._released):
            if who is owner:
                del self._released[i]
                return True
        return False

    def release_time(self, owner: object) -> int | None:
        """When ``owner``'s queued datagram was released (not collected yet), else None."""
        for who, when in self._released:
            if who is owner:
                return when
        return None

    def blocked(self, now_ns: int) -> bool:
        """A datagram is queued: new sends are refused."""
        self._refresh(now_ns)
        return self._queued_owner is not None

    def discard(self, owner: object) -> None:
        """``owner`` (a session being deleted) will never collect its datagram: drop it, unblocking the
        controller if it was the one waiting."""
        if self._queued_owner is owner:
            self._queued_owner = None
            self._data_avail = 0
        self._released = [r for r in self._released if r[0] is not owner]

    @property
    def is_blocked(self) -> bool:
        """:meth:`blocked` as of the last call (no time passes)."""
        return self._queued_owner is not None

    @property
    def last_release_ns(self) -> int:
        """The interval boundary at which the controller last unblocked."""
        return self._last_release

    # -- retransmissions -------------------------------------------------------------------------------

    def try_retransmit(self, nbytes: int, now_ns: int) -> bool:
        """Charge one retransmission to the retransmit budget; False: keep it queued for later."""
        self._refresh(now_ns)
        if not self._rx_allow:
            self._rx_bytes += nbytes
            return True
        need = nbytes * 8000
        if need <= self._rx_avail:
            self._rx_avail -= need
            self._rx_need = 0
            self._rx_bytes += nbytes
            return True
        if self._rx_need != need:
            self._rx_waits += 1
        self._rx_need = need
        return False

    def statistics(self) -> RateControllerStatistics:
        return RateControllerStatistics(
            data_bytes=self._data_bytes,
            rx_bytes=self._rx_bytes,
            rctlr_data_msgs=self._queued_total,
            rctlr_rx_msgs=self._rx_waits,
            sends_refused=self._refused,
            blocked=self._queued_owner is not None,
        )
