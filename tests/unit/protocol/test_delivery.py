"""The delivery controller (seed 2.3.1, 2.4.1, 2.4.3, 2.4.5, 2.11.1, 8.3.1, 8.7, 8.8, 8.9, 8.11.3,
8.11.5; spec A16, A28, A32, A33, A35), driven with explicit ``now_ns``."""

from __future__ import annotations

import dataclasses
import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openum.protocol.delivery import SQN_MASK, Delivery, DeliveryController, DeliveryKind

S = 1_000_000_000  # one second in ns
T = 10 * S  # the default loss timeout
NEVER = 1 << 62  # a loss timeout that never expires within a test
DATA = DeliveryKind.DATA
LOSS = DeliveryKind.UNRECOVERABLE_LOSS
BURST = DeliveryKind.UNRECOVERABLE_LOSS_BURST
BOS = DeliveryKind.BOS
EOS = DeliveryKind.EOS


def p(sqn: int) -> bytes:
    return b"m%d" % sqn


def brief(ds: list[Delivery]) -> list[tuple[str, int]]:
    """``[("DATA", 5), ("LOSS", 6), ...]``: what the receiver saw."""
    names = {DATA: "DATA", LOSS: "LOSS", BURST: "BURST", BOS: "BOS", EOS: "EOS"}
    return [(names[d.kind], d.sqn) for d in ds]


def feed(dc: DeliveryController, sqns: list[int], now: int = 0) -> list[Delivery]:
    out: list[Delivery] = []
    for s in sqns:
        out += dc.on_message(s & SQN_MASK, p(s & SQN_MASK), now)
    return out


def frags(first: int, payload: bytes, size: int) -> list[tuple[int, bytes, tuple[int, int, int]]]:
    """A message cut into ``size``-byte fragments: ``[(sqn, piece, (first, offset, total)), ...]``."""
    out = []
    for i, off in enumerate(range(0, len(payload), size)):
        out.append(((first + i) & SQN_MASK, payload[off : off + size], (first, off, len(payload))))
    return out


def feed_frags(
    dc: DeliveryController, pieces: list[tuple[int, bytes, tuple[int, int, int]]], now: int = 0
) -> list[Delivery]:
    out: list[Delivery] = []
    for sqn, piece, frag in pieces:
        out += dc.on_message(sqn, piece, now, fragment=frag)
    return out


# ------------------------------------------------------------------------------------ in order


def test_first_message_sets_the_starting_point_and_in_order_messages_pass_straight_through() -> None:
    dc = DeliveryController()
    out = feed(dc, [1000, 1001, 1002])
    assert brief(out) == [("DATA", 1000), ("DATA", 1001), ("DATA", 1002)]
    assert [d.payload for d in out] == [p(1000), p(1001), p(1002)]
    assert dc.next_deadline() is None
    st_ = dc.statistics()
    assert st_.msgs_delivered == 3 and st_.bytes_delivered == sum(len(p(s)) for s in (1000, 1001, 1002))
    assert st_.unrecoverable_losses == 0 and st_.map_entries == 0


def test_in_order_payload_is_passed_through_zero_copy() -> None:
    dc = DeliveryController()
    buf = bytearray(b"abcdefgh")
    view = memoryview(buf)
    first_payload, second_payload = view[:4], view[4:]
    first = dc.on_message(7, first_payload, 0)  # the first message takes the slow path
    second = dc.on_message(8, second_payload, 0)  # the hot path
    assert first[0].payload is first_payload
    assert second[0].payload is second_payload


def test_hot_path_delivery_equals_a_normally_built_one() -> None:
    dc = DeliveryController()
    dc.on_message(1, b"a", 0)
    (d,) = dc.on_message(2, b"b", 0, flags=4, properties={"k": 1})
    expected = Delivery(DATA, 2, b"b", 4, {"k": 1})
    assert d == expected and repr(d) == repr(expected)
    assert d.first_sqn is None and d.fragment is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.sqn = 3  # type: ignore[misc]


def test_flags_and_properties_pass_through() -> None:
    dc = DeliveryController()
    out = dc.on_message(1, b"x", 0, flags=0x10, properties="props")
    out += dc.on_message(3, b"z", 0, flags=0x20, properties="p3")
    out += dc.on_message(2, b"y", 0, flags=0x40, properties="p2")
    assert [(d.sqn, d.flags, d.properties) for d in out] == [
        (1, 0x10, "props"),
        (2, 0x40, "p2"),
        (3, 0x20, "p3"),
    ]


def test_invalid_arguments_are_rejected() -> None:
    with pytest.raises(ValueError, match="ordered"):
        DeliveryController(ordered=2)
    with pytest.raises(ValueError, match=">= 0"):
        DeliveryController(loss_timeout_ns=-1)


# ------------------------------------------------------------------------- gaps and loss (mode 1)


