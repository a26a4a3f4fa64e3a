"""Joining sources: transport sessions and delivery controllers on the receiving side (seed 2.9.1, 8.3.1).

When a receiver (or wildcard receiver) learns of a source, the context joins the source's transport
session (one connection per session, shared by every topic on it) and creates one delivery controller
per (topic, source), shared by every receiver object of that topic in the context; each receiver gets
its own callback for every message (seed 3.4).  The first receiver of a topic on a session creates the
controller; BOS reaches every controller when the session becomes active, and a receiver added to an
already active session gets BOS at once.  When the session ends (disconnect, activity timeout) or a final
advertisement removes the source, each controller delivers EOS and is dropped; the receiver objects
survive and join again if the source comes back (seed 8.11.6).

Everything here runs on the context's loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openum._message import Message, MsgType
from openum.protocol.delivery import Delivery, DeliveryController, DeliveryKind
from openum.protocol.resolution import source_key
from openum.runtime import EventKind
from openum.transport.tcp_receiver import TcpReceiverSession, TcpReceiverStatistics, split_properties
from openum.wire.lbmr import TcpTransport, TopicInfo

if TYPE_CHECKING:
    from typing import TypeAlias

    from openum._context import Context
    from openum._receiver import Receiver, WildcardReceiver

    _Subscriber: TypeAlias = Receiver | WildcardReceiver

__all__ = ["Subscriptions", "TopicSubscription"]

_KIND_TO_TYPE = {
    DeliveryKind.DATA: MsgType.DATA,
    DeliveryKind.BOS: MsgType.BOS,
    DeliveryKind.EOS: MsgType.EOS,
    DeliveryKind.UNRECOVERABLE_LOSS: MsgType.UNRECOVERABLE_LOSS,
    DeliveryKind.UNRECOVERABLE_LOSS_BURST: MsgType.UNRECOVERABLE_LOSS_BURST,
}


class TopicSubscription:
    """One (topic, source) on a joined session: its delivery controller and the receivers fed by it."""

    __slots__ = ("_timer", "dc", "info", "manager", "session", "source", "subscribers", "topic")

    def __init__(
        self, manager: Subscriptions, session: TcpReceiverSession, info: TopicInfo, source: str, attrs: Any
    ) -> None:
        self.manager = manager
        self.session = session
        self.info = info
        self.topic = info.topic
        self.source = source
        self.subscribers: list[_Subscriber] = []
        # TCP never retransmits: a gap is final as soon as it is seen (loss timeout 0).
        self.dc = DeliveryController(
            ordered=attrs.get("ordered_delivery"),
            loss_timeout_ns=0,
            maximum_burst_loss=attrs.get("delivery_control_maximum_burst_loss"),
            maximum_map_entries=manager.ctx.attributes.get("delivery_control_maximum_total_map_entries"),
        )
        self._timer: int | None = None

    # -- from the transport ----------------------------------------------------------------------
    def on_data(
        self,
        sqn: int,
        payload: memoryview | bytes,
        now_ns: int,
        fragment: tuple[int, int, int] | None,
        flags: int,
        properties: Any,
    ) -> None:
        deliveries = self.dc.on_message(
            sqn, payload, now_ns, fragment=fragment, flags=flags, properties=properties
        )
        if deliveries:
            self.dispatch(deliveries)
        self._arm()

    def on_tsni(self, sqn: int, now_ns: int) -> None:
        self.dispatch(self.dc.on_tsni(sqn, now_ns))
        self._arm()

    def _arm(self) -> None:
        deadline = self.dc.next_deadline()
        if deadline is None or self._timer is not None:
            return
        loop = self.manager.ctx._loop
        self._timer = loop.schedule_timer(max(0.0, (deadline - loop.clock.now_ns()) / 1e6), self._expired)

    def _expired(self, _clientd: Any) -> None:
        self._timer = None
        self.dispatch(self.dc.on_timer(self.manager.ctx.now_ns()))
        self._arm()

    # -- to the receivers --------------------------------------------------------------------------
    def dispatch(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            msg_type = _KIND_TO_TYPE[delivery.kind]
            payload: bytes | memoryview = delivery.payload
            properties = delivery.properties
            if properties is not None and not isinstance(properties, dict):
                payload, properties = split_properties(bytes(payload), properties)
            for sub in self.subscribers:
                state = sub.sources.get(source_key(self.info))
                msg = Message(
                    msg_type,
                    self.topic,
                    self.source,
                    payload,
                    sequence_number=delivery.sqn,
                    flags=delivery.flags,
                    properties=properties,
                    source_clientd=None if state is None else state[1],
                )
                sub._deliver(msg, EventKind.DATA)

    def close(self) -> None:
        if self._timer is not None:
            self.manager.ctx._loop.cancel_timer(self._timer)
            self._timer = None


class Subscriptions:
    """The context's joined sessions and topic subscriptions."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sessions: dict[tuple[str, int, int | None], TcpReceiverSession] = {}
        self.topics: dict[tuple[tuple[str, int, int | None], int], TopicSubscription] = {}
        self._unsupported_logged: set[str] = set()

    def join(self, subscriber: _Subscriber, info: TopicInfo, source: str) -> None:
        """``subscriber`` found the source ``info``: join its session and topic (once)."""
        transport = info.transport
        if not isinstance(transport, TcpTransport):
            kind = type(transport).__name__
            if kind not in self._unsupported_logged:
                self._unsupported_logged.add(kind)
                self.ctx.log.warning(
                    "source %s uses a transport this version of openum cannot receive yet (%s); "
                    "it is known to topic resolution but not joined",
                    source,
                    kind,
                )
            return
        key = (transport.ip, transport.port, transport.session_id)
        session = self.sessions.get(key)
        if session is None:
            attrs = subscriber.attributes
            ctx_attrs = self.ctx.attributes
            try:
                session = TcpReceiverSession(
                    self.ctx._loop,
                    transport.ip,
                    transport.port,
                    transport.session_id,
                    self.ctx.log,
                    lambda: self._session_active(key),
                    lambda reason: self._session_ended(key, reason),
                    activity_timeout_ms=_get(attrs, "transport_tcp_activity_timeout", 0),
                    receive_buffer=_get(ctx_attrs, "transport_tcp_receiver_socket_buffer", 0),
                    interface=None,
                )
            except OSError as exc:
                self.ctx.log.warning("cannot join %s: %s", source, exc)
                return
            self.sessions[key] = session
        topic_key = (key, info.index)
        sub = self.topics.get(topic_key)
        if sub is None:
            sub = TopicSubscription(self, session, info, source, subscriber.attributes)
            self.topics[topic_key] = sub
            session.topics[info.index] = sub
            if session.active:
                sub.dc.begin(self.ctx.now_ns())  # the session is already active; BOS goes out below
        if subscriber not in sub.subscribers:
            sub.subscribers.append(subscriber)
            if session.active:
                # A receiver added to an active session gets BOS at once (seed 2.9.1).
                subscriber._deliver(Message(MsgType.BOS, info.topic, source), EventKind.DATA)

    def leave(self, subscriber: _Subscriber) -> None:
        """A receiver closed: drop it from every subscription; close what nobody uses any more."""
        for topic_key, sub in list(self.topics.items()):
            if subscriber in sub.subscribers:
                sub.subscribers.remove(subscriber)
                if not sub.subscribers:
                    self._drop_topic(topic_key, sub)

    def leave_source(self, subscriber: _Subscriber, info: TopicInfo) -> None:
        """``subscriber`` no longer wants source ``info`` (a final advertisement removed it)."""
        transport = info.transport
        if not isinstance(transport, TcpTransport):
            return
        topic_key = ((transport.ip, transport.port, transport.session_id), info.index)
        sub = self.topics.get(topic_key)
        if sub is None or subscriber not in sub.subscribers:
            return
        # The source is gone for this receiver: EOS for it alone (seed 2.11.1, final advertisements).
        subscriber._deliver(Message(MsgType.EOS, info.topic, sub.source), EventKind.DATA)
        sub.subscribers.remove(subscriber)
        if not sub.subscribers:
            self._drop_topic(topic_key, sub)

    def _drop_topic(self, topic_key: tuple[tuple[str, int, int | None], int], sub: TopicSubscription) -> None:
        sub.close()
        self.topics.pop(topic_key, None)
        session = sub.session
        session.topics.pop(topic_key[1], None)
        if not session.topics:
            self.sessions.pop(session.key, None)
            session.on_end = lambda reason: None  # asked for: no EOS
            session.close("no receiver needs the session any more")

    def _session_active(self, key: tuple[str, int, int | None]) -> None:
        now = self.ctx.now_ns()
        for (session_key, _), sub in list(self.topics.items()):
            if session_key == key:
                sub.dispatch(sub.dc.begin(now))

    def _session_ended(self, key: tuple[str, int, int | None], reason: str) -> None:
        self.sessions.pop(key, None)
        now = self.ctx.now_ns()
        for topic_key, sub in list(self.topics.items()):
            if topic_key[0] != key:
                continue
            sub.dispatch(sub.dc.end(now))
            sub.close()
            self.topics.pop(topic_key, None)
            for subscriber in list(sub.subscribers):
                subscriber._source_gone(sub.info, sub.source)
            self.ctx._resolver.source_lost(sub.info)
        self.ctx.log.debug("transport session %s:%d ended: %s", key[0], key[1], reason)

    def transport_statistics(self, source: str) -> TcpReceiverStatistics | None:
        for sub in self.topics.values():
            if sub.source == source:
                return sub.session.statistics()
        return None

    def close(self) -> None:
        for sub in self.topics.values():
            sub.close()
        self.topics.clear()
        for session in list(self.sessions.values()):
            session.on_end = lambda reason: None
            session.close("the context is closing")
        self.sessions.clear()


def _get(attrs: Any, name: str, default: Any) -> Any:
    try:
        return attrs.get(name)
    except Exception:  # an option of another scope
        return default
