"""Request/response, unicast immediate messages and sending to sources (UM Concepts Guide 10.7, 10.12,
10.15).

Every context binds a TCP **request port** (``request_tcp_bind_request_port``, the default): the UIM port
other contexts send responses, unicast immediate messages (UIMs) and immediate requests to.  Its address
is advertised with every source the context owns (the TIR's extended-functionality option), which is how
a subscriber reaches the context of a source it receives ("sending to sources", 10.15).

**Requests.** :meth:`Source.send_request <openum.Source.send_request>` sends a topic message that carries
a REQUEST header (request index, request port); every receiver of the topic gets a ``REQUEST`` message
whose :meth:`~openum.Message.respond` answers it.  Responses are UIMs to the requester's request port
that carry the request index; they reach the request's callback as ``RESPONSE`` messages until
:meth:`Request.close` (later ones are dropped and counted in ``response_msgs_dropped``).

**UIMs.** :meth:`Context.unicast_immediate_message <openum.Context.unicast_immediate_message>` sends to
``"TCP:ip:port"`` (a context's request port) or ``"SOURCE:<source string>"``.  A UIM with a topic reaches
the receiving context's receivers of that topic (and matching wildcard receivers), else its
``immediate_message_topic_receiver_function``; a topicless one its ``immediate_message_receiver_function``.
Messages nobody takes are dropped and counted.

**Wire** (``../shared/wire/lbmc-pdm-srs.md`` 2.4): a UIM is an LBMC data message on the TCP connection
with the headers STREAM (this context's UIM stream id, a per-destination sequence number and its context
instance), CTXINSTD (the destination's instance, when known), CTXINSTR (this context's instance),
TOPICNAME (when it has a topic), REQUEST (for a request), and for a response openum's response header
(:class:`~openum.wire.lbmc.ResponseHeader`: Wireshark knows no response header; the request index is also
written as the message's topic index, where UM is thought to carry it).

Connections (10.7.5): one outgoing connection per destination, opened on the first message (and, for a
request, as soon as it arrives); it closes after ``response_tcp_deletion_timeout`` without traffic, and
stays open while a response object that may still answer lives.
"""

from __future__ import annotations

import itertools
import random
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from openum._errors import InvalidStateError
from openum._message import Message, MsgFlags, MsgType
from openum.runtime import EventKind, EventQueue, callback_scope
from openum.transport._demux import PropertiesLength, split_properties
from openum.transport._interfaces import resolve_interface
from openum.transport.mim import MimMessage, MimReceiver, MimSender
from openum.transport.uim import RequestPort, UimConnections
from openum.wire import WireError
from openum.wire.lbmc import (
    DATA_HEADER_LEN,
    MAX_MESSAGE_LEN,
    AppHeaderChain,
    DestinationContextInstanceHeader,
    FragmentHeader,
    Header,
    LbmcMessage,
    MessageType,
    PropertiesBlock,
    PropertiesLengthElement,
    RequestHeader,
    ResponseHeader,
    ReturnContextInstanceHeader,
    SourceIndexHeader,
    StreamHeader,
    TopicNameHeader,
    encode_message,
    encode_properties,
)
from openum.wire.lbmr import ContextInstanceOption, ExtendedFunctionalityOption, TopicInfo

if TYPE_CHECKING:
    from openum._context import Context
    from openum.transport._demux import RequestMark

__all__ = [
    "COUNTERS",
    "ImmediateMessaging",
    "Request",
    "Response",
    "ResponseCallback",
    "Target",
    "parse_target",
    "source_index",
]

#: ``callback(msg)`` for the responses to a request: ``msg.type`` is ``RESPONSE``, ``msg.receiver_clientd``
#: the request's ``clientd``.
ResponseCallback = Callable[[Message], Any]

#: The target forms :func:`parse_target` takes (named in its errors).
TARGET_FORMS: Final = '"TCP:ip:port" (a context\'s request port) or "SOURCE:<source string>"'
_IMMEDIATE: Final = int(MsgFlags.IMMEDIATE)
_TOPICLESS: Final = int(MsgFlags.TOPICLESS)
_MAX_INDEX: Final = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class Target:
    """Where an immediate message goes: a request port, and the context instance there when known."""

    address: tuple[str, int]
    instance: bytes | None = None
    #: For a ``SOURCE:`` target: the source's index (:func:`source_index`), so that its own callback gets
    #: the message.
    source_index: int | None = None

    def __str__(self) -> str:
        return f"TCP:{self.address[0]}:{self.address[1]}"


