"""The Delivery Controller (DC): ordering, reassembly and loss reporting for one topic from one source.

Seed sections: 2.3.1 (order per topic, per source), 2.4.1 (unrecoverable loss in stream position),
2.4.3 (leading loss suppression), 2.4.5 (burst loss), 2.11.1 (BOS/EOS), 8.3.1 (the DC and its order
map), 8.7 (UM fragmentation), 8.8 (``ordered_delivery`` 1 / -1 / 0), 8.9 (TSNI) and the worked
example 8.11 (8.11.3 reassembly, 8.11.5 the topic-level loss timer).  Spec: ``03-architecture.md``
A16, A28, A32, A33, A35; ``01-fundamentals-and-objects.md`` 2.3, 2.4, 2.11.1.

One :class:`DeliveryController` exists per (subscribed topic, source) pair on a transport session
(seed 8.3.1).  The transport hands it every message of its topic **in arrival order**, recovered
retransmissions and duplicates included; the DC decides what the receiver sees and in what order.
It is sans-I/O: time comes in as ``now_ns`` and every call returns the :class:`Delivery` list to hand
to the receiver, in order.  The runtime calls :meth:`DeliveryController.on_timer` at
:meth:`DeliveryController.next_deadline`.

Sequence numbers are u32 and wrap: every comparison is serial-number arithmetic (RFC 1982 style,
window 2**31) relative to the lowest unresolved sequence number.

Data structures (all per DC):

* ``_next``: the lowest unresolved topic sqn (everything before it was delivered, declared lost or
  dropped); ``_top``: one past the highest sqn known to exist (seen in a message or announced by a
  TSNI).  ``_next == _top`` means no gap.
* ``_held`` (``ordered=1``): the order map, ``sqn -> (payload bytes, flags, properties, fragment)``
  for messages that arrived after a gap.  Payloads are copied to ``bytes`` because the transport reuses
  its receive buffers.
* ``_seen`` (``ordered=-1``/``0``): the received set, sqns in ``(_next, _top)`` that arrived after a
  gap (already delivered, or held as fragments), so duplicates are recognised.
* ``_gaps``: a deque of ``(end, deadline_ns)`` regions.  A region is created when a gap is first seen
  (a message beyond ``_top``, or a TSNI beyond it) and covers every still-missing sqn before ``end``;
  ``now_ns`` never decreases, so deadlines are sorted and the front is the next deadline.
* ``_assembly`` (``ordered=1``): the message being reassembled, fed in sqn order.  ``_asms``
  (``ordered=-1``): partial messages by first sqn, fed in arrival order.
* ``_fast``: the sqn the hot path accepts (``_next`` when the DC is clean: no gap, nothing held, no
  partial message, something already delivered), else -1.  An in-order unfragmented message then costs
  two comparisons, five attribute writes and one :class:`Delivery` (one tuple).
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import FrozenInstanceError, dataclass
from typing import Any, Final, NamedTuple

__all__ = [
    "SQN_MASK",
    "Delivery",
    "DeliveryController",
    "DeliveryKind",
    "DeliveryStatistics",
]

SQN_MASK: Final = 0xFFFF_FFFF
_HALF: Final = 0x8000_0000

Fragment = tuple[int, int, int]
"""``(first_sqn, offset, total_length)`` from an LBMC FRAG header (wire 2.4)."""

_Held = tuple[bytes, int, object, Fragment | None]


class DeliveryKind(enum.Enum):
    """What a :class:`Delivery` is (UM's ``lbm_msg_t.type``)."""

    DATA = "data"  # LBM_MSG_DATA
    BOS = "bos"  # LBM_MSG_BOS: the transport session became active (seed 2.11.1)
    EOS = "eos"  # LBM_MSG_EOS: the transport session ended (seed 2.11.1)
    UNRECOVERABLE_LOSS = "unrecoverable_loss"  # LBM_MSG_UNRECOVERABLE_LOSS: one per lost sqn (2.4.1)
    UNRECOVERABLE_LOSS_BURST = "unrecoverable_loss_burst"  # LBM_MSG_UNRECOVERABLE_LOSS_BURST (2.4.5)

    # Members are singletons compared by identity, so the identity hash is the right one; Enum's own
    # __hash__ is a Python function, and receivers look a kind up in a dict once per message.
    __hash__ = object.__hash__


class Delivery(NamedTuple):
    """One thing the receiver sees, in delivery order (an immutable record).

    ``sqn``: the topic sequence number; for a reassembled message its **last** fragment's sqn (seed
    8.11.3), for a burst the last lost sqn, for BOS 0, for EOS the last sqn known (0 if none).
    ``payload``: the whole message (reassembled into one ``bytes``); an in-order message delivered as it
    arrives is the caller's own object (zero copy); with ``ordered=0`` one fragment's bytes.
    ``flags``/``properties``: passed through from the message (for a reassembled message, from the
    fragment that completed it).  ``first_sqn``: a burst's first lost sqn, or a fragmented message's
    first fragment's sqn (``lbm_msg_retrieve_fragment_info``).  ``fragment``: ``ordered=0`` only,
    ``(first_sqn, offset, total_length)`` of this fragment.
    """

    kind: DeliveryKind
    sqn: int
    payload: bytes | memoryview = b""
    flags: int = 0
    properties: Any = None  # (Any, not object: mypyc resolves NamedTuple annotations by name)
    first_sqn: int | None = None
    fragment: Fragment | None = None

    def __setattr__(self, name: str, value: object) -> None:
        # Immutable like the frozen dataclass it replaced (same exception type).
        raise FrozenInstanceError(f"cannot assign to field {name!r}")


@dataclass(frozen=True, slots=True)
class DeliveryStatistics:
    """A snapshot of one delivery controller's counters.

    ``msgs_delivered``/``bytes_delivered``: DATA deliveries and their payload bytes.
    ``duplicates_dropped``: messages for an sqn already delivered, held, declared lost, or before the
    starting point.  ``out_of_order_held``: messages in the order map now (``ordered=1``).
    ``out_of_order_total``: messages that ever arrived after a gap (held, or with ``ordered=-1``/``0``
    delivered early).  ``unrecoverable_losses``: UNRECOVERABLE_LOSS events delivered.
    ``burst_losses``: UNRECOVERABLE_LOSS_BURST events delivered.  ``burst_discarded``: held messages
    thrown away by a burst reset (seed 2.4.5).  ``leading_losses_suppressed``: lost sqns not reported
    because nothing had been delivered yet (seed 2.4.3).  ``fragments_received``: messages that carried
    a FRAG header.  ``messages_reassembled``: DATA deliveries built from fragments.
    ``fragments_discarded``: fragments dropped because their message cannot be completed (the start was
    before the join, a fragment was lost, inconsistent FRAG headers, or EOS).  ``fragments_held``:
    fragments of partial messages held now.  ``map_entries``: order-map plus received-set entries now.
    ``map_overflow_losses``: sqns declared lost early because ``maximum_map_entries`` was reached.
    ``gaps_pending``: gap regions waiting for their loss timer.  ``tsnis_received``: TSNIs seen.
    """

    msgs_delivered: int
    bytes_delivered: int
    duplicates_dropped: int
    out_of_order_held: int
    out_of_order_total: int
    unrecoverable_losses: int
    burst_losses: int
    burst_discarded: int
    leading_losses_suppressed: int
    fragments_received: int
    messages_reassembled: int
    fragments_discarded: int
    fragments_held: int
    map_entries: int
    map_overflow_losses: int
    gaps_pending: int
    tsnis_received: int


class _Assembly:
    """A message being reassembled from its fragments (seed 8.7)."""

    __slots__ = ("count", "first", "hi", "last", "parts", "size", "total")

    def __init__(self, first: int, total: int) -> None:
        self.first = first
        self.total = total
        self.parts: list[tuple[int, bytes]] = []
        self.size = 0
        self.count = 0
        self.last: int | None = None  # the last fragment's sqn, once it has arrived
        self.hi = first  # the highest sqn received (serial order)


def _behind(sqn: int, ref: int) -> bool:
    """``sqn`` precedes ``ref`` in serial-number order (RFC 1982, window 2**31)."""
    return ((sqn - ref) & SQN_MASK) >= _HALF


_DATA: Final = DeliveryKind.DATA
_LOSS: Final = DeliveryKind.UNRECOVERABLE_LOSS

# A NamedTuple is built by one C call (the tuple) where a frozen slotted dataclass costs a Python
# __init__ and one descriptor call per field: the hot path builds one Delivery per message.
_new_tuple = tuple.__new__


def _delivery(
    kind: DeliveryKind,
    sqn: int,
    payload: bytes | memoryview,
    flags: int,
    properties: object,
    first_sqn: int | None,
    fragment: Fragment | None,
) -> Delivery:
    """``Delivery(kind, sqn, ...)`` without the keyword-argument handling of the constructor."""
    return _new_tuple(Delivery, (kind, sqn, payload, flags, properties, first_sqn, fragment))


class DeliveryController:
    """Receive-side topic layer for one (topic, source): seed 8.3.1, spec A16/A32/A35.

    ``ordered``: ``ordered_delivery (receiver)``: 1 sequence order with reassembly (default), -1
    arrival order with reassembly, 0 arrival order without reassembly (every fragment is its own DATA).
    ``loss_timeout_ns``: how long a gap may stay open before its missing sqns are declared unrecoverable
    (the topic-level timer equal to the NAK generation interval, 10 s by default, seed 8.11.5); 0
    declares at once (the TCP transport never retransmits).  ``maximum_burst_loss``:
    ``delivery_control_maximum_burst_loss``: a newly revealed contiguous gap of **more** than this many
    sqns is declared lost at once as one burst (seed 2.4.5; 0 makes every gap a burst, the guide
    recommends 1000000000, effectively off).  ``maximum_map_entries``:
    ``delivery_control_maximum_total_map_entries``: most order-map / received-set entries; beyond it the
    oldest gap is declared lost early (0: unbounded).  ``report_gaps``: keep the gaps as they open for
    :meth:`take_new_gaps` (off-transport recovery starts its initial delay there; :meth:`fill` puts what
    it recovers back into the stream).

    Rules:

    * The first message seen sets the starting point; anything before it is dropped as old.
    * ``ordered=1``: messages after a gap wait in the order map until the gap fills (then all are
      delivered in order) or its timer expires: then one UNRECOVERABLE_LOSS per missing sqn, in stream
      position, then the held messages (seed 2.4.1).  A late copy of an sqn already delivered or
      declared lost is a duplicate.
    * ``ordered=-1``: complete messages are delivered as they arrive; fragments are held until their
      message is complete; a gap's missing sqns are still reported when its timer expires.
      ``ordered=0``: the same without reassembly.
    * Fragments (seed 8.7, 8.11.3): a reassembled message is delivered once with ``sqn`` = its last
      fragment's and ``first_sqn`` = its first's.  A message with a lost fragment is never delivered
      partially: its missing sqns are reported lost and its received fragments are dropped (counted).
    * Leading loss suppression (seed 2.4.3): no loss event of either kind before the first DATA; e.g. a
      join in the middle of a fragmented message silently drops the tail fragments.
    * Burst loss (seed 2.4.5): see :meth:`on_message`.
    * Loss timers are checked whenever the DC is called (a due timer fires before the message that
      arrives with it is looked at) and by :meth:`on_timer`.

    ``now_ns`` must not decrease from call to call.
    """

    __slots__ = (
        "_asms",
        "_assembly",
        "_bos_done",
        "_burst_discarded",
        "_bursts",
        "_bytes",
        "_cap",
        "_delivered",
        "_delivered_any",
        "_dups",
        "_ended",
        "_fast",
        "_frags_discarded",
        "_frags_rcvd",
        "_gap_log",
        "_gaps",
        "_held",
        "_leading",
        "_losses",
        "_max_burst",
        "_next",
        "_ooo_total",
        "_ordered",
        "_overflow_losses",
        "_reassembled",
        "_seen",
        "_started",
        "_timeout",
        "_top",
        "_tsnis",
    )

    def __init__(
        self,
        *,
        ordered: int = 1,
        loss_timeout_ns: int = 10_000_000_000,
        maximum_burst_loss: int = 1024,
        maximum_map_entries: int = 200_000,
        report_gaps: bool = False,
    ) -> None:
        if ordered not in (1, 0, -1):
            raise ValueError(f"ordered must be 1, 0 or -1, not {ordered!r}")
        if loss_timeout_ns < 0 or maximum_burst_loss < 0 or maximum_map_entries < 0:
            raise ValueError("loss_timeout_ns, maximum_burst_loss and maximum_map_entries must be >= 0")
        self._ordered = ordered
        self._timeout = loss_timeout_ns
        self._max_burst = maximum_burst_loss
        self._cap = maximum_map_entries
        self._started = False
        self._ended = False
        self._bos_done = False
        self._delivered_any = False
        self._next = 0
        self._top = 0
        self._fast = -1
        self._held: dict[int, _Held] = {}
        self._seen: set[int] = set()
        self._gaps: deque[tuple[int, int]] = deque()
        self._assembly: _Assembly | None = None
        self._asms: dict[int, _Assembly] = {}
        self._delivered = 0
        self._bytes = 0
        self._dups = 0
        self._ooo_total = 0
        self._losses = 0
        self._bursts = 0
        self._burst_discarded = 0
        self._leading = 0
        self._frags_rcvd = 0
        self._reassembled = 0
        self._frags_discarded = 0
        self._overflow_losses = 0
        self._tsnis = 0
        # report_gaps (OTR, UM Concepts Guide 10.3): the gaps opened since take_new_gaps last ran.
        self._gap_log: list[tuple[int, int]] | None = [] if report_gaps else None

    # ----------------------------------------------------------------------------------------- API

    def begin(self, now_ns: int) -> list[Delivery]:
        """The transport session became active: one BOS, only the first time (seed 2.11.1, 8.11.1).

        BOS means the *session* saw activity, not this topic, so the transport calls it on every DC of
        the session.  After :meth:`end` no BOS is given (EOS without BOS is allowed, the reverse not)."""
        if self._bos_done or self._ended:
            return []
        self._bos_done = True
        return [Delivery(DeliveryKind.BOS, 0)]

    def on_message(
        self,
        sqn: int,
        payload: bytes | memoryview,
        now_ns: int,
        *,
        fragment: Fragment | None = None,
        flags: int = 0,
        properties: object = None,
    ) -> list[Delivery]:
        """One message of this topic, in arrival order; returns what the receiver now sees, in order.

        ``fragment`` is ``(first_sqn, offset, total_length)`` from the message's FRAG header, ``None``
        for an unfragmented message.  Burst loss (seed 2.4.5): when the gap between the highest sqn
        known and ``sqn`` holds more than ``maximum_burst_loss`` sqns, one UNRECOVERABLE_LOSS_BURST
        covering every unresolved sqn before ``sqn`` (``first_sqn`` = the lowest unresolved one) is
        delivered at once, the order map and partial messages are discarded, pending gap timers are
        cancelled, and delivery continues from ``sqn``.  With ``ordered=-1``/``0`` the burst range may
        include sqns already delivered early; it still names the span given up on.
        """
        if fragment is None and self.take_next(sqn, len(payload)):
            return [_new_tuple(Delivery, (_DATA, sqn, payload, flags, properties, None, None))]
        return self._on_message_slow(sqn, payload, now_ns, fragment, flags, properties)

    def take_next(self, sqn: int, size: int) -> bool:
        """The hot path of :meth:`on_message` (seed 8.3.1), for an unfragmented message of ``size``
        payload bytes: when ``sqn`` is the next one, with no gap, nothing held and nothing
        half-reassembled, account for it as delivered and return True (the caller delivers it as DATA
        at once, and no timer changes); otherwise change nothing and return False (use ``on_message``).
        """
        if sqn != self._fast:
            return False
        self._fast = self._next = self._top = (sqn + 1) & SQN_MASK
        self._delivered += 1
        self._bytes += size
        return True

    def fill(
        self,
        sqn: int,
        payload: bytes | memoryview,
        now_ns: int,
        fragment: Fragment | None = None,
        flags: int = 0,
        properties: object = None,
    ) -> tuple[bool, list[Delivery]]:
        """A message recovered off the transport (OTR, UM Concepts Guide 10.3): when ``sqn`` is still
        missing inside an open gap (at or after the next sqn due, before the highest known, neither held
        nor declared lost), take it as if the transport had brought it, with ``flags``, and return
        ``(True, outputs)``: it and whatever was held behind it are delivered in place.  Otherwise change
        nothing and return ``(False, outputs)``: the DC has resolved that sqn (delivered or declared
        lost) or never knew it.  ``outputs`` include the loss timers that were due either way."""
        if self._ended or not self._started:
            return False, []
        out: list[Delivery] = []
        if self._gaps and self._gaps[0][1] <= now_ns:
            self._expire(now_ns, out)
            self._refresh()
        sqn &= SQN_MASK
        if _behind(sqn, self._next) or not _behind(sqn, self._top) or sqn in self._held or sqn in self._seen:
            return False, out
        out.extend(self._on_message_slow(sqn, payload, now_ns, fragment, flags, properties))
        return True, out

    def take_new_gaps(self) -> list[tuple[int, int]]:
        """With ``report_gaps``: the gaps (first, last sqn, inclusive) opened since the last call, when
        they opened (a message after missing ones, or a TSNI beyond the highest sqn known); OTR's initial
        delay runs from then (UM Concepts Guide 10.3).  Always empty without ``report_gaps``."""
        log = self._gap_log
        if not log:
            return []
        self._gap_log = []
        return log

    def on_tsni(self, sqn: int, now_ns: int) -> list[Delivery]:
        """A TSNI: ``sqn`` is the last sqn the source sent on this topic (seed 8.9, spec A33/A35).

        If it is at or beyond the highest sqn known, the sqns up to and including it are a gap: its
        timer starts now and, unless they arrive (the transport recovers, the DC does not), they are
        reported unrecoverable ``loss_timeout_ns`` later (8.11.5: TSNI at T=5 s, loss at T=15 s).  Such a
        gap larger than ``maximum_burst_loss`` is a burst.  A TSNI for an sqn already known is only
        liveness.  A TSNI before any message sets no starting point."""
        self._tsnis += 1
        if self._ended or not self._started:
            return []
        out: list[Delivery] = []
        if self._gaps and self._gaps[0][1] <= now_ns:
            self._expire(now_ns, out)
        sqn &= SQN_MASK
        ahead = (sqn - self._top) & SQN_MASK
        if ahead < _HALF:
            end = (sqn + 1) & SQN_MASK
            if ahead + 1 > self._max_burst:
                self._burst(end, out)
            else:
                self._gaps.append((end, now_ns + self._timeout))
                if self._gap_log is not None:
                    self._gap_log.append((self._top, sqn))
                self._top = end
            if self._gaps and self._gaps[0][1] <= now_ns:
                self._expire(now_ns, out)
        self._refresh()
        return out

    def on_timer(self, now_ns: int) -> list[Delivery]:
        """Run the loss timers due at ``now_ns``: each expired gap's missing sqns are declared lost and
        whatever was held behind them is delivered (seed 2.4.1, 8.11.5)."""
        out: list[Delivery] = []
        if self._gaps and self._gaps[0][1] <= now_ns:
            self._expire(now_ns, out)
            self._refresh()
        return out

    def next_deadline(self) -> int | None:
        """When :meth:`on_timer` next has work (the oldest open gap's deadline), or ``None``."""
        return self._gaps[0][1] if self._gaps else None

    def end(self, now_ns: int) -> list[Delivery]:
        """The transport session ended: EOS, once (seed 2.11.1, 8.11.6), after anything deliverable.

        Choice: no retransmission can fill a gap any more, so every open gap is declared unrecoverable
        now (without waiting for its timer), in stream position, and the messages held behind it are
        delivered before EOS.  Partial messages whose remaining fragments were never seen are dropped
        (counted in ``fragments_discarded``).  Held state is then released; later messages are ignored
        (none come: the transport session delivers nothing after it ended, so nothing counts them)."""
        if self._ended:
            return []
        out: list[Delivery] = []
        last = 0
        if self._started:
            if self._next != self._top:
                self._resolve(self._top, out)
            self._drop_partials()
            last = (self._top - 1) & SQN_MASK
        out.append(Delivery(DeliveryKind.EOS, last))
        self._ended = True
        self._fast = -1
        self._held.clear()
        self._seen.clear()
        self._gaps.clear()
        return out

    def statistics(self) -> DeliveryStatistics:
        """A frozen snapshot of the counters (see :class:`DeliveryStatistics`)."""
        held_frags = sum(a.count for a in self._asms.values())
        if self._assembly is not None:
            held_frags += self._assembly.count
        return DeliveryStatistics(
            msgs_delivered=self._delivered,
            bytes_delivered=self._bytes,
            duplicates_dropped=self._dups,
            out_of_order_held=len(self._held),
            out_of_order_total=self._ooo_total,
            unrecoverable_losses=self._losses,
            burst_losses=self._bursts,
            burst_discarded=self._burst_discarded,
            leading_losses_suppressed=self._leading,
            fragments_received=self._frags_rcvd,
            messages_reassembled=self._reassembled,
            fragments_discarded=self._frags_discarded,
            fragments_held=held_frags,
            map_entries=len(self._held) + len(self._seen),
            map_overflow_losses=self._overflow_losses,
            gaps_pending=len(self._gaps),
            tsnis_received=self._tsnis,
        )

    # ------------------------------------------------------------------------------ arrival (slow)

    def _on_message_slow(
        self,
        sqn: int,
        payload: bytes | memoryview,
        now_ns: int,
        fragment: Fragment | None,
        flags: int,
        properties: object,
    ) -> list[Delivery]:
        if self._ended:
            return []
        sqn &= SQN_MASK
        out: list[Delivery] = []
        if fragment is not None:
            self._frags_rcvd += 1
        if not self._started:
            self._started = True  # the first message seen sets the starting point
            self._next = self._top = sqn
        elif self._gaps and self._gaps[0][1] <= now_ns:
            self._expire(now_ns, out)  # timers that were due fire before this arrival is looked at
        if _behind(sqn, self._next) or sqn in self._held or sqn in self._seen:
            self._dups += 1
            self._refresh()
            return out
        ahead = (sqn - self._top) & SQN_MASK
        if ahead < _HALF:  # at or beyond the highest sqn known
            if ahead > self._max_burst:
                self._burst(sqn, out)
            elif ahead:
                self._gaps.append((sqn, now_ns + self._timeout))  # the gap's timer starts now
                if self._gap_log is not None:
                    self._gap_log.append((self._top, (sqn - 1) & SQN_MASK))
            self._top = (sqn + 1) & SQN_MASK
        if self._ordered == 1:
            self._arrive_ordered(sqn, payload, fragment, flags, properties, out)
        else:
            self._arrive_unordered(sqn, payload, fragment, flags, properties, out)
        if self._gaps and self._gaps[0][1] <= now_ns:
            self._expire(now_ns, out)  # loss_timeout_ns == 0: declare at once
        self._refresh()
        return out

    def _arrive_ordered(
        self,
        sqn: int,
        payload: bytes | memoryview,
        fragment: Fragment | None,
        flags: int,
        properties: object,
        out: list[Delivery],
    ) -> None:
        if sqn == self._next:
            self._take(sqn, payload, flags, properties, fragment, out)
            self._next = (sqn + 1) & SQN_MASK
            if self._held:
                self._drain(out)
            return
        # After a gap: hold a copy in the order map (the transport reuses its receive buffer).
        self._held[sqn] = (bytes(payload), flags, properties, fragment)
        self._ooo_total += 1
        if self._cap and len(self._held) > self._cap:
            self._overflow(out)

    def _arrive_unordered(
        self,
        sqn: int,
        payload: bytes | memoryview,
        fragment: Fragment | None,
        flags: int,
        properties: object,
        out: list[Delivery],
    ) -> None:
        if sqn == self._next:
            nxt = (sqn + 1) & SQN_MASK
            seen = self._seen
            while nxt in seen:
                seen.discard(nxt)
                nxt = (nxt + 1) & SQN_MASK
            self._next = nxt
        else:
            self._seen.add(sqn)
            self._ooo_total += 1
        if self._asms:
            self._break_covering(sqn, None if fragment is None else fragment[0])
        if fragment is None or self._ordered == 0:
            self._emit_data(sqn, payload, flags, properties, None, out, fragment)
        else:
            self._assemble_unordered(sqn, payload, fragment, flags, properties, out)
        if self._cap and len(self._seen) > self._cap:
            self._overflow(out)

    # ------------------------------------------------------------------------- in-order processing

    def _take(
        self,
        sqn: int,
        payload: bytes | memoryview,
        flags: int,
        properties: object,
        fragment: Fragment | None,
        out: list[Delivery],
    ) -> None:
        """``ordered=1``: the message at stream position ``sqn`` (``== _next``) is processed."""
        asm = self._assembly
        if fragment is None:
            if asm is not None:  # an unfragmented message where a fragment was due: malformed
                self._drop_asm()
            self._emit_data(sqn, payload, flags, properties, None, out)
            return
        first, offset, total = fragment
        if sqn == first:
            if asm is not None:
                self._drop_asm()
            if offset != 0 or len(payload) > total:
                self._frags_discarded += 1
                return
            if len(payload) == total:  # a one-fragment message: nothing to assemble
                self._reassembled += 1
                self._emit_data(sqn, payload, flags, properties, first, out)
                return
            asm = self._assembly = _Assembly(first, total)
        elif asm is None or asm.first != first or asm.total != total or asm.size != offset:
            # Its message started before the join, lost a fragment, or the headers disagree (2.4.3).
            if asm is not None:
                self._drop_asm()
            self._frags_discarded += 1
            return
        asm.parts.append((offset, bytes(payload)))
        asm.size += len(payload)
        asm.count += 1
        if asm.size >= total:
            self._assembly = None
            if asm.size > total:
                self._frags_discarded += asm.count
                return
            self._reassembled += 1
            whole = b"".join(p for _, p in asm.parts)
            self._emit_data(sqn, whole, flags, properties, first, out)

    def _drain(self, out: list[Delivery]) -> None:
        """``ordered=1``: deliver held messages from ``_next`` while they are contiguous."""
        held = self._held
        s = self._next
        while True:
            item = held.pop(s, None)
            if item is None:
                break
            self._take(s, item[0], item[1], item[2], item[3], out)
            s = (s + 1) & SQN_MASK
        self._next = s
        self._prune()

    def _drop_asm(self) -> None:
        asm = self._assembly
        if asm is not None:
            self._frags_discarded += asm.count
            self._assembly = None

    # ------------------------------------------------------------------ arrival-order reassembly

    def _assemble_unordered(
        self,
        sqn: int,
        payload: bytes | memoryview,
        fragment: Fragment,
        flags: int,
        properties: object,
        out: list[Delivery],
    ) -> None:
        """``ordered=-1``: fragments are held until their message is complete (seed 8.8)."""
        first, offset, total = fragment
        size = len(payload)
        if _behind(sqn, first) or offset + size > total:
            self._frags_discarded += 1
            return
        asm = self._asms.get(first)
        if asm is None:
            if first == sqn and offset == 0 and size == total:
                self._reassembled += 1  # a one-fragment message
                self._emit_data(sqn, payload, flags, properties, first, out)
                return
            if first != sqn and (_behind(first, self._next) or first in self._seen):
                # The first fragment is resolved and its message is not being assembled: it started
                # before the join, lost a fragment, or was broken.  Dropped silently (2.4.3).
                self._frags_discarded += 1
                return
            asm = self._asms[first] = _Assembly(first, total)
        elif asm.total != total:
            del self._asms[first]
            self._frags_discarded += asm.count + 1
            return
        asm.parts.append((offset, bytes(payload)))
        asm.size += size
        asm.count += 1
        if offset + size == total:
            asm.last = sqn
        if not _behind(sqn, asm.hi):
            asm.hi = sqn
        if asm.size < total:
            after = (asm.hi + 1) & SQN_MASK
            if asm.last is None and (_behind(after, self._next) or after in self._seen):
                # Its next fragment's sqn was already taken by another message: it cannot complete.
                del self._asms[first]
                self._frags_discarded += asm.count
            return
        del self._asms[first]
        asm.parts.sort()
        pos = 0
        for off, part in asm.parts:
            if off != pos:
                break
            pos += len(part)
        last = asm.last
        if pos != total or last is None or asm.count != ((last - first) & SQN_MASK) + 1:
            self._frags_discarded += asm.count  # overlapping or inconsistent fragments
            return
        self._reassembled += 1
        whole = b"".join(p for _, p in asm.parts)
        self._emit_data(last, whole, flags, properties, first, out)

    def _break_covering(self, sqn: int, keep_first: int | None) -> None:
        """``ordered=-1``: ``sqn`` was resolved (declared lost, or taken by a message that is not a
        fragment of ``keep_first``).  A partial message whose sqn range includes ``sqn`` can never
        complete: drop it.  Its range is ``first..last``; while ``last`` is unknown it reaches at least
        ``hi + 1`` (fragments are consecutive and ``hi`` is not the last).  Losses are declared in sqn
        order, so a message missing a fragment is caught at its first missing sqn."""
        for first, asm in list(self._asms.items()):
            if first == keep_first or _behind(sqn, first):
                continue
            end = asm.last if asm.last is not None else (asm.hi + 1) & SQN_MASK
            if not _behind(end, sqn):
                del self._asms[first]
                self._frags_discarded += asm.count

    def _drop_partials(self) -> None:
        self._drop_asm()
        for asm in self._asms.values():
            self._frags_discarded += asm.count
        self._asms.clear()

    # ----------------------------------------------------------------------------------- loss

    def _expire(self, now_ns: int, out: list[Delivery]) -> None:
        """Declare the missing sqns of every gap whose timer is due (seed 2.4.1, 8.11.5)."""
        gaps = self._gaps
        while gaps and gaps[0][1] <= now_ns:
            end = gaps.popleft()[0]
            d = (end - self._next) & SQN_MASK
            if d and d < _HALF:
                self._resolve(end, out)

    def _resolve(self, end: int, out: list[Delivery]) -> None:
        """Every unresolved sqn before ``end`` (which is ahead of ``_next``) is now final: missing ones
        are reported lost in stream position, received ones delivered (``ordered=1``)."""
        s = self._next
        if self._ordered == 1:
            held = self._held
            while s != end:
                item = held.pop(s, None)
                if item is None:
                    self._drop_asm()  # a message with a lost fragment is never delivered partially
                    self._emit_loss(s, out)
                else:
                    self._take(s, item[0], item[1], item[2], item[3], out)
                s = (s + 1) & SQN_MASK
            self._next = s
            self._drain(out)
            return
        seen = self._seen
        lost: list[int] = []
        while s != end:
            if s in seen:
                seen.discard(s)
            else:
                lost.append(s)
            s = (s + 1) & SQN_MASK
        while s in seen:
            seen.discard(s)
            s = (s + 1) & SQN_MASK
        self._next = s
        for sqn in lost:
            if self._asms:
                self._break_covering(sqn, None)
            self._emit_loss(sqn, out)
        self._prune()

    def _overflow(self, out: list[Delivery]) -> None:
        """The order map is full: declare the oldest gap lost early so memory stays bounded (8.3.1)."""
        store: dict[int, _Held] | set[int] = self._held if self._ordered == 1 else self._seen
        while len(store) > self._cap:
            s = self._next
            while s not in store:
                s = (s + 1) & SQN_MASK
            self._overflow_losses += (s - self._next) & SQN_MASK
            self._resolve(s, out)

    def _burst(self, end: int, out: list[Delivery]) -> None:
        """Burst loss (seed 2.4.5): every unresolved sqn before ``end`` is lost as ONE event; the order
        map is discarded and loss handling restarts at ``end``."""
        first = self._next
        self._burst_discarded += len(self._held)
        self._held.clear()
        self._seen.clear()
        self._gaps.clear()
        self._drop_partials()
        if self._delivered_any:
            self._bursts += 1
            out.append(Delivery(DeliveryKind.UNRECOVERABLE_LOSS_BURST, (end - 1) & SQN_MASK, first_sqn=first))
        else:
            self._leading += (end - first) & SQN_MASK
        self._next = self._top = end

    # --------------------------------------------------------------------------------- helpers

    def _emit_data(
        self,
        sqn: int,
        payload: bytes | memoryview,
        flags: int,
        properties: object,
        first: int | None,
        out: list[Delivery],
        fragment: Fragment | None = None,
    ) -> None:
        out.append(_delivery(_DATA, sqn, payload, flags, properties, first, fragment))
        self._delivered += 1
        self._bytes += len(payload)
        self._delivered_any = True

    def _emit_loss(self, sqn: int, out: list[Delivery]) -> None:
        if self._delivered_any:
            self._losses += 1
            out.append(_delivery(_LOSS, sqn, b"", 0, None, None, None))
        else:
            self._leading += 1  # leading loss suppression (seed 2.4.3)

    def _prune(self) -> None:
        """Forget gap regions that ``_next`` has passed (filled or declared)."""
        gaps = self._gaps
        nxt = self._next
        while gaps:
            d = (gaps[0][0] - nxt) & SQN_MASK
            if d and d < _HALF:
                break
            gaps.popleft()

    def _refresh(self) -> None:
        """Re-arm the hot path when the DC is clean."""
        self._prune()
        clean = (
            self._next == self._top
            and self._delivered_any
            and self._assembly is None
            and not self._asms
            and not self._gaps
            and not self._ended
        )
        self._fast = self._next if clean else -1
