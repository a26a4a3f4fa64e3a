"""LBT-RM and LBT-RU reliability engines on the simulated network (seed 6.2, 6.3, 8.10).

The real sans-I/O engines (:mod:`openum.protocol.reliable`) run on :class:`openum.testing.SimNetwork`
with its fake clock: simulated seconds cost nothing, every run is fixed by its seed.  Scenarios:

1. NAK storm: one LBT-RM source, 1,000 receivers, shared and independent random loss, UM's default
   NAK backoff and suppression; the repair ratios (retransmissions and NAKs per lost datagram) are
   printed (``pytest -s``) and bounded by constants explained where they are defined.
2. Crybaby receiver: one receiver losing 30 % must not delay the healthy ones, and the source's
   repairs stay within ``transport_lbtrm_retransmit_rate_limit`` per rate interval; for LBT-RU the
   repairs go to the crybaby alone.
3. Tail loss found through session messages (spec 03 A34), LBT-RM and LBT-RU.
4. Burst loss, duplication and reordering: every payload exactly once, in arrival order.
5. A capture of a lossy LBT-RM run decodes cleanly in tshark.

Spec: ``02-transports-and-resolution.md`` 2-3 (NAK suppression 3.2, comparison with PGM 3.3),
``03-architecture.md`` A34 (session messages).
"""

from __future__ import annotations

import math
import os
import random
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from openum.protocol.reliable import (
    Address,
    RateController,
    RmReceiverParams,
    RmSourceParams,
    RuReceiverParams,
    RuSource,
    RuSourceParams,
)
from openum.testing import Fate, LinkModel, Packet, SimNetwork
from openum.wire import lbtrm, lbtru
from tests.conformance.tshark import Tshark, TsharkMissingError, tshark_path

from ._rm_sim import (
    MS,
    RM_SRC,
    RU_SRC,
    US,
    ReceiverNode,
    S,
    SharedDrop,
    SharedLoss,
    SourceNode,
    first_arrivals,
    in_order,
    lbmc_data,
    rate,
    rm_original_sqn,
    rm_receiver,
    rm_retransmitted_sqn,
    rm_source,
    ru_data_sqn,
    ru_receiver,
    ru_source,
)

# A switched LAN: 100 us one way, plus up to 20 us of jitter.
LAN_DELAY = 100 * US
LAN_JITTER = 20 * US
LAN = LinkModel(delay_ns=LAN_DELAY, jitter_ns=LAN_JITTER)

RM_DEFAULTS = RmReceiverParams()
RM_SOURCE_DEFAULTS = RmSourceParams()


def _addr(i: int, port: int = 14400) -> tuple[str, int]:
    return (f"10.1.{i // 250}.{i % 250 + 1}", port)


def _start(net: SimNetwork, source: SourceNode, addr: Address = RM_SRC) -> None:
    """Send message 0 on a clean network and let it arrive everywhere.

    A receiver's sequence space starts at the first datagram it sees (``LossDetector.start``: a late
    join is not head loss), so a receiver that lost datagram 0 would never ask for it; the scenarios
    switch their loss on once every receiver has seen the session start.
    """
    net.emit(addr, source.send(lbmc_data(0), net.now_ns()))
    net.run_for(1 * MS)


def _send(
    net: SimNetwork,
    source: SourceNode,
    first: int,
    count: int,
    *,
    every_ns: int,
    size: int = 0,
    addr: Address = RM_SRC,
) -> None:
    """The application sends messages ``first .. count - 1``, one datagram each, every ``every_ns``."""
    for i in range(first, count):
        net.emit(addr, source.send(lbmc_data(i, size), net.now_ns()))
        net.run_for(every_ns)


def _incomplete(node: ReceiverNode, source: SourceNode, count: int) -> str | None:
    """Why ``node`` did not end with every payload exactly once (None: it did).

    The engines hand payloads up in arrival order; with every sqn present exactly once, an
    ordered-delivery layer above them (:func:`in_order`) releases the whole stream in order.
    """
    sqns = node.sqns()
    if len(sqns) != len(set(sqns)):
        return f"duplicates {sorted(s for s, n in Counter(sqns).items() if n > 1)[:5]}"
    if sorted(sqns) != list(range(count)):
        return f"missing {sorted(set(range(count)) - set(sqns))[:5]}"
    if any(d.payload != source.sent[d.sqn][1] for d in node.delivered):
        return "a payload differs from what the source sent with that sqn"
    return None


