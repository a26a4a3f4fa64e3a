"""Receivers and wildcard receivers (seed 3.4, 3.4.2, 8.1.2-8.1.3).

A receiver subscribes to one topic; a wildcard receiver to every topic matching a PCRE pattern.
Callbacks run on the context thread unless the receiver was given an :class:`~openum.EventQueue`.

Source notifications (``source_notification_function``, seed 7.1): ``create(source_string, clientd)``
is called when the receiver finds a source (its return value becomes that source's ``source_clientd``)
and ``delete(source_string, clientd, source_clientd)`` when the source goes away.

A wildcard receiver receives each matching topic through a per-topic receiver of its own, as UM does
(``lbm_wildcard_rcv_create``, UM Concepts Guide, section 3.4.2).  ``receiver_create_callback``
``(create, clientd)``: ``create(topic, attrs, clientd)`` runs when that receiver is about to be created
(the topic's first source is found, before any message of the topic), with ``attrs`` a copy of the
receiver options the topic would be received with; what the callback sets there applies to that topic.
``receiver_delete_callback`` ``(delete, clientd)``: ``delete(topic, clientd)`` runs when it is about to be
deleted: ``resolver_no_source_linger_timeout`` after the topic's last source went away (unless a source
comes back first), or when the wildcard receiver is closed.  Both run on the context thread, never
through an event queue (UM calls them inline too: ``create`` must return before the receiver exists).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from openum._message import Message, MsgType
from openum.config import Attributes
from openum.protocol.resolution import ReceiverSpec, SourceKey, WildcardSpec, compile_pattern, source_key
from openum.runtime import EventKind, EventQueue, callback_scope, forbid_in_callback
from openum.wire.lbmr import TopicInfo

if TYPE_CHECKING:
    from openum._context import Context

__all__ = ["Receiver", "ReceiverStatistics", "WildcardReceiver"]

_ids = itertools.count(1)
# Final: compiled, these are read from C variables rather than looked up in the module's dict.
_DATA: Final = MsgType.DATA
_REQUEST: Final = MsgType.REQUEST
_DATA_EVENT: Final = EventKind.DATA
#: Receiver options of a single-topic receiver's queries: a wildcard receiver queries with its
#: wildcard_receiver options instead, so it never reads these.
WILDCARD_QUERIES_INSTEAD: Final = frozenset(
    {
        "resolution_no_source_notification_threshold",
        "resolution_number_of_sources_query_threshold",
        "resolver_query_maximum_initial_interval",
        "resolver_query_minimum_initial_duration",
        "resolver_query_minimum_initial_interval",
        "resolver_query_minimum_sustain_duration",
        "resolver_query_sustain_interval",
    }
)
WILDCARD_QUERIES_TEXT: Final = (
    "a wildcard receiver queries with its wildcard_receiver options (resolver_query_minimum_interval, "
    "resolver_query_maximum_interval, resolver_query_minimum_duration)"
)
#: Receiver options a wildcard receiver reads for itself, not per topic: receiver_create_callback cannot
#: change them for one topic.
_NOT_PER_TOPIC: Final = WILDCARD_QUERIES_INSTEAD | {"source_notification_function"}


@dataclass(frozen=True, slots=True)
class ReceiverStatistics:
    """What a receiver delivered to its callback (counted whether or not it has one).

    ``msgs_rcved``/``bytes_rcved``: data messages and their payload bytes.  ``bos``/``eos``: session
    events.  ``unrecoverable_loss``: messages declared lost (one per sequence number).
    ``unrecoverable_loss_burst``: burst-loss events.  ``no_source_notifications``: NO_SOURCE_NOTIFICATION
    events (single-topic receivers only: a wildcard receiver queries for its pattern, not for a topic).
    ``sources``: sources the receiver knows now.
    """

    msgs_rcved: int
    bytes_rcved: int
    bos: int
    eos: int
    unrecoverable_loss: int
    unrecoverable_loss_burst: int
    no_source_notifications: int
    sources: int


ReceiverCallback = Callable[[Message], Any]


class _Subscriber:
    """What receivers and wildcard receivers share: callbacks, event queue, known sources."""

    def __init__(
        self,
        ctx: Context,
        attrs: Attributes,
        callback: ReceiverCallback | None,
        clientd: Any,
        event_queue: EventQueue | None,
        event_kind: EventKind,
    ) -> None:
        if callback is not None and not callable(callback):
            raise TypeError("the receiver callback must be callable (it is called with each Message)")
        self.id = next(_ids)
        self.ctx = ctx
        self._loop = ctx._loop
        self.attributes = attrs
        self.callback = callback
        self.clientd = clientd
        self.event_queue = event_queue
        # What the event queue counts this receiver's events as (UM's data_msgs or wrcv_msgs).
        self._event_kind = event_kind
        self.closed = False
        self.sources: dict[SourceKey, tuple[str, Any]] = {}  # key -> (source string, source clientd)
        self._counts: dict[MsgType, int] = {}  # events other than DATA, by type
        self._msgs = 0  # DATA messages
        self._bytes = 0
        # The receiver's own, else the context's (the default for every receiver of the context).
        self._notify = attrs.get("source_notification_function") or ctx.attributes.get(
            "source_notification_function"
        )
        if event_queue is not None:
            event_queue.attach(self)

    # -- notifications (on the loop) ------------------------------------------------------------------
    def _notify_create(self, source: str) -> Any:
        if self._notify is None:
            return None
        try:
            with callback_scope():
                return self._notify[0](source, self._notify[-1])
        except Exception:
            self.ctx.log.exception("source_notification_function create callback raised")
            return None

    def _notify_delete(self, source: str, source_clientd: Any) -> None:
        if self._notify is None or len(self._notify) != 3 or self._notify[1] is None:
            return
        try:
            with callback_scope():
                self._notify[1](source, self._notify[-1], source_clientd)
        except Exception:
            self.ctx.log.exception("source_notification_function delete callback raised")

    def _add_source(self, info: TopicInfo, text: str) -> bool:
        key = source_key(info)
        if self.closed or key in self.sources:
            return False
        self.sources[key] = (text, self._notify_create(text))
        return True

    def _remove_source(self, info: TopicInfo) -> bool:
        entry = self.sources.pop(source_key(info), None)
        if entry is None:
            return False
        self._notify_delete(*entry)
        return True

    def _deliver(self, msg: Message, kind: EventKind) -> None:
        """Hand one message to the callback: now (context thread) or through the event queue.

        ``kind``: what the event queue counts the message as; ``EventKind.DATA`` (every receiver event)
        becomes the receiver's own kind, which for a wildcard receiver is ``WILDCARD_RECEIVER`` (UM's
        ``wrcv_msgs``).

        The hot path (once per delivered message): the direct call is inlined here rather than going
        through :meth:`_run_callback`, and the callback scope is entered only when the thread is not in
        one already (the event loop enters it while a thread runs it, and counts that in
        ``EventLoop.in_callback``: a plain attribute, where the thread-local costs a lookup)."""
        if self.closed or self.callback is None:
            if msg.response is not None:  # nobody will answer: the request's response object goes now
                msg.response._message_done()
            if self.closed:
                return
        if msg.type is _DATA or msg.type is _REQUEST:  # a request is a message of the topic too
            self._msgs += 1
            self._bytes += len(msg._data)
        else:
            counts = self._counts
            counts[msg.type] = counts.get(msg.type, 0) + 1
        callback = self.callback
        if callback is None:
            return
        msg.receiver_clientd = self.clientd
        if self.event_queue is not None:
            if msg.response is None:
                msg.retain()  # the receive buffer is reused before the queue is dispatched
            elif isinstance(msg._data, memoryview):
                # A request: its payload is copied, but it is not retained, so that its response object
                # goes with it when the callback returns unless the application retains it (seed 10.12.4).
                msg._data = bytes(msg._data)
            queued_as = self._event_kind if kind is _DATA_EVENT else kind
            self.event_queue.enqueue(queued_as, self._run_callback, msg)
            return
        try:
            if self._loop.in_callback:  # delivery runs on the loop's thread only
                callback(msg)
            else:
                with callback_scope():
                    callback(msg)
        except Exception:
            self.ctx.log.exception("receiver callback for %r raised", msg.topic)
        finally:
            if not msg.retained:
                msg._valid = False  # Message._callback_done(), inlined
                if msg.response is not None:  # a request's response object goes with its message
                    msg.response._message_done()

    def _deliver_data(
        self,
        topic: str,
        source: str,
        key: SourceKey,
        payload: bytes | memoryview,
        sqn: int,
        flags: int,
        properties: dict[str, Any] | None,
    ) -> None:
        """:meth:`_deliver` for one DATA message in order (the receive hot path): the message is built
        here, and the call made, with nothing else on the way."""
        if self.closed:
            return
        self._msgs += 1
        self._bytes += len(payload)
        callback = self.callback
        if callback is None:
            return
        # The source clientd comes from source_notification_function's create callback; without one it is
        # None, and the lookup (hashing the source key: a Python-level dataclass hash) is skipped.
        source_clientd = None
        if self._notify is not None:
            state = self.sources.get(key)
            if state is not None:
                source_clientd = state[1]
        # Positional arguments: keyword handling costs more than the rest of the construction.
        msg = Message(_DATA, topic, source, payload, sqn, flags, properties, source_clientd, self.clientd)
        if self.event_queue is not None:
            msg.retain()  # the receive buffer is reused before the queue is dispatched
            self.event_queue.enqueue(self._event_kind, self._run_callback, msg)
            return
        try:
            if self._loop.in_callback:  # delivery runs on the loop's thread only
                callback(msg)
            else:
                with callback_scope():
                    callback(msg)
        except Exception:
            self.ctx.log.exception("receiver callback for %r raised", topic)
        finally:
            if not msg.retained:
                msg._valid = False

    def _join_attributes(self, topic: str) -> Attributes:
        """The receiver options ``topic`` is joined with (its delivery controllers, the transport
        sessions it opens)."""
        return self.attributes

    def _statistics(self) -> ReceiverStatistics:
        c = self._counts
        return ReceiverStatistics(
            msgs_rcved=self._msgs,
            bytes_rcved=self._bytes,
            bos=c.get(MsgType.BOS, 0),
            eos=c.get(MsgType.EOS, 0),
            unrecoverable_loss=c.get(MsgType.UNRECOVERABLE_LOSS, 0),
            unrecoverable_loss_burst=c.get(MsgType.UNRECOVERABLE_LOSS_BURST, 0),
            no_source_notifications=c.get(MsgType.NO_SOURCE_NOTIFICATION, 0),
            sources=len(self.sources),
        )

    def _run_callback(self, msg: Message) -> None:
        """Run the callback for a message from the event queue (on the dispatching thread)."""
        if self.closed or self.callback is None:
            if msg.response is not None:
                msg.response._message_done()
            return
        try:
            if self.event_queue is None:
                with callback_scope():
                    self.callback(msg)
            else:
                self.callback(msg)
        except Exception:
            self.ctx.log.exception("receiver callback for %r raised", msg.topic)
        finally:
            msg._callback_done()

    @property
    def source_strings(self) -> list[str]:
        """The sources this receiver knows of (UM source strings)."""
        return [text for text, _ in self.sources.values()]


class Receiver(_Subscriber):
    """A subscription to one topic (``lbm_rcv_t``); create with :meth:`Context.create_receiver`."""

    def __init__(
        self,
        ctx: Context,
        topic: str,
        attrs: Attributes,
        callback: ReceiverCallback | None,
        clientd: Any,
        event_queue: EventQueue | None,
    ) -> None:
        super().__init__(ctx, attrs, callback, clientd, event_queue, EventKind.DATA)
        self.topic = topic
        spec = ReceiverSpec(
            topic,
            ctx._query_phases(attrs),
            attrs.get("resolution_number_of_sources_query_threshold"),
            attrs.get("resolution_no_source_notification_threshold"),
        )
        ctx._add_child(self)
        ctx._on_loop(ctx._resolver.add_receiver, self, spec)

    def _source_found(self, info: TopicInfo, text: str) -> None:
        if self._add_source(info, text):
            self.ctx._subscriptions.join(self, info, text)

    def _source_gone(self, info: TopicInfo, text: str) -> None:
        self.ctx._subscriptions.leave_source(self, info)
        self._remove_source(info)

    def statistics(self) -> ReceiverStatistics:
        """Counters of this receiver (messages and events delivered to its callback)."""
        return self._statistics()

    def close(self) -> None:
        """Delete the receiver (``lbm_rcv_delete``)."""
        forbid_in_callback("Receiver.close()")
        if self.closed:
            return
        self.closed = True
        self.ctx._on_loop(self._closed_on_loop)
        self.ctx._remove_child(self)
        if self.event_queue is not None:
            self.event_queue.detach(self)

    def _closed_on_loop(self) -> None:
        self.ctx._resolver.remove_receiver(self)
        self.ctx._subscriptions.leave(self)
        for text, source_clientd in list(self.sources.values()):
            self._notify_delete(text, source_clientd)
        self.sources.clear()

    def __enter__(self) -> Receiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Receiver {self.topic!r} {len(self.sources)} source(s){' closed' if self.closed else ''}>"


class WildcardReceiver(_Subscriber):
    """A subscription to every topic matching a pattern (``lbm_wildcard_rcv_t``, seed 3.4.2)."""

    def __init__(
        self,
        ctx: Context,
        pattern: str,
        attrs: Attributes,
        callback: ReceiverCallback | None,
        clientd: Any,
        event_queue: EventQueue | None,
    ) -> None:
        from openum._errors import ConfigError
        from openum._resolver import pattern_type_code

        self.pattern = pattern
        self.pattern_type = attrs.get("pattern_type")
        if self.pattern_type == "appcb":
            raise ConfigError(
                "pattern_type appcb is deprecated since UM 6.1 and not supported; use pcre",
                option="pattern_type",
                scope="wildcard_receiver",
                value="appcb",
                allowed="pcre",
            )
        code = pattern_type_code(self.pattern_type)
        try:
            self.regex: re.Pattern[str] = compile_pattern(pattern, code)
        except re.error as exc:
            raise ConfigError(
                f"invalid wildcard pattern {pattern!r}: {exc}",
                value=pattern,
                allowed="a PCRE-style regular expression (Python re syntax)",
            ) from None
        super().__init__(ctx, attrs, callback, clientd, event_queue, EventKind.WILDCARD_RECEIVER)
        self.topics: dict[str, int] = {}  # topic -> sources known on it
        # The per-topic receivers (seed 3.4.2): one exists for every topic in ``topics`` and for every
        # topic whose last source left less than resolver_no_source_linger_timeout ago (``_lingering``:
        # topic -> the timer that deletes it).  ``_topic_attrs``: the receiver options of each topic, as
        # receiver_create_callback left them.
        self._create_topic_cb: tuple[Any, ...] | None = attrs.get("receiver_create_callback")
        self._delete_topic_cb: tuple[Any, ...] | None = attrs.get("receiver_delete_callback")
        self._linger_ms: int = attrs.get("resolver_no_source_linger_timeout")
        self._lingering: dict[str, int] = {}
        self._topic_attrs: dict[str, Attributes] = {}
        self._ignored_logged: set[str] = set()
        self._receiver_attrs: Attributes | None = None
        if self._create_topic_cb is not None:
            self._receiver_attrs = _receiver_scope(attrs)
        spec = WildcardSpec(pattern, code, ctx._wildcard_phases(attrs))
        ctx._add_child(self)
        ctx._on_loop(ctx._resolver.add_wildcard, self, spec)

    def matches(self, topic: str) -> bool:
        return self.regex.search(topic) is not None

    def _source_found(self, info: TopicInfo, text: str) -> None:
        if self.closed:
            return
        topic = info.topic
        if topic not in self.topics:
            timer = self._lingering.pop(topic, None)
            if timer is not None:
                self._loop.cancel_timer(timer)  # a source came back in time: the same topic receiver
            else:
                self._create_topic(topic)
        if self._add_source(info, text):
            self.topics[topic] = self.topics.get(topic, 0) + 1
            self.ctx._subscriptions.join(self, info, text)

    def statistics(self) -> ReceiverStatistics:
        """Counters of this wildcard receiver (messages and events delivered to its callback)."""
        return self._statistics()

    def _source_gone(self, info: TopicInfo, text: str) -> None:
        self.ctx._subscriptions.leave_source(self, info)
        if self._remove_source(info):
            topic = info.topic
            left = self.topics.get(topic, 1) - 1
            if left:
                self.topics[topic] = left
            else:
                self.topics.pop(topic, None)
                self._linger(topic)

    # -- per-topic receivers (on the loop) -------------------------------------------------------------
    def _create_topic(self, topic: str) -> None:
        """The receiver for ``topic`` is about to be created: ``receiver_create_callback``, which may
        adjust the topic's receiver options (a copy of the wildcard receiver's)."""
        create = self._create_topic_cb
        base = self._receiver_attrs
        if create is None or base is None:
            return
        topic_attrs = base.copy()
        try:
            with callback_scope():
                create[0](topic, topic_attrs, create[-1])
            topic_attrs.validate()  # low <= high pairs, as for options set any other way
        except Exception:
            self.ctx.log.exception(
                "receiver_create_callback for topic %r raised; the topic is received with the wildcard "
                "receiver's options",
                topic,
            )
            return
        self._topic_attrs[topic] = topic_attrs
        self._log_ignored(topic, base, topic_attrs)

    def _log_ignored(self, topic: str, base: Attributes, topic_attrs: Attributes) -> None:
        """Say (once per option) when the create callback changed an option that cannot apply to one
        topic: nothing is ignored silently."""
        before = base.explicit()
        for name, value in topic_attrs.explicit().items():
            if name in _NOT_PER_TOPIC and name not in self._ignored_logged and before.get(name) != value:
                self._ignored_logged.add(name)
                where = (
                    WILDCARD_QUERIES_TEXT
                    if name in WILDCARD_QUERIES_INSTEAD
                    else "a wildcard receiver reads it for all its topics: set it in receiver_attrs of "
                    "create_wildcard_receiver"
                )
                self.ctx.log.warning(
                    "receiver_create_callback set receiver option %s for topic %r: it has no effect "
                    "there; %s",
                    name,
                    topic,
                    where,
                )

    def _join_attributes(self, topic: str) -> Attributes:
        return self._topic_attrs.get(topic, self.attributes)

    def _linger(self, topic: str) -> None:
        """The last source of ``topic`` left: delete its receiver after resolver_no_source_linger_timeout
        (0: now), unless a source of the topic is found first."""
        if self.closed or self._linger_ms == 0:
            self._delete_topic(topic)  # closed: the source left between close() and _closed_on_loop
            return
        if self._create_topic_cb is None and self._delete_topic_cb is None:
            return  # nothing to see of the topic receiver's life: no timer
        self._lingering[topic] = self._loop.schedule_timer(self._linger_ms, self._linger_expired, topic)

    def _linger_expired(self, topic: str) -> None:
        if self._lingering.pop(topic, None) is not None:
            self._delete_topic(topic)

    def _delete_topic(self, topic: str) -> None:
        """The receiver for ``topic`` is about to be deleted: ``receiver_delete_callback``."""
        self._topic_attrs.pop(topic, None)
        delete = self._delete_topic_cb
        if delete is None:
            return
        try:
            with callback_scope():
                delete[0](topic, delete[-1])
        except Exception:
            self.ctx.log.exception("receiver_delete_callback for topic %r raised", topic)

    def close(self) -> None:
        """Delete the wildcard receiver (``lbm_wildcard_rcv_delete``)."""
        forbid_in_callback("WildcardReceiver.close()")
        if self.closed:
            return
        self.closed = True
        self.ctx._on_loop(self._closed_on_loop)
        self.ctx._remove_child(self)
        if self.event_queue is not None:
            self.event_queue.detach(self)

    def _closed_on_loop(self) -> None:
        self.ctx._resolver.remove_wildcard(self)
        self.ctx._subscriptions.leave(self)
        for text, source_clientd in list(self.sources.values()):
            self._notify_delete(text, source_clientd)
        self.sources.clear()
        # Every topic receiver goes with the wildcard receiver, after its sources (as when the last
        # source of a topic leaves): the lingering ones too.
        for timer in self._lingering.values():
            self._loop.cancel_timer(timer)
        topics = [*self.topics, *self._lingering]
        self.topics.clear()
        self._lingering.clear()
        for topic in topics:
            self._delete_topic(topic)

    def __enter__(self) -> WildcardReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<WildcardReceiver {self.pattern!r} {len(self.topics)} topic(s){state}>"


def _receiver_scope(attrs: Attributes) -> Attributes:
    """The receiver options a wildcard receiver applies to its topics (``receiver_attrs`` of
    :meth:`Context.create_wildcard_receiver` over the configuration): the context merges them with the
    wildcard_receiver options and keeps them apart as ``receiver``."""
    receiver = getattr(attrs, "receiver", None)
    if not isinstance(receiver, Attributes) or receiver.scope != "receiver":
        raise TypeError(f"no receiver options in the wildcard receiver's attributes {attrs!r}")
    return receiver
