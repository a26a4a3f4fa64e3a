"""Publish/subscribe over LBT-RM and LBT-RU with real sockets on 127.0.0.1 (issue 6).

Each test has its own resolver port, LBT-RM source/destination ports and LBT-RU ports
(``tests.integration.pubsub.Ports``).  Loss comes from the test-only receive hook
``OPENUM_TEST_DROP=p[:seed]`` (no root needed); the real-loss tests with iptables in a network namespace
are in ``tests/faults``.
"""

from __future__ import annotations

import logging
import random
import socket
import struct
import sys
import threading

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString, WouldBlock
from openum.config import set_unimplemented_policy
from openum.protocol.reliable import RmReceiverStatistics, RuReceiverStatistics
from openum.transport._reliable import ReliableSourceStatistics, loss_hook_from_env
from openum.transport.lbtrm import GROUP_SOCKETS
from openum.transport.lbtru import CLIENT_SOCKETS
from openum.wire.lbtrm import RmData
from openum.wire.lbtrm import encode as rm_encode
from tests.helpers import wait_until
from tests.integration.pubsub import (
    WAIT,
    Contexts,
    Ports,
    Processes,
    Recorder,
    SourceEvents,
    last_json,
    stays_false,
)

DATA, BOS, EOS = MsgType.DATA, MsgType.BOS, MsgType.EOS
TRANSPORTS = ("lbtrm", "lbtru")


def joined(ctx: openum.Context, transport: str, sessions: int = 1) -> bool:
    """The receiving context has joined ``sessions`` sessions of ``transport`` (sockets open)."""
    stats = ctx.statistics()
    count = stats.lbtrm_rcv_sessions if transport == "lbtrm" else stats.lbtru_rcv_sessions
    return count >= sessions


def ready(ctx: openum.Context, transport: str, events: SourceEvents, receivers: int = 1) -> bool:
    """Receivers can get what is sent now: LBT-RU clients connected; LBT-RM sessions joined."""
    if transport == "lbtru":
        return events.wait(SourceEvent.CONNECT, receivers)
    return wait_until(lambda: joined(ctx, transport), WAIT)


# -- the CLI, between processes, with loss -------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cli_recovers_every_message_in_order_under_5_percent_loss(
    transport: str, ports: Ports, procs: Processes
) -> None:
    topic = f"reliable/cli/{transport}"
    n = 30_000
    recv = procs.openum(
        "recv", topic, "--count", str(n), "--verify", "--json", "--timeout", "30", *ports.argv(),
        env={"OPENUM_TEST_DROP": "0.05:7"},
    )  # fmt: skip
    wait = ["--wait-receivers", "1"] if transport == "lbtru" else ["--delay", "3"]
    send = procs.openum(
        "send", topic, "--count", str(n), "--transport", transport, "--json", *wait, *ports.argv()
    )
    send_out, send_err = send.communicate(timeout=120)
    assert send.returncode == 0, send_err
    recv_out, recv_err = recv.communicate(timeout=120)
    assert recv.returncode == 0, (recv_out, recv_err)
    sent, got = last_json(send_out), last_json(recv_out)
    assert sent["sent"] == n and sent["transport"] == transport
    source = SourceString.parse(sent["source"])
    assert source.transport.value == transport
    assert got["received"] == n
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0
    assert got["unrecoverable_loss"] == got["unrecoverable_loss_burst"] == 0
    recovery = got["recovery"]
    assert recovery["lost"] > 0 and recovery["naks_sent"] > 0 and recovery["rxs_rcved"] > 0, recovery
    assert recovery["unrecovered_txw"] == recovery["unrecovered_tmo"] == 0
    # One place shows every drop of input: the context's counters and the receiving session's.
    dropped = got["dropped"]
    assert dropped["dgrams_dropped_test_hook"] > 0  # the loss this test makes
    assert dropped["tr_dgrams_dropped_malformed"] == dropped["dgrams_dropped_window"] == 0, dropped
    assert sent["recovery"]["naks_rcved"] > 0 and sent["recovery"]["rxs_sent"] > 0, sent["recovery"]