def _assert_all_complete(nodes: Sequence[ReceiverNode], source: SourceNode, count: int) -> None:
    bad = {i: why for i, n in enumerate(nodes) if (why := _incomplete(n, source, count)) is not None}
    assert not bad, f"{len(bad)} of {len(nodes)} receivers incomplete, e.g. {list(bad.items())[:3]}"
    pending = sum(n.engine.statistics().losses_pending for n in nodes)
    unrecovered = sum(
        n.engine.statistics().unrecovered_tmo + n.engine.statistics().unrecovered_txw for n in nodes
    )
    assert (pending, unrecovered) == (0, 0)


# --- 1. NAK storm: 1,000 receivers --------------------------------------------------------------------

N_RECEIVERS = 1000
# Fewer datagrams than "a few hundred": each one costs 1,000 deliveries (and, under independent loss,
# a repair of 1,000 more) in pure Python, and the ratios need only a dozen or so losses.
STORM_DATAGRAMS = 150
STORM_INDEPENDENT_DATAGRAMS = 100
STORM_SHARED_LOSS = 0.08  # about a dozen shared losses out of 150: enough for a ratio
STORM_INDEPENDENT_LOSS = 0.01  # each datagram lost by about 10 of the 1,000 receivers

# Shared loss, NAKs per lost datagram.  Every receiver sees the gap at the same moment (within the
# jitter J) and draws its NAK timer uniformly from [0.5, 1.5] x nak_initial_backoff_interval, a spread
# of B = 50 ms.  The earliest timer NAKs; its repair reaches everybody one NAK trip plus one repair
# trip later (<= 2 (D + J)) and cancels their timers.  Only receivers whose timer fires inside that
# window (plus the detection spread J) NAK too: N x (2 D + 3 J) / B of them on average, 5.2 for 1,000
# receivers on this LAN.  Without suppression it would be 1,000.  The bound allows twice the
# expectation: the mean of a dozen Poisson-like counts of mean ~5 has a standard deviation below 1,
# while a broken suppression costs hundreds.
SUPPRESSION_WINDOW = 2 * LAN_DELAY + 3 * LAN_JITTER
EXPECTED_NAKS_PER_SHARED_LOSS = 1 + N_RECEIVERS * SUPPRESSION_WINDOW / (
    RM_DEFAULTS.nak_initial_backoff_interval * MS
)
NAKS_PER_SHARED_LOSS_BOUND = 2 * EXPECTED_NAKS_PER_SHARED_LOSS
# Shared loss, retransmissions per lost datagram: exactly one.  The extra NAKs all arrive within a
# fraction of a millisecond, well inside transport_lbtrm_ignore_interval (500 ms) after the
# retransmission, so the source answers them with at most one NCF ("NAK ignored", only the first
# rejected NAK per ignore interval gets one: UM >= 6.10) and never with a second retransmission.
RXS_PER_SHARED_LOSS_BOUND = 1.0
NCFS_PER_SHARED_LOSS_BOUND = 1.0

# Independent loss (every path, every datagram kind), per *distinct* lost datagram.  One multicast
# retransmission repairs every receiver that lost it (~10 here), so the first repair is one per
# datagram; a second one is needed only when a receiver also loses the repair (probability p for each
# of them, ~10 % per datagram) and NAKs again once the ignore interval is over.  Hence <= 1.5.
# NAKs: the ~10 receivers missing a datagram suppress each other as above (10 x 0.26 ms / 50 ms
# extra), plus the re-NAKs of those that lost the repair (each NAKs every 100-300 ms until the
# ignore interval ends or an NCF suppresses it): bound 3.
RXS_PER_INDEPENDENT_LOSS_BOUND = 1.5
NAKS_PER_INDEPENDENT_LOSS_BOUND = 3.0


def _storm_network(
    seed: int, source_params: RmSourceParams | None = None
) -> tuple[SimNetwork, SourceNode, list[ReceiverNode]]:
    net = SimNetwork(seed=seed, capture=False)  # 150,000 packets: no capture
    net.set_link(LAN)
    source = rm_source(net, params=source_params)
    receivers = [rm_receiver(net, _addr(i)) for i in range(N_RECEIVERS)]
    _start(net, source)
    return net, source, receivers


