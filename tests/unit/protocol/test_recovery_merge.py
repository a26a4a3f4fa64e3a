"""The merge of live data with Late Join / OTR retransmissions (UM Concepts Guide 10.2.5-10.2.6, 10.3.1,
3.5): order, flags, caching limits, BOS/EOS and loss, fed with hand-made delivery-controller outputs."""

from __future__ import annotations

import random

import pytest

from openum import MsgFlags
from openum.protocol.delivery import Delivery, DeliveryKind
from openum.protocol.recovery import (
    MSG_FLAG_OTR,
    MSG_FLAG_RETRANSMIT,
    RecoveryKind,
    RecoveryMerge,
    RecoveryParams,
    RecoveryRequester,
    Step,
)
from openum.wire.lbmc import LateJoinInfoHeader, RetransmissionRequestHeader

MS = 1_000_000
DATA = DeliveryKind.DATA
LOSS = DeliveryKind.UNRECOVERABLE_LOSS
BURST = DeliveryKind.UNRECOVERABLE_LOSS_BURST


def merge(ordered: int = 1, **kw: object) -> RecoveryMerge:
    req = RecoveryRequester(
        RecoveryParams(**kw),  # type: ignore[arg-type]
        source=("10.0.0.1", 14391),
        transport_index=3,
        topic_index=7,
        reply_to=("10.0.0.2", 14392),
        rng=random.Random(1),
    )
    return RecoveryMerge(req, ordered=ordered)


def live(*sqns: int) -> list[Delivery]:
    return [Delivery(DATA, s, b"m%d" % s) for s in sqns]


def loss(s: int) -> Delivery:
    return Delivery(LOSS, s)


def rx(m: RecoveryMerge, s: int, now: int = 0, **kw: object) -> Step:
    return m.on_retransmission(s, b"m%d" % s, now, **kw)  # type: ignore[arg-type]


def show(step: Step | list[Delivery]) -> list[str]:
    out = []
    for d in step.deliveries if isinstance(step, Step) else step:
        if d.kind is DATA:
            tag = "RX" if d.flags & MSG_FLAG_RETRANSMIT else "OTR" if d.flags & MSG_FLAG_OTR else ""
            out.append(f"{d.sqn}{tag}")
        elif d.kind is LOSS:
            out.append(f"L{d.sqn}")
        elif d.kind is BURST:
            out.append(f"B{d.first_sqn}-{d.sqn}")
        else:
            out.append(d.kind.value)
    return out


def requested(step: Step) -> list[int]:
    return [
        r.header.seqnum
        for r in step.requests
        if isinstance(r.header, RetransmissionRequestHeader) and not r.header.flags
    ]


def joined(m: RecoveryMerge, low: int, high: int, first_live: int | None, *, held: bool = True) -> Step:
    """Start late join, let the first live message arrive (if any), answer the LJI_REQ."""
    assert m.start_late_join(0)
    m.poll(0)
    if first_live is not None:
        got = show(m.on_live(live(first_live), 0))
        assert got == ([] if held else [str(first_live)])  # ordered: held until the plan is known
    return m.on_late_join_info(LateJoinInfoHeader(low, high, m.requester.request_index), MS)


def test_flags_are_ums() -> None:
    assert MSG_FLAG_RETRANSMIT == MsgFlags.RETRANSMIT
    assert MSG_FLAG_OTR == MsgFlags.OTR


def test_late_join_retransmissions_come_first_then_live_in_order() -> None:
    m = merge(use_late_join=True)
    assert show(m.on_live([Delivery(DeliveryKind.BOS, 0)], 0)) == ["bos"]
    step = joined(m, 5, 12, first_live=10)
    assert requested(step) == [5, 6, 7, 8, 9]
    assert show(m.on_live(live(11), MS)) == []
    assert show(rx(m, 6)) == []
    assert show(rx(m, 5)) == ["5RX", "6RX"]
    assert show(rx(m, 5)) == []  # a duplicate answer
    assert show(rx(m, 7)) + show(rx(m, 8)) == ["7RX", "8RX"]
    assert show(rx(m, 9)) == ["9RX", "10", "11"]
    assert show(m.on_live(live(12), MS)) == ["12"]
    st = m.statistics()
    assert (st.delivered, st.recovered_late_join, st.duplicates_dropped, st.held) == (8, 5, 1, 0)