def test_gap_holds_later_messages_until_the_retransmission_arrives() -> None:
    dc = DeliveryController()
    assert brief(feed(dc, [10])) == [("DATA", 10)]
    assert feed(dc, [12, 13], now=1 * S) == []
    assert dc.next_deadline() == 1 * S + T
    st_ = dc.statistics()
    assert st_.out_of_order_held == 2 and st_.map_entries == 2 and st_.gaps_pending == 1
    assert brief(feed(dc, [11], now=2 * S)) == [("DATA", 11), ("DATA", 12), ("DATA", 13)]
    assert dc.next_deadline() is None
    st_ = dc.statistics()
    assert st_.unrecoverable_losses == 0 and st_.out_of_order_held == 0 and st_.out_of_order_total == 2
    assert brief(feed(dc, [14])) == [("DATA", 14)]


def test_held_payloads_are_copied_because_the_transport_reuses_its_buffer() -> None:
    dc = DeliveryController()
    dc.on_message(1, b"one", 0)
    buf = bytearray(b"three")
    dc.on_message(3, memoryview(buf), 0)
    buf[:] = b"XXXXX"
    out = dc.on_message(2, b"two", 0)
    assert [bytes(d.payload) for d in out] == [b"two", b"three"]
    assert isinstance(out[1].payload, bytes)


def test_gap_timer_expiry_reports_each_lost_sqn_in_stream_position() -> None:
    dc = DeliveryController()
    feed(dc, [1])
    assert feed(dc, [4, 6], now=0) == []
    assert dc.on_timer(T - 1) == []
    out = dc.on_timer(T)
    assert brief(out) == [("LOSS", 2), ("LOSS", 3), ("DATA", 4), ("LOSS", 5), ("DATA", 6)]
    assert out[0] == Delivery(LOSS, 2)
    assert dc.next_deadline() is None
    assert dc.statistics().unrecoverable_losses == 3
    # A late retransmission of a lost or delivered sqn is a duplicate.
    assert feed(dc, [3, 4], now=T + 1) == []
    assert dc.statistics().duplicates_dropped == 2
    assert brief(feed(dc, [7])) == [("DATA", 7)]


def test_each_gap_has_its_own_timer_started_when_it_is_first_seen() -> None:
    dc = DeliveryController()
    feed(dc, [1])
    feed(dc, [3], now=0)  # gap {2}, deadline T
    feed(dc, [6], now=4 * S)  # gap {4, 5}, deadline T + 4 s
    assert dc.next_deadline() == T
    assert brief(dc.on_timer(T)) == [("LOSS", 2), ("DATA", 3)]
    assert dc.next_deadline() == T + 4 * S
    assert brief(feed(dc, [4], now=T + S)) == [("DATA", 4)]
    assert dc.on_timer(T + 4 * S - 1) == []
    assert brief(dc.on_timer(T + 4 * S)) == [("LOSS", 5), ("DATA", 6)]
    assert dc.next_deadline() is None


def test_due_timers_fire_before_a_message_that_arrives_late() -> None:
    dc = DeliveryController()
    feed(dc, [1])
    feed(dc, [3], now=0)
    out = feed(dc, [2], now=T)  # the timer was due: 2 is declared lost first, then this copy is late
    assert brief(out) == [("LOSS", 2), ("DATA", 3)]
    assert dc.statistics().duplicates_dropped == 1


def test_zero_loss_timeout_declares_at_once_as_tcp_does() -> None:
    dc = DeliveryController(loss_timeout_ns=0)
    feed(dc, [5])
    assert brief(feed(dc, [8], now=3)) == [("LOSS", 6), ("LOSS", 7), ("DATA", 8)]
    assert dc.next_deadline() is None
    assert brief(feed(dc, [9])) == [("DATA", 9)]


def test_duplicates_of_delivered_and_held_messages_are_dropped_and_counted() -> None:
    dc = DeliveryController()
    feed(dc, [1, 2])
    assert feed(dc, [2, 1]) == []
    feed(dc, [4])
    assert feed(dc, [4]) == []
    assert brief(feed(dc, [3])) == [("DATA", 3), ("DATA", 4)]
    assert dc.statistics().duplicates_dropped == 3
    assert dc.statistics().msgs_delivered == 4


def test_messages_before_the_starting_point_are_dropped() -> None:
    dc = DeliveryController()
    feed(dc, [50])
    assert feed(dc, [49, 10]) == []
    assert dc.statistics().duplicates_dropped == 2


# ------------------------------------------------------------------------------ burst loss (2.4.5)


def _burst_example(threshold: int) -> tuple[DeliveryController, list[Delivery]]:
    """Seed 2.4.5: 9 delivered, 10 lost, 11..30 held, then 1055 arrives."""
    dc = DeliveryController(maximum_burst_loss=threshold)
    out = feed(dc, [9])
    out += feed(dc, list(range(11, 31)), now=0)
    out += feed(dc, [1055], now=S)
    return dc, out


def test_burst_loss_worked_example_threshold_1000() -> None:
    dc, out = _burst_example(1000)
    assert brief(out) == [("DATA", 9), ("BURST", 1054), ("DATA", 1055)]
    assert out[1] == Delivery(BURST, 1054, first_sqn=10)
    st_ = dc.statistics()
    assert st_.burst_losses == 1 and st_.burst_discarded == 20 and st_.unrecoverable_losses == 0
    assert dc.next_deadline() is None and st_.map_entries == 0
    # 11..30 were declared lost: a retransmission of them is discarded.
    assert feed(dc, [10, 11, 30], now=2 * S) == []
    assert dc.on_timer(100 * S) == []
    assert brief(feed(dc, [1056])) == [("DATA", 1056)]


