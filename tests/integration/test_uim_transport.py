"""The UIM TCP transport: the request port and the outgoing UIM/response connections (UM Concepts Guide,
sections 10.7 and 10.12), over real sockets on 127.0.0.1 with a real event loop running in a thread."""

from __future__ import annotations

import logging
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openum._errors import ClosedError, InvalidStateError, SystemCallError, WouldBlock
from openum.config import ContextAttributes
from openum.runtime import EventLoop, MonotonicClock
from openum.transport.uim import RequestPort, UimConnectionError, UimConnections
from openum.wire.lbmc import LbmcMessage, MessageType, TopicNameHeader, encode_message
from tests.helpers import wait_until

LOG = logging.getLogger("test.uim")
TIMEOUT = 20.0


def data_msg(payload: bytes, topic: str = "T") -> bytes:
    return encode_message(LbmcMessage(MessageType.DATA, 0, 0, (TopicNameHeader(topic),), payload))


def context_attrs(**options: Any) -> ContextAttributes:
    attrs = ContextAttributes()
    for name, value in options.items():
        attrs.set(name, value)
    return attrs


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def consecutive_free_ports() -> int:
    """A port p such that p and p + 1 were both free just now."""
    for _ in range(200):
        low = free_port()
        if low >= 65535:
            continue
        with socket.socket() as a, socket.socket() as b:
            try:
                a.bind(("127.0.0.1", low))
                b.bind(("127.0.0.1", low + 1))
            except OSError:
                continue
        return low
    raise AssertionError("no two consecutive free ports found")


class Inbox:
    """Collects what a message handler receives."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[LbmcMessage, tuple[str, int]]] = []

    def __call__(self, msg: LbmcMessage, peer: tuple[str, int]) -> None:
        with self.lock:
            self.items.append((msg, peer))

    def __len__(self) -> int:
        with self.lock:
            return len(self.items)

    def payloads(self) -> list[bytes]:
        with self.lock:
            return [bytes(m.payload) for m, _ in self.items]

    def wait_for(self, count: int) -> None:
        assert wait_until(lambda: len(self) >= count, TIMEOUT), f"got {len(self)} of {count} messages"


@pytest.fixture
def loop() -> Iterator[EventLoop]:
    ev = EventLoop(MonotonicClock(), LOG, "uim-test")
    thread = threading.Thread(target=ev.run, name="uim-loop", daemon=True)
    thread.start()
    yield ev
    ev.stop()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    ev.close()


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(obj)``: close ``obj`` when the test ends (returns it)."""
    objects: list[Any] = []

    def add(obj: Any) -> Any:
        objects.append(obj)
        return obj

    yield add
    for obj in reversed(objects):
        obj.close()


@pytest.fixture
def make_port(loop: EventLoop, closing: Callable[[Any], Any]) -> Callable[..., RequestPort]:
    def make(handler: Any = None, *, max_incoming: int | None = None, **options: Any) -> RequestPort:
        options.setdefault("request_tcp_port", free_port())
        extra = {} if max_incoming is None else {"max_incoming": max_incoming}
        port = RequestPort(
            loop,
            context_attrs(**options),
            "127.0.0.1",
            handler if handler is not None else Inbox(),
            LOG,
            **extra,
        )
        closing(port)
        port.start()
        return port

    return make


@pytest.fixture
def make_conns(loop: EventLoop, closing: Callable[[Any], Any]) -> Callable[..., UimConnections]:
    def make(on_message: Any = None, **options: Any) -> UimConnections:
        conns = UimConnections(loop, context_attrs(**options), "127.0.0.1", LOG, on_message=on_message)
        closing(conns)
        return conns

    return make


def silent_listener(closing: Callable[[Any], Any]) -> tuple[str, int]:
    """A listener that accepts nothing and reads nothing (small buffers: it fills up fast)."""
    sock = closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    return ("127.0.0.1", sock.getsockname()[1])


def raw_client(closing: Callable[[Any], Any], address: tuple[str, int]) -> socket.socket:
    sock: socket.socket = closing(socket.create_connection(address, timeout=TIMEOUT))
    return sock


