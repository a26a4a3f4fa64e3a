"""The receiver side of Late Join and OTR: what to ask a source for, when, and when to give up.

UM Concepts Guide 10.2 (Late Join: 10.2.3 the sequence, 10.2.5-10.2.6 the receiver's options) and 10.3
(OTR); wire ``lbmc-pdm-srs.md`` 2.7.  One :class:`RecoveryRequester` serves one (topic, source) of a
receiver.  It is sans-I/O: calls take ``now_ns``, outputs are buffered and returned by :meth:`poll`
(call it after any call, and at :meth:`next_deadline`).

Late Join (``use_late_join``), started by :meth:`start_late_join` when the receiver joins a source
whose TIR offers it:

1. LJI_REQ (:class:`~openum.wire.lbmc.LateJoinInfoRequestHeader`) to the source's request port, at
   once and then every ``late_join_info_request_interval`` ms; after ``late_join_info_request_maximum``
   unanswered requests late join is abandoned (:class:`LateJoinAbandoned`; 0: never asked).
2. The source's UME_LJ_INFO gives its retained ``[low, high]``.  The receiver's stream then starts at
   ``start = max(low, want_from)``, or at ``end - retransmit_request_maximum + 1`` when that is later
   (the maximum counts back from the newest message wanted; 0: no maximum), where ``end`` is the last
   sqn before the first live message (``high`` while no live message was seen).  :class:`LateJoinPlanned`
   says where.  Sqns from ``want_from`` (the caller's "what the application should get", e.g. 0 for the
   whole stream) that the source no longer holds are reported at once as one :class:`RecoveryLost`
   burst; without ``want_from`` nothing before ``low`` counts as lost (leading loss, guide 2.4.3).
   An empty range (nothing sent yet) with ``retransmit_initial_sequence_number_request`` sends one
   UME_RXREQ with the T flag; its TSNI answer (:meth:`on_initial_sqn`) gives the stream's start (never
   after the empty range's next sqn: what was sent since is live for this receiver).
3. One UME_RXREQ per sqn, oldest first, never more than ``retransmit_request_outstanding_maximum``
   requested and unanswered at once (a sliding window: each arrival lets the next one go).  A request
   unanswered for ``retransmit_request_interval`` ms is sent again (with a :class:`RecoveryWarning`, as
   UM logs); a sqn unanswered ``retransmit_request_message_timeout`` ms after its first request is given
   up (:class:`RecoveryLost`, one per sqn).  A later UME_LJ_INFO whose ``low`` passed queued or
   outstanding sqns means the source no longer holds them: they are lost at once, as one burst per run.

OTR (``use_otr`` 1, or 2 for a persistent receiver), started by :meth:`on_loss` for a range the
transport could not repair: after ``otr_request_initial_delay`` ms the range is requested (one
UME_RXREQ per sqn, at most ``otr_request_outstanding_maximum`` sqns requested and unanswered at once,
0: no limit); unanswered sqns are requested again after ``otr_request_minimum_interval``, the interval
doubling up to ``otr_request_maximum_interval`` (guide 10.3.2); what is still missing
``otr_request_message_timeout`` ms after the loss was reported is given up (one :class:`RecoveryLost`
per sqn; the deprecated ``otr_request_duration``, when set, also ends the requests that long after the
first one).  A UME_LJ_INFO whose ``low`` passed pending sqns (the source's answer to a request for a
sqn it no longer holds) makes them lost at once.  The first OTR request after
``otr_request_log_alert_cooldown`` seconds without any gives a :class:`RecoveryWarning`.

Every sqn handed to the requester is resolved exactly once: :meth:`on_retransmission` or
:meth:`satisfied` (it arrived some other way) or :class:`RecoveryLost`.  Requests name the source by
``transport_idx`` and, in ``id_2``, by its topic index (openum's choice; UM puts a receiver's
registration id there, 0 without persistence).
"""

from __future__ import annotations

from openum.protocol._rng import Rng
from openum.protocol.delivery import SQN_MASK
from openum.protocol.recovery._types import (
    NS_PER_MS,
    Address,
    LateJoinAbandoned,
    LateJoinPlanned,
    LateJoinState,
    RecoveryKind,
    RecoveryLost,
    RecoveryOutput,
    RecoveryParams,
    RecoveryWarning,
    RequesterStatistics,
    SendRequest,
    Unwrap,
    runs,
)
from openum.wire.lbmc import LateJoinInfoHeader, LateJoinInfoRequestHeader, RetransmissionRequestHeader

