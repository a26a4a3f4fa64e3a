"""Merging live data with Late Join and OTR retransmissions: each sqn reaches the application once.

UM Concepts Guide 10.2.5-10.2.6 (the receiver merges retransmissions and live messages into one
ascending stream, caching live messages while it recovers), 10.3.1 (OTR with ordered delivery), 3.5
(``LBM_MSG_RETRANSMIT`` / ``LBM_MSG_OTR``), 2.4.3 and 2.4.5 (leading and burst loss).

:class:`RecoveryMerge` sits between a topic's :class:`~openum.protocol.delivery.DeliveryController`
(live data: ordered, reassembled, loss declared after the transport gave up) and the receiver's
callback, and owns that (topic, source)'s :class:`RecoveryRequester`.  Contract:

* the transport hands **every** DC output to :meth:`RecoveryMerge.on_live` (BOS, DATA, losses, EOS);
* ``to_dc`` (see :data:`ToDc`) lets an OTR retransmission fill a gap the DC still holds open (OTR may
  start before the DC gives up, guide 10.3.2): the DC then reassembles and orders it with what it holds;
  without it, such a message is delivered by the merge and the DC's later loss for it is ignored, but
  the DC keeps its later messages until its own loss timer runs out;
* every retransmitted data message (LBMC type 0xA) of this topic from this source goes to
  :meth:`on_retransmission`, UME_LJ_INFO to :meth:`on_late_join_info`, the TSNI answering a T request
  to :meth:`on_initial_sqn`;
* :meth:`start_late_join` is called when the receiver joins a source whose TIR offers Late Join,
  before any live message is handed over;
* the caller delivers :attr:`Step.deliveries` in order, sends :attr:`Step.requests` to the source's
  request port, logs :attr:`Step.warnings`, and calls :meth:`poll` at :meth:`next_deadline`.

Guarantees (property-tested): no sqn is delivered twice; with ``ordered=1`` deliveries ascend; every
sqn from the stream's start on is delivered or reported lost exactly once, except fragments that can
never form a whole message (dropped silently, as the DC does).

With ``ordered=1`` a loss the DC declares is not passed on while OTR is on: the sqn is requested and
everything after it is held (cached) until it is recovered or given up.  While recovery holds the
stream, a live message is cached only while it is fewer than ``retransmit_message_caching_proximity``
sqns ahead of the delivery point (>= 0x7FFFFFFF: always) and, while OTR (not late join) holds the
stream, fewer than ``otr_message_caching_threshold`` messages are held; otherwise it is dropped and
requested again as a retransmission (guide 10.2.6: the stated rule, not the worked example, which has
it backwards).  DC losses are never held back when OTR is off; a burst is final (guide 2.4.5).  Losses
of late join are reported even before the first message: the receiver asked for those sqns.
With ``ordered`` -1 / 0 everything is delivered as it arrives, with duplicates dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from openum.protocol.delivery import SQN_MASK, Delivery, DeliveryKind
from openum.protocol.recovery._requester import RecoveryRequester
from openum.protocol.recovery._types import (
    MSG_FLAG_OTR,
    MSG_FLAG_RETRANSMIT,
    Fragment,
    LateJoinAbandoned,
    LateJoinPlanned,
    MergeStatistics,
    RecoveryKind,
    RecoveryLost,
    RecoveryWarning,
    SendRequest,
    Step,
    ToDc,
    Unwrap,
    runs,
)
from openum.wire.lbmc import LateJoinInfoHeader

__all__ = ["RecoveryMerge"]


_PROXIMITY_OFF: Final = 0x7FFF_FFFF
_NONE: Final[tuple[()]] = ()

# Item kinds
_DATA, _RX, _LOSS, _BURST, _SKIP = range(5)


class _Item:
    __slots__ = ("delivery", "end", "fragment", "kind", "otr", "start")

    def __init__(
        self, kind: int, start: int, end: int, delivery: Delivery | None, fragment: Fragment | None, otr: bool
    ) -> None:
        self.kind = kind
        self.start = start
        self.end = end
        self.delivery = delivery
        self.fragment = fragment
        self.otr = otr


class _Assembly:
    __slots__ = ("first", "otr_sqns", "parts", "size", "total")

    def __init__(self, first: int, total: int) -> None:
        self.first = first
        self.total = total
        self.parts: list[bytes] = []
        self.size = 0
        self.otr_sqns: list[int] = []  # recovered by OTR: reported lost if the message cannot complete


class RecoveryMerge:
    """The merge stage of one (topic, source) (module docstring).  ``ordered``: the receiver's
    ``ordered_delivery`` (1, -1 or 0), as given to its DC."""

    def __init__(self, requester: RecoveryRequester, *, ordered: int = 1, to_dc: ToDc | None = None) -> None:
        if ordered not in (1, 0, -1):
            raise ValueError(f"ordered must be 1, 0 or -1, not {ordered!r}")
        self._req = requester
        self._to_dc = to_dc
        self._ordered = ordered
        self._proximity = requester.params.retransmit_message_caching_proximity
        self._otr_cap = requester.params.otr_message_caching_threshold
        self._u = Unwrap()
        self._cursor: int | None = None  # ordered=1: the next sqn to hand on
        self._held: dict[int, _Item] = {}  # by start sqn
        self._cover: dict[int, int] = {}  # every held sqn -> its item's start
        self._live_next: int | None = None  # one past the last live item (holes are DC discards)
        self._first_live: int | None = None
        self._latest_rx: int | None = None
        self._asm: _Assembly | None = None
        self._asms: dict[int, list[tuple[int, int, bytes]]] = {}  # ordered=-1: first -> fragments
        self._done: set[int] = set()  # ordered=-1/0: resolved sqns at or above _floor
        self._floor: int | None = None
        self._released_any = False
        self._ended = False
        self._resume_from: int | None = None
        self._out: list[Delivery] = []
        self._requests: list[SendRequest] = []
        self._warnings: list[str] = []
        self._n = dict.fromkeys(("data", "lj", "otr", "dup", "dropped", "loss", "burst", "frag"), 0)

    @property
    def requester(self) -> RecoveryRequester:
        return self._req

    # ------------------------------------------------------------------------------------- API

    def start_late_join(self, now_ns: int, *, want_from: int | None = None) -> bool:
        """Start Late Join (see :meth:`RecoveryRequester.start_late_join`); False when it is off or
        live data was already handed on."""
        if self._released_any or self._first_live is not None:
            return False
        return self._req.start_late_join(now_ns, want_from=want_from)

    def take_next(self, sqn: int) -> bool:
        """The receive hot path: the DC delivered ``sqn`` at once as the next message in order.  True
        when the merge holds nothing and recovers nothing, so the message goes to the application
        unchanged and the merge only notes it; False changes nothing (hand it to :meth:`on_live`)."""
        cursor = self._cursor
        if (
            cursor is None
            or cursor != self._live_next
            or (cursor & SQN_MASK) != sqn
            or self._held
            or self._asm is not None
            or self._ended
            or not self._req.idle
        ):
            return False
        self._u(sqn)
        self._cursor = self._live_next = cursor + 1
        self._n["data"] += 1
        return True

    def resume(self, sqn: int) -> None:
        """The receiver had this source's stream up to ``sqn - 1`` before its transport session ended
        and was joined again (a TCP reconnect): what the source sent in between is recovered by OTR
        when the first live message shows the gap (without OTR that gap is not reported, as with any
        join).  Call before any live message is handed over."""
        if self._first_live is None and not self._released_any:
            self._resume_from = self._u(sqn & SQN_MASK)

    @property
    def next_sqn(self) -> int | None:
        """One past the newest sqn of the stream handed on or held (None before any): where a
        :meth:`resume` after a reconnect starts."""
        top = self._live_next
        if self._cursor is not None and (top is None or self._cursor > top):
            top = self._cursor
        return None if top is None else top & SQN_MASK

    def on_live(self, deliveries: Iterable[Delivery], now_ns: int) -> Step:
        """The DC's outputs, in the order it gave them."""
        for d in deliveries:
            if self._ended:
                break
            kind = d.kind
            if kind is DeliveryKind.BOS:
                self._out.append(d)
            elif kind is DeliveryKind.EOS:
                self._end(d, now_ns)
            else:
                self._live(d, now_ns)
        return self._step(now_ns)

    def on_gap(self, first: int, last: int, now_ns: int) -> Step:
        """Optional: the DC saw ``first..last`` missing (before declaring it lost): start OTR now, so
        that its initial delay runs from the gap as in UM (guide 10.3.2)."""
        if not self._ended:
            self._req.on_loss(first, last, now_ns)
        return self._step(now_ns)

    def on_retransmission(
        self,
        sqn: int,
        payload: bytes | memoryview,
        now_ns: int,
        *,
        fragment: Fragment | None = None,
        flags: int = 0,
        properties: object = None,
    ) -> Step:
        """A retransmitted message (LBMC type 0xA) with its original ``sqn``."""
        if not self._ended:
            kind = self._req.on_retransmission(sqn, now_ns)
            otr = kind is RecoveryKind.OTR
            flags |= MSG_FLAG_OTR if otr else MSG_FLAG_RETRANSMIT
            s = self._u(sqn & SQN_MASK)
            if self._latest_rx is None or s > self._latest_rx:
                self._latest_rx = s
            if otr and self._to_dc is not None:
                taken, outputs = self._to_dc(sqn & SQN_MASK, payload, now_ns, fragment, flags, properties)
                for item in outputs:
                    if not self._ended:
                        self._live(item, now_ns)
                if taken:  # the DC filled its gap with it
                    return self._step(now_ns)
            d = Delivery(DeliveryKind.DATA, sqn & SQN_MASK, bytes(payload), flags, properties)
            if self._ordered == 1:
                if self._insert(_Item(_RX, s, s, d, fragment, otr)):
                    self._release()
                else:
                    self._n["dup"] += 1
            else:
                self._arrive_unordered(s, s, d, fragment, otr)
        return self._step(now_ns)

    def on_late_join_info(self, info: LateJoinInfoHeader, now_ns: int) -> Step:
        if not self._ended:
            self._req.on_late_join_info(info, now_ns)
        return self._step(now_ns)

    def on_initial_sqn(self, sqn: int, now_ns: int) -> Step:
        """The TSNI answer to the requester's T request (``sqn``: the last sqn the source sent)."""
        if not self._ended:
            self._req.on_initial_sqn(sqn, now_ns)
        return self._step(now_ns)

    def poll(self, now_ns: int) -> Step:
        return self._step(now_ns)

    def next_deadline(self) -> int | None:
        return None if self._ended else self._req.next_deadline()

    def statistics(self) -> MergeStatistics:
        n = self._n
        return MergeStatistics(
            delivered=n["data"],
            recovered_late_join=n["lj"],
            recovered_otr=n["otr"],
            duplicates_dropped=n["dup"],
            live_dropped=n["dropped"],
            held=len(self._held),
            losses=n["loss"],
            bursts=n["burst"],
            fragments_discarded=n["frag"],
        )

    # ------------------------------------------------------------------------------- plumbing

    def _step(self, now_ns: int) -> Step:
        if not self._ended and not self._req.idle:
            self._absorb(now_ns)
        out, self._out = self._out, []
        if not self._requests and not self._warnings:
            return Step(out, _NONE, _NONE)
        requests, self._requests = self._requests, []
        warnings, self._warnings = self._warnings, []
        return Step(out, requests, warnings)

    def _absorb(self, now_ns: int) -> None:
        """Run the requester and act on what it says."""
        for o in self._req.poll(now_ns):
            if isinstance(o, SendRequest):
                self._requests.append(o)
            elif isinstance(o, RecoveryWarning):
                self._warnings.append(o.text)
            elif isinstance(o, RecoveryLost):
                self._lost(o)
            elif isinstance(o, LateJoinPlanned):
                self._set_start(self._u(o.start))
            elif isinstance(o, LateJoinAbandoned):  # the stream starts at the first live message
                if self._ordered == 1 and self._cursor is None and self._held:
                    self._set_start(min(self._held))
                elif self._ordered != 1 and self._floor is None and self._done:
                    self._set_start(min(self._done))
        if self._ordered == 1:
            self._release()

    def _set_start(self, start: int) -> None:
        if self._ordered != 1:
            self._floor = start
            self._done = {s for s in self._done if s >= start}
            self._resolve(start, start - 1)  # advance the floor over what is resolved
            return
        self._cursor = start
        for key in [k for k in self._held if k < start]:
            self._n["dup"] += 1
            self._unhold(key)

    # ------------------------------------------------------------------------------------ live

    def _live(self, d: Delivery, now_ns: int) -> None:
        kind = d.kind
        end = self._u(d.sqn)
        if (  # the common case: the next message in order, nothing held, nothing being recovered
            kind is DeliveryKind.DATA
            and d.first_sqn is None
            and end == self._cursor
            and end == self._live_next
            and not self._held
            and self._asm is None
            and self._req.idle
        ):
            self._out.append(d)
            self._n["data"] += 1
            self._cursor = self._live_next = end + 1
            return
        if kind is DeliveryKind.DATA:
            start = end if d.first_sqn is None or d.fragment is not None else self._u(d.first_sqn)
        elif kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST and d.first_sqn is not None:
            start = self._u(d.first_sqn)
        else:
            start = end
        if self._first_live is None:
            self._first_live = start
            self._req.live_started(start & SQN_MASK, now_ns)
            if self._resume_from is not None:
                self._resume_at(start, now_ns)
        if self._ordered != 1:
            self._live_unordered(d, start, end, now_ns)
            return
        if self._cursor is None and not self._req.late_join_active:
            self._cursor = min([start, *self._held])
        if self._live_next is not None and start > self._live_next:  # the DC dropped these silently
            low = self._live_next if self._cursor is None else max(self._live_next, self._cursor)
            for s in range(low, start):
                if s not in self._cover:
                    self._hold(_Item(_SKIP, s, s, None, None, False))
        if self._live_next is None or end + 1 > self._live_next:
            self._live_next = end + 1
        if kind is DeliveryKind.DATA:
            self._req.satisfied(start & SQN_MASK, end & SQN_MASK)
            item = _Item(_DATA, start, end, d, None, False)
            if not self._insert(item):
                self._n["dup"] += 1
            else:
                self._release()
                if (
                    start in self._held
                    and not self._cache_ok(item)
                    and self._req.request_again(start & SQN_MASK, end & SQN_MASK, now_ns)
                ):
                    self._unhold(start)
                    self._n["dropped"] += 1
        elif kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST:
            self._burst_item(start, end, d)
        elif not self._claimed(start) and self._req.on_loss(start & SQN_MASK, start & SQN_MASK, now_ns):
            pass  # OTR now recovers it; everything after it waits
        elif not self._insert(_Item(_LOSS, start, start, d, None, False)):
            self._n["dup"] += 1
        self._release()

    def _resume_at(self, start: int, now_ns: int) -> None:
        """The first live message after :meth:`resume`: OTR recovers what lies between."""
        r, self._resume_from = self._resume_from, None
        if r is None or self._req.late_join_active or not r < start < r + _PROXIMITY_OFF:
            return
        if self._req.on_loss(r & SQN_MASK, (start - 1) & SQN_MASK, now_ns):
            if self._ordered == 1:
                self._cursor = r
            else:
                self._floor = r

    def _cache_ok(self, item: _Item) -> bool:
        """May a live item that recovery holds back stay cached (module docstring)?"""
        cursor = self._cursor
        if cursor is None:  # waiting for the late join plan: distance from the first live message
            ref = self._first_live if self._first_live is not None else item.start
        else:  # distance from the newest retransmission, or from the delivery point
            ref = cursor if self._latest_rx is None else max(cursor, self._latest_rx + 1)
        if self._proximity < _PROXIMITY_OFF and item.end - ref + 1 >= self._proximity:
            return False
        if cursor is not None and not self._req.late_join_active:  # OTR holds the stream
            return len(self._held) <= self._otr_cap
        return True

    def _burst_item(self, start: int, end: int, d: Delivery) -> None:
        """A DC burst is final and discards what it covers (guide 2.4.5)."""
        if self._cursor is not None and start < self._cursor:  # its head was already reported
            start = self._cursor
            d = d._replace(first_sqn=start & SQN_MASK)
        if start > end:
            self._n["dup"] += 1
            return
        self._req.satisfied(start & SQN_MASK, end & SQN_MASK)
        for s in range(start, end + 1):
            key = self._cover.get(s)
            if key is not None:
                self._unhold(key)
        self._hold(_Item(_BURST, start, end, d, None, False))

    # ------------------------------------------------------------------------- ordered holding

    def _claimed(self, s: int) -> bool:
        return (self._cursor is not None and s < self._cursor) or s in self._cover

    def _insert(self, item: _Item) -> bool:
        """Hold ``item`` unless any of its sqns was handed on or is held already."""
        if self._cursor is not None and item.start < self._cursor:
            return False
        cover = self._cover
        if any(s in cover for s in range(item.start, item.end + 1)):
            return False
        self._hold(item)
        return True

    def _hold(self, item: _Item) -> None:
        self._held[item.start] = item
        for s in range(item.start, item.end + 1):
            self._cover[s] = item.start

    def _unhold(self, key: int) -> _Item:
        item = self._held.pop(key)
        for s in range(item.start, item.end + 1):
            del self._cover[s]
        return item

    def _release(self) -> None:
        cursor = self._cursor
        if cursor is None:
            return
        while cursor in self._cover:
            item = self._unhold(self._cover[cursor])
            self._emit(item)
            cursor = item.end + 1
        self._cursor = cursor

    def _emit(self, item: _Item) -> None:
        kind = item.kind
        self._released_any = True
        if kind == _RX and item.fragment is not None:
            self._emit_fragment(item)
            return
        self._drop_asm()
        if kind == _SKIP:
            return
        d = item.delivery
        assert d is not None
        if kind == _LOSS:
            self._n["loss"] += 1
        elif kind == _BURST:
            self._n["burst"] += 1
        else:
            self._count_data(item)
        self._out.append(d)

    def _count_data(self, item: _Item) -> None:
        self._n["data"] += 1
        if item.kind == _RX:
            self._n["otr" if item.otr else "lj"] += 1

    def _emit_fragment(self, item: _Item) -> None:
        """In-order reassembly of retransmitted fragments (the DC's rules, guide 8.7)."""
        d = item.delivery
        assert d is not None
        assert item.fragment is not None
        first, offset, total = item.fragment
        first_u = self._u(first)
        payload = bytes(d.payload)
        asm = self._asm
        if item.start == first_u:
            self._drop_asm()
            if offset != 0 or len(payload) > total:
                self._discard(item)
                return
            if len(payload) == total:
                self._count_data(item)
                self._out.append(d._replace(first_sqn=first))
                return
            asm = self._asm = _Assembly(first_u, total)
        elif asm is None or asm.first != first_u or asm.total != total or asm.size != offset:
            self._drop_asm()
            self._discard(item)
            return
        asm.parts.append(payload)
        asm.size += len(payload)
        if item.otr:
            asm.otr_sqns.append(item.start)
        if asm.size >= total:
            self._asm = None
            if asm.size > total:
                self._discard_asm(asm)
                return
            self._count_data(item)
            self._out.append(d._replace(payload=b"".join(asm.parts), first_sqn=first))

    def _discard(self, item: _Item) -> None:
        self._n["frag"] += 1
        if item.otr:  # its loss was declared by the DC and taken over by OTR: report it after all
            self._loss_out(item.start)

    def _drop_asm(self) -> None:
        if self._asm is not None:
            asm, self._asm = self._asm, None
            self._discard_asm(asm)

    def _discard_asm(self, asm: _Assembly) -> None:
        self._n["frag"] += len(asm.parts)
        for s in asm.otr_sqns:
            self._loss_out(s)

    def _loss_out(self, s: int) -> None:
        self._n["loss"] += 1
        self._out.append(Delivery(DeliveryKind.UNRECOVERABLE_LOSS, s & SQN_MASK))

    # ---------------------------------------------------------------------------------- losses

    def _lost(self, o: RecoveryLost) -> None:
        first = self._u(o.first)
        last = first + ((o.last - o.first) & SQN_MASK)
        if self._ordered != 1:
            self._lost_unordered(first, last, o.burst)
            return
        run: list[int] = []
        for s in range(first, last + 1):
            if self._claimed(s):
                self._flush_lost(run, o.burst)
                run = []
            else:
                run.append(s)
        self._flush_lost(run, o.burst)

    def _flush_lost(self, run: list[int], burst: bool) -> None:
        if not run:
            return
        if burst and len(run) > 1:
            d = Delivery(
                DeliveryKind.UNRECOVERABLE_LOSS_BURST, run[-1] & SQN_MASK, first_sqn=run[0] & SQN_MASK
            )
            self._hold(_Item(_BURST, run[0], run[-1], d, None, False))
            return
        for s in run:
            self._hold(
                _Item(_LOSS, s, s, Delivery(DeliveryKind.UNRECOVERABLE_LOSS, s & SQN_MASK), None, False)
            )

    # ------------------------------------------------------------------------------------- end

    def _end(self, eos: Delivery, now_ns: int) -> None:
        """EOS: nothing more can be recovered; everything still pending is lost, then EOS."""
        self._req.close(now_ns)
        self._absorb(now_ns)
        if self._ordered == 1 and self._cursor is not None and self._held:
            top = max(item.end for item in self._held.values())
            for s in range(self._cursor, top + 1):
                if s not in self._cover:
                    self._hold(_Item(_SKIP, s, s, None, None, False))
            self._release()
        self._drop_asm()
        for parts in self._asms.values():
            self._n["frag"] += len(parts)
        self._asms.clear()
        self._out.append(eos)
        self._ended = True
        self._held.clear()
        self._cover.clear()

    # -------------------------------------------------------------------------- arrival order

    def _resolved(self, s: int) -> bool:
        return (self._floor is not None and s < self._floor) or s in self._done

    def _resolve(self, start: int, end: int) -> None:
        self._done.update(range(start, end + 1))
        floor = self._floor
        if floor is not None:
            while floor in self._done:
                self._done.discard(floor)
                floor += 1
            self._floor = floor

    def _live_unordered(self, d: Delivery, start: int, end: int, now_ns: int) -> None:
        if self._floor is None and not self._req.late_join_active:
            self._floor = min([start, *self._done])
        if d.kind is DeliveryKind.DATA:
            self._req.satisfied(start & SQN_MASK, end & SQN_MASK)
            self._arrive_unordered(start, end, d, None, False, live=True)
            return
        if (
            d.kind is DeliveryKind.UNRECOVERABLE_LOSS
            and not self._resolved(start)
            and self._req.on_loss(start & SQN_MASK, start & SQN_MASK, now_ns)
        ):
            return  # OTR now recovers it
        if d.kind is DeliveryKind.UNRECOVERABLE_LOSS_BURST:
            # The DC's span may include sqns delivered early: report the rest, one burst per run.
            self._req.satisfied(start & SQN_MASK, end & SQN_MASK)
            self._lost_unordered(start, end, True, single_burst=True)
            return
        if self._resolved(start):
            self._n["dup"] += 1
            return
        self._resolve(start, end)
        self._n["loss"] += 1
        self._out.append(d)

    def _arrive_unordered(
        self, start: int, end: int, d: Delivery, fragment: Fragment | None, otr: bool, *, live: bool = False
    ) -> None:
        if any(self._resolved(s) for s in range(start, end + 1)):
            self._n["dup"] += 1
            return
        item = _Item(_DATA if live else _RX, start, end, d, None, otr)
        if fragment is None or self._ordered == 0:
            self._resolve(start, end)
            self._count_data(item)
            self._out.append(d if fragment is None else d._replace(fragment=fragment))
            return
        first, offset, total = fragment
        parts = self._asms.setdefault(self._u(first), [])
        if any(sqn == start for sqn, _, _ in parts):
            self._n["dup"] += 1
            return
        parts.append((start, offset, bytes(d.payload)))
        if sum(len(p) for _, _, p in parts) < total:
            return
        del self._asms[self._u(first)]
        parts.sort(key=lambda p: p[1])
        pos = 0
        for _, off, p in parts:
            if off != pos:
                break
            pos += len(p)
        if pos != total:
            self._n["frag"] += len(parts)
            return
        last = max(sqn for sqn, _, _ in parts)
        self._resolve(min(sqn for sqn, _, _ in parts), last)
        self._count_data(item)
        whole = b"".join(p for _, _, p in parts)
        self._out.append(d._replace(sqn=last & SQN_MASK, payload=whole, first_sqn=first))

    def _lost_unordered(self, first: int, last: int, burst: bool, *, single_burst: bool = False) -> None:
        """Report the unresolved sqns of ``first..last``: per sqn, or one burst per run of them (a run
        of one stays a burst when ``single_burst``)."""
        todo = [s for s in range(first, last + 1) if not self._resolved(s)]
        if not todo:
            self._n["dup"] += 1
            return
        for s in todo:
            self._resolve(s, s)
        if not burst:
            for s in todo:
                self._loss_out(s)
            return
        for a, b in runs(todo):
            if a == b and not single_burst:
                self._loss_out(a)
            else:
                self._n["burst"] += 1
                self._out.append(
                    Delivery(DeliveryKind.UNRECOVERABLE_LOSS_BURST, b & SQN_MASK, first_sqn=a & SQN_MASK)
                )