def parse_target(target: object) -> tuple[str, Any]:
    """``("tcp", (ip, port))`` or ``("source", source_string)`` for a UIM target string; ValueError naming
    the target and the allowed forms otherwise."""
    if not isinstance(target, str):
        raise TypeError(
            f"an immediate message target is a string ({TARGET_FORMS}), not {type(target).__name__}"
        )
    if target.startswith("SOURCE:"):
        source = target[len("SOURCE:") :]
        if not source:
            raise ValueError(f"target {target!r} names no source; allowed: {TARGET_FORMS}")
        return "source", source
    parts = target.split(":")
    if len(parts) == 4 and parts[0] == "TCP" and parts[1].isdigit():
        raise ValueError(
            f"target {target!r} names a topic resolution domain: routed targets need a DRO, which this "
            f"version of openum does not have; allowed: {TARGET_FORMS}"
        )
    if len(parts) != 3 or parts[0] != "TCP":
        hint = (
            " (a source string is a target only with the SOURCE: prefix, UM Concepts Guide 10.15)"
            if parts[0] in ("TCP", "LBTRM", "LBT-RU", "LBT-IPC", "LBT-SMX") and len(parts) > 3
            else ""
        )
        raise ValueError(f"target {target!r} is not valid{hint}; allowed: {TARGET_FORMS}")
    ip, port_text = parts[1], parts[2]
    octets = ip.split(".")
    if len(octets) != 4 or not all(o.isdigit() and int(o) < 256 for o in octets):
        raise ValueError(f"target {target!r}: {ip!r} is not an IPv4 address; allowed: {TARGET_FORMS}")
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"target {target!r}: port {port_text!r} is not 1-65535; allowed: {TARGET_FORMS}")
    return "tcp", (ip, int(port_text))


class Request:
    """An outstanding request (``lbm_request_t``): its responses reach ``callback`` until :meth:`close`.

    Returned by :meth:`Source.send_request <openum.Source.send_request>`,
    :meth:`Context.unicast_immediate_request <openum.Context.unicast_immediate_request>` and
    :meth:`Context.multicast_immediate_request <openum.Context.multicast_immediate_request>`.  Use it as a
    context manager to close it at the end of a block."""

    __slots__ = ("_closed", "_messaging", "callback", "clientd", "event_queue", "index", "responses", "topic")

    def __init__(
        self,
        messaging: ImmediateMessaging,
        index: int,
        topic: str | None,
        callback: ResponseCallback,
        clientd: Any,
        event_queue: EventQueue | None,
    ) -> None:
        self._messaging = messaging
        self.index = index
        """The request index (the REQUEST header's ``qidx``)."""
        self.topic = topic
        self.callback = callback
        self.clientd = clientd
        self.event_queue = event_queue
        self.responses = 0
        """Responses delivered to the callback so far."""
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Delete the request (``lbm_request_delete``): responses that arrive later are dropped and counted
        in the context's ``response_msgs_dropped``.  Idempotent."""
        if not self._closed:
            self._closed = True
            self._messaging._forget(self)

    def _run(self, msg: Message) -> None:
        """Deliver one response (context thread, or the event queue's dispatching thread)."""
        if self._closed:
            self._messaging._count("response_msgs_dropped")
            return
        self.responses += 1
        msg.receiver_clientd = self.clientd
        try:
            if self.event_queue is None:
                with callback_scope():
                    self.callback(msg)
            else:
                self.callback(msg)
        except Exception:
            self._messaging.ctx.log.exception("response callback of request %d raised", self.index)
        finally:
            msg._callback_done()

    def __enter__(self) -> Request:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Request {self.index} topic={self.topic!r} responses={self.responses} {state}>"


