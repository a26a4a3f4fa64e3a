"""openum.testing: the fake clock and the deterministic network simulator (PRACTICES.md 7)."""

from __future__ import annotations

import dataclasses
import doctest
import itertools
import os
import re
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import openum.testing
from openum.protocol.resolution import (
    PhaseParams,
    ReceiverSpec,
    ResolverEngine,
    ResolverSettings,
    SourceDiscovered,
    SourceSpec,
)
from openum.runtime import ManualClock
from openum.testing import (
    Datagram,
    EngineNode,
    FakeClock,
    Fate,
    LinkModel,
    LivelockError,
    Mailbox,
    Out,
    Packet,
    SimNetwork,
    SimNode,
)
from openum.wire import lbtrm
from openum.wire.lbmr import LbmrPacket, ResolverKeepalive, TcpTransport, encode_packet
from tests.conformance.tshark import Tshark, TsharkMissingError, tshark_path

MS = 1_000_000
US = 1_000
A = ("10.0.0.1", 5000)
B = ("10.0.0.2", 5000)
C = ("10.0.0.3", 5000)
D = ("10.0.0.4", 5000)
GROUP = ("224.10.10.10", 14400)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def _counter(i: int) -> bytes:
    return struct.pack(">I", i)


def _index(data: bytes) -> int:
    return int(struct.unpack(">I", data[:4])[0])


def _blast(net: SimNetwork, count: int, src: tuple[str, int], dst: tuple[str, int], gap_ns: int = 0) -> None:
    """Send ``count`` numbered datagrams from ``src`` to ``dst``, ``gap_ns`` apart."""
    for i in range(count):
        net.send(src, _counter(i), dst)
        if gap_ns:
            net.run_for(gap_ns)


# -- the fake clock ------------------------------------------------------------------------------------


def test_fake_clock_moves_only_forward_in_integer_nanoseconds() -> None:
    clock = FakeClock(5)
    assert isinstance(clock, ManualClock)
    assert clock.now_ns() == 5
    assert clock.advance(10) == 15
    assert clock.advance_to(100) == 100
    assert clock.advance_to(100) == 100  # staying put is allowed
    with pytest.raises(ValueError, match="backwards"):
        clock.advance_to(99)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-1)
    with pytest.raises(TypeError, match="int"):
        clock.advance(0.5 * MS)  # type: ignore[arg-type]
    assert clock.now_ns() == 100


class _Timer(SimNode):
    """Fires at the given times; records when it was polled."""

    def __init__(self, times: Iterable[int]) -> None:
        self.times = sorted(times)
        self.polled: list[int] = []

    def poll(self, now_ns: int) -> Iterable[Out]:
        self.polled.append(now_ns)
        self.times = [t for t in self.times if t > now_ns]
        return ()

    def next_deadline(self) -> int | None:
        return self.times[0] if self.times else None


def test_clock_jumps_straight_to_each_deadline() -> None:
    net = SimNetwork()
    timer = net.add(_Timer([5 * 10**9, 7 * 10**9, 3600 * 10**9]), A)
    assert net.step()
    assert net.now_ns() == 5 * 10**9  # one step, however far away the deadline is
    net.run_until(10 * 10**9)
    assert timer.polled == [5 * 10**9, 7 * 10**9]  # polled exactly at its deadlines, never in between
    assert net.now_ns() == 10 * 10**9
    net.run_for(4000 * 10**9)
    assert timer.polled[-1] == 3600 * 10**9
    assert not net.step()  # nothing left
    with pytest.raises(ValueError, match="back"):
        net.run_until(0)


def test_network_drives_a_shared_clock() -> None:
    clock = FakeClock(1000)
    net = SimNetwork(clock=clock)
    net.add(_Timer([2000]), A)
    net.run_until(1500)
    assert clock.now_ns() == 1500
    net.step()
    assert clock.now_ns() == 2000