def test_two_receiver_processes_share_one_multicast_session(ports: Ports, procs: Processes) -> None:
    topic = "reliable/cli/two"
    n = 20_000
    recvs = [
        procs.openum(
            "recv",
            topic,
            "--count",
            str(n),
            "--verify",
            "--json",
            "--timeout",
            "30",
            *ports.argv(),
            env={"OPENUM_TEST_DROP": f"0.03:{seed}"},
        )
        for seed in (1, 2)
    ]
    send = procs.openum(
        "send", topic, "--count", str(n), "--transport", "lbtrm", "--delay", "3", "--json", *ports.argv()
    )
    send_out, send_err = send.communicate(timeout=120)
    assert send.returncode == 0, send_err
    for recv in recvs:
        out, err = recv.communicate(timeout=120)
        assert recv.returncode == 0, (out, err)
        got = last_json(out)
        assert got["received"] == n and got["gaps"] == 0 and got["recovery"]["rxs_rcved"] > 0
    # One multicast stream: every datagram was sent once, whatever the number of receivers.
    assert last_json(send_out)["recovery"]["msgs_sent"] < n


# -- in one process ------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("ordered", [1, -1])
def test_ordered_delivery_modes_deliver_everything_exactly_once(
    transport: str, ordered: int, contexts: Contexts, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"reliable/ordered/{transport}/{ordered}"
    pub = contexts.new()
    monkeypatch.setenv("OPENUM_TEST_DROP", "0.1:3")
    sub = contexts.new(f"receiver ordered_delivery {ordered}")
    rec = Recorder()
    sub.create_receiver(topic, rec)
    events = SourceEvents()
    src = pub.create_source(topic, {"transport": transport}, event_callback=events)
    assert ready(sub, transport, events)
    n = 3000
    for i in range(n):
        src.send(i.to_bytes(8, "big"), SendFlags.FLUSH if i % 7 == 0 else SendFlags.NONE)
    src.flush()
    assert rec.wait_count(n), (rec.count(), sub.retrieve_transport_stats(rec.of(DATA)[0].source))
    counters = [g.counter for g in rec.of(DATA)]
    assert sorted(counters) == list(range(n))  # every message, exactly once
    if ordered == 1:
        assert counters == list(range(n))
    stats = sub.retrieve_transport_stats(rec.of(DATA)[0].source)
    assert stats.rxs_rcved > 0 and stats.naks_sent > 0
    assert sub.statistics().dgrams_dropped_test_hook > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large_messages_and_properties_survive_loss(
    transport: str, contexts: Contexts, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"reliable/large/{transport}"
    pub = contexts.new()
    monkeypatch.setenv("OPENUM_TEST_DROP", "0.05:11")
    sub = contexts.new()
    rec = Recorder()
    sub.create_receiver(topic, rec)
    events = SourceEvents()
    src = pub.create_source(topic, {"transport": transport}, event_callback=events)
    assert ready(sub, transport, events)
    rng = random.Random(5)
    blobs = [rng.randbytes(size) for size in (1, 8000, 100_000, 1_000_000)]
    for blob in blobs:
        src.send(blob, SendFlags.FLUSH, properties={"size": len(blob), "kind": "blob"})
    assert rec.wait_count(len(blobs), timeout=60)
    got = rec.of(DATA)
    assert [g.data for g in got] == blobs
    assert [g.properties for g in got] == [{"size": len(b), "kind": "blob"} for b in blobs]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_topics_on_one_session_reach_only_their_receivers(
    transport: str, ports: Ports, contexts: Contexts
) -> None:
    pub, sub = contexts.new(), contexts.new()
    wanted, unwanted = Recorder(), Recorder()
    sub.create_receiver("reliable/mixed/A", wanted)
    events = SourceEvents()
    # Sessions are assigned round-robin: name one session explicitly for both sources.
    where = (
        {"transport_lbtrm_multicast_address": "224.10.10.12"}
        if transport == "lbtrm"
        else {"transport_lbtru_port": ports.lbtru_source_ports[0]}
    )
    a = pub.create_source("reliable/mixed/A", {"transport": transport, **where}, event_callback=events)
    b = pub.create_source("reliable/mixed/B", {"transport": transport, **where})
    assert a.info.transport == b.info.transport  # one transport session, two topic indices
    assert ready(sub, transport, events)
    for i in range(50):
        b.send(b"B%d" % i)
        a.send(b"A%d" % i)
    a.flush()
    assert wanted.wait_count(50)
    assert [g.data for g in wanted.of(DATA)] == [b"A%d" % i for i in range(50)]
    assert unwanted.count() == 0
    stats = sub.retrieve_transport_stats(wanted.of(DATA)[0].source)
    assert stats.lbm_msgs_no_topic_rcved == 50  # B's messages reached the context and were dropped


def test_later_receivers_options_for_what_is_already_joined_are_logged_not_used(
    ports: Ports, contexts: Contexts, caplog: pytest.LogCaptureFixture
) -> None:
    """A (topic, source) has one delivery controller, a session one set of NAK timers and a context one
    LBT-RU receiving socket: each takes its options from its first receiver; a later receiver that
    asks for other values gets a warning naming them (nothing changes silently)."""
    pub, sub = contexts.new(), contexts.new()
    first_a, second_a, on_b = Recorder(), Recorder(), Recorder()
    events = SourceEvents()
    where = {"transport": "lbtru", "transport_lbtru_port": ports.lbtru_source_ports[0]}
    a = pub.create_source("reliable/first/A", where, event_callback=events)
    b = pub.create_source("reliable/first/B", where)
    low, high = ports.lbtru_receiver_ports
    with caplog.at_level(logging.WARNING, logger="openum"):
        sub.create_receiver("reliable/first/A", first_a)
        assert ready(sub, "lbtru", events)
        sub.create_receiver("reliable/first/A", second_a, attrs={"ordered_delivery": 0})
        sub.create_receiver(
            "reliable/first/B",
            on_b,
            attrs={
                "transport_lbtru_nak_generation_interval": 500,
                "transport_lbtru_port_low": low + 1,
                "transport_lbtru_port_high": high,
            },
        )

        def both_receive() -> bool:  # B's topic is joined when its advertisement arrives: send until then
            a.send(b"a")
            b.send(b"b")
            a.flush()
            return on_b.count() > 0 and second_a.count() > 0

        assert wait_until(both_receive, WAIT, interval=0.05)
    warnings = sorted(r.getMessage() for r in caplog.records if "is ignored" in r.getMessage())
    assert len(warnings) == 3, warnings
    assert (
        "receiver option ordered_delivery=0 is ignored: the delivery controller of 'reliable/first/A'"
        in (warnings[0])
    )
    assert (
        "receiver option transport_lbtru_nak_generation_interval=500 is ignored: the joined LBT-RU"
        in warnings[1]
    )
    assert "uses 10000 from its first receiver" in warnings[1]
    assert (
        f"receiver option transport_lbtru_port_low={low + 1} is ignored: the LBT-RU receiver socket"
        in (warnings[2])
    )
    assert f"uses {low} from its first receiver" in warnings[2]


def test_lbtru_connect_disconnect_and_eos_when_the_source_closes(contexts: Contexts) -> None:
    pub = contexts.new()
    sub = contexts.new()
    rec = Recorder()
    rcv = sub.create_receiver("reliable/ru/events", rec)
    events = SourceEvents()
    src = pub.create_source(
        "reliable/ru/events",
        {"transport": "lbtru", "transport_lbtru_client_activity_timeout": 500},
        event_callback=events,
    )
    assert events.wait(SourceEvent.CONNECT)
    receiver_address = events.events[0][1]
    assert receiver_address.startswith("127.0.0.1:")
    src.send(b"hello", SendFlags.FLUSH)
    assert rec.wait_count(1)
    assert rec.types()[:2] == [BOS, DATA]
    src.close()  # an RST to every client: the receiver ends the session at once (EOS)
    assert rec.wait_count(1, EOS, timeout=5)
    rcv.close()
    # A second source: a receiver that goes away is dropped after the client activity timeout.
    rec2 = Recorder()
    events2 = SourceEvents()
    rcv2 = sub.create_receiver("reliable/ru/events2", rec2)
    src2 = pub.create_source(
        "reliable/ru/events2",
        {"transport": "lbtru", "transport_lbtru_client_activity_timeout": 500},
        event_callback=events2,
    )
    assert events2.wait(SourceEvent.CONNECT)
    rcv2.close()  # the last receiver of the session: the context leaves it (no more ACKs)
    assert events2.wait(SourceEvent.DISCONNECT, timeout=10)
    assert src2.statistics().transport.clients_timed_out == 1  # type: ignore[union-attr]


def test_lbtrm_receiver_ends_the_session_after_the_activity_timeout(contexts: Contexts) -> None:
    pub = contexts.new()
    sub = contexts.new("receiver transport_lbtrm_activity_timeout 1000")
    rec = Recorder()
    sub.create_receiver("reliable/rm/eos", rec)
    src = pub.create_source("reliable/rm/eos", {"transport": "lbtrm"})
    assert wait_until(lambda: joined(sub, "lbtrm"), WAIT)
    src.send(b"only", SendFlags.FLUSH)
    assert rec.wait_count(1)
    src.close()  # LBT-RM sends nothing when a session is deleted: receivers time out (seed 8.11.6)
    assert rec.wait_count(1, EOS, timeout=10)
    assert wait_until(lambda: sub.statistics().lbtrm_rcv_sessions == 0, 5)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rate_limit_queues_one_datagram_then_wouldblock_then_wakeup(
    transport: str, contexts: Contexts
) -> None:
    # 800 kbit/s per 100 ms interval: 10,000 bytes per interval.
    pub = contexts.new(
        f"context transport_{transport}_data_rate_limit 800000",
        f"context transport_{transport}_rate_interval 100",
    )
    sub = contexts.new()
    rec = Recorder()
    sub.create_receiver(f"reliable/rate/{transport}", rec)
    events = SourceEvents()
    src = pub.create_source(f"reliable/rate/{transport}", {"transport": transport}, event_callback=events)
    assert ready(sub, transport, events)
    payload = bytes(1000)
    sent = 0
    refused: WouldBlock | None = None
    for _ in range(100):
        try:
            src.send(payload, SendFlags.FLUSH | SendFlags.NONBLOCK)
        except WouldBlock as exc:
            refused = exc
            break
        sent += 1
    assert refused is not None and "data rate limit" in str(refused)
    assert 9 <= sent <= 11  # the budget, plus the one datagram the rate controller queues
    assert events.wait(SourceEvent.WAKEUP, timeout=5)
    src.send(payload, SendFlags.FLUSH | SendFlags.NONBLOCK)  # sending resumed
    sent += 1
    # A blocking send waits for the rate controller instead of raising.
    for _ in range(30):
        src.send(payload, SendFlags.FLUSH)
    sent += 30
    assert rec.wait_count(sent)
    stats = src.statistics()
    assert isinstance(stats, ReliableSourceStatistics)
    assert stats.blocked >= 1 and stats.transport.rctlr_data_msgs >= 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_blocking_send_over_the_rate_limit_completes_in_sequential_mode(
    transport: str, contexts: Contexts
) -> None:
    """No thread processes a sequential-mode context's events while its application sends, so a blocking
    send held back by the rate controller must make its own progress at the controller's next interval.
    Large messages are the hard case: one send is several datagrams, and those the controller refuses
    wait in the session's backlog (which the context thread would otherwise drain)."""
    # 8 Mbit/s per 10 ms interval: 10,000 bytes per interval; each message is three 8 KB fragments.
    pub = contexts.new(
        "context operational_mode sequential",
        f"context transport_{transport}_data_rate_limit 8000000",
        f"context transport_{transport}_rate_interval 10",
    )
    sub = contexts.new()
    rec = Recorder()
    topic = f"reliable/sequential/{transport}"
    sub.create_receiver(topic, rec)
    events = SourceEvents()
    src = pub.create_source(topic, {"transport": transport}, event_callback=events)

    def connected() -> bool:
        pub.process_events(5)  # topic resolution and (LBT-RU) the connection run on the application's thread
        return events.count(SourceEvent.CONNECT) >= 1 if transport == "lbtru" else joined(sub, transport)

    assert wait_until(connected, WAIT)
    messages = [bytes([i]) * 20_000 for i in range(5)]
    done = threading.Event()
    failure: list[BaseException] = []

    def send_all() -> None:
        try:
            for payload in messages:
                src.send(payload)  # blocking, no flags; nobody calls process_events meanwhile
            src.flush()
        except BaseException as exc:  # reported by the assertion below
            failure.append(exc)
        finally:
            done.set()

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    assert done.wait(WAIT), "a blocking send waited for a context thread that sequential mode does not have"
    assert not failure, failure
    stats = src.statistics()
    assert isinstance(stats, ReliableSourceStatistics)
    assert stats.blocked >= 1
    assert stats.blocked_ns > 0  # the time it waited for the rate controller
    # What the controller still holds back, and repairs if any, go out as the publisher's events are
    # processed again.
    assert wait_until(lambda: (pub.process_events(5), rec.count(DATA) >= len(messages))[1], WAIT)
    assert [g.data for g in rec.of(DATA)] == messages


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_statistics_have_ums_names(transport: str, contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    rec = Recorder()
    sub.create_receiver(f"reliable/stats/{transport}", rec)
    events = SourceEvents()
    src = pub.create_source(f"reliable/stats/{transport}", {"transport": transport}, event_callback=events)
    assert ready(sub, transport, events)
    for i in range(100):
        src.send(b"%d" % i)
    src.flush()
    assert rec.wait_count(100)
    rcv_stats = sub.retrieve_transport_stats(src.source_string)
    expected = RmReceiverStatistics if transport == "lbtrm" else RuReceiverStatistics
    assert isinstance(rcv_stats, expected)
    assert rcv_stats.lbm_msgs_rcved == 100 and rcv_stats.msgs_rcved >= 1 and rcv_stats.lost == 0
    src_stats = pub.retrieve_transport_stats(src.source_string)
    assert isinstance(src_stats, ReliableSourceStatistics)
    assert src_stats.msgs_sent == 100 and src_stats.transport.msgs_sent == src_stats.datagrams_sent
    ctx_stats = pub.statistics()
    assert getattr(ctx_stats, f"{transport}_sessions") == 1 and ctx_stats.tcp_sessions == 0
    assert getattr(sub.statistics(), f"{transport}_rcv_sessions") == 1


# -- garbage -------------------------------------------------------------------------------------------


def test_lbtrm_garbage_on_the_group_port_is_counted_and_dropped(contexts: Contexts) -> None:
    """On a group socket serving two sessions (with one, see the next test)."""
    pub, pub2, sub = contexts.new(), contexts.new(), contexts.new()
    rec = Recorder()
    sub.create_receiver("reliable/garbage/rm", rec)
    sub.create_receiver("reliable/garbage/rm2", Recorder())
    src = pub.create_source("reliable/garbage/rm", {"transport": "lbtrm"})
    src2 = pub2.create_source("reliable/garbage/rm2", {"transport": "lbtrm"})
    assert src.info.transport.group == src2.info.transport.group  # type: ignore[union-attr]  # pools' first
    assert wait_until(lambda: joined(sub, "lbtrm", 2), WAIT)
    src.send(b"first", SendFlags.FLUSH)
    assert rec.wait_count(1)
    tr = src.info.transport
    group, port = tr.group, tr.dest_port  # type: ignore[union-attr]
    rng = random.Random(1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        junk = [b"", b"\x00\x01\x02", rng.randbytes(40), rng.randbytes(3000)]
        foreign = rm_encode(
            RmData(ucast_port=tr.source_port, session_id=tr.session_id ^ 1, sqn=0, trail_sqn=0, payload=b"x")
        )  # type: ignore[union-attr]
        for datagram in [*junk, foreign]:
            s.sendto(datagram, (group, port))
    # From the source's own address the session id matches: a truncated DATA reaches the engine.
    truncated = rm_encode(
        RmData(ucast_port=tr.source_port, session_id=tr.session_id, sqn=1, trail_sqn=0, payload=b"")
    )[:10]  # type: ignore[union-attr]
    src_sock = pub._pools["lbtrm"].sessions[0].sock
    src_sock.sendto(truncated, (group, port))
    assert wait_until(lambda: sub.statistics().lbtrm_dgrams_dropped_unknown >= 5, WAIT), sub.statistics()
    src.send(b"second", SendFlags.FLUSH)
    assert rec.wait_count(2)
    assert [g.data for g in rec.of(DATA)] == [b"first", b"second"]
    stats = sub.retrieve_transport_stats(src.source_string)
    assert stats.dgrams_dropped_size + stats.dgrams_dropped_hdr >= 1


def test_a_forged_far_ahead_lbtrm_datagram_leaves_delivery_going_and_is_counted(contexts: Contexts) -> None:
    """One forged DATA of the session (its ids are in every TIR) with a sequence number 2**31 ahead,
    sent to the group from a plain socket (two sessions share the group socket, so it is not connected
    to one source): dropped and counted (``dgrams_dropped_window``); no NAK, and delivery goes on."""
    pub, pub2, sub = contexts.new(), contexts.new(), contexts.new()
    rec = Recorder()
    sub.create_receiver("reliable/forged/rm", rec)
    sub.create_receiver("reliable/forged/rm2", Recorder())
    src = pub.create_source("reliable/forged/rm", {"transport": "lbtrm"})
    src2 = pub2.create_source("reliable/forged/rm2", {"transport": "lbtrm"})
    assert src.info.transport.group == src2.info.transport.group  # type: ignore[union-attr]
    assert wait_until(lambda: joined(sub, "lbtrm", 2), WAIT)
    src.send(b"first", SendFlags.FLUSH)
    assert rec.wait_count(1)
    tr = src.info.transport
    forged = rm_encode(
        RmData(
            ucast_port=tr.source_port, session_id=tr.session_id, sqn=0x7FFF_FFF0, trail_sqn=0, payload=b"x"
        )
    )  # type: ignore[union-attr]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        s.sendto(forged, (tr.group, tr.dest_port))  # type: ignore[union-attr]

    def stats() -> RmReceiverStatistics:
        st = sub.retrieve_transport_stats(src.source_string)
        assert isinstance(st, RmReceiverStatistics)
        return st

    assert wait_until(lambda: stats().dgrams_dropped_window == 1, WAIT), stats()
    for i in range(5):
        src.send(b"after%d" % i, SendFlags.FLUSH)
    assert rec.wait_count(6)
    assert [g.data for g in rec.of(DATA)] == [b"first"] + [b"after%d" % i for i in range(5)]
    st = stats()
    assert (st.lost, st.naks_sent, st.losses_pending, st.dgrams_dropped_window) == (0, 0, 0, 1)


def test_lbtrm_group_socket_is_connected_to_its_only_source_so_the_contexts_own_datagrams_stay_off(
    contexts: Contexts,
) -> None:
    """Two contexts publishing to each other over LBT-RM share the pools' first group: each context's
    group socket hears the other's source and, looped back by the kernel, its own.  Connected to the
    other's source (Linux, after its first datagram), the socket no longer wakes up for its own."""
    a, b = contexts.new(), contexts.new()
    rec_a, rec_b = Recorder(), Recorder()
    a.create_receiver("reliable/self/b", rec_a)
    b.create_receiver("reliable/self/a", rec_b)
    src_a = a.create_source("reliable/self/a", {"transport": "lbtrm"})
    src_b = b.create_source("reliable/self/b", {"transport": "lbtrm"})
    assert src_a.info.transport.group == src_b.info.transport.group  # type: ignore[union-attr]
    assert wait_until(lambda: joined(a, "lbtrm") and joined(b, "lbtrm"), WAIT)
    src_b.send(b"b0", SendFlags.FLUSH)  # a's socket connects to b's source on it
    assert rec_a.wait_count(1)
    src_a.send(b"a0", SendFlags.FLUSH)  # and b's to a's
    assert rec_b.wait_count(1)
    linux = sys.platform.startswith("linux")
    before_a, before_b = (ctx.statistics().lbtrm_dgrams_dropped_unknown for ctx in (a, b))
    for i in range(1, 21):
        src_a.send(b"a%d" % i, SendFlags.FLUSH)
        src_b.send(b"b%d" % i, SendFlags.FLUSH)
    assert rec_a.wait_count(21) and rec_b.wait_count(21)
    assert [g.data for g in rec_a.of(DATA)] == [b"b%d" % i for i in range(21)]
    assert [g.data for g in rec_b.of(DATA)] == [b"a%d" % i for i in range(21)]
    if linux:
        assert before_a == 0  # connected before a sent anything
        assert a.statistics().lbtrm_dgrams_dropped_unknown == before_a
        assert b.statistics().lbtrm_dgrams_dropped_unknown == before_b
    else:  # each context reads its own datagrams and drops them as a session it has not joined
        assert wait_until(lambda: a.statistics().lbtrm_dgrams_dropped_unknown >= before_a + 20, WAIT)


def _garbage(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [b"", b"\x01", rng.randbytes(60), struct.pack(">BBH", 0, 0, 0) + rng.randbytes(30)]


def test_lbtru_garbage_is_counted_and_dropped_on_both_ends(contexts: Contexts) -> None:
    """Garbage at a source, and at a receiver socket serving two sources (with one, see the next test)."""
    pub, pub2, sub = contexts.new(), contexts.new(), contexts.new()
    rec = Recorder()
    sub.create_receiver("reliable/garbage/ru", rec)
    sub.create_receiver("reliable/garbage/ru2", Recorder())
    events, events2 = SourceEvents(), SourceEvents()
    src = pub.create_source("reliable/garbage/ru", {"transport": "lbtru"}, event_callback=events)
    pub2.create_source("reliable/garbage/ru2", {"transport": "lbtru"}, event_callback=events2)
    assert events.wait(SourceEvent.CONNECT) and events2.wait(SourceEvent.CONNECT)
    src.send(b"first", SendFlags.FLUSH)
    assert rec.wait_count(1)
    receiver_host, receiver_port = events.events[0][1].rsplit(":", 1)
    tr = src.info.transport
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for datagram in _garbage(2):
            s.sendto(datagram, (receiver_host, int(receiver_port)))  # from an unknown address
            s.sendto(datagram, (tr.ip, tr.port))  # type: ignore[union-attr]  # to the source
    assert wait_until(lambda: sub.statistics().lbtru_dgrams_dropped_unknown >= 4, WAIT)
    transport = src.statistics().transport
    assert wait_until(
        lambda: (
            sum(
                getattr(src.statistics().transport, f"dgrams_dropped_{r}")
                for r in ("size", "type", "version", "hdr", "sid")
            )
            >= 3
        ),
        WAIT,
    ), transport
    src.send(b"second", SendFlags.FLUSH)
    assert rec.wait_count(2)
    assert [g.data for g in rec.of(DATA)] == [b"first", b"second"]


def test_lbtru_receiver_socket_is_connected_to_its_only_source_then_serves_every_source(
    contexts: Contexts,
) -> None:
    """With one source the receiver socket is connected to it (Linux): reads need no sender address and
    strangers' datagrams never reach it.  A second source dissolves that for good: both are served and
    strangers are counted again."""
    pub, pub2, sub = contexts.new(), contexts.new(), contexts.new()
    rec, rec2 = Recorder(), Recorder()
    sub.create_receiver("reliable/connected/one", rec)
    events, events2 = SourceEvents(), SourceEvents()
    src = pub.create_source("reliable/connected/one", {"transport": "lbtru"}, event_callback=events)
    assert events.wait(SourceEvent.CONNECT)
    receiver_host, receiver_port = events.events[0][1].rsplit(":", 1)
    receiver = (receiver_host, int(receiver_port))
    tr = src.info.transport
    sock = sub._subscriptions._ru._sock  # type: ignore[union-attr]  # the context's LBT-RU socket
    linux = sys.platform.startswith("linux")
    if linux:
        assert sock.getpeername() == (tr.ip, tr.port)  # type: ignore[union-attr]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for datagram in _garbage(3):
            s.sendto(datagram, receiver)
    src.send(b"one", SendFlags.FLUSH)  # sent after the garbage, read after it if it had been queued
    assert rec.wait_count(1)
    if linux:
        assert sub.statistics().lbtru_dgrams_dropped_unknown == 0  # the kernel kept it off the socket
    sub.create_receiver("reliable/connected/two", rec2)
    src2 = pub2.create_source("reliable/connected/two", {"transport": "lbtru"}, event_callback=events2)
    assert events2.wait(SourceEvent.CONNECT)
    with pytest.raises(OSError, match="not connected"):
        sock.getpeername()  # ENOTCONN: not connected any more
    src.send(b"two", SendFlags.FLUSH)
    src2.send(b"three", SendFlags.FLUSH)
    assert rec.wait_count(2) and rec2.wait_count(1)
    assert [g.data for g in rec.of(DATA)] == [b"one", b"two"]
    assert [g.data for g in rec2.of(DATA)] == [b"three"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.2", 0))  # another address than the sources': the socket is not tied to theirs
        for datagram in _garbage(4):
            s.sendto(datagram, receiver)
    assert wait_until(lambda: sub.statistics().lbtru_dgrams_dropped_unknown >= 4, WAIT)


@pytest.mark.skipif(not CLIENT_SOCKETS, reason="a socket per client: Linux's SO_REUSEPORT")
def test_lbtru_source_serves_each_client_from_a_socket_of_its_own(contexts: Contexts) -> None:
    """Each connected client gets a socket bound to the session's address and connected to the client:
    data leaves from the session's port (the receivers' connected sockets take nothing else), the
    client's ACKs come in on it (or the client would time out), and it closes when the client goes."""
    timeout = {"transport": "lbtru", "transport_lbtru_client_activity_timeout": 500}
    acks = "receiver transport_lbtru_acknowledgement_interval 100"  # ACKs: the clients' keepalives
    pub, sub, sub2 = contexts.new(), contexts.new(acks), contexts.new(acks)
    rec, rec2 = Recorder(), Recorder()
    rcv = sub.create_receiver("reliable/own", rec)
    events = SourceEvents()
    src = pub.create_source("reliable/own", timeout, event_callback=events)
    assert events.wait(SourceEvent.CONNECT)
    session = src.session  # type: ignore[attr-defined]
    shared = session.sock.getsockname()
    owns = session._client_socks
    assert wait_until(lambda: len(owns) == 1, WAIT)
    (first,) = owns.values()
    assert first.getsockname() == shared
    assert "{}:{}".format(*first.getpeername()) == events.events[0][1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other, pytest.raises(OSError, match="in use"):
        other.bind(shared)  # still taken for a pool looking for a free port (no SO_REUSEPORT)
    src.send(b"one", SendFlags.FLUSH)
    assert rec.wait_count(1)
    # Three client activity timeouts: the client's ACKs, read from its own socket, keep it connected.
    assert stays_false(lambda: events.count(SourceEvent.DISCONNECT) > 0, 1.5)
    sub2.create_receiver("reliable/own", rec2)
    assert events.wait(SourceEvent.CONNECT, 2)
    assert wait_until(lambda: len(owns) == 2, WAIT)
    src.send(b"two", SendFlags.FLUSH)
    assert rec.wait_count(2) and rec2.wait_count(1)
    assert [g.data for g in rec.of(DATA)] == [b"one", b"two"]
    rcv.close()  # the first client stops sending ACKs: dropped after the timeout, its socket closed
    assert events.wait(SourceEvent.DISCONNECT, timeout=10)
    assert wait_until(lambda: len(owns) == 1, WAIT)
    assert first.fileno() == -1
    (second,) = owns.values()
    src.close()
    assert second.fileno() == -1 and not owns


@pytest.mark.skipif(not GROUP_SOCKETS, reason="a socket connected to the group: Linux's SO_REUSEPORT")
def test_lbtrm_source_sends_through_a_socket_connected_to_its_group(
    contexts: Contexts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's multicast leaves through a socket bound to the session's address and connected to
    the group; the receivers' NAKs still reach the session's socket (everything is repaired), and the
    port stays taken for a plain bind.  Shut for writing, the group socket takes the session's data
    with it (so the data went through it); it closes with the session."""
    pub = contexts.new()
    monkeypatch.setenv("OPENUM_TEST_DROP", "0.1:5")
    sub = contexts.new()
    rec = Recorder()
    sub.create_receiver("reliable/group", rec)
    src = pub.create_source("reliable/group", {"transport": "lbtrm"})
    assert ready(sub, "lbtrm", SourceEvents())
    session = src.session  # type: ignore[attr-defined]
    own = session._group_sock
    assert own is not None
    assert own.getsockname() == session.sock.getsockname()
    assert own.getpeername() == (session.group, session.dest_port)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as other, pytest.raises(OSError, match="in use"):
        other.bind(session.sock.getsockname())  # still taken for a pool looking for a free port
    n = 500
    for i in range(n):
        src.send(i.to_bytes(8, "big"), SendFlags.FLUSH)
    assert rec.wait_count(n), rec.count()
    assert [g.counter for g in rec.of(DATA)] == list(range(n))
    stats = sub.retrieve_transport_stats(rec.of(DATA)[0].source)
    assert stats.naks_sent > 0 and stats.rxs_rcved > 0  # NAKs reached the session's socket
    own.shutdown(socket.SHUT_WR)
    src.send(b"lost", SendFlags.FLUSH)
    assert stays_false(lambda: rec.count() > n, 0.5)
    src.close()
    assert own.fileno() == -1 and session._group_sock is None


def test_the_test_loss_hook_refuses_bad_values() -> None:
    assert loss_hook_from_env({}) is None
    hook = loss_hook_from_env({"OPENUM_TEST_DROP": "0.5:1"})
    assert hook is not None
    drops = sum(hook(b"") for _ in range(1000))
    assert 400 < drops < 600
    for bad in ("x", "1.5", "-0.1", "0.1:seed"):
        with pytest.raises(ValueError, match="OPENUM_TEST_DROP"):
            loss_hook_from_env({"OPENUM_TEST_DROP": bad})


def test_an_unavailable_transport_is_refused_with_the_choices(contexts: Contexts) -> None:
    ctx = contexts.new()
    with pytest.raises(
        openum.ConfigError, match=r"transport broker is not implemented.*tcp, lbtrm, lbtru, lbtipc, lbtsmx"
    ):
        ctx.create_source("reliable/nope", {"transport": "broker"})
    # Let through for a migrated configuration, it still cannot make a source: refused when created.
    set_unimplemented_policy("warn")
    try:
        with pytest.raises(
            openum.NotSupportedError, match=r"broker.*available: tcp, lbtru, lbtrm, lbtipc, lbtsmx"
        ):
            ctx.create_source("reliable/nope", {"transport": "broker"})
    finally:
        set_unimplemented_policy(None)


def test_bad_multicast_addresses_are_config_errors(contexts: Contexts) -> None:
    with pytest.raises(openum.ConfigError, match="transport_lbtrm_multicast_address_low"):
        contexts.new(
            "context transport_lbtrm_multicast_address_low 224.10.10.20",
            "context transport_lbtrm_multicast_address_high 224.10.10.10",
        )
    ctx = contexts.new()
    with pytest.raises(openum.ConfigError, match="not a multicast address"):
        ctx.create_source(
            "reliable/notmc", {"transport": "lbtrm", "transport_lbtrm_multicast_address": "127.1.2.3"}
        )
