"""Property tests of the reliability engines: any loss/duplication/reordering pattern, once the network
calms down, ends with every payload delivered exactly once per receiver (PRACTICES.md 8)."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openum.protocol.reliable import (
    RateController,
    RmReceiver,
    RmReceiverParams,
    RmSource,
    RmSourceParams,
    RuReceiver,
    RuReceiverParams,
    RuSource,
    RuSourceParams,
    SessionEnded,
    Unrecovered,
)

from ._reliable_net import MS, SRC, Net

FOREVER = 10**9  # ms: the NAK generation interval never runs out
RU_SRC = ("10.0.0.1", 14380)
Plan = list[tuple[str, int]]
PREFIXES = [b"", b"\x00", b"\x02", b"\x03", b"\x04", b"\x06"]

actions = st.lists(
    st.tuples(st.sampled_from(["ok", "drop", "drop", "dup", "late"]), st.integers(0, 80)), max_size=150
)
gaps = st.lists(st.integers(0, 30), min_size=1, max_size=40)


def chaos_fate(plan: list[tuple[str, int]]):
    """Apply ``plan`` to the first transmissions (in order), then deliver everything."""
    it = iter(plan)

    def fate(src, dst, data, now):
        action, ms = next(it, ("ok", 0))
        if action == "drop":
            return ()
        if action == "dup":
            return (0, ms * MS)
        if action == "late":
            return (ms * MS,)
        return (0,)

    return fate


def run(
    net: Net,
    plan: list[tuple[str, int]],
    send_gaps: list[int],
    src: tuple[str, int],
    receivers: list[tuple[str, int]],
) -> None:
    # The session starts cleanly: LBT-RU clients connect, LBT-RM receivers see the first datagram.
    # (Whatever precedes a receiver's first datagram is head loss, not repaired by design: seed 2.4.2.)
    net.run_until(50 * MS)
    net.send(src, b"msg-000")
    net.run_for(10 * MS)
    net.fate = chaos_fate(plan)
    for i, gap in enumerate(send_gaps, start=1):
        net.run_for(gap * MS)
        assert not net.send(src, b"msg-%03d" % i).refused
    n = len(send_gaps) + 1
    deadline = net.now + 60_000 * MS
    while net.now < deadline and any(len(net.nodes[r].received) < n for r in receivers):
        net.run_for(500 * MS)


def check(net: Net, n: int, receivers: list[tuple[str, int]]) -> None:
    expected = [b"msg-%03d" % i for i in range(n)]
    for r in receivers:
        node = net.nodes[r]
        got = node.payloads()
        assert sorted(got) == expected, (r, got)  # every payload, none twice
        assert not any(isinstance(e, Unrecovered | SessionEnded) for _, e in node.events)
        stats = node.engine.statistics()
        assert stats.losses_pending == 0 and stats.unrecovered_tmo == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=actions, send_gaps=gaps, seed=st.integers(0, 2**16))
def test_lbtrm_delivers_every_payload_exactly_once(plan: Plan, send_gaps: list[int], seed: int) -> None:
    net = Net()
    rc = RateController(data_rate_limit=0, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    net.add(SRC, RmSource(session_id=7, nak_port=SRC[1], params=RmSourceParams(), rate=rc, now_ns=0))
    receivers = [(f"10.0.1.{i}", 50000) for i in range(3)]
    params = RmReceiverParams(nak_generation_interval=FOREVER)
    for i, addr in enumerate(receivers):
        rng = random.Random(seed + i)
        net.add(addr, RmReceiver(session_id=7, source=SRC, params=params, rng=rng, now_ns=0), member=True)
    run(net, plan, send_gaps, SRC, receivers)
    check(net, len(send_gaps) + 1, receivers)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=actions, send_gaps=gaps, seed=st.integers(0, 2**16))
def test_lbtru_delivers_every_payload_exactly_once(plan: Plan, send_gaps: list[int], seed: int) -> None:
    net = Net()
    rc = RateController(data_rate_limit=0, retransmit_rate_limit=1_000_000, rate_interval_ms=100, now_ns=0)
    net.add(RU_SRC, RuSource(session_id=9, params=RuSourceParams(), rate=rc, now_ns=0))
    receivers = [(f"10.0.1.{i}", 14360) for i in range(2)]
    params = RuReceiverParams(nak_generation_interval=FOREVER)
    for i, addr in enumerate(receivers):
        rng = random.Random(seed + i)
        net.add(addr, RuReceiver(session_id=9, source=RU_SRC, params=params, rng=rng, now_ns=0))
    run(net, plan, send_gaps, RU_SRC, receivers)
    check(net, len(send_gaps) + 1, receivers)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=64), prefix=st.sampled_from(PREFIXES))
def test_garbage_never_raises(data: bytes, prefix: bytes) -> None:
    datagram = prefix + data
    rc = RateController(data_rate_limit=0, retransmit_rate_limit=0, rate_interval_ms=10, now_ns=0)
    rm_src = RmSource(session_id=7, nak_port=SRC[1], params=RmSourceParams(), rate=rc, now_ns=0)
    rm_src.send(b"x", 0)
    rm_src.datagram_received(datagram, SRC, 1)
    rm_rcv = RmReceiver(session_id=7, source=SRC, params=RmReceiverParams(), rng=random.Random(0), now_ns=0)
    rm_rcv.datagram_received(datagram, SRC, 1)
    rm_rcv.poll(10**12)
    ru_src = RuSource(session_id=9, params=RuSourceParams(), rate=rc, now_ns=0)
    ru_src.datagram_received(datagram, SRC, 1)
    ru_rcv = RuReceiver(session_id=9, source=SRC, params=RuReceiverParams(), rng=random.Random(0), now_ns=0)
    ru_rcv.datagram_received(datagram, SRC, 1)
    ru_rcv.poll(10**12)
    for engine in (rm_src, rm_rcv, ru_src, ru_rcv):
        engine.statistics()
