"""Receivers and wildcard receivers (seed 3.4, 3.4.2, 8.1.2-8.1.3).

A receiver subscribes to one topic; a wildcard receiver to every topic matching a PCRE pattern.
Callbacks run on the context thread unless the receiver was given an :class:`~openum.EventQueue`.

Source notifications (``source_notification_function``, seed 7.1): ``create(source_string, clientd)``
is called when the receiver finds a source (its return value becomes that source's ``source_clientd``)
and ``delete(source_string, clientd, source_clientd)`` when the source goes away.
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


@dataclass(frozen=True, slots=True)
class ReceiverStatistics:
    """What a receiver delivered to its callback.

    ``msgs_rcved``/``bytes_rcved``: data messages and their payload bytes.  ``bos``/``eos``: session
    events.  ``unrecoverable_loss``: messages declared lost (one per sequence number).
    ``unrecoverable_loss_burst``: burst-loss events.  ``no_source_notifications``.  ``sources``: sources
    the receiver knows now.
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
        self.closed = False
        self.sources: dict[SourceKey, tuple[str, Any]] = {}  # key -> (source string, source clientd)
        self._counts: dict[MsgType, int] = {}  # events other than DATA, by type
        self._msgs = 0  # DATA messages
        self._bytes = 0
        self._notify = attrs.get("source_notification_function")
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

        The hot path (once per delivered message): the direct call is inlined here rather than going
        through :meth:`_run_callback`, and the callback scope is entered only when the thread is not in
        one already (the event loop enters it while a thread runs it, and counts that in
        ``EventLoop.in_callback``: a plain attribute, where the thread-local costs a lookup)."""
        if self.closed:
            return
        if msg.type is _DATA:
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
            msg.retain()  # the receive buffer is reused before the queue is dispatched
            self.event_queue.enqueue(kind, self._run_callback, msg)
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
            self.event_queue.enqueue(EventKind.DATA, self._run_callback, msg)
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
        super().__init__(ctx, attrs, callback, clientd, event_queue)
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
        super().__init__(ctx, attrs, callback, clientd, event_queue)
        self.topics: dict[str, int] = {}  # topic -> sources known on it
        spec = WildcardSpec(pattern, code, ctx._wildcard_phases(attrs))
        ctx._add_child(self)
        ctx._on_loop(ctx._resolver.add_wildcard, self, spec)

    def matches(self, topic: str) -> bool:
        return self.regex.search(topic) is not None

    def _source_found(self, info: TopicInfo, text: str) -> None:
        if self._add_source(info, text):
            self.topics[info.topic] = self.topics.get(info.topic, 0) + 1
            self.ctx._subscriptions.join(self, info, text)

    def statistics(self) -> ReceiverStatistics:
        """Counters of this wildcard receiver (messages and events delivered to its callback)."""
        return self._statistics()

    def _source_gone(self, info: TopicInfo, text: str) -> None:
        self.ctx._subscriptions.leave_source(self, info)
        if self._remove_source(info):
            left = self.topics.get(info.topic, 1) - 1
            if left:
                self.topics[info.topic] = left
            else:
                self.topics.pop(info.topic, None)

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

    def __enter__(self) -> WildcardReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<WildcardReceiver {self.pattern!r} {len(self.topics)} topic(s){state}>"
