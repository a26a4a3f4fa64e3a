"""LBT-RU reliability engines in simulated time (seed 6.2; spec 02 2; wire 4)."""

from __future__ import annotations

import random

from openum.config import ContextAttributes, ReceiverAttributes, SourceAttributes
from openum.protocol.reliable import (
    RateController,
    ReceiverConnected,
    ReceiverDisconnected,
    RuReceiver,
    RuReceiverParams,
    RuReceiverState,
    RuSource,
    RuSourceParams,
    SessionActive,
    SessionEnded,
)
from openum.protocol.reliable.lbtru import RST_CHECK_INTERVALS
from openum.wire import lbtru
from openum.wire.lbtru import RuAck, RuCreq, RuData, RuNak, RuSessionMessage, make_options

from ._reliable_net import MS, Net

SID = 0x0BADCAFE
SRC = ("10.0.0.1", 14380)
R1 = ("10.0.1.1", 14360)
R2 = ("10.0.1.2", 14360)
S = 1000 * MS


def rate() -> RateController:
    return RateController(data_rate_limit=0, retransmit_rate_limit=0, rate_interval_ms=100, now_ns=0)


def ru_source(params: RuSourceParams | None = None) -> RuSource:
    return RuSource(session_id=SID, params=params or RuSourceParams(), rate=rate(), now_ns=0)


def ru_receiver(params: RuReceiverParams | None = None, sid: int | None = SID, seed: int = 1) -> RuReceiver:
    return RuReceiver(
        session_id=sid, source=SRC, params=params or RuReceiverParams(), rng=random.Random(seed), now_ns=0
    )


def setup(*receivers: RuReceiver, src: RuSource | None = None, **kw: object) -> Net:
    net = Net(**kw)
    net.add(SRC, src or ru_source())
    for addr, r in zip((R1, R2), receivers, strict=False):
        net.add(addr, r)
    return net


def kinds(sent: list[tuple[int, object]]) -> list[str]:
    return [type(lbtru.decode(o.data)).__name__ for _, o in sent]


def test_handshake_then_data_and_acks() -> None:
    net = setup(ru_receiver())
    rcv, src = net.nodes[R1], net.nodes[SRC]
    net.run_until(0)
    creq = lbtru.decode(rcv.sent[0][1].data)
    assert isinstance(creq, RuCreq) and creq.session_id == SID
    net.run_for(5 * MS)
    assert [e for _, e in src.events] == [ReceiverConnected(R1, 1)]
    syn = lbtru.decode(src.sent[0][1].data)
    assert isinstance(syn, RuSessionMessage) and syn.syn and (syn.session_id, syn.client_id) == (SID, 1)
    assert [e for _, e in rcv.events] == [SessionActive(client_id=1)]
    assert rcv.engine.state is RuReceiverState.CONNECTED and rcv.engine.client_id == 1
    for i in range(3):
        net.send(SRC, b"u%d" % i)
    net.run_for(2 * S)
    assert rcv.payloads() == [b"u0", b"u1", b"u2"]
    d = lbtru.decode(next(o.data for _, o in src.sent if o.data[0] == lbtru.TYPE_DATA))
    assert isinstance(d, RuData) and d.session_id == SID and d.client_id is None
    acks = [lbtru.decode(o.data) for _, o in rcv.sent if o.data[0] == lbtru.TYPE_ACK]
    assert len(acks) == 4 and acks[-1] == RuAck(2, make_options(SID))  # every 500 ms from connect
    st = src.engine.statistics()
    assert (st.num_clients, st.creqs_rcved, st.acks_rcved, st.msgs_sent) == (1, 1, 4, 3)
    assert rcv.engine.statistics().creqs_sent == 1


def test_lost_syn_is_retried_every_connect_interval() -> None:
    lost = {"n": 0}

    def fate(src, dst, data, now):
        if data[0] == lbtru.TYPE_SM and lost["n"] < 2:
            lost["n"] += 1
            return ()
        return (0,)

    net = setup(ru_receiver(), fate=fate)
    net.run_for(S)
    rcv = net.nodes[R1]
    assert [t for t, o in rcv.sent if o.data[0] == lbtru.TYPE_CREQ] == [0, 100 * MS, 200 * MS]
    assert rcv.engine.state is RuReceiverState.CONNECTED
    assert [e for _, e in net.nodes[SRC].events] == [ReceiverConnected(R1, 1)]  # one client, asked 3 times


