"""The transport rate controller (seed 2.12, 2.12.1; spec 01 2.12.1), alone and behind a source."""

from __future__ import annotations

import pytest

from openum.protocol.reliable import (
    REFUSED,
    RateController,
    RateDecision,
    RmSource,
    RmSourceParams,
    SourceUnblocked,
)
from openum.wire import lbtrm

MS = 1_000_000


def rm_source(rc: RateController, sid: int = 0x1234) -> RmSource:
    return RmSource(session_id=sid, nak_port=14390, params=RmSourceParams(), rate=rc, now_ns=0)


def test_acceptance_1_mbps_100_ms_1000_byte_messages() -> None:
    # seed 2.12.1: 12 or 13 sends succeed, one more succeeds by being queued, the next fails with
    # would-block, WAKEUP comes at the interval end, and the wire rate stays at 1 Mbit/s.
    rc = RateController(data_rate_limit=1_000_000, retransmit_rate_limit=0, rate_interval_ms=100, now_ns=0)
    src = rm_source(rc)
    results = []
    while not (r := src.send(bytes(1000), 0)).refused:
        results.append(r)
    assert r is REFUSED
    sent = [r for r in results if not r.queued]
    assert len(sent) == 12  # 12 x 1020 bytes = 12240 <= 12500 bytes per 100 ms
    assert len(results) == 13 and results[-1].queued and results[-1].outgoing == ()
    assert rc.statistics().blocked
    assert src.next_deadline() == 100 * MS
    assert src.poll(99 * MS) == ([], [])
    out, events = src.poll(100 * MS)
    assert [lbtrm.decode(o.data).sqn for o in out] == [12]
    assert events == [SourceUnblocked()]
    assert not src.send(bytes(1000), 100 * MS).refused

    # a non-blocking loop for 10 simulated seconds: never over budget in any interval, ~1 Mbit/s
    wire: dict[int, int] = {}
    t = 100 * MS
    wakeups = 0
    while t < 10_100 * MS:
        r = src.send(bytes(1000), t)
        for o in r.outgoing:
            wire[t // (100 * MS)] = wire.get(t // (100 * MS), 0) + len(o.data)
        if r.refused:
            t = src.next_deadline()
            out, events = src.poll(t)
            wakeups += events.count(SourceUnblocked())
            for o in out:
                wire[t // (100 * MS)] = wire.get(t // (100 * MS), 0) + len(o.data)
    assert max(wire.values()) <= 12_500
    total_bits = sum(v for k, v in wire.items() if 1 <= k < 101) * 8
    assert 0.95e6 <= total_bits / 10 <= 1e6
    assert wakeups >= 99


def test_tiny_limits_accumulate_budget_until_the_queued_datagram_fits() -> None:
    # 8000 bit/s x 100 ms = 100 bytes per interval; a 520-byte datagram needs 6 intervals' budget
    rc = RateController(data_rate_limit=8000, retransmit_rate_limit=0, rate_interval_ms=100, now_ns=0)
    src = rm_source(rc)
    first = src.send(bytes(500), 0)
    assert first.queued and not first.refused
    assert src.send(b"x", 0).refused
    for t in range(100, 600, 100):
        out, events = src.poll(t * MS)
        assert (out, events) == ([], [])
        assert src.send(b"x", t * MS).refused
    out, events = src.poll(600 * MS)
    assert len(out) == 1 and len(out[0].data) == 520 and events == [SourceUnblocked()]


def test_the_controller_alone() -> None:
    rc = RateController(data_rate_limit=80_000, retransmit_rate_limit=8_000, rate_interval_ms=10, now_ns=0)
    owner = object()
    # 80 kbit/s x 10 ms = 100 bytes; retransmissions 10 bytes per interval
    assert rc.offer_data(owner, 60, 0) is RateDecision.SEND
    assert rc.offer_data(owner, 60, 0) is RateDecision.QUEUE
    assert rc.offer_data(owner, 1, 0) is RateDecision.REFUSE
    assert rc.blocked(0) and not rc.take_release(owner, 9 * MS)
    assert rc.take_release(owner, 10 * MS) and not rc.take_release(owner, 10 * MS)
    assert rc.offer_data(owner, 40, 10 * MS) is RateDecision.SEND  # 100 - 60 left in that interval
    assert rc.offer_data(owner, 1, 10 * MS) is RateDecision.QUEUE
    # idle for many intervals: unused budget does not pile up
    assert rc.take_release(owner, 1000 * MS)
    assert rc.offer_data(owner, 100, 1000 * MS) is RateDecision.SEND
    assert rc.offer_data(owner, 100, 1005 * MS) is RateDecision.QUEUE
    # retransmissions: their own budget, accumulating for a datagram bigger than one interval's
    assert rc.try_retransmit(10, 2000 * MS)
    assert not rc.try_retransmit(25, 2000 * MS)
    assert not rc.try_retransmit(25, 2010 * MS)
    assert rc.try_retransmit(25, 2030 * MS)
    st = rc.statistics()
    assert (st.rctlr_data_msgs, st.sends_refused, st.rx_bytes) == (3, 1, 35)


def test_a_shared_controller_blocks_every_session_and_wakes_the_refused_one() -> None:
    rc = RateController(data_rate_limit=80_000, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    a, b = rm_source(rc, 1), rm_source(rc, 2)
    assert not a.send(bytes(30), 0).queued  # 50-byte datagrams (20-byte header); 100 bytes per 10 ms
    assert a.send(bytes(40), 0).queued  # 110 bytes > 100: A's datagram waits
    assert b.send(b"x", 1 * MS).refused  # the context is blocked for B too
    assert a.next_deadline() == b.next_deadline() == 10 * MS
    out_b, events_b = b.poll(10 * MS)  # B happens to run first: the refresh releases A's datagram
    assert out_b == [] and events_b == [SourceUnblocked()]
    assert a.next_deadline() == 10 * MS  # released, not yet written
    out_a, events_a = a.poll(10 * MS)
    assert len(out_a) == 1 and events_a == []  # A never got would-block: no WAKEUP for it
    result = a.send(b"y", 11 * MS)
    assert result.sqn == 2 and len(result.outgoing) == 1


def test_released_datagram_goes_out_before_the_next_send() -> None:
    rc = RateController(data_rate_limit=80_000, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    src = rm_source(rc)
    src.send(bytes(30), 0)
    assert src.send(bytes(40), 0).queued
    result = src.send(b"z", 12 * MS)  # no poll in between
    assert [lbtrm.decode(o.data).sqn for o in result.outgoing] == [1, 2]


def test_zero_means_unlimited_and_bad_values_are_refused() -> None:
    rc = RateController(data_rate_limit=0, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    assert all(rc.offer_data(None, 65_000, 0) is RateDecision.SEND for _ in range(1000))
    assert rc.try_retransmit(65_000, 0)
    with pytest.raises(ValueError, match=">= 0"):
        RateController(data_rate_limit=-1, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    with pytest.raises(ValueError, match="rate_interval_ms"):
        RateController(data_rate_limit=1, retransmit_rate_limit=0, rate_interval_ms=0, now_ns=0)


def test_closing_a_session_with_a_queued_datagram_unblocks_the_others() -> None:
    rc = RateController(data_rate_limit=80_000, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    a, b = rm_source(rc, 1), rm_source(rc, 2)
    a.send(bytes(30), 0)
    assert a.send(bytes(40), 0).queued
    assert b.send(b"x", 0).refused
    a.close()
    assert not rc.statistics().blocked
    assert not b.send(b"x", 1 * MS).refused
    assert a.next_deadline() is not None and a.poll(10 * MS)[0] == []  # only its SM timer remains


def test_take_data_charges_only_what_may_go_now() -> None:
    rc = RateController(data_rate_limit=80_000, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    owner = object()
    # 80 kbit/s x 10 ms = 100 bytes
    assert rc.take_data(60, 0)
    assert not rc.take_data(60, 0)  # would be queued: nothing charged, nothing queued
    assert not rc.blocked(0)
    assert rc.take_data(40, 0)  # the 40 bytes left
    assert rc.offer_data(owner, 1, 0) is RateDecision.QUEUE
    assert not rc.take_data(0, 0)  # a queued datagram goes first, whatever the budget
    assert rc.statistics().data_bytes == 100


def test_send_direct_is_send_without_its_records() -> None:
    """The same datagrams, sequence numbers and counters as send; None, changing nothing, whenever send
    would not write the datagram at once (rate controller queueing or refusing, a queued datagram)."""

    def limited() -> RmSource:  # 992 bytes per 10 ms: eight datagrams of 100 bytes of payload (120 in all)
        return rm_source(
            RateController(
                data_rate_limit=992 * 8 * 100,
                retransmit_rate_limit=0,
                rate_interval_ms=10,
                now_ns=0,
            )
        )

    a, b = limited(), limited()
    for i in range(8):
        payload = bytes([i]) * 100
        sent = a.send(payload, 0)
        assert not sent.queued and not sent.refused
        assert b.send_direct(payload, 0) == sent.outgoing[0].data
    assert list(b.data_destinations()) == [None]  # LBT-RM: the session's group
    assert b.statistics() == a.statistics()
    # The ninth does not fit the budget: send queues it, send_direct leaves it to send.
    assert b.send_direct(bytes(100), 0) is None
    assert b.statistics() == a.statistics()
    assert b.send(bytes(100), 0).queued and a.send(bytes(100), 0).queued
    assert b.send_direct(bytes(1), 10 * MS) is None  # the queued one goes first, through send/poll
    assert b.statistics() == a.statistics()
    assert b.send_direct(bytes(70_000), 10 * MS) is None  # over the datagram maximum: send raises