def test_nak_storm_shared_loss_1000_receivers() -> None:
    net, source, receivers = _storm_network(seed=61)
    loss = SharedLoss(RM_SRC, STORM_SHARED_LOSS, random.Random(62), originals_only=True)
    net.on_packet(loss)
    _send(net, source, 1, STORM_DATAGRAMS, every_ns=1 * MS)
    net.run_for(3 * S)

    _assert_all_complete(receivers, source, STORM_DATAGRAMS)
    st = source.engine.statistics()
    lost = len(loss.lost_originals)
    rxs, naks, nak_pckts, ncfs = (
        st.rxs_sent / lost,
        st.naks_rcved / lost,
        st.nak_pckts_rcved / lost,
        st.ncfs_ignored / lost,
    )
    report = (
        f"shared loss, {N_RECEIVERS} receivers: {lost} of {STORM_DATAGRAMS} datagrams lost by all; "
        f"per lost datagram: {rxs:.2f} retransmissions (bound {RXS_PER_SHARED_LOSS_BOUND}), "
        f"{naks:.2f} NAKs in {nak_pckts:.2f} packets (expected {EXPECTED_NAKS_PER_SHARED_LOSS:.1f}, "
        f"bound {NAKS_PER_SHARED_LOSS_BOUND:.1f}), {ncfs:.2f} NCFs; "
        f"NAKs sent by the receivers: {sum(len(r.naks_sent_at) for r in receivers)}"
    )
    print(report)
    assert lost >= 8, report  # the scenario really lost data
    assert rxs <= RXS_PER_SHARED_LOSS_BOUND, report
    assert naks <= NAKS_PER_SHARED_LOSS_BOUND, report
    assert ncfs <= NCFS_PER_SHARED_LOSS_BOUND, report
    assert naks > 1, report  # 1,000 receivers on a real LAN: some NAKs cross the repair


def test_nak_storm_independent_loss_1000_receivers() -> None:
    net, source, receivers = _storm_network(seed=63)
    net.set_link(LinkModel(loss=STORM_INDEPENDENT_LOSS, delay_ns=LAN_DELAY, jitter_ns=LAN_JITTER))
    lost_originals: set[int] = set()

    def watch(packet: Packet) -> None:
        if packet.src == RM_SRC and packet.fate is Fate.DROPPED and packet.data[0] == lbtrm.TYPE_DATA:
            _, _, sqn, _, flags, _ = lbtrm.decode_data_header(packet.data)
            if not flags & lbtrm.FLAG_RX:
                lost_originals.add(sqn)

    net.on_packet(watch)
    _send(net, source, 1, STORM_INDEPENDENT_DATAGRAMS, every_ns=1 * MS)
    net.run_for(5 * S)

    _assert_all_complete(receivers, source, STORM_INDEPENDENT_DATAGRAMS)
    st = source.engine.statistics()
    distinct = len(lost_originals)
    events = sum(r.engine.statistics().lost for r in receivers)
    rxs, naks = st.rxs_sent / distinct, st.naks_rcved / distinct
    report = (
        f"independent loss {STORM_INDEPENDENT_LOSS:.0%}, {N_RECEIVERS} receivers: {events} losses of "
        f"{distinct} distinct datagrams; per distinct lost datagram: {rxs:.2f} retransmissions "
        f"(bound {RXS_PER_INDEPENDENT_LOSS_BOUND}), {naks:.2f} NAKs (bound "
        f"{NAKS_PER_INDEPENDENT_LOSS_BOUND}); per receiver-loss: {st.rxs_sent / events:.3f} "
        f"retransmissions, {st.naks_rcved / events:.3f} NAKs; NCFs sent {st.ncf_pckts_sent}"
    )
    print(report)
    assert events > 5 * distinct, report  # each datagram was lost by several receivers
    assert rxs <= RXS_PER_INDEPENDENT_LOSS_BOUND, report
    assert naks <= NAKS_PER_INDEPENDENT_LOSS_BOUND, report


# The worst case for suppression: the first repair of a datagram *and* the NCF answering the next
# NAK are lost for everybody.  Nothing then cancels or suppresses anyone's NAK timer: every receiver
# NAKs, and keeps NAKing every nak_backoff_interval (x 0.5-1.5) while the source, inside its
# ignore_interval, discards the NAKs silently (UM >= 6.10 answers only the first one with an NCF).
# So each receiver sends at most 1 + ceil(ignore / (0.5 x backoff)) NAKs, and the source still sends
# exactly 2 retransmissions: the ignore interval, not the receivers, bounds the repairs.
STORM_LOST_SQN = 5
STORM_SHORT_BURST = 12
MAX_NAKS_PER_RECEIVER = 1 + math.ceil(
    RM_SOURCE_DEFAULTS.ignore_interval / (0.5 * RM_DEFAULTS.nak_backoff_interval)
)