def test_session_id_mismatch_is_dropped_and_the_connection_fails() -> None:
    params = RuReceiverParams(maximum_connect_attempts=5)
    net = setup(ru_receiver(params, sid=SID + 1))
    net.run_for(10 * S)
    rcv, src = net.nodes[R1], net.nodes[SRC]
    assert len(rcv.sent) == 5 and src.sent == []  # the source never answers a stale session
    assert src.engine.statistics().dgrams_dropped_sid == 5
    assert [(t, e) for t, e in rcv.events] == [(500 * MS, SessionEnded("connect failed"))]
    assert rcv.engine.next_deadline() is None
    # data of the right session does not reach a receiver that expects another one
    r = ru_receiver(sid=SID + 1)
    datagram = lbtru.encode(RuData(0, 0, b"x", options=make_options(SID)))
    assert r.datagram_received(datagram, SRC, 0) == ((), (), ())
    assert r.statistics().dgrams_dropped_sid == 1


def test_client_activity_timeout_then_rst_ends_the_receiver() -> None:
    net = setup(ru_receiver())
    net.run_for(10 * MS)
    rcv = net.nodes[R1]
    rcv.online = False  # the receiver stops talking (and listening)
    net.run_for(20 * S)
    src = net.nodes[SRC]
    events = [(t, e) for t, e in src.events if isinstance(e, ReceiverDisconnected)]
    # went silent at 10 ms before its first ACK (due 500 ms after connecting): last heard, its CREQ at 1 ms
    assert events == [(MS + 10 * S, ReceiverDisconnected(R1, 1, "timeout"))]
    assert src.engine.statistics().num_clients == 0
    assert src.engine.statistics().clients_timed_out == 1
    # it comes back and NAKs: the source does not know it any more and resets it
    rcv.online = True
    out, _ = src.engine.datagram_received(lbtru.encode(RuNak((0,), options=make_options(SID))), R1, net.now)
    assert [o.data for o in out] == [b"\x07\x00\x00\x00"]
    # a bare RST: the receiver asks the source (a CREQ), which takes it back as a new client
    _, creq, events2 = rcv.engine.datagram_received(out[0].data, SRC, net.now)
    assert list(events2) == [] and [type(lbtru.decode(o.data)) for o in creq] == [RuCreq]
    net.emit(R1, creq)
    net.run_for(S)
    assert rcv.engine.state is RuReceiverState.CONNECTED and rcv.engine.client_id == 2
    st = rcv.engine.statistics()
    assert (st.rsts_rcved, st.rsts_refuted) == (1, 1)
    # an RST that carries the session's ID ends the session at once
    rst = lbtru.encode(lbtru.RuRst(options=make_options(SID)))
    _, _, events3 = rcv.engine.datagram_received(rst, SRC, net.now)
    assert list(events3) == [SessionEnded("reset")] and rcv.engine.state is RuReceiverState.ENDED


def test_loss_is_repaired_for_the_client_that_lost_it_only() -> None:
    def fate(src, dst, data, now):
        if dst == R1 and data[0] == lbtru.TYPE_DATA:
            flags, sqn, *_ = lbtru.decode_data_header(data)
            if sqn == 1 and not flags & lbtru.FLAG_RX:
                return ()
        return (0,)

    net = setup(ru_receiver(seed=1), ru_receiver(seed=2), fate=fate)
    net.run_for(10 * MS)
    for i in range(4):
        net.send(SRC, b"r%d" % i)
    net.run_for(S)
    a, b, src = net.nodes[R1], net.nodes[R2], net.nodes[SRC]
    assert a.payloads() == [b"r0", b"r2", b"r3", b"r1"] and b.payloads() == [b"r0", b"r1", b"r2", b"r3"]
    rx = [o.destination for _, o in src.sent if o.data[0] == lbtru.TYPE_DATA and o.data[2] & 0x40]
    assert rx == [R1]
    # initial backoff 0 for LBT-RU: the NAK left as soon as sqn 2 showed the gap
    naks = [t for t, o in a.sent if o.data[0] == lbtru.TYPE_NAK]
    assert naks == [11 * MS]  # sent at 10 ms, sqn 2 arrived at 11 ms
    st = src.engine.statistics()
    assert (st.rxs_sent, st.naks_rcved, st.msgs_sent) == (1, 1, 8)
    # the ignore interval is per client: B may have the same sqn retransmitted at once
    nak3 = lbtru.encode(RuNak((3,), options=make_options(SID)))
    replies = [src.engine.datagram_received(nak3, who, net.now)[0] for who in (R1, R1, R2)]
    assert [type(lbtru.decode(o[0].data)).__name__ for o in replies] == ["RuData", "RuNcf", "RuData"]
    assert [o[0].destination for o in replies] == [R1, R1, R2]