def test_burst_loss_worked_example_threshold_1e9_is_per_sqn_loss_after_the_timeout() -> None:
    dc, out = _burst_example(1_000_000_000)
    assert brief(out) == [("DATA", 9)]
    assert dc.on_timer(T - 1) == []
    out = dc.on_timer(T + S)
    expected = [("LOSS", 10)] + [("DATA", s) for s in range(11, 31)]
    expected += [("LOSS", s) for s in range(31, 1055)] + [("DATA", 1055)]
    assert brief(out) == expected
    assert dc.statistics().unrecoverable_losses == 1 + 1024 and dc.statistics().burst_losses == 0


def test_burst_threshold_is_exceeded_only_by_a_longer_gap() -> None:
    dc = DeliveryController()  # default 1024
    feed(dc, [0])
    assert feed(dc, [1025]) == []  # a gap of exactly 1024: ordinary loss handling
    assert dc.next_deadline() == T
    dc2 = DeliveryController()
    feed(dc2, [0])
    out = feed(dc2, [1026])  # 1025 missing
    assert brief(out) == [("BURST", 1025), ("DATA", 1026)] and out[0].first_sqn == 1


def test_burst_before_the_first_delivery_is_suppressed() -> None:
    dc = DeliveryController(maximum_burst_loss=10)
    # Joining mid-message: the tail fragment is dropped, nothing is delivered yet.
    assert dc.on_message(100, b"tail", 0, fragment=(99, 10, 14)) == []
    out = feed(dc, [200])
    assert brief(out) == [("DATA", 200)]
    st_ = dc.statistics()
    assert st_.burst_losses == 0 and st_.leading_losses_suppressed == 99


# ---------------------------------------------------------------------------- TSNI (A33, A35)


