"""The topic resolution engine under a fake clock: phase schedules (seed 8.1.4-8.1.6), rate limits
(seed 2.12.2), thresholds (seed 8.2.3), wildcard rules (seed 8.1.3), unicast daemons (seed 8.1.9),
final advertisements and garbage handling."""

from __future__ import annotations

import itertools
import random

import pytest

from openum.protocol.resolution import (
    Phase,
    PhaseParams,
    PhaseSchedule,
    SourceDiscovered,
    SourceLeft,
    UnicastDaemons,
    source_key,
)
from openum.wire.lbmr import LbmrPacket, ResolutionRequestFlags, TopicQuery, TopicResolution, encode_packet
from tests.unit.protocol._trnet import ADV, MS, Net, engine, receiver, source, wildcard

ADV_INITIAL = [0, 10, 30, 70, 150, 310, 630, 1130, 1630, 2130, 2630, 3130, 3630, 4130, 4630]
QRY_INITIAL = [0, 20, 60, 140, 300, *list(range(500, 5000, 200))]


def test_advertisement_schedule_initial_sustaining_quiescent() -> None:
    a = engine(1)
    a.add_source(1, source("A"), 0)
    net = Net([a])
    net.run_until(120_000)
    times = net.times("tir:A")
    assert times[:15] == ADV_INITIAL
    sustain = times[15:]
    assert len(sustain) == 60
    assert sustain[0] == 5630 and all(b - a_ == 1000 for a_, b in itertools.pairwise(sustain))
    assert a.source_phase(1) is Phase.QUIESCENT
    assert a.next_deadline() is None


def test_query_schedule_initial_then_sustaining() -> None:
    r = engine(2)
    r.add_receiver(1, receiver("Q"), 0)
    net = Net([r])
    net.run_until(100_000)
    times = net.times("tqr:Q")
    assert times[: len(QRY_INITIAL)] == QRY_INITIAL
    assert len(times) == len(QRY_INITIAL) + 60
    assert times[len(QRY_INITIAL)] == 5900
    assert r.receiver_phase(1) is Phase.QUIESCENT


def test_phases_can_be_disabled_or_made_endless() -> None:
    no_initial = PhaseSchedule(PhaseParams.from_ms(0, 0, 5000, 1000, 3_000))
    no_initial.start(0)
    assert no_initial.phase is Phase.SUSTAINING and no_initial.next_ns == 0
    nothing = PhaseSchedule(PhaseParams.from_ms(0, 0, 5000, 0, 60_000))
    nothing.start(0)
    assert nothing.phase is Phase.QUIESCENT and nothing.next_ns is None
    forever = PhaseSchedule(PhaseParams.from_ms(0, 0, 0, 1000, 0))
    forever.start(0)
    for _ in range(5000):
        assert forever.next_ns is not None
        forever.mark_sent(forever.next_ns)
    assert forever.phase is Phase.SUSTAINING  # sustain duration 0: never quiescent


def test_late_sends_stretch_the_phase_instead_of_bursting() -> None:
    s = PhaseSchedule(ADV)
    s.start(0)
    s.mark_sent(0)
    assert s.next_ns == 10 * MS
    s.mark_sent(700 * MS)  # held back for 690 ms
    assert s.next_ns == 720 * MS  # re-anchored on the actual send: next interval 20 ms later


def test_a_query_restarts_a_quiescent_sources_sustaining_phase() -> None:
    a = engine(1)
    a.add_source(1, source("A"), 0)
    net = Net([a])
    net.run_until(100_000)
    assert a.source_phase(1) is Phase.QUIESCENT
    before = len(net.times("tir:A"))
    b = engine(2)  # a context that starts now has not seen any advertisement
    net.engines.append(b)
    b.add_receiver(1, receiver("A", sources_threshold=1), 100_000 * MS)
    net.run_until(200_000)
    after = net.times("tir:A")[before:]
    assert after[0] == 100_000  # the query is answered at once
    assert len(after) == 1 + 59  # then a full sustaining phase of 1 s advertisements
    assert after[1] == 101_000
    assert net.times("tqr:A") == [100_000]  # threshold 1: the first TIR stops the queries