def test_deadlines_in_the_past_are_polled_now_and_a_stuck_node_is_a_livelock() -> None:
    clock = FakeClock(50)
    net = SimNetwork(clock=clock, max_steps_per_instant=100)
    timer = net.add(_Timer([10]), A)
    net.step()
    assert timer.polled == [50]

    class Stuck(SimNode):
        def next_deadline(self) -> int | None:
            return 0  # never moves on: a classic engine bug

    box = net.add(Mailbox(), C)
    for _ in range(150):  # many short runs at one instant are progress, not a livelock
        net.send(A, b"x", C)
        net.run_for(0)
    assert len(box.received) == 150
    net.add(Stuck(), B)
    with pytest.raises(LivelockError, match=re.escape(str(B))):
        net.run_for(MS)


# -- delivery ------------------------------------------------------------------------------------------


def test_unicast_delivery_and_unreachable_addresses() -> None:
    net = SimNetwork()
    box = net.add(Mailbox(), B)
    net.run_until(7)
    net.send(A, b"hello", B)  # a sender needs no node
    net.send(A, b"nobody", C)
    assert net.in_flight == 1
    net.run_for(1)
    assert [(r.time_ns, r.src, r.data) for r in box.received] == [(7, A, b"hello")]
    assert [p.fate for p in net.packets] == [Fate.DELIVERED, Fate.UNREACHABLE]
    assert net.stats[A].sent == 2
    assert net.stats[B].received == 1
    assert net.stats[B].bytes_received == 5
    with pytest.raises(ValueError, match="larger than UDP"):
        net.send(A, bytes(65_508), B)


def test_multicast_reaches_every_member_but_the_sender_unless_loopback() -> None:
    net = SimNetwork()
    boxes = {addr: net.add(Mailbox(), addr, groups=[GROUP]) for addr in (A, B, C)}
    outsider = net.add(Mailbox(), D)
    net.send(A, b"one", GROUP)
    net.run_for(1)
    assert [len(boxes[x].received) for x in (A, B, C)] == [0, 1, 1]
    assert outsider.received == []
    net.send(A, b"two", GROUP, loopback=True)
    net.leave(C, GROUP)
    net.send(D, b"three", GROUP)  # a non-member may send to a group
    net.run_for(1)
    assert boxes[A].payloads == [b"two", b"three"]
    assert boxes[B].payloads == [b"one", b"two", b"three"]
    assert boxes[C].payloads == [b"one", b"two"]
    assert net.members(GROUP) == [A, B]
    mcast = [p for p in net.packets if p.send_index == 0]
    assert [(p.dst, p.group) for p in mcast] == [(B, GROUP), (C, GROUP)]
    with pytest.raises(ValueError, match="multicast"):
        net.join(A, ("10.1.1.1", 1))
    with pytest.raises(ValueError, match="unicast"):
        net.add(Mailbox(), GROUP)


class _Repeater(SimNode):
    """Forwards everything it receives to its default group (destination None)."""

    def datagram_received(self, data: bytes, src: tuple[str, int], now_ns: int) -> Iterable[Out]:
        return [Datagram(b"fwd:" + data)]


def test_destination_none_goes_to_the_default_group() -> None:
    net = SimNetwork()
    net.add(_Repeater(), A, default_group=GROUP)
    box = net.add(Mailbox(), B, groups=[GROUP])
    net.send(C, b"x", A)
    net.run_for(1)
    assert box.received[0].data == b"fwd:x"
    assert box.received[0].src == A
    net.add(_Repeater(), D)  # no default group
    net.send(C, b"y", D)
    with pytest.raises(ValueError, match="default_group"):
        net.run_for(1)


def test_equal_arrival_times_are_delivered_in_send_order() -> None:
    net = SimNetwork()
    net.set_link(LinkModel(delay_ns=10 * US), dst=B)
    box = net.add(Mailbox(), B)
    net.send(A, _counter(0), B)  # arrives at 10 us
    net.run_until(5 * US)
    net.set_link(LinkModel(delay_ns=5 * US), dst=B)
    net.send(C, _counter(1), B)  # also arrives at 10 us, sent later
    net.send(A, _counter(2), B)
    net.run_for(MS)
    assert [r.time_ns for r in box.received] == [10 * US] * 3
    assert [_index(d) for d in box.payloads] == [0, 1, 2]


# -- link models ---------------------------------------------------------------------------------------


