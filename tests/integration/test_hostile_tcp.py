"""Hostile and stuck peers of a TCP source, with real sockets on 127.0.0.1 (issue 23, item 3).

A connection is a receiver only once it presents the session's id (UM Concepts Guide, section 6.1): until
then no data is kept for it, so a stranger that connects and never reads cannot pace the source, and it is
closed after ``transport_tcp_activity_timeout``.  A receiver that takes nothing for that long while data
waits for it is disconnected (UM Concepts Guide, section 2.10.7, Suspended Receiver Problem), so it holds
a receiver-paced source and its other receivers up for no longer than that.

The stuck peers have small kernel buffers on both ends, so a few hundred KB fill them.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString
from openum.wire.lbttcp import SESSION_ID_MESSAGE_LEN, session_id_message
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, Processes, Recorder, SourceEvents, last_json

DATA, EOS = MsgType.DATA, MsgType.EOS
SMALL_BUFFERS = "source transport_tcp_sender_socket_buffer 65536"
MESSAGES = 3000  # 3 MB of 1000-byte messages: far more than a stuck peer's buffers hold


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


@pytest.fixture
def contexts(ports: Ports) -> Iterator[list[openum.Context]]:
    made: list[openum.Context] = []
    try:
        yield made
    finally:
        for ctx in reversed(made):
            ctx.__exit__(None, None, None)
        for sock in _RAW:
            sock.close()
        _RAW.clear()


_RAW: list[socket.socket] = []  # raw connections of the running test, closed by ``contexts``


def _context(contexts: list[openum.Context], ports: Ports, *extra: str) -> openum.Context:
    ctx = openum.Context(options=ports.options(*extra))
    contexts.append(ctx)
    return ctx


def _raw_connection(src: openum.Source) -> socket.socket:
    """A plain TCP connection to the source's transport port with a small receive buffer."""
    info = SourceString.parse(src.source_string)
    assert info.ip is not None and info.port is not None
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    _RAW.append(sock)
    sock.settimeout(WAIT)
    sock.connect((info.ip, info.port))
    return sock


def _send_all(src: openum.Source, count: int, done: threading.Event) -> threading.Thread:
    def run() -> None:
        payload = bytearray(1000)
        try:
            for i in range(count):
                payload[:8] = i.to_bytes(8, "big")
                src.send(payload)
            src.flush()
        except openum.ClosedError:
            return  # the test failed and closed the context under a blocked send
        done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _eof_after(sock: socket.socket, timeout: float) -> tuple[int, bool]:
    """Read until the peer closes (True) or ``timeout`` passes; how many bytes came."""
    sock.settimeout(timeout)
    got = 0
    try:
        while chunk := sock.recv(65536):
            got += len(chunk)
    except TimeoutError:
        return got, False
    except ConnectionResetError:
        pass
    return got, True


def test_a_stranger_that_never_sends_the_session_id_is_no_receiver_and_never_stalls_the_source(
    contexts: list[openum.Context], ports: Ports
) -> None:
    # A long handshake bound: everything below happens while the stranger is still connected.
    pub = _context(contexts, ports, SMALL_BUFFERS, "source transport_tcp_activity_timeout 60000")
    sub = _context(contexts, ports)
    events = SourceEvents()
    src = pub.create_source("hostile/stranger", event_callback=events)
    stranger = _raw_connection(src)  # never reads, never sends the session id
    rec = Recorder()
    sub.create_receiver("hostile/stranger", rec)
    assert events.wait(SourceEvent.CONNECT)  # the real receiver
    assert wait_until(lambda: src.statistics().clients_pending == 1, WAIT)
    done = threading.Event()
    thread = _send_all(src, MESSAGES, done)
    assert done.wait(WAIT), f"the sender stalled ({src.statistics()})"
    thread.join(WAIT)
    assert rec.wait_count(MESSAGES), rec.count()
    assert [g.counter for g in rec.of(DATA)] == list(range(MESSAGES))
    stats = src.statistics()
    assert (stats.num_clients, stats.clients_pending) == (1, 1)  # the stranger is still there, pending
    assert stats.clients_stalled == stats.clients_unconfirmed == 0
    assert events.count(SourceEvent.CONNECT) == 1  # the stranger was never announced as a receiver
    # All the stranger was ever sent is the source's session-id message.
    stranger.settimeout(0.2)
    assert stranger.recv(65536) == session_id_message(SourceString.parse(src.source_string).session_id or 0)
    stranger.close()


def test_a_connection_that_never_presents_the_session_id_is_closed_after_the_timeout_and_counted(
    contexts: list[openum.Context], ports: Ports
) -> None:
    pub = _context(contexts, ports, "source transport_tcp_activity_timeout 300")
    events = SourceEvents()
    src = pub.create_source("hostile/unconfirmed", event_callback=events)
    with _raw_connection(src) as stranger:
        got, closed = _eof_after(stranger, WAIT)
        assert closed, "the source kept a connection that never presented the session id"
        assert got == SESSION_ID_MESSAGE_LEN
    stats = src.statistics()
    assert (stats.clients_unconfirmed, stats.clients_pending, stats.num_clients) == (1, 0, 0)
    assert events.count(SourceEvent.CONNECT) == events.count(SourceEvent.DISCONNECT) == 0


def test_garbage_from_a_connection_is_counted_and_closes_it(
    contexts: list[openum.Context], ports: Ports
) -> None:
    pub = _context(contexts, ports)
    src = pub.create_source("hostile/garbage")
    with _raw_connection(src) as peer:
        peer.sendall(b"GET / HTTP/1.1\r\n\r\n")
        _got, closed = _eof_after(peer, WAIT)
        assert closed
    assert wait_until(lambda: src.statistics().clients_malformed == 1, WAIT)
    assert src.statistics().clients_pending == 0