def _double_loss_storm(ignore_interval_ms: int) -> tuple[int, int, int]:
    """``(retransmissions, NAKs received, ms from the loss to the last receiver's repair)``."""
    params = RmSourceParams(ignore_interval=ignore_interval_ms)
    net, source, receivers = _storm_network(seed=65, source_params=params)
    remaining = {"original", "repair", "ncf"}

    def decide(data: bytes) -> bool:
        if rm_original_sqn(data) == STORM_LOST_SQN:
            kind = "original"
        elif rm_retransmitted_sqn(data) == STORM_LOST_SQN:
            kind = "repair"
        elif data[0] == lbtrm.TYPE_NCF:
            kind = "ncf"
        else:
            return False
        if kind in remaining:
            remaining.remove(kind)
            return True
        return False

    net.on_packet(SharedDrop(RM_SRC, decide))
    _send(net, source, 1, STORM_SHORT_BURST, every_ns=1 * MS)
    net.run_for(3 * S)
    assert not remaining  # the scenario happened as designed
    _assert_all_complete(receivers, source, STORM_SHORT_BURST)
    repaired = max(next(d.time_ns for d in r.delivered if d.sqn == STORM_LOST_SQN) for r in receivers)
    st = source.engine.statistics()
    return st.rxs_sent, st.naks_rcved, (repaired - source.sent[STORM_LOST_SQN][0]) // MS


def test_nak_storm_when_a_repair_and_its_ncf_are_lost_for_everybody() -> None:
    rxs, naks, took = _double_loss_storm(RM_SOURCE_DEFAULTS.ignore_interval)
    # UM's guide recommends ignore_interval <= nak_backoff_interval / 2 (the defaults break it)
    short = RM_DEFAULTS.nak_backoff_interval // 2
    rxs_short, naks_short, took_short = _double_loss_storm(short)
    report = (
        f"repair and NCF lost for all {N_RECEIVERS} receivers: ignore interval "
        f"{RM_SOURCE_DEFAULTS.ignore_interval} ms: {rxs} retransmissions, {naks} NAKs "
        f"({naks / N_RECEIVERS:.2f} per receiver, bound {MAX_NAKS_PER_RECEIVER}), repaired after {took} ms; "
        f"ignore interval {short} ms: {rxs_short} retransmissions, {naks_short} NAKs, repaired after "
        f"{took_short} ms"
    )
    print(report)
    assert rxs == rxs_short == 2, report
    assert N_RECEIVERS <= naks <= MAX_NAKS_PER_RECEIVER * N_RECEIVERS, report  # nobody was suppressed
    assert naks_short < naks and took_short < took, report


# --- 2. crybaby receivers ------------------------------------------------------------------------------

HEALTHY_RECEIVERS = 5
CRYBABY = ("10.2.0.1", 14400)
CRYBABY_LOSS = 0.30
CRYBABY_DATAGRAMS = 300
CRYBABY_SIZE = 500  # LBMC bytes per datagram: 520 bytes of LBT-RM every ms is 4.2 Mbit/s of new data
# transport_lbtrm_retransmit_rate_limit, lowered from UM's 5 Mbit/s so that it binds: the crybaby
# asks for 30 % of 4.2 Mbit/s plus repeats (~1.8 Mbit/s) while the source sends.  Rate interval: UM's
# default 10 ms, so the budget is 1 Mbit/s x 10 ms = 1,250 bytes (two repairs) per interval.
CRYBABY_RX_LIMIT = 1_000_000
RATE_INTERVAL_MS = 10
RX_BUDGET_BYTES = CRYBABY_RX_LIMIT * RATE_INTERVAL_MS // 8000
# A healthy receiver never waits for a repair it does not need: the transport hands every datagram up
# when it arrives, and nothing is missing before it.  So its latency from send to (ordered) delivery
# is the network's alone, D + J at most, with or without the crybaby; the source's data path is not
# slowed by repairs either (retransmissions have their own budget, seed 6.3.2).
HEALTHY_LATENCY_BOUND = LAN_DELAY + LAN_JITTER
# The healthy mean may move only by jitter sampling noise (std ~0.2 us over 1,500 deliveries).
HEALTHY_MEAN_SHIFT_BOUND = 2 * US


def _latencies(node: ReceiverNode, source: SourceNode) -> list[int]:
    """Send-to-delivery time of every payload, as an ordered-delivery layer would release it."""
    return [t - source.sent[sqn][0] for sqn, t in in_order(node.delivered)]