def test_live_arriving_inside_the_recovered_range_is_not_delivered_twice() -> None:
    m = merge(use_late_join=True)
    step = joined(m, 0, 6, first_live=None)  # the LJ_INFO came before any live message
    assert requested(step) == list(range(7))
    assert show(rx(m, 0)) == ["0RX"]
    assert show(m.on_live(live(4, 5), MS)) == []  # the first live one: late join now stops at 3
    assert show(rx(m, 4)) == []  # live 4 is held already
    assert show(rx(m, 1)) + show(rx(m, 2)) + show(rx(m, 3)) == ["1RX", "2RX", "3RX", "4", "5"]
    assert show(rx(m, 6)) == ["6RX"]  # unsolicited but new: delivered once
    assert show(m.on_live(live(6, 7), MS)) == ["7"]


def test_late_join_loss_head_burst_and_timeouts() -> None:
    m = merge(use_late_join=True, retransmit_request_message_timeout=100, retransmit_request_interval=100)
    assert m.start_late_join(0, want_from=0)
    m.poll(0)
    m.on_live(live(8), 0)
    step = m.on_late_join_info(LateJoinInfoHeader(4, 9, m.requester.request_index), 0)
    assert show(step) == ["B0-3"]
    assert show(rx(m, 4)) + show(rx(m, 6)) + show(rx(m, 7)) == ["4RX"]
    assert show(m.poll(100 * MS)) == ["L5", "6RX", "7RX", "8"]


def test_otr_holds_the_stream_behind_a_declared_loss_and_flags_recoveries() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=50)
    assert show(m.on_live(live(1, 2), 0)) == ["1", "2"]
    step = m.on_live([loss(3), *live(4, 5)], 0)
    assert show(step) == []
    assert requested(m.poll(49 * MS)) == []
    assert requested(m.poll(50 * MS)) == [3]
    step = rx(m, 3, 60 * MS)
    assert show(step) == ["3OTR", "4", "5"]
    assert step.deliveries[0].flags == MsgFlags.OTR
    assert m.statistics().recovered_otr == 1


def test_otr_gives_up_and_reports_the_loss_once() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=0, otr_request_message_timeout=100)
    m.on_live(live(1), 0)
    assert show(m.on_live([loss(2), *live(3)], 0)) == []
    assert show(m.poll(100 * MS)) == ["L2", "3"]
    assert show(rx(m, 2, 101 * MS)) == []  # too late: the loss was reported
    assert m.statistics().duplicates_dropped == 1


def test_without_otr_losses_pass_straight_through() -> None:
    m = merge(use_otr=0)
    assert show(m.on_live([*live(1), loss(2), *live(3)], 0)) == ["1", "L2", "3"]
    assert m.next_deadline() is None


def test_early_otr_from_the_gap_and_the_later_dc_loss_is_ignored() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=10)
    m.on_live(live(1), 0)
    assert requested(m.on_gap(2, 2, 0)) == []
    assert requested(m.poll(10 * MS)) == [2]
    assert show(rx(m, 2, 11 * MS)) == ["2OTR"]
    assert show(m.on_live([loss(2), *live(3)], 20 * MS)) == ["3"]


def test_caching_proximity_drops_far_live_messages_and_requests_them_again() -> None:
    m = merge(use_late_join=True, retransmit_message_caching_proximity=3)
    joined(m, 0, 9, first_live=5)
    # 5 came before the plan (within 3 of the first live message); 6..8 are 3 or more past sqn 0.
    step = m.on_live(live(6, 7, 8), MS)
    assert show(step) == []
    assert requested(step) == [6, 7, 8]  # requested again, as late join retransmissions
    assert (m.statistics().live_dropped, m.statistics().held) == (3, 1)
    out: list[str] = []
    for s in range(5):
        out += show(rx(m, s))
    assert out == ["0RX", "1RX", "2RX", "3RX", "4RX", "5"]
    for s in range(6, 9):
        out += show(rx(m, s))
    assert out[6:] == ["6RX", "7RX", "8RX"]
    assert m.statistics().held == 0