@pytest.mark.parametrize("mode", ["embedded", "sequential"])
def test_a_receiver_that_stops_reading_is_disconnected_after_the_activity_timeout_and_counted(
    contexts: list[openum.Context], ports: Ports, mode: str
) -> None:
    """The stuck peer completes the handshake, then reads nothing: a real receiver keeps getting every
    message, the sender waits no longer than about the bound, and the stuck one is let go and counted.
    In sequential mode nobody runs the publisher's timers while its sender is blocked: the sender lets
    the stuck receiver go itself."""
    pub = _context(
        contexts,
        ports,
        SMALL_BUFFERS,
        "source transport_tcp_activity_timeout 500",
        f"context operational_mode {mode}",
    )
    sub = _context(contexts, ports)
    events = SourceEvents()
    src = pub.create_source("hostile/stuck", event_callback=events)
    info = SourceString.parse(src.source_string)
    assert info.session_id is not None

    def pump(predicate: Callable[[], bool]) -> bool:
        if mode == "sequential":
            return wait_until(lambda: (pub.process_events(5), predicate())[1], WAIT)
        return wait_until(predicate, WAIT)

    stuck_connection: list[socket.socket] = []

    def connect_stuck() -> None:
        sock = _raw_connection(src)
        sock.sendall(session_id_message(info.session_id or 0))  # the handshake, then it stops reading
        stuck_connection.append(sock)

    connector = threading.Thread(target=connect_stuck, daemon=True)
    connector.start()
    assert pump(lambda: src.statistics().num_clients == 1)
    connector.join(WAIT)
    rec = Recorder()
    sub.create_receiver("hostile/stuck", rec)
    assert pump(lambda: src.statistics().num_clients == 2)
    done = threading.Event()
    thread = _send_all(src, MESSAGES, done)  # nobody calls pub.process_events while it runs
    assert done.wait(WAIT), f"the sender stalled ({src.statistics()})"
    thread.join(WAIT)
    # (In sequential mode the context writes what the real receiver has not taken yet in process_events.)
    assert pump(lambda: rec.count() >= MESSAGES), rec.count()
    assert [g.counter for g in rec.of(DATA)] == list(range(MESSAGES))
    stats = src.statistics()
    assert (stats.clients_stalled, stats.num_clients) == (1, 1)
    assert stats.blocked > 0  # the stuck receiver did hold the sender up ...
    assert stats.blocked_ns < 10 * 500 * 1_000_000  # ... for about the bound (generously)
    assert pump(lambda: events.count(SourceEvent.DISCONNECT) == 1)
    _got, closed = _eof_after(stuck_connection[0], WAIT)
    assert closed, "the stuck receiver was not disconnected"
    stuck_connection[0].close()
    # The real receiver is not affected: the next message reaches it.
    sqn = src.send(b"after", SendFlags.FLUSH)
    assert pump(lambda: any(g.sqn == sqn for g in rec.of(DATA)))
    assert rec.count(EOS) == 0


def test_receiver_paced_source_without_a_bound_still_waits_for_its_slowest_receiver(
    contexts: list[openum.Context], ports: Ports
) -> None:
    """``transport_tcp_activity_timeout 0`` is UM's behaviour: a stuck receiver holds the source up for
    as long as it stays stuck, and is not disconnected."""
    pub = _context(contexts, ports, SMALL_BUFFERS, "source transport_tcp_activity_timeout 0")
    events = SourceEvents()
    src = pub.create_source("hostile/unbounded", event_callback=events)
    info = SourceString.parse(src.source_string)
    with _raw_connection(src) as stuck:
        stuck.sendall(session_id_message(info.session_id or 0))
        assert events.wait(SourceEvent.CONNECT)
        payload = bytes(1000)

        def fill() -> None:
            for _ in range(MESSAGES):
                src.send(payload, SendFlags.NONBLOCK)

        with pytest.raises(openum.WouldBlock):
            fill()
        assert src.statistics().clients_stalled == 0


def test_cli_send_reports_time_spent_blocked_and_the_stuck_receiver_it_let_go(
    contexts: list[openum.Context], ports: Ports, procs: Processes
) -> None:
    topic = "hostile/cli"
    gate = threading.Event()
    stuck, reader = Recorder(gate), Recorder()  # the first callback of ``stuck`` blocks its context thread
    try:
        _context(contexts, ports, "context transport_tcp_receiver_socket_buffer 4096").create_receiver(
            topic, stuck
        )
        _context(contexts, ports).create_receiver(topic, reader)
        count = 5000
        pub = procs.openum(
            "send", topic, "--count", str(count), "--size", "1000", "--delay", "0", "--wait-receivers", "2",
            "--linger", "0", "--json", "--option", "source transport_tcp_activity_timeout 500",
            "--option", SMALL_BUFFERS, *ports.argv(),
        )  # fmt: skip
        out, err = pub.communicate(timeout=60)
        assert pub.returncode == 0, err
        summary = last_json(out)
        assert summary["sent"] == count
        assert summary["blocked_sends"] > 0
        assert 0 < summary["blocked_seconds"] <= summary["seconds"]
        assert summary["msgs_per_sec"] == pytest.approx(count / summary["seconds"], rel=0.01)
        assert summary["tcp"]["clients_stalled"] == 1
        assert reader.wait_count(count), reader.count()
    finally:
        gate.set()


def test_the_source_bound_defaults_to_ten_seconds_and_the_receiver_option_keeps_ums_default() -> None:
    from openum.config import ReceiverAttributes, SourceAttributes

    assert SourceAttributes().get("transport_tcp_activity_timeout") == 10000  # documented bound
    assert ReceiverAttributes().get("transport_tcp_activity_timeout") == 0  # UM's: never