def test_a35_timeline_tsni_at_5s_reveals_tail_loss_reported_at_15s() -> None:
    dc = DeliveryController()
    out = dc.begin(0)
    out += dc.on_message(0, b"a0", 0)
    big = bytes(range(256)) * 40
    for sqn, piece, frag in frags(1, big, 8000):  # 8.11.3: 2 fragments, sqn 1 and 2
        out += dc.on_message(sqn, piece, 0, fragment=frag)
    out += dc.on_message(3, b"a3", 0)
    assert brief(out) == [("BOS", 0), ("DATA", 0), ("DATA", 2), ("DATA", 3)]
    assert out[2].first_sqn == 1 and out[2].payload == big
    # T=0: sqn 4 is sent and lost.  T=5 s: the TSNI says 4 was the last sent.
    assert dc.on_tsni(4, 5 * S) == []
    assert dc.next_deadline() == 15 * S
    assert dc.on_timer(10 * S + S // 5) == []  # transport-level declaration: nothing at topic level
    assert dc.on_timer(15 * S - 1) == []
    out = dc.on_timer(15 * S)
    assert brief(out) == [("LOSS", 4)]
    assert dc.next_deadline() is None
    st_ = dc.statistics()
    assert st_.tsnis_received == 1 and st_.unrecoverable_losses == 1 and st_.messages_reassembled == 1


def test_messages_after_a_tsni_gap_are_held_until_the_topic_timer() -> None:
    dc = DeliveryController()
    feed(dc, [0, 1, 2, 3])
    dc.on_tsni(4, 5 * S)
    assert feed(dc, [5, 6], now=7 * S) == []
    assert dc.next_deadline() == 15 * S
    assert brief(dc.on_timer(15 * S)) == [("LOSS", 4), ("DATA", 5), ("DATA", 6)]


def test_a_tsni_gap_filled_by_recovery_reports_no_loss() -> None:
    dc = DeliveryController()
    feed(dc, [0, 1, 2, 3])
    dc.on_tsni(5, 5 * S)
    assert brief(feed(dc, [4, 5], now=6 * S)) == [("DATA", 4), ("DATA", 5)]
    assert dc.next_deadline() is None
    assert dc.on_timer(20 * S) == []
    assert brief(feed(dc, [6])) == [("DATA", 6)]


def test_a_tsni_for_a_known_sqn_is_only_liveness() -> None:
    dc = DeliveryController()
    feed(dc, [0, 1, 2])
    assert dc.on_tsni(2, 5 * S) == []
    assert dc.on_tsni(1, 6 * S) == []
    assert dc.next_deadline() is None
    assert brief(feed(dc, [3])) == [("DATA", 3)]
    assert dc.statistics().tsnis_received == 2


def test_a_tsni_before_any_message_sets_no_starting_point() -> None:
    dc = DeliveryController()
    assert dc.on_tsni(40, 0) == []
    assert dc.next_deadline() is None
    assert brief(feed(dc, [41])) == [("DATA", 41)]


def test_a_tsni_revealing_a_huge_gap_is_a_burst() -> None:
    dc = DeliveryController(maximum_burst_loss=100)
    feed(dc, [0])
    out = dc.on_tsni(500, S)
    assert out == [Delivery(BURST, 500, first_sqn=1)]
    assert brief(feed(dc, [501])) == [("DATA", 501)]


def test_tsni_burst_threshold_counts_the_announced_sqn() -> None:
    dc = DeliveryController(maximum_burst_loss=10)
    feed(dc, [0])
    assert dc.on_tsni(10, S) == []  # 1..10: ten missing, not more than the threshold
    dc2 = DeliveryController(maximum_burst_loss=10)
    feed(dc2, [0])
    assert dc2.on_tsni(11, S) == [Delivery(BURST, 11, first_sqn=1)]


def test_zero_timeout_tsni_declares_at_once() -> None:
    dc = DeliveryController(loss_timeout_ns=0)
    feed(dc, [0])
    assert brief(dc.on_tsni(2, S)) == [("LOSS", 1), ("LOSS", 2)]


# ---------------------------------------------------------------------------------- BOS / EOS


def test_bos_once_and_eos_once_after_everything_deliverable() -> None:
    dc = DeliveryController()
    assert dc.begin(0) == [Delivery(BOS, 0)]
    assert dc.begin(1) == []
    feed(dc, [1])
    feed(dc, [3, 4])
    dc.on_message(6, b"frag", 0, fragment=(6, 0, 100))  # a partial message: its tail was never seen
    out = dc.end(S)
    assert brief(out) == [("LOSS", 2), ("DATA", 3), ("DATA", 4), ("LOSS", 5), ("EOS", 6)]
    assert dc.end(S) == []
    assert dc.begin(S) == []
    assert feed(dc, [7]) == []
    assert dc.on_tsni(9, S) == [] and dc.on_timer(100 * S) == []
    assert dc.next_deadline() is None
    st_ = dc.statistics()
    assert st_.map_entries == 0 and st_.fragments_discarded == 1


def test_eos_without_bos_and_without_messages() -> None:
    dc = DeliveryController()
    assert dc.end(0) == [Delivery(EOS, 0)]


# ---------------------------------------------------------------------------- fragments (A28)


def test_reassembly_delivers_one_message_with_the_last_fragments_sqn() -> None:
    dc = DeliveryController()
    feed(dc, [4])
    whole = bytes(range(250)) * 100
    pieces = frags(5, whole, 9000)
    assert [s for s, _, _ in pieces] == [5, 6, 7]
    out = feed_frags(dc, pieces)
    assert len(out) == 1
    (d,) = out
    assert (d.kind, d.sqn, d.first_sqn, d.fragment) == (DATA, 7, 5, None)
    assert d.payload == whole and isinstance(d.payload, bytes)
    st_ = dc.statistics()
    assert st_.fragments_received == 3 and st_.messages_reassembled == 1 and st_.fragments_held == 0
    assert brief(feed(dc, [8])) == [("DATA", 8)]


def test_reassembly_in_order_mode_with_reordered_fragments() -> None:
    dc = DeliveryController()
    feed(dc, [4])
    pieces = frags(5, b"0123456789", 4)
    out = feed_frags(dc, [pieces[2], pieces[0]])
    assert out == [] and dc.statistics().fragments_held == 1
    out = feed_frags(dc, [pieces[1]])
    assert brief(out) == [("DATA", 7)] and out[0].payload == b"0123456789"


def test_reassembled_message_takes_flags_and_properties_of_the_completing_fragment() -> None:
    dc = DeliveryController()
    feed(dc, [0])
    pieces = frags(1, b"abcdef", 3)
    out = dc.on_message(pieces[0][0], pieces[0][1], 0, fragment=pieces[0][2], flags=1, properties="a")
    out += dc.on_message(pieces[1][0], pieces[1][1], 0, fragment=pieces[1][2], flags=2, properties="b")
    assert [(d.sqn, d.flags, d.properties) for d in out] == [(2, 2, "b")]


def test_a_message_with_a_lost_fragment_is_reported_lost_never_delivered_partially() -> None:
    dc = DeliveryController()
    feed(dc, [4])
    pieces = frags(5, b"aaaabbbbcccc", 4)
    out = feed_frags(dc, [pieces[0], pieces[2]])
    out += feed(dc, [8])
    assert out == []
    out = dc.on_timer(T)
    assert brief(out) == [("LOSS", 6), ("DATA", 8)]
    st_ = dc.statistics()
    assert st_.fragments_discarded == 2 and st_.messages_reassembled == 0


def test_a_partial_message_whose_last_fragment_is_lost_is_released_with_the_loss() -> None:
    dc = DeliveryController()
    feed(dc, [4])
    pieces = frags(5, b"aaaabbbbcccc", 4)  # 5, 6, 7; 7 is lost
    assert feed_frags(dc, pieces[:2]) == []
    assert dc.statistics().fragments_held == 2
    dc.on_tsni(7, S)
    assert brief(dc.on_timer(S + T)) == [("LOSS", 7)]
    st_ = dc.statistics()
    assert st_.fragments_held == 0 and st_.fragments_discarded == 2


def test_one_fragment_message_is_delivered_as_is() -> None:
    dc = DeliveryController()
    feed(dc, [0])
    out = dc.on_message(1, b"abc", 0, fragment=(1, 0, 3))
    assert out == [Delivery(DATA, 1, b"abc", first_sqn=1)]


def test_inconsistent_fragment_headers_are_dropped_not_crashing() -> None:
    dc = DeliveryController()
    feed(dc, [0])
    out = dc.on_message(1, b"abcd", 0, fragment=(1, 0, 8))
    out += dc.on_message(2, b"efgh", 0, fragment=(1, 2, 8))  # wrong offset
    out += dc.on_message(3, b"xx", 0, fragment=(3, 5, 8))  # a first fragment not at offset 0
    out += dc.on_message(4, b"toolong", 0, fragment=(4, 0, 3))  # longer than its total
    out += dc.on_message(5, b"ok", 0)
    assert brief(out) == [("DATA", 5)]
    assert dc.statistics().fragments_discarded == 4


# ------------------------------------------------------------------ leading loss suppression (2.4.3)


@pytest.mark.parametrize("ordered", [1, -1])
def test_joining_mid_message_drops_the_tail_silently_and_first_delivery_is_complete(ordered: int) -> None:
    dc = DeliveryController(ordered=ordered)
    partial = frags(100, b"A" * 4000, 1000)  # sqn 100..103; we join at 102
    out = feed_frags(dc, partial[2:])
    nxt = frags(104, b"B" * 2500, 1000)  # sqn 104..106
    out += feed_frags(dc, nxt)
    assert brief(out) == [("DATA", 106)]
    assert out[0].payload == b"B" * 2500 and out[0].first_sqn == 104
    st_ = dc.statistics()
    assert st_.fragments_discarded == 2 and st_.unrecoverable_losses == 0
    # After the first delivery, loss events are enabled.
    feed(dc, [109], now=S)
    out = dc.on_timer(S + T)
    losses = [d.sqn for d in out if d.kind is LOSS]
    assert losses == [107, 108]


def test_losses_before_the_first_delivery_are_suppressed() -> None:
    dc = DeliveryController()
    dc.on_message(102, b"tail", 0, fragment=(100, 3000, 3004))  # the end of a message begun before us
    assert feed(dc, [105], now=0) == []  # 103, 104 missing
    out = dc.on_timer(T)
    assert brief(out) == [("DATA", 105)]
    st_ = dc.statistics()
    assert st_.leading_losses_suppressed == 2 and st_.unrecoverable_losses == 0


# ------------------------------------------------------------------------ arrival order (A32)


def test_mode_minus_1_delivers_k_plus_1_k_plus_2_then_k() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [9])
    out = feed(dc, [11, 12, 10])
    assert brief(out) == [("DATA", 11), ("DATA", 12), ("DATA", 10)]
    assert dc.next_deadline() is None and dc.statistics().map_entries == 0
    out = feed(dc, [12, 10, 11])
    assert out == [] and dc.statistics().duplicates_dropped == 3
    assert brief(feed(dc, [13])) == [("DATA", 13)]