def test_caching_proximity_off_caches_everything() -> None:
    m = merge(use_late_join=True, retransmit_message_caching_proximity=0x7FFF_FFFF)
    joined(m, 0, 9, first_live=5)
    m.on_live(live(*range(6, 500)), MS)
    assert m.statistics().live_dropped == 0
    assert m.statistics().held == 495


def test_otr_message_caching_threshold_bounds_what_is_held() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=1000, otr_message_caching_threshold=2)
    m.on_live(live(1), 0)
    step = m.on_live([loss(2), *live(3, 4, 5, 6)], 0)
    assert requested(step) == [5, 6]  # not cached: requested at once, without the initial delay
    assert m.statistics().held == 2
    assert m.statistics().live_dropped == 2
    assert requested(m.poll(1000 * MS)) == [2, 5, 6]  # 2 after its delay; 5 and 6 again
    out = show(rx(m, 5, 1001 * MS)) + show(rx(m, 2, 1001 * MS)) + show(rx(m, 6, 1001 * MS))
    assert out == ["2OTR", "3", "4", "5OTR", "6OTR"]


def test_a_dc_burst_is_final_and_discards_what_it_covers() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=0)
    m.on_live(live(1), 0)
    m.on_live([loss(2), *live(3)], 0)
    burst = Delivery(BURST, 9, first_sqn=2)
    assert show(m.on_live([burst, *live(10)], MS)) == ["B2-9", "10"]
    assert m.requester.statistics().otr_pending == 0
    assert show(rx(m, 2, MS)) == []


def test_eos_gives_up_what_is_pending_and_is_last() -> None:
    m = merge(use_late_join=True, use_otr=1)
    joined(m, 0, 4, first_live=3)
    rx(m, 1)
    m.on_live([*live(4), loss(5), *live(6)], MS)
    step = m.on_live([Delivery(DeliveryKind.EOS, 6)], 2 * MS)
    assert show(step) == ["L0", "1RX", "L2", "3", "4", "L5", "6", "eos"]
    assert show(rx(m, 0)) == []
    assert m.next_deadline() is None
    assert not m.start_late_join(3 * MS)


def test_eos_while_waiting_for_the_lj_info_releases_the_live_messages() -> None:
    m = merge(use_late_join=True)
    m.start_late_join(0)
    m.poll(0)
    m.on_live(live(7, 8), 0)
    assert show(m.on_live([Delivery(DeliveryKind.EOS, 8)], MS)) == ["7", "8", "eos"]


def test_late_join_must_start_before_live_data() -> None:
    m = merge(use_late_join=True)
    m.on_live(live(1), 0)
    assert not m.start_late_join(0)


def test_abandoned_late_join_delivers_from_the_first_live_message() -> None:
    m = merge(use_late_join=True, late_join_info_request_maximum=1, late_join_info_request_interval=10)
    m.start_late_join(0)
    m.poll(0)
    assert show(m.on_live(live(4, 5), 0)) == []
    assert show(m.poll(10 * MS)) == ["4", "5"]


def frag(m: RecoveryMerge, s: int, first: int, offset: int, total: int, part: bytes) -> Step:
    return m.on_retransmission(s, part, 0, fragment=(first, offset, total))


def test_retransmitted_fragments_are_reassembled_and_leading_tails_dropped() -> None:
    m = merge(use_late_join=True)
    joined(m, 1, 5, first_live=6)
    assert show(frag(m, 1, 0, 3, 6, b"def")) == []  # the tail of a message started before 1
    assert show(frag(m, 2, 2, 0, 4, b"ab")) == []
    step = frag(m, 3, 2, 2, 4, b"cd")
    assert show(step) == ["3RX"]
    assert (step.deliveries[0].payload, step.deliveries[0].first_sqn) == (b"abcd", 2)
    assert show(frag(m, 4, 4, 0, 2, b"xy")) == ["4RX"]  # one fragment, whole
    # The first fragment of 5..6 is released, but live 6 is not its next fragment: 5 is dropped.
    assert show(frag(m, 5, 5, 0, 5, b"abc")) == ["6"]
    assert m.statistics().fragments_discarded == 2