def test_without_immediate_response_the_next_scheduled_advertisement_answers() -> None:
    a = engine(1)
    a.add_source(1, source("A", immediate_response=False), 0)
    net = Net([a])
    net.run_until(100_000)
    assert a.source_phase(1) is Phase.QUIESCENT
    before = len(net.times("tir:A"))
    b = engine(2)
    net.engines.append(b)
    b.add_receiver(1, receiver("A", sources_threshold=1), 100_000 * MS)
    net.run_until(200_000)
    after = net.times("tir:A")[before:]
    assert after[0] == 101_000  # no answer at once: the sustaining phase's first advertisement is it
    assert len(after) == 60 and after[1] == 102_000
    assert a.source_phase(1) is Phase.QUIESCENT


def test_a_query_during_the_initial_phase_counts_as_the_nearest_send() -> None:
    a = engine(1)
    a.add_source(1, source("A"), 0)
    net = Net([a])
    net.run_until(60)  # sends at 0, 10, 30 (next scheduled 70)
    b = engine(2)
    net.engines.append(b)
    b.add_receiver(1, receiver("A", sources_threshold=1), 65 * MS)
    net.run_until(400)
    times = net.times("tir:A")
    assert times[:4] == [0, 10, 30, 65]
    assert times[4] == 150  # the ladder carries on (65 stood for 70); it did not restart


def test_threshold_stops_and_source_loss_resumes_queries() -> None:
    a, b = engine(1), engine(2)
    net = Net([a, b])
    b.add_receiver(7, receiver("T", sources_threshold=2), 0)
    a.add_source(1, source("T", port=14371), 0)
    net.run_until(1000)
    assert b.receiver_phase(7) is not Phase.QUIESCENT  # one source known, threshold 2
    a.add_source(2, source("T", port=14372), 1000 * MS)
    net.run_until(1100)
    assert b.receiver_phase(7) is Phase.QUIESCENT
    count = len(net.times("tqr:T"))
    net.run_until(10_000)
    assert len(net.times("tqr:T")) == count  # no queries while both sources are known
    lost = next(info for info in b.cached_sources("T") if info.transport.port == 14372)  # type: ignore[attr-defined]
    b.source_lost("T", source_key(lost), 10_000 * MS)
    net.run_until(10_010)
    assert net.times("tqr:T")[-1] == 10_000  # below the threshold again: queries resume at once


def test_receiver_created_after_caching_joins_from_the_cache_without_the_network() -> None:
    a, b = engine(1), engine(2)
    a.add_source(1, source("C"), 0)
    net = Net([a, b])
    b.add_receiver(1, receiver("C"), 0)
    net.run_until(50)
    net.deliver = False  # from here on nothing crosses the network
    cached = b.add_receiver(2, receiver("C"), 60 * MS)
    assert [i.topic for i in cached] == ["C"]
    assert cached[0].transport.port == 14371  # type: ignore[attr-defined]


def test_local_source_is_discovered_by_local_receivers() -> None:
    a = engine(1)
    events = a.add_source(1, source("L"), 0)
    assert isinstance(events[0], SourceDiscovered) and events[0].local
    assert [i.topic for i in a.add_receiver(1, receiver("L"), 0)] == ["L"]