def test_mode_1_delivers_k_k_plus_1_k_plus_2_after_recovery() -> None:
    dc = DeliveryController(ordered=1)
    feed(dc, [9])
    out = feed(dc, [11, 12, 10])
    assert brief(out) == [("DATA", 10), ("DATA", 11), ("DATA", 12)]


def test_mode_minus_1_reassembled_sqn_is_the_last_fragments() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    pieces = frags(5, b"xxxxyyyyzz", 4)
    out = feed_frags(dc, [pieces[2], pieces[0], pieces[1]])  # arrival order 7, 5, 6
    assert len(out) == 1
    assert (out[0].sqn, out[0].first_sqn, out[0].payload) == (7, 5, b"xxxxyyyyzz")
    assert dc.statistics().messages_reassembled == 1


def test_mode_minus_1_a_later_message_overtakes_a_partial_one() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    pieces = frags(5, b"xxxxyyyyzz", 4)  # 5, 6, 7
    out = feed_frags(dc, [pieces[0]])
    out += feed(dc, [8])
    out += feed_frags(dc, pieces[1:])
    assert brief(out) == [("DATA", 8), ("DATA", 7)]


def test_mode_minus_1_unfilled_gap_is_reported_when_its_timer_expires() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [1])
    out = feed(dc, [4, 3], now=0)
    assert brief(out) == [("DATA", 4), ("DATA", 3)]
    assert dc.next_deadline() == T
    assert brief(dc.on_timer(T)) == [("LOSS", 2)]
    assert feed(dc, [2]) == []
    assert dc.statistics().duplicates_dropped == 1


def test_mode_minus_1_partial_message_with_a_lost_fragment_is_dropped() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    pieces = frags(5, b"aaaabbbbcccc", 4)
    out = feed_frags(dc, [pieces[0], pieces[2]])
    assert out == [] and dc.statistics().fragments_held == 2
    assert brief(dc.on_timer(T)) == [("LOSS", 6)]
    assert dc.statistics().fragments_held == 0 and dc.statistics().fragments_discarded == 2
    assert feed_frags(dc, [pieces[1]]) == []  # too late: a duplicate