def test_an_otr_fragment_whose_message_cannot_complete_is_reported_lost() -> None:
    # The DC declared fragment 3 of message 2..4 lost and dropped 2 and 4 silently.
    m = merge(use_otr=1, otr_request_initial_delay=0)
    m.on_live(live(1), 0)
    m.on_live([loss(3), *live(5)], 0)
    assert show(frag(m, 3, 2, 2, 6, b"cd")) == ["L3", "5"]


@pytest.mark.parametrize("ordered", [-1, 0])
def test_arrival_order_delivers_at_once_without_duplicates(ordered: int) -> None:
    m = merge(ordered, use_late_join=True, use_otr=1, otr_request_initial_delay=0)
    joined(m, 0, 4, first_live=3, held=False)
    assert show(rx(m, 2)) == ["2RX"]
    assert show(m.on_live(live(4), 0)) == ["4"]
    assert show(rx(m, 4)) + show(rx(m, 3)) == []
    assert show(m.on_live([loss(5), *live(6)], 0)) == ["6"]
    assert show(rx(m, 5)) == ["5OTR"]
    first = frag(m, 0, 0, 0, 4, b"ab")
    second = frag(m, 1, 0, 2, 4, b"cd")
    if ordered == -1:
        assert show(first) == []
        assert show(second) == ["1RX"]
        assert second.deliveries[0].payload == b"abcd"
    else:
        assert show(first) + show(second) == ["0RX", "1RX"]
        assert second.deliveries[0].fragment == (0, 2, 4)
    burst = Delivery(BURST, 9, first_sqn=5)  # may cover sqns delivered early (6): reported per run
    assert show(m.on_live([burst], MS)) == ["B7-9"]


def test_requester_kind_reaches_the_message_flags() -> None:
    m = merge(use_late_join=True, use_otr=1, otr_request_initial_delay=0)
    joined(m, 0, 0, first_live=1)
    assert m.requester.on_retransmission(0, 0) is RecoveryKind.LATE_JOIN
    step = rx(m, 0)  # nothing waits for it any more, still new: a plain retransmission
    assert show(step) == ["0RX", "1"]


def test_take_next_lets_in_order_messages_through_only_while_nothing_is_pending() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=10)
    assert not m.take_next(1)  # nothing seen yet: the stream's start is the merge's to set
    assert show(m.on_live(live(1), 0)) == ["1"]
    assert m.take_next(2) and m.take_next(3)
    assert not m.take_next(5)  # not the next one
    assert m.statistics().delivered == 3 and m.next_sqn == 4
    m.on_gap(4, 4, 0)  # OTR recovers 4: nothing passes until it is settled
    assert not m.take_next(4)
    assert requested(m.poll(10 * MS)) == [4]
    assert show(rx(m, 4, 11 * MS)) == ["4OTR"]
    assert show(m.on_live([loss(4), *live(5)], 20 * MS)) == ["5"]  # the DC gave up on 4 later
    assert m.take_next(6)


def test_resume_recovers_what_was_sent_while_the_session_was_down() -> None:
    m = merge(use_otr=1, otr_request_initial_delay=0)
    m.resume(10)
    step = m.on_live(live(13, 14), 0)  # 10..12 were sent between the two sessions
    assert show(step) == [] and requested(step) == [10, 11, 12]
    assert show(rx(m, 11, MS)) == []  # held: 10 comes first
    assert show(rx(m, 10, MS)) == ["10OTR", "11OTR"]
    assert show(rx(m, 12, 2 * MS)) == ["12OTR", "13", "14"]
    assert m.statistics().recovered_otr == 3


def test_resume_without_otr_starts_at_the_first_live_message() -> None:
    m = merge(use_otr=0)
    m.resume(10)
    assert show(m.on_live(live(13, 14), 0)) == ["13", "14"]
    assert m.next_deadline() is None