def test_wildcard_queries_initial_only_and_matching_sources_answer() -> None:
    a, b = engine(1), engine(2)
    for i, topic in enumerate(("foo.1", "foo.2", "bar.1")):
        a.add_source(i, source(topic, index=i), 0)
    net = Net([a, b])
    net.run_until(100_000)  # all sources quiescent
    b.add_wildcard(1, wildcard(r"^foo\..*"), 100_000 * MS)
    net.run_until(250_000)
    wtqr = net.times(r"wtqr:^foo\..*")
    assert wtqr[:3] == [100_000, 100_050, 100_150]
    assert wtqr[-1] < 160_000  # initial phase only (60 s), no sustaining queries
    assert b.wildcard_phase(1) is Phase.QUIESCENT
    discovered = {ev.topic for idx, ev in net.events if idx == 1 and isinstance(ev, SourceDiscovered)}
    assert {"foo.1", "foo.2", "bar.1"} <= discovered  # TIRs seen during their initial phase
    answered_after = {s.kind for s in net.log if s.time_ms >= 100_000 and s.kind.startswith("tir:")}
    assert answered_after == {"tir:foo.1", "tir:foo.2"}  # only matching sources answer the pattern
    cached = b.add_wildcard(2, wildcard("^bar"), 250_000 * MS)
    assert [i.topic for i in cached] == ["bar.1"]


def test_rate_limit_allows_one_record_per_interval_at_least() -> None:
    a = engine(1, sustain_advertisements=(0, 1))  # 1 bit per second
    slow = PhaseParams.from_ms(0, 0, 0, 1000, 0)  # sustaining only, forever
    for i in range(1000):
        a.add_source(i, source(f"topic{i:04d}", index=i, phases=slow), 0)
    net = Net([a])
    net.run_until(10_000)
    tirs = [s.time_ms for s in net.log if s.kind.startswith("tir:")]
    per_second = [sum(1 for t in tirs if k * 1000 <= t < (k + 1) * 1000) for k in range(10)]
    assert all(9 <= n <= 11 for n in per_second), per_second  # ~10 per second: one per 100 ms interval
    assert a.statistics().records_rate_limited > 0


def test_rate_limit_counts_records_per_second() -> None:
    a = engine(1, initial_advertisements=(100, 0))
    for i in range(500):
        a.add_source(i, source(f"t{i}", index=i), 0)
    net = Net([a])
    net.run_until(999)
    first_second = [s for s in net.log if s.kind.startswith("tir:")]
    assert 90 <= len(first_second) <= 110  # 100 per second, give or take one interval's overshoot


def test_topic_resolution_request_wakes_quiescent_receivers_and_other_contexts() -> None:
    a, b = engine(1), engine(2)
    a.add_source(1, source("R"), 0)
    b.add_receiver(1, receiver("R"), 0)
    b.add_wildcard(2, wildcard("^R"), 0)
    net = Net([a, b])
    net.run_until(200_000)
    assert b.receiver_phase(1) is Phase.QUIESCENT and a.source_phase(1) is Phase.QUIESCENT
    n_tqr, n_tir = len(net.times("tqr:R")), len(net.times("tir:R"))
    flags = (
        ResolutionRequestFlags.QUERY
        | ResolutionRequestFlags.WILDCARD_QUERY
        | ResolutionRequestFlags.ADVERTISEMENT
    )
    b.topic_resolution_request(flags, 200_000 * MS)
    net.run_until(200_100)
    assert len(net.times("tqr:R")) > n_tqr
    assert len(net.times("tir:R")) > n_tir  # the request reached context a, whose source re-advertised
    assert any(s.kind == "request" for s in net.log)
    assert a.statistics().requests_rcved == 1


def test_final_advertisements_remove_the_source_elsewhere() -> None:
    a, b = engine(1), engine(2)
    a.add_source(1, source("F", final_advertisements=2), 0)
    b.add_receiver(1, receiver("F"), 0)
    net = Net([a, b])
    net.run_until(100)
    assert b.cached_sources("F")
    a.remove_source(1, 100 * MS)
    net.run_until(1000)
    assert net.times("final:F") == [100, 200]
    left = [ev for idx, ev in net.events if idx == 1 and isinstance(ev, SourceLeft)]
    assert len(left) == 1 and left[0].topic == "F"
    assert b.cached_sources("F") == []


