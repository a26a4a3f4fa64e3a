"""What LBT-RM and LBT-RU receivers have in common (seed 6.3, 8.10, 8.11.1, 8.11.6).

A receiving session becomes active with its first datagram of any kind (BOS, seed 8.11.1), ends when
nothing at all was heard for the activity timeout (EOS, seed 8.11.6), and runs a
:class:`LossDetector` for NAKs.  The wire encodings are the concrete classes' business.

While the detector repairs head loss (UM Concepts Guide, section 2.4.2: the session's first datagrams
were lost before this receiver got any), what arrives is held (copied) and handed up in sequence order
once the head is repaired or given up, so that the layer above, which starts each topic at the first
message it sees, sees the first ones first.  At most :data:`HEAD_HOLD_BYTES` are held; beyond, the head
loss is given up at once.  Payloads released by a timer come from :meth:`ReceiverBase.take_released`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Final

from openum.protocol._rng import Rng
from openum.protocol.reliable._common import (
    NS_PER_MS,
    Address,
    EndReason,
    Outgoing,
    Received,
    ReceiverEvent,
    SessionEnded,
    sqn_diff,
)
from openum.protocol.reliable._nak import LossDetector
from openum.protocol.reliable._stats import ReceiverCounters

__all__ = ["EMPTY_IN", "EMPTY_OUT", "HEAD_HOLD_BYTES", "ReceiverBase"]

#: Most payload bytes held while head loss is repaired (module docstring).
HEAD_HOLD_BYTES: Final = 8 << 20

EMPTY_IN: Final[Sequence[Received]] = ()
EMPTY_OUT: Final[Sequence[Outgoing]] = ()


class ReceiverBase(abc.ABC):
    """Activity timing, counters and the loss detector of one receiving session."""

    __slots__ = ("_activity", "_counters", "_deadline", "_det", "_ended", "_heard", "_held", "_held_bytes")

    def __init__(
        self,
        *,
        initial_backoff_ms: int,
        backoff_ms: int,
        suppress_ms: int,
        generation_ms: int,
        send_naks: bool,
        max_naks_per_packet: int,
        activity_timeout_ms: int,
        first_timeout_ms: int,
        rng: Rng,
        now_ns: int,
    ) -> None:
        self._det = LossDetector(
            initial_backoff_ns=initial_backoff_ms * NS_PER_MS,
            backoff_ns=backoff_ms * NS_PER_MS,
            suppress_ns=suppress_ms * NS_PER_MS,
            generation_ns=generation_ms * NS_PER_MS,
            send_naks=send_naks,
            max_naks_per_packet=max_naks_per_packet,
            rng=rng,
        )
        self._counters = ReceiverCounters()
        self._activity = activity_timeout_ms * NS_PER_MS
        self._deadline = now_ns + first_timeout_ms * NS_PER_MS  # activity deadline
        self._heard = False  # any datagram of the session yet (SessionActive given)
        self._ended = False
        self._held: list[Received] = []  # while head loss is repaired (module docstring)
        self._held_bytes = 0

    @property
    def active(self) -> bool:
        """The session has been heard from and has not ended."""
        return self._heard and not self._ended

    @property
    def ended(self) -> bool:
        return self._ended

    def count_lbm_messages(self, *, msgs: int = 0, no_topic: int = 0) -> None:
        """Add to ``lbm_msgs_rcved`` and ``lbm_msgs_no_topic_rcved`` (the LBMC layer above knows what
        the payloads held; seed 17.1 / spec 06 D.1)."""
        c = self._counters
        c.lbm_msgs_rcved += msgs
        c.lbm_msgs_no_topic_rcved += no_topic

    def _heard_now(self, now_ns: int) -> bool:
        """A valid datagram of the session arrived; True the first time (give SessionActive)."""
        self._deadline = now_ns + self._activity
        if self._heard:
            return False
        self._heard = True
        return True

    def _end(self, reason: EndReason) -> SessionEnded:
        self._ended = True
        return SessionEnded(reason)

    @abc.abstractmethod
    def _naks(self, packets: list[list[int]]) -> list[Outgoing]:
        """The transport's NAK datagrams for ``packets`` (lists of wire sqns, one list per NAK)."""

    @abc.abstractmethod
    def data_in_order(self, data: memoryview, sender: Address, now_ns: int) -> int:
        """Hot path of ``datagram_received`` for its common case: an original (not retransmitted) DATA
        datagram of this active session that is the next one expected, with nothing missing.  Such a
        datagram is counted and taken exactly as ``datagram_received`` takes it, and where its LBMC
        payload starts in ``data`` is returned (the caller slices it, or reads from there): nothing to
        send, no event, and no deadline moved earlier (the activity timeout moves later), so a caller's
        timer armed for :meth:`next_deadline` stands.  Anything else: -1 with nothing changed; call
        ``datagram_received``."""

    def _take_in_order(self, nbytes: int, now_ns: int) -> None:
        """What taking an in-order datagram does besides the loss detector's part: counters, activity."""
        c = self._counters
        c.msgs_rcved += 1
        c.bytes_rcved += nbytes
        self._deadline = now_ns + self._activity

    def _hold(self, received: Sequence[Received]) -> Sequence[Received]:
        """What to hand up now, given this call's ``received``: nothing while head loss is repaired
        (they are held), else whatever was held and ``received``, in sequence order."""
        det = self._det
        held = self._held
        if det.head_pending():
            for item in received:
                payload = bytes(item.payload)  # the caller reuses its buffer
                held.append(Received(payload, item.retransmission, item.transport_sqn))
                self._held_bytes += len(payload)
            if self._held_bytes <= HEAD_HOLD_BYTES:
                return EMPTY_IN
            det.give_up_head()
        if not held:
            return received
        out = held + list(received)
        out.sort(key=_position)
        self._held = []
        self._held_bytes = 0
        return out

    def take_released(self) -> Sequence[Received]:
        """Payloads held for head loss that may go up now (after :meth:`poll` gave the head up)."""
        if not self._held or self._det.head_pending():
            return EMPTY_IN
        return self._hold(EMPTY_IN)

    def _run_detector(self, now_ns: int, out: list[Outgoing], events: list[ReceiverEvent]) -> None:
        """NAKs and give-ups due at ``now_ns``, plus the detector's pending events."""
        det = self._det
        due = det.next_deadline()
        if due is not None and due <= now_ns:
            packets = det.poll(now_ns)
            if packets:
                out += self._naks(packets)
        events += det.take_events()


def _position(item: Received) -> int:
    return sqn_diff(item.transport_sqn, 0)