def test_mode_minus_1_overlapping_fragments_never_deliver_garbage() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    out = dc.on_message(5, b"abcd", 0, fragment=(5, 0, 8))
    out += dc.on_message(6, b"xx", 0, fragment=(5, 2, 8))  # overlaps the first piece
    out += dc.on_message(7, b"efgh", 0, fragment=(5, 4, 8))
    out += feed(dc, [8])
    assert brief(out) == [("DATA", 8)]
    st_ = dc.statistics()
    assert st_.fragments_discarded == 3 and st_.fragments_held == 0


def test_mode_minus_1_partial_message_whose_next_sqn_was_taken_is_dropped() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    assert brief(feed(dc, [7])) == [("DATA", 7)]  # sqn 7 is an unfragmented message
    out = dc.on_message(5, b"abcd", 0, fragment=(5, 0, 12))
    out += dc.on_message(6, b"efgh", 0, fragment=(5, 4, 12))  # its third fragment would need sqn 7
    assert out == []
    st_ = dc.statistics()
    assert st_.fragments_held == 0 and st_.fragments_discarded == 2
    assert dc.on_timer(T) == []  # 5 and 6 were received: no loss


def test_mode_minus_1_fragments_of_a_broken_message_are_orphans() -> None:
    dc = DeliveryController(ordered=-1)
    feed(dc, [4])
    out = dc.on_message(6, b"aaaa", 0, fragment=(6, 0, 12))  # 5 is missing
    out += feed(dc, [7])  # an unfragmented message where the second fragment was due
    out += dc.on_message(8, b"cccc", 0, fragment=(6, 8, 12))
    assert brief(out) == [("DATA", 7)]
    st_ = dc.statistics()
    assert st_.fragments_held == 0 and st_.fragments_discarded == 2
    assert brief(dc.on_timer(T)) == [("LOSS", 5)]


def test_mode_0_delivers_every_fragment_as_its_own_message() -> None:
    dc = DeliveryController(ordered=0)
    feed(dc, [4])
    pieces = frags(5, b"xxxxyyyyzz", 4)
    out = feed_frags(dc, [pieces[1], pieces[0], pieces[2]])
    assert [(d.kind, d.sqn, d.payload, d.fragment) for d in out] == [
        (DATA, 6, b"yyyy", (5, 4, 10)),
        (DATA, 5, b"xxxx", (5, 0, 10)),
        (DATA, 7, b"zz", (5, 8, 10)),
    ]
    assert dc.statistics().messages_reassembled == 0
    assert feed_frags(dc, [pieces[1]]) == []  # duplicates still dropped


# ------------------------------------------------------------------------------- wrap-around


def test_sequence_numbers_wrap_at_2_32() -> None:
    dc = DeliveryController()
    top = SQN_MASK
    assert brief(feed(dc, [top - 1, top, 0, 1])) == [
        ("DATA", top - 1),
        ("DATA", top),
        ("DATA", 0),
        ("DATA", 1),
    ]
    assert feed(dc, [top - 5, top]) == []  # before the window: old
    assert dc.statistics().duplicates_dropped == 2


def test_gap_and_loss_across_the_wrap() -> None:
    dc = DeliveryController()
    top = SQN_MASK
    feed(dc, [top - 1])
    assert feed(dc, [1], now=0) == []
    assert brief(feed(dc, [top])) == [("DATA", top)]
    assert brief(dc.on_timer(T)) == [("LOSS", 0), ("DATA", 1)]
    dc2 = DeliveryController()
    feed(dc2, [top])
    pieces = frags(0, b"abcdef", 2)  # a fragmented message starting at 0
    out = feed_frags(dc2, pieces)
    assert [(d.sqn, d.first_sqn, d.payload) for d in out] == [(2, 0, b"abcdef")]
    dc3 = DeliveryController(maximum_burst_loss=10)
    feed(dc3, [top - 2])
    out = feed(dc3, [20])
    assert out == [Delivery(BURST, 19, first_sqn=top - 1), Delivery(DATA, 20, p(20))]


# -------------------------------------------------------------------------- bounded memory


def test_full_order_map_declares_the_oldest_gap_early() -> None:
    dc = DeliveryController(maximum_map_entries=3)
    feed(dc, [1])
    assert feed(dc, [3, 4, 5]) == []
    out = feed(dc, [7])  # 4 entries > 3: gap {2} is declared lost now
    assert brief(out) == [("LOSS", 2), ("DATA", 3), ("DATA", 4), ("DATA", 5)]
    st_ = dc.statistics()
    assert st_.map_overflow_losses == 1 and st_.map_entries == 1 and dc.next_deadline() == T
    assert brief(dc.on_timer(T)) == [("LOSS", 6), ("DATA", 7)]


def test_full_received_set_in_arrival_mode_declares_the_oldest_gap_early() -> None:
    dc = DeliveryController(ordered=-1, maximum_map_entries=2)
    feed(dc, [1])
    out = feed(dc, [3, 4, 6])
    assert brief(out) == [("DATA", 3), ("DATA", 4), ("DATA", 6), ("LOSS", 2)]
    assert dc.statistics().map_entries == 1


def test_unbounded_map_when_the_cap_is_zero() -> None:
    dc = DeliveryController(maximum_map_entries=0)
    feed(dc, [0])
    assert feed(dc, list(range(2, 500))) == []
    assert dc.statistics().map_entries == 498


