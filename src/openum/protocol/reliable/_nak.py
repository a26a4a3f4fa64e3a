"""Receiver-side loss detection and NAK scheduling, shared by LBT-RM and LBT-RU.

Seed sections 6.3.1 (NAK suppression), 6.3.2 (time-bounded recovery), 8.10 (tail loss found by session
messages), 8.11.4-8.11.5 (the loss-recovery timeline); spec 02 3.2, spec 03 A34-A35.

* **Gap detection** on the transport sequence number: a DATA datagram beyond the next expected one, a
  session message's leading edge, or an NCF for a sequence number not seen yet reveal missing
  datagrams.  Every missing datagram counts once in ``lost``.
* **Initial NAK backoff**: the first NAK waits ``nak_initial_backoff_interval`` randomised uniformly
  in [0.5x, 1.5x] (one draw per detection, shared by the whole gap so that it leaves in one NAK
  packet); 0 NAKs at once.  If the datagram arrives meanwhile (for LBT-RM possibly a retransmission
  another receiver asked for), no NAK is sent.
* **NAK backoff**: while still missing, NAKs repeat every ``nak_backoff_interval`` randomised the
  same way.
* **Suppression**: an NCF for a missing sequence number pushes its next NAK out to
  ``nak_suppress_interval`` from now.
* **NAK generation interval**: ``nak_generation_interval`` after detection the receiver gives up:
  ``unrecovered_tmo`` and an :class:`Unrecovered` ``"timeout"`` event.  No application event here:
  the topic-level delivery controllers keep their own timers (seed 8.11.5).
* **Window loss**: when a trailing edge (DATA, SM, NCF) moves past a missing sequence number, or an
  NCF says "do not retry", the source cannot repair it: ``unrecovered_txw`` and ``"window"``.
* **Batching**: the sequence numbers due at one moment go out in as few NAK packets as the format's
  limit allows (``max_naks_per_packet``); one :meth:`LossDetector.poll` handles at most
  :data:`MAX_POLL_ENTRIES` timers (the rest stay due: the next poll, at once, takes them), so the work
  of one poll is bounded whatever the gap.
* **Receive window**: a sequence number from the network is placed only when it lies within
  :data:`RECEIVE_WINDOW` datagrams of the next one expected (DATA, a session message's leading edge,
  an NCF's entries).  Anything further, ahead or behind, is dropped and counted (``out_of_window``)
  without creating state: one forged datagram with a sequence number 2**31 ahead cannot make the
  receiver track or NAK two billion datagrams nor skip the real ones.  A real jump (an outage longer
  than the window) is taken when a second datagram confirms it: the next original datagram or session
  message is out of the window too, in the same place (within the window of the first, in order), with
  nothing in the window between.  A confirmed jump ahead is a gap like any other (the first datagram,
  dropped, is NAKed with it); a confirmed jump behind (the source's real sequence after a forged jump
  was confirmed) restarts the sequence space there, giving up what was pending.
* **Head loss**: the first original datagram of a session whose sequence number is among the first
  :data:`HEAD_WINDOW` (and whose trailing edge says the source still holds sequence number 0) shows
  that the session started only just before: the datagrams before it are loss to repair, not a late
  join (UM Concepts Guide, section 2.4.2).  Likewise when the sequence space started from a session
  message or the LBT-RU handshake and the first data is not the first datagram expected.
  :meth:`LossDetector.head_pending` tells the receiver to hold what arrives until they are repaired or
  given up, so that the layer above sees the session's first messages first.

Sequence numbers are absolute internally (the first one seen keeps its wire value; later ones are
placed by serial arithmetic relative to the next expected one), so the u32 wrap never matters.
Missing datagrams are kept in a dict in ascending order (gaps are only ever found at the leading
edge), with one run per gap to find the lowest one in amortised constant time, and their timers in a
heap with lazy invalidation.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import Final

from openum.protocol._rng import Rng
from openum.protocol.reliable._common import SQN_MASK, Unrecovered, sqn_diff
from openum.wire.lbtrm import NcfReason

__all__ = ["HEAD_WINDOW", "MAX_POLL_ENTRIES", "RECEIVE_WINDOW", "LossDetector", "Verdict"]

_IGNORED: Final = int(NcfReason.NAK_IGNORED)
_RX_DELAY: Final = int(NcfReason.RETRANSMIT_DELAY)
_SHED: Final = int(NcfReason.NAK_SHED)
_DO_NOT_RETRY: Final = int(NcfReason.DO_NOT_RETRY)

#: At most this many missing datagrams are tracked at once; a gap beyond it (an outage of tens of
#: thousands of datagrams, or a garbage sequence number) gives up on its oldest part at once, as
#: window loss.  Bounds memory and the work one datagram can cause (ARCHITECTURE.md 2 rule 5): 32,768
#: datagrams is more than UM's default transmission window holds (24 MB of datagrams of at least 768
#: bytes), so nothing a source could still retransmit is given up early.
MAX_TRACKED_LOSSES: Final = 1 << 15
#: Sequence numbers given up on that a late repair may still fill (delivered, counted ``late_repairs``).
_MAX_ABANDONED: Final = 1 << 16
#: How far from the next expected sequence number (either way) one datagram may place itself; beyond,
#: it is dropped and counted unless a second one confirms the jump (module docstring).  8,192 datagrams
#: is about 80 ms at 100,000 datagrams per second: a larger outage costs one more datagram to NAK.
RECEIVE_WINDOW: Final = 1 << 13
#: Most timers (NAKs and give-ups) one poll handles; the others stay due for the next poll.
MAX_POLL_ENTRIES: Final = 1 << 13
#: A session's first original datagram with a sequence number below this (the source still holding
#: sequence number 0) makes the datagrams before it head loss to repair (module docstring).
HEAD_WINDOW: Final = 1 << 10


class Verdict:
    """What :meth:`LossDetector.data` says about one DATA datagram."""

    NEW: Final = 0  # first copy, in order or filling a gap: deliver it
    DUPLICATE: Final = 1  # already delivered (or before the session start): drop it
    OUT_OF_WINDOW: Final = 2  # too far from the next expected sequence number: drop it (counted)


class _Loss:
    __slots__ = ("detected", "due", "first_nak", "give_up", "naks", "next_nak")

    def __init__(self, detected: int, next_nak: int, give_up: int, due: int) -> None:
        self.detected = detected
        self.next_nak = next_nak
        self.give_up = give_up
        self.due = due
        self.naks = 0
        self.first_nak = 0


class LossDetector:
    """Gap detection, NAK timers and give-up rules of one receiving transport session."""

    __slots__ = (
        "_abandoned",
        "_backoff",
        "_candidate",
        "_data_seen",
        "_events",
        "_generation",
        "_head_end",
        "_heap",
        "_initial",
        "_losses",
        "_max_per_packet",
        "_next",
        "_rng",
        "_runs",
        "_send_naks",
        "_suppress",
        "duplicate_data",
        "late_repairs",
        "lost",
        "nak_pckts_sent",
        "nak_stm",
        "nak_tx",
        "naks_sent",
        "ncf_pckts_rcved",
        "ncfs_ignored",
        "ncfs_rcved",
        "ncfs_rx_delay",
        "ncfs_shed",
        "ncfs_unknown",
        "out_of_order",
        "out_of_window",
        "started",
        "unrecovered_tmo",
        "unrecovered_txw",
    )

    def __init__(
        self,
        *,
        initial_backoff_ns: int,
        backoff_ns: int,
        suppress_ns: int,
        generation_ns: int,
        send_naks: bool,
        max_naks_per_packet: int,
        rng: Rng,
    ) -> None:
        if max_naks_per_packet < 1:
            raise ValueError("max_naks_per_packet must be >= 1")
        self._initial = initial_backoff_ns
        self._backoff = backoff_ns
        self._suppress = suppress_ns
        self._generation = generation_ns
        self._send_naks = send_naks
        self._max_per_packet = max_naks_per_packet
        self._rng = rng
        self.started = False
        self._next = 0  # absolute: one past the highest sequence number known to exist
        self._losses: dict[int, _Loss] = {}
        # Where the losses are, in sqn order: one [first not yet passed, end) per gap. Finding the lowest
        # loss walks these (each tracked sqn passed once); ``next(iter(self._losses))`` would be a scan
        # over every entry deleted from the dict's front since its last resize, for every datagram
        # while anything is missing: quadratic in the number of losses, just when a receiver is behind.
        self._runs: deque[list[int]] = deque()
        self._heap: list[tuple[int, int]] = []  # (due, absolute sqn), stale entries skipped
        # Given up on, oldest first: a late repair of one counts as such (not as a duplicate).
        self._abandoned: OrderedDict[int, None] = OrderedDict()
        self._events: list[Unrecovered] = []
        # Where an out-of-window datagram would have placed the next expected sequence number (absolute),
        # waiting for a second one to confirm it; None: nothing waits.
        self._candidate: int | None = None
        # Head loss being repaired: sequence numbers before this one (absolute); 0: none.
        self._head_end = 0
        self._data_seen = False  # an original DATA arrived
        self.out_of_window = 0
        self.lost = 0
        self.duplicate_data = 0
        self.out_of_order = 0
        self.late_repairs = 0
        self.naks_sent = 0
        self.nak_pckts_sent = 0
        self.unrecovered_txw = 0
        self.unrecovered_tmo = 0
        self.ncf_pckts_rcved = 0
        self.ncfs_rcved = 0
        self.ncfs_ignored = 0
        self.ncfs_rx_delay = 0
        self.ncfs_shed = 0
        self.ncfs_unknown = 0
        # [count, sum, min, max] over repaired datagrams that were NAKed: ns to repair / NAKs sent
        self.nak_stm = [0, 0, 0, 0]
        self.nak_tx = [0, 0, 0, 0]

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Missing datagrams still being recovered."""
        return len(self._losses)

    def next_deadline(self) -> int | None:
        return self._heap[0][0] if self._heap else None

    def take_events(self) -> list[Unrecovered]:
        events, self._events = self._events, []
        return events

    def contiguous(self) -> int:
        """The wire sqn of the newest datagram held with nothing missing before it (LBT-RU ACK)."""
        first_missing = self._first_loss() if self._losses else self._next
        return (first_missing - 1) & SQN_MASK

    def _abs(self, wire: int) -> int:
        return self._next + sqn_diff(wire, self._next & SQN_MASK)

    # -- input -----------------------------------------------------------------------------------------

    def start(self, next_wire: int) -> None:
        """Begin at ``next_wire``: nothing before it is expected (a late join is not head loss)."""
        self.started = True
        self._next = next_wire

    def in_order(self, wire: int) -> bool:
        """Hot path: when ``wire`` is the next sequence number expected, nothing is missing and no event
        waits, take it (exactly what :meth:`data` does then: verdict NEW, no timer to run) and return
        True; otherwise return False with nothing changed (call :meth:`data`)."""
        nxt = self._next
        if wire != nxt & SQN_MASK or self._losses or self._events or not self.started:
            return False
        if self._candidate is not None:
            return False
        self._next = nxt + 1
        return True

    def data(self, wire: int, wire_trail: int, retransmission: bool, now_ns: int) -> int:
        """A DATA datagram (original or retransmission) with sequence number ``wire`` arrived."""
        if not self.started:
            if retransmission:
                # a repair someone else asked for, older than anything this receiver can place: hand it
                # up, but start the sequence space at the next original datagram (or SM)
                return Verdict.NEW
            # the session started just before: what came before is head loss
            self.start(0 if 0 < wire < HEAD_WINDOW and wire_trail == 0 else wire)
        sqn = self._abs(wire)
        if not self._data_seen and not retransmission:
            # The first data after the start (a datagram, a handshake or session message): datagrams
            # before it are head loss, whatever came before it is held until they are repaired.
            self._data_seen = True
            if self._next > sqn - RECEIVE_WINDOW and sqn > self._next and not self._head_end:
                self._head_end = sqn
        ahead = sqn - self._next
        if ahead >= RECEIVE_WINDOW or (
            ahead < -RECEIVE_WINDOW
            and not retransmission  # an old repair for someone else: a duplicate
            and sqn not in self._losses
            and sqn not in self._abandoned
        ):
            if retransmission or not self._confirmed(sqn, False):
                self.out_of_window += 1
                return Verdict.OUT_OF_WINDOW
            if ahead < 0:
                self._restart(sqn)
        else:
            self._candidate = None
        trail = sqn + min(0, sqn_diff(wire_trail, wire))
        verdict = Verdict.NEW
        if sqn >= self._next:
            if sqn > self._next:
                self._gap(sqn, now_ns, trail)
            self._next = sqn + 1
        else:
            loss = self._losses.pop(sqn, None)
            if loss is not None:
                if not retransmission:
                    self.out_of_order += 1
                if loss.naks:
                    _sample(self.nak_stm, now_ns - loss.first_nak)
                    _sample(self.nak_tx, loss.naks)
            elif sqn in self._abandoned:
                del self._abandoned[sqn]
                self.late_repairs += 1
            else:
                self.duplicate_data += 1
                verdict = Verdict.DUPLICATE
        self._trail(trail)
        return verdict

    def _confirmed(self, last: int, same_ok: bool) -> bool:
        """An out-of-window datagram shows that sequence number ``last`` exists: True when the previous
        out-of-window one, with nothing in the window since, was in the same place (``last`` after it,
        within the window; or equal, ``same_ok``, for a session message's unchanged leading edge), else
        remember it and return False (module docstring)."""
        candidate = self._candidate
        if candidate is not None:
            step = last - candidate
            if 0 < step < RECEIVE_WINDOW or (same_ok and step == 0):
                self._candidate = None
                return True
        self._candidate = last
        return False

    def _restart(self, sqn: int) -> None:
        """A confirmed jump behind: begin again at ``sqn``; what was pending is given up."""
        pending = sorted(self._losses)
        self._losses.clear()
        self._runs.clear()
        self._heap.clear()
        self._abandoned.clear()
        self._head_end = 0
        if pending:
            self.unrecovered_txw += len(pending)
            self._events.append(Unrecovered(tuple(s & SQN_MASK for s in pending), "window"))
        self._next = sqn

    def head_pending(self) -> bool:
        """Head loss (module docstring) is still being repaired: hold what arrives."""
        if not self._head_end:
            return False
        if self._losses and self._first_loss() < self._head_end:
            return True
        self._head_end = 0
        return False

    def edges(self, wire_lead: int, wire_trail: int, now_ns: int) -> bool:
        """A session message: the source has sent up to ``wire_lead`` and holds from ``wire_trail``.
        False: the leading edge is out of the window (dropped, counted)."""
        if not self.started:
            nxt = (wire_lead + 1) & SQN_MASK
            if 0 < nxt < HEAD_WINDOW and wire_trail == 0:
                self.start(0)  # the session started just before: what came before is head loss
                self._head_end = nxt
            else:
                self.start(nxt)
                return True
        lead = self._abs(wire_lead)
        ahead = lead + 1 - self._next
        if ahead > RECEIVE_WINDOW or ahead < -RECEIVE_WINDOW:
            if not self._confirmed(lead, True):
                self.out_of_window += 1
                return False
            if ahead < 0:
                self._restart(lead + 1)
                return True
        else:
            self._candidate = None
        trail = lead + min(0, sqn_diff(wire_trail, wire_lead))
        if lead >= self._next:
            self._gap(lead + 1, now_ns, trail)
            self._next = lead + 1
        self._trail(trail)
        return True

    def ncf(self, wire_sqns: Sequence[int], wire_trail: int, reason: int, now_ns: int) -> bool:
        """An NCF (NAK confirmation): suppress NAKs for these sequence numbers, or give up on them.
        False: an entry lies out of the window (the NCF is dropped, counted)."""
        if self.started:
            nxt = self._next
            for wire in wire_sqns:
                ahead = self._abs(wire) - nxt
                if ahead >= RECEIVE_WINDOW or ahead < -RECEIVE_WINDOW:
                    self.out_of_window += 1
                    return False
        self.ncf_pckts_rcved += 1
        self.ncfs_rcved += len(wire_sqns)
        if reason == _IGNORED:
            self.ncfs_ignored += len(wire_sqns)
        elif reason == _RX_DELAY:
            self.ncfs_rx_delay += len(wire_sqns)
        elif reason == _SHED:
            self.ncfs_shed += len(wire_sqns)
        else:
            self.ncfs_unknown += len(wire_sqns)
        if not self.started:
            return True
        trail = min(self._abs(wire_trail), self._next)  # never past what is known to exist
        gone: list[int] = []
        for wire in wire_sqns:
            sqn = self._abs(wire)
            if sqn >= self._next:  # an NCF for data we never saw: it exists, so it is missing
                self._gap(sqn + 1, now_ns, min(trail, sqn))
                self._next = sqn + 1
            loss = self._losses.get(sqn)
            if loss is None:
                continue
            if reason == _DO_NOT_RETRY:
                del self._losses[sqn]
                gone.append(sqn)
            else:
                next_nak = max(loss.next_nak, now_ns + self._suppress)
                self._reschedule(sqn, loss, next_nak)
        if gone:
            self.unrecovered_txw += len(gone)
            self._events.append(Unrecovered(tuple(s & SQN_MASK for s in gone), "window"))
        if self._losses:
            self._trail(trail)
        return True

    def give_up_head(self) -> None:
        """Stop waiting for the head loss (the receiver cannot hold more): it is given up."""
        end, self._head_end = self._head_end, 0
        losses = self._losses
        gone = [sqn for sqn in range(end) if sqn in losses]
        if not gone:
            return
        for sqn in gone:
            del losses[sqn]
        self.unrecovered_tmo += len(gone)
        self._abandon(gone)
        self._events.append(Unrecovered(tuple(s & SQN_MASK for s in gone), "timeout"))

    # -- internals -------------------------------------------------------------------------------------

    def _draw(self, base_ns: int) -> int:
        return int(base_ns * self._rng.uniform(0.5, 1.5)) if base_ns else 0

    def _reschedule(self, sqn: int, loss: _Loss, next_nak: int) -> None:
        loss.next_nak = next_nak
        due = min(next_nak, loss.give_up) if self._send_naks else loss.give_up
        if due != loss.due:
            loss.due = due
            heapq.heappush(self._heap, (due, sqn))

    def _gap(self, end: int, now_ns: int, trail: int) -> None:
        """Datagrams ``self._next .. end - 1`` are missing; those before ``trail`` are gone already."""
        start = self._next
        self.lost += end - start
        keep_from = max(start, trail, end - (MAX_TRACKED_LOSSES - len(self._losses)))
        if keep_from > start:
            gone = min(keep_from, end)
            self.unrecovered_txw += gone - start
            listed = max(start, gone - MAX_TRACKED_LOSSES)  # never build an event of millions of sqns
            sqns = tuple(s & SQN_MASK for s in range(listed, gone))
            self._events.append(Unrecovered(sqns, "window", listed - start))
        if keep_from >= end:
            return
        next_nak = now_ns + self._draw(self._initial)
        give_up = now_ns + self._generation
        due = min(next_nak, give_up) if self._send_naks else give_up
        losses, heap = self._losses, self._heap
        if not losses:
            self._runs.clear()
        self._runs.append([keep_from, end])
        for sqn in range(keep_from, end):
            losses[sqn] = _Loss(now_ns, next_nak, give_up, due)
        if (end - keep_from) * 8 < len(heap):
            # a few more timers on a big heap: pushing each costs less than reordering the whole heap
            for sqn in range(keep_from, end):
                heapq.heappush(heap, (due, sqn))
        else:
            heap.extend([(due, sqn) for sqn in range(keep_from, end)])
            heapq.heapify(heap)

    def _first_loss(self) -> int:
        """The lowest sqn still missing; ``self._losses`` must not be empty."""
        losses, runs = self._losses, self._runs
        while runs:
            run = runs[0]
            sqn, end = run[0], run[1]
            while sqn < end:
                if sqn in losses:
                    run[0] = sqn
                    return sqn
                sqn += 1
            runs.popleft()
        return min(losses)  # not reached: every tracked loss lies in a run

    def _trail(self, trail: int) -> None:
        """The source's trailing edge is ``trail``: whatever is missing before it is unrecoverable."""
        losses = self._losses
        gone: list[int] = []
        while losses:
            first = self._first_loss()
            if first >= trail:
                break
            del losses[first]
            gone.append(first)
        if gone:
            self.unrecovered_txw += len(gone)
            self._events.append(Unrecovered(tuple(s & SQN_MASK for s in gone), "window"))

    # -- timers ----------------------------------------------------------------------------------------

    def poll(self, now_ns: int) -> list[list[int]]:
        """Run the timers due at ``now_ns``; return the NAK packets to send (wire sqns, ascending)."""
        heap, losses = self._heap, self._losses
        nak: list[int] = []
        timed_out: list[int] = []
        budget = MAX_POLL_ENTRIES
        while heap and heap[0][0] <= now_ns and budget:
            budget -= 1
            due, sqn = heapq.heappop(heap)
            loss = losses.get(sqn)
            if loss is None or loss.due != due:
                continue  # repaired, given up or rescheduled since
            if now_ns >= loss.give_up:
                del losses[sqn]
                timed_out.append(sqn)
            else:
                nak.append(sqn)
        if timed_out:
            timed_out.sort()
            self.unrecovered_tmo += len(timed_out)
            self._abandon(timed_out)
            self._events.append(Unrecovered(tuple(s & SQN_MASK for s in timed_out), "timeout"))
        if not nak:
            return []
        nak.sort()
        next_nak = now_ns + self._draw(self._backoff)
        for sqn in nak:
            loss = losses[sqn]
            if not loss.naks:
                loss.first_nak = now_ns
            loss.naks += 1
            self._reschedule(sqn, loss, next_nak)
        size = self._max_per_packet
        packets = [[s & SQN_MASK for s in nak[i : i + size]] for i in range(0, len(nak), size)]
        self.naks_sent += len(nak)
        self.nak_pckts_sent += len(packets)
        return packets

    def _abandon(self, sqns: list[int]) -> None:
        abandoned = self._abandoned
        for sqn in sqns:
            abandoned[sqn] = None
        # The oldest go first, each in constant time (a dict would be listed whole at every give-up
        # once full: under lasting unrecoverable loss, 65,536 keys per NAK timer that gave up).
        while len(abandoned) > _MAX_ABANDONED:
            abandoned.popitem(last=False)


def _sample(stat: list[int], value: int) -> None:
    count = stat[0]
    stat[0] = count + 1
    stat[1] += value
    if not count or value < stat[2]:
        stat[2] = value
    stat[3] = max(stat[3], value)