def test_close_resets_every_client() -> None:
    net = setup(ru_receiver(), ru_receiver())
    net.run_for(10 * MS)
    src = net.nodes[SRC].engine
    assert isinstance(src, RuSource)
    out, events = src.close()
    assert {o.destination for o in out} == {R1, R2} and all(o.data == b"\x07\x00\x00\x00" for o in out)
    assert {e.address for e in events if isinstance(e, ReceiverDisconnected)} == {R1, R2}
    net.nodes[SRC].online = False  # closed: nothing answers any more
    net.emit(SRC, out)
    net.run_for(10 * MS)
    for r in (R1, R2):  # a bare RST names no session: each receiver asks the source first (a CREQ)
        assert net.nodes[r].events[-1][1] != SessionEnded("reset")
        assert lbtru.decode(net.nodes[r].sent[-1][1].data) == RuCreq(options=make_options(SID))
    net.run_for(RST_CHECK_INTERVALS * 100 * MS)  # no answer within 3 connect intervals: the RST stands
    for r in (R1, R2):
        assert net.nodes[r].events[-1] == (11 * MS + 300 * MS, SessionEnded("reset"))
        assert net.nodes[r].engine.statistics().rsts_rcved == 1


def test_without_session_ids_old_receivers_interoperate() -> None:
    src = ru_source(RuSourceParams(use_session_id=False))
    net = setup(ru_receiver(sid=None), src=src)
    net.run_for(10 * MS)
    net.send(SRC, b"old")
    net.run_for(10 * MS)
    assert net.nodes[R1].payloads() == [b"old"]
    data = next(o.data for _, o in net.nodes[SRC].sent if o.data[0] == lbtru.TYPE_DATA)
    assert len(data) == lbtru.DATA_HEADER_LEN + 3  # no SID option


def test_receiver_activity_timeout_after_the_source_goes_silent() -> None:
    net = setup(ru_receiver())
    net.run_for(10 * MS)
    net.nodes[SRC].online = False
    net.run_for(70 * S)
    rcv = net.nodes[R1]
    ended = [(t, e) for t, e in rcv.events if isinstance(e, SessionEnded)]
    assert ended == [(2 * MS + 60 * S, SessionEnded("activity timeout"))]  # last heard: the SYN at 2 ms


def test_tail_loss_and_idle_session_messages_reach_every_client() -> None:
    def fate(src, dst, data, now):
        if data[0] == lbtru.TYPE_DATA and lbtru.decode_data_header(data)[1] == 2 and not data[2] & 0x40:
            return ()
        return (0,)

    net = setup(ru_receiver(), ru_receiver(), fate=fate)
    net.run_for(10 * MS)
    for i in range(3):
        net.send(SRC, b"t%d" % i)
    net.run_for(S)
    for r in (R1, R2):
        assert net.nodes[r].payloads() == [b"t0", b"t1", b"t2"]
    sent = net.nodes[SRC].sent
    sms = [(lbtru.decode(o.data), o.destination) for _, o in sent if o.data[0] == lbtru.TYPE_SM]
    idle = [d for sm, d in sms if not sm.syn]
    assert idle.count(R1) == idle.count(R2) >= 2  # 200 ms and 600 ms after the last datagram
    # per-client SM sequence numbers stay consecutive (Wireshark's per-client analysis)
    for r in (R1, R2):
        sqns = [
            lbtru.decode(o.data).sm_sqn
            for _, o in net.nodes[SRC].sent
            if o.destination == r and o.data[0] == lbtru.TYPE_SM
        ]
        assert sqns == list(range(len(sqns)))


def test_garbage_is_counted_never_raised() -> None:
    rcv = ru_receiver()
    sm_ok = lbtru.encode(RuSessionMessage(0, 0, 0, lbtru.FLAG_SYN, make_options(SID, 1)))
    assert rcv.datagram_received(sm_ok, ("9.9.9.9", 1), 0) == ((), (), ())  # not the source
    cases = [b"", b"\x00\x01", b"\x00\x01\x00\x00" + bytes(4)]  # too short (the last for DATA)
    cases += [b"\x20\x00\x00\x00", b"\x05\x00\x00\x00\x00\x00\x00\x01"]  # version 2; an ACK
    cases.append(b"\x02\x09\x00\x00" + bytes(12) + b"\x00\x00")  # unknown option with a zero length
    for c in cases:
        assert rcv.datagram_received(c, SRC, 0) == ((), (), ())
    st = rcv.statistics()
    assert (st.dgrams_dropped_sid, st.dgrams_dropped_size, st.dgrams_dropped_version) == (1, 3, 1)
    assert (st.dgrams_dropped_type, st.dgrams_dropped_hdr) == (1, 1)
    src = ru_source()
    garbage = [b"", b"\x30\x00\x00\x00", lbtru.encode(RuData(0, 0)), b"\x03\x00\x00\x00\x00\x09"]
    for c in [*garbage, lbtru.encode(RuCreq())]:  # the CREQ has no session ID
        assert src.datagram_received(c, R1, 0) == ([], [])
    sst = src.statistics()
    assert (sst.dgrams_dropped_size, sst.dgrams_dropped_version, sst.dgrams_dropped_type) == (1, 1, 1)
    assert (sst.dgrams_dropped_hdr, sst.dgrams_dropped_sid, sst.num_clients) == (1, 1, 0)