def test_statistics_snapshot_is_frozen() -> None:
    dc = DeliveryController()
    snap = dc.statistics()
    feed(dc, [1])
    assert snap.msgs_delivered == 0 and dc.statistics().msgs_delivered == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.msgs_delivered = 5  # type: ignore[misc]


# ------------------------------------------------------------------------------ properties


def _chaos(base: int, n: int, seed: int, drop: float, dup: float) -> list[int]:
    """Stream ``base..base+n-1`` (wrapping), with drops, duplicates and a random arrival order."""
    rng = random.Random(seed)
    arrivals = []
    for i in range(n):
        if rng.random() < drop:
            continue
        arrivals.append((base + i) & SQN_MASK)
        if rng.random() < dup:
            arrivals.append((base + i) & SQN_MASK)
    rng.shuffle(arrivals)
    return arrivals


def _rel(sqn: int, base: int) -> int:
    return (sqn - base) & SQN_MASK


chaos = st.tuples(
    st.integers(0, SQN_MASK),
    st.integers(1, 120),
    st.integers(0, 2**32),
    st.sampled_from([0.0, 0.1, 0.4]),
    st.sampled_from([0.0, 0.2]),
)


@settings(max_examples=200, deadline=None)
@given(chaos)
def test_property_ordered_data_is_exactly_the_received_sqns_in_order(
    args: tuple[int, int, int, float, float],
) -> None:
    base, n, seed, drop, dup = args
    arrivals = _chaos(base, n, seed, drop, dup)
    if not arrivals:
        return
    dc = DeliveryController(loss_timeout_ns=NEVER, maximum_burst_loss=10**9, maximum_map_entries=0)
    out = feed(dc, arrivals)
    start = arrivals[0]
    expected = sorted(
        {s for s in arrivals if _rel(s, base) >= _rel(start, base)}, key=lambda s: _rel(s, base)
    )
    data = [d.sqn for d in out if d.kind is DATA]
    # Without loss declared: the contiguous prefix, in order, never a duplicate.
    prefix = []
    for s in expected:
        if prefix and s != (prefix[-1] + 1) & SQN_MASK:
            break
        prefix.append(s)
    assert data == prefix
    assert all(d.kind is DATA for d in out)
    assert all(d.payload == p(d.sqn) for d in out)
    # EOS: everything received is delivered, in order, exactly once.
    out += dc.end(0)
    assert [d.sqn for d in out if d.kind is DATA] == expected


@settings(max_examples=200, deadline=None)
@given(chaos, st.sampled_from([1, -1]))
def test_property_with_loss_declared_every_sqn_appears_once(
    args: tuple[int, int, int, float, float], ordered: int
) -> None:
    base, n, seed, drop, dup = args
    arrivals = _chaos(base, n, seed, drop, dup)
    if not arrivals:
        return
    dc = DeliveryController(ordered=ordered, maximum_burst_loss=10**9, maximum_map_entries=0)
    out: list[Delivery] = []
    for i, s in enumerate(arrivals):
        out += dc.on_message(s, p(s), i)
    out += dc.on_timer(len(arrivals) + T)
    assert dc.next_deadline() is None
    start = arrivals[0]
    last = max(arrivals, key=lambda s: _rel(s, start) if _rel(s, start) < 2**31 else -1)
    span = [(start + i) & SQN_MASK for i in range(_rel(last, start) + 1)]
    seen = [d.sqn for d in out]
    assert sorted(seen, key=lambda s: _rel(s, start)) == span  # each exactly once
    if ordered == 1:
        assert seen == span  # and in stream order
    received = set(arrivals)
    for d in out:
        assert (d.kind is DATA) == (d.sqn in received)
    losses = [d.sqn for d in out if d.kind is LOSS]
    assert losses == sorted(losses, key=lambda s: _rel(s, start))


@st.composite
def fragmented_streams(draw: st.DrawFn) -> tuple[list[tuple[int, bytes, tuple[int, int, int] | None]], int]:
    """A stream of messages of 1-4 pieces (1 piece: unfragmented), as (sqn, payload, frag) records."""
    base = draw(st.integers(0, SQN_MASK))
    records: list[tuple[int, bytes, tuple[int, int, int] | None]] = []
    sqn = base
    for m in range(draw(st.integers(1, 25))):
        count = draw(st.integers(1, 4))
        if count == 1:
            records.append((sqn, b"u%d" % m, None))
            sqn = (sqn + 1) & SQN_MASK
            continue
        whole = (b"%03d" % m) * (count * 2)
        for sqn_, piece, frag in frags(sqn, whole, 6):
            records.append((sqn_, piece, frag))
        sqn = (sqn + count) & SQN_MASK
    return records, base