class Response:
    """The return address of one request (``lbm_response_t``): :meth:`respond` answers it.

    A request message's ``msg.response``; it lives as long as its message (the callback, or until
    ``msg.release()`` when retained), or until :meth:`close` once taken with ``msg.detach_response()``.
    While it lives, the connection to the requester stays open (UM Concepts Guide 10.7.5)."""

    __slots__ = ("_closed", "_instance", "_lock", "_messaging", "address", "request_index", "topic")

    def __init__(
        self,
        messaging: ImmediateMessaging,
        address: tuple[str, int],
        request_index: int,
        topic: str | None,
        instance: bytes | None,
    ) -> None:
        self._messaging = messaging
        self.address = address
        """The requester's request port."""
        self.request_index = request_index
        self.topic = topic
        self._instance = instance
        self._lock = threading.Lock()
        self._closed = False
        messaging._out.hold(address)
        messaging._out.connect(address)  # UM connects back as soon as a request arrives (10.7.5)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def target(self) -> str:
        """The requester's request port as a UIM target, ``"TCP:ip:port"``."""
        return f"TCP:{self.address[0]}:{self.address[1]}"

    def respond(self, data: bytes | bytearray | memoryview) -> None:
        """Send one response (``lbm_send_response``); never blocks.  May be called from any thread,
        context-thread callbacks included (openum queues it; UM's rule against that does not apply)."""
        if self._closed:
            raise InvalidStateError(
                f"the response object of request {self.request_index} is closed (it goes with its request "
                f"message unless the message is retained or the response detached, seed 10.12.4)"
            )
        self._messaging.send_response(self, data)

    def close(self) -> None:
        """Delete the response object (``lbm_response_delete``); the connection to the requester then
        closes after ``response_tcp_deletion_timeout`` without traffic.  Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._messaging._out.release(self.address)

    def _message_done(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Response to request {self.request_index} at {self.target}{' closed' if self._closed else ''}>"
        )


ContextCallback = tuple[Callable[..., Any], Any, EventQueue | None]


class ImmediateMessaging:
    """A context's request port, its outgoing UIM connections, and its outstanding requests."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        attrs = ctx.attributes
        self.instance = secrets.token_bytes(8)
        self._lock = threading.Lock()
        self._requests: dict[int, Request] = {}
        self._indices = itertools.count(1)
        self._stream_id = secrets.randbits(32)
        self._stream_sqns: dict[tuple[str, int], int] = {}
        self._send_lock = threading.Lock()
        self._partials: dict[tuple[Any, ...], _Partial] = {}
        self._source_callbacks: dict[int, ContextCallback] = {}
        self._topic_receivers: dict[str, list[Any]] = {}
        self._wildcard_receivers: list[Any] = []
        self._counters: dict[str, int] = dict.fromkeys(COUNTERS, 0)
        self._callbacks: dict[bool, ContextCallback | None] = {
            False: _option_callback(attrs.get("immediate_message_receiver_function")),
            True: _option_callback(attrs.get("immediate_message_topic_receiver_function")),
        }
        interface = resolve_interface(attrs.get("default_interface"))
        self._interface = interface
        self._mim_sender: MimSender | None = None
        loss = attrs.get("mim_unrecoverable_loss_function")
        self._mim_loss: tuple[Callable[..., Any], Any] | None = None if loss is None else (loss[0], loss[1])
        self._mim_receiver: MimReceiver | None = MimReceiver(
            ctx._loop, attrs, interface, self._on_mim, self._on_mim_loss, ctx.log, random.Random()
        )
        if not self._mim_receiver.enabled:
            self._mim_receiver = None
        self._out = UimConnections(ctx._loop, attrs, interface, ctx.log, on_message=self._on_message)
        from openum._late_join import LateJoin  # (it imports source_index from here)

        #: Late Join's requests and answers travel over the request port too (``openum._late_join``).
        self.late_join = LateJoin(self)
        self.port: RequestPort | None = None
        if attrs.get("request_tcp_bind_request_port"):
            try:
                self.port = RequestPort(ctx._loop, attrs, interface, self._on_message, ctx.log)
            except BaseException:
                self._out.close()
                if self._mim_receiver is not None:
                    self._mim_receiver.close()
                raise
            self.port.start()

    # -- where this context is reached -------------------------------------------------------------
    @property
    def address(self) -> tuple[str, int] | None:
        return None if self.port is None else self.port.address

    def topic_options(self) -> tuple[ExtendedFunctionalityOption, ...]:
        """What a TIR of this context's sources carries beyond its instance: the request port."""
        if self.port is None:
            return ()
        ip, port = self.port.address
        return (ExtendedFunctionalityOption(ip, port, 0),)

    def _require_port(self, what: str) -> tuple[str, int]:
        if self.port is None:
            raise InvalidStateError(
                f"{what} needs this context's request port for its responses, and the context has none "
                "(request_tcp_bind_request_port is 0)"
            )
        return self.port.address

    # -- requests ----------------------------------------------------------------------------------
    def new_request(
        self,
        topic: str | None,
        callback: ResponseCallback,
        clientd: Any,
        event_queue: EventQueue | None,
        what: str,
    ) -> tuple[Request, RequestHeader]:
        """Register a request (before it is sent: a response may come back at once) and its header."""
        if not callable(callback):
            raise TypeError(f"{what}: the response callback must be callable, not {type(callback).__name__}")
        if event_queue is not None and not isinstance(event_queue, EventQueue):
            raise TypeError(f"{what}: event_queue must be an openum.EventQueue or None")
        ip, port = self._require_port(what)
        with self._lock:
            if len(self._requests) >= _MAX_INDEX:
                raise InvalidStateError(f"{what}: {_MAX_INDEX} requests are open; close some first")
            while True:
                index = next(self._indices) & _MAX_INDEX
                if index == 0:
                    self._indices = itertools.count(1)
                    continue
                if index not in self._requests:
                    break
            request = Request(self, index, topic, callback, clientd, event_queue)
            self._requests[index] = request
            self._counters["request_msgs_sent"] += 1
        return request, RequestHeader(index, port, ip)

    def request(
        self,
        topic: str | None,
        callback: ResponseCallback,
        clientd: Any,
        event_queue: EventQueue | None,
        what: str,
        send: Callable[[RequestHeader], None],
    ) -> Request:
        """Register a request, then ``send(header)`` it; a send that raises closes the request again."""
        request, header = self.new_request(topic, callback, clientd, event_queue, what)
        try:
            send(header)
        except BaseException:
            request.close()
            raise
        return request

    def _forget(self, request: Request) -> None:
        with self._lock:
            if self._requests.get(request.index) is request:
                del self._requests[request.index]

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._counters[name] += amount

    def response_to(self, mark: RequestMark, topic: str | None, instance: bytes | None = None) -> Response:
        """The response object of a request message received on a topic or as a UIM."""
        self._count("request_msgs_rcved")
        return Response(self, (mark.ip, mark.port), mark.request_index, topic, instance)

    def send_response(self, response: Response, data: bytes | bytearray | memoryview) -> None:
        payload = _payload(data, "respond()")
        headers: list[Header] = []
        if response._instance is not None:
            headers.append(DestinationContextInstanceHeader(response._instance))
        headers.append(ReturnContextInstanceHeader(self.instance))
        if response.topic is not None:
            headers.append(TopicNameHeader(response.topic))
        headers.append(ResponseHeader(response.request_index))
        self._send(response.address, payload, headers, None, response.request_index)
        self._count("response_msgs_sent")

    # -- unicast immediate messages --------------------------------------------------------------------
    def resolve(self, target: object) -> Target:
        """The request port (and instance) of a target string (:data:`TARGET_FORMS`)."""
        kind, value = parse_target(target)
        if kind == "tcp":
            return Target(value)
        return self.ctx._on_loop_sync(lambda: self._source_target(value))

    def _source_target(self, source: str) -> Target:
        resolver = self.ctx._resolver
        for info in resolver.engine.cached_sources():
            if (
                resolver.source_string(info) == source
                or _without_index(resolver.source_string(info)) == source
            ):
                return _target_of(info, source)
        raise ValueError(
            f"source {source!r} is not in this context's resolver cache: a SOURCE: target must name a source "
            f"this context has learned of (a receiver's msg.source, or a source notification)"
        )

    def send_immediate(
        self,
        target: object,
        data: bytes | bytearray | memoryview,
        topic: str | None,
        properties: PropertiesBlock | None,
        request: RequestHeader | None = None,
    ) -> None:
        """Send one UIM (or, with ``request``, an immediate request) to ``target``."""
        where = self.resolve(target)
        payload = _payload(data, "unicast_immediate_message()")
        headers: list[Header] = []
        if where.instance is not None:
            headers.append(DestinationContextInstanceHeader(where.instance))
        headers.append(ReturnContextInstanceHeader(self.instance))
        if where.source_index is not None:
            headers.append(SourceIndexHeader(where.source_index))
        if topic is not None:
            headers.append(TopicNameHeader(topic))
        if request is not None:
            headers.append(request)
        self._send(where.address, payload, headers, properties, 0)
        self._count("immediate_msgs_sent")

    def _send(
        self,
        address: tuple[str, int],
        payload: bytes,
        headers: list[Header],
        properties: PropertiesBlock | None,
        topic_index: int,
    ) -> None:
        """One UIM to ``address``: one LBMC message, or fragments of at most 64 KB each (each with every
        header and a FRAG header; the stream sequence numbers are consecutive, seed 8.7)."""
        try:
            block = None if properties is None else encode_properties(properties)
            whole = payload if block is None else payload + block
            extra: list[Header] = []
            if block is not None:
                extra.append(AppHeaderChain((PropertiesLengthElement(len(block)),)))
            fixed = (
                DATA_HEADER_LEN
                + _STREAM_LEN
                + _FRAG_LEN
                + sum(len(h.encode_body()) + 2 for h in (*headers, *extra))
            )
            chunk = MAX_MESSAGE_LEN - fixed
            count = 1 if len(whole) <= chunk + _FRAG_LEN else (len(whole) + chunk - 1) // chunk
        except WireError as exc:
            raise ValueError(f"the message cannot be encoded: {exc}") from exc
        with self._send_lock:  # the fragments of one message stay together on the connection
            sqn = self._stream_sqns.get(address, 0)
            self._stream_sqns[address] = (sqn + count) & _MAX_INDEX
            try:
                if count == 1:
                    stream = StreamHeader(self._stream_id, sqn, self.instance)
                    message = LbmcMessage(
                        MessageType.DATA, topic_index, sqn, (stream, *headers), payload, properties
                    )
                    self._out.send(address, encode_message(message))
                    return
                view = memoryview(whole)
                parts: list[bytes] = []
                for i in range(count):
                    piece = view[i * chunk : (i + 1) * chunk]
                    fsqn = (sqn + i) & _MAX_INDEX
                    stream = StreamHeader(self._stream_id, fsqn, self.instance)
                    frag = FragmentHeader(sqn, i * chunk, len(whole))
                    message = LbmcMessage(
                        MessageType.DATA, topic_index, fsqn, (frag, stream, *headers, *extra), piece
                    )
                    parts.append(encode_message(message))
                self._out.send(address, b"".join(parts))  # one unit: all of it is queued, or nothing
            except WireError as exc:
                raise ValueError(f"the message cannot be encoded: {exc}") from exc

    # -- context callbacks -----------------------------------------------------------------------------
    def set_callback(
        self, topic: bool, callback: Callable[..., Any] | None, clientd: Any, event_queue: EventQueue | None
    ) -> None:
        if callback is not None and not callable(callback):
            raise TypeError(f"the immediate message callback must be callable, not {type(callback).__name__}")
        if event_queue is not None and not isinstance(event_queue, EventQueue):
            raise TypeError("event_queue must be an openum.EventQueue or None")
        self._callbacks[topic] = None if callback is None else (callback, clientd, event_queue)

    def set_source_callback(
        self, index: int, callback: Callable[..., Any] | None, clientd: Any, event_queue: EventQueue | None
    ) -> None:
        """Messages sent to the source whose :func:`source_index` is ``index`` go to ``callback``."""
        if callback is not None and not callable(callback):
            raise TypeError(f"the immediate message callback must be callable, not {type(callback).__name__}")
        if event_queue is not None and not isinstance(event_queue, EventQueue):
            raise TypeError("event_queue must be an openum.EventQueue or None")
        with self._lock:
            if callback is None:
                self._source_callbacks.pop(index, None)
            else:
                self._source_callbacks[index] = (callback, clientd, event_queue)

    # -- what arrives (context thread) -----------------------------------------------------------------
    def _on_message(self, msg: LbmcMessage, peer: tuple[str, int]) -> None:
        if msg.type is not MessageType.DATA and self.late_join.on_message(msg):
            return
        if not msg.is_data:
            self._count("immediate_control_msgs_ignored")
            return
        raw = msg.payload
        payload: bytes | memoryview = bytes(raw) if isinstance(raw, bytearray) else raw
        properties: Any = None if msg.properties is None else msg.properties.to_dict()
        frag = msg.header(FragmentHeader)
        if frag is not None:
            whole = self._reassemble(frag, msg, peer)
            if whole is None:
                return
            payload, properties = whole
        source = f"TCP:{peer[0]}:{peer[1]}"
        answer = msg.header(ResponseHeader)
        if answer is not None:
            self._on_response(answer.request_index, payload, source, properties)
            return
        self._count("immediate_msgs_rcved")
        name = msg.header(TopicNameHeader)
        sender = msg.header(ReturnContextInstanceHeader)
        addressed = msg.header(SourceIndexHeader)
        self._deliver(
            None if name is None else name.topic,
            payload,
            properties,
            msg.header(RequestHeader),
            None if sender is None else sender.ctxinst,
            source,
            0,
            None if addressed is None else addressed.source_index,
        )

    def _deliver(
        self,
        topic: str | None,
        payload: bytes | memoryview,
        properties: Any,
        request: RequestHeader | None,
        instance: bytes | None,
        source: str,
        sequence_number: int,
        addressed: int | None,
    ) -> None:
        """Hand one immediate message (UIM or MIM) to whoever takes it (module docstring)."""
        flags = _IMMEDIATE if topic is not None else _IMMEDIATE | _TOPICLESS
        msg_type = MsgType.REQUEST if request is not None else MsgType.DATA
        if addressed is not None:
            with self._lock:
                own = self._source_callbacks.get(addressed)
            if own is not None:  # sent to one of this context's sources, which takes such messages
                out = Message(msg_type, topic or "", source, payload, sequence_number, flags, properties)
                if request is not None:
                    out.response = self._response(request, topic, instance)
                self._call(own, out, EventKind.SOURCE)
                return
        delivered = False
        if topic is not None:
            for rcv in self._receivers_of(topic):
                delivered = True
                out = Message(msg_type, topic, source, payload, sequence_number, flags, properties)
                if request is not None:
                    out.response = self._response(request, topic, instance)
                rcv._deliver(out, EventKind.DATA)
        if delivered:
            return
        entry = self._callbacks[topic is not None]
        if entry is None:
            self._count("immediate_msgs_dropped_no_receiver")
            return
        out = Message(msg_type, topic or "", source, payload, sequence_number, flags, properties)
        if request is not None:
            out.response = self._response(request, topic, instance)
        self._call(entry, out)

    # -- multicast immediate messages (10.8) -----------------------------------------------------------
    def send_multicast(
        self,
        data: bytes | bytearray | memoryview,
        topic: str | None,
        properties: PropertiesBlock | None,
        request: RequestHeader | None = None,
    ) -> None:
        """Send one MIM (or, with ``request``, a multicast immediate request) on the context's temporary
        MIM session (created by the first one)."""
        payload = _payload(data, "multicast_immediate_message()")
        with self._lock:
            sender = self._mim_sender
        if sender is None:
            pool = self.ctx._pool("lbtrm")
            created = MimSender(
                self.ctx._loop,
                self.ctx.attributes,
                self._interface,
                self.ctx.log,
                random.Random(),
                rate=pool.rate,
                lock=pool.lock,
            )
            with self._lock:
                if self._mim_sender is None:
                    self._mim_sender = created
                    created = None  # type: ignore[assignment]
                sender = self._mim_sender
            if created is not None:
                created.close()
        headers: tuple[Header, ...] = (ReturnContextInstanceHeader(self.instance),)
        if request is not None:
            headers += (request,)
        sender.send(topic, payload, headers, properties, flush=True)
        self._count("mim_msgs_sent")

    def _on_mim(self, msg: MimMessage) -> None:
        self._count("mim_msgs_rcved")
        sender = next((h for h in msg.headers if isinstance(h, ReturnContextInstanceHeader)), None)
        self._deliver(
            msg.topic,
            msg.payload,
            msg.properties,
            msg.request,
            None if sender is None else sender.ctxinst,
            msg.source,
            msg.sequence_number,
            None,
        )

    def _on_mim_loss(self, source: str, sqn: int) -> None:
        self._count("mim_unrecoverable_loss")
        entry = self._mim_loss
        if entry is None:
            return
        func, clientd = entry
        try:
            with callback_scope():
                func(source, sqn, clientd)
        except Exception:
            self.ctx.log.exception("mim_unrecoverable_loss_function raised")

    def close_receiver(self) -> None:
        """Stop MIM reception (on the context thread: the receiver calls back there)."""
        if self._mim_receiver is not None:
            self._mim_receiver.close()

    def _response(self, header: RequestHeader, topic: str | None, instance: bytes | None) -> Response:
        self._count("request_msgs_rcved")
        return Response(self, (header.ip, header.port), header.request_index, topic, instance)

    def add_receiver(self, rcv: Any) -> None:
        """``rcv`` takes immediate messages of its topic from now on (the application's thread: a message
        sent after ``create_receiver`` returned reaches it; closed receivers are forgotten lazily)."""
        with self._lock:
            self._topic_receivers.setdefault(rcv.topic, []).append(rcv)

    def add_wildcard(self, wrcv: Any) -> None:
        with self._lock:
            self._wildcard_receivers.append(wrcv)

    def _receivers_of(self, topic: str) -> list[Any]:
        """The receivers an immediate message with ``topic`` goes to: the topic's receivers, else every
        matching wildcard receiver (UM Concepts Guide 10.8.4; no sub-receivers are created)."""
        with self._lock:
            receivers = self._topic_receivers.get(topic)
            if receivers is not None:
                receivers[:] = [r for r in receivers if not r.closed]
                if not receivers:
                    del self._topic_receivers[topic]
                else:
                    return list(receivers)
            self._wildcard_receivers[:] = [w for w in self._wildcard_receivers if not w.closed]
            wildcards = list(self._wildcard_receivers)
        return [w for w in wildcards if w.matches(topic)]

    def _call(self, entry: ContextCallback, msg: Message, kind: EventKind = EventKind.TOPICLESS_IM) -> None:
        callback, clientd, queue = entry
        msg.receiver_clientd = clientd
        if queue is not None:
            if isinstance(msg._data, memoryview):
                msg._data = bytes(msg._data)
            queued = queue.enqueue(kind, self._run_context_callback, callback, clientd, msg, True)
            if not queued and msg.response is not None:  # the queue is shut down: nobody will answer
                msg.response.close()
            return
        self._run_context_callback(callback, clientd, msg, False)

    def _run_context_callback(
        self, callback: Callable[..., Any], clientd: Any, msg: Message, queued: bool
    ) -> None:
        try:
            if queued:
                callback(msg, clientd)
            else:
                with callback_scope():
                    callback(msg, clientd)
        except Exception:
            self.ctx.log.exception("immediate message callback raised")
        finally:
            msg._callback_done()

    def _reassemble(
        self, frag: FragmentHeader, msg: LbmcMessage, peer: tuple[str, int]
    ) -> tuple[bytes, Any] | None:
        """Add one fragment of a large UIM; the whole message and its properties once complete.

        Fragments of one message follow each other on a connection; a message larger than
        :data:`MAX_IMMEDIATE_LEN`, or a fragment that does not fit its message, is dropped and counted."""
        stream = msg.header(StreamHeader)
        key = (peer, None if stream is None else stream.stream_id, frag.first_sqn)
        total = frag.total_length
        partial = self._partials.get(key)
        if partial is None:
            if total > MAX_IMMEDIATE_LEN:
                self._count("immediate_fragments_dropped")
                return None
            if len(self._partials) >= MAX_PARTIAL_MESSAGES:  # the oldest unfinished message goes
                self._partials.pop(next(iter(self._partials)))
                self._count("immediate_fragments_dropped")
            partial = self._partials[key] = _Partial(bytearray(total))
        piece = msg.payload
        end = frag.offset + len(piece)
        if len(partial.buffer) != total or end > total:
            del self._partials[key]
            self._count("immediate_fragments_dropped")
            return None
        partial.buffer[frag.offset : end] = piece
        partial.received += len(piece)
        if partial.received < total:
            return None
        del self._partials[key]
        whole = bytes(partial.buffer)
        for chained in (h for h in msg.headers if isinstance(h, AppHeaderChain)):
            for element in chained.elements:
                if isinstance(element, PropertiesLengthElement):
                    return split_properties(whole, PropertiesLength(element.length))
        return whole, None

    def _on_response(self, index: int, payload: bytes | memoryview, source: str, properties: Any) -> None:
        with self._lock:
            request = self._requests.get(index)
        if request is None:
            self._count("response_msgs_dropped")
            return
        self._count("response_msgs_rcved")
        out = Message(
            MsgType.RESPONSE, request.topic or "", source, payload, request.responses, 0, properties
        )
        if request.event_queue is not None:
            out.retain()
            if not request.event_queue.enqueue(EventKind.RESPONSE, request._run, out):
                self._count("response_msgs_dropped")
            return
        request._run(out)

    # -- statistics and closing ------------------------------------------------------------------------
    def statistics(self) -> dict[str, int]:
        with self._lock:
            counters = dict(self._counters)
            counters["requests_open"] = len(self._requests)
        port = {} if self.port is None else self.port.statistics()
        out = self._out.statistics()
        with self._lock:
            sender = self._mim_sender
        if sender is not None:
            counters["mim_sessions_created"] = sender.statistics()["sessions_created"]
        if self._mim_receiver is not None:
            mim = self._mim_receiver.statistics()
            counters["mim_sessions_active"] = mim["sessions_active"]
            counters["mim_dgrams_dropped_malformed"] = mim["dgrams_dropped_malformed"]
        counters.update(self.late_join.statistics())
        counters.update({f"uim_port_{k}": v for k, v in port.items()})
        counters.update({f"uim_out_{k}": v for k, v in out.items()})
        return counters

    def close(self) -> None:
        with self._lock:
            requests = list(self._requests.values())
        for request in requests:
            request.close()
        if self.port is not None:
            self.port.close()
        self._out.close()
        with self._lock:
            sender, self._mim_sender = self._mim_sender, None
        if sender is not None:
            sender.close()
        if self._mim_receiver is not None:
            self._mim_receiver.close()  # (idempotent: close_receiver ran on the loop first)


