"""Joining sources: transport sessions and delivery controllers on the receiving side (seed 2.9.1, 8.3.1).

When a receiver (or wildcard receiver) learns of a source, the context joins the source's transport
session (one connection per session, shared by every topic on it) and creates one delivery controller
per (topic, source), shared by every receiver object of that topic in the context; each receiver gets
its own callback for every message (seed 3.4).  The first receiver of a topic on a session creates the
controller; BOS reaches every controller when the session becomes active, and a receiver added to an
already active session gets BOS at once.  When the session ends (disconnect, activity timeout) or a final
advertisement removes the source, each controller delivers EOS and is dropped; the receiver objects
survive and join again if the source comes back (seed 8.11.6).

The receiver options that shape a (topic, source) (``ordered_delivery``, the delivery-control options,
the transport's receiver options) come from the receiver object that first needs it: for a wildcard
receiver, those of the topic, which ``receiver_create_callback`` may have adjusted.  Later receiver
objects of the same topic or session share what exists (UM Concepts Guide, sections 3.4.1 and 3.4.2).

Everything here runs on the context's loop.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from openum._immediate import source_index
from openum._late_join import late_join_offer, recovery_params
from openum._message import Message, MsgType
from openum.config import REGISTRY
from openum.protocol.delivery import Delivery, DeliveryController, DeliveryKind
from openum.protocol.recovery import RecoveryMerge, RecoveryRequester, Step
from openum.protocol.reliable import RmReceiverParams, RuReceiverParams
from openum.protocol.resolution import source_key
from openum.runtime import NS_PER_MS, EventKind
from openum.transport._demux import RequestMark, TopicHandler
from openum.transport._interfaces import resolve_interface
from openum.transport._pool import warn_first_wins
from openum.transport.ipc import ShmReceiverSession, host_id, receiver_mode
from openum.transport.lbtrm import RmReceiving
from openum.transport.lbtru import RuReceiving
from openum.transport.shm import SegmentError
from openum.transport.tcp_receiver import TcpReceiverSession, split_properties
from openum.wire.lbmc import LateJoinInfoHeader
from openum.wire.lbmr import (
    ContextInstanceOption,
    LbtipcTransport,
    LbtrmTransport,
    LbtruTransport,
    LbtsmxTransport,
    TcpTransport,
    TopicInfo,
)

if TYPE_CHECKING:
    from typing import TypeAlias

    from openum._context import Context
    from openum._receiver import Receiver, WildcardReceiver

    _Subscriber: TypeAlias = Receiver | WildcardReceiver

__all__ = ["Subscriptions", "TopicSubscription"]

#: A joined session: ``(transport record type name, fields...)``, i.e. the whole advertised transport.
SessionKey = tuple[Any, ...]

_KIND_TO_TYPE = {
    DeliveryKind.DATA: MsgType.DATA,
    DeliveryKind.BOS: MsgType.BOS,
    DeliveryKind.EOS: MsgType.EOS,
    DeliveryKind.UNRECOVERABLE_LOSS: MsgType.UNRECOVERABLE_LOSS,
    DeliveryKind.UNRECOVERABLE_LOSS_BURST: MsgType.UNRECOVERABLE_LOSS_BURST,
}


class TopicSubscription(TopicHandler):
    """One (topic, source) on a joined session: its delivery controller and the receivers fed by it."""

    __slots__ = (
        "_instance",
        "_key",
        "_lj_request",
        "_lj_srcidx",
        "_rdeadline",
        "_rtimer",
        "_timer",
        "attrs",
        "dc",
        "info",
        "manager",
        "merge",
        "session",
        "session_key",
        "source",
        "subscribers",
        "topic",
    )

    def __init__(
        self,
        manager: Subscriptions,
        session: Any,
        session_key: SessionKey,
        info: TopicInfo,
        source: str,
        attrs: Any,
        loss_timeout_ns: int,
        resume: int | None = None,
    ) -> None:
        self.manager = manager
        self.session = session
        self.session_key = session_key
        self.info = info
        self.topic = info.topic
        self.source = source
        self._key = source_key(info)
        #: The source's context instance (its TIR's option): a response's CTXINSTD.
        self._instance = next(
            (o.instance for o in info.options if isinstance(o, ContextInstanceOption)), None
        )
        self.attrs = attrs  # its first receiver's: the delivery controller's options come from them
        self.subscribers: list[_Subscriber] = []
        self._timer: int | None = None
        #: Late Join and OTR (UM Concepts Guide 10.2, 10.3): the merge of live data and retransmissions
        #: when the source retains what it sends (its TIR offers Late Join) and the receiver recovers
        #: (``use_late_join``, or ``use_otr`` 1); None otherwise.  It stays for the subscription's life
        #: (``_recovered``); the hot path below asks it to let in-order messages through.
        self.merge: RecoveryMerge | None = None
        self._rtimer: int | None = None
        self._rdeadline: int | None = None
        self._lj_request = 0
        self._lj_srcidx = source_index(info.transport, info.index)
        requester = self._requester(attrs)
        otr = requester is not None and requester.otr_enabled
        self.dc = DeliveryController(
            ordered=attrs.get("ordered_delivery"),
            loss_timeout_ns=loss_timeout_ns,
            maximum_burst_loss=attrs.get("delivery_control_maximum_burst_loss"),
            maximum_map_entries=manager.ctx.attributes.get("delivery_control_maximum_total_map_entries"),
            report_gaps=otr,
        )
        if requester is not None:
            self._start_recovery(requester, int(attrs.get("ordered_delivery")), otr, resume)

    # -- Late Join and OTR -------------------------------------------------------------------------------
    def _requester(self, attrs: Any) -> RecoveryRequester | None:
        """The requester of Late Join and OTR when the source offers retention and the receiver uses
        either, else None (nothing to recover from, or nothing asked)."""
        offer = late_join_offer(self.info)
        if offer is None:
            return None
        params = recovery_params(attrs)
        if not params.use_late_join and not params.otr_enabled(False):
            return None
        ctx = self.manager.ctx
        reply_to = ctx._immediate.address
        if reply_to is None:
            ctx.log.warning(
                "%s offers Late Join and OTR, but use_late_join and use_otr need the context's request "
                "port (request_tcp_bind_request_port 1) for the answers; not recovering",
                self.source,
            )
            return None
        return RecoveryRequester(
            params,
            source=(offer.source_ip, offer.source_port),
            transport_index=offer.transport_index,
            topic_index=self.info.index,
            reply_to=reply_to,
            rng=self.manager._rng,
        )

    def _start_recovery(
        self, requester: RecoveryRequester, ordered: int, otr: bool, resume: int | None
    ) -> None:
        """Merge live data with what Late Join and OTR recover; start Late Join.  ``resume``: the next
        sqn this receiver was due from the source before its transport session ended (a reconnect):
        Late Join starts there, or OTR recovers from there."""
        dc = self.dc
        merge = RecoveryMerge(requester, ordered=ordered, to_dc=dc.fill if otr else None)
        self.merge = merge
        self._lj_request = requester.request_index
        ctx = self.manager.ctx
        ctx._immediate.late_join.add_subscription(self, self._lj_request, self._instance, self._lj_srcidx)
        now = ctx.now_ns()
        if not merge.start_late_join(now, want_from=resume) and resume is not None:
            merge.resume(resume)
        self._recovered(merge.poll(now))

    def deliver(self, deliveries: list[Delivery]) -> None:
        """The delivery controller's outputs: through the Late Join merge while there is one."""
        merge = self.merge
        if merge is None:
            self.dispatch(deliveries)
            return
        # The merge may hold live messages: a view into the transport's receive buffer would change.
        deliveries = [
            d._replace(payload=bytes(d.payload)) if type(d.payload) is memoryview else d for d in deliveries
        ]
        self._recovered(merge.on_live(deliveries, self.manager.ctx.now_ns()))

    def on_retransmission(
        self, sqn: int, payload: bytes, fragment: tuple[int, int, int] | None, properties: Any
    ) -> None:
        merge = self.merge
        if merge is not None:
            now = self.manager.ctx.now_ns()
            self._recovered(
                merge.on_retransmission(sqn, payload, now, fragment=fragment, properties=properties)
            )

    def on_late_join_info(self, info: LateJoinInfoHeader) -> None:
        merge = self.merge
        if merge is not None:
            self._recovered(merge.on_late_join_info(info, self.manager.ctx.now_ns()))

    def on_initial_sqn(self, sqn: int) -> None:
        merge = self.merge
        if merge is not None:
            self._recovered(merge.on_initial_sqn(sqn, self.manager.ctx.now_ns()))

    def _gaps_opened(self) -> None:
        """OTR: the gaps the delivery controller just saw start their initial delay now (guide 10.3)."""
        merge = self.merge
        if merge is not None:
            gaps = self.dc.take_new_gaps()
            if gaps:
                now = self.manager.ctx.now_ns()
                for first, last in gaps:
                    self._recovered(merge.on_gap(first, last, now))

    def _recovered(self, step: Step) -> None:
        """Deliver, send and log what the merge produced.

        The merge stays for the subscription's life: the delivery controller does not know what the
        merge handed on, and a transport may still bring older sqns (an LBT-RU or LBT-RM receiver
        repairs its session's window by NAK after it joined), which the merge drops as duplicates."""
        late_join = self.manager.ctx._immediate.late_join
        for request in step.requests:
            late_join.send_request(request)
        for warning in step.warnings:
            self.manager.ctx.log.warning("recovery from %s: %s", self.source, warning)
        if step.deliveries:
            self.dispatch(step.deliveries)
        self._arm_recovery()

    def _arm_recovery(self) -> None:
        merge = self.merge
        deadline = None if merge is None else merge.next_deadline()
        if deadline == self._rdeadline and (deadline is None or self._rtimer is not None):
            return
        loop = self.manager.ctx._loop
        if self._rtimer is not None:
            loop.cancel_timer(self._rtimer)
            self._rtimer = None
        self._rdeadline = deadline
        if deadline is not None:
            delay_ms = max(0.0, (deadline - loop.clock.now_ns()) / 1e6)
            self._rtimer = loop.schedule_timer(delay_ms, self._recovery_due)

    def _recovery_due(self, _clientd: Any) -> None:
        self._rtimer = None
        self._rdeadline = None
        merge = self.merge
        if merge is not None:
            self._recovered(merge.poll(self.manager.ctx.now_ns()))

    def _retire_merge(self) -> None:
        """The subscription ends: count what Late Join and OTR did, stop routing answers here."""
        merge = self.merge
        if merge is None:
            return
        self.merge = None
        late_join = self.manager.ctx._immediate.late_join
        late_join.count_recovery(merge.requester.statistics())
        late_join.remove_subscription(self, self._lj_request, self._instance, self._lj_srcidx)
        if self._rtimer is not None:
            self.manager.ctx._loop.cancel_timer(self._rtimer)
            self._rtimer = None
        self._rdeadline = None

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
        if fragment is None and type(properties) is not RequestMark and self.dc.take_next(sqn, len(payload)):
            merge = self.merge
            if merge is None or merge.take_next(sqn):
                # The hot path: the next message in order, unfragmented (properties, if any, are a dict).
                topic = self.topic
                source = self.source
                key = self._key
                for sub in self.subscribers:
                    sub._deliver_data(topic, source, key, payload, sqn, flags, properties)
                return
            self.deliver([Delivery(DeliveryKind.DATA, sqn, payload, flags, properties)])
            return
        deliveries = self.dc.on_message(
            sqn, payload, now_ns, fragment=fragment, flags=flags, properties=properties
        )
        if deliveries:
            self.deliver(deliveries)
        self._gaps_opened()
        self._arm()

    def on_tsni(self, sqn: int, now_ns: int) -> None:
        self.deliver(self.dc.on_tsni(sqn, now_ns))
        self._gaps_opened()
        self._arm()

    def _arm(self) -> None:
        deadline = self.dc.next_deadline()
        if deadline is None or self._timer is not None:
            return
        loop = self.manager.ctx._loop
        self._timer = loop.schedule_timer(max(0.0, (deadline - loop.clock.now_ns()) / 1e6), self._expired)

    def _expired(self, _clientd: Any) -> None:
        self._timer = None
        self.deliver(self.dc.on_timer(self.manager.ctx.now_ns()))
        self._arm()

    # -- to the receivers --------------------------------------------------------------------------
    def dispatch(self, deliveries: list[Delivery]) -> None:
        for delivery in deliveries:
            msg_type = _KIND_TO_TYPE[delivery.kind]
            payload: bytes | memoryview = delivery.payload
            properties = delivery.properties
            request: RequestMark | None = None
            if type(properties) is RequestMark:
                request = properties
                properties = request.properties
                if msg_type is MsgType.DATA:
                    msg_type = MsgType.REQUEST
            if properties is not None and not isinstance(properties, dict):
                payload, properties = split_properties(bytes(payload), properties)
            for sub in self.subscribers:
                state = sub.sources.get(self._key)
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
                if request is not None and msg_type is MsgType.REQUEST:
                    msg.response = self.manager.ctx._immediate.response_to(
                        request, self.topic, self._instance
                    )
                sub._deliver(msg, EventKind.DATA)

    def close(self) -> None:
        if self._timer is not None:
            self.manager.ctx._loop.cancel_timer(self._timer)
            self._timer = None
        self._retire_merge()


