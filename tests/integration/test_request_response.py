"""Request/response, unicast immediate messages and sending to sources, between real contexts on 127.0.0.1
(UM Concepts Guide 10.7, 10.12, 10.15; issue 24).

Each test has its own resolver, transport and request ports (``tests.integration.pubsub.Ports``).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any

import pytest

import openum
from openum import InvalidStateError, Message, MsgFlags, MsgType, SourceEvent, UimConnectionError
from openum._immediate import MAX_IMMEDIATE_LEN
from openum.transport.uim import MAX_INCOMING
from openum.wire.lbmc import FragmentHeader, LbmcMessage, MessageType, TsniHeader, encode_message
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Contexts, Ports, Recorder, SourceEvents
from tests.integration.test_lbmrd_process import free_udp_port

TRANSPORTS = ("tcp", "lbtru", "lbtrm")


@dataclass(frozen=True)
class Reply:
    type: MsgType
    data: bytes
    clientd: Any
    source: str


class Responses:
    """A response callback that keeps copies."""

    def __init__(self) -> None:
        self.got: list[Reply] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Message) -> None:
        with self.lock:
            self.got.append(Reply(msg.type, bytes(msg.data), msg.receiver_clientd, msg.source))

    def count(self) -> int:
        with self.lock:
            return len(self.got)

    def wait(self, n: int) -> bool:
        return wait_until(lambda: self.count() >= n, WAIT)


class Server:
    """A receiver callback that answers every request with ``prefix + request``."""

    def __init__(self, prefix: bytes, retain: bool = False) -> None:
        self.prefix = prefix
        self.retain = retain
        self.requests: list[Message] = []
        self.errors: list[Exception] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Message) -> None:
        if msg.type is not MsgType.REQUEST:
            return
        if self.retain:
            with self.lock:
                self.requests.append(msg.retain())
            return
        msg.respond(self.prefix + bytes(msg.data))

    def count(self) -> int:
        with self.lock:
            return len(self.requests)


def _topic_ready(
    pub: openum.Context, src: openum.Source, events: SourceEvents, transport: str, subs: list[openum.Context]
) -> None:
    """The source's receivers can get what it sends now."""
    if transport == "lbtrm":
        assert wait_until(lambda: all(s.statistics().lbtrm_rcv_sessions >= 1 for s in subs), WAIT)
    else:
        assert events.wait(SourceEvent.CONNECT, len(subs)), "the receivers never connected"


def _source(pub: openum.Context, topic: str, transport: str) -> tuple[openum.Source, SourceEvents]:
    events = SourceEvents()
    src = pub.create_source(topic, attrs={"transport": transport}, event_callback=events)
    return src, events


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_request_reaches_every_server_and_each_response_its_request(
    contexts: Contexts, transport: str
) -> None:
    client, one, two = contexts.new(), contexts.new(), contexts.new()
    server_one = one.create_receiver("svc", Server(b"one:"))
    two.create_receiver("svc", Server(b"two:"))
    src, events = _source(client, "svc", transport)
    _topic_ready(client, src, events, transport, [one, two])
    first, second = Responses(), Responses()
    with src.send_request(b"A", first, 42, flags=openum.SendFlags.FLUSH) as req_a:
        req_b = src.send_request(b"B", second, "b", flags=openum.SendFlags.FLUSH)
        assert first.wait(2) and second.wait(2), (first.got, second.got, client.statistics())
        assert sorted(r.data for r in first.got) == [b"one:A", b"two:A"]
        assert sorted(r.data for r in second.got) == [b"one:B", b"two:B"]
        assert {r.clientd for r in first.got} == {42} and {r.clientd for r in second.got} == {"b"}
        assert {r.type for r in first.got + second.got} == {MsgType.RESPONSE}
        assert req_a.responses == 2 and req_a.index != req_b.index
        req_b.close()
    stats = client.statistics()
    assert stats.request_msgs_sent == 2 and stats.response_msgs_rcved == 4 and stats.requests_open == 0
    assert one.statistics().request_msgs_rcved == 2 and one.statistics().response_msgs_sent == 2
    assert server_one.statistics().msgs_rcved == 2  # requests are messages of the topic


