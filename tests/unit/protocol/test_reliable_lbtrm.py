"""LBT-RM reliability engines in simulated time (seed 6.3, 8.10, 8.11; spec 02 3.2-3.4, spec 03 A34-A35)."""

from __future__ import annotations

import random

import pytest

from openum.config import ContextAttributes, ReceiverAttributes, SourceAttributes
from openum.protocol.reliable import (
    MAX_TRACKED_LOSSES,
    RateController,
    RmReceiver,
    RmReceiverParams,
    RmSource,
    RmSourceParams,
    SessionActive,
    SessionEnded,
    Unrecovered,
)
from openum.protocol.reliable._nak import HEAD_WINDOW, MAX_POLL_ENTRIES, RECEIVE_WINDOW
from openum.wire import lbtrm
from openum.wire.lbtrm import NcfReason, RmData, RmNak, RmNcf, RmSessionMessage

from ._reliable_net import MS, SRC, Net

SID = 0x1A2B3C4D
PORT = SRC[1]
S = 1000 * MS


def rate(**kw: int) -> RateController:
    args = {"data_rate_limit": 0, "retransmit_rate_limit": 0, "rate_interval_ms": 10, "now_ns": 0} | kw
    return RateController(**args)


def source(params: RmSourceParams | None = None, rc: RateController | None = None) -> RmSource:
    return RmSource(
        session_id=SID, nak_port=PORT, params=params or RmSourceParams(), rate=rc or rate(), now_ns=0
    )


def receiver(params: RmReceiverParams | None = None, seed: int = 1, now: int = 0) -> RmReceiver:
    return RmReceiver(
        session_id=SID, source=SRC, params=params or RmReceiverParams(), rng=random.Random(seed), now_ns=now
    )


def data(sqn: int, trail: int = 0, payload: bytes = b"", rx: bool = False, sid: int = SID) -> bytes:
    flags = lbtrm.FLAG_UCAST_NAKS | (lbtrm.FLAG_RX if rx else 0)
    return lbtrm.encode(RmData(PORT, sid, sqn, trail, payload or b"m%d" % sqn, flags))


def nak(*sqns: int) -> bytes:
    return lbtrm.encode(RmNak(PORT, SID, sqns))


def decoded(out: object) -> object:
    return lbtrm.decode(out.data)


def setup(n_receivers: int = 1, rparams: list[RmReceiverParams] | None = None, **net_kw: object) -> Net:
    net = Net(**net_kw)
    net.add(SRC, source())
    for i in range(n_receivers):
        p = rparams[i] if rparams else RmReceiverParams()
        net.add((f"10.0.1.{i + 1}", 50000), receiver(p, seed=100 + i), member=True)
    return net


def drop_original(sqn: int, to: set[int] | None = None):
    """A fate that drops the first transmission of data ``sqn`` (to receivers with index in ``to``)."""

    def fate(src, dst, payload, now):
        if src == SRC and payload[0] == lbtrm.TYPE_DATA:
            _, _, s, _, flags, _ = lbtrm.decode_data_header(payload)
            hit = to is None or int(dst[0].rsplit(".", 1)[1]) - 1 in to
            if s == sqn and not flags & lbtrm.FLAG_RX and hit:
                return ()
        return (0,)

    return fate


# --- repair ---------------------------------------------------------------------------------------------