def test_independent_loss_converges_to_the_configured_rate() -> None:
    net = SimNetwork(seed=11, capture=False)
    net.set_link(LinkModel(loss=0.1))
    box = net.add(Mailbox(), B)
    _blast(net, 20_000, A, B)
    net.run_for(1)
    lost = 1 - len(box.received) / 20_000
    assert abs(lost - 0.1) < 0.01  # 5 standard deviations of a binomial(20000, 0.1)
    assert net.stats[B].dropped == 20_000 - len(box.received)


def _bursts(received: list[int], count: int) -> list[int]:
    got = set(received)
    bursts, run = [], 0
    for i in range(count):
        if i in got:
            if run:
                bursts.append(run)
            run = 0
        else:
            run += 1
    return bursts + ([run] if run else [])


def test_burst_loss_follows_the_gilbert_elliott_model() -> None:
    count = 50_000
    net = SimNetwork(seed=3, capture=False)
    net.set_link(LinkModel(burst_loss=(0.01, 0.9)), dst=B)
    net.set_link(LinkModel(loss=0.0909), dst=C)  # the same long-run rate, independent
    burst_box, flat_box = net.add(Mailbox(), B), net.add(Mailbox(), C)
    net.join(B, GROUP)
    net.join(C, GROUP)
    _blast(net, count, A, GROUP)
    net.run_for(1)
    burst_rcv = [_index(d) for d in burst_box.payloads]
    flat_rcv = [_index(d) for d in flat_box.payloads]
    # Long-run loss p_enter / (p_enter + 1 - p_stay) = 0.0909; mean burst 1 / (1 - p_stay) = 10.
    assert abs((1 - len(burst_rcv) / count) - 0.0909) < 0.02
    bursts = _bursts(burst_rcv, count)
    assert 8 < sum(bursts) / len(bursts) < 12
    flat = _bursts(flat_rcv, count)
    assert sum(flat) / len(flat) < 1.2  # independent loss rarely loses two in a row


def test_duplication() -> None:
    net = SimNetwork(seed=5)
    net.set_link(LinkModel(duplicate=0.2))
    box = net.add(Mailbox(), B)
    _blast(net, 5000, A, B)
    net.run_for(1)
    dups = [p for p in net.packets if p.fate is Fate.DUPLICATED]
    assert abs(len(dups) / 5000 - 0.2) < 0.03
    assert len(box.received) == 5000 + len(dups)
    assert net.stats[B].duplicated == len(dups)
    assert all(len(p.arrival_ns) == 2 for p in dups)
    assert sorted({_index(d) for d in box.payloads}) == list(range(5000))


def test_reordering_changes_the_arrival_order_but_loses_nothing() -> None:
    net = SimNetwork(seed=9)
    net.set_link(LinkModel(reorder=0.1, reorder_ns=500 * US, delay_ns=20 * US), dst=B)
    net.set_link(LinkModel(delay_ns=20 * US), dst=C)
    reordered, ordered = net.add(Mailbox(), B), net.add(Mailbox(), C)
    for addr in (B, C):
        net.join(addr, GROUP)
    _blast(net, 1000, A, GROUP, gap_ns=10 * US)
    net.run_for(10 * MS)
    got = [_index(d) for d in reordered.payloads]
    assert sorted(got) == list(range(1000))
    overtaken = sum(1 for x, y in itertools.pairwise(got) if y < x)
    assert overtaken > 50
    assert [_index(d) for d in ordered.payloads] == list(range(1000))


def test_fixed_delay_and_jitter() -> None:
    net = SimNetwork(seed=2)
    net.set_link(LinkModel(delay_ns=5 * MS), dst=B)
    net.set_link(LinkModel(delay_ns=5 * MS, jitter_ns=MS), dst=C)
    fixed, jittery = net.add(Mailbox(), B), net.add(Mailbox(), C)
    for i in range(200):
        net.send(A, _counter(i), B)
        net.send(A, _counter(i), C)
        net.run_for(10 * MS)
    assert {r.time_ns - 10 * MS * _index(r.data) for r in fixed.received} == {5 * MS}
    delays = [r.time_ns - 10 * MS * _index(r.data) for r in jittery.received]
    assert min(delays) >= 5 * MS
    assert max(delays) <= 6 * MS
    assert len(set(delays)) > 150


