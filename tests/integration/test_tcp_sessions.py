"""Transport-session mapping (seed 2.9.2, 3.3.3), explicit batching (seed 8.6.4) and ``openum wrecv``."""

from __future__ import annotations

import json
import logging
import socket

import pytest

import openum
from openum import MsgType, SendFlags
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, Processes, Recorder
from tests.integration.test_lbmrd_process import free_udp_port

SEED_EXAMPLE_PORTS = 50  # seed 2.9.2: low 12000, high 12049, maximum ports 5 (shifted to free ports)


def test_pool_example_of_seed_2_9_2_explicit_ports_join_the_pool() -> None:
    ports = Ports.allocate(SEED_EXAMPLE_PORTS + 50)
    low = ports.tcp_low
    opts = [
        f"context resolver_multicast_port {ports.resolver}",
        f"context transport_tcp_port_low {low}",
        f"context transport_tcp_port_high {low + SEED_EXAMPLE_PORTS - 1}",
        "context transport_tcp_maximum_ports 5",
    ]
    with openum.Context(options=opts) as ctx:
        implicit = [ctx.create_source(f"implicit/{i}") for i in range(5)]
        assert sorted({s.session.port for s in implicit}) == list(range(low, low + 5))  # lazily, lowest first
        inside = ctx.create_source("explicit/inside", {"transport_tcp_port": low + 20})
        outside = ctx.create_source("explicit/outside", {"transport_tcp_port": low + 99})
        assert (inside.session.port, outside.session.port) == (low + 20, low + 99)
        assert ctx.statistics().tcp_sessions == 7
        later = [ctx.create_source(f"later/{i}") for i in range(14)]
        used = [s.session.port for s in later]
        assert set(used) == {*range(low, low + 5), low + 20, low + 99}  # explicit sessions joined the pool
        assert all(used.count(p) == 2 for p in set(used))  # round-robin over all 7


def test_a_range_smaller_than_maximum_ports_is_shared_round_robin(caplog: pytest.LogCaptureFixture) -> None:
    ports = Ports.allocate(3)
    opts = [*ports.options(), "context transport_tcp_maximum_ports 10"]
    with openum.Context(options=opts) as ctx:
        used = [ctx.create_source(f"small/{i}").session.port for i in range(7)]
    low = ports.tcp_low
    assert used == [low, low + 1, low + 2, low, low + 1, low + 2, low]
    # A port of the range held by another program: the sources share the sessions that could open.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", low + 2))
        holder.listen()
        with caplog.at_level(logging.WARNING, logger="openum"), openum.Context(options=opts) as ctx:
            used = [ctx.create_source(f"held/{i}").session.port for i in range(5)]
        assert set(used) == {low, low + 1}
        assert "sources share the 2 session(s) already open" in caplog.text
        assert f"no free port in {low + 2}-{low + 2}" in caplog.text


def test_sources_on_one_session_share_it_and_the_first_sources_options_win(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ports = Ports.allocate()
    opts = ports.options("context transport_tcp_maximum_ports 1")
    with openum.Context(options=opts) as ctx, caplog.at_level(logging.WARNING, logger="openum"):
        first = ctx.create_source("a", {"transport_tcp_multiple_receiver_behavior": "source_paced"})
        second = ctx.create_source(
            "b",
            {
                "transport_tcp_multiple_receiver_behavior": "normal",
                "transport_topic_sequence_number_info_interval": 100,  # TSNIs are per session too
            },
        )
        assert first.session is second.session
        assert (first.topic_index, second.topic_index) == (1, 2)
        assert not first.session.receiver_paced  # the session keeps its first source's value
        warnings = [r.getMessage() for r in caplog.records if "is ignored" in r.getMessage()]
        assert len(warnings) == 2
        assert "transport_tcp_multiple_receiver_behavior=normal" in warnings[0]
        assert "transport_topic_sequence_number_info_interval=100" in warnings[1]
        assert first.source_string.rsplit("[", 1)[0] == second.source_string.rsplit("[", 1)[0]


def test_explicit_batching_holds_the_group_until_end_batch() -> None:
    ports = Ports.allocate()
    with openum.Context(options=ports.options()) as pub, openum.Context(options=ports.options()) as sub:
        src = pub.create_source("batched")
        rec = Recorder()
        sub.create_receiver("batched", rec)
        assert wait_until(lambda: src.statistics().num_clients == 1, WAIT)
        before = src.statistics().datagrams_sent
        big = bytes(3000)  # each would pass implicit_batching_minimum_length on its own
        src.send(big, SendFlags.START_BATCH)
        src.send(big)
        assert src.statistics().datagrams_sent == before  # held: the group is not complete
        src.send(big, SendFlags.END_BATCH | SendFlags.FLUSH)
        assert src.statistics().datagrams_sent == before + 1  # one datagram for the group
        assert rec.wait_count(3)
        assert [g.sqn for g in rec.of(MsgType.DATA)] == [0, 1, 2]


def test_wrecv_counts_messages_per_topic() -> None:
    ports = Ports.allocate()
    procs = Processes()
    try:
        rcv = procs.openum("wrecv", "^md/", "--count", "300", "--verify", "--json", *ports.argv())
        senders = [
            procs.openum(
                "send",
                f"md/{name}",
                "--count",
                "100",
                "--delay",
                "0.2",
                "--wait-receivers",
                "1",
                *ports.argv(),
            )
            for name in ("IBM", "MSFT", "AAPL")
        ]
        out, err = rcv.communicate(timeout=WAIT * 3)
        for sender in senders:
            sender.wait(WAIT)
        assert rcv.returncode == 0, err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["topics"] == {"md/AAPL": 100, "md/IBM": 100, "md/MSFT": 100}
        assert (summary["received"], summary["gaps"], summary["sources"]) == (300, 0, 3)
    finally:
        procs.close()


def test_recv_with_an_event_queue() -> None:
    port = free_udp_port()
    procs = Processes()
    try:
        opts = ["--option", f"context resolver_multicast_port {port}"]
        rcv = procs.openum("recv", "evq", "--count", "500", "--verify", "--json", "--event-queue", *opts)
        send = procs.openum("send", "evq", "--count", "500", "--delay", "0.2", "--wait-receivers", "1", *opts)
        out, err = rcv.communicate(timeout=WAIT * 3)
        send.wait(WAIT)
        assert rcv.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["received"] == 500
    finally:
        procs.close()