def test_gap_waits_the_randomised_backoff_then_naks_and_the_retransmission_is_delivered() -> None:
    net = setup(fate=drop_original(2))
    rcv = net.nodes[("10.0.1.1", 50000)]
    for i in range(5):
        net.send(SRC, b"payload-%d" % i)
        net.run_for(MS)
    naks = [(t, o) for t, o in rcv.sent if o.destination == SRC]
    assert naks == []  # still inside the initial backoff
    net.run_for(S)
    naks = [(t, decoded(o)) for t, o in rcv.sent]
    assert len(naks) == 1
    t_nak, record = naks[0]
    assert isinstance(record, RmNak) and record.sqns == (2,)
    # gap seen when sqn 3 arrived (sent at 3 ms, 1 ms latency); backoff 50 ms x U(0.5, 1.5), seed 100
    detected = 4 * MS
    expected = detected + int(50 * MS * random.Random(100).uniform(0.5, 1.5))
    assert t_nak == expected
    assert detected + 25 * MS <= t_nak <= detected + 75 * MS
    assert rcv.payloads() == [b"payload-0", b"payload-1", b"payload-3", b"payload-4", b"payload-2"]
    assert [rx for _, _, rx in rcv.received] == [False, False, False, False, True]
    st = rcv.engine.statistics()
    assert (st.lost, st.naks_sent, st.nak_pckts_sent, st.rxs_rcved, st.unrecovered_tmo) == (1, 1, 1, 1, 0)
    assert st.nak_stm_min == st.nak_stm_max == 2  # NAK to source and repair back: 1 ms each way
    assert st.nak_tx_min == st.nak_tx_max == 1
    sst = net.nodes[SRC].engine.statistics()
    assert (sst.naks_rcved, sst.nak_pckts_rcved, sst.rxs_sent, sst.msgs_sent) == (1, 1, 1, 5)
    assert isinstance(rcv.events[0][1], SessionActive)


def test_ncf_pushes_the_next_nak_out_by_the_suppress_interval() -> None:
    rcv = receiver(seed=7)
    rcv.datagram_received(data(0), SRC, 0)
    rcv.datagram_received(data(2), SRC, 0)  # sqn 1 missing
    first = rcv.next_deadline()
    assert first is not None and 25 * MS <= first <= 75 * MS
    ncf = lbtrm.encode(RmNcf(PORT, SID, 0, (1,), NcfReason.RETRANSMIT_DELAY))
    _, out, _ = rcv.datagram_received(ncf, SRC, 10 * MS)
    assert out == ()
    assert rcv.poll(first) == ([], [])  # suppressed
    due = rcv.next_deadline()
    assert due == 10 * MS + 1000 * MS
    out, _ = rcv.poll(due)
    assert [decoded(o).sqns for o in out] == [(1,)]
    st = rcv.statistics()
    assert (st.ncf_pckts_rcved, st.ncfs_rcved, st.ncfs_rx_delay, st.naks_sent) == (1, 1, 1, 1)


def test_repeated_naks_use_the_backoff_interval() -> None:
    rcv = receiver(RmReceiverParams(nak_initial_backoff_interval=0), seed=3)
    _, out, _ = rcv.datagram_received(data(0), SRC, 0)
    _, out, _ = rcv.datagram_received(data(3), SRC, 0)
    assert [decoded(o).sqns for o in out] == [(1, 2)]  # at once, one packet
    times = []
    t = 0
    for _ in range(3):
        t = rcv.next_deadline()
        out, _ = rcv.poll(t)
        assert [decoded(o).sqns for o in out] == [(1, 2)]
        times.append(t)
    gaps = [b - a for a, b in zip([0, *times], times, strict=False)]
    assert all(100 * MS <= g <= 300 * MS for g in gaps)
    assert len(set(gaps)) == 3  # randomised each time


def test_another_receivers_repair_suppresses_the_nak() -> None:
    fast = RmReceiverParams(nak_initial_backoff_interval=10)
    slow = RmReceiverParams(nak_initial_backoff_interval=500)
    net = setup(2, [fast, slow], fate=drop_original(2))
    for i in range(5):
        net.send(SRC, b"p%d" % i)
    net.run_for(2 * S)
    a, b = net.nodes[("10.0.1.1", 50000)], net.nodes[("10.0.1.2", 50000)]
    assert a.engine.statistics().naks_sent == 1
    assert b.engine.statistics().naks_sent == 0  # the repair A asked for reached B first
    assert sorted(a.payloads()) == sorted(b.payloads()) == [b"p0", b"p1", b"p2", b"p3", b"p4"]
    assert net.nodes[SRC].engine.statistics().naks_rcved == 1


def test_shared_loss_draws_few_naks_from_ten_receivers() -> None:
    # spec 02 3.4 "NAK suppression by shared loss": far fewer than 10 NAKs, typically 1-2
    net = setup(10, fate=drop_original(5))
    for i in range(10):
        net.send(SRC, b"x%d" % i)
    net.run_for(2 * S)
    assert net.nodes[SRC].engine.statistics().naks_rcved <= 3
    for addr in net.group:
        assert len(net.nodes[addr].payloads()) == 10