def test_the_most_specific_link_model_wins() -> None:
    net = SimNetwork()
    net.set_link(LinkModel(delay_ns=1))
    net.set_link(LinkModel(delay_ns=2), dst=B)
    net.set_link(LinkModel(delay_ns=3), src=C)
    net.set_link(LinkModel(delay_ns=4), src=A, dst=B)
    for addr in (B, D):
        net.add(Mailbox(), addr)
    for src, dst in ((A, B), (C, B), (C, D), (A, D)):
        net.send(src, b"", dst)
    assert [p.arrival_ns[0] for p in net.packets] == [4, 2, 3, 1]
    net.set_link(None, src=A, dst=B)  # inherit again
    net.set_link(None)  # the global link becomes perfect
    net.send(A, b"", B)
    net.send(A, b"", D)
    assert [p.arrival_ns[0] for p in net.packets[-2:]] == [2, 0]
    with pytest.raises(ValueError, match="probability"):
        LinkModel(loss=1.5)
    with pytest.raises(ValueError, match="burst_loss"):
        LinkModel(burst_loss=(0.1, 2.0))


# -- explicit drop patterns ------------------------------------------------------------------------


def test_drop_sequence_is_per_receiver() -> None:
    net = SimNetwork()
    b_box, c_box = net.add(Mailbox(), B, groups=[GROUP]), net.add(Mailbox(), C, groups=[GROUP])
    net.link(dst=B).drop_sequence([0, 2, 5])
    _blast(net, 8, A, GROUP)
    net.run_for(1)
    assert [_index(d) for d in b_box.payloads] == [1, 3, 4, 6, 7]
    assert [_index(d) for d in c_box.payloads] == list(range(8))
    assert net.link(dst=B).count == 8
    assert net.stats[B].dropped == 3
    assert net.stats[C].dropped == 0


def test_pair_links_count_only_their_own_path() -> None:
    net = SimNetwork()
    box = net.add(Mailbox(), B)
    net.link(B, src=A).drop_sequence([1])
    for i in range(3):
        net.send(A, _counter(i), B)
        net.send(C, _counter(10 + i), B)
    net.run_for(1)
    assert [_index(d) for d in box.payloads] == [0, 10, 11, 2, 12]


def _rm_data(sqn: int, *, rx: bool = False) -> bytes:
    flags = lbtrm.FLAG_UCAST_NAKS | (lbtrm.FLAG_RX if rx else 0)
    return lbtrm.encode(lbtrm.RmData(14390, 0xCAFE, sqn, 0, b"payload", flags=flags))


def _rm_sqn(data: bytes) -> int | None:
    record = lbtrm.decode(data)
    return record.sqn if isinstance(record, lbtrm.RmData) else None


def test_drop_by_predicate_on_a_decoded_lbtrm_sequence_number() -> None:
    net = SimNetwork()
    b_box, c_box = net.add(Mailbox(), B, groups=[GROUP]), net.add(Mailbox(), C, groups=[GROUP])
    net.link(dst=B).drop(lambda d: _rm_sqn(d) == 5, times=1)
    for sqn in range(10):
        net.send(A, _rm_data(sqn), GROUP)
    net.send(A, _rm_data(5, rx=True), GROUP)  # the retransmission gets through
    net.run_for(1)
    b_sqns = [_rm_sqn(d) for d in b_box.payloads]
    assert b_sqns == [0, 1, 2, 3, 4, 6, 7, 8, 9, 5]
    assert lbtrm.decode(b_box.payloads[-1]).flags & lbtrm.FLAG_RX  # type: ignore[union-attr]
    assert [_rm_sqn(d) for d in c_box.payloads] == [*range(10), 5]
    net.link(dst=B).clear_drops().drop(lambda d: True)
    net.send(A, _rm_data(11), GROUP)
    net.run_for(1)
    assert len(b_box.received) == 10


# -- the packet hook -------------------------------------------------------------------------------


def test_the_hook_sees_every_packet_with_its_fate() -> None:
    net = SimNetwork(seed=4)
    net.set_link(LinkModel(loss=0.2, duplicate=0.1))
    seen: list[Packet] = []
    net.on_packet(seen.append)
    for addr in (B, C):
        net.add(Mailbox(), addr, groups=[GROUP])
    _blast(net, 500, A, GROUP)
    net.send(A, b"lost", D)
    net.run_for(1)
    assert seen == net.packets
    assert len(seen) == 2 * 500 + 1
    fates = {f: sum(1 for p in seen if p.fate is f) for f in Fate}
    assert fates[Fate.DROPPED] > 100
    assert fates[Fate.DUPLICATED] > 40
    assert fates[Fate.UNREACHABLE] == 1
    received = sum(s.received for s in net.stats.values())
    assert received == fates[Fate.DELIVERED] + 2 * fates[Fate.DUPLICATED]