def test_a_large_request_and_a_large_response_are_fragmented_and_whole(contexts: Contexts) -> None:
    client, server = contexts.new(), contexts.new()
    big = bytes(range(256)) * 800  # 204,800 bytes: fragments on the way out and a long UIM back
    server.create_receiver(
        "big", lambda m: m.respond(bytes(m.data)[::-1]) if m.type is MsgType.REQUEST else None
    )
    src, events = _source(client, "big", "lbtrm")
    _topic_ready(client, src, events, "lbtrm", [server])
    got = Responses()
    with src.send_request(big, got, flags=openum.SendFlags.FLUSH):
        assert got.wait(1)
    assert got.got[0].data == big[::-1]


def test_a_closed_request_drops_late_responses_and_counts_them(contexts: Contexts) -> None:
    client, server = contexts.new(), contexts.new()
    holder = Server(b"late:", retain=True)
    server.create_receiver("svc", holder)
    src, events = _source(client, "svc", "tcp")
    _topic_ready(client, src, events, "tcp", [server])
    got = Responses()
    request = src.send_request(b"x", got, flags=openum.SendFlags.FLUSH)
    assert wait_until(lambda: holder.count() == 1, WAIT)
    retained = holder.requests[0]
    retained.respond(b"on time")
    assert got.wait(1)
    request.close()
    retained.respond(b"too late")
    assert wait_until(lambda: client.statistics().response_msgs_dropped == 1, WAIT)
    assert [r.data for r in got.got] == [b"on time"]
    retained.release()
    with pytest.raises(InvalidStateError, match="no longer alive"):
        retained.respond(b"after release")