# --- the source: ignore interval, rate limit, oldest first, window --------------------------------------


def test_five_naks_within_the_ignore_interval_give_one_retransmission_and_one_ncf() -> None:
    src = source()
    for i in range(10):
        src.send(b"d%d" % i, 0)
    replies = [src.datagram_received(nak(3), ("10.0.1.1", 5), t * 20 * MS) for t in range(5)]
    assert [len(r) for r in replies] == [1, 1, 0, 0, 0]
    rx = lbtrm.decode(replies[0][0].data)
    assert isinstance(rx, RmData) and rx.sqn == 3 and rx.retransmission and bytes(rx.payload) == b"d3"
    ncf = lbtrm.decode(replies[1][0].data)
    assert isinstance(ncf, RmNcf) and ncf.sqns == (3,) and ncf.reason == NcfReason.NAK_IGNORED
    assert replies[1][0].destination is None  # NCFs are multicast
    st = src.statistics()
    assert (st.naks_rcved, st.naks_ignored, st.rxs_sent) == (5, 4, 1)
    assert (st.ncfs_ignored, st.ncf_pckts_sent) == (1, 1)
    # after the ignore interval the source retransmits again
    again = src.datagram_received(nak(3), ("10.0.1.1", 5), 600 * MS)
    assert len(again) == 1 and isinstance(lbtrm.decode(again[0].data), RmData)


def test_rate_limited_naks_are_queued_oldest_first_with_one_ncf_per_sqn() -> None:
    # 120-byte datagrams; 100 kbit/s x 10 ms = 1000 bits: one retransmission per interval
    src = source(rc=rate(retransmit_rate_limit=100_000))
    for _ in range(200):
        src.send(bytes(100), 0)
    assert [lbtrm.decode(o.data).sqn for o in src.datagram_received(nak(10), SRC, 0)] == [10]
    out100 = src.datagram_received(nak(100), SRC, 1 * MS)
    out50 = src.datagram_received(nak(50), SRC, 2 * MS)
    out100b = src.datagram_received(nak(100), SRC, 3 * MS)
    for out, sqn in ((out100, 100), (out50, 50)):
        (ncf,) = (lbtrm.decode(o.data) for o in out)
        assert isinstance(ncf, RmNcf) and ncf.sqns == (sqn,) and ncf.reason == NcfReason.RETRANSMIT_DELAY
    assert out100b == []  # only the first rejected NAK per ignore interval gets an NCF
    order = []
    while len(order) < 2:
        t = src.next_deadline()
        assert t is not None and t <= 100 * MS
        out, _ = src.poll(t)
        order += [(t, lbtrm.decode(o.data).sqn) for o in out if o.data[0] == lbtrm.TYPE_DATA]
    assert order == [(10 * MS, 50), (20 * MS, 100)]  # oldest first, one per interval
    st = src.statistics()
    assert (st.rxs_sent, st.naks_rx_delay_ignored, st.ncfs_rx_delay) == (3, 3, 2)


def test_retransmissions_stay_within_their_own_budget_and_never_block_new_data() -> None:
    rc = rate(data_rate_limit=100_000_000, retransmit_rate_limit=200_000)
    src = source(rc=rc)
    for _ in range(300):
        assert not src.send(bytes(100), 0).refused
    src.datagram_received(lbtrm.encode(RmNak(PORT, SID, tuple(range(300)))), SRC, 0)
    per_interval: dict[int, int] = {}
    t = 0
    while src.statistics().rxs_sent < 300:
        t = src.next_deadline()
        out, _ = src.poll(t)
        per_interval[t // (10 * MS)] = per_interval.get(t // (10 * MS), 0) + sum(
            len(o.data) for o in out if o.data[0] == lbtrm.TYPE_DATA
        )
        assert not src.send(bytes(100), t).refused  # new data keeps flowing
    assert max(per_interval.values()) <= 200_000 // 100 // 8  # 2000 bits per 10 ms = 250 bytes
    assert rc.statistics().rx_bytes == 300 * 120