def sees_eof(sock: socket.socket) -> bool:
    """The peer closed ``sock`` (a reset counts too)."""
    sock.settimeout(TIMEOUT)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def expect_refused(conns: UimConnections, dest: tuple[str, int]) -> UimConnectionError:
    """Send to a dead ``dest``: the refusal is raised by this send or, after the connect failed, by the
    next one."""
    try:
        conns.send(dest, data_msg(b"lost"))
    except UimConnectionError as exc:
        return exc
    assert wait_until(lambda: conns.statistics()["connections_active"] == 0, TIMEOUT)
    with pytest.raises(UimConnectionError) as info:
        conns.send(dest, data_msg(b"reports"))
    return info.value


# -- the request port and the connections together ---------------------------------------------------------


def test_many_messages_arrive_in_order_over_one_connection(make_port: Any, make_conns: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    conns = make_conns(response_session_maximum_buffer=0)
    count = 10_000
    sent = 0
    for i in range(count):
        size = 65_000 if i % 500 == 0 else i % 300
        raw = data_msg(struct.pack(">I", i) + bytes([i & 0xFF]) * size)
        sent += len(raw)
        conns.send(port.address, raw)
    inbox.wait_for(count)
    # the payloads were kept past their callbacks: they must still read right
    for i, (msg, peer) in enumerate(inbox.items):
        assert msg.type is MessageType.DATA
        header = msg.header(TopicNameHeader)
        assert header is not None and header.topic == "T"
        assert struct.unpack_from(">I", msg.payload)[0] == i
        size = 65_000 if i % 500 == 0 else i % 300
        assert bytes(msg.payload[4:]) == bytes([i & 0xFF]) * size
        assert peer[0] == "127.0.0.1"
    out = conns.statistics()
    assert out["connections_opened"] == 1
    assert out["msgs_sent"] == count
    assert out["bytes_sent"] == sent
    assert out["msgs_dropped"] == 0
    assert wait_until(lambda: conns.statistics()["bytes_queued"] == 0, TIMEOUT)
    stats = port.statistics()
    assert stats["connections_accepted"] == 1
    assert stats["msgs_rcved"] == count
    assert stats["bytes_rcved"] == sent


def test_sends_from_many_threads_keep_each_threads_order(make_port: Any, make_conns: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    conns = make_conns(response_session_maximum_buffer=0)
    threads, per_thread = 4, 500

    def sender(tid: int) -> None:
        for i in range(per_thread):
            conns.send(port.address, data_msg(struct.pack(">II", tid, i)))

    workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(TIMEOUT)
    inbox.wait_for(threads * per_thread)
    seen: dict[int, list[int]] = {t: [] for t in range(threads)}
    for payload in inbox.payloads():
        tid, i = struct.unpack(">II", payload)
        seen[tid].append(i)
    assert all(order == list(range(per_thread)) for order in seen.values())
    assert conns.statistics()["connections_opened"] == 1


def test_two_sends_to_one_destination_share_a_connection(make_port: Any, make_conns: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    conns = make_conns()
    conns.send(port.address, data_msg(b"one"))
    inbox.wait_for(1)
    conns.send(port.address, data_msg(b"two"))
    inbox.wait_for(2)
    assert inbox.payloads() == [b"one", b"two"]
    assert conns.statistics()["connections_opened"] == 1
    assert conns.statistics()["connections_active"] == 1
    assert port.statistics()["connections_accepted"] == 1


def test_deletion_timeout_closes_an_unused_connection(make_port: Any, make_conns: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    conns = make_conns(response_tcp_deletion_timeout=200)
    conns.send(port.address, data_msg(b"x"))
    inbox.wait_for(1)
    assert wait_until(lambda: conns.statistics()["connections_active"] == 0, TIMEOUT)
    assert conns.statistics()["connections_closed_idle"] == 1
    assert conns.statistics()["msgs_dropped"] == 0
    # the request port sees the connection end
    assert wait_until(lambda: port.statistics()["connections_active"] == 0, TIMEOUT)
    conns.send(port.address, data_msg(b"again"))  # a later send connects again
    inbox.wait_for(2)
    assert conns.statistics()["connections_opened"] == 2


def test_hold_keeps_the_connection_past_the_deletion_timeout(make_port: Any, make_conns: Any) -> None:
    inbox = Inbox()
    held_port, other_port = make_port(inbox), make_port(inbox)
    conns = make_conns(response_tcp_deletion_timeout=200)
    held, other = held_port.address, other_port.address
    conns.hold(held)
    conns.connect(held)  # as on a received request: connect back at once
    conns.send(held, data_msg(b"response"))
    inbox.wait_for(1)
    conns.send(other, data_msg(b"later"))  # sent after the held one: its timeout ends later
    inbox.wait_for(2)
    assert wait_until(lambda: other_port.statistics()["connections_active"] == 0, TIMEOUT)
    assert conns.statistics()["connections_closed_idle"] == 1
    assert held_port.statistics()["connections_active"] == 1  # still open: held
    assert conns.pending(held) == 0
    conns.hold(held)
    conns.release(held)
    conns.release(held)  # the last holder lets go: the deletion timeout starts
    assert wait_until(lambda: conns.statistics()["connections_active"] == 0, TIMEOUT)
    assert conns.statistics()["connections_closed_idle"] == 2
    with pytest.raises(InvalidStateError, match="without a matching hold"):
        conns.release(held)


def test_refused_destination_is_reported_then_a_new_listener_works(
    loop: EventLoop, make_conns: Any, closing: Any
) -> None:
    conns = make_conns()
    port_number = free_port()
    dest = ("127.0.0.1", port_number)
    exc = expect_refused(conns, dest)
    assert f"TCP:127.0.0.1:{port_number}" in str(exc)
    assert "ECONNREFUSED" in str(exc)
    assert isinstance(exc, ConnectionError)
    stats = conns.statistics()
    assert stats["connections_failed"] == 1
    # the peer appears (a restarted requester): the next send connects again
    inbox = Inbox()
    port = closing(RequestPort(loop, context_attrs(request_tcp_port=port_number), "127.0.0.1", inbox, LOG))
    port.start()
    conns.send(dest, data_msg(b"works"))
    inbox.wait_for(1)
    assert inbox.payloads() == [b"works"]


def test_connect_ahead_never_raises_and_the_next_send_reports(make_conns: Any) -> None:
    conns = make_conns()
    port_number = free_port()
    dest = ("127.0.0.1", port_number)
    conns.connect(dest)  # refused: not raised here
    assert wait_until(lambda: conns.statistics()["connections_failed"] == 1, TIMEOUT)
    with pytest.raises(UimConnectionError, match=f"TCP:127.0.0.1:{port_number}"):
        conns.send(dest, data_msg(b"x"))
    assert conns.statistics()["connections_opened"] == 1


def test_bytes_queued_for_a_failed_connection_are_dropped_and_counted(make_conns: Any) -> None:
    conns = make_conns()
    dest = ("127.0.0.1", free_port())
    try:
        conns.send(dest, data_msg(b"queued while connecting"))
    except UimConnectionError:
        pytest.skip("this system refuses loopback connections at once: nothing was queued")
    assert wait_until(lambda: conns.statistics()["connections_failed"] == 1, TIMEOUT)
    stats = conns.statistics()
    assert stats["msgs_sent"] == 1
    assert stats["msgs_dropped"] == 1
    assert stats["bytes_dropped"] == len(data_msg(b"queued while connecting"))
    assert stats["bytes_queued"] == 0


# -- the request port ---------------------------------------------------------------------------------------


def test_malformed_bytes_close_only_that_connection(make_port: Any, closing: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    good = raw_client(closing, port.address)
    bad = raw_client(closing, port.address)
    good.sendall(data_msg(b"first"))
    inbox.wait_for(1)
    bad.sendall(data_msg(b"from the other"))
    inbox.wait_for(2)
    bad.sendall(b"\xff" * 16)
    assert wait_until(lambda: port.statistics()["connections_closed_malformed"] == 1, TIMEOUT)
    assert sees_eof(bad)
    good.sendall(data_msg(b"second"))
    inbox.wait_for(3)
    assert inbox.payloads() == [b"first", b"from the other", b"second"]
    stats = port.statistics()
    assert stats["msgs_dropped_malformed"] == 1
    assert stats["connections_active"] == 1
    assert stats["connections_accepted"] == 2


def test_a_message_whose_headers_do_not_decode_closes_the_connection(make_port: Any, closing: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox)
    client = raw_client(closing, port.address)
    raw = bytearray(data_msg(b"payload"))
    raw[13] = 0xFF  # the TOPICNAME header's length: it runs past the end of the message
    client.sendall(data_msg(b"good") + bytes(raw))
    assert wait_until(lambda: port.statistics()["connections_closed_malformed"] == 1, TIMEOUT)
    assert sees_eof(client)
    assert inbox.payloads() == [b"good"]
    assert port.statistics()["msgs_dropped_malformed"] == 1


def test_a_raising_handler_is_logged_and_the_connection_goes_on(
    make_port: Any, closing: Any, caplog: pytest.LogCaptureFixture
) -> None:
    inbox = Inbox()

    def handler(msg: LbmcMessage, peer: tuple[str, int]) -> None:
        if bytes(msg.payload) == b"boom":
            raise RuntimeError("handler failure")
        inbox(msg, peer)

    port = make_port(handler)
    client = raw_client(closing, port.address)
    with caplog.at_level(logging.ERROR, logger=LOG.name):
        client.sendall(data_msg(b"boom") + data_msg(b"after"))
        inbox.wait_for(1)
    assert inbox.payloads() == [b"after"]
    assert any("handler raised" in r.getMessage() and r.exc_info for r in caplog.records)
    assert port.statistics()["connections_active"] == 1
    assert port.statistics()["msgs_rcved"] == 2


def test_incoming_activity_timeout_closes_silent_connections(make_port: Any, closing: Any) -> None:
    port = make_port(request_tcp_activity_timeout=200)
    silent = raw_client(closing, port.address)
    assert wait_until(lambda: port.statistics()["connections_closed_idle"] == 1, TIMEOUT)
    assert sees_eof(silent)
    assert port.statistics()["connections_active"] == 0


def test_too_many_incoming_connections_are_closed_at_once(make_port: Any, closing: Any) -> None:
    inbox = Inbox()
    port = make_port(inbox, max_incoming=2)
    first, second = raw_client(closing, port.address), raw_client(closing, port.address)
    assert wait_until(lambda: port.statistics()["connections_accepted"] == 2, TIMEOUT)
    third = raw_client(closing, port.address)
    assert wait_until(lambda: port.statistics()["connections_refused_limit"] == 1, TIMEOUT)
    assert sees_eof(third)
    first.sendall(data_msg(b"still served"))
    second.sendall(data_msg(b"also"))
    inbox.wait_for(2)
    assert sorted(inbox.payloads()) == [b"also", b"still served"]
    assert port.statistics()["connections_active"] == 2


def test_request_tcp_port_binds_the_given_port(make_port: Any, loop: EventLoop, closing: Any) -> None:
    number = free_port()
    port = make_port(request_tcp_port=number, request_tcp_reuseaddr=True, request_tcp_listen_backlog=16)
    assert port.address == ("127.0.0.1", number)
    with pytest.raises(SystemCallError, match=f"request_tcp_port {number}"):
        RequestPort(loop, context_attrs(request_tcp_port=number), "127.0.0.1", Inbox(), LOG)


def test_the_first_free_port_of_the_range_is_taken(loop: EventLoop, closing: Any) -> None:
    low = consecutive_free_ports()
    taken = closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    taken.bind(("127.0.0.1", low))
    taken.listen(1)
    attrs = context_attrs(request_tcp_port_low=low, request_tcp_port_high=low + 1)
    port = closing(RequestPort(loop, attrs, "127.0.0.1", Inbox(), LOG))
    assert port.address == ("127.0.0.1", low + 1)
    with pytest.raises(SystemCallError) as info:
        RequestPort(loop, attrs, "127.0.0.1", Inbox(), LOG)
    message = str(info.value)
    assert f"{low}-{low + 1}" in message
    assert "request_tcp_port_low" in message and "request_tcp_port_high" in message


def test_request_tcp_interface_chooses_the_address(loop: EventLoop, closing: Any) -> None:
    attrs = context_attrs(request_tcp_interface="127.0.0.2", request_tcp_port=free_port())
    try:
        port = closing(RequestPort(loop, attrs, "127.0.0.1", Inbox(), LOG))
    except SystemCallError:
        pytest.skip("127.0.0.2 is not bindable here")
    assert port.address[0] == "127.0.0.2"


def test_close_is_idempotent_and_closes_accepted_connections(make_port: Any, closing: Any) -> None:
    port = make_port()
    client = raw_client(closing, port.address)
    assert wait_until(lambda: port.statistics()["connections_active"] == 1, TIMEOUT)
    port.close()
    port.close()
    assert sees_eof(client)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(port.address, timeout=TIMEOUT).close()


# -- the outgoing connections -------------------------------------------------------------------------------


def fill(conns: UimConnections, dest: tuple[str, int], size: int = 60_000) -> WouldBlock | None:
    """Send ``size``-byte messages to a peer that reads nothing until the queue holds bytes; then one
    more.  The WouldBlock raised, if any."""
    for _ in range(2_000):
        try:
            conns.send(dest, data_msg(b"\x00" * size))
        except WouldBlock as exc:
            return exc
        if conns.pending(dest):
            return None
    raise AssertionError("the peer's buffers never filled")


def test_would_block_past_the_maximum_buffer(make_conns: Any, closing: Any) -> None:
    dest = silent_listener(closing)
    conns = make_conns(response_session_maximum_buffer=65536, response_session_sender_socket_buffer=4096)
    conns.send(dest, data_msg(b"hello"))
    assert wait_until(lambda: conns.pending(dest) == 0, TIMEOUT)  # connected: the socket took it
    blocked: WouldBlock | None = None
    for _ in range(2_000):
        try:
            conns.send(dest, data_msg(b"\x00" * 40_000))
        except WouldBlock as exc:
            blocked = exc
            break
    assert blocked is not None
    assert "response_session_maximum_buffer" in str(blocked)
    assert "TCP:127.0.0.1:" in str(blocked)
    assert 0 < conns.pending(dest) <= 65536
    assert conns.statistics()["bytes_queued"] == conns.pending(dest)


def test_outgoing_activity_timeout_closes_a_stalled_connection(make_conns: Any, closing: Any) -> None:
    dest = silent_listener(closing)
    conns = make_conns(
        response_tcp_activity_timeout=300,
        response_session_maximum_buffer=0,
        response_session_sender_socket_buffer=4096,
    )
    conns.send(dest, data_msg(b"hello"))
    assert wait_until(lambda: conns.pending(dest) == 0, TIMEOUT)
    assert fill(conns, dest) is None
    assert wait_until(lambda: conns.statistics()["connections_closed_stalled"] == 1, TIMEOUT)
    stats = conns.statistics()
    assert stats["msgs_dropped"] >= 1
    assert stats["bytes_dropped"] > 0
    assert stats["connections_active"] == 0
    with pytest.raises(UimConnectionError, match="response_tcp_activity_timeout"):
        conns.send(dest, data_msg(b"x"))


def test_messages_sent_back_on_an_outgoing_connection(make_conns: Any, closing: Any) -> None:
    listener = closing(socket.create_server(("127.0.0.1", 0)))
    dest = ("127.0.0.1", listener.getsockname()[1])
    inbox = Inbox()
    both = make_conns(on_message=inbox)
    silent = make_conns()
    both.send(dest, data_msg(b"to the peer"))
    silent.send(dest, data_msg(b"from the other"))
    listener.settimeout(TIMEOUT)
    for _ in range(2):
        peer_sock, _ = listener.accept()
        closing(peer_sock)
        peer_sock.sendall(data_msg(b"back"))
    inbox.wait_for(1)
    assert inbox.items[0][1] == dest
    assert inbox.payloads() == [b"back"]
    assert wait_until(lambda: silent.statistics()["msgs_discarded"] == 1, TIMEOUT)
    assert silent.statistics()["msgs_rcved"] == 1


def test_close_drops_what_is_queued(make_conns: Any, closing: Any) -> None:
    dest = silent_listener(closing)
    conns = make_conns(response_session_maximum_buffer=0, response_session_sender_socket_buffer=4096)
    conns.send(dest, data_msg(b"hello"))
    assert wait_until(lambda: conns.pending(dest) == 0, TIMEOUT)
    assert fill(conns, dest) is None
    queued = conns.pending(dest)
    conns.close()
    conns.close()
    stats = conns.statistics()
    assert stats["bytes_dropped"] == queued
    assert stats["msgs_dropped"] >= 1
    assert stats["connections_active"] == 0 and stats["bytes_queued"] == 0
    with pytest.raises(ClosedError):
        conns.send(dest, data_msg(b"x"))


def test_statistics_names_are_stable(make_port: Any, make_conns: Any) -> None:
    assert set(make_port().statistics()) == {
        "connections_accepted",
        "connections_active",
        "connections_refused_limit",
        "connections_closed_idle",
        "connections_closed_malformed",
        "msgs_rcved",
        "bytes_rcved",
        "msgs_dropped_malformed",
    }
    assert {
        "connections_opened",
        "connections_active",
        "connections_failed",
        "connections_closed_idle",
        "connections_closed_stalled",
        "msgs_sent",
        "bytes_sent",
        "msgs_dropped",
        "bytes_dropped",
        "bytes_queued",
    } <= set(make_conns().statistics())