@settings(max_examples=200, deadline=None)
@given(fragmented_streams(), st.integers(0, 2**32), st.sampled_from([0.0, 0.15]), st.sampled_from([1, -1]))
def test_property_fragmented_streams_deliver_whole_messages_only(
    stream: tuple[list[tuple[int, bytes, tuple[int, int, int] | None]], int],
    seed: int,
    drop: float,
    ordered: int,
) -> None:
    records, base = stream
    rng = random.Random(seed)
    kept = [r for r in records if rng.random() >= drop]
    arrivals = kept + [r for r in kept if rng.random() < 0.2]
    rng.shuffle(arrivals)
    if not arrivals:
        return
    dc = DeliveryController(ordered=ordered, maximum_burst_loss=10**9, maximum_map_entries=0)
    out: list[Delivery] = []
    for i, (sqn, piece, frag) in enumerate(arrivals):
        out += dc.on_message(sqn, piece, i, fragment=frag)
    out += dc.on_timer(len(arrivals) + T)
    start = _rel(arrivals[0][0], base)
    received = {r[0] for r in kept}
    # The messages that must be delivered: every piece received, first piece at or after the start.
    messages: dict[int, list[tuple[int, bytes, tuple[int, int, int] | None]]] = {}
    for r in records:
        messages.setdefault(r[2][0] if r[2] else r[0], []).append(r)
    whole = {
        recs[-1][0]: (first, b"".join(r[1] for r in recs))
        for first, recs in messages.items()
        if _rel(first, base) >= start and all(r[0] in received for r in recs)
    }
    data = {
        d.sqn: ((d.first_sqn if d.first_sqn is not None else d.sqn), d.payload) for d in out if d.kind is DATA
    }
    assert len(data) == len([d for d in out if d.kind is DATA])  # no duplicates
    assert data == whole
    if ordered == 1:
        order = [_rel(d.sqn, base) for d in out]
        assert order == sorted(order)
    # Loss events name only sqns never received, after the first delivery, each at most once.
    losses = [d.sqn for d in out if d.kind is LOSS]
    assert len(set(losses)) == len(losses)
    assert not (set(losses) & received)
    if not data:
        assert not losses  # leading loss suppression
    else:
        first_data = next(d for d in out if d.kind is DATA)
        first_pos = _rel(first_data.first_sqn if first_data.first_sqn is not None else first_data.sqn, base)
        top = max(_rel(s, base) for s in received)
        missing_after = {
            (base + i) & SQN_MASK for i in range(first_pos, top + 1) if (base + i) & SQN_MASK not in received
        }
        if ordered == 1:
            assert set(losses) == missing_after
        else:
            assert set(losses) >= missing_after


_ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("msg"),
            st.integers(0, 60),
            st.one_of(
                st.none(),
                st.tuples(st.integers(0, 3), st.integers(0, 20), st.integers(0, 30), st.integers(0, 10)),
            ),
        ),
        st.tuples(st.just("tsni"), st.integers(0, 70), st.none()),
        st.tuples(st.just("timer"), st.integers(0, 3 * S), st.none()),
        st.tuples(st.just("end"), st.just(0), st.none()),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([0, 50, SQN_MASK - 20]),
    st.sampled_from([1, -1, 0]),
    st.sampled_from([0, S]),
    st.sampled_from([3, 10**9]),
    st.sampled_from([0, 4]),
    _ops,
)
def test_property_garbage_never_crashes_and_keeps_the_invariants(
    base: int, ordered: int, timeout: int, burst: int, cap: int, ops: list[tuple[str, int, object]]
) -> None:
    dc = DeliveryController(
        ordered=ordered, loss_timeout_ns=timeout, maximum_burst_loss=burst, maximum_map_entries=cap
    )
    now = 0
    out: list[Delivery] = list(dc.begin(now))
    ended = False
    for op, n, extra in ops:
        if op == "msg":
            sqn = (base + n) & SQN_MASK
            frag = None
            payload = b"p" * 5
            if extra is not None:
                back, offset, total, size = extra  # type: ignore[misc]
                frag = ((sqn - back) & SQN_MASK, offset, total)
                payload = b"f" * size
            got = dc.on_message(sqn, payload, now, fragment=frag)
        elif op == "tsni":
            got = dc.on_tsni((base + n) & SQN_MASK, now)
        elif op == "timer":
            now += n
            got = dc.on_timer(now)
        else:
            got = dc.end(now)
            ended = True
        if ended and op != "end":
            assert got == []
        out += got
        snap = dc.statistics()
        if cap:
            assert snap.map_entries <= cap
        deadline = dc.next_deadline()
        assert deadline is None or (not ended and deadline >= now)
    snap = dc.statistics()
    assert snap.msgs_delivered == sum(d.kind is DATA for d in out)
    assert snap.unrecoverable_losses == sum(d.kind is LOSS for d in out)
    assert snap.burst_losses == sum(d.kind is BURST for d in out)
    assert sum(d.kind is BOS for d in out) == 1 and sum(d.kind is EOS for d in out) == int(ended)
    events = [d for d in out if d.kind in (DATA, LOSS, BURST)]
    if events and events[0].kind is not DATA:
        pytest.fail(f"a loss before the first delivery: {events[0]}")
    data = [d.sqn for d in out if d.kind is DATA]
    assert len(set(data)) == len(data)
    if ordered == 1:
        spans = [
            (_rel(d.first_sqn if d.first_sqn is not None else d.sqn, base), _rel(d.sqn, base)) for d in events
        ]
        assert all(a <= b for a, b in spans)
        assert all(prev[1] < nxt[0] for prev, nxt in itertools.pairwise(spans))
    else:
        losses = {d.sqn for d in out if d.kind is LOSS}
        assert not (losses & set(data))