def test_window_exhaustion_gives_unrecovered_txw_and_nak_shed_ncfs() -> None:
    params = RmSourceParams(transmission_window_size=1000)  # 100-byte payloads: 10 datagrams
    net = Net()
    net.add(SRC, source(params))
    rcv = net.add(("10.0.1.1", 50000), receiver(RmReceiverParams(send_naks=False)), member=True)

    def fate(src, dst, payload, now):
        return () if payload[0] == lbtrm.TYPE_DATA and lbtrm.decode_data_header(payload)[2] == 2 else (0,)

    net.fate = fate
    for _ in range(30):
        net.send(SRC, bytes(100))
        net.run_for(MS)
    st = rcv.engine.statistics()
    assert (st.lost, st.unrecovered_txw, st.unrecovered_tmo, st.naks_sent) == (1, 1, 0, 0)
    # the window holds sqns 3..12 once 12 is sent (at 12 ms): its trailing edge gives up on 2
    gave_up = [(t, e) for t, e in rcv.events if isinstance(e, Unrecovered)]
    assert gave_up == [(13 * MS, Unrecovered((2,), "window"))]
    src = net.nodes[SRC].engine
    assert src.statistics().txw_msgs == 10
    (out,) = src.datagram_received(nak(2), ("10.0.1.1", 50000), net.now)
    ncf = lbtrm.decode(out.data)
    assert isinstance(ncf, RmNcf) and ncf.reason == NcfReason.NAK_SHED and ncf.trail_sqn == 20
    assert src.statistics().naks_shed == 1
    assert src.datagram_received(nak(1000), SRC, net.now) == []  # never sent: garbage, no answer


def test_ncf_do_not_retry_and_trail_edges_give_up_on_gone_data() -> None:
    rcv = receiver()
    rcv.datagram_received(data(0), SRC, 0)
    rcv.datagram_received(data(5), SRC, 0)  # 1..4 missing
    ncf = lbtrm.encode(RmNcf(PORT, SID, 0, (1,), NcfReason.DO_NOT_RETRY))
    _, _, events = rcv.datagram_received(ncf, SRC, MS)
    assert list(events) == [Unrecovered((1,), "window")]
    sm = lbtrm.encode(RmSessionMessage(PORT, SID, 0, 5, 3))  # trail 3: 2 is gone
    _, _, events = rcv.datagram_received(sm, SRC, 2 * MS)
    assert list(events) == [Unrecovered((2,), "window")]
    assert rcv.statistics().unrecovered_txw == 2 and rcv.statistics().losses_pending == 2


# --- time-bounded recovery, session messages, activity -------------------------------------------------


def test_generation_interval_gives_up_with_unrecovered_tmo() -> None:
    rcv = receiver(RmReceiverParams(nak_generation_interval=200))
    rcv.datagram_received(data(0), SRC, 0)
    rcv.datagram_received(data(2), SRC, 0)
    naks, events = 0, []
    t = 0
    while (d := rcv.next_deadline()) is not None and d < 5 * S:
        t = d
        out, ev = rcv.poll(t)
        naks += len(out)
        events += ev
        if ev:
            break
    assert events == [Unrecovered((1,), "timeout")] and t == 200 * MS
    assert naks >= 1
    assert rcv.poll(t + 10 * S)[0] == []  # no NAKs after giving up
    st = rcv.statistics()
    assert (st.unrecovered_tmo, st.losses_pending) == (1, 0)
    # a late repair is still handed up (the delivery controllers decide, seed 8.11.5)
    received, _, _ = rcv.datagram_received(data(1, rx=True), SRC, t + MS)
    assert len(received) == 1 and rcv.statistics().late_repairs == 1


