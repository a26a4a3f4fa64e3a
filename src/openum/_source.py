"""Sources (seed 3.3): a publisher of one topic on a transport session.

Creating a source maps it onto a transport session of the context (seed 2.9), gives it a topic index
on that session and starts advertising it through topic resolution (seed 8.1).  ``send`` encodes the
message straight into the session's batch buffer on the caller's thread (ARCHITECTURE.md 3).

Source events (seed 2.11.2-2.11.3) reach ``event_callback(event, info, clientd)`` on the context thread
(or through the source's event queue): ``CONNECT``/``DISCONNECT`` with the receiver's ``"ip:port"`` when a
receiver joins or leaves the transport session, and ``WAKEUP`` once sending may resume after a
non-blocking send raised :class:`~openum.WouldBlock`.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from openum._errors import ClosedError, NotSupportedError
from openum._immediate import source_index
from openum._late_join import retention_params
from openum._message import Message, SourceEvent
from openum.config import Attributes
from openum.protocol.resolution import SourceSpec
from openum.runtime import EventKind, EventQueue, callback_scope, forbid_in_callback
from openum.transport._reliable import ReliableSourceStatistics
from openum.transport._source_session import SourceSessionBase, TopicSender
from openum.transport.ipc import ShmSourceStatistics, SmxSourceSession
from openum.transport.tcp import TcpSourceStatistics
from openum.wire import WireError
from openum.wire.lbmc import PropertiesBlock, Property, TypedValue
from openum.wire.lbmr import TopicInfo, TopicOption

if TYPE_CHECKING:
    from openum._context import Context
    from openum._immediate import Request, ResponseCallback

__all__ = ["SendFlags", "Source", "SourceEventCallback"]

_ids = itertools.count(1)

#: Transports whose sources this version of openum can create (the ``transport`` source option).
AVAILABLE_TRANSPORTS = ("tcp", "lbtru", "lbtrm", "lbtipc", "lbtsmx")

#: What :meth:`Source.statistics` returns: the counters of the source's transport session.
SourceStatistics = TcpSourceStatistics | ReliableSourceStatistics | ShmSourceStatistics

#: ``event_callback(event, info, clientd)``.
SourceEventCallback = Callable[[SourceEvent, Any, Any], Any]


class SendFlags(enum.IntFlag):
    """Flags of :meth:`Source.send` (UM's ``LBM_MSG_*`` / ``LBM_SRC_NONBLOCK`` values)."""

    NONE = 0
    START_BATCH = 0x1  # deprecated explicit batching (seed 8.6.4)
    END_BATCH = 0x2
    FLUSH = 0x4  # send the implicit batch now (intelligent batching, seed 8.6.2)
    NONBLOCK = 0x8  # raise WouldBlock instead of waiting (seed 2.11.3)


_START_BATCH, _END_BATCH, _FLUSH, _NONBLOCK = (
    int(f) for f in (SendFlags.START_BATCH, SendFlags.END_BATCH, SendFlags.FLUSH, SendFlags.NONBLOCK)
)
_ALL_FLAGS: Final = _START_BATCH | _END_BATCH | _FLUSH | _NONBLOCK


def _bad_flags(flags: object) -> Exception:
    allowed = "SendFlags.NONE or a combination of " + " | ".join(
        f"{f.name} ({int(f):#x})" for f in SendFlags if f
    )
    if not isinstance(flags, int):
        return TypeError(
            f"send() flags must be SendFlags (an int), not {type(flags).__name__}; allowed: {allowed}"
        )
    return ValueError(f"send() flags {flags:#x} are not SendFlags; allowed: {allowed}")


class Source(TopicSender):
    """A source for one topic (``lbm_src_t``); create with :meth:`Context.create_source`."""

    def __init__(
        self,
        ctx: Context,
        topic: str,
        attrs: Attributes,
        event_callback: SourceEventCallback | None,
        clientd: Any,
        event_queue: EventQueue | None = None,
    ) -> None:
        if event_callback is not None and not callable(event_callback):
            raise TypeError("event_callback must be callable: event_callback(event, info, clientd)")
        self.id = next(_ids)
        self.ctx = ctx
        self.topic = topic
        self.attributes = attrs
        self.event_callback = event_callback
        self.clientd = clientd
        self.event_queue = event_queue
        self.closed = False
        self._next_sqn = 0
        self._last_send_ns: int | None = None
        self._retention = None  # a late-join source's retention buffer (set by LateJoin)
        self._holding = False
        self.transport: str = attrs.get("transport")
        if self.transport not in AVAILABLE_TRANSPORTS:
            raise NotSupportedError(
                f"transport {self.transport!r} is not available in this version of openum (available: "
                f"{', '.join(AVAILABLE_TRANSPORTS)}); set 'source transport tcp'"
            )
        self.session: SourceSessionBase = ctx._source_session_for(self.transport, attrs)
        self.topic_index = self.session.allocate_index(self)
        transport = self.session.transport_info()
        self.info = TopicInfo(topic, self.topic_index, transport)
        self.source_string: str = ctx._resolver_source_string(self.info)
        retention = retention_params(attrs)
        if retention.late_join and self.transport == "lbtsmx":
            # UM Concepts Guide 6.5.6: LBT-SMX has no Late Join; the source is created without it.
            ctx.log.warning("source %r: LBT-SMX does not support Late Join; late_join is not enabled", topic)
            retention = dataclasses.replace(retention, late_join=False)
        options: tuple[TopicOption, ...] = ()
        if retention.late_join:  # UM Concepts Guide 10.2: retention, and the TIR offers Late Join
            options = ctx._immediate.late_join.add_source(self, retention)
        spec = SourceSpec(
            topic,
            transport,
            self.topic_index,
            ctx._advertisement_phases(attrs),
            attrs.get("resolver_advertisement_send_immediate_response"),
            attrs.get("resolver_send_final_advertisements"),
            attrs.get("resolver_send_initial_advertisement"),
            options,
        )
        if event_queue is not None:
            event_queue.attach(self)
        ctx._add_child(self)
        ctx._on_loop(ctx._resolver.add_source, self.id, spec)

    # -- sending ------------------------------------------------------------------------------------
    def send(
        self,
        data: bytes | bytearray | memoryview,
        flags: int = SendFlags.NONE,
        *,
        properties: Mapping[str, Any] | None = None,
    ) -> int:
        """Send one message (``lbm_src_send`` / ``lbm_src_send_ex``); returns its topic sequence number.

        ``flags``: :class:`SendFlags` (``FLUSH`` pushes the implicit batch out now; ``NONBLOCK`` raises
        :class:`~openum.WouldBlock` instead of waiting for slow receivers). ``properties``: message
        properties (seed 10.11) as ``{name: value}``: bool, int (INT, or LONG when it does not fit), float
        (DOUBLE) and str; give a ``openum.wire.lbmc.TypedValue`` for BYTE, SHORT, LONG or FLOAT.
        Messages larger than a datagram are fragmented (seed 8.7).
        """
        if self.closed:
            raise ClosedError(f"source {self.topic!r} is closed")
        if type(data) is not bytes and type(data) is not bytearray:
            if type(data) is memoryview:
                if data.ndim != 1 or data.itemsize != 1 or not data.c_contiguous:
                    data = data.tobytes()  # the message carries the view's bytes, in order
            elif not isinstance(data, bytearray):
                raise TypeError(
                    f"send() takes bytes-like data, not {type(data).__name__} (encode text first)"
                )
        if flags == 0 and properties is None:  # the common case: no flags to read, no properties
            return self.session.send(self, data, False, False, self._holding, None)
        if not isinstance(flags, int) or flags & ~_ALL_FLAGS:
            raise _bad_flags(flags)
        block = None if properties is None else _properties(properties)
        flags = int(flags)  # plain int arithmetic below: IntFlag operators cost microseconds per send
        if flags & _START_BATCH:
            self._holding = True
        hold = self._holding
        if flags & _END_BATCH:
            self._holding = False
            hold = False
        return self.session.send(self, data, bool(flags & _FLUSH), bool(flags & _NONBLOCK), hold, block)

    def send_request(
        self,
        data: bytes | bytearray | memoryview,
        callback: ResponseCallback,
        clientd: Any = None,
        *,
        event_queue: EventQueue | None = None,
        flags: int = SendFlags.NONE,
        properties: Mapping[str, Any] | None = None,
    ) -> Request:
        """Send a request on this source's topic (``lbm_send_request``, seed 10.12.1).

        Every receiver of the topic gets it as a ``REQUEST`` message and may answer with
        :meth:`Message.respond <openum.Message.respond>`; each response reaches ``callback(msg)`` (a
        ``RESPONSE`` message whose ``receiver_clientd`` is ``clientd``) on the context thread, or through
        ``event_queue``, until the returned :class:`~openum.Request` is closed.  The request travels on
        the source's transport like any message (it takes a topic sequence number); ``flags`` are
        ``FLUSH`` and ``NONBLOCK`` as for :meth:`send` (batching flags are refused)."""
        if self.closed:
            raise ClosedError(f"source {self.topic!r} is closed")
        if not isinstance(flags, int) or flags & ~(_FLUSH | _NONBLOCK):
            if isinstance(flags, int) and not flags & ~_ALL_FLAGS:
                raise ValueError(
                    f"send_request() flags {int(flags):#x}: a request cannot be part of an explicit batch; "
                    "allowed: SendFlags.NONE, FLUSH, NONBLOCK"
                )
            raise _bad_flags(flags)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(
                f"send_request() takes bytes-like data, not {type(data).__name__} (encode text first)"
            )
        block = properties_block(properties)
        messaging = self.ctx._immediate
        request, header = messaging.new_request(self.topic, callback, clientd, event_queue, "send_request()")
        try:
            self.session.send_with_headers(
                self, data, (header,), bool(flags & _FLUSH), bool(flags & _NONBLOCK), block
            )
        except BaseException:
            request.close()
            raise
        return request

    def receive_immediate_messages(
        self,
        callback: Callable[[Message, Any], Any] | None,
        clientd: Any = None,
        *,
        event_queue: EventQueue | None = None,
    ) -> None:
        """Take the immediate messages sent to this source (``"SOURCE:" + its source string``, UM Concepts
        Guide 10.15): ``callback(msg, clientd)`` gets them (and immediate requests, which it may answer) on
        the context thread, or through ``event_queue`` (counted as ``source_events``), and no other
        callback does.  Without one (or after ``None``) they reach the context as any immediate message:
        the receivers of their topic, or the context's immediate message callbacks."""
        if self.closed:
            raise ClosedError(f"source {self.topic!r} is closed")
        self.ctx._immediate.set_source_callback(self._immediate_index(), callback, clientd, event_queue)

    def _immediate_index(self) -> int:
        return source_index(self.session.transport_info(), self.topic_index)

    def flush(self) -> None:
        """Send what implicit batching holds now (``lbm_src_flush``)."""
        if self.closed:
            raise ClosedError(f"source {self.topic!r} is closed")
        self.session.flush()

    # -- LBT-SMX's zero-copy API (UM Concepts Guide 6.5.2) ----------------------------------------------
    def buff_acquire(self, length: int, flags: int = SendFlags.NONE) -> memoryview:
        """A writable view of ``length`` bytes in the LBT-SMX ring for this source's next message
        (``lbm_src_buff_acquire``): write the message into it, then :meth:`buffs_complete` publishes
        every acquired one.  Waits (spinning) while receivers have not read enough; with
        ``SendFlags.NONBLOCK`` raises :class:`~openum.WouldBlock` instead.  Not thread-safe: the caller
        serialises the sources of one session.  Only on an ``lbtsmx`` source."""
        if not isinstance(flags, int) or flags & ~_NONBLOCK:
            raise ValueError(f"buff_acquire() flags {flags!r}: allowed SendFlags.NONE or NONBLOCK")
        return self._smx("buff_acquire").acquire(self, length, bool(flags & _NONBLOCK))

    def buffs_complete(self) -> int:
        """Publish every acquired buffer to the receivers (``lbm_src_buffs_complete``); returns how many."""
        return self._smx("buffs_complete").complete()

    def buffs_complete_and_acquire(self, length: int, flags: int = SendFlags.NONE) -> memoryview:
        """:meth:`buffs_complete`, then :meth:`buff_acquire` (``lbm_src_buffs_complete_and_acquire``)."""
        self.buffs_complete()
        return self.buff_acquire(length, flags)

    def buffs_cancel(self) -> int:
        """Drop the acquired, not yet completed buffers (``lbm_src_buffs_cancel``); returns how many."""
        return self._smx("buffs_cancel").cancel(self)

    def _smx(self, api: str) -> SmxSourceSession:
        """The LBT-SMX session of this open source, for its zero-copy ``api``."""
        if self.closed:
            raise ClosedError(f"source {self.topic!r} is closed")
        session = self.session
        if not isinstance(session, SmxSourceSession):
            raise NotSupportedError(
                f"{api} is LBT-SMX's zero-copy API (UM Concepts Guide 6.5.2); this source is {self.transport}"
            )
        return session

    @property
    def sequence_number(self) -> int:
        """The topic sequence number the next message will get."""
        return self._next_sqn

    # -- events (context thread) ---------------------------------------------------------------------
    def _session_event(self, code: int, info: Any) -> None:
        if self.event_callback is None or self.closed:
            return
        event = SourceEvent(code)
        text = f"{info[0]}:{info[1]}" if isinstance(info, tuple) else info
        if self.event_queue is not None:
            self.event_queue.enqueue(EventKind.SOURCE, self._run_event, event, text)
        else:
            self._run_event(event, text)

    def _run_event(self, event: SourceEvent, info: Any) -> None:
        assert self.event_callback is not None
        try:
            if self.event_queue is None:
                with callback_scope():
                    self.event_callback(event, info, self.clientd)
            else:
                self.event_callback(event, info, self.clientd)
        except Exception:
            self.ctx.log.exception("source event callback of %r raised", self.topic)

    # -- statistics and closing -----------------------------------------------------------------------
    def statistics(self) -> SourceStatistics:
        """Counters of the source's transport session (shared by the sources on it)."""
        stats: SourceStatistics = self.session.statistics()
        return stats

    def close(self) -> None:
        """Delete the source (``lbm_src_delete``): flush what is batched, stop advertising (final
        advertisements when ``resolver_send_final_advertisements`` asks for them), and release the
        session when it has no source left (its receivers then get EOS)."""
        forbid_in_callback("Source.close()")
        if self.closed:
            return
        try:
            self.session.flush()
        except ClosedError:
            pass
        self.closed = True
        self.ctx._immediate.set_source_callback(self._immediate_index(), None, None, None)
        if self._retention is not None:
            self.ctx._immediate.late_join.remove_source(self)
        self.ctx._on_loop(self.ctx._resolver.remove_source, self.id)
        self.session.release_index(self.topic_index)
        self.ctx._release_source_session(self.transport, self.session)
        self.ctx._remove_child(self)
        if self.event_queue is not None:
            self.event_queue.detach(self)

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Source {self.topic!r} {self.source_string}{' closed' if self.closed else ''}>"


def properties_block(values: Mapping[str, Any] | None) -> PropertiesBlock | None:
    """Message properties given as ``{name: value}`` (or None) as the block that goes on the wire."""
    return None if values is None else _properties(values)


def _properties(values: Mapping[str, Any]) -> PropertiesBlock:
    if isinstance(values, PropertiesBlock):
        return values
    if not isinstance(values, Mapping):
        raise TypeError("properties must be a mapping of name -> value")
    for name, value in values.items():
        if not isinstance(name, str):
            raise TypeError(f"property names are strings, not {name!r}")
        if not isinstance(value, bool | int | float | str | TypedValue | Property):
            raise TypeError(
                f"property {name!r}: {type(value).__name__} values are not supported "
                "(bool, int, float, str, or openum.wire.lbmc.TypedValue)"
            )
    try:
        return PropertiesBlock.from_mapping(values)
    except WireError as exc:
        raise ValueError(f"invalid message properties: {exc}") from None
