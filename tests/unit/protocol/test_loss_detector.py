"""The loss detector's lowest missing sequence number, found without scanning its loss map.

A receiver that fell behind holds many losses and takes every datagram through ``LossDetector.data``,
which moves the trailing edge and so asks for the lowest loss each time; the detector keeps one run per
gap for that (each tracked sequence number passed once).  Whatever arrives, the answer must be the
lowest loss held: what ``contiguous()`` reports (LBT-RU's ACK) and where the trailing edge cuts.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from openum.protocol.reliable._common import SQN_MASK
from openum.protocol.reliable._nak import MAX_TRACKED_LOSSES, LossDetector
from openum.wire.lbtrm import NcfReason
from tests.unit.protocol._reliable_net import loss_detector

MS = 1_000_000


def _detector() -> LossDetector:
    return loss_detector(generation_ms=3_000, seed=3)


def _lowest(det: LossDetector) -> int:
    """What contiguous() must report: one before the lowest loss held (or the next expected)."""
    first = min(det._losses) if det._losses else det._next
    return (first - 1) & SQN_MASK


# (kind, offset from the start, trailing-edge offset, retransmission, ms since the last step, NCF reason)
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["data", "data", "data", "edges", "ncf", "poll"]),
        st.integers(0, 300),
        st.integers(0, 300),
        st.booleans(),
        st.integers(0, 800),
        st.sampled_from(list(NcfReason)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(start=st.sampled_from([0, 5000, SQN_MASK - 100]), steps=_STEPS)
def test_contiguous_is_one_before_the_lowest_loss_whatever_arrives(
    start: int, steps: list[tuple[str, int, int, bool, int, NcfReason]]
) -> None:
    det = _detector()
    det.data(start, start, False, 0)
    now = 0
    for kind, offset, trail_offset, rx, gap_ms, reason in steps:
        now += gap_ms * MS
        wire = (start + offset) & SQN_MASK
        trail = (start + min(offset, trail_offset)) & SQN_MASK
        if kind == "data":
            det.data(wire, trail, rx, now)
        elif kind == "edges":
            det.edges(wire, trail, now)
        elif kind == "ncf":
            det.ncf([wire, (wire + 1) & SQN_MASK], trail, int(reason), now)
        else:
            det.poll(now)
        assert det.contiguous() == _lowest(det)
        if det._losses and kind in ("data", "edges"):
            assert min(det._losses) >= det._abs(trail)  # the trailing edge took everything before it
        events = det.take_events()
        for event in events:
            assert all(s not in det._losses for s in event.sqns)


def test_repairs_in_order_after_a_large_gap_find_each_next_loss() -> None:
    """A gap of 20,000 datagrams repaired in order, new data between the repairs: after each repair
    the lowest loss is the next one, and the runs kept to find it are passed, not rebuilt."""
    det = _detector()
    gap = 20_000
    det.data(0, 0, False, 0)
    det.data(gap + 1, 0, False, 1 * MS)  # beyond the receive window: dropped until confirmed
    det.data(gap + 2, 0, False, 1 * MS)  # the next one confirms the jump: 1 .. gap + 1 missing
    assert det.pending == gap + 1 and det.out_of_window == 1
    nxt = gap + 3
    for s in range(1, gap + 1):
        det.data(s, 0, True, 2 * MS)
        det.data(nxt, 0, False, 2 * MS)
        nxt += 1
        if s % 997 == 0:
            assert det.contiguous() == s  # 1 .. s repaired: s + 1 is the lowest loss
            assert det._runs[0][0] == s + 1  # the run's cursor moved along with the repairs
    det.data(gap + 1, 0, True, 2 * MS)
    assert det.pending == 0
    assert det.contiguous() == nxt - 1


def test_a_gap_beyond_the_tracking_cap_keeps_its_newest_losses_findable() -> None:
    det = _detector()
    det.data(0, 0, False, 0)
    det.data(10, 0, False, 1 * MS)  # 1 .. 9 missing
    det.data(5, 0, True, 2 * MS)  # a hole in the first run
    end = 10 + MAX_TRACKED_LOSSES + 50
    det.data(end - 1, 0, False, 3 * MS)  # beyond the receive window: dropped until confirmed
    det.data(end, 0, False, 3 * MS)  # 11 .. end - 1: only the newest up to the cap are tracked
    assert det.pending == MAX_TRACKED_LOSSES
    assert det.contiguous() == _lowest(det)
    det.data(12_345, 12_345, False, 4 * MS)  # an old original: the trailing edge moves to 12,345
    assert det.contiguous() == _lowest(det)
    assert min(det._losses) >= 12_345