def test_final_advertisements_at_close_are_brought_forward_within_the_bound() -> None:
    a = engine(1)
    a.add_source(1, source("F", final_advertisements=3), 0)
    a.add_source(2, source("G", index=2, final_advertisements=50), 0)
    net = Net([a])
    net.run_until(10)
    a.remove_source(1, 10 * MS)
    a.remove_source(2, 10 * MS)
    assert a.final_advertisements_pending() == 53
    net.run_until(10)  # the first of each goes at once, then one every 100 ms
    assert a.final_advertisements_pending() == 51
    # The context closes at 50 ms: the rest must be out by 50 + 1000 ms.
    a.hasten_final_advertisements(50 * MS, 1000 * MS)
    net.run_until(5000)
    f, g = net.times("final:F"), net.times("final:G")
    assert f == [10, 110, 210]  # few enough: still 100 ms apart
    assert len(g) == 50 and g[0] == 10 and g[-1] <= 1050
    gaps = [later - earlier for earlier, later in itertools.pairwise(g[1:])]
    assert min(gaps) >= 20  # closer, but still spread: 49 left over 1000 ms
    assert a.final_advertisements_pending() == 0
    assert a.statistics().final_advertisements_sent == 53


def test_final_advertisements_left_at_close_go_at_once() -> None:
    a, b = engine(1), engine(2)
    a.add_source(1, source("F", final_advertisements=4), 0)
    b.add_receiver(1, receiver("F"), 0)
    net = Net([a, b])
    net.run_until(100)
    a.remove_source(1, 100 * MS)
    net.run_until(100)
    out = a.flush_final_advertisements(100 * MS)
    assert len(out) == 3 and all(o.destination is None for o in out)
    for o in out:
        b.datagram_received(o.data, ("127.0.0.1", 1), 100 * MS)
    assert a.final_advertisements_pending() == 0 and a.next_deadline() is None
    assert a.statistics().final_advertisements_sent == 4
    assert b.statistics().final_advertisements_rcved == 4
    assert a.flush_final_advertisements(200 * MS) == []


def test_no_final_advertisements_are_queued_without_udp_resolution() -> None:
    a = engine(1, disable_udp=True)
    a.add_source(1, source("F", final_advertisements=3), 0)
    a.remove_source(1, 10 * MS)
    assert a.final_advertisements_pending() == 0
    assert a.flush_final_advertisements(10 * MS) == []


def test_own_datagrams_are_ignored_and_garbage_is_counted() -> None:
    a = engine(1)
    a.add_source(1, source("X"), 0)
    own = a.poll(0)
    assert a.datagram_received(own[0].data, None, 0) == []
    garbage = [
        b"",
        b"\x00",
        b"\xf0\x00\x00\x00",
        b"\x05\x00\x00\x00",
        b"\x00\x01\x00\x00no-nul",
        bytes(range(256)),
    ]
    for data in garbage:
        assert a.datagram_received(data, ("127.0.0.1", 1), 0) == []
    s = a.statistics()
    assert s.own_dgrams_ignored == 1
    assert s.tr_dgrams_dropped_ver == 1  # 0xf0...
    assert s.tr_dgrams_dropped_type == 1  # type 5
    assert s.tr_dgrams_dropped_malformed == 4
    assert s.tr_dgrams_rcved == 0


def test_no_source_notification_after_threshold_queries() -> None:
    b = engine(2)
    b.add_receiver(3, receiver("nobody", no_source_threshold=5), 0)
    net = Net([b])
    net.run_until(200)  # queries at 0, 20, 60, 140
    assert b.no_source_notifications() == []
    net.run_until(300)
    notes = b.no_source_notifications()
    assert [(n.receiver_id, n.queries) for n in notes] == [(3, 5)]
    assert b.no_source_notifications() == []  # once


