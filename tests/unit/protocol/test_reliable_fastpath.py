"""The reliability engines' hot paths decide exactly what their general paths decide.

``LossDetector.in_order`` takes the next in-order datagram without running ``data``; a receiver that
tries it first must end in the same state as one that always calls ``data``, whatever arrives.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from openum.protocol.reliable._common import SQN_MASK
from openum.protocol.reliable._nak import LossDetector, Verdict

MS = 1_000_000


def _detector() -> LossDetector:
    return LossDetector(
        initial_backoff_ns=50 * MS,
        backoff_ns=200 * MS,
        suppress_ns=1000 * MS,
        generation_ns=10_000 * MS,
        send_naks=True,
        max_naks_per_packet=16,
        rng=random.Random(7),
    )


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
    if len(arrivals) > 1 and all(o == i for i, (o, _, _, _) in enumerate(arrivals)):
        assert fast_hits == len(arrivals) - 1  # everything after the first datagram in order


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