def test_params_defaults_match_the_option_registry() -> None:
    ctx = ContextAttributes()
    assert RuSourceParams.from_options(SourceAttributes().get, ctx.get) == RuSourceParams()
    assert RuReceiverParams.from_options(ReceiverAttributes().get, ctx.get) == RuReceiverParams()
    rc = RateController.from_options(ctx.get, "lbtru", now_ns=0)
    assert rc.next_refresh_ns() == 100 * MS


def test_send_direct_goes_to_every_client_as_send_does() -> None:
    net = setup(ru_receiver(), ru_receiver(seed=2))
    net.run_for(5 * MS)
    src = net.nodes[SRC].engine
    assert src.statistics().num_clients == 2
    twin = ru_source()  # the same session, sending through send, for comparison
    for address in (R1, R2):
        twin.datagram_received(lbtru.encode(RuCreq(0, make_options(SID))), address, 0)
    sent = twin.send(b"direct", 5 * MS)
    datagram = src.send_direct(b"direct", 5 * MS)
    assert datagram is not None
    assert [(o.data, o.destination) for o in sent.outgoing] == [(datagram, R1), (datagram, R2)]
    assert list(src.data_destinations()) == [R1, R2]
    assert src.statistics().msgs_sent == twin.statistics().msgs_sent == 2  # a copy per client


# --- hostile input (issue 23) -------------------------------------------------------------------------


def test_a_forged_far_ahead_datagram_is_dropped_counted_and_delivery_goes_on() -> None:
    net = setup(ru_receiver())
    rcv = net.nodes[R1]
    net.run_for(10 * MS)
    for i in range(3):
        net.send(SRC, b"u%d" % i)
    net.run_for(10 * MS)
    far = lbtru.encode(RuData(0x7FFF_FFF0, 0, b"forged", options=make_options(SID)))
    _, out, _ = rcv.engine.datagram_received(far, SRC, net.now)
    assert list(out) == []
    for i in range(3, 6):
        net.send(SRC, b"u%d" % i)
    net.run_for(20 * S)
    assert rcv.payloads() == [b"u%d" % i for i in range(6)]
    st = rcv.engine.statistics()
    assert st.dgrams_dropped_window == 1 and (st.lost, st.naks_sent, st.unrecovered_txw) == (0, 0, 0)


def test_an_rst_of_another_session_is_ignored_and_counted() -> None:
    net = setup(ru_receiver())
    rcv = net.nodes[R1]
    net.run_for(10 * MS)
    rst = lbtru.encode(lbtru.RuRst(options=make_options(SID ^ 1)))
    assert rcv.engine.datagram_received(rst, SRC, net.now) == ((), (), ())
    net.send(SRC, b"after")
    net.run_for(S)
    assert rcv.payloads() == [b"after"] and rcv.engine.state is RuReceiverState.CONNECTED
    st = rcv.engine.statistics()
    assert (st.dgrams_dropped_sid, st.rsts_rcved) == (1, 0)


def test_a_forged_bare_rst_is_refuted_by_the_live_source() -> None:
    net = setup(ru_receiver())
    rcv = net.nodes[R1]
    net.run_for(10 * MS)
    _, out, events = rcv.engine.datagram_received(b"\x07\x00\x00\x00", SRC, net.now)
    assert list(events) == [] and [type(lbtru.decode(o.data)) for o in out] == [RuCreq]
    net.emit(R1, out)
    net.run_for(S)
    net.send(SRC, b"after")
    net.run_for(S)
    assert rcv.payloads() == [b"after"] and not [e for _, e in rcv.events if isinstance(e, SessionEnded)]
    st = rcv.engine.statistics()
    assert (st.rsts_rcved, st.rsts_refuted, st.client_id) == (1, 1, 1)  # the same client throughout
