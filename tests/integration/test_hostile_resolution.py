"""Topic resolution fed by strangers over real UDP on 127.0.0.1 (issue 23, items 2, 4 and 9): a hostile
wildcard TQR does not freeze a context that owns a source, forged TIRs leave its resolver cache within
``resolver_cache_maximum_entries`` and expire after ``resolver_cache_entry_timeout``, and each drop is a
counter of ``Context.statistics()``.  The datagrams are forged with a plain UDP socket, as an attacker
would send them."""

from __future__ import annotations

import queue
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import openum
from openum.protocol.resolution import MAX_PROGRAM_SIZE, WILDCARD_TQR_WORK_LIMIT
from openum.wire.lbmr import (
    TMR_LEAVE,
    LbmrPacket,
    TcpTransport,
    TopicInfo,
    TopicManagement,
    TopicManagementRecord,
    WildcardQuery,
    WildcardResolution,
    encode_packet,
    pack_records,
)
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT
from tests.integration.test_lbmrd_process import free_udp_port

GROUP = "224.9.10.11"
#: 87 bytes on the wire; Python's re backtracks through it for longer than any test waits.
DOT_STARS = "(.*)" * 20 + "\x01"


@contextmanager
def _attacker() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
    try:
        yield sock
    finally:
        sock.close()


def _wildcard_tqr(pattern: str) -> bytes:
    return encode_packet(LbmrPacket(WildcardResolution((WildcardQuery(pattern),))))


def test_a_context_with_a_source_stays_responsive_under_an_adversarial_wildcard_tqr() -> None:
    port = free_udp_port()
    opts = [f"context resolver_multicast_port {port}"]
    topic = "hostile/" + "a" * 60
    with openum.Context(options=opts) as pub, openum.Context(options=opts) as sub, _attacker() as evil:
        src = pub.create_source(topic)
        assert wait_until(lambda: pub.statistics().tr_src_topics == 1, WAIT)  # in the engine
        assert len(_wildcard_tqr(DOT_STARS)) < 100  # one small datagram
        evil.sendto(_wildcard_tqr(DOT_STARS), (GROUP, port))
        evil.sendto(_wildcard_tqr(r"(a)\1"), (GROUP, port))  # a backreference: refused
        # the context thread answers at once (Context.statistics() runs on it) and has seen both
        assert wait_until(lambda: pub.statistics().wildcard_tqrs_rcved >= 2, WAIT)
        stats = pub.statistics()
        assert 0 < stats.wildcard_match_steps <= WILDCARD_TQR_WORK_LIMIT + 2 * MAX_PROGRAM_SIZE
        assert stats.wildcard_tqrs_dropped_pattern == 1
        # ... and it still resolves and delivers: a new receiver elsewhere finds the source and gets data
        got: queue.Queue[bytes] = queue.Queue()

        def on_message(msg: openum.Message) -> None:
            if msg.type is openum.MsgType.DATA:
                got.put(bytes(msg.data))

        sub.create_receiver(topic, on_message)
        assert wait_until(lambda: sub.statistics().tr_rcv_unresolved_topics == 0, WAIT)

        def delivered() -> bool:
            src.send(b"still here", flags=openum.SendFlags.FLUSH)
            try:
                return got.get(timeout=0.2) == b"still here"
            except queue.Empty:
                return False

        assert wait_until(delivered, WAIT)


def test_a_pattern_too_costly_for_the_contexts_topics_is_refused_and_counted() -> None:
    port = free_udp_port()
    with openum.Context(options=[f"context resolver_multicast_port {port}"]) as pub, _attacker() as evil:
        for i in range(60):
            pub.create_source(f"{i:02d}/" + "a" * 200)
        assert wait_until(lambda: pub.statistics().tr_src_topics == 60, WAIT)  # all in the engine
        evil.sendto(_wildcard_tqr(DOT_STARS), (GROUP, port))
        assert wait_until(lambda: pub.statistics().wildcard_tqrs_dropped_work == 1, WAIT)
        assert pub.statistics().wildcard_match_steps <= WILDCARD_TQR_WORK_LIMIT + 2 * MAX_PROGRAM_SIZE


def _forged_tirs(n: int) -> list[bytes]:
    infos = [TopicInfo(f"forged/{i}", i, TcpTransport("127.9.0.1", 1000 + i, i)) for i in range(n)]
    return pack_records((), infos, 8192)


def test_forged_tirs_leave_the_cache_within_its_limit_and_expire() -> None:
    port = free_udp_port()
    opts = [
        f"context resolver_multicast_port {port}",
        "context resolver_cache_maximum_entries 10",
        "context resolver_cache_entry_timeout 300",
    ]
    deleted: queue.Queue[str] = queue.Queue()
    notify = (lambda topic, source, clientd: None, lambda topic, source, clientd: deleted.put(topic), None)
    with openum.Context(options=opts, attrs={"resolver_source_notification_function": notify}) as ctx:
        with _attacker() as evil:
            for data in _forged_tirs(30):
                evil.sendto(data, (GROUP, port))
        assert wait_until(lambda: ctx.statistics().tirs_rcved == 30, WAIT)
        stats = ctx.statistics()
        assert stats.cache_entries_evicted == 20
        assert stats.cache_entries <= 10
        # nothing advertises them again: they expire (the fake-clock tests pin the timing down)
        assert wait_until(lambda: ctx.statistics().cache_entries_expired == 10, WAIT)
        assert ctx.statistics().cache_entries == 0
        forgotten = {deleted.get(timeout=WAIT) for _ in range(30)}  # create and delete stay balanced
        assert forgotten == {f"forged/{i}" for i in range(30)}


def test_topic_management_records_nobody_can_be_held_to_are_counted() -> None:
    port = free_udp_port()
    with openum.Context(options=[f"context resolver_multicast_port {port}"]) as ctx, _attacker() as evil:
        record = TopicManagementRecord("anything", TMR_LEAVE, 0x80)  # no source id in the datagram
        evil.sendto(encode_packet(LbmrPacket(TopicManagement((record,)))), (GROUP, port))
        assert wait_until(lambda: ctx.statistics().tmr_records_ignored == 1, WAIT)
        assert ctx.statistics().final_advertisements_rcved == 0