def test_worked_example_8_11_5_timeline_with_every_nak_blocked() -> None:
    net = Net()
    net.add(SRC, source())
    rcv = net.add(("10.0.1.1", 50000), receiver(seed=11), member=True)
    net.run_until(0)
    for i in range(6):
        net.send(SRC, b"#%d" % i)
    net.run_for(10 * MS)

    def fate(src, dst, payload, now):
        if dst == SRC:
            return ()  # every NAK is lost
        if payload[0] == lbtrm.TYPE_DATA and lbtrm.decode_data_header(payload)[2] == 6:
            return ()
        return (0,)

    net.fate = fate
    t0 = net.now
    net.send(SRC, b"#6")  # topic sequence 4, transport #6, lost
    net.run_until(t0 + 10_300 * MS)
    sms = [t - t0 for t, o in net.nodes[SRC].sent if o.data[0] == lbtrm.TYPE_SM]
    assert sms[:4] == [200 * MS, 600 * MS, 1400 * MS, 3000 * MS]
    naks = [t - t0 for t, o in rcv.sent]
    assert 226 * MS <= naks[0] <= 276 * MS  # SM seen at 0.201 s, backoff 25-75 ms
    assert len(naks) > 10  # repeated while blocked
    tmo = [(t - t0, e) for t, e in rcv.events if isinstance(e, Unrecovered)]
    assert tmo == [(10_201 * MS, Unrecovered((6,), "timeout"))]
    assert rcv.engine.statistics().unrecovered_tmo == 1
    assert not any(isinstance(e, SessionEnded) for _, e in rcv.events)  # SMs keep the session alive


