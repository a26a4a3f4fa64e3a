"""Topic resolution inside a context: the engine and its sockets, and what discovery means for the
context's receivers (seed 7.1, 8.1).

Everything here runs on the context's loop (its thread in embedded mode); the context marshals calls
with ``call_soon``.  Application callbacks (source notifications, receiver messages) run there too, or
through the receiver's event queue.

Closing (:meth:`ContextResolver.finish_soon`, :meth:`ContextResolver.close`): every final advertisement
of a deleted source (``resolver_send_final_advertisements``) leaves before ``Context.close()`` returns.
The loop keeps sending them at their spacing, the last brought forward to within
:data:`FINALS_WITHIN_NS` of the close; the wait for them is bounded by :data:`FINALS_WAIT_NS` (timers run
late on a loaded machine), after which what is left goes at once.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openum._message import Message, MsgType
from openum._source_string import SourceStringError, from_topic_info
from openum.config import Attributes
from openum.protocol.resolution import (
    NoSourceNotification,
    PhaseParams,
    ReceiverSpec,
    SourceDiscovered,
    SourceForgotten,
    SourceLeft,
    SourceSpec,
    WildcardSpec,
    source_key,
)
from openum.protocol.resolution._engine import Event
from openum.runtime import NS_PER_MS, EventKind, ManualClock, callback_scope
from openum.transport.resolver_udp import ResolverLink
from openum.wire.lbmr import PATTERN_PCRE, PATTERN_REGEX, TopicInfo

if TYPE_CHECKING:
    from openum._context import Context
    from openum._receiver import Receiver, WildcardReceiver

__all__ = ["ContextResolver", "advertisement_phases", "query_phases", "wildcard_phases"]

MS_PER_S = 1000
#: At close, the final advertisements left are brought forward so the last is due within this.
FINALS_WITHIN_NS = 1000 * NS_PER_MS
#: ``Context.close()`` waits at most this long for them; what is left then goes at once.
FINALS_WAIT_NS = FINALS_WITHIN_NS + 1000 * NS_PER_MS


def advertisement_phases(attrs: Attributes) -> PhaseParams:
    return PhaseParams.from_ms(
        attrs.get("resolver_advertisement_minimum_initial_interval"),
        attrs.get("resolver_advertisement_maximum_initial_interval"),
        attrs.get("resolver_advertisement_minimum_initial_duration"),
        attrs.get("resolver_advertisement_sustain_interval"),
        attrs.get("resolver_advertisement_minimum_sustain_duration") * MS_PER_S,
    )


def query_phases(attrs: Attributes) -> PhaseParams:
    return PhaseParams.from_ms(
        attrs.get("resolver_query_minimum_initial_interval"),
        attrs.get("resolver_query_maximum_initial_interval"),
        attrs.get("resolver_query_minimum_initial_duration"),
        attrs.get("resolver_query_sustain_interval"),
        attrs.get("resolver_query_minimum_sustain_duration") * MS_PER_S,
    )


def wildcard_phases(attrs: Attributes) -> PhaseParams:
    # Wildcard receivers have no sustaining query phase (seed 8.1.3).
    return PhaseParams.from_ms(
        attrs.get("resolver_query_minimum_interval"),
        attrs.get("resolver_query_maximum_interval"),
        attrs.get("resolver_query_minimum_duration") * MS_PER_S,
        0,
        0,
    )


def pattern_type_code(name: str) -> int:
    return {"pcre": PATTERN_PCRE, "regex": PATTERN_REGEX}.get(name, PATTERN_PCRE)


class ContextResolver:
    """The context's topic resolution: engine, sockets and the fan-out of discoveries."""

    #: How long an embedded-mode ``Context.close()`` waits for the final advertisements (seconds).
    FINALS_WAIT_S = FINALS_WAIT_NS / 1e9

    def __init__(self, ctx: Context, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.instance = ctx._immediate.instance  # the context instance (seed 7.1; UIM headers use it too)
        self.include_index: bool = ctx.attributes.get("source_includes_topic_index")
        self.link = ResolverLink(
            ctx._loop,
            ctx.attributes,
            self.instance,
            self._on_events,
            self._on_no_source,
            ctx.log,
            rng,
            source_options=ctx._immediate.topic_options(),
        )
        self.engine = self.link.engine
        self._receivers: dict[int, Receiver] = {}
        self._receivers_by_topic: dict[str, list[Receiver]] = {}
        self._wildcards: dict[int, WildcardReceiver] = {}
        self._notify = ctx.attributes.get("resolver_source_notification_function")

    def source_string(self, info: TopicInfo) -> str:
        try:
            return from_topic_info(info).format(include_topic_index=self.include_index)
        except SourceStringError:
            # A transport UM's source strings do not cover (LBT-RDMA, unknown types from foreign peers).
            suffix = f"[{info.index}]" if self.include_index else ""
            return (
                f"{type(info.transport).__name__.replace('Transport', '').upper()}:{info.transport}{suffix}"
            )

    # -- sources (on the loop) ----------------------------------------------------------------------
    def add_source(self, source_id: int, spec: SourceSpec) -> None:
        events = self.engine.add_source(source_id, spec, self.ctx.now_ns())
        self._on_events(events)
        self.link.reschedule()

    def remove_source(self, source_id: int) -> None:
        events = self.engine.remove_source(source_id, self.ctx.now_ns())
        self._on_events(events)
        self.link.reschedule()

    # -- receivers (on the loop) --------------------------------------------------------------------
    def add_receiver(self, rcv: Receiver, spec: ReceiverSpec) -> None:
        self._receivers[rcv.id] = rcv
        self._receivers_by_topic.setdefault(rcv.topic, []).append(rcv)
        for info in self.engine.add_receiver(rcv.id, spec, self.ctx.now_ns()):
            rcv._source_found(info, self.source_string(info))  # from the cache: no network wait (seed 7.1)
        self.link.reschedule()

    def remove_receiver(self, rcv: Receiver) -> None:
        self.engine.remove_receiver(rcv.id)
        self._receivers.pop(rcv.id, None)
        peers = self._receivers_by_topic.get(rcv.topic, [])
        if rcv in peers:
            peers.remove(rcv)
        if not peers:
            self._receivers_by_topic.pop(rcv.topic, None)
        self.link.reschedule()

    def add_wildcard(self, wrcv: WildcardReceiver, spec: WildcardSpec) -> None:
        self._wildcards[wrcv.id] = wrcv
        for info in self.engine.add_wildcard(wrcv.id, spec, self.ctx.now_ns()):
            wrcv._source_found(info, self.source_string(info))
        self.link.reschedule()

    def remove_wildcard(self, wrcv: WildcardReceiver) -> None:
        self.engine.remove_wildcard(wrcv.id)
        self._wildcards.pop(wrcv.id, None)
        self.link.reschedule()

    def source_lost(self, info: TopicInfo) -> None:
        """A joined session ended (EOS): the source leaves the resolver cache, and the context's
        source notification delete callback hears of it."""
        if self.engine.source_lost(info.topic, source_key(info), self.ctx.now_ns()):
            self._call_notify(1, info.topic, self.source_string(info))
        self.link.reschedule()

    def topic_resolution_request(self, flags: int) -> None:
        self.engine.topic_resolution_request(flags, self.ctx.now_ns())
        self.link.reschedule()

    # -- engine events ------------------------------------------------------------------------------
    def _on_events(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, SourceDiscovered):
                text = self.source_string(event.info)
                self._call_notify(0, event.topic, text)
                for rcv in list(self._receivers_by_topic.get(event.topic, ())):
                    rcv._source_found(event.info, text)
                for wrcv in list(self._wildcards.values()):
                    if wrcv.matches(event.topic):
                        wrcv._source_found(event.info, text)
            elif isinstance(event, SourceLeft):
                text = self.source_string(event.info)
                self._call_notify(1, event.topic, text)
                for rcv in list(self._receivers_by_topic.get(event.topic, ())):
                    rcv._source_gone(event.info, text)
                for wrcv in list(self._wildcards.values()):
                    if wrcv.matches(event.topic):
                        wrcv._source_gone(event.info, text)
            elif isinstance(event, SourceForgotten):
                # The cache forgot it (expired or evicted): the delete notification balances the create;
                # receivers that joined it stay joined until their transport ends.
                self._call_notify(1, event.topic, self.source_string(event.info))

    def _call_notify(self, which: int, topic: str, source: str) -> None:
        if self._notify is None:
            return
        func: Callable[..., Any] | None = (
            self._notify[0] if which == 0 else (self._notify[1] if len(self._notify) == 3 else None)
        )
        if func is None:
            return
        clientd = self._notify[-1]
        try:
            with callback_scope():
                func(topic, source, clientd)
        except Exception:
            self.ctx.log.exception("resolver_source_notification_function raised")

    def _on_no_source(self, notes: list[NoSourceNotification]) -> None:
        for note in notes:
            rcv = self._receivers.get(note.receiver_id)
            if rcv is not None:
                rcv._deliver(Message(MsgType.NO_SOURCE_NOTIFICATION, note.topic), EventKind.DATA)

    # -- closing ----------------------------------------------------------------------------------------
    def finish_soon(self) -> threading.Event:
        """Queue the start of closing on the loop, after the calls already queued (the deletion of a
        source closed just before queues its final advertisements).  The event is set once no final
        advertisement is left, or the socket refused one."""
        finished = threading.Event()
        loop = self.ctx._loop

        def done() -> None:
            finished.set()
            loop.unblock()  # a sequential-mode close driving the loop (drive_until) stops waiting

        loop.call_soon(self.link.finish, done, FINALS_WITHIN_NS)
        return finished

    def drive_until(self, finished: threading.Event) -> None:
        """Sequential mode: the caller's thread runs the loop until ``finished`` is set, for at most
        :data:`FINALS_WAIT_NS`.  On the caller's clock (a manual clock) no time passes while we wait: one
        iteration runs what is queued, and :meth:`close` sends the rest at once."""
        loop = self.ctx._loop
        if isinstance(loop.clock, ManualClock):
            loop.process_at(loop.clock.now_ns())
            return
        end = loop.clock.now_ns() + FINALS_WAIT_NS
        while not finished.is_set():
            left = end - loop.clock.now_ns()
            if left <= 0:
                return
            loop.process_for(-(-left // NS_PER_MS))

    def close(self) -> None:
        """Send what is due and every final advertisement left (at once), then close the sockets."""
        self.link.send_remaining()
        self.link.close()