__all__ = ["RecoveryRequester"]


class _Gap:
    """One range handed to OTR: its unresolved sqns and its request schedule."""

    __slots__ = ("deadline", "interval", "missing", "next_send", "requested")

    def __init__(self, missing: list[int], first_send: int, deadline: int, interval: int) -> None:
        self.missing = set(missing)
        self.requested: set[int] = set()
        self.next_send = first_send  # the next (re-)send round
        self.deadline = deadline
        self.interval = interval


class RecoveryRequester:
    """Late Join and OTR requests for one (topic, source) of a receiver (module docstring).

    ``source``: the source's request address (from its TIR).  ``reply_to``: this context's request
    (UIM) address, put in every request.  ``rng`` draws the request index.  ``persistent``: the receiver
    is registered with a Store (``use_otr`` 2)."""

    def __init__(
        self,
        params: RecoveryParams,
        *,
        source: Address,
        transport_index: int,
        topic_index: int,
        reply_to: Address,
        rng: Rng,
        persistent: bool = False,
    ) -> None:
        self._p = params
        self._source = source
        self._xidx = transport_index
        self._tidx = topic_index
        self._reply = reply_to
        self._idx = rng.randrange(0, 1 << 32)
        self._otr_on = params.otr_enabled(persistent)
        self._u = Unwrap()
        self._out: list[RecoveryOutput] = []
        self._lj = LateJoinState.IDLE
        self._want: int | None = None
        self._live: int | None = None  # the first live sqn (unwrapped)
        self._lji_sent = 0
        self._lji_next = 0  # when the next LJI_REQ (or the T request) is due
        self._t_first = 0  # when the T request was first sent
        self._t_low = 0  # the next sqn of the empty range that made it
        self._queue: list[list[int]] = []  # [start, end] (inclusive) ranges still to request, in order
        self._lj_end: int | None = None  # the last sqn late join covers
        self._lj_out: dict[int, list[int]] = {}  # sqn -> [first sent, last sent]
        self._gaps: list[_Gap] = []
        self._otr: dict[int, _Gap] = {}  # sqn -> its gap
        self._otr_outstanding = 0
        self._last_otr_ns: int | None = None
        self._n = dict.fromkeys(
            ("lji", "lj_rq", "lj_re", "lj_ok", "lj_lost", "otr_rq", "otr_re", "otr_ok", "otr_lost", "ign"), 0
        )

    # ------------------------------------------------------------------------------------ state

    @property
    def params(self) -> RecoveryParams:
        return self._p

    @property
    def late_join_state(self) -> LateJoinState:
        return self._lj

    @property
    def late_join_active(self) -> bool:
        """Late join has started and its stream start or its requests are not settled yet."""
        return self._lj in (LateJoinState.INFO, LateJoinState.INITIAL_SQN, LateJoinState.RECOVERING)

    @property
    def idle(self) -> bool:
        """Nothing to recover, nothing to send: :meth:`poll` would do nothing."""
        return not self._out and not self._otr and not self.late_join_active

    @property
    def otr_enabled(self) -> bool:
        return self._otr_on

    @property
    def request_index(self) -> int:
        return self._idx

    # ------------------------------------------------------------------------------- late join

    def start_late_join(self, now_ns: int, *, want_from: int | None = None) -> bool:
        """The receiver joined a source offering Late Join; False (nothing done) if ``use_late_join``
        is off or late join already started.  ``want_from``: module docstring."""
        if not self._p.use_late_join or self._lj is not LateJoinState.IDLE:
            return False
        self._want = None if want_from is None else self._u(want_from & SQN_MASK)
        if self._p.late_join_info_request_maximum == 0:
            self._abandon()
            return True
        self._lj = LateJoinState.INFO
        self._lji_next = now_ns
        return True

    def live_started(self, sqn: int, now_ns: int) -> None:
        """The first live message of this source arrived with ``sqn`` (call once; later calls are
        ignored).  Late join then recovers up to ``sqn - 1`` and no further."""
        if self._live is not None:
            return
        live = self._live = self._u(sqn & SQN_MASK)
        if self._lj not in (LateJoinState.RECOVERING, LateJoinState.DONE) or self._lj_end is None:
            return
        if live - 1 > self._lj_end:  # sent between the LJ_INFO and the first live one: ask too
            self._queue.append([self._lj_end + 1, live - 1])
            self._lj = LateJoinState.RECOVERING
        else:
            self._cut_queue(live, None)
        self._lj_end = live - 1
        self._settle_lj()

    def on_late_join_info(self, info: LateJoinInfoHeader, now_ns: int) -> bool:
        """A UME_LJ_INFO from the source: the answer to the LJI_REQ, or (later, also for OTR) the
        source's current range after a request for a sqn it no longer holds.  False if it was not for
        this requester or changed nothing."""
        if info.request_idx != self._idx:
            self._n["ign"] += 1
            return False
        low = self._u(info.low_seqnum)
        high = low + ((info.high_seqnum - info.low_seqnum + 1) & SQN_MASK) - 1  # high < low: empty
        gone = sorted(s for s in self._otr if s < low)
        for s in gone:  # OTR: what the source no longer holds is lost now, not at the timeout
            self._resolve_otr(self._otr.pop(s), s)
        for first, last in runs(gone):
            self._lost(first, last, RecoveryKind.OTR, burst=False)
        if self._lj not in (LateJoinState.INFO, LateJoinState.RECOVERING):
            self._n["ign"] += not gone
            return bool(gone)
        if self._lj is LateJoinState.RECOVERING:
            end = self._lj_end
            if self._live is None and end is not None and high > end:  # the source sent more meanwhile
                self._queue.append([end + 1, high])
                self._lj_end = high
            self._source_low(low)
            return True
        if high < low and self._p.retransmit_initial_sequence_number_request:
            self._lj = LateJoinState.INITIAL_SQN
            self._t_first = now_ns
            self._t_low = low
            self._send_tsni_request(now_ns)
            return True
        self._plan(low, high)
        return True

    def on_initial_sqn(self, sqn: int, now_ns: int) -> bool:
        """The TSNI answer to the T request: ``sqn`` is the last sqn the source sent.  The stream starts
        after it, or at the empty range's next sqn when that is lower: what the source sent after it
        answered the LJI_REQ was sent after this receiver joined, so it comes live (it may still be in
        the receiver's socket when the TSNI is read)."""
        if self._lj is not LateJoinState.INITIAL_SQN:
            self._n["ign"] += 1
            return False
        start = min(self._u(sqn & SQN_MASK) + 1, self._t_low)
        self._plan(start, start - 1)
        return True

    def _plan(self, low: int, high: int) -> None:
        p = self._p
        live = self._live
        end = high if live is None else live - 1
        start = low if self._want is None else max(low, self._want)
        lost_from = self._want
        if p.retransmit_request_maximum:
            floor = end - p.retransmit_request_maximum + 1
            start = max(start, floor)
            if lost_from is not None:
                lost_from = max(lost_from, floor)
        if live is not None:
            start = min(start, live)  # the receiver has everything from its first live message on
        self._lj = LateJoinState.RECOVERING
        self._lj_end = end
        if lost_from is not None and lost_from < start:
            self._out.append(LateJoinPlanned(lost_from & SQN_MASK))
            self._lost(lost_from, start - 1, RecoveryKind.LATE_JOIN, burst=True)
        else:
            self._out.append(LateJoinPlanned(start & SQN_MASK))
        if start <= end:
            self._queue.append([start, end])
            self._queue.sort()
        self._settle_lj()

    def _source_low(self, low: int) -> None:
        """A later UME_LJ_INFO (or a not-retained answer): what is below ``low`` is gone."""
        gone = sorted(s for s in self._lj_out if s < low)
        for s in gone:
            del self._lj_out[s]
        for start, end in self._cut_queue(None, low):
            gone.extend(range(start, end + 1))
        for first, last in runs(sorted(gone)):
            self._lost(first, last, RecoveryKind.LATE_JOIN, burst=True)
        self._settle_lj()

    def _cut_queue(self, from_: int | None, below: int | None) -> list[tuple[int, int]]:
        """Remove queued sqns ``>= from_`` or ``< below``; returns the removed ranges."""
        kept: list[list[int]] = []
        removed: list[tuple[int, int]] = []
        for start, end in self._queue:
            a, b = start, end
            if below is not None and a < below:
                removed.append((a, min(b, below - 1)))
                a = below
            if from_ is not None and b >= from_:
                if max(a, from_) <= b:
                    removed.append((max(a, from_), b))
                b = from_ - 1
            if a <= b:
                kept.append([a, b])
        self._queue = kept
        if from_ is not None:
            for s in [s for s in self._lj_out if s >= from_]:
                del self._lj_out[s]
        return removed

    def _settle_lj(self) -> None:
        if self._lj is LateJoinState.RECOVERING and not self._queue and not self._lj_out:
            self._lj = LateJoinState.DONE

    def _abandon(self) -> None:
        self._lj = LateJoinState.ABANDONED
        self._out.append(LateJoinAbandoned())
        for first, last in self._queue:  # live messages dropped while waiting: nobody will ask now
            self._lost(first, last, RecoveryKind.LATE_JOIN, burst=False)
        self._queue.clear()

    # ------------------------------------------------------------------------------------ OTR

    def on_loss(self, first: int, last: int, now_ns: int) -> bool:
        """The transport could not repair ``first..last`` (inclusive): recover it by OTR.  False (the
        loss stands) when OTR is off.  Sqns already being recovered are not added twice."""
        if not self._otr_on:
            return False
        self._add_gap(first, last, now_ns, self._p.otr_request_initial_delay * NS_PER_MS)
        return True

    def request_again(self, first: int, last: int, now_ns: int) -> bool:
        """The receiver dropped live messages ``first..last`` it could not cache (guide 10.2.6,
        10.3.1): request them as retransmissions, by late join while it runs, else by OTR at once.
        False when neither runs (the caller must not drop them)."""
        if self.late_join_active:
            a = self._u(first & SQN_MASK)
            self._queue.append([a, a + ((last - first) & SQN_MASK)])
            self._queue.sort()
            return True
        if not self._otr_on:
            return False
        self._add_gap(first, last, now_ns, 0)
        return True

    def _add_gap(self, first: int, last: int, now_ns: int, delay_ns: int) -> None:
        a = self._u(first & SQN_MASK)
        b = a + ((last - first) & SQN_MASK)
        fresh = [
            s
            for s in range(a, b + 1)
            if s not in self._otr and s not in self._lj_out and not self._in_queue(s)
        ]
        if not fresh:
            return
        p = self._p
        limit = p.otr_request_message_timeout * NS_PER_MS
        if p.otr_request_duration is not None:
            limit = min(limit, delay_ns + p.otr_request_duration * NS_PER_MS)
        gap = _Gap(fresh, now_ns + delay_ns, now_ns + limit, p.otr_request_minimum_interval * NS_PER_MS)
        self._gaps.append(gap)
        for s in fresh:
            self._otr[s] = gap

    # -------------------------------------------------------------------------------- arrivals

    def on_retransmission(self, sqn: int, now_ns: int) -> RecoveryKind | None:
        """A retransmission of ``sqn`` arrived: which mechanism asked for it, or None if nothing was
        waiting for it (a duplicate, or an answer after the sqn was resolved)."""
        s = self._u(sqn & SQN_MASK)
        if s in self._lj_out:
            del self._lj_out[s]
            self._n["lj_ok"] += 1
            self._settle_lj()
            return RecoveryKind.LATE_JOIN
        if self._in_queue(s):
            self._cut_range(s)
            self._n["lj_ok"] += 1
            self._settle_lj()
            return RecoveryKind.LATE_JOIN
        gap = self._otr.pop(s, None)
        if gap is not None:
            self._resolve_otr(gap, s)
            self._n["otr_ok"] += 1
            return RecoveryKind.OTR
        return None

    def satisfied(self, first: int, last: int) -> None:
        """``first..last`` arrived some other way (live, or a NAK repair): stop asking for them."""
        a = self._u(first & SQN_MASK)
        for s in range(a, a + ((last - first) & SQN_MASK) + 1):
            if self._lj_out.pop(s, None) is None and self._in_queue(s):
                self._cut_range(s)
            gap = self._otr.pop(s, None)
            if gap is not None:
                self._resolve_otr(gap, s)
        self._settle_lj()

    def _in_queue(self, s: int) -> bool:
        return any(start <= s <= end for start, end in self._queue)

    def _cut_range(self, s: int) -> None:
        kept: list[list[int]] = []
        for start, end in self._queue:
            if start <= s <= end:
                if start < s:
                    kept.append([start, s - 1])
                if s < end:
                    kept.append([s + 1, end])
            else:
                kept.append([start, end])
        self._queue = kept

    def _resolve_otr(self, gap: _Gap, s: int) -> None:
        gap.missing.discard(s)
        if s in gap.requested:
            gap.requested.discard(s)
            self._otr_outstanding -= 1
        if not gap.missing:
            self._gaps.remove(gap)

    def close(self, now_ns: int) -> None:
        """The source is gone (EOS): everything still pending is lost (reported by :meth:`poll`)."""
        if self._lj in (LateJoinState.INFO, LateJoinState.INITIAL_SQN):
            self._abandon()
        pending = sorted(set(self._lj_out) | {s for a, b in self._queue for s in range(a, b + 1)})
        self._lj_out.clear()
        self._queue.clear()
        for first, last in runs(pending):
            self._lost(first, last, RecoveryKind.LATE_JOIN, burst=False)
        self._settle_lj()
        for gap in self._gaps:
            for first, last in runs(sorted(gap.missing)):
                self._lost(first, last, RecoveryKind.OTR, burst=False)
        self._gaps.clear()
        self._otr.clear()
        self._otr_outstanding = 0

    # ---------------------------------------------------------------------------------- timers

    def poll(self, now_ns: int) -> list[RecoveryOutput]:
        """Run what is due at ``now_ns``; return every output since the last poll, in order."""
        self._poll_lj(now_ns)
        if self._gaps:
            self._poll_otr(now_ns)
        out, self._out = self._out, []
        return out

    def next_deadline(self) -> int | None:
        """When :meth:`poll` next has work (a past time when it has outputs or requests to send)."""
        if self._out:
            return 0
        p = self._p
        times: list[int] = []
        lj = self._lj
        if lj in (LateJoinState.INFO, LateJoinState.INITIAL_SQN):
            times.append(self._lji_next)
        if lj is LateJoinState.RECOVERING:
            if self._queue and len(self._lj_out) < p.retransmit_request_outstanding_maximum:
                return 0
            interval = p.retransmit_request_interval * NS_PER_MS
            timeout = p.retransmit_request_message_timeout * NS_PER_MS
            times.extend(min(last + interval, first + timeout) for first, last in self._lj_out.values())
        room = self._otr_room()
        for gap in self._gaps:
            times.append(gap.deadline)
            if gap.requested:
                times.append(gap.next_send)  # the next re-send round
                if room and len(gap.requested) < len(gap.missing):
                    return 0  # fresh sqns go as soon as there is room
            elif room:
                times.append(gap.next_send)  # the first round (without room: when room frees)
        return min(times) if times else None

    def _poll_lj(self, now_ns: int) -> None:
        p = self._p
        lj = self._lj
        if lj is LateJoinState.INFO and now_ns >= self._lji_next:
            if self._lji_sent >= p.late_join_info_request_maximum:
                self._abandon()
                return
            self._send_lji(now_ns)
        elif lj is LateJoinState.INITIAL_SQN and now_ns >= self._lji_next:
            if now_ns - self._t_first >= p.retransmit_request_message_timeout * NS_PER_MS:
                live = self._live
                if live is None:
                    self._abandon()
                else:
                    self._plan(live, live - 1)
                return
            self._send_tsni_request(now_ns)
        elif lj is LateJoinState.RECOVERING:
            self._poll_rx(now_ns)

    def _poll_rx(self, now_ns: int) -> None:
        p = self._p
        interval = p.retransmit_request_interval * NS_PER_MS
        timeout = p.retransmit_request_message_timeout * NS_PER_MS
        expired = sorted(s for s, (first, _) in self._lj_out.items() if now_ns - first >= timeout)
        for s in expired:
            del self._lj_out[s]
        for first, last in runs(expired):
            self._lost(first, last, RecoveryKind.LATE_JOIN, burst=False)
        resend = sorted(s for s, (_, last) in self._lj_out.items() if now_ns - last >= interval)
        if resend:
            self._out.append(
                RecoveryWarning(
                    f"{len(resend)} late join retransmission request(s) unanswered after "
                    f"{p.retransmit_request_interval} ms; requesting again (consider raising "
                    "retransmit_request_interval)"
                )
            )
            for s in resend:
                self._lj_out[s][1] = now_ns
                self._send_rx(s, RecoveryKind.LATE_JOIN)
                self._n["lj_re"] += 1
        while self._queue and len(self._lj_out) < p.retransmit_request_outstanding_maximum:
            rng = self._queue[0]
            s = rng[0]
            if s == rng[1]:
                self._queue.pop(0)
            else:
                rng[0] = s + 1
            self._lj_out[s] = [now_ns, now_ns]
            self._send_rx(s, RecoveryKind.LATE_JOIN)
        self._settle_lj()

    def _otr_room(self) -> bool:
        cap = self._p.otr_request_outstanding_maximum
        return cap == 0 or self._otr_outstanding < cap

    def _poll_otr(self, now_ns: int) -> None:
        p = self._p
        for gap in [g for g in self._gaps if g.deadline <= now_ns]:
            self._gaps.remove(gap)
            for s in gap.missing:
                del self._otr[s]
            self._otr_outstanding -= len(gap.requested)
            for first, last in runs(sorted(gap.missing)):
                self._lost(first, last, RecoveryKind.OTR, burst=False)
        cooldown = p.otr_request_log_alert_cooldown * 1_000_000_000
        for gap in self._gaps:
            if gap.next_send > now_ns and not (gap.requested and self._otr_room()):
                continue
            due = gap.next_send <= now_ns
            sent: list[int] = []
            if due:  # a round: what is unanswered goes again
                sent.extend(sorted(gap.requested))
                self._n["otr_re"] += len(sent)
            for s in sorted(gap.missing - gap.requested):
                if not self._otr_room():
                    break
                gap.requested.add(s)
                self._otr_outstanding += 1
                sent.append(s)
            if not sent:
                continue
            if self._last_otr_ns is None or now_ns - self._last_otr_ns >= cooldown:
                self._out.append(
                    RecoveryWarning(f"OTR: requesting {len(gap.missing)} lost message(s) from the source")
                )
            self._last_otr_ns = now_ns
            for s in sent:
                self._send_rx(s, RecoveryKind.OTR)
            if due:
                gap.next_send = now_ns + gap.interval
                gap.interval = min(gap.interval * 2, p.otr_request_maximum_interval * NS_PER_MS)

    # ---------------------------------------------------------------------------------- outputs

    def _send_lji(self, now_ns: int) -> None:
        p = self._p
        flags = LateJoinInfoRequestHeader.RX_REQ_OUTSTANDING_MAX
        low = 0
        if self._want is not None:
            flags |= LateJoinInfoRequestHeader.LOW_SQN
            low = self._want & SQN_MASK
        if p.retransmit_request_maximum:
            flags |= LateJoinInfoRequestHeader.RX_REQ_MAX
        header = LateJoinInfoRequestHeader(
            request_idx=self._idx,
            transport_idx=self._xidx,
            topic_idx=self._tidx,
            req_ip=self._reply[0],
            req_port=self._reply[1],
            tx_low_sqn=low,
            rx_req_max=p.retransmit_request_maximum,
            rx_req_outstanding_max=p.retransmit_request_outstanding_maximum,
            flags=flags,
        )
        self._out.append(SendRequest(header, RecoveryKind.LATE_JOIN, self._source))
        self._lji_sent += 1
        self._n["lji"] += 1
        self._lji_next = now_ns + p.late_join_info_request_interval * NS_PER_MS

    def _send_tsni_request(self, now_ns: int) -> None:
        self._send_rx(0, RecoveryKind.LATE_JOIN, RetransmissionRequestHeader.TSNI)
        self._lji_next = now_ns + self._p.retransmit_request_interval * NS_PER_MS

    def _send_rx(self, s: int, kind: RecoveryKind, flags: int = 0) -> None:
        header = RetransmissionRequestHeader(
            request_idx=self._idx,
            transport_idx=self._xidx,
            id_2=self._tidx,
            seqnum=s & SQN_MASK,
            rx_port=self._reply[1],
            rx_ip=self._reply[0],
            flags=flags,
        )
        self._out.append(SendRequest(header, kind, self._source))
        self._n["lj_rq" if kind is RecoveryKind.LATE_JOIN else "otr_rq"] += 1

    def _lost(self, first: int, last: int, kind: RecoveryKind, *, burst: bool) -> None:
        self._out.append(RecoveryLost(first & SQN_MASK, last & SQN_MASK, kind, burst))
        self._n["lj_lost" if kind is RecoveryKind.LATE_JOIN else "otr_lost"] += last - first + 1

    def statistics(self) -> RequesterStatistics:
        n = self._n
        return RequesterStatistics(
            lji_requests=n["lji"],
            lj_requests=n["lj_rq"],
            lj_resends=n["lj_re"],
            lj_recovered=n["lj_ok"],
            lj_lost=n["lj_lost"],
            lj_outstanding=len(self._lj_out),
            otr_requests=n["otr_rq"],
            otr_resends=n["otr_re"],
            otr_recovered=n["otr_ok"],
            otr_lost=n["otr_lost"],
            otr_outstanding=self._otr_outstanding,
            otr_pending=len(self._otr),
            lj_info_ignored=n["ign"],
        )