def test_respond_is_refused_on_a_message_that_is_not_a_request(contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    errors: list[str] = []

    def callback(msg: Message) -> None:
        if msg.type is MsgType.DATA:
            try:
                msg.respond(b"no")
            except InvalidStateError as exc:
                errors.append(str(exc))

    sub.create_receiver("plain", callback)
    src, events = _source(pub, "plain", "tcp")
    _topic_ready(pub, src, events, "tcp", [sub])
    src.send(b"data", openum.SendFlags.FLUSH)
    assert wait_until(lambda: errors, WAIT)
    assert "only a REQUEST message can be answered; this is a DATA message" in errors[0]


def test_a_responder_whose_requester_died_gets_a_clear_error(ports: Ports) -> None:
    server = openum.Context(options=ports.options())
    client = openum.Context(options=ports.options())
    holder = Server(b"", retain=True)
    try:
        server.create_receiver("svc", holder)
        src, events = _source(client, "svc", "tcp")
        _topic_ready(client, src, events, "tcp", [server])
        src.send_request(b"x", Responses(), flags=openum.SendFlags.FLUSH)
        assert wait_until(lambda: holder.count() == 1, WAIT)
        target = f"TCP:{client.request_port[0]}:{client.request_port[1]}"  # type: ignore[index]
        client.__exit__(None, None, None)  # the requester goes away, its request port with it
        msg = holder.requests[0]
        errors: list[UimConnectionError] = []

        def fails() -> bool:
            try:
                msg.respond(b"anyone there?")
            except UimConnectionError as exc:
                errors.append(exc)
                return True
            return False

        assert wait_until(fails, WAIT), server.statistics()
        assert target in str(errors[0])
        assert server.statistics().uim_out_connections_failed >= 1
        msg.release()
    finally:
        server.__exit__(None, None, None)
        client.__exit__(None, None, None)


# ---- unicast immediate messages (10.7)


class ContextInbox:
    def __init__(self) -> None:
        self.got: list[tuple[str, bytes, int, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, msg: Message, clientd: Any) -> None:
        with self.lock:
            self.got.append((msg.topic, bytes(msg.data), int(msg.flags), clientd))

    def wait(self, n: int) -> bool:
        return wait_until(lambda: len(self.got) >= n, WAIT)


def test_a_uim_with_a_topic_reaches_only_the_target_contexts_receiver(contexts: Contexts) -> None:
    sender, target, bystander = contexts.new(), contexts.new(), contexts.new()
    at_target, at_bystander = Recorder(), Recorder()
    target.create_receiver("T", at_target)
    bystander.create_receiver("T", at_bystander)
    assert target.immediate_target == f"TCP:{target.request_port[0]}:{target.request_port[1]}"  # type: ignore[index]
    sender.unicast_immediate_message(target.immediate_target, b"hello", topic="T")  # type: ignore[arg-type]
    assert wait_until(lambda: at_target.count() == 1, WAIT)
    (got,) = at_target.of(MsgType.DATA)
    assert got.data == b"hello" and got.topic == "T"
    sender.unicast_immediate_message(target.immediate_target, b"second", topic="T")  # type: ignore[arg-type]
    assert wait_until(lambda: at_target.count() == 2, WAIT)
    assert at_bystander.count() == 0
    assert sender.statistics().uim_out_connections_opened == 1  # one connection, reused
    assert target.statistics().immediate_msgs_rcved == 2


def test_uim_flags_topicless_and_topic_callbacks_and_drops(contexts: Contexts) -> None:
    sender, target = contexts.new(), contexts.new()
    flags: list[int] = []
    target.create_receiver("T", lambda m: flags.append(int(m.flags)))
    topicless, other_topics = ContextInbox(), ContextInbox()
    address = target.immediate_target
    assert address is not None
    sender.unicast_immediate_message(address, b"nobody")  # no callback yet: dropped, counted
    assert wait_until(lambda: target.statistics().immediate_msgs_dropped_no_receiver == 1, WAIT)
    target.receive_immediate_messages(topicless, "ctx-d")
    target.receive_immediate_topic_messages(other_topics, "topic-d")
    sender.unicast_immediate_message(address, b"t", topic="T")
    sender.unicast_immediate_message(address, b"none")
    sender.unicast_immediate_message(address, b"u", topic="Unheard")
    assert topicless.wait(1) and other_topics.wait(1) and wait_until(lambda: flags, WAIT)
    assert flags[0] & MsgFlags.IMMEDIATE and not flags[0] & MsgFlags.TOPICLESS
    (none,) = topicless.got
    assert none[1:] == (b"none", int(MsgFlags.IMMEDIATE | MsgFlags.TOPICLESS), "ctx-d")
    assert other_topics.got == [("Unheard", b"u", int(MsgFlags.IMMEDIATE), "topic-d")]


def test_a_wildcard_receiver_gets_uims_of_matching_topics(contexts: Contexts) -> None:
    sender, target = contexts.new(), contexts.new()
    rec = Recorder()
    target.create_wildcard_receiver(r"^W/.*", rec)
    sender.unicast_immediate_message(target.immediate_target or "", b"w", topic="W/1")
    assert wait_until(lambda: rec.count() == 1, WAIT)
    assert rec.of(MsgType.DATA)[0].topic == "W/1"


def test_immediate_messages_through_event_queues_are_counted(contexts: Contexts) -> None:
    sender, target = contexts.new(), contexts.new()
    evq = openum.EventQueue(attrs={"queue_count_enabled": 1})
    try:
        inbox = ContextInbox()
        target.receive_immediate_messages(inbox, None, event_queue=evq)
        target.create_receiver("svc", lambda m: m.respond(b"r") if m.type is MsgType.REQUEST else None)
        sender.unicast_immediate_message(target.immediate_target or "", b"q")
        got = Responses()
        with sender.unicast_immediate_request(
            target.immediate_target or "", b"?", got, topic="svc", event_queue=evq
        ):
            assert wait_until(lambda: evq.statistics().topicless_im_msgs_tot == 1, WAIT)
            assert wait_until(lambda: evq.statistics().resp_msgs_tot == 1, WAIT)
            while evq.dispatch(openum.EventQueue.POLL):
                pass
        assert inbox.got[0][1] == b"q" and [r.data for r in got.got] == [b"r"]
    finally:
        evq.close()


def test_an_immediate_request_to_a_topicless_callback_is_answered(contexts: Contexts) -> None:
    client, server = contexts.new(), contexts.new()
    server.receive_immediate_messages(lambda m, _d: m.respond(b"pong:" + bytes(m.data)))
    got = Responses()
    with client.unicast_immediate_request(server.immediate_target or "", b"ping", got, clientd=7):
        assert got.wait(1)
    assert got.got[0].data == b"pong:ping" and got.got[0].clientd == 7


# ---- sending to sources (10.15)


def test_sending_to_a_source_reaches_that_sources_context_and_no_other(contexts: Contexts) -> None:
    publisher, other_publisher, subscriber = contexts.new(), contexts.new(), contexts.new()
    inbox, other_inbox = ContextInbox(), ContextInbox()
    publisher.receive_immediate_messages(inbox)
    other_publisher.receive_immediate_messages(other_inbox)
    sources: list[str] = []
    subscriber.create_receiver("feed", lambda m: sources.append(m.source) if m.type is MsgType.BOS else None)
    subscriber.create_receiver("feed2", lambda m: None)
    src, events = _source(publisher, "feed", "tcp")
    other_publisher.create_source("feed2", attrs={"transport": "tcp"})
    assert events.wait(SourceEvent.CONNECT, 1) and wait_until(lambda: sources, WAIT)
    subscriber.unicast_immediate_message(f"SOURCE:{sources[0]}", b"refresh please")
    assert inbox.wait(1)
    assert inbox.got[0][1] == b"refresh please"
    assert other_inbox.got == []
    with pytest.raises(ValueError, match="only with the SOURCE: prefix"):
        subscriber.unicast_immediate_message(sources[0], b"bare")
    with pytest.raises(ValueError, match="not in this context's resolver cache"):
        subscriber.unicast_immediate_message("SOURCE:TCP:127.0.0.1:9:1", b"unknown")
    del src


def test_a_message_sent_to_a_source_reaches_that_sources_callback_and_no_other(contexts: Contexts) -> None:
    publisher, subscriber = contexts.new(), contexts.new()
    context_inbox, feed_inbox, other_inbox = ContextInbox(), ContextInbox(), ContextInbox()
    publisher.receive_immediate_messages(context_inbox)
    feed_events = SourceEvents()
    feed = publisher.create_source("feed/a", attrs={"transport": "tcp"}, event_callback=feed_events)
    other = publisher.create_source("feed/b", attrs={"transport": "tcp"})  # same session, next topic index
    feed.receive_immediate_messages(feed_inbox, "feed-d")
    other.receive_immediate_messages(other_inbox, "other-d")
    sources: list[str] = []
    subscriber.create_receiver(
        "feed/a", lambda m: sources.append(m.source) if m.type is MsgType.BOS else None
    )
    assert feed_events.wait(SourceEvent.CONNECT) and wait_until(lambda: sources, WAIT)
    subscriber.unicast_immediate_message(f"SOURCE:{sources[0]}", b"refresh")
    got = Responses()
    with subscriber.unicast_immediate_request(f"SOURCE:{sources[0]}", b"snapshot?", got):
        assert feed_inbox.wait(2)
        assert feed_inbox.got[0] == ("", b"refresh", int(MsgFlags.IMMEDIATE | MsgFlags.TOPICLESS), "feed-d")
        assert context_inbox.got == [] and other_inbox.got == []
    # Without its own callback, a source's messages reach the context's.
    feed.receive_immediate_messages(None)
    subscriber.unicast_immediate_message(f"SOURCE:{sources[0]}", b"to the context")
    assert context_inbox.wait(1) and context_inbox.got[0][1] == b"to the context"
    other.close()
    feed.close()


# ---- the request port


def test_malformed_bytes_on_the_request_port_are_counted_and_the_context_keeps_working(
    contexts: Contexts,
) -> None:
    sender, target = contexts.new(), contexts.new()
    inbox = ContextInbox()
    target.receive_immediate_messages(inbox)
    with socket.create_connection(target.request_port) as raw:  # type: ignore[arg-type]
        raw.sendall(b"\xff" * 64)  # version nibble 0xf: not LBMC
        assert wait_until(lambda: target.statistics().uim_port_connections_closed_malformed == 1, WAIT)
    sender.unicast_immediate_message(target.immediate_target or "", b"still here")
    assert inbox.wait(1)


def test_request_port_options(ports: Ports) -> None:
    with openum.Context(options=ports.options("context request_tcp_bind_request_port 0")) as none:
        assert none.request_port is None and none.immediate_target is None
        src = none.create_source("x", attrs={"transport": "tcp"})
        with pytest.raises(InvalidStateError, match="request_tcp_bind_request_port is 0"):
            src.send_request(b"r", Responses())
        src.close()
    port = ports.request_low + 3
    with openum.Context(options=ports.options(f"context request_tcp_port {port}")) as fixed:
        assert fixed.request_port == ("127.0.0.1", port)
    with pytest.raises(ValueError, match="not valid"), openum.Context(options=ports.options()) as ctx:
        ctx.unicast_immediate_message("UDP:1.2.3.4:5", b"")


def test_send_request_refuses_batching_flags_and_bad_callbacks(contexts: Contexts) -> None:
    ctx = contexts.new()
    src = ctx.create_source("flags", attrs={"transport": "tcp"})
    with pytest.raises(ValueError, match="cannot be part of an explicit batch"):
        src.send_request(b"", Responses(), flags=openum.SendFlags.START_BATCH)
    with pytest.raises(TypeError, match="must be callable"):
        src.send_request(b"", "not a function")  # type: ignore[arg-type]
    assert ctx.statistics().requests_open == 0


# ---- every connection counter moves (tests/integration/test_context_statistics.py maps them here)


def test_uim_connections_are_counted_active_while_open(contexts: Contexts) -> None:
    sender, target = contexts.new(), contexts.new()  # default timeouts: nothing closes during the test
    inbox = ContextInbox()
    target.receive_immediate_messages(inbox)
    sender.unicast_immediate_message(target.immediate_target or "", b"counted")
    assert inbox.wait(1)
    assert sender.statistics().uim_out_connections_active == 1
    assert target.statistics().uim_port_connections_active == 1


def test_every_request_port_and_uim_connection_counter_moves(ports: Ports) -> None:
    # The target's idle timeout is well above the sender's deletion timeout: the sender closes first (an
    # incoming connection the target closed would end the sender's quietly, not as idle).
    idle = "context request_tcp_activity_timeout 1500"
    quick = ("context response_tcp_deletion_timeout 300", "context response_tcp_activity_timeout 300")
    with (
        openum.Context(options=ports.options(idle)) as target,
        openum.Context(
            options=ports.options(*quick, "context response_session_sender_socket_buffer 4096")
        ) as sender,
    ):
        inbox = ContextInbox()
        target.receive_immediate_messages(inbox)
        address = target.immediate_target or ""
        sender.unicast_immediate_message(address, b"counted")
        assert inbox.wait(1)
        s, t = sender.statistics(), target.statistics()
        assert (
            s.immediate_msgs_sent == 1 and s.uim_out_msgs_sent == 1 and s.uim_out_bytes_sent > len(b"counted")
        )
        assert t.uim_port_connections_accepted == 1  # (open a moment: the sender's timeouts are 300 ms)
        assert t.uim_port_msgs_rcved == 1 and t.uim_port_bytes_rcved == s.uim_out_bytes_sent
        # Idle: the sender's connection goes after response_tcp_deletion_timeout.
        assert wait_until(lambda: sender.statistics().uim_out_connections_closed_idle == 1, WAIT)
        # A stranger that connects and says nothing goes after request_tcp_activity_timeout; one that sends
        # a control message has it ignored; one that sends an impossible fragment has it dropped; one that
        # sends garbage is closed.
        with socket.create_connection(target.request_port) as silent:  # type: ignore[arg-type]
            assert wait_until(lambda: target.statistics().uim_port_connections_closed_idle >= 1, WAIT)
            assert silent.recv(1) == b""  # closed by the context
        control = encode_message(LbmcMessage(MessageType.CONTROL, headers=(TsniHeader(((0, 1),)),)))
        huge = FragmentHeader(0, 0, MAX_IMMEDIATE_LEN + 1)
        fragment = encode_message(LbmcMessage(MessageType.DATA, 0, 0, (huge,), b"x" * 16))
        with socket.create_connection(target.request_port) as raw:  # type: ignore[arg-type]
            raw.sendall(control + fragment)
            assert wait_until(lambda: target.statistics().immediate_fragments_dropped == 1, WAIT)
            assert target.statistics().immediate_control_msgs_ignored == 1
            raw.sendall(b"\xff" * 16)
            assert wait_until(lambda: target.statistics().uim_port_msgs_dropped_malformed == 1, WAIT)
        # A peer that never reads: the queue fills (WouldBlock), then the connection is closed as stalled
        # after response_tcp_activity_timeout and what waited is dropped.
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            listener.bind(("127.0.0.1", 0))
            listener.listen(1)
            stuck = f"TCP:127.0.0.1:{listener.getsockname()[1]}"
            blocked = False
            for _ in range(1000):
                try:
                    sender.unicast_immediate_message(stuck, bytes(60_000))
                except openum.WouldBlock:
                    blocked = True
                    break
            assert blocked and sender.statistics().uim_out_bytes_queued > 0
            assert wait_until(lambda: sender.statistics().uim_out_connections_closed_stalled == 1, WAIT)
            s = sender.statistics()
            assert s.uim_out_msgs_dropped >= 1 and s.uim_out_bytes_dropped > 0 and s.uim_out_bytes_queued == 0


def test_a_request_port_closes_connections_past_its_limit(ports: Ports) -> None:
    # A deep listen backlog: with UM's 5, the kernel drops SYNs of a burst and clients retry after 1 s.
    with openum.Context(options=ports.options("context request_tcp_listen_backlog 2048")) as target:
        sockets = []
        try:
            for _ in range(MAX_INCOMING + 1):
                sockets.append(socket.create_connection(target.request_port))  # type: ignore[arg-type]
            assert wait_until(lambda: target.statistics().uim_port_connections_refused_limit >= 1, WAIT)
            assert target.statistics().uim_port_connections_active == MAX_INCOMING
        finally:
            for sock in sockets:
                sock.close()


# ---- multicast immediate messages (10.8)


def _mim_options(port: int, group: str = "224.10.77.21") -> tuple[str, ...]:
    return (f"context mim_address {group}", f"context mim_destination_port {port}")


def test_multicast_immediate_messages_reach_every_mim_context_and_no_other(ports: Ports) -> None:
    mim = _mim_options(free_udp_port())
    with (
        openum.Context(options=ports.options(*mim)) as sender,
        openum.Context(options=ports.options(*mim)) as one,
        openum.Context(options=ports.options(*mim)) as two,
        openum.Context(options=ports.options()) as deaf,  # reception is off by default (UM 6.8 and later)
    ):
        at_one, at_deaf, wildcard = Recorder(), Recorder(), Recorder()
        one.create_receiver("M/t", at_one)
        two.create_wildcard_receiver(r"^M/", wildcard)
        deaf.create_receiver("M/t", at_deaf)
        topicless = ContextInbox()
        one.receive_immediate_messages(topicless)
        sender.multicast_immediate_message(b"to all", topic="M/t")
        sender.multicast_immediate_message(b"no topic")
        # Receivers created just before take the messages (no wait for the context thread to see them).
        assert wait_until(lambda: at_one.count() == 1 and wildcard.count() == 1, WAIT), (
            one.statistics(),
            two.statistics(),
        )
        assert topicless.wait(1)
        assert at_one.of(MsgType.DATA)[0].data == b"to all" and wildcard.of(MsgType.DATA)[0].topic == "M/t"
        assert topicless.got[0][1:3] == (b"no topic", int(MsgFlags.IMMEDIATE | MsgFlags.TOPICLESS))
        assert at_one.of(MsgType.DATA)[0].source.startswith("LBTRM:127.0.0.1:")
        s, o = sender.statistics(), one.statistics()
        assert s.mim_msgs_sent == 2 and s.mim_sessions_created == 1
        assert o.mim_msgs_rcved == 2 and o.mim_sessions_active == 1
        assert at_deaf.count() == 0 and deaf.statistics().mim_msgs_rcved == 0
        # An immediate request by multicast: answered over TCP to the requester's request port.
        one.create_receiver("M/q", lambda m: m.respond(b"one") if m.type is MsgType.REQUEST else None)
        got = Responses()
        with sender.multicast_immediate_request(b"?", got, topic="M/q"):
            assert got.wait(1), (one.statistics(), sender.statistics())
        assert [r.data for r in got.got] == [b"one"]
        # Garbage on the MIM port is counted and dropped.
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as raw:
            raw.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            raw.sendto(b"\xff" * 40, (mim[0].split()[-1], int(mim[1].split()[-1])))
        assert wait_until(lambda: one.statistics().mim_dgrams_dropped_malformed >= 1, WAIT)


def test_unrecoverable_mim_loss_reaches_the_context_callback(
    ports: Ports, monkeypatch: pytest.MonkeyPatch
) -> None:
    mim = _mim_options(free_udp_port(), "224.10.77.22")
    lost: list[tuple[str, int, Any]] = []
    with openum.Context(options=ports.options(*mim)) as sender:
        monkeypatch.setenv("OPENUM_TEST_DROP", "0.3:11")  # the next context's receive sockets lose 30%
        receiver = openum.Context(
            options=ports.options(*mim, "context mim_send_naks 0"),
            attrs={"mim_unrecoverable_loss_function": (lambda s, q, d: lost.append((s, q, d)), "loss-d")},
        )
        monkeypatch.delenv("OPENUM_TEST_DROP")
        with receiver:
            rec = Recorder()
            receiver.create_receiver("L", rec)
            for i in range(60):
                sender.multicast_immediate_message(i.to_bytes(4, "big"), topic="L")
            assert wait_until(lambda: receiver.statistics().mim_unrecoverable_loss > 0 and lost, WAIT)
            assert lost[0][0].startswith("LBTRM:") and lost[0][2] == "loss-d"
            assert rec.count() < 60


def test_a_context_takes_an_ephemeral_request_port_when_the_default_range_is_taken(
    ports: Ports, caplog: pytest.LogCaptureFixture
) -> None:
    held = []
    try:
        for port in range(14391, 14396):  # UM's default range: taken here (by us, or by someone else)
            sock = socket.socket()
            try:
                sock.bind(("127.0.0.1", port))
                sock.listen(1)
                held.append(sock)
            except OSError:
                sock.close()
        options = [o for o in ports.options() if "request_tcp_port" not in o]
        with caplog.at_level("WARNING"), openum.Context(options=options) as ctx:
            assert ctx.request_port is not None and not 14391 <= ctx.request_port[1] <= 14395
            assert "bound ephemeral port" in caplog.text and "request_tcp_port_low" in caplog.text
        # A range the application set stays a hard limit, with an error naming it.
        low = 14391
        with pytest.raises(openum.SystemCallError, match=r"request_tcp_port_low\.\.request_tcp_port_high"):
            openum.Context(options=[*options, f"context request_tcp_port_low {low}"])
    finally:
        for sock in held:
            sock.close()