def test_the_hook_can_drop_rescue_and_mutate() -> None:
    net = SimNetwork()
    net.link(dst=C).drop(lambda d: True)  # C loses everything ...
    b_box, c_box = net.add(Mailbox(), B, groups=[GROUP]), net.add(Mailbox(), C, groups=[GROUP])

    @net.on_packet
    def meddle(pkt: Packet) -> Packet | None:
        if pkt.dst == B and pkt.data == b"drop me":
            return dataclasses.replace(pkt, fate=Fate.DROPPED)
        if pkt.dst == B:
            return dataclasses.replace(pkt, data=pkt.data.upper())
        if pkt.dst == C and pkt.data == b"rescue me":  # ... unless the hook says otherwise
            return dataclasses.replace(pkt, fate=Fate.DUPLICATED, arrival_ns=(pkt.time_ns + 7,))
        return None

    for data in (b"abc", b"drop me", b"rescue me"):
        net.send(A, data, GROUP)
    net.run_for(MS)
    assert b_box.payloads == [b"ABC", b"RESCUE ME"]
    assert [(r.time_ns, r.data) for r in c_box.received] == [(7, b"rescue me"), (7, b"rescue me")]
    assert [p.fate for p in net.packets if p.dst == B] == [Fate.DELIVERED, Fate.DROPPED, Fate.DELIVERED]
    assert net.stats[C].duplicated == 1

    net.remove_hook(meddle)
    net.on_packet(lambda pkt: dataclasses.replace(pkt, dst=D))
    with pytest.raises(ValueError, match="not dst"):
        net.send(A, b"x", B)


# -- captures --------------------------------------------------------------------------------------


@pytest.fixture
def tshark() -> Tshark:
    try:
        tshark_path()
    except TsharkMissingError as exc:
        if os.environ.get("OPENUM_SKIP_TSHARK") == "1":
            pytest.skip(f"OPENUM_SKIP_TSHARK=1: {exc}")
        pytest.fail(str(exc), pytrace=False)
    return Tshark(
        decode_as=("udp.port==12965,lbmr", "udp.port==15380,lbmr"),
        prefs={"udp.check_checksum": "TRUE", "ip.check_checksum": "TRUE"},
    )


@pytest.mark.tshark
def test_pcap_decodes_with_tshark(tshark: Tshark, tmp_path: Path) -> None:
    keepalive = encode_packet(LbmrPacket(ResolverKeepalive()))
    resolver_group, ctx, lbmrd = ("224.9.10.11", 12965), ("10.0.0.1", 14402), ("10.0.0.2", 15380)
    net = SimNetwork()
    net.set_link(LinkModel(delay_ns=250 * US), dst=lbmrd)
    net.link(dst=("10.0.0.3", 12965)).drop_sequence([0])
    net.add(Mailbox(), lbmrd, groups=[resolver_group])
    net.add(Mailbox(), ("10.0.0.3", 12965), groups=[resolver_group])
    net.run_until(1_500_000_123)
    net.send(ctx, keepalive, resolver_group)
    net.send(ctx, keepalive, lbmrd)
    sent = net.write_pcap(tmp_path / "sent.pcap")
    tshark.assert_clean(sent)
    rows = tshark.fields(
        sent,
        [
            "frame.time_epoch",
            "eth.dst",
            "ip.src",
            "ip.dst",
            "udp.srcport",
            "udp.dstport",
            "lbmr.hdr.type",
            "lbmr.hdr.tqrs",
            "lbmr.hdr.tirs",
        ],
    )
    assert [(r["eth.dst"], r["ip.dst"], r["udp.dstport"]) for r in rows] == [
        (["01:00:5e:09:0a:0b"], ["224.9.10.11"], ["12965"]),
        (["02:00:0a:00:00:02"], ["10.0.0.2"], ["15380"]),
    ]
    assert all(r["ip.src"] == ["10.0.0.1"] and r["udp.srcport"] == ["14402"] for r in rows)
    assert all(int(r["lbmr.hdr.type"][0], 0) == 0 for r in rows)  # a keepalive: no TQRs, no TIRs
    assert all(r["lbmr.hdr.tqrs"] == ["0"] and r["lbmr.hdr.tirs"] == ["0"] for r in rows)
    assert rows[0]["frame.time_epoch"][0].startswith("1700000001.500000123")
    assert tshark.protocols(sent) == ["eth:ethertype:ip:udp:lbmr"] * 2

    arrived = net.write_pcap(tmp_path / "arrived.pcap", view="arrived")
    tshark.assert_clean(arrived)
    rows = tshark.fields(arrived, ["frame.time_epoch", "ip.dst"])
    # 10.0.0.3 lost its copy; lbmrd got the multicast one and the unicast one 250 us later.
    assert [r["ip.dst"] for r in rows] == [["224.9.10.11"], ["10.0.0.2"]]
    assert rows[1]["frame.time_epoch"][0].startswith("1700000001.500250123")


