"""The context: UM's heavyweight parent object (seed 3.1, 3.0 lifecycle, 8.4 operational modes).

A context owns the configuration of everything created in it and an event loop that runs topic
resolution, transports, timers and callbacks:

- **embedded** mode (``operational_mode embedded``, the default): a context thread runs the loop;
- **sequential** mode (``operational_mode sequential``): no thread; the application calls
  :meth:`Context.process_events` (real time) or :meth:`Context.process_events_at` (its own clock).

Lifetime rules (seed 3.0) are enforced with :class:`~openum.InvalidStateError`: a context with open
sources or receivers cannot be closed (a ``with`` block closes them for you, newest first), a closed
context creates nothing, and blocking calls are refused from context-thread callbacks.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Final, Protocol, Self, TypeVar, cast

from openum._errors import ClosedError, ConfigError, InvalidStateError
from openum._immediate import ImmediateMessaging, Request, ResponseCallback
from openum._message import Message
from openum._receiver import (
    WILDCARD_QUERIES_INSTEAD,
    WILDCARD_QUERIES_TEXT,
    Receiver,
    ReceiverCallback,
    WildcardReceiver,
)
from openum._resolver import ContextResolver, advertisement_phases, query_phases, wildcard_phases
from openum._source import Source, properties_block
from openum._subscription import Subscriptions
from openum.config import (
    REGISTRY,
    Attributes,
    Config,
    ContextAttributes,
    ReceiverAttributes,
    SourceAttributes,
    WildcardReceiverAttributes,
    default_config,
)
from openum.config._config import ConfigSource
from openum.config._implemented import ENV_POLICY
from openum.config._registry import Option
from openum.protocol.resolution import PhaseParams
from openum.runtime import (
    Clock,
    EventLoop,
    EventQueue,
    FdEvent,
    ManualClock,
    MonotonicClock,
    forbid_in_callback,
)
from openum.runtime._threads import callback_state
from openum.transport._interfaces import resolve_interface
from openum.transport._source_session import SourceSessionBase
from openum.transport.ipc import IpcSessionPool, SmxSessionPool
from openum.transport.lbtrm import RmSessionPool
from openum.transport.lbtru import RuSessionPool
from openum.transport.tcp import TcpSessionPool
from openum.wire.lbmr import ResolutionRequestFlags, TopicInfo

__all__ = ["Context", "ContextStatistics", "LogCallback"]

_log = logging.getLogger("openum")
_SEQUENTIAL = "sequential"
_ctx_log = logging.getLogger("openum.context")

#: ``log_callback(level, message)``: ``level`` is a :mod:`logging` level number.
LogCallback = Callable[[int, str], Any]

_ids = itertools.count(1)
_T = TypeVar("_T")
_names_lock = threading.Lock()
_live_names: dict[str, weakref.WeakSet[Context]] = {}


@dataclass(frozen=True, slots=True)
class ContextStatistics:
    """A snapshot of a context's counters (UM's ``lbm_context_stats_t`` names where UM has them).

    Topic resolution: ``tr_dgrams_sent``, ``tr_bytes_sent``, ``tr_dgrams_rcved``, ``tr_bytes_rcved``,
    ``tr_dgrams_dropped_ver`` (unknown LBMR version), ``tr_dgrams_dropped_type`` (unknown packet type),
    ``tr_dgrams_dropped_malformed`` (undecodable), ``tr_dgrams_dropped_unknown_source`` (unicast TR not
    from a configured lbmrd, ``resolver_unicast_ignore_unknown_source``), ``tr_dgrams_send_failed``
    (refused by the socket),
    ``tr_src_topics`` (topics advertised), ``tr_rcv_topics`` (topics with receivers),
    ``tr_rcv_unresolved_topics`` (of those, with no known source).  openum adds record counts
    (``tirs_sent``, ``tqrs_sent``, ``wildcard_tqrs_sent``, ``tirs_rcved``, ``tqrs_rcved``,
    ``wildcard_tqrs_rcved``), ``keepalives_sent``/``keepalives_rcved`` (unicast TR),
    ``own_dgrams_ignored`` (our datagrams looped back), ``records_rate_limited``, ``cache_entries``
    (sources in the resolver cache), final advertisements and TR requests sent and received, and the
    numbers of ``sources``, ``receivers``, ``wildcard_receivers``, source transport sessions
    (``tcp_sessions``, ``lbtrm_sessions``, ``lbtru_sessions``) and received LBT-RM/LBT-RU sessions
    (``lbtrm_rcv_sessions``, ``lbtru_rcv_sessions``).  ``lbtrm_dgrams_dropped_unknown`` /
    ``lbtru_dgrams_dropped_unknown``: datagrams on this context's receiving sockets from a session it
    has not joined (or too short to name one), dropped (an LBT-RU socket, or an LBT-RM group socket,
    connected to its only source never sees other senders' datagrams: docs/reliable-transports.md).
    ``dgrams_dropped_test_hook``: datagrams dropped on purpose by the test-only ``OPENUM_TEST_DROP``
    hook.

    What topic resolution dropped or forgot of what the network sent (docs/topic-resolution.md):
    ``cache_entries_evicted`` (sources forgotten because the cache held
    ``resolver_cache_maximum_entries`` sources learned from the network), ``cache_entries_expired``
    (sources not advertised for ``resolver_cache_entry_timeout``), ``wildcard_tqrs_dropped_pattern``
    (wildcard queries not answered: invalid pattern, unknown type, or syntax/size remote patterns may not
    use), ``wildcard_tqrs_dropped_work`` (wildcard queries not answered: matching would pass the per-query
    work limit), ``wildcard_match_steps`` (work spent matching remote patterns) and
    ``tmr_records_ignored`` (topic management records that are not an attributable final advertisement).

    Request/response and immediate messages (docs/request-response.md): ``request_msgs_sent`` /
    ``request_msgs_rcved`` (requests sent by this context / request messages delivered here),
    ``response_msgs_sent``, ``response_msgs_rcved`` (delivered to a request's callback),
    ``response_msgs_dropped`` (for a request that was closed or is unknown), ``immediate_msgs_sent``,
    ``immediate_msgs_rcved``, ``immediate_msgs_dropped_no_receiver`` (no receiver and no context callback
    took it), ``immediate_control_msgs_ignored``, ``immediate_fragments_dropped`` (fragments of an
    immediate message or response that cannot be reassembled: too large, inconsistent, or evicted
    unfinished), ``requests_open``; the request port's ``uim_port_connections_accepted``, ``_active``,
    ``_refused_limit`` (past its connection limit), ``_closed_idle`` (``request_tcp_activity_timeout``),
    ``_closed_malformed`` (bytes that are not LBMC messages), ``uim_port_msgs_rcved``,
    ``uim_port_bytes_rcved``, ``uim_port_msgs_dropped_malformed``; and the outgoing UIM connections'
    ``uim_out_connections_opened``, ``_active``, ``_failed`` (the peer could not be reached), ``_closed_idle``
    (``response_tcp_deletion_timeout``), ``_closed_stalled`` (``response_tcp_activity_timeout``),
    ``uim_out_msgs_sent``, ``uim_out_bytes_sent``, ``uim_out_msgs_dropped`` and ``uim_out_bytes_dropped``
    (queued for a connection that failed or closed), ``uim_out_bytes_queued``.  Multicast immediate
    messages: ``mim_msgs_sent``, ``mim_msgs_rcved``, ``mim_unrecoverable_loss`` (messages of MIM sessions
    lost for good), ``mim_sessions_created`` (temporary MIM sessions this context created),
    ``mim_sessions_active`` (MIM sessions heard now), ``mim_dgrams_dropped_malformed``.

    Late Join (docs/late-join.md), as a receiver: ``late_join_info_requests_sent`` (LJI_REQs),
    ``late_join_rx_requests_sent`` (retransmission requests, re-sends included),
    ``late_join_msgs_recovered`` (retransmitted messages delivered), ``late_join_msgs_unrecoverable``
    (sqns late join gave up or the source no longer held, reported as loss),
    ``late_join_retransmissions_dropped`` (for no recovering receiver: duplicates, late answers); as a
    source: ``late_join_info_requests_rcved``, ``late_join_rx_requests_rcved``,
    ``late_join_retransmissions_sent``, ``late_join_rx_requests_not_retained`` (answered with the
    retained range instead), ``late_join_requests_ignored`` (for no late-join source of this context).
    Off-transport recovery (OTR), as a receiver: ``otr_rx_requests_sent`` (retransmission requests,
    re-sends included), ``otr_msgs_recovered`` (sqns a source answered), ``otr_msgs_unrecoverable``
    (sqns OTR gave up on or the source no longer held, reported as loss); a source answers OTR requests
    as it answers Late Join's (the ``late_join_*`` source counters).
    """

    tr_dgrams_sent: int
    tr_bytes_sent: int
    tr_dgrams_rcved: int
    tr_bytes_rcved: int
    tr_dgrams_dropped_ver: int
    tr_dgrams_dropped_type: int
    tr_dgrams_dropped_malformed: int
    tr_dgrams_dropped_unknown_source: int
    tr_dgrams_send_failed: int
    tr_src_topics: int
    tr_rcv_topics: int
    tr_rcv_unresolved_topics: int
    tirs_sent: int
    tqrs_sent: int
    wildcard_tqrs_sent: int
    tirs_rcved: int
    tqrs_rcved: int
    wildcard_tqrs_rcved: int
    keepalives_sent: int
    keepalives_rcved: int
    own_dgrams_ignored: int
    records_rate_limited: int
    cache_entries: int
    final_advertisements_sent: int
    final_advertisements_rcved: int
    requests_sent: int
    requests_rcved: int
    sources: int
    receivers: int
    wildcard_receivers: int
    tcp_sessions: int
    lbtrm_sessions: int
    lbtru_sessions: int
    lbtrm_rcv_sessions: int
    lbtru_rcv_sessions: int
    lbtrm_dgrams_dropped_unknown: int
    lbtru_dgrams_dropped_unknown: int
    dgrams_dropped_test_hook: int
    cache_entries_evicted: int
    cache_entries_expired: int
    wildcard_tqrs_dropped_pattern: int
    wildcard_tqrs_dropped_work: int
    wildcard_match_steps: int
    tmr_records_ignored: int
    request_msgs_sent: int
    request_msgs_rcved: int
    response_msgs_sent: int
    response_msgs_rcved: int
    response_msgs_dropped: int
    immediate_msgs_sent: int
    immediate_msgs_rcved: int
    immediate_msgs_dropped_no_receiver: int
    immediate_control_msgs_ignored: int
    immediate_fragments_dropped: int
    requests_open: int
    mim_msgs_sent: int
    mim_msgs_rcved: int
    mim_unrecoverable_loss: int
    mim_sessions_created: int
    mim_sessions_active: int
    mim_dgrams_dropped_malformed: int
    uim_port_connections_accepted: int
    uim_port_connections_active: int
    uim_port_connections_refused_limit: int
    uim_port_connections_closed_idle: int
    uim_port_connections_closed_malformed: int
    uim_port_msgs_rcved: int
    uim_port_bytes_rcved: int
    uim_port_msgs_dropped_malformed: int
    uim_out_connections_opened: int
    uim_out_connections_active: int
    uim_out_connections_failed: int
    uim_out_connections_closed_idle: int
    uim_out_connections_closed_stalled: int
    uim_out_msgs_sent: int
    uim_out_bytes_sent: int
    uim_out_msgs_dropped: int
    uim_out_bytes_dropped: int
    uim_out_bytes_queued: int
    late_join_info_requests_sent: int = 0
    late_join_rx_requests_sent: int = 0
    late_join_msgs_recovered: int = 0
    late_join_msgs_unrecoverable: int = 0
    late_join_retransmissions_dropped: int = 0
    late_join_info_requests_rcved: int = 0
    late_join_rx_requests_rcved: int = 0
    late_join_retransmissions_sent: int = 0
    late_join_rx_requests_not_retained: int = 0
    late_join_requests_ignored: int = 0
    otr_rx_requests_sent: int = 0
    otr_msgs_recovered: int = 0
    otr_msgs_unrecoverable: int = 0


#: The request/response and immediate messaging counters of ContextStatistics.
_IMMEDIATE_FIELDS: Final = tuple(
    f.name
    for f in fields(ContextStatistics)
    if f.name.startswith(
        ("request_msgs", "response_msgs", "immediate_", "requests_open", "uim_", "mim_", "late_join_", "otr_")
    )
)


class _Child(Protocol):
    def close(self) -> None: ...


class ContextLogger(logging.LoggerAdapter[logging.Logger]):
    """Logs through ``logging.getLogger("openum.context")`` and the context's log callback."""

    def __init__(self, ctx_label: str, callback: LogCallback | None) -> None:
        super().__init__(_ctx_log, {"openum_context": ctx_label})
        self.callback = callback
        self.label = ctx_label

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{self.label}] {msg}", kwargs

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        super().log(level, msg, *args, **kwargs)
        if self.callback is not None:
            try:
                text = str(msg) % args if args else str(msg)
                self.callback(level, f"[{self.label}] {text}")
            except Exception:  # a broken log callback must not break the caller
                _log.exception("context %s: log callback raised", self.label)


def _config_from(config: ConfigSource | Iterable[ConfigSource] | None) -> Config:
    base = default_config().copy()
    if config is None:
        return base
    if isinstance(config, Config | Mapping | str | os.PathLike):
        return base.load(config)
    for item in config:
        base.load(item)
    return base


class Context:
    """A UM context: ``Context(config=None, attrs=None, *, name=None, options=None, ...)``.

    ``config``: a file path (flat or XML), a mapping, a :class:`~openum.config.Config`, or a list of
    those, applied on top of the process-wide default configuration.  ``options``: ``--option`` style
    lines (``"context resolver_multicast_port 12965"``) applied after ``config``.  ``attrs``: a
    :class:`~openum.config.ContextAttributes` or mapping of context options set from code (highest
    precedence).  ``name`` sets ``context_name``.  ``log_callback(level, message)`` receives this
    context's log messages.  ``clock``: for sequential mode driven by :meth:`process_events_at`, pass
    :class:`~openum.runtime.ManualClock` (created automatically on the first ``process_events_at``).

    Everything is validated before anything starts: a bad option raises :class:`~openum.ConfigError`
    and no thread, socket or timer is left behind.
    """

    def __init__(
        self,
        config: ConfigSource | Iterable[ConfigSource] | None = None,
        attrs: ContextAttributes | Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        options: Iterable[str] = (),
        log_callback: LogCallback | None = None,
        clock: Clock | None = None,
    ) -> None:
        cfg = _config_from(config)
        opts = list(options)
        if isinstance(options, str):
            raise ConfigError(
                "options must be a list of 'scope option value' lines, not one string",
                value=options,
                allowed="a list of strings",
            )
        if opts:
            cfg = cfg.copy().set_options(opts)
        overrides: dict[str, Any] = {}
        if name is not None:
            overrides["context_name"] = name
        if attrs is not None:
            attrs_map = attrs if isinstance(attrs, ContextAttributes) else ContextAttributes(values=attrs)
            if overrides:
                attrs_map = attrs_map.copy()
                attrs_map.update(overrides)
            effective_overrides: ContextAttributes | dict[str, Any] = attrs_map
        else:
            effective_overrides = overrides
        # The context name selects XML settings, so it must be known before resolving them.
        pre_name = name
        if pre_name is None and attrs is not None:
            pre = attrs if isinstance(attrs, ContextAttributes) else ContextAttributes(values=attrs)
            pre_name = pre.get("context_name") if pre.is_set("context_name") else None
        if pre_name is None:
            pre_name = cfg.attributes("context").get("context_name")
        self.attributes = cast(
            ContextAttributes, cfg.attributes("context", context=pre_name, overrides=effective_overrides)
        )
        self.config = cfg
        self.name: str | None = self.attributes.get("context_name")
        self.id = next(_ids)
        self.operational_mode: str = self.attributes.get("operational_mode")
        self.log = ContextLogger(self.name or f"ctx{self.id}", log_callback)
        # Unimplemented options let through (OPENUM_UNIMPLEMENTED_OPTIONS=warn): one warning per option.
        self._warned_unimplemented: set[tuple[str, str]] = set()
        for setting in cfg.unimplemented():
            self._warn_unimplemented(setting.scope, setting.option, setting.value, setting.origin)
        for opt, value, origin in self.attributes.unimplemented():
            self._warn_unimplemented("context", opt, value, origin)

        self._lock = threading.RLock()
        self._children: dict[int, _Child] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._manual_clock = isinstance(clock, ManualClock)
        self._loop = EventLoop(clock or MonotonicClock(), self.log, self.log.label)
        self._warn_duplicate_name()
        self._pools: dict[str, Any] = {}  # transport name -> its source session pool
        if self.operational_mode == "embedded" and self._manual_clock:
            self._loop.close()
            raise ConfigError(
                "a manual clock needs operational_mode sequential (the caller drives time)",
                option="operational_mode",
                scope="context",
                value="embedded",
                allowed="sequential",
            )
        try:
            self._immediate = ImmediateMessaging(self)
        except Exception:
            self._loop.close()
            raise
        try:
            self._resolver = ContextResolver(self)
        except Exception:
            self._immediate.close()
            self._loop.close()
            raise
        self._subscriptions = Subscriptions(self)
        if self.operational_mode == "embedded":
            self._thread = threading.Thread(
                target=self._loop.run, name=f"openum-context-{self.log.label}", daemon=True
            )
            self._thread.start()
        self.log.debug("created (%s mode)", self.operational_mode)

    # -- identity ------------------------------------------------------------------------------------
    def _warn_duplicate_name(self) -> None:
        if not self.name:
            return
        with _names_lock:
            peers = _live_names.setdefault(self.name, weakref.WeakSet())
            duplicate = any(not p._closed for p in peers)
            peers.add(self)
        if duplicate:
            self.log.warning(
                "context name %r is already used by another context in this process; names "
                "should be unique (seed 3.1)",
                self.name,
            )

    def _warn_unimplemented(self, scope: str, opt: Option, value: Any, origin: str) -> None:
        if (scope, opt.name) in self._warned_unimplemented:
            return
        self._warned_unimplemented.add((scope, opt.name))
        text = REGISTRY.unimplemented_text(scope, opt, value)
        self.log.warning("%s (set in %s; let through by %s=warn)", text, origin, ENV_POLICY)

    @property
    def clock(self) -> Clock:
        return self._loop.clock

    def now_ns(self) -> int:
        """The context's clock (monotonic, or the caller's in ``process_events_at`` mode)."""
        return self._loop.clock.now_ns()

    @property
    def closed(self) -> bool:
        return self._closed

    def get_option(self, option: str) -> Any:
        """The effective value of a context option."""
        return self.attributes.get(option)

    @property
    def thread(self) -> threading.Thread | None:
        """The context thread (embedded mode), or None."""
        return self._thread

    # -- children (sources, receivers, ...) ----------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ClosedError(f"cannot {what}: the context is closed")

    def _add_child(self, child: _Child) -> None:
        with self._lock:
            self._check_open(f"create {type(child).__name__}")
            self._children[id(child)] = child

    def _remove_child(self, child: _Child) -> None:
        with self._lock:
            self._children.pop(id(child), None)

    @property
    def open_objects(self) -> list[Any]:
        with self._lock:
            return list(self._children.values())

    # -- timers and descriptors ----------------------------------------------------------------------
    def schedule_timer(
        self,
        delay_ms: float,
        callback: Callable[[Any], Any],
        clientd: Any = None,
        *,
        event_queue: EventQueue | None = None,
    ) -> int:
        """Call ``callback(clientd)`` once after ``delay_ms`` ms (``lbm_schedule_timer``); returns an id.

        The callback runs on the context thread, or via ``event_queue``.  Timers are one-shot: schedule
        the next one from the callback to repeat.
        """
        self._check_open("schedule a timer")
        if not callable(callback):
            raise TypeError("timer callback must be callable")
        return self._loop.schedule_timer(delay_ms, callback, clientd, event_queue)

    def cancel_timer(self, timer_id: int) -> bool:
        """Cancel a timer (``lbm_cancel_timer``); False when it already fired or is unknown."""
        return self._loop.cancel_timer(timer_id)

    def register_fd(
        self,
        fd: int | Any,
        callback: Callable[[int, FdEvent, Any], Any],
        clientd: Any = None,
        events: FdEvent = FdEvent.READ,
        *,
        event_queue: EventQueue | None = None,
    ) -> int:
        """Watch an application descriptor (``lbm_register_fd``): ``callback(fd, events, clientd)``."""
        self._check_open("register a file descriptor")
        fileno = fd if isinstance(fd, int) else fd.fileno()
        self._loop.register_fd(fileno, events, callback, clientd, event_queue)
        return int(fileno)

    def unregister_fd(self, fd: int | Any) -> bool:
        """Stop watching a descriptor (``lbm_cancel_fd``)."""
        fileno = fd if isinstance(fd, int) else fd.fileno()
        return self._loop.unregister_fd(int(fileno))

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` on the context's loop (its thread in embedded mode)."""
        self._check_open("queue a call")
        self._loop.call_soon(callback, *args)

    # -- sources and receivers ---------------------------------------------------------------------
    def _topic_attributes(
        self, scope: str, topic: str, attrs: Attributes | Mapping[str, Any] | None
    ) -> Attributes:
        check_name("topic", topic, _TOPIC_MAX)
        if not self.config.topic_permitted(scope, topic, context=self.name):
            raise ConfigError(
                f"the XML configuration does not allow a {scope} for topic {topic!r}",
                value=topic,
                scope=scope,
            )
        resolved = self.config.attributes(scope, context=self.name, topic=topic, overrides=attrs)
        for opt, value, origin in resolved.unimplemented():
            self._warn_unimplemented(scope, opt, value, origin)
        return resolved

    def create_source(
        self,
        topic: str,
        attrs: SourceAttributes | Mapping[str, Any] | None = None,
        *,
        event_callback: Any = None,
        clientd: Any = None,
        event_queue: Any = None,
    ) -> Source:
        """A source for ``topic`` (``lbm_src_topic_alloc`` + ``lbm_src_create``), advertised at once.

        ``event_callback(event, info, clientd)`` receives source events (CONNECT, DISCONNECT, WAKEUP) on
        the context thread, or through ``event_queue``.
        """
        self._check_open("create a source")
        return Source(
            self, topic, self._topic_attributes("source", topic, attrs), event_callback, clientd, event_queue
        )

    def create_receiver(
        self,
        topic: str,
        callback: ReceiverCallback | None = None,
        clientd: Any = None,
        *,
        event_queue: Any = None,
        attrs: ReceiverAttributes | Mapping[str, Any] | None = None,
    ) -> Receiver:
        """A receiver for ``topic`` (``lbm_rcv_create``): ``callback(message)`` on the context thread, or
        through ``event_queue``.  Sources already in the resolver cache are joined at once."""
        self._check_open("create a receiver")
        rcv = Receiver(
            self, topic, self._topic_attributes("receiver", topic, attrs), callback, clientd, event_queue
        )
        self._immediate.add_receiver(rcv)  # immediate messages reach it from now on
        return rcv

    def create_wildcard_receiver(
        self,
        pattern: str,
        callback: ReceiverCallback | None = None,
        clientd: Any = None,
        *,
        event_queue: Any = None,
        attrs: WildcardReceiverAttributes | Mapping[str, Any] | None = None,
        receiver_attrs: ReceiverAttributes | Mapping[str, Any] | None = None,
    ) -> WildcardReceiver:
        """A receiver for every topic matching the PCRE ``pattern`` (``lbm_wildcard_rcv_create``).

        Patterns are evaluated with Python's ``re`` module (``search``: unanchored unless the pattern
        uses ``^``/``$``).  ``receiver_attrs`` are receiver options for the topics it subscribes to.
        """
        self._check_open("create a wildcard receiver")
        check_name("wildcard pattern", pattern, _PATTERN_MAX)
        wattrs = self.config.attributes(
            "wildcard_receiver", context=self.name, topic=pattern, overrides=attrs
        )
        rattrs = self.config.attributes("receiver", context=self.name, overrides=receiver_attrs)
        own: Attributes | None = None
        if isinstance(receiver_attrs, Attributes):
            own = receiver_attrs
        elif receiver_attrs is not None:
            own = ReceiverAttributes()
            own.update(receiver_attrs)
        for name in sorted(WILDCARD_QUERIES_INSTEAD):
            if own is not None and own.is_set(name):  # set for this receiver (files name all receivers)
                raise ConfigError(
                    f"receiver option {name} in receiver_attrs of a wildcard receiver has no effect: "
                    f"{WILDCARD_QUERIES_TEXT}",
                    option=name,
                    scope="receiver",
                )
        for resolved in (wattrs, rattrs):
            for opt, value, origin in resolved.unimplemented():
                self._warn_unimplemented(resolved.scope, opt, value, origin)
        merged = _merge_scopes(wattrs, rattrs)
        wrcv = WildcardReceiver(self, pattern, merged, callback, clientd, event_queue)
        self._immediate.add_wildcard(wrcv)
        return wrcv

    def topic_resolution_request(
        self,
        flags: int = ResolutionRequestFlags.ADVERTISEMENT
        | ResolutionRequestFlags.QUERY
        | ResolutionRequestFlags.WILDCARD_QUERY,
    ) -> None:
        """Wake quiescent topic resolution here and in every context of the domain
        (``lbm_context_topic_resolution_request``, seed 8.1.6)."""
        self._check_open("request topic resolution")
        self._on_loop(self._resolver.topic_resolution_request, int(flags))

    # -- request/response and immediate messages (seed 10.7, 10.12, 10.15) ----------------------------
    @property
    def request_port(self) -> tuple[str, int] | None:
        """This context's request (UIM) port ``(ip, port)``, where responses and immediate messages
        arrive; None with ``request_tcp_bind_request_port 0``."""
        return self._immediate.address

    @property
    def immediate_target(self) -> str | None:
        """This context's request port as an immediate message target, ``"TCP:ip:port"`` (what UM's
        ``lbmrcv`` prints as "Immediate messaging target"); None without a request port."""
        address = self._immediate.address
        return None if address is None else f"TCP:{address[0]}:{address[1]}"

    def unicast_immediate_message(
        self,
        target: str,
        data: bytes | bytearray | memoryview,
        *,
        topic: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Send a unicast immediate message (``lbm_unicast_immediate_message``, seed 10.7).

        ``target``: ``"TCP:ip:port"`` (a context's request port: its :attr:`immediate_target`) or
        ``"SOURCE:<source string>"`` (the context hosting a source this context knows, seed 10.15).  With a
        ``topic`` the message reaches the target context's receivers of that topic (or its
        ``immediate_message_topic_receiver_function``); without, its ``immediate_message_receiver_function``.
        Never blocks: the message is queued on a TCP connection to the target (opened on first use);
        :class:`~openum.WouldBlock` when ``response_session_maximum_buffer`` bytes wait there already.
        Delivery is not confirmed (seed 10.7.1)."""
        self._check_open("send an immediate message")
        checked = self._immediate_topic(topic)
        self._immediate.send_immediate(target, data, checked, properties_block(properties))

    def unicast_immediate_request(
        self,
        target: str,
        data: bytes | bytearray | memoryview,
        callback: ResponseCallback,
        clientd: Any = None,
        *,
        topic: str | None = None,
        event_queue: EventQueue | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> Request:
        """Send a request as a unicast immediate message (``lbm_unicast_immediate_request``, seed 10.12.1):
        as :meth:`unicast_immediate_message`, and the responses reach ``callback(msg)`` (on the context
        thread, or through ``event_queue``) until the returned :class:`~openum.Request` is closed."""
        self._check_open("send an immediate request")
        checked = self._immediate_topic(topic)
        block = properties_block(properties)
        return self._immediate.request(
            checked,
            callback,
            clientd,
            event_queue,
            "unicast_immediate_request()",
            lambda header: self._immediate.send_immediate(target, data, checked, block, header),
        )

    def multicast_immediate_message(
        self,
        data: bytes | bytearray | memoryview,
        *,
        topic: str | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> None:
        """Send a multicast immediate message (``lbm_multicast_immediate_message``, seed 10.8): to every
        context that receives MIM (``mim_address`` / ``mim_incoming_address`` set to the group), without a
        source or topic resolution, over the context's temporary LBT-RM session to
        ``mim_outgoing_address:mim_outgoing_destination_port``.  Delivered there as a unicast immediate
        message is (receivers of ``topic``, else the context callbacks).  Never blocks; raises
        :class:`~openum.WouldBlock` only when 16 MB wait for the LBT-RM rate limit already."""
        self._check_open("send a multicast immediate message")
        checked = self._immediate_topic(topic)
        self._immediate.send_multicast(data, checked, properties_block(properties))

    def multicast_immediate_request(
        self,
        data: bytes | bytearray | memoryview,
        callback: ResponseCallback,
        clientd: Any = None,
        *,
        topic: str | None = None,
        event_queue: EventQueue | None = None,
        properties: Mapping[str, Any] | None = None,
    ) -> Request:
        """Send a request as a multicast immediate message (``lbm_multicast_immediate_request``, seed
        10.8.1): every MIM-receiving context's receivers of ``topic`` (or its callbacks) may answer, and the
        responses come back by TCP to this context's request port, to ``callback(msg)`` until the
        returned :class:`~openum.Request` is closed."""
        self._check_open("send a multicast immediate request")
        checked = self._immediate_topic(topic)
        block = properties_block(properties)
        return self._immediate.request(
            checked,
            callback,
            clientd,
            event_queue,
            "multicast_immediate_request()",
            lambda header: self._immediate.send_multicast(data, checked, block, header),
        )

    def receive_immediate_messages(
        self,
        callback: Callable[[Message, Any], Any] | None,
        clientd: Any = None,
        *,
        event_queue: EventQueue | None = None,
    ) -> None:
        """Set the callback for topicless immediate messages and requests (``lbm_context_rcv_immediate_msgs``;
        the option ``immediate_message_receiver_function``): ``callback(msg, clientd)``, on the context
        thread or through ``event_queue``.  None removes it (they are then dropped and counted)."""
        self._check_open("receive immediate messages")
        self._immediate.set_callback(False, callback, clientd, event_queue)

    def receive_immediate_topic_messages(
        self,
        callback: Callable[[Message, Any], Any] | None,
        clientd: Any = None,
        *,
        event_queue: EventQueue | None = None,
    ) -> None:
        """Set the callback for immediate messages with a topic no receiver of this context takes
        (``lbm_context_rcv_immediate_topic_msgs``; the option ``immediate_message_topic_receiver_function``).
        None removes it."""
        self._check_open("receive immediate messages")
        self._immediate.set_callback(True, callback, clientd, event_queue)

    @staticmethod
    def _immediate_topic(topic: object) -> str | None:
        if topic is None:
            return None
        check_name("topic", topic, _TOPIC_MAX)
        return cast(str, topic)

    def statistics(self) -> ContextStatistics:
        """A snapshot of the context's counters."""
        self._check_open("read statistics")
        return self._on_loop_sync(self._statistics)

    def _statistics(self) -> ContextStatistics:
        engine = self._resolver.engine.statistics()
        link = self._resolver.link.statistics()
        values = {f.name: getattr(engine, f.name) for f in fields(engine)}
        children = self.open_objects
        values.update(
            tr_dgrams_send_failed=link.tr_dgrams_send_failed,
            sources=sum(1 for c in children if isinstance(c, Source)),
            receivers=sum(1 for c in children if isinstance(c, Receiver)),
            wildcard_receivers=sum(1 for c in children if isinstance(c, WildcardReceiver)),
            **{
                f"{name}_sessions": len(pool.sessions) if (pool := self._pools.get(name)) else 0
                for name in ("tcp", "lbtrm", "lbtru")
            },
            **self._subscriptions.receiving_statistics(),
        )
        immediate = self._immediate.statistics()
        values.update({name: immediate.get(name, 0) for name in _IMMEDIATE_FIELDS})
        return ContextStatistics(**values)

    def resolver_cache(self, topic: str | None = None) -> list[str]:
        """Source strings of the sources in the resolver cache (of ``topic``, or all)."""
        return self._on_loop_sync(
            lambda: [self._resolver.source_string(i) for i in self._resolver.engine.cached_sources(topic)]
        )

    # -- internal hooks for sources and receivers ---------------------------------------------------
    def _on_loop(self, func: Callable[..., Any], *args: Any) -> None:
        self._loop.call_soon(func, *args)

    def _on_loop_sync(self, func: Callable[[], _T]) -> _T:
        """Run ``func`` where the loop's state may be read: directly in sequential mode or on the context
        thread itself, otherwise on the context thread while the caller waits."""
        if self._thread is None or threading.current_thread() is self._thread:
            return func()
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            try:
                box.append((True, func()))
            except BaseException as exc:  # handed back to the caller
                box.append((False, exc))
            finally:
                done.set()

        self._loop.call_soon(run)
        if not done.wait(30):
            raise InvalidStateError(
                "the context thread did not answer within 30 s (is a callback blocking it?)"
            )
        ok, value = box[0]
        if not ok:
            raise value
        return cast(_T, value)

    def _pool(self, transport: str) -> Any:
        """The context's source session pool for ``transport`` (created on first use)."""
        with self._lock:
            pool = self._pools.get(transport)
            if pool is None:
                pool = _POOLS[transport](
                    self._loop,
                    self.attributes,
                    resolve_interface(self.attributes.get("default_interface")),
                    self.log,
                )
                self._pools[transport] = pool
            return pool

    def _source_session_for(self, transport: str, attrs: Attributes) -> SourceSessionBase:
        """The transport session of the context's pool for ``transport`` a new source goes to."""
        with self._lock:
            session: SourceSessionBase = self._pool(transport).session_for(attrs)
            return session

    def retrieve_transport_stats(self, source: str) -> Any:
        """Statistics of the transport session this context receives ``source`` on
        (``lbm_rcv_retrieve_transport_stats``), or of its own source with that source string."""
        self._check_open("read statistics")
        for child in self.open_objects:
            if isinstance(child, Source) and child.source_string == source:
                return child.statistics()
        stats = self._on_loop_sync(lambda: self._subscriptions.transport_statistics(source))
        if stats is None:
            raise InvalidStateError(f"this context has no transport session for source {source!r}")
        return stats

    def _release_source_session(self, transport: str, session: SourceSessionBase) -> None:
        """A source was deleted: close its session when no source is left on it."""
        with self._lock:
            pool = self._pools.get(transport)
            if pool is not None and not session.topics:
                pool.release(session)

    def _close_pools(self) -> None:
        with self._lock:
            pools = list(self._pools.values())
            self._pools.clear()
        for pool in pools:
            pool.close()

    def _resolver_source_string(self, info: TopicInfo) -> str:
        return self._resolver.source_string(info)

    @staticmethod
    def _advertisement_phases(attrs: Attributes) -> PhaseParams:
        return advertisement_phases(attrs)

    @staticmethod
    def _query_phases(attrs: Attributes) -> PhaseParams:
        return query_phases(attrs)

    @staticmethod
    def _wildcard_phases(attrs: Attributes) -> PhaseParams:
        return wildcard_phases(attrs)

    # -- sequential mode -----------------------------------------------------------------------------
    def _check_sequential(self, api: str) -> None:
        if self.operational_mode != "sequential":
            raise InvalidStateError(
                f"{api} is for operational_mode sequential; this context is embedded "
                f"(its own thread processes events)"
            )

    def process_events(self, msec: int) -> int:
        """Sequential mode: process events for ``msec`` ms or until :meth:`unblock`.

        Returns the number of callbacks run.
        """
        if callback_state.depth or self._closed or self._manual_clock or self.operational_mode != _SEQUENTIAL:
            # Refused (one test for the common case: a busy-waiting application calls this in a loop).
            forbid_in_callback("Context.process_events()")
            self._check_sequential("process_events()")
            self._check_open("process events")
            raise InvalidStateError("this context runs on the caller's clock: use process_events_at(now_ns)")
        return self._loop.process_for(msec)

    def process_events_at(self, now_ns: int) -> int:
        """Sequential mode on the caller's clock: advance to ``now_ns`` and run everything due, without
        waiting.  Deterministic: used by tests and simulations."""
        forbid_in_callback("Context.process_events_at()")
        self._check_sequential("process_events_at()")
        self._check_open("process events")
        if not self._manual_clock:
            if self._loop.iterations:
                raise InvalidStateError(
                    "process_events_at() cannot follow process_events() on one context; "
                    "create the context with clock=ManualClock(...)"
                )
            self._loop.clock = ManualClock(now_ns)
            self._manual_clock = True
        return self._loop.process_at(now_ns)

    def next_deadline_ns(self) -> int | None:
        """When the earliest pending timer is due (for callers driving the clock)."""
        return self._loop.next_deadline()

    def unblock(self) -> None:
        """Make a running :meth:`process_events` return (``lbm_context_unblock``)."""
        self._loop.unblock()

    # -- closing -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Delete the context (``lbm_context_delete``).

        Refused with :class:`~openum.InvalidStateError` while sources, receivers or other objects of
        this context are open (close them first, seed 3.0), from a context-thread callback, or while
        another thread is inside :meth:`process_events` (unblock and join it first).

        Final advertisements of sources deleted just before (``resolver_send_final_advertisements``) all
        leave before it returns: the loop keeps sending them at their spacing (on this thread in
        sequential mode), the last brought forward to within 1 s; after a bounded wait (2 s), or at once
        on a manual clock, what is left goes at once.
        """
        forbid_in_callback("Context.close()")
        with self._lock:
            if self._closed:
                return
            if self._children:
                kinds = ", ".join(sorted({type(c).__name__ for c in self._children.values()}))
                raise InvalidStateError(
                    f"cannot close context {self.log.label}: {len(self._children)} object(s) are still open "
                    f"({kinds}); close them first (seed 3.0), or use the context in a 'with' block"
                )
            running = self._loop.running_thread
            if self.operational_mode == "sequential" and running is not None:
                raise InvalidStateError(
                    "cannot close the context while a thread is inside process_events(); call unblock() and "
                    "join that thread first (seed 3.0 step 6)"
                )
            self._closed = True
        # Queued after the calls of objects closed just before (a source's deletion queues its final
        # advertisements), run by the loop in order.
        self._loop.call_soon(self._subscriptions.close)
        self._loop.call_soon(self._immediate.close_receiver)
        finals_out = self._resolver.finish_soon()
        if self._thread is not None:
            finals_out.wait(self._resolver.FINALS_WAIT_S)
            self._loop.call_soon(self._resolver.close)  # sends what is left, from the loop
        else:
            self._resolver.drive_until(finals_out)  # this thread runs the loop meanwhile
            self._resolver.close()
        self._loop.stop()
        if self._thread is not None:
            self._thread.join()
        self._close_pools()
        self._immediate.close()
        pending = self._loop.close()
        if pending:
            self.log.debug("closed with %d timer(s) that never fired", len(pending))
        self.log.debug("closed")

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        for child in reversed(self.open_objects):
            try:
                child.close()
            except Exception:
                self.log.exception("closing %r at the end of the 'with' block failed", child)
        self.close()

    def __del__(self) -> None:
        # A context dropped without close(): stop its thread and release its sockets.
        try:
            if not self._closed and getattr(self, "_resolver", None) is not None:
                self._closed = True
                self._loop.stop()
                if self._thread is not None and self._thread is not threading.current_thread():
                    self._thread.join(5)
                self._resolver.link.close()
                self._close_pools()
                self._loop.close()
        except Exception:  # never raise from __del__
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.operational_mode
        return f"<Context {self.log.label} {state}>"


#: The source session pool of each transport (``AVAILABLE_TRANSPORTS``).
_POOLS: dict[str, Callable[..., Any]] = {
    "tcp": TcpSessionPool,
    "lbtrm": RmSessionPool,
    "lbtru": RuSessionPool,
    "lbtipc": IpcSessionPool,
    "lbtsmx": SmxSessionPool,
}


class _WildcardAttributes(Attributes):
    """A wildcard receiver reads wildcard_receiver options and, for its topics, receiver options."""

    __slots__ = ("_receiver",)

    def __init__(self, wildcard: Attributes, receiver: Attributes) -> None:
        super().__init__("wildcard_receiver")
        self._values = dict(wildcard._values)
        self._origins = dict(wildcard._origins)
        self._receiver = receiver

    @property
    def receiver(self) -> Attributes:
        """The receiver options the wildcard receiver applies to its topics."""
        return self._receiver

    def copy(self) -> Self:
        clone = super().copy()
        clone._receiver = self._receiver.copy()
        return clone

    def get(self, name: str) -> Any:
        try:
            return super().get(name)
        except ConfigError:
            return self._receiver.get(name)


def _merge_scopes(wildcard: Attributes, receiver: Attributes) -> Attributes:
    return _WildcardAttributes(wildcard, receiver)


#: UM's longest topic name in bytes (LBM_MAX_TOPIC_NAME_LEN 256 less the NUL and what its TIR records
#: need) and the longest wildcard pattern a TQR carries.
_TOPIC_MAX: Final = 246
_PATTERN_MAX: Final = 255


def check_name(kind: str, name: object, max_bytes: int) -> None:
    """Refuse a topic (or wildcard pattern) that could not go on the wire as UM sends names: UTF-8 bytes,
    NUL-terminated, at most ``max_bytes`` long.  Refused here, one bad name never reaches topic
    resolution, where it would spoil the datagram it shares with other topics."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a {kind} must be a non-empty string, not {_shown(name)}", value=name)
    nul = name.find("\x00")
    if nul >= 0:
        raise ConfigError(
            f"{kind} {_shown(name)} contains a NUL character at index {nul}; UM sends names NUL-terminated",
            value=name,
            allowed="any characters but NUL",
        )
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{kind} {_shown(name)} cannot be encoded as UTF-8 (character {name[exc.start]!r} at index "
            f"{exc.start}, a lone surrogate); UM sends names as UTF-8 bytes",
            value=name,
            allowed="text that encodes as UTF-8",
        ) from None
    if size > max_bytes:
        raise ConfigError(
            f"{kind} {_shown(name)} is {size} bytes long in UTF-8; UM allows at most {max_bytes}",
            value=name,
            allowed=f"at most {max_bytes} bytes",
        )


def _shown(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."