#: The context's counters of request/response and immediate messaging (``ContextStatistics``).
COUNTERS: Final = (
    "request_msgs_sent",
    "request_msgs_rcved",
    "response_msgs_sent",
    "response_msgs_rcved",
    "response_msgs_dropped",
    "immediate_msgs_sent",
    "immediate_msgs_rcved",
    "immediate_msgs_dropped_no_receiver",
    "immediate_control_msgs_ignored",
    "immediate_fragments_dropped",
    "mim_msgs_sent",
    "mim_msgs_rcved",
    "mim_unrecoverable_loss",
)

#: The largest immediate message (or response) reassembled from fragments, bytes.
MAX_IMMEDIATE_LEN: Final = 64 * 1024 * 1024
#: Unfinished fragmented immediate messages kept at most (the oldest goes first).
MAX_PARTIAL_MESSAGES: Final = 64
_STREAM_LEN: Final = 20
_FRAG_LEN: Final = 16


@dataclass(slots=True)
class _Partial:
    buffer: bytearray
    received: int = 0


def _option_callback(value: Any) -> ContextCallback | None:
    if value is None:
        return None
    return (value[0], value[1], None)


def _payload(data: object, what: str) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} takes bytes-like data, not {type(data).__name__} (encode text first)")


def _without_index(source: str) -> str:
    return source.split("[", 1)[0] if source.endswith("]") else source


def _target_of(info: TopicInfo, source: str) -> Target:
    address: tuple[str, int] | None = None
    instance: bytes | None = None
    for opt in info.options:
        if isinstance(opt, ExtendedFunctionalityOption) and opt.source_port:
            address = (opt.source_ip, opt.source_port)
        elif isinstance(opt, ContextInstanceOption):
            instance = opt.instance
    if address is None:
        raise ValueError(
            f"source {source!r}: its context advertises no request port (it is not an openum or UM context "
            f"with request_tcp_bind_request_port 1), so immediate messages cannot reach it"
        )
    return Target(address, instance, source_index(info.transport, info.index))


def source_index(transport: Any, topic_index: int) -> int:
    """A source's index in the SRCIDX header of a message sent to it (UM Concepts Guide 10.15): its
    transport session id (0 without one) in the high 32 bits, its topic index in the low ones.  Both
    ends compute it from what the source's TIR says, so it names one source of the target context."""
    session = getattr(transport, "session_id", None) or 0
    return (session << 32) | (topic_index & _MAX_INDEX)