def _crybaby_rm_run(with_crybaby: bool) -> tuple[SimNetwork, SourceNode, list[ReceiverNode], RateController]:
    net = SimNetwork(seed=71)
    net.set_link(LAN)
    rc = rate(retransmit=CRYBABY_RX_LIMIT, interval_ms=RATE_INTERVAL_MS)
    source = rm_source(net, rc=rc)
    receivers = [rm_receiver(net, _addr(i)) for i in range(HEALTHY_RECEIVERS)]
    if with_crybaby:
        receivers.append(rm_receiver(net, CRYBABY))
    _start(net, source)
    net.set_link(LinkModel(loss=CRYBABY_LOSS, delay_ns=LAN_DELAY, jitter_ns=LAN_JITTER), dst=CRYBABY)
    _send(net, source, 1, CRYBABY_DATAGRAMS, every_ns=1 * MS, size=CRYBABY_SIZE)
    net.run_for(15 * S)
    for node in receivers:
        assert _incomplete(node, source, CRYBABY_DATAGRAMS) is None
    return net, source, receivers, rc


def _rx_bytes_per_interval(net: SimNetwork, interval_ns: int) -> Counter[int]:
    per_interval: Counter[int] = Counter()
    for sent in net.sent:
        if sent.src == RM_SRC and rm_retransmitted_sqn(sent.data) is not None:
            per_interval[sent.time_ns // interval_ns] += len(sent.data)
    return per_interval


def _ms(ns: float) -> str:
    return f"{ns / MS:.3f} ms"


def test_crybaby_does_not_delay_healthy_receivers_and_repairs_keep_the_rate_limit() -> None:
    _, base_source, base_nodes, _ = _crybaby_rm_run(with_crybaby=False)
    net, source, nodes, rc = _crybaby_rm_run(with_crybaby=True)
    healthy, crybaby = nodes[:-1], nodes[-1]
    base = [x for n in base_nodes for x in _latencies(n, base_source)]
    with_cry = [x for n in healthy for x in _latencies(n, source)]
    cry = _latencies(crybaby, source)
    per_interval = _rx_bytes_per_interval(net, RATE_INTERVAL_MS * MS)
    st, cst = source.engine.statistics(), crybaby.engine.statistics()
    report = (
        f"healthy latency without crybaby: mean {_ms(statistics.fmean(base))}, max {_ms(max(base))}; "
        f"with crybaby: mean {_ms(statistics.fmean(with_cry))}, max {_ms(max(with_cry))} (bound "
        f"{_ms(HEALTHY_LATENCY_BOUND)}); crybaby: median {_ms(statistics.median(cry))}, max {_ms(max(cry))}, "
        f"lost {cst.lost}, NAKs {cst.naks_sent}; source: {st.rxs_sent} retransmissions, "
        f"{st.ncfs_rx_delay} rx-delay NCFs, busiest rate interval {max(per_interval.values())} bytes of "
        f"repairs (budget {RX_BUDGET_BYTES})"
    )
    print(report)
    assert max(base) <= HEALTHY_LATENCY_BOUND and max(with_cry) <= HEALTHY_LATENCY_BOUND, report
    assert abs(statistics.fmean(with_cry) - statistics.fmean(base)) <= HEALTHY_MEAN_SHIFT_BOUND, report
    for node in healthy:
        hst = node.engine.statistics()
        assert (hst.lost, hst.naks_sent) == (0, 0)
        assert hst.duplicate_data > 0  # the crybaby's repairs are multicast: they see them, and drop them
    # the retransmit budget holds in every rate interval, and it really was the limit
    assert max(per_interval.values()) <= RX_BUDGET_BYTES, report
    assert max(per_interval.values()) > RX_BUDGET_BYTES - (CRYBABY_SIZE + lbtrm.DATA_HEADER_LEN), report
    assert rc.statistics().rctlr_rx_msgs > 0 and st.ncfs_rx_delay > 0, report
    # every repair is the crybaby's: each of its losses costs 1 / (1 - 0.3) = 1.4 repairs on average
    assert cst.lost <= st.rxs_sent <= 2 * cst.lost, report
    assert max(cry) > 10 * HEALTHY_LATENCY_BOUND  # the crybaby itself did wait for repairs


RU_DATAGRAMS = 200
RU_SIZE = 250  # 270 bytes with the LBT-RU header and SID option, to 4 clients every 2 ms: 4.3 Mbit/s


def test_lbtru_crybaby_gets_its_repairs_alone() -> None:
    net = SimNetwork(seed=73)
    net.set_link(LAN)
    source = ru_source(net)
    crybaby_addr = ("10.2.0.1", 14360)
    healthy = [ru_receiver(net, _addr(i, 14360)) for i in range(3)]
    crybaby = ru_receiver(net, crybaby_addr)
    net.run_for(10 * MS)  # CREQ / SM SYN handshakes
    engine = source.engine
    assert isinstance(engine, RuSource) and len(engine.clients) == 4
    net.set_link(LinkModel(loss=CRYBABY_LOSS, delay_ns=LAN_DELAY, jitter_ns=LAN_JITTER), dst=crybaby_addr)
    _send(net, source, 0, RU_DATAGRAMS, every_ns=2 * MS, size=RU_SIZE, addr=RU_SRC)
    net.run_for(15 * S)

    for node in [*healthy, crybaby]:
        assert _incomplete(node, source, RU_DATAGRAMS) is None
    repairs = Counter(s.dst for s in net.sent if s.src == RU_SRC and (d := ru_data_sqn(s.data)) and d[1])
    ncfs = Counter(s.dst for s in net.sent if s.src == RU_SRC and s.data[0] == lbtru.TYPE_NCF)
    latencies = [x for n in healthy for x in _latencies(n, source)]
    cst = crybaby.engine.statistics()
    report = (
        f"LBT-RU: repairs sent to {dict(repairs)}, NCFs to {dict(ncfs)}; crybaby lost {cst.lost}; "
        f"healthy latency max {_ms(max(latencies))} (bound {_ms(HEALTHY_LATENCY_BOUND)})"
    )
    print(report)
    assert set(repairs) == {crybaby_addr} and set(ncfs) <= {crybaby_addr}, report
    assert repairs[crybaby_addr] >= cst.lost > 0, report
    for node in healthy:
        hst = node.engine.statistics()
        assert (hst.rxs_rcved, hst.ncf_pckts_rcved, hst.duplicate_data, hst.naks_sent) == (0, 0, 0, 0)
    assert max(latencies) <= HEALTHY_LATENCY_BOUND, report


# --- 3. tail loss found through session messages (spec 03 A34) ----------------------------------------

TAIL_BURST = 10
TAIL_LOST = (8, 9)  # the last two datagrams of the burst, lost for every receiver; nothing follows


def _tail_session(
    transport: str, net: SimNetwork
) -> tuple[SourceNode, list[ReceiverNode], Address, int, int]:
    """Source and 3 receivers; returns them, the source address, sm_minimum_interval and the initial
    NAK backoff (ms)."""
    if transport == "lbtrm":
        source = rm_source(net)
        nodes = [rm_receiver(net, _addr(i)) for i in range(3)]
        return (
            source,
            nodes,
            RM_SRC,
            RM_SOURCE_DEFAULTS.sm_minimum_interval,
            RM_DEFAULTS.nak_initial_backoff_interval,
        )
    source = ru_source(net)
    nodes = [ru_receiver(net, _addr(i, 14360)) for i in range(3)]
    net.run_for(10 * MS)  # CREQ / SM SYN handshakes
    return (
        source,
        nodes,
        RU_SRC,
        RuSourceParams().sm_minimum_interval,
        RuReceiverParams().nak_initial_backoff_interval,
    )


def _tail_original(transport: str, data: bytes) -> bool:
    if transport == "lbtrm":
        return rm_original_sqn(data) in TAIL_LOST
    found = ru_data_sqn(data)
    return found is not None and not found[1] and found[0] in TAIL_LOST


@pytest.mark.parametrize("transport", ["lbtrm", "lbtru"])
def test_tail_loss_is_found_through_session_messages(transport: str) -> None:
    net = SimNetwork(seed=81)
    net.set_link(LAN)
    source, nodes, src_addr, sm_min_ms, backoff_ms = _tail_session(transport, net)
    net.link(src=src_addr).drop(lambda data: _tail_original(transport, data))
    _send(net, source, 0, TAIL_BURST, every_ns=1 * MS, addr=src_addr)
    t_last = source.sent[TAIL_BURST - 1][0]

    # until the first session message the receivers cannot know that anything is missing
    net.run_until(t_last + sm_min_ms * MS - 1)
    for node in nodes:
        assert node.sqns() == list(range(TAIL_LOST[0]))
        assert (node.engine.statistics().lost, node.naks_sent_at) == (0, [])
    net.run_for(2 * S)

    sms = [
        s.time_ns for s in net.sent if s.src == src_addr and s.data[0] == lbtrm.TYPE_SM and s.time_ns > t_last
    ]
    assert sms[0] == t_last + sm_min_ms * MS  # the first SM: sm_minimum_interval after the last datagram
    # SM one way, the random initial NAK backoff (0.5-1.5 x; LBT-RU's default is 0: at once), the NAK
    # to the source and the repair back
    sm_at = t_last + sm_min_ms * MS
    earliest = sm_at + LAN_DELAY + int(0.5 * backoff_ms * MS) + 2 * LAN_DELAY
    latest = sm_at + int(1.5 * backoff_ms * MS) + 3 * (LAN_DELAY + LAN_JITTER)
    for node in nodes:
        assert _incomplete(node, source, TAIL_BURST) is None
        repaired = [d for d in node.delivered if d.sqn in TAIL_LOST]
        assert all(d.retransmission for d in repaired)
        for d in repaired:
            assert earliest <= d.time_ns <= latest, (
                f"{transport}: sqn {d.sqn} repaired {_ms(d.time_ns - t_last)} after the last send, "
                f"window {_ms(earliest - t_last)}-{_ms(latest - t_last)}"
            )
        print(
            f"{transport} tail loss: repaired {_ms(repaired[-1].time_ns - t_last)} after the last send "
            f"(window {_ms(earliest - t_last)}-{_ms(latest - t_last)})"
        )
        st = node.engine.statistics()
        assert (st.lost, st.sms_rcved > 0, st.unrecovered_tmo) == (len(TAIL_LOST), True, 0)


# --- 4. burst loss, duplication and reordering --------------------------------------------------------

# Gilbert-Elliott bursts (enter 3 %, stay 50 %: mean burst 2, 5.7 % loss), 5 % duplicates, 20 % of
# datagrams held back by up to 2 ms (datagrams go every 0.5 ms, so later ones overtake them), on every
# path including NAKs, CREQs and ACKs.
IMPAIRED = LinkModel(
    burst_loss=(0.03, 0.5),
    duplicate=0.05,
    reorder=0.2,
    reorder_ns=2 * MS,
    delay_ns=200 * US,
    jitter_ns=100 * US,
)
IMPAIRED_DATAGRAMS = 300


@pytest.mark.parametrize("transport", ["lbtrm", "lbtru"])
def test_burst_loss_duplicates_and_reordering_give_every_payload_once(transport: str) -> None:
    net = SimNetwork(seed=91)
    if transport == "lbtrm":
        source, src_addr = rm_source(net), RM_SRC
        nodes = [rm_receiver(net, _addr(i), record_arrivals=True) for i in range(4)]
        _start(net, source)  # the session start reaches everyone (see _start), then the trouble begins
        net.set_link(IMPAIRED)
        first = 1
    else:
        net.set_link(IMPAIRED)  # LBT-RU: the handshake too (lost CREQs and SYNs are retried)
        source, src_addr = ru_source(net), RU_SRC
        nodes = [ru_receiver(net, _addr(i, 14360), record_arrivals=True) for i in range(4)]
        net.run_for(1 * S)
        engine = source.engine
        assert isinstance(engine, RuSource) and len(engine.clients) == 4
        first = 0
    _send(net, source, first, IMPAIRED_DATAGRAMS, every_ns=500 * US, addr=src_addr)
    net.run_for(30 * S)

    for node in nodes:
        assert node.arrivals is not None
        st = node.engine.statistics()
        # the engine contract: payloads handed up in arrival order, each sqn once (the first copy)
        assert node.sqns() == first_arrivals(node.arrivals)
        assert _incomplete(node, source, IMPAIRED_DATAGRAMS) is None
        # every extra copy that arrived (network duplicates, repairs someone else asked for) was
        # counted as a duplicate; nothing was given up on
        assert st.msgs_rcved == len(node.arrivals)
        assert st.duplicate_data == len(node.arrivals) - IMPAIRED_DATAGRAMS
        assert (st.losses_pending, st.unrecovered_tmo, st.unrecovered_txw) == (0, 0, 0)
        # the network really was that bad for this receiver
        assert node.sqns() != sorted(node.sqns()) and st.lost > 0 and st.duplicate_data > 0
    print(
        f"{transport} impaired: lost {[n.engine.statistics().lost for n in nodes]}, duplicates "
        f"{[n.engine.statistics().duplicate_data for n in nodes]}, out of order "
        f"{[n.engine.statistics().out_of_order for n in nodes]}"
    )
    assert sum(n.engine.statistics().out_of_order for n in nodes) > 0


# --- 5. a capture of a lossy LBT-RM run in tshark -----------------------------------------------------

# Expert items a healthy LBT-RM flow raises (wire spec section 8, as in tests/conformance): a NAK is a
# Warning by design; NCFs and retransmissions are Notes, listed in case Wireshark's severities change.
HEALTHY_EXPERT = (
    r"^NAK$",
    r"^NCF (Do not retry|NAK Ignored|Retransmit Delay|NAK Shed)$",
    r"^RX 0x[0-9a-f]{8}$",
    r"^Data RX$",
)
PCAP_DATAGRAMS = 30
PCAP_RECEIVERS = [("10.1.0.1", 51000), ("10.1.0.2", 51000), ("10.1.0.3", 51000)]  # NAKs from any port


@pytest.fixture(scope="module")
def tshark() -> Tshark:
    try:
        tshark_path()
    except TsharkMissingError as exc:
        if os.environ.get("OPENUM_SKIP_TSHARK") == "1":
            pytest.skip(f"OPENUM_SKIP_TSHARK=1: {exc}")
        pytest.fail(str(exc), pytrace=False)
    return Tshark()  # decode-as UM's default ports: 14400 and 14390 as LBT-RM


def _lossy_rm_capture() -> SimNetwork:
    """3 receivers, 5 % random loss, plus losses that make the source send every packet kind."""
    net = SimNetwork(seed=101)
    net.set_link(LAN)
    source = rm_source(net)
    nodes = [rm_receiver(net, addr) for addr in PCAP_RECEIVERS]
    _start(net, source)
    net.set_link(LinkModel(loss=0.05, delay_ns=LAN_DELAY, jitter_ns=LAN_JITTER), src=RM_SRC)
    # datagram 5 lost by everybody, and its first repair by the first receiver too: that receiver
    # NAKs again inside the ignore interval and draws an NCF; the last datagram is lost by everybody
    # and only a session message reveals it
    net.link(src=RM_SRC).drop(lambda data: rm_original_sqn(data) in (5, PCAP_DATAGRAMS - 1))
    net.link(PCAP_RECEIVERS[0], src=RM_SRC).drop(lambda data: rm_retransmitted_sqn(data) == 5, times=1)
    _send(net, source, 1, PCAP_DATAGRAMS, every_ns=1 * MS)
    net.run_for(2 * S)
    for node in nodes:
        assert _incomplete(node, source, PCAP_DATAGRAMS) is None
    return net


@pytest.mark.tshark
def test_lossy_lbtrm_capture_decodes_cleanly_in_tshark(tshark: Tshark, tmp_path: Path) -> None:
    net = _lossy_rm_capture()
    pcap = net.write_pcap(tmp_path / "lbtrm-lossy.pcap")
    rows = tshark.assert_clean(
        pcap,
        allowed_expert=HEALTHY_EXPERT,
        fields=[
            "frame.protocols",
            "lbtrm.hdr.type",
            "lbtrm.data.flags_fec_type.rx",
            "lbtrm.data.sqn",
            "lbmc.sqn",
        ],
    )
    assert len(rows) == len(net.sent)
    assert all(":lbtrm" in row["frame.protocols"][0] for row in rows), "a frame not decoded as LBT-RM"
    kinds = Counter(int(row["lbtrm.hdr.type"][0], 0) for row in rows)
    sent_kinds = Counter(s.data[0] for s in net.sent)
    assert kinds == sent_kinds
    assert all(kinds[k] > 0 for k in (lbtrm.TYPE_DATA, lbtrm.TYPE_NAK, lbtrm.TYPE_NCF, lbtrm.TYPE_SM)), kinds
    rx = [row for row in rows if row.get("lbtrm.data.flags_fec_type.rx", ["0"])[0] in ("1", "True")]
    assert len(rx) == sum(rm_retransmitted_sqn(s.data) is not None for s in net.sent) > 0
    # every DATA, original or retransmitted, carries its LBMC message (topic sqn = message index)
    for row in rows:
        if "lbtrm.data.sqn" in row:
            assert [int(v, 0) for v in row["lbmc.sqn"]] == [int(row["lbtrm.data.sqn"][0], 0)]

    # Wireshark's own sequence analysis sees the retransmissions as repairs, not as duplicates
    analysis = Tshark(two_pass=True, prefs={"lbtrm.sequence_analysis": "TRUE"})
    flagged = analysis.assert_clean(
        pcap,
        allowed_expert=HEALTHY_EXPERT,
        fields=["lbtrm.transport.data_retransmission", "_ws.expert.message"],
    )
    assert sum("lbtrm.transport.data_retransmission" in row for row in flagged) == len(rx)
    messages = [m for row in flagged for m in row.get("_ws.expert.message", [])]
    assert not [m for m in messages if "Duplicate" in m or "gap" in m or "out of order" in m], messages