# -- engines ---------------------------------------------------------------------------------------


Result = tuple[list[Out], list[bytes], list[str]]


class _TupleEngine:
    """Shaped like a reliable-transport engine: results are ``(outgoing, delivered, events)``."""

    def __init__(self) -> None:
        self.deadline: int | None = None

    def datagram_received(self, data: bytes, src: Any, now_ns: int) -> Result:
        self.deadline = now_ns + MS
        return [Datagram(b"ack:" + data, src)], [data], [f"got {data!r}"]

    def poll(self, now_ns: int) -> Result:
        self.deadline = None
        return [Datagram(b"tick")], [], ["polled"]

    def next_deadline(self) -> int | None:
        return self.deadline


def test_engines_plug_in_with_an_adapter_or_the_default_split() -> None:
    net = SimNetwork()
    box = net.add(Mailbox(), B, groups=[GROUP])
    delivered: list[bytes] = []

    def adapter(result: Result) -> list[Out]:
        outgoing, messages, _events = result
        delivered.extend(messages)
        return outgoing

    adapted = net.add(_TupleEngine(), A, default_group=GROUP, adapter=adapter)
    assert isinstance(adapted, EngineNode)
    split = net.add(EngineNode(_TupleEngine()), C, default_group=GROUP)
    net.send(D, b"m1", A)
    net.send(D, b"m2", C)
    net.run_for(5 * MS)
    assert delivered == [b"m1"]
    assert adapted.events == []
    assert split.events == [(0, b"m2"), (0, "got b'm2'"), (MS, "polled")]  # bytes are not sent
    assert box.payloads == [b"tick", b"tick"]  # both polled at 1 ms, to the default group
    assert [p.data for p in net.packets if p.dst == D] == [b"ack:m1", b"ack:m2"]

    net.emit(C, ([Datagram(b"from outside")], [], ["emitted"]))
    net.run_for(1)
    assert box.payloads[-1] == b"from outside"
    assert split.events[-1] == (5 * MS, "emitted")


def test_resolver_engines_discover_each_other_over_a_lossy_multicast_group() -> None:
    resolver_group = ("224.9.10.11", 12965)
    adv = PhaseParams.from_ms(10, 500, 5000, 1000, 60_000)
    qry = PhaseParams.from_ms(20, 200, 5000, 1000, 60_000)
    net = SimNetwork(seed=21)
    net.set_link(LinkModel(loss=0.5, delay_ns=200 * US, jitter_ns=100 * US))
    addr_a, addr_b = ("10.0.0.1", 14402), ("10.0.0.2", 14402)
    ctx_a = net.add(
        EngineNode(ResolverEngine(ResolverSettings(context_instance=b"A" * 8), net.rng("a"))),
        addr_a,
        default_group=resolver_group,
        groups=[resolver_group],
    )
    ctx_b = net.add(
        EngineNode(ResolverEngine(ResolverSettings(context_instance=b"B" * 8), net.rng("b"))),
        addr_b,
        default_group=resolver_group,
        groups=[resolver_group],
    )
    transport = TcpTransport("10.0.0.1", 14371, 0x1234)
    net.emit(addr_a, ctx_a.engine.add_source(1, SourceSpec("Orders", transport, 1, adv), net.now_ns()))
    ctx_b.engine.add_receiver(1, ReceiverSpec("Orders", qry), net.now_ns())
    net.run_for(2000 * MS)
    found = [(t, e) for t, e in ctx_b.events if isinstance(e, SourceDiscovered)]
    assert len(found) == 1
    assert found[0][1].sender == addr_a
    assert found[0][1].info.transport == transport
    local = ctx_a.events[0][1]  # add_source's result went through net.emit
    assert isinstance(local, SourceDiscovered)
    assert local.local
    assert any(p.fate is Fate.DROPPED for p in net.packets)