class Subscriptions:
    """The context's joined sessions and topic subscriptions, and its LBT-RM/LBT-RU receiving sockets."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sessions: dict[SessionKey, Any] = {}
        self.topics: dict[tuple[SessionKey, int], TopicSubscription] = {}
        self._unsupported_logged: set[str] = set()
        self._rm: RmReceiving | None = None
        self._ru: RuReceiving | None = None
        # The options each joined session (and the LBT-RU receiving socket) took from its first receiver.
        self._session_attrs: dict[SessionKey, Any] = {}
        self._rng = random.Random()
        # Recovering (topic, source)s whose session ended: the next sqn each was due, so that joining
        # the session again (a reconnect) recovers what was sent in between (oldest dropped first).
        self._resume: dict[tuple[SessionKey, int], int] = {}

    def join(self, subscriber: _Subscriber, info: TopicInfo, source: str) -> None:
        """``subscriber`` found the source ``info``: join its session and topic (once)."""
        transport = info.transport
        if isinstance(transport, LbtipcTransport | LbtsmxTransport) and transport.host_id != host_id():
            return  # another host's shared memory: not joinable, silently ignored (6.4.4)
        if not isinstance(
            transport, TcpTransport | LbtrmTransport | LbtruTransport | LbtipcTransport | LbtsmxTransport
        ):
            kind = type(transport).__name__
            if kind not in self._unsupported_logged:
                self._unsupported_logged.add(kind)
                self.ctx.log.warning(
                    "source %s uses a transport this version of openum cannot receive (%s); "
                    "it is known to topic resolution but not joined",
                    source,
                    kind,
                )
            return
        key = _session_key(transport)
        # A wildcard receiver's topic may have its own receiver options (receiver_create_callback).
        attrs = subscriber._join_attributes(info.topic)
        if isinstance(transport, LbtruTransport) and self._ru is not None and self._ru.address is not None:
            # One socket receives every LBT-RU session of the context.
            where = f"LBT-RU receiver socket {_address(self._ru.address)}"
            self._first_receiver_wins(_RU_SOCKET_OPTIONS, _RU_SOCKET, attrs, where)
        session = self.sessions.get(key)
        if session is None:
            try:
                session = self._open(key, transport, attrs)
            except OSError as exc:
                self.ctx.log.warning("cannot join %s: %s", source, exc)
                return
            self.sessions[key] = session
            self._session_attrs[key] = attrs
        else:
            self._first_receiver_wins(
                _SESSION_OPTIONS.get(key[0], ()), key, attrs, f"joined {_describe(key)} session"
            )
        topic_key = (key, info.index)
        sub = self.topics.get(topic_key)
        if sub is not None:
            warn_first_wins(
                self.ctx.log,
                "receiver",
                _TOPIC_OPTIONS,
                _receiver_attrs(sub.attrs),
                _receiver_attrs(attrs),
                f"delivery controller of {info.topic!r} from {source}",
            )
        else:
            sub = TopicSubscription(
                self,
                session,
                key,
                info,
                source,
                attrs,
                _loss_timeout_ns(transport, attrs),
                self._resume.pop(topic_key, None),
            )
            self.topics[topic_key] = sub
            session.topics[info.index] = sub
            if session.active:
                sub.dc.begin(self.ctx.now_ns())  # the session is already active; BOS goes out below
        if subscriber not in sub.subscribers:
            sub.subscribers.append(subscriber)
            if session.active:
                # A receiver added to an active session gets BOS at once (seed 2.9.1).
                subscriber._deliver(Message(MsgType.BOS, info.topic, source), EventKind.DATA)

    def _first_receiver_wins(self, names: tuple[str, ...], key: SessionKey, attrs: Any, where: str) -> None:
        first = self._session_attrs.get(key)
        if first is not None:
            warn_first_wins(
                self.ctx.log, "receiver", names, _receiver_attrs(first), _receiver_attrs(attrs), where
            )

    def _open(self, key: SessionKey, transport: Any, attrs: Any) -> Any:
        """Join a transport session (``OSError`` when its sockets cannot be opened)."""
        ctx = self.ctx
        ctx_attrs = ctx.attributes

        def on_active() -> None:
            self._session_active(key)

        def on_end(reason: str) -> None:
            self._session_ended(key, reason)

        if isinstance(transport, LbtrmTransport):
            if self._rm is None:
                self._rm = RmReceiving(ctx._loop, ctx_attrs, self._interface(), ctx.log, self._rng)
            params = RmReceiverParams.from_options(attrs.get, ctx_attrs.get)
            return self._rm.join(transport, params, on_active, on_end)
        if isinstance(transport, LbtruTransport):
            if self._ru is None:
                self._ru = RuReceiving(ctx._loop, ctx_attrs, self._interface(), ctx.log, self._rng)
            if self._ru.address is None:  # this session's first receiver opens the context's socket
                self._session_attrs[_RU_SOCKET] = attrs
            ru_params = RuReceiverParams.from_options(attrs.get, ctx_attrs.get)
            return self._ru.join(transport, ru_params, attrs, on_active, on_end)
        if isinstance(transport, LbtipcTransport | LbtsmxTransport):
            mode, linger = receiver_mode(ctx_attrs)
            try:
                return ShmReceiverSession(
                    ctx._loop, transport, ctx.log, on_active, on_end, mode=mode, linger=linger
                )
            except SegmentError as exc:
                raise OSError(str(exc)) from exc
        return TcpReceiverSession(
            ctx._loop,
            transport.ip,
            transport.port,
            transport.session_id,
            ctx.log,
            on_active,
            on_end,
            activity_timeout_ms=_get(attrs, "transport_tcp_activity_timeout", 0),
            receive_buffer=_get(ctx_attrs, "transport_tcp_receiver_socket_buffer", 0),
            interface=None,
        )

    def _interface(self) -> str:
        return resolve_interface(self.ctx.attributes.get("default_interface"))

    def leave(self, subscriber: _Subscriber) -> None:
        """A receiver closed: drop it from every subscription; close what nobody uses any more."""
        for topic_key, sub in list(self.topics.items()):
            if subscriber in sub.subscribers:
                sub.subscribers.remove(subscriber)
                if not sub.subscribers:
                    self._drop_topic(topic_key, sub)

    def leave_source(self, subscriber: _Subscriber, info: TopicInfo) -> None:
        """``subscriber`` no longer wants source ``info`` (a final advertisement removed it)."""
        topic_key = (_session_key(info.transport), info.index)
        sub = self.topics.get(topic_key)
        if sub is None or subscriber not in sub.subscribers:
            return
        # The source is gone for this receiver: EOS for it alone (seed 2.11.1, final advertisements).
        subscriber._deliver(Message(MsgType.EOS, info.topic, sub.source), EventKind.DATA)
        sub.subscribers.remove(subscriber)
        if not sub.subscribers:
            self._drop_topic(topic_key, sub)

    def _drop_topic(self, topic_key: tuple[SessionKey, int], sub: TopicSubscription) -> None:
        sub.close()
        self.topics.pop(topic_key, None)
        session = sub.session
        session.topics.pop(topic_key[1], None)
        if not session.topics:
            if self.sessions.get(sub.session_key) is session:
                del self.sessions[sub.session_key]
                self._session_attrs.pop(sub.session_key, None)
            session.on_end = lambda reason: None  # asked for: no EOS
            session.close("no receiver needs the session any more")

    def _session_active(self, key: SessionKey) -> None:
        now = self.ctx.now_ns()
        for (session_key, _), sub in list(self.topics.items()):
            if session_key == key:
                sub.deliver(sub.dc.begin(now))

    def _session_ended(self, key: SessionKey, reason: str) -> None:
        self.sessions.pop(key, None)
        self._session_attrs.pop(key, None)
        now = self.ctx.now_ns()
        for topic_key, sub in list(self.topics.items()):
            if topic_key[0] != key:
                continue
            if sub.merge is not None and sub.merge.next_sqn is not None:
                self._resume[topic_key] = sub.merge.next_sqn
                if len(self._resume) > _RESUME_MAXIMUM:
                    del self._resume[next(iter(self._resume))]
            sub.deliver(sub.dc.end(now))
            sub.close()
            self.topics.pop(topic_key, None)
            for subscriber in list(sub.subscribers):
                subscriber._source_gone(sub.info, sub.source)
            self.ctx._resolver.source_lost(sub.info)
        self.ctx.log.debug("transport session %s ended: %s", _describe(key), reason)

    def transport_statistics(self, source: str) -> Any:
        """The transport statistics of the session ``source`` is received on, or None."""
        for sub in self.topics.values():
            if sub.source == source:
                return sub.session.statistics()
        return None

    def receiving_statistics(self) -> dict[str, int]:
        """Context-wide counters of the LBT-RM/LBT-RU receiving sockets (ContextStatistics fields)."""
        rm, ru = self._rm, self._ru
        return {
            "lbtrm_rcv_sessions": len(rm.sessions) if rm else 0,
            "lbtru_rcv_sessions": len(ru.sessions) if ru else 0,
            "lbtrm_dgrams_dropped_unknown": rm.dgrams_dropped_unknown if rm else 0,
            "lbtru_dgrams_dropped_unknown": ru.dgrams_dropped_unknown if ru else 0,
            "dgrams_dropped_test_hook": (rm.dgrams_dropped_test if rm else 0)
            + (ru.dgrams_dropped_test if ru else 0),
        }

    def close(self) -> None:
        for sub in self.topics.values():
            sub.close()
        self.topics.clear()
        for session in list(self.sessions.values()):
            session.on_end = lambda reason: None
            session.close("the context is closing")
        self.sessions.clear()
        self._session_attrs.clear()
        self._resume.clear()
        for receiving in (self._rm, self._ru):
            if receiving is not None:
                receiving.close()
        self._rm = self._ru = None


#: Most (topic, source)s remembered for a reconnect's recovery.
_RESUME_MAXIMUM = 4096


def _session_key(transport: Any) -> SessionKey:
    """Sessions are told apart by everything their advertisement says (a new session id is a new one)."""
    if isinstance(transport, LbtipcTransport | LbtsmxTransport):
        return (type(transport).__name__, transport.host_id, transport.session_id, transport.transport_id)
    if isinstance(transport, LbtrmTransport):
        return (
            "lbtrm",
            transport.source_ip,
            transport.source_port,
            transport.session_id,
            transport.group,
            transport.dest_port,
        )
    return (type(transport).__name__, transport.ip, transport.port, transport.session_id)


def _receiver_attrs(attrs: Any) -> Any:
    """The receiver options of ``attrs`` (a wildcard receiver's carry them apart from its own)."""
    return getattr(attrs, "receiver", attrs)


def _address(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


# Receiver options a joined thing takes from its first receiver (later values are logged, not used):
# the delivery controller of a (topic, source), ...
_TOPIC_OPTIONS = ("ordered_delivery", "delivery_control_maximum_burst_loss")
# ... the one socket that receives every LBT-RU session of a context, ...
_RU_SOCKET: SessionKey = ("LBT-RU receiver socket",)
_RU_SOCKET_OPTIONS = ("transport_lbtru_interface", "transport_lbtru_port_low", "transport_lbtru_port_high")
# ... and a transport session (seed 3.4.1).
_SESSION_OPTIONS: dict[str, tuple[str, ...]] = {
    kind: tuple(
        name
        for name in REGISTRY.names("receiver")
        if name.startswith(prefix)
        and REGISTRY.lookup("receiver", name).session
        and name not in _RU_SOCKET_OPTIONS
    )
    for kind, prefix in (
        ("lbtrm", "transport_lbtrm_"),
        ("LbtruTransport", "transport_lbtru_"),
        ("TcpTransport", "transport_tcp_"),
    )
}


def _describe(key: SessionKey) -> str:
    kind = {
        "lbtrm": "LBT-RM",
        "LbtruTransport": "LBT-RU",
        "TcpTransport": "TCP",
        "LbtipcTransport": "LBT-IPC",
        "LbtsmxTransport": "LBT-SMX",
    }.get(key[0], key[0])
    return f"{kind} {key[1]}:{key[2]}"


def _loss_timeout_ns(transport: Any, attrs: Any) -> int:
    """How long a delivery controller waits for a gap to be repaired (seed 8.11.5).

    TCP never retransmits, so a gap is final at once.  LBT-RM and LBT-RU repair it with NAKs: the DC's
    topic-level loss timer equals the NAK generation interval.
    """
    if isinstance(transport, LbtrmTransport):
        return int(attrs.get("transport_lbtrm_nak_generation_interval")) * NS_PER_MS
    if isinstance(transport, LbtruTransport):
        return int(attrs.get("transport_lbtru_nak_generation_interval")) * NS_PER_MS
    return 0


def _get(attrs: Any, name: str, default: Any) -> Any:
    try:
        return attrs.get(name)
    except Exception:  # an option of another scope
        return default