def test_session_messages_back_off_from_200_ms_to_10_s_and_data_resets_them() -> None:
    src = source()
    assert src.next_deadline() is None  # created but not started: sends nothing
    src.send(b"first", 0)
    times = []
    while (t := src.next_deadline()) is not None and t < 40 * S:
        out, _ = src.poll(t)
        for o in out:
            sm = lbtrm.decode(o.data)
            assert isinstance(sm, RmSessionMessage) and (sm.lead_sqn, sm.trail_sqn) == (0, 0)
            assert sm.sm_sqn == len(times)
            times.append(t // MS)
    assert times == [200, 600, 1400, 3000, 6200, 12600, 22600, 32600]
    src.send(b"again", 33 * S)
    assert src.next_deadline() == 33 * S + 200 * MS
    out, _ = src.poll(33 * S + 200 * MS)
    sm = lbtrm.decode(out[0].data)
    assert isinstance(sm, RmSessionMessage) and sm.lead_sqn == 1
    assert src.statistics().sms_sent == 9


def test_tail_loss_is_found_by_a_session_message_and_repaired() -> None:
    net = setup(fate=drop_original(4))
    for i in range(5):
        net.send(SRC, b"t%d" % i)
    net.run_for(150 * MS)
    rcv = net.nodes[("10.0.1.1", 50000)]
    assert rcv.payloads() == [b"t0", b"t1", b"t2", b"t3"]
    net.run_for(S)
    assert rcv.payloads()[-1] == b"t4"
    st = rcv.engine.statistics()
    assert (st.lost, st.naks_sent, st.unrecovered_tmo, st.unrecovered_txw, st.sms_rcved) == (1, 1, 0, 0, 2)


def test_activity_timeout_ends_the_session() -> None:
    rcv = receiver(now=0)
    assert rcv.next_deadline() == 60 * S  # no datagram yet: the activity timeout applies
    _, _, events = rcv.datagram_received(data(0), SRC, 5 * S)
    assert list(events) == [SessionActive()]
    assert rcv.next_deadline() == 65 * S
    assert rcv.poll(65 * S - 1) == ([], [])
    assert rcv.poll(65 * S) == ([], [SessionEnded("activity timeout")])
    assert rcv.next_deadline() is None and rcv.ended
    before = rcv.statistics()
    assert rcv.datagram_received(data(1), SRC, 66 * S) == ((), (), ())  # inert once ended
    assert rcv.statistics() == before


def test_preactivity_timeout_applies_before_the_first_datagram() -> None:
    rcv = receiver(RmReceiverParams(preactivity_timeout=2000))
    assert rcv.next_deadline() == 2 * S
    assert rcv.poll(2 * S)[1] == [SessionEnded("activity timeout")]


# --- robustness ----------------------------------------------------------------------------------------


def test_duplicates_foreign_and_malformed_datagrams_are_counted_never_raised() -> None:
    rcv = receiver()
    assert len(rcv.datagram_received(data(0), SRC, 0)[0]) == 1
    assert rcv.datagram_received(data(0), SRC, 0)[0] == ()
    bad_chain = bytearray(data(1))
    bad_chain[1] = 5  # next_hdr: an option chain that is not there
    short_sm = lbtrm.encode(RmSessionMessage(PORT, SID, 0, 1, 0))[:20]
    cases = {
        "dgrams_dropped_size": [b"", b"\x00\x00\x38", data(1)[:19], short_sm],
        "dgrams_dropped_version": [b"\x10" + data(1)[1:]],
        "dgrams_dropped_type": [b"\x01" + data(1)[1:], nak(1), b"\x0f" + bytes(30)],
        "dgrams_dropped_hdr": [bytes(bad_chain), lbtrm.encode(RmNcf(PORT, SID, 0, (1, 2)))[:-4]],
        "dgrams_dropped_sid": [data(1, sid=SID + 1), lbtrm.encode(RmData(PORT + 1, SID, 1, 0, b"x"))],
    }
    for datagram_list in cases.values():
        for d in datagram_list:
            assert rcv.datagram_received(d, SRC, MS) == ((), (), ())
    st = rcv.statistics()
    for name, datagram_list in cases.items():
        assert getattr(st, name) == len(datagram_list), name
    assert (st.duplicate_data, st.msgs_rcved) == (1, 2)
    src = source()
    src.send(b"x", 0)
    for d in (b"", b"\x13" + bytes(11), data(0), nak(0)[:11], lbtrm.encode(RmNak(PORT, SID + 1, (0,)))):
        assert src.datagram_received(d, SRC, 0) == []
    sst = src.statistics()
    assert (sst.dgrams_dropped_size, sst.dgrams_dropped_version) == (2, 1)
    assert (sst.dgrams_dropped_type, sst.dgrams_dropped_sid) == (1, 1)


def test_sequence_numbers_wrap_at_2_32() -> None:
    rcv = receiver(RmReceiverParams(nak_initial_backoff_interval=0))
    top = 0xFFFF_FFFE
    rcv.datagram_received(data(top, top), SRC, 0)
    _, out, _ = rcv.datagram_received(data(1, top), SRC, 0)  # 0xFFFFFFFF and 0 missing
    assert [decoded(o).sqns for o in out] == [(0xFFFF_FFFF, 0)]
    received, _, _ = rcv.datagram_received(data(0, top, rx=True), SRC, MS)
    assert [r.transport_sqn for r in received] == [0]
    assert rcv.statistics().losses_pending == 1


def test_params_defaults_are_ums_and_match_the_option_registry() -> None:
    ctx, src, rcv = ContextAttributes(), SourceAttributes(), ReceiverAttributes()
    assert RmSourceParams.from_options(src.get, ctx.get) == RmSourceParams()
    assert RmReceiverParams.from_options(rcv.get, ctx.get) == RmReceiverParams()
    rc = RateController.from_options(ctx.get, "lbtrm", now_ns=0)
    assert rc.next_refresh_ns() == 10 * MS  # rate interval 10 ms


def test_oversized_payload_is_a_local_error() -> None:
    with pytest.raises(ValueError, match="datagram max size"):
        source().send(bytes(8192), 0)


FAR = 0x7FFF_FFF0  # a forged sequence number about 2**31 ahead


def forged(kind: str, sqn: int) -> bytes:
    """A 20-odd byte datagram of the session (its ids are public: TIRs carry them) claiming ``sqn``."""
    if kind == "data":
        return data(sqn, payload=b"forged")
    if kind == "sm":
        return lbtrm.encode(RmSessionMessage(PORT, SID, 0, sqn, 0, lbtrm.FLAG_UCAST_NAKS))
    return lbtrm.encode(RmNcf(PORT, SID, 0, (sqn,), NcfReason.NAK_SHED))


@pytest.mark.parametrize("kind", ["data", "sm", "ncf"])
def test_a_forged_far_ahead_datagram_is_dropped_counted_and_delivery_goes_on(kind: str) -> None:
    net = setup(2)
    receivers = [net.nodes[("10.0.1.1", 50000)], net.nodes[("10.0.1.2", 50000)]]
    for i in range(5):
        net.send(SRC, b"m%d" % i)
    net.run_for(10 * MS)
    for node in receivers:  # the forger sends to the group: every receiver of the session gets it
        _, out, events = node.engine.datagram_received(forged(kind, FAR), SRC, net.now)
        assert list(out) == [] and not [e for e in events if isinstance(e, Unrecovered)]
    for i in range(5, 10):
        net.send(SRC, b"m%d" % i)
    net.run_for(20 * S)
    for node in receivers:
        assert node.payloads() == [b"m%d" % i for i in range(10)]
        st = node.engine.statistics()
        assert st.dgrams_dropped_window == 1
        assert (st.lost, st.naks_sent, st.losses_pending, st.unrecovered_txw) == (0, 0, 0, 0)
        assert not [e for _, e in node.events if isinstance(e, Unrecovered)]


def test_a_forged_datagram_within_the_window_costs_bounded_naks() -> None:
    """The worst one forged datagram can do: the furthest sequence number the window takes."""
    rcv = receiver()
    rcv.datagram_received(data(0), SRC, 0)
    rcv.datagram_received(data(RECEIVE_WINDOW - 1), SRC, MS)  # 1 .. RECEIVE_WINDOW - 2 missing
    naks, t = 0, MS
    while (t := rcv.next_deadline()) is not None and t < 11 * S:
        out, _ = rcv.poll(t)
        entries = sum(len(decoded(o).sqns) for o in out)
        assert entries <= MAX_POLL_ENTRIES
        naks += entries
    st = rcv.statistics()
    assert st.naks_sent == naks <= (RECEIVE_WINDOW - 2) * (10 * S // (100 * MS) + 1)  # backoff >= 100 ms
    assert st.unrecovered_tmo == RECEIVE_WINDOW - 2 and st.losses_pending == 0


def test_a_confirmed_jump_is_nakked_with_bounded_work_per_poll() -> None:
    """Two datagrams in the same far place (a real outage longer than the window): the gap is taken,
    tracked up to MAX_TRACKED_LOSSES, and each poll handles at most MAX_POLL_ENTRIES of it."""
    rcv = receiver(RmReceiverParams(nak_initial_backoff_interval=0))
    rcv.datagram_received(data(0), SRC, 0)
    received, out, _ = rcv.datagram_received(data(FAR), SRC, 0)
    assert list(received) == [] and list(out) == [] and rcv.statistics().dgrams_dropped_window == 1
    received, out, events = rcv.datagram_received(data(FAR + 1), SRC, 0)
    assert [r.transport_sqn for r in received] == [FAR + 1]
    st = rcv.statistics()
    assert st.losses_pending == MAX_TRACKED_LOSSES  # FAR itself among them: it is NAKed back
    (gone,) = [e for e in events if isinstance(e, Unrecovered)]
    assert gone.unlisted + len(gone.sqns) == st.unrecovered_txw == FAR - MAX_TRACKED_LOSSES
    assert sum(len(decoded(o).sqns) for o in out) == MAX_POLL_ENTRIES
    polls = 0
    while rcv.next_deadline() == 0:  # the rest stays due: the next polls take it, a batch each
        out, _ = rcv.poll(0)
        assert 0 < sum(len(decoded(o).sqns) for o in out) <= MAX_POLL_ENTRIES
        polls += 1
    assert polls == MAX_TRACKED_LOSSES // MAX_POLL_ENTRIES - 1
    assert all(len(o.data) <= 8192 for o in out)  # NAK packets stay within the datagram max size


def test_a_real_outage_longer_than_the_window_is_repaired() -> None:
    outage = range(3, 3 + RECEIVE_WINDOW + 100)
    net = setup(
        1, fate=lambda src, dst, p, now: () if p[0] == 0 and _sqn(p) in outage and not _rx(p) else (0,)
    )
    node = net.nodes[("10.0.1.1", 50000)]
    for i in range(outage.stop + 5):
        net.send(SRC, b"m%d" % i)
    net.run_for(20 * S)
    assert node.payloads()[:3] == [b"m0", b"m1", b"m2"]
    assert sorted(int(p[1:]) for p in node.payloads()) == list(range(outage.stop + 5))
    st = node.engine.statistics()
    assert st.dgrams_dropped_window == 1 and st.unrecovered_txw == st.unrecovered_tmo == 0
    assert st.lost == len(outage) + 1  # the outage and the datagram that showed the jump


def test_a_confirmed_forged_jump_heals_when_the_real_sequence_goes_on() -> None:
    """Two forged datagrams that agree make the receiver jump; the real sequence, out of the window
    then, makes it jump back the same way, and delivery resumes."""
    rcv = receiver()
    for i in range(3):
        rcv.datagram_received(data(i), SRC, 0)
    rcv.datagram_received(data(FAR), SRC, MS)
    rcv.datagram_received(data(FAR + 1), SRC, MS)
    got = [rcv.datagram_received(data(i), SRC, 2 * MS)[0] for i in range(3, 8)]
    assert [[r.transport_sqn for r in g] for g in got] == [[], [4], [5], [6], [7]]
    # 3 showed the way back (dropped, out of the window); 4 confirmed it
    st = rcv.statistics()
    assert st.dgrams_dropped_window == 2
    assert rcv.next_deadline() == 2 * MS + 60 * S  # nothing left of the forged jump to NAK


# --- head loss (UM Concepts Guide, section 2.4.2) ------------------------------------------------------


def _sqn(p: bytes) -> int:
    return lbtrm.decode_data_header(p)[2]


def _rx(p: bytes) -> bool:
    return bool(lbtrm.decode_data_header(p)[4] & lbtrm.FLAG_RX)


def test_a_lost_first_datagram_is_repaired_and_delivered_first() -> None:
    net = setup(2, fate=drop_original(0, to={0}))
    lossy, clean = net.nodes[("10.0.1.1", 50000)], net.nodes[("10.0.1.2", 50000)]
    for i in range(4):
        net.send(SRC, b"m%d" % i)
    net.run_for(5 * S)
    for node in (lossy, clean):
        assert node.payloads() == [b"m0", b"m1", b"m2", b"m3"]  # in order: m1-m3 held for m0
    st = lossy.engine.statistics()
    assert (st.lost, st.naks_sent, st.rxs_rcved, st.unrecovered_tmo) == (1, 1, 1, 0)
    assert clean.engine.statistics().lost == 0


def test_an_unrepairable_head_is_reported_and_what_was_held_goes_up() -> None:
    net = setup(1, fate=lambda src, dst, p, now: () if p[0] == 0 and _sqn(p) < 2 else (0,))
    node = net.nodes[("10.0.1.1", 50000)]
    for i in range(4):
        net.send(SRC, b"m%d" % i)
    net.run_for(5 * S)
    assert node.payloads() == []  # held while 0 and 1 are NAKed (every repair is lost too)
    net.run_for(10 * S)  # the NAK generation interval passes: given up, reported
    assert node.payloads() == [b"m2", b"m3"]
    assert [e for _, e in node.events if isinstance(e, Unrecovered)] == [Unrecovered((0, 1), "timeout")]
    assert node.engine.statistics().unrecovered_tmo == 2


def test_a_late_join_is_not_head_loss() -> None:
    rcv = receiver()
    received, out, _ = rcv.datagram_received(data(HEAD_WINDOW), SRC, 0)  # the session is well under way
    assert [r.transport_sqn for r in received] == [HEAD_WINDOW] and list(out) == []
    received, _, _ = rcv.datagram_received(data(5, trail=3), SRC, 0)  # nor is it once 0 is gone
    rcv2 = receiver()
    received, _, _ = rcv2.datagram_received(data(5, trail=3), SRC, 0)
    assert len(received) == 1 and rcv.statistics().lost == rcv2.statistics().lost == 0


def test_a_retransmission_seen_before_anything_else_does_not_start_the_sequence_space() -> None:
    rcv = receiver()
    received, _, events = rcv.datagram_received(data(5, rx=True), SRC, 0)
    assert len(received) == 1 and list(events) == [SessionActive()]
    rcv.datagram_received(data(HEAD_WINDOW + 100), SRC, MS)  # a late join (not head loss)
    assert rcv.statistics().lost == 0 and rcv.next_deadline() == MS + 60 * S