# -- determinism and a long run ----------------------------------------------------------------------


class Pinger(SimNode):
    """Sends numbered pings one at a time, retrying each until its pong arrives."""

    def __init__(self, peer: tuple[str, int], count: int, timeout_ns: int) -> None:
        self.peer, self.count, self.timeout_ns = peer, count, timeout_ns
        self.next = 0
        self.acked: list[int] = []
        self.retries = 0
        self.deadline: int | None = 0
        self.started = False

    def _ping(self, now_ns: int) -> list[Out]:
        self.deadline = now_ns + self.timeout_ns
        return [Datagram(_counter(self.next), self.peer)]

    def poll(self, now_ns: int) -> Iterable[Out]:
        if self.started:
            self.retries += 1  # the pong did not come back in time
        self.started = True
        return self._ping(now_ns)

    def datagram_received(self, data: bytes, src: tuple[str, int], now_ns: int) -> Iterable[Out]:
        if _index(data) != self.next:
            return ()  # a late or duplicate pong
        self.acked.append(self.next)
        self.next += 1
        if self.next == self.count:
            self.deadline = None
            return ()
        return self._ping(now_ns)

    def next_deadline(self) -> int | None:
        return self.deadline


class Ponger(SimNode):
    def __init__(self) -> None:
        self.pings = 0

    def datagram_received(self, data: bytes, src: tuple[str, int], now_ns: int) -> Iterable[Out]:
        self.pings += 1
        return [Datagram(data, src)]


def _ping_pong(seed: int, count: int) -> tuple[SimNetwork, Pinger, Ponger]:
    net = SimNetwork(seed=seed)
    net.set_link(LinkModel(loss=0.2, duplicate=0.05, reorder=0.05, delay_ns=50 * US, jitter_ns=20 * US))
    pinger = net.add(Pinger(B, count, timeout_ns=MS), A)
    ponger = net.add(Ponger(), B)
    assert net.run_until_idle(3600 * 10**9)
    return net, pinger, ponger


def test_the_same_seed_gives_the_same_run() -> None:
    first, second, other = (_ping_pong(seed, 300)[0] for seed in (42, 42, 43))
    assert first.packets == second.packets
    assert first.now_ns() == second.now_ns()
    assert first.stats == second.stats
    assert first.packets != other.packets


def test_ten_thousand_pings_over_a_lossy_link_with_retries() -> None:
    # Not timed here (PRACTICES: speed is measured in bench/); it takes a fraction of a second.
    net, pinger, ponger = _ping_pong(7, 10_000)
    assert pinger.acked == list(range(10_000))
    assert pinger.retries > 3000  # about 1 - 0.8 * 0.8 of the attempts need a retry
    assert ponger.pings > 10_000
    assert net.stats[A].sent == 10_000 + pinger.retries
    assert net.stats[B].sent == ponger.pings
    assert net.in_flight == 0


def test_run_until_idle_reports_a_network_that_never_idles() -> None:
    net = SimNetwork()
    net.add(Pinger(B, 10, MS), A)  # nobody answers: it retries forever
    assert not net.run_until_idle(50 * MS)
    assert net.now_ns() == 50 * MS


# -- documentation ---------------------------------------------------------------------------------


def test_package_docstring_examples() -> None:
    result = doctest.testmod(openum.testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5
    assert result.failed == 0


def test_docs_testing_md_example_runs() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert blocks, "docs/testing.md has no python example"
    namespace: dict[str, Any] = {"__name__": "docs_testing_md"}
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), namespace)