def test_statistics_count_records_and_datagrams() -> None:
    a, b = engine(1), engine(2)
    a.add_source(1, source("S"), 0)
    b.add_receiver(1, receiver("S"), 0)
    net = Net([a, b])
    net.run_until(1000)
    sa, sb = a.statistics(), b.statistics()
    assert sa.tirs_sent == len(net.times("tir:S"))
    assert sb.tqrs_sent == len(net.times("tqr:S"))
    assert sb.tirs_rcved == sa.tirs_sent and sa.tqrs_rcved == sb.tqrs_sent
    assert sa.tr_src_topics == 1 and sb.tr_rcv_topics == 1 and sb.tr_rcv_unresolved_topics == 0
    assert sa.tr_dgrams_sent > 0 and sa.tr_bytes_sent > sa.tr_dgrams_sent


def test_unicast_daemon_round_robin_switches_every_250_to_750_ms() -> None:
    daemons = UnicastDaemons([("127.0.0.1", 15380), ("127.0.0.1", 15381)], random.Random(7))
    switches: list[int] = []
    current = daemons.current(0)
    for t in range(0, 20_000, 5):
        now = t * MS
        daemons.heard_from(("127.0.0.1", 15380), now)
        daemons.heard_from(("127.0.0.1", 15381), now)
        chosen = daemons.current(now)
        if chosen != current:
            switches.append(t)
            current = chosen
    gaps = [b - a for a, b in itertools.pairwise(switches)]
    assert len(gaps) > 20
    assert all(250 <= g <= 755 for g in gaps), gaps
    assert len(set(gaps)) > 5  # randomised


def test_unicast_skips_a_silent_daemon_and_keepalives_reach_every_daemon() -> None:
    d1, d2 = ("127.0.0.1", 15380), ("127.0.0.1", 15381)
    a = engine(1, unicast_daemons=(d1, d2))
    a.add_receiver(1, receiver("U"), 0)
    dests: list[tuple[str, int] | None] = []
    for t in range(0, 10_000, 10):
        now = t * MS
        a.datagram_received(encode_packet(LbmrPacket(TopicResolution((TopicQuery("other"),)))), d1, now)
        for out in a.poll(now):
            dests.append(out.destination)
    assert None not in dests  # never multicast when daemons are configured
    later = dests[len(dests) // 2 :]
    assert d2 in dests  # keepalives go to every daemon
    queries_to_d2 = a.daemons.snapshot()[1][1]  # type: ignore[union-attr]
    assert a.statistics().keepalives_sent > 0
    assert later.count(d1) > later.count(d2) > 0
    assert queries_to_d2 > 0


def test_disable_udp_resolution_sends_and_processes_nothing() -> None:
    a = engine(1, disable_udp=True)
    a.add_source(1, source("D"), 0)
    assert a.poll(0) == [] and a.next_deadline() is None
    data = encode_packet(LbmrPacket(TopicResolution((TopicQuery("D"),))))
    assert a.datagram_received(data, ("127.0.0.1", 1), 0) == []


@pytest.mark.parametrize("pattern", ["(unclosed", "a{2,1}"])
def test_bad_wildcard_patterns_from_the_network_are_ignored(pattern: str) -> None:
    from openum.wire.lbmr import WildcardQuery, WildcardResolution

    a = engine(1)
    a.add_source(1, source("W"), 0)
    data = encode_packet(LbmrPacket(WildcardResolution((WildcardQuery(pattern),))))
    assert a.datagram_received(data, ("127.0.0.1", 1), 0) == []
    assert a.statistics().wildcard_tqrs_rcved == 1
    assert a.statistics().wildcard_tqrs_dropped_pattern == 1  # not answered, and counted


def test_no_initial_advertisement_starts_one_interval_later() -> None:
    a = engine(1)
    a.add_source(1, source("late", initial_advertisement=False), 0)
    net = Net([a])
    net.run_until(700)
    assert net.times("tir:late") == [10, 30, 70, 150, 310, 630]
