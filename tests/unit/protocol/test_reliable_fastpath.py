"""The reliability engines' hot paths decide exactly what their general paths decide.

``LossDetector.in_order`` takes the next in-order datagram without running ``data``, and a receiving
engine's ``data_in_order`` takes the next in-order DATA datagram without ``datagram_received``: a
receiver that tries the hot path first must end in the same state as one that never does, whatever
arrives.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from openum.protocol.reliable import RmReceiver, RmReceiverParams, RuReceiver, RuReceiverParams
from openum.protocol.reliable._common import SQN_MASK
from openum.protocol.reliable._nak import LossDetector, Verdict
from openum.wire import lbtrm, lbtru
from openum.wire.lbtrm import RmData
from openum.wire.lbtru import RuData, RuSessionMessage
from tests.unit.protocol._reliable_net import loss_detector

MS = 1_000_000


def _detector() -> LossDetector:
    return loss_detector(generation_ms=10_000, seed=7)


def _state(det: LossDetector) -> tuple[object, ...]:
    return (
        det.started,
        det.contiguous(),
        det.pending,
        det.next_deadline(),
        det.lost,
        det.duplicate_data,
        det.out_of_order,
        det.late_repairs,
        det.unrecovered_txw,
    )


# Arrivals: (offset from the first sqn, trailing-edge lag, retransmission flag, ms since the last one).
_ARRIVALS = st.lists(
    st.tuples(st.integers(-3, 40), st.integers(0, 5), st.booleans(), st.integers(0, 100)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(start=st.sampled_from([0, 1000, SQN_MASK - 10]), arrivals=_ARRIVALS)
def test_in_order_then_data_equals_data_alone(start: int, arrivals: list[tuple[int, int, bool, int]]) -> None:
    fast, slow = _detector(), _detector()
    now = 0
    fast_hits = 0
    for offset, lag, rx, gap_ms in arrivals:
        now += gap_ms * MS
        wire = (start + offset) & SQN_MASK
        trail = (wire - lag) & SQN_MASK
        before = _state(fast)
        if fast.in_order(wire):
            fast_hits += 1
            verdict_fast = Verdict.NEW
        else:
            assert _state(fast) == before  # a refusal changes nothing
            verdict_fast = fast.data(wire, trail, rx, now)
        assert verdict_fast == slow.data(wire, trail, rx, now)
        for det in (fast, slow):  # what the engines do after every datagram
            due = det.next_deadline()
            if due is not None and due <= now:
                det.poll(now)
        assert fast.take_events() == slow.take_events()
        assert _state(fast) == _state(slow)
    # Everything after the first datagram in order (a first retransmission starts nothing: the sequence
    # space starts at the next original).
    in_order = all(o == i for i, (o, _, _, _) in enumerate(arrivals))
    if len(arrivals) > 1 and in_order and not arrivals[0][2]:
        assert fast_hits == len(arrivals) - 1


def test_in_order_refuses_before_the_start_with_losses_and_out_of_order() -> None:
    det = _detector()
    assert not det.in_order(0)  # nothing seen yet: data() starts the sequence space
    assert det.data(0, 0, False, 0) == Verdict.NEW
    assert det.in_order(1)
    assert not det.in_order(3)  # a gap: data() must detect it
    det.data(3, 0, False, 0)
    assert det.pending == 1
    assert not det.in_order(4)  # next in order, but datagram 2 is missing: data() keeps the books
    det.data(2, 0, False, 0)
    assert det.pending == 0
    assert det.in_order(4)  # repaired: in order again
    assert det.contiguous() == 4


# -- the receiving engines: data_in_order first, datagram_received for the rest -------------------------

SID = 0x1A2B3C4D
RM_SRC = ("10.0.0.1", 14390)
RU_SRC = ("10.0.0.1", 14380)


def _rm_receivers() -> tuple[RmReceiver, RmReceiver]:
    def one() -> RmReceiver:
        return RmReceiver(
            session_id=SID, source=RM_SRC, params=RmReceiverParams(), rng=random.Random(3), now_ns=0
        )

    return one(), one()


def _ru_receivers() -> tuple[RuReceiver, RuReceiver]:
    syn = lbtru.encode(RuSessionMessage(0, SQN_MASK, 0, lbtru.FLAG_SYN, lbtru.make_options(SID, 1)))
    pair = []
    for _ in range(2):
        r = RuReceiver(
            session_id=SID, source=RU_SRC, params=RuReceiverParams(), rng=random.Random(3), now_ns=0
        )
        r.poll(0)  # the first CREQ
        r.datagram_received(memoryview(syn), RU_SRC, 0)  # connected
        pair.append(r)
    return pair[0], pair[1]


def _rm_data(sqn: int, trail: int, rx: bool) -> bytes:
    flags = lbtrm.FLAG_UCAST_NAKS | (lbtrm.FLAG_RX if rx else 0)
    return lbtrm.encode(RmData(RM_SRC[1], SID, sqn, trail, b"m%d" % sqn, flags))


def _ru_data(sqn: int, trail: int, rx: bool) -> bytes:
    return lbtru.encode(RuData(sqn, trail, b"m%d" % sqn, lbtru.FLAG_RX if rx else 0, lbtru.make_options(SID)))


def _outcome(result: tuple[Any, Any, Any]) -> tuple[Any, ...]:
    received, outgoing, events = result
    return (
        [(bytes(r.payload), r.retransmission) for r in received],
        [(bytes(o.data), o.destination) for o in outgoing],
        [type(e).__name__ for e in events],
    )


# Mostly the next datagram in order (None), sometimes anywhere near it: the hot path is taken often
# and left often.
_MOSTLY_IN_ORDER = st.lists(
    st.tuples(
        st.one_of(st.none(), st.none(), st.none(), st.integers(-3, 40)),
        st.integers(0, 5),
        st.sampled_from([False, False, False, True]),
        st.integers(0, 100),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(transport=st.sampled_from(["lbtrm", "lbtru"]), arrivals=_MOSTLY_IN_ORDER)
def test_data_in_order_then_datagram_received_equals_datagram_received_alone(
    transport: str, arrivals: list[tuple[int | None, int, bool, int]]
) -> None:
    fast, slow = _rm_receivers() if transport == "lbtrm" else _ru_receivers()
    src = RM_SRC if transport == "lbtrm" else RU_SRC
    encode = _rm_data if transport == "lbtrm" else _ru_data
    now = 0
    taken = 0
    highest = -1
    for near, lag, rx, gap_ms in [(0, 0, False, 0), *arrivals]:  # the session starts with datagram 0
        now += gap_ms * MS
        offset = highest + 1 if near is None else near
        highest = max(highest, offset)
        wire = (1000 + offset) & SQN_MASK
        datagram = memoryview(encode(wire, (wire - lag) & SQN_MASK, rx))
        stats_before = fast.statistics()
        start = fast.data_in_order(datagram, src, now)
        if start < 0:
            assert fast.statistics() == stats_before  # a refusal changes nothing
            got = _outcome(fast.datagram_received(datagram, src, now))
        else:
            taken += 1
            got = ([(bytes(datagram[start:]), False)], [], [])
        assert got == _outcome(slow.datagram_received(datagram, src, now))
        for engine in (fast, slow):  # what the transports' timers do
            due = engine.next_deadline()
            if due is not None and due <= now:
                engine.poll(now)
        assert fast.statistics() == slow.statistics()
        assert fast.next_deadline() == slow.next_deadline()
    if arrivals and all(o is None and not rx for o, _, rx, _ in arrivals):
        assert taken == len(arrivals)  # every datagram after the first in order: all on the hot path


def test_given_up_sequence_numbers_are_forgotten_oldest_first_past_the_cap() -> None:
    """The detector remembers the last 65,536 sequence numbers it gave up on, so that a late repair of one
    counts as such; beyond that the oldest are forgotten (a repair of one is then a duplicate)."""
    from openum.protocol.reliable._nak import _MAX_ABANDONED, RECEIVE_WINDOW

    det = _detector()
    det.data(0, 0, False, 0)
    sqn, now, gaps = 0, 1 * MS, 9
    for _ in range(gaps):  # gaps inside the receive window, each given up in full before the next
        sqn += RECEIVE_WINDOW - 1
        det.data(sqn, 0, False, now)
        now += 20_000 * MS  # past the NAK generation interval
        while (due := det.next_deadline()) is not None and due <= now:
            det.poll(now)  # a bounded batch a poll
    lost = gaps * (RECEIVE_WINDOW - 2)
    assert lost > _MAX_ABANDONED
    assert det.unrecovered_tmo == lost
    assert len(det._abandoned) == _MAX_ABANDONED
    det.data(1, 0, True, now + 1)  # among the oldest: forgotten
    assert (det.late_repairs, det.duplicate_data) == (0, 1)
    det.data(sqn - 1, 0, True, now + 2)  # the newest given up: still known
    assert (det.late_repairs, det.duplicate_data) == (1, 1)
