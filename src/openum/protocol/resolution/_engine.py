"""The UDP topic resolution engine of one context, sans-I/O (seed 7.1, 8.1, 8.2).

It keeps the context's sources (which it advertises with TIRs), receivers and wildcard receivers (which
it queries for with TQRs), the resolver cache of every source seen, the per-topic phase schedules, the
context-wide rate limits and the unicast daemon choice.  It never touches a socket or a clock:

- :meth:`ResolverEngine.datagram_received` takes a datagram and ``now_ns`` and returns events
  (:class:`SourceDiscovered`, :class:`SourceLeft`, :class:`NoSourceNotification`);
- :meth:`ResolverEngine.poll` returns the datagrams due at ``now_ns`` (:class:`Outgoing`);
- :meth:`ResolverEngine.next_deadline` says when to call ``poll`` again.

Conventions of openum on the wire (decoding cleanly in Wireshark):

- every datagram carries a *source id* packet option holding the context instance, so a context ignores
  its own datagrams when multicast loops them back;
- every TIR carries the *context instance* topic option;
- a *final advertisement* (``resolver_send_final_advertisements``) is a topic-management datagram with a
  "leave topic" record: receivers drop the sources of that topic whose context instance equals the
  sender's source id.  A deleted source's final advertisements go out
  :data:`FINAL_ADVERTISEMENT_INTERVAL_NS` apart; when its context closes, the ones left are brought
  forward so the last is due within a bound (:meth:`ResolverEngine.hasten_final_advertisements`), and
  what is still left at the end goes at once (:meth:`ResolverEngine.flush_final_advertisements`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final

from openum.protocol._rng import Rng
from openum.protocol.resolution._pattern import (
    MatchBudget,
    PatternRefusedError,
    SafePattern,
    WorkLimitExceededError,
    compile_remote_pattern,
)
from openum.protocol.resolution._ratelimit import TrRateLimiter
from openum.protocol.resolution._schedule import DueIndex, Phase, PhaseParams, PhaseSchedule
from openum.protocol.resolution._unicast import DaemonAddress, UnicastDaemons
from openum.wire import WireError
from openum.wire.lbmr import (
    PATTERN_PCRE,
    PATTERN_REGEX,
    TMR_LEAVE,
    ContextInstanceOption,
    ExtendedFunctionalityOption,
    LbmrPacket,
    ReceiverAlive,
    ResolutionRequestFlags,
    ResolverKeepalive,
    SourceAlive,
    SourceIdOption,
    TopicInfo,
    TopicManagement,
    TopicManagementRecord,
    TopicOption,
    TopicQuery,
    TopicResolution,
    TopicResolutionRequest,
    Transport,
    WildcardQuery,
    WildcardResolution,
    decode_packet,
    encode_packet,
    pack_records,
)

__all__ = [
    "FINAL_ADVERTISEMENT_INTERVAL_NS",
    "WILDCARD_TQR_WORK_LIMIT",
    "EngineStatistics",
    "NoSourceNotification",
    "Outgoing",
    "ReceiverSpec",
    "ResolverEngine",
    "ResolverSettings",
    "SourceDiscovered",
    "SourceForgotten",
    "SourceKey",
    "SourceLeft",
    "SourceSpec",
    "WildcardSpec",
    "source_key",
]

NS_PER_MS: Final = 1_000_000
#: Final advertisements of one source are spread this far apart: best effort against burst loss (UDP TR
#: relies on repetition, UM Concepts Guide, section 7.2.1).
FINAL_ADVERTISEMENT_INTERVAL_NS: Final = 100 * NS_PER_MS
_TMR_FLAG_RESPONSE: Final = 0x80
_MAX_PATTERN_CACHE: Final = 1024
#: Matching one wildcard TQR's pattern against this context's topics takes at most this many steps (one
#: step: one instruction of the compiled pattern tried at one character position; about 50 ms of CPU in
#: pure Python); past it the query is not answered and counted (``wildcard_tqrs_dropped_work``).
WILDCARD_TQR_WORK_LIMIT: Final = 500_000

#: Identity of a source in the resolver cache: its transport info and topic index (and topic).
SourceKey = tuple[str, object, int]


def source_key(info: TopicInfo) -> SourceKey:
    return (info.topic, info.transport, info.index)


def _instance_of(info: TopicInfo) -> bytes | None:
    for opt in info.options:
        if isinstance(opt, ContextInstanceOption):
            return opt.instance
    return None


# -- settings and specs -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResolverSettings:
    """Context-scope settings of UDP topic resolution (``resolver_*`` context options)."""

    context_instance: bytes
    initial_advertisements: tuple[int, int] = (1000, 1_000_000)  # (per second, bits per second)
    sustain_advertisements: tuple[int, int] = (0, 1_000_000)
    initial_queries: tuple[int, int] = (1000, 1_000_000)
    sustain_queries: tuple[int, int] = (0, 1_000_000)
    wildcard_queries: tuple[int, int] = (0, 1_000_000)
    datagram_max_size: int = 8192
    unicast_daemons: tuple[DaemonAddress, ...] = ()
    unicast_change_interval_ms: int = 500
    unicast_activity_timeout_ms: int = 1000
    unicast_keepalive_interval_ms: int = 500
    unicast_force_alive: bool = False
    #: Unicast TR: drop datagrams that do not come from a configured lbmrd (a peer that knows the
    #: context's port could otherwise inject advertisements and queries).
    unicast_ignore_unknown_source: bool = True
    disable_udp: bool = False
    #: Sources learned from the network kept in the resolver cache at most (0: no limit); past it the
    #: least recently heard is forgotten (``resolver_cache_maximum_entries``).
    cache_max_entries: int = 100_000
    #: A source learned from the network and not heard from (TIR) for this long is forgotten (0: never;
    #: ``resolver_cache_entry_timeout``).
    cache_entry_timeout_ms: int = 600_000
    #: Topic options every TIR of this context's sources carries besides its context instance (the
    #: request port, in an extended-functionality option).
    source_options: tuple[TopicOption, ...] = ()

    @property
    def unicast(self) -> bool:
        return bool(self.unicast_daemons)


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """What a source advertises and how often."""

    topic: str
    transport: Transport
    index: int
    phases: PhaseParams
    immediate_response: bool = True
    final_advertisements: int = 0
    initial_advertisement: bool = True
    #: Topic options of this source alone (a late-join source's late-join and extended-functionality
    #: options); an extended-functionality option here replaces the context's.
    options: tuple[TopicOption, ...] = ()


@dataclass(frozen=True, slots=True)
class ReceiverSpec:
    """How a receiver queries: phases, and its source thresholds."""

    topic: str
    phases: PhaseParams
    sources_threshold: int = 10_000_000
    no_source_threshold: int = 0


@dataclass(frozen=True, slots=True)
class WildcardSpec:
    """A wildcard receiver's pattern and its query phase (initial only, seed 8.1.3)."""

    pattern: str
    pattern_type: int
    phases: PhaseParams


# -- outputs ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A datagram to send: to ``destination``, or to the multicast resolver group when it is None."""

    data: bytes
    destination: DaemonAddress | None = None


@dataclass(frozen=True, slots=True)
class SourceDiscovered:
    """A source not in the resolver cache before: a TIR from the network or a local source."""

    topic: str
    info: TopicInfo
    sender: DaemonAddress | None
    local: bool = False


@dataclass(frozen=True, slots=True)
class SourceLeft:
    """A final advertisement removed a source from the cache."""

    topic: str
    info: TopicInfo


@dataclass(frozen=True, slots=True)
class NoSourceNotification:
    """A receiver sent ``queries`` queries without finding a source (``LBM_MSG_NO_SOURCE_NOTIFICATION``)."""

    receiver_id: int
    topic: str
    queries: int


@dataclass(frozen=True, slots=True)
class SourceForgotten:
    """The resolver cache forgot a source learned from the network: not heard from for
    ``resolver_cache_entry_timeout`` (``expired``) or the least recently heard when the cache was full
    (``evicted``).  Receivers that joined it stay joined (their transport says when it ends); a later
    TIR puts it back."""

    topic: str
    info: TopicInfo
    reason: str


Event = SourceDiscovered | SourceLeft | NoSourceNotification | SourceForgotten


@dataclass(frozen=True, slots=True)
class EngineStatistics:
    """Topic-resolution counters (UM's ``lbm_context_stats_t`` ``tr_*`` names, plus openum's own).

    ``tr_dgrams_sent``/``tr_bytes_sent``: datagrams and bytes of TR sent.
    ``tr_dgrams_rcved``/``tr_bytes_rcved``: datagrams and bytes of TR received (own loopback excluded).
    ``tr_dgrams_dropped_ver``: unknown LBMR version.  ``tr_dgrams_dropped_type``: unknown packet type.
    ``tr_dgrams_dropped_malformed``: could not be decoded.  ``tr_dgrams_dropped_unknown_source``: unicast
    TR datagrams not from a configured lbmrd (``resolver_unicast_ignore_unknown_source``).
    ``tr_src_topics``: topics this context
    advertises.  ``tr_rcv_topics``: topics it has receivers for.  ``tr_rcv_unresolved_topics``: of those,
    topics with no known source.  ``tirs_sent``/``tqrs_sent``/``wildcard_tqrs_sent`` and the ``_rcved``
    counterparts count records.  ``keepalives_sent``/``keepalives_rcved``: unicast keepalives.
    ``own_dgrams_ignored``: our own datagrams looped back.  ``records_rate_limited``: records held back by
    a rate limit.  ``cache_entries``: sources in the resolver cache.  ``final_advertisements_sent``,
    ``final_advertisements_rcved``, ``requests_sent``, ``requests_rcved``: as named.
    ``cache_entries_evicted``: sources forgotten because the cache held ``resolver_cache_maximum_entries``
    sources learned from the network (the least recently heard goes).  ``cache_entries_expired``: sources
    forgotten after ``resolver_cache_entry_timeout`` without a TIR.  ``wildcard_tqrs_dropped_pattern``:
    wildcard queries not answered because the pattern is not valid, not of a supported type or syntax, or
    too long (docs/topic-resolution.md).  ``wildcard_tqrs_dropped_work``: wildcard queries not answered
    because matching their pattern against this context's topics would take more than
    ``WILDCARD_TQR_WORK_LIMIT`` steps.  ``wildcard_match_steps``: steps spent matching remote patterns.
    ``tmr_records_ignored``: topic management records received that are not a final advertisement this
    context can attribute (another record type, or no source id in the datagram).
    """

    tr_dgrams_sent: int
    tr_bytes_sent: int
    tr_dgrams_rcved: int
    tr_bytes_rcved: int
    tr_dgrams_dropped_ver: int
    tr_dgrams_dropped_type: int
    tr_dgrams_dropped_malformed: int
    tr_dgrams_dropped_unknown_source: int
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
    cache_entries_evicted: int
    cache_entries_expired: int
    wildcard_tqrs_dropped_pattern: int
    wildcard_tqrs_dropped_work: int
    wildcard_match_steps: int
    tmr_records_ignored: int


@dataclass
class _Counters:
    values: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, amount: int = 1) -> None:
        self.values[name] = self.values.get(name, 0) + amount

    def get(self, name: str) -> int:
        return self.values.get(name, 0)


# -- per-object state ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Source:
    spec: SourceSpec
    info: TopicInfo
    schedule: PhaseSchedule
    id: int


@dataclass(slots=True)
class _Receiver:
    spec: ReceiverSpec
    schedule: PhaseSchedule
    queries_unanswered: int = 0
    no_source_sent: bool = False


@dataclass(slots=True)
class _Wildcard:
    spec: WildcardSpec
    schedule: PhaseSchedule
    regex: re.Pattern[str]


@dataclass(slots=True)
class _Final:
    topic: str
    remaining: int
    due_ns: int
    interval_ns: int = FINAL_ADVERTISEMENT_INTERVAL_NS


def compile_pattern(pattern: str, pattern_type: int) -> re.Pattern[str]:
    """PCRE (and the deprecated POSIX regex) patterns, evaluated with Python's ``re`` (search, not match:
    UM patterns are unanchored unless they use ``^``/``$``)."""
    if pattern_type not in (PATTERN_PCRE, PATTERN_REGEX):
        raise ValueError(f"unsupported wildcard pattern type {pattern_type}")
    return re.compile(pattern)


class ResolverEngine:
    """UDP topic resolution for one context.  Not thread-safe: the context's loop owns it."""

    RATE_KINDS: Final = ("initial_adv", "sustain_adv", "initial_query", "sustain_query", "wildcard_query")

    def __init__(self, settings: ResolverSettings, rng: Rng) -> None:
        self.settings = settings
        self.rng = rng
        self._sources: dict[int, _Source] = {}
        self._sources_by_topic: dict[str, list[_Source]] = {}
        self._receivers: dict[int, _Receiver] = {}
        self._receivers_by_topic: dict[str, list[_Receiver]] = {}
        self._wildcards: dict[int, _Wildcard] = {}
        self._cache: dict[str, dict[SourceKey, TopicInfo]] = {}
        self._finals: list[_Final] = []
        self._requests: list[int] = []
        self._patterns: dict[tuple[str, int], SafePattern | None] = {}
        # sources learned from the network, least recently heard first: key -> when last heard (ns)
        self._heard: dict[SourceKey, int] = {}
        self._forgotten: list[Event] = []
        self._limits = {
            "initial_adv": TrRateLimiter(*settings.initial_advertisements),
            "sustain_adv": TrRateLimiter(*settings.sustain_advertisements),
            "initial_query": TrRateLimiter(*settings.initial_queries),
            "sustain_query": TrRateLimiter(*settings.sustain_queries),
            "wildcard_query": TrRateLimiter(*settings.wildcard_queries),
        }
        self._retry_ns: int | None = None  # a rate limit held records back until this time
        self._last_poll_ns: int | None = None
        self._daemons = (
            UnicastDaemons(
                list(settings.unicast_daemons),
                rng,
                settings.unicast_change_interval_ms * NS_PER_MS,
                settings.unicast_activity_timeout_ms * NS_PER_MS,
                settings.unicast_keepalive_interval_ms * NS_PER_MS,
            )
            if settings.unicast
            else None
        )
        self._packet_options = (SourceIdOption(settings.context_instance),)
        self._due_sources = DueIndex(self._source_next)
        self._due_receivers = DueIndex(self._receiver_next)
        self._answers: set[int] = set()
        self._counters = _Counters()

    def _source_next(self, key: object) -> int | None:
        src = self._sources.get(key)  # type: ignore[call-overload]
        return None if src is None else src.schedule.next_ns

    def _receiver_next(self, key: object) -> int | None:
        rcv = self._receivers.get(key)  # type: ignore[call-overload]
        return None if rcv is None else rcv.schedule.next_ns

    # -- local sources ------------------------------------------------------------------------------
    def add_source(self, source_id: int, spec: SourceSpec, now_ns: int) -> list[Event]:
        """Start advertising; the source enters the resolver cache at once (for local receivers)."""
        shared = self.settings.source_options
        if any(isinstance(o, ExtendedFunctionalityOption) for o in spec.options):
            shared = tuple(o for o in shared if not isinstance(o, ExtendedFunctionalityOption))
        info = TopicInfo(
            spec.topic,
            spec.index,
            spec.transport,
            0,
            (ContextInstanceOption(self.settings.context_instance), *shared, *spec.options),
        )
        schedule = PhaseSchedule(spec.phases, lambda t: self._due_sources.update(source_id, t))
        src = _Source(spec, info, schedule, source_id)
        self._sources[source_id] = src
        schedule.start(now_ns, send_now=spec.initial_advertisement)
        self._sources_by_topic.setdefault(spec.topic, []).append(src)
        return self._cache_add(info, None, now_ns, local=True)

    def remove_source(self, source_id: int, now_ns: int) -> list[Event]:
        """Stop advertising; queue final advertisements if the source asked for them."""
        src = self._sources.pop(source_id, None)
        self._answers.discard(source_id)
        if src is None:
            return []
        peers = self._sources_by_topic.get(src.spec.topic, [])
        if src in peers:
            peers.remove(src)
        if not peers:
            self._sources_by_topic.pop(src.spec.topic, None)
        if src.spec.final_advertisements > 0 and not self.settings.disable_udp:
            self._finals.append(_Final(src.spec.topic, src.spec.final_advertisements, now_ns))
        removed = self._cache_remove(src.info)
        return [SourceLeft(src.spec.topic, src.info)] if removed else []

    def source_phase(self, source_id: int) -> Phase:
        return self._sources[source_id].schedule.phase

    # -- local receivers ----------------------------------------------------------------------------
    def add_receiver(self, receiver_id: int, spec: ReceiverSpec, now_ns: int) -> list[TopicInfo]:
        """Start querying (unless enough sources are known) and return the cached sources of the topic."""
        rcv = _Receiver(
            spec, PhaseSchedule(spec.phases, lambda t: self._due_receivers.update(receiver_id, t))
        )
        self._receivers[receiver_id] = rcv
        self._receivers_by_topic.setdefault(spec.topic, []).append(rcv)
        cached = list(self._cache.get(spec.topic, {}).values())
        if spec.sources_threshold and len(cached) < spec.sources_threshold:
            rcv.schedule.start(now_ns)
        return cached

    def remove_receiver(self, receiver_id: int) -> None:
        rcv = self._receivers.pop(receiver_id, None)
        if rcv is None:
            return
        peers = self._receivers_by_topic.get(rcv.spec.topic, [])
        if rcv in peers:
            peers.remove(rcv)
        if not peers:
            self._receivers_by_topic.pop(rcv.spec.topic, None)

    def receiver_phase(self, receiver_id: int) -> Phase:
        return self._receivers[receiver_id].schedule.phase

    def add_wildcard(self, wildcard_id: int, spec: WildcardSpec, now_ns: int) -> list[TopicInfo]:
        """Start a wildcard query phase; return every cached source whose topic matches the pattern."""
        regex = compile_pattern(spec.pattern, spec.pattern_type)
        wc = _Wildcard(spec, PhaseSchedule(spec.phases), regex)
        wc.schedule.start(now_ns)
        self._wildcards[wildcard_id] = wc
        return [
            info for topic, entries in self._cache.items() if regex.search(topic) for info in entries.values()
        ]

    def remove_wildcard(self, wildcard_id: int) -> None:
        self._wildcards.pop(wildcard_id, None)

    def wildcard_phase(self, wildcard_id: int) -> Phase:
        return self._wildcards[wildcard_id].schedule.phase

    def source_lost(self, topic: str, key: SourceKey, now_ns: int) -> bool:
        """A receiver lost a source (EOS): forget it, and resume queries below the threshold (seed 8.2.3).

        True when the source was in the cache (it is removed now)."""
        entries = self._cache.get(topic)
        removed = entries is not None and entries.pop(key, None) is not None
        self._heard.pop(key, None)
        if entries is not None and not entries:
            self._cache.pop(topic, None)
        self._resume_queries(topic, now_ns)
        return removed

    def _resume_queries(self, topic: str, now_ns: int) -> None:
        known = len(self._cache.get(topic, {}))
        for rcv in self._receivers_by_topic.get(topic, []):
            below = rcv.spec.sources_threshold and known < rcv.spec.sources_threshold
            if below and rcv.schedule.phase is Phase.QUIESCENT:
                self._restart_queries(rcv, now_ns)

    @staticmethod
    def _restart_queries(rcv: _Receiver, now_ns: int) -> None:
        if rcv.spec.phases.sustain_enabled:
            rcv.schedule.restart_sustaining(now_ns)
        else:
            rcv.schedule.start(now_ns)

    # -- the cache ------------------------------------------------------------------------------------
    def cached_sources(self, topic: str | None = None) -> list[TopicInfo]:
        if topic is not None:
            return list(self._cache.get(topic, {}).values())
        return [info for entries in self._cache.values() for info in entries.values()]

    def _cache_add(
        self, info: TopicInfo, sender: DaemonAddress | None, now_ns: int, *, local: bool = False
    ) -> list[Event]:
        key = source_key(info)
        entries = self._cache.get(info.topic)
        if entries is not None and key in entries:
            entries[key] = info  # keep the latest options (late-join ranges, ...)
            if key in self._heard:  # heard again: now the most recently heard
                del self._heard[key]
                self._heard[key] = now_ns
            return []
        events: list[Event] = []
        if not local:
            limit = self.settings.cache_max_entries
            while limit and len(self._heard) >= limit:
                events.append(self._forget_oldest("evicted"))
            self._heard[key] = now_ns
        entries = self._cache.setdefault(info.topic, {})
        entries[key] = info
        events.append(SourceDiscovered(info.topic, info, sender, local))
        known = len(entries)
        for rcv in self._receivers_by_topic.get(info.topic, []):
            rcv.queries_unanswered = 0
            if rcv.spec.sources_threshold and known >= rcv.spec.sources_threshold:
                rcv.schedule.stop()  # seed 8.1.5: enough sources known, stop querying
        return events

    def _forget_oldest(self, reason: str) -> SourceForgotten:
        """Forget the least recently heard source learned from the network (counted by ``reason``)."""
        key = next(iter(self._heard))
        del self._heard[key]
        topic = key[0]
        entries = self._cache[topic]
        info = entries.pop(key)
        if not entries:
            del self._cache[topic]
        self._counters.add(f"cache_entries_{reason}")
        return SourceForgotten(topic, info, reason)

    def _expire(self, now_ns: int) -> None:
        """Forget the sources not heard from for ``cache_entry_timeout_ms`` (the oldest first: each
        entry costs O(1), once)."""
        timeout = self.settings.cache_entry_timeout_ms * NS_PER_MS
        if not timeout:
            return
        heard = self._heard
        while heard and now_ns - heard[next(iter(heard))] >= timeout:
            self._forgotten.append(self._forget_oldest("expired"))

    def _next_expiry(self) -> int | None:
        timeout = self.settings.cache_entry_timeout_ms * NS_PER_MS
        if not timeout or not self._heard:
            return None
        return self._heard[next(iter(self._heard))] + timeout

    def take_events(self) -> list[Event]:
        """Events that :meth:`poll` produced (sources forgotten by the cache's expiry) since the last call."""
        events, self._forgotten = self._forgotten, []
        return events

    def _cache_remove(self, info: TopicInfo) -> bool:
        entries = self._cache.get(info.topic)
        key = source_key(info)
        self._heard.pop(key, None)
        if entries is None or entries.pop(key, None) is None:
            return False
        if not entries:
            self._cache.pop(info.topic, None)
        return True

    # -- requests -------------------------------------------------------------------------------------
    def topic_resolution_request(self, flags: int, now_ns: int) -> None:
        """``lbm_context_topic_resolution_request``: restart quiescent TR here and ask every other context
        to do the same (an LBMR topic resolution request)."""
        self._apply_request(flags, now_ns)
        self._requests.append(flags)

    def _apply_request(self, flags: int, now_ns: int) -> None:
        if flags & ResolutionRequestFlags.ADVERTISEMENT:
            for src in self._sources.values():
                if src.schedule.phase is Phase.QUIESCENT:
                    src.schedule.restart_sustaining(now_ns)
        if flags & ResolutionRequestFlags.QUERY:
            for rcv in self._receivers.values():
                known = len(self._cache.get(rcv.spec.topic, {}))
                below = not rcv.spec.sources_threshold or known < rcv.spec.sources_threshold
                if rcv.schedule.phase is Phase.QUIESCENT and below and rcv.spec.sources_threshold:
                    self._restart_queries(rcv, now_ns)
        if flags & ResolutionRequestFlags.WILDCARD_QUERY:
            for wc in self._wildcards.values():
                if wc.schedule.phase is Phase.QUIESCENT:
                    wc.schedule.start(now_ns)

    # -- receiving ------------------------------------------------------------------------------------
    def datagram_received(self, data: bytes, sender: DaemonAddress | None, now_ns: int) -> list[Event]:
        """Process one TR datagram.  Garbage is counted and dropped, never raised."""
        if (
            self._daemons is not None
            and sender is not None
            and not self._daemons.heard_from(sender, now_ns)
            and self.settings.unicast_ignore_unknown_source
        ):
            self._counters.add("tr_dgrams_dropped_unknown_source")
            return []
        if self.settings.disable_udp:
            return []
        if len(data) >= 1 and data[0] >> 4 > 1:
            self._counters.add("tr_dgrams_dropped_ver")
            return []
        if len(data) >= 1 and data[0] & 0x07 == 5:
            self._counters.add("tr_dgrams_dropped_type")
            return []
        try:
            packet = decode_packet(data)
        except WireError:
            self._counters.add("tr_dgrams_dropped_malformed")
            return []
        for opt in packet.options:
            if isinstance(opt, SourceIdOption) and opt.source_id == self.settings.context_instance:
                self._counters.add("own_dgrams_ignored")
                return []
        self._counters.add("tr_dgrams_rcved")
        self._counters.add("tr_bytes_rcved", len(data))
        body = packet.body
        events: list[Event] = []
        if isinstance(body, TopicResolution | WildcardResolution):
            for query in body.queries:
                if isinstance(query, TopicQuery):
                    self._counters.add("tqrs_rcved")
                    self._answer_topic(query.topic, now_ns)
                else:
                    self._counters.add("wildcard_tqrs_rcved")
                    self._answer_pattern(query, now_ns)
            for info in body.infos:
                self._counters.add("tirs_rcved")
                events += self._cache_add(info, sender, now_ns)
        elif isinstance(body, ResolverKeepalive | ReceiverAlive | SourceAlive):
            self._counters.add("keepalives_rcved")
        elif isinstance(body, TopicResolutionRequest):
            self._counters.add("requests_rcved")
            self._apply_request(body.flags, now_ns)
        elif isinstance(body, TopicManagement):
            events += self._topic_management(body, packet, now_ns)
        return events

    def _topic_management(self, body: TopicManagement, packet: LbmrPacket, now_ns: int) -> list[Event]:
        sender_id = next((o.source_id for o in packet.options if isinstance(o, SourceIdOption)), None)
        events: list[Event] = []
        for record in body.records:
            if record.type != TMR_LEAVE or sender_id is None:
                self._counters.add("tmr_records_ignored")
                continue
            self._counters.add("final_advertisements_rcved")
            for info in list(self._cache.get(record.topic, {}).values()):
                if _instance_of(info) == sender_id:
                    self._cache_remove(info)
                    events.append(SourceLeft(record.topic, info))
                    self._resume_queries(record.topic, now_ns)
        return events

    def _answer_topic(self, topic: str, now_ns: int) -> None:
        for src in self._sources_by_topic.get(topic, []):
            self._answer(src, now_ns)

    def _answer_pattern(self, query: WildcardQuery, now_ns: int) -> None:
        """Answer a remote pattern with bounded cost: compiled by :func:`compile_remote_pattern` (refused
        outside the supported syntax), matched within :data:`WILDCARD_TQR_WORK_LIMIT` steps; a query that
        is refused or runs out of steps is not answered at all, and counted."""
        key = (query.pattern, query.pattern_type)
        if key not in self._patterns:
            if len(self._patterns) >= _MAX_PATTERN_CACHE:
                self._patterns.clear()
            compiled: SafePattern | None = None
            if query.pattern_type in (PATTERN_PCRE, PATTERN_REGEX):
                try:
                    compiled = compile_remote_pattern(query.pattern)
                except PatternRefusedError:
                    pass
            self._patterns[key] = compiled
        matcher = self._patterns[key]
        if matcher is None:
            self._counters.add("wildcard_tqrs_dropped_pattern")
            return
        budget = MatchBudget(WILDCARD_TQR_WORK_LIMIT)
        try:
            matched = [topic for topic in self._sources_by_topic if matcher.search(topic, budget)]
        except WorkLimitExceededError:
            self._counters.add("wildcard_tqrs_dropped_work")
            return
        finally:
            self._counters.add("wildcard_match_steps", budget.used)
        for topic in matched:
            for src in self._sources_by_topic[topic]:
                self._answer(src, now_ns)

    def _answer(self, src: _Source, now_ns: int) -> None:
        """A query for this source's topic: answer it, and run another sustaining phase (seed 8.1.5)."""
        if src.spec.immediate_response:
            self._answers.add(src.id)
            if src.schedule.phase is not Phase.INITIAL:
                src.schedule.restart_sustaining(now_ns, send_now=False)
        else:  # the next scheduled advertisement is the answer
            src.schedule.prolong_sustaining(now_ns)

    # -- sending --------------------------------------------------------------------------------------
    def _limit_for(self, phase: Phase, *, query: bool) -> TrRateLimiter:
        if query:
            return self._limits["initial_query" if phase is Phase.INITIAL else "sustain_query"]
        return self._limits["initial_adv" if phase is Phase.INITIAL else "sustain_adv"]

    def _allow(self, limiter: TrRateLimiter, size: int, now_ns: int) -> bool:
        if limiter.allow(size, now_ns):
            return True
        self._counters.add("records_rate_limited")
        refresh = limiter.next_refresh_ns()
        if refresh is not None and (self._retry_ns is None or refresh < self._retry_ns):
            self._retry_ns = refresh
        return False

    def poll(self, now_ns: int) -> list[Outgoing]:
        """Every datagram due at ``now_ns``; advances the schedules of what it sends."""
        self._expire(now_ns)
        if self.settings.disable_udp:
            return []
        self._retry_ns = None
        self._last_poll_ns = now_ns
        infos: list[TopicInfo] = []
        queries: list[TopicQuery | WildcardQuery] = []
        # Answers to queries first: they are what a waiting receiver needs.
        for source_id in list(self._answers):
            src = self._sources.get(source_id)
            if src is None:
                self._answers.discard(source_id)
                continue
            if not self._allow(self._limit_for(src.schedule.phase, query=False), _tir_size(src.info), now_ns):
                break
            self._answers.discard(source_id)
            infos.append(src.info)
            if src.schedule.due(now_ns):
                src.schedule.mark_sent(now_ns)
            elif src.schedule.phase is Phase.INITIAL:
                src.schedule.answered(now_ns)
        infos += self._send_due(self._due_sources, self._sources, query=False, now_ns=now_ns)
        for rcv in self._send_due(self._due_receivers, self._receivers, query=True, now_ns=now_ns):
            queries.append(TopicQuery(rcv.spec.topic))
            if not self._cache.get(rcv.spec.topic):
                rcv.queries_unanswered += 1
        for wc in self._wildcards.values():
            if not wc.schedule.due(now_ns):
                continue
            if not self._allow(self._limits["wildcard_query"], len(wc.spec.pattern) + 2, now_ns):
                continue
            queries.append(WildcardQuery(wc.spec.pattern, wc.spec.pattern_type))
            wc.schedule.mark_sent(now_ns)
        out: list[bytes] = []
        if infos or queries:
            out += pack_records(queries, infos, self.settings.datagram_max_size, options=self._packet_options)
            self._counters.add("tirs_sent", len(infos))
            self._counters.add("tqrs_sent", sum(1 for q in queries if isinstance(q, TopicQuery)))
            self._counters.add("wildcard_tqrs_sent", sum(1 for q in queries if isinstance(q, WildcardQuery)))
        out += self._due_finals(now_ns)
        for flags in self._requests:
            out.append(encode_packet(LbmrPacket(TopicResolutionRequest(flags), self._packet_options)))
            self._counters.add("requests_sent")
        self._requests.clear()
        return self._address(out, now_ns)

    def _send_due(self, index: DueIndex, objects: dict[int, Any], *, query: bool, now_ns: int) -> list[Any]:
        """Take the due schedules of ``index`` in time order while their rate limits allow; the rest
        stay due (re-indexed) until the limits refresh.  Returns the source infos or receivers sent."""
        out: list[Any] = []
        deferred: list[tuple[int, int]] = []
        exhausted: set[int] = set()
        for due, key in index.pop_due(now_ns):
            obj = objects[key]  # type: ignore[index]
            limiter = self._limit_for(obj.schedule.phase, query=query)
            if id(limiter) in exhausted:
                deferred.append((key, due))  # type: ignore[arg-type]
                if len(exhausted) == 2:
                    break
                continue
            size = _tir_size(obj.info) if not query else len(obj.spec.topic) + 1
            if not self._allow(limiter, size, now_ns):
                exhausted.add(id(limiter))
                deferred.append((key, due))  # type: ignore[arg-type]
                if len(exhausted) == 2:
                    break
                continue
            out.append(obj.info if not query else obj)
            obj.schedule.mark_sent(now_ns)
        for key, due in deferred:
            index.update(key, due)
        return out

    def _due_finals(self, now_ns: int, *, every: bool = False) -> list[bytes]:
        """One final advertisement of each source whose next one is due (``every``: all that are left)."""
        out: list[bytes] = []
        for final in self._finals:
            if not every and final.due_ns > now_ns:
                continue
            record = TopicManagementRecord(final.topic, TMR_LEAVE, _TMR_FLAG_RESPONSE)
            datagram = encode_packet(LbmrPacket(TopicManagement((record,)), self._packet_options))
            sent = final.remaining if every else 1
            out += [datagram] * sent
            final.remaining -= sent
            final.due_ns = now_ns + final.interval_ns
            self._counters.add("final_advertisements_sent", sent)
        self._finals = [f for f in self._finals if f.remaining > 0]
        return out

    def final_advertisements_pending(self) -> int:
        """Final advertisements of deleted sources not sent yet."""
        return sum(f.remaining for f in self._finals)

    def hasten_final_advertisements(self, now_ns: int, within_ns: int) -> None:
        """The context is closing: bring the final advertisements left forward so that the last one is due
        by ``now_ns + within_ns``.  They stay spread (at most :data:`FINAL_ADVERTISEMENT_INTERVAL_NS`
        apart, closer when there are too many to fit); none is put later than it was."""
        for final in self._finals:
            final.interval_ns = min(final.interval_ns, max(0, within_ns) // final.remaining)
            final.due_ns = min(final.due_ns, now_ns + final.interval_ns)

    def flush_final_advertisements(self, now_ns: int) -> list[Outgoing]:
        """Every final advertisement left, at once: the context closes now and has no time to wait."""
        if self.settings.disable_udp:
            return []
        return self._address(self._due_finals(now_ns, every=True), now_ns)

    def _address(self, datagrams: list[bytes], now_ns: int) -> list[Outgoing]:
        if self._daemons is None:
            out = [Outgoing(d) for d in datagrams]
        else:
            target = self._daemons.current(now_ns)
            out = [Outgoing(d, target) for d in datagrams]
            if datagrams:
                self._daemons.sent_to(target, now_ns)
            if self._sources or self._receivers or self._wildcards or self.settings.unicast_force_alive:
                keepalive = encode_packet(LbmrPacket(ResolverKeepalive(), self._packet_options))
                for daemon in self._daemons.keepalives_due(now_ns):
                    out.append(Outgoing(keepalive, daemon))
                    self._daemons.sent_to(daemon, now_ns)
                    self._counters.add("keepalives_sent")
        for item in out:
            self._counters.add("tr_dgrams_sent")
            self._counters.add("tr_bytes_sent", len(item.data))
        return out

    def no_source_notifications(self) -> list[NoSourceNotification]:
        """Receivers that reached ``resolution_no_source_notification_threshold`` since the last call."""
        out = []
        for rcv_id, rcv in self._receivers.items():
            threshold = rcv.spec.no_source_threshold
            if threshold and not rcv.no_source_sent and rcv.queries_unanswered >= threshold:
                rcv.no_source_sent = True
                out.append(NoSourceNotification(rcv_id, rcv.spec.topic, rcv.queries_unanswered))
        return out

    def next_deadline(self) -> int | None:
        """When :meth:`poll` has something to do next (None: nothing scheduled).

        Records that were due at the last poll but held back by a rate limit are due again when that
        limit's budget is refreshed, not before.
        """
        if self.settings.disable_udp:
            return None
        times: list[int] = []
        if self._answers:
            times.append(0)
        for index in (self._due_sources, self._due_receivers):
            earliest = index.earliest()
            if earliest is not None:
                times.append(earliest)
        for sched in [w.schedule for w in self._wildcards.values()]:
            if sched.next_ns is not None:
                times.append(sched.next_ns)
        times += [f.due_ns for f in self._finals]
        expiry = self._next_expiry()
        if expiry is not None:
            times.append(expiry)
        if self._requests:
            times.append(0)
        if self._retry_ns is not None and self._last_poll_ns is not None:
            # poll() sends everything due unless a rate limit holds it: wait for the refresh
            times = [self._retry_ns if t <= self._last_poll_ns else t for t in times]
        if self._daemons is not None and (
            self._sources or self._receivers or self._wildcards or self.settings.unicast_force_alive
        ):
            deadline = self._daemons.next_deadline()
            times.append(0 if deadline is None else deadline)
        return min(times) if times else None

    # -- introspection ------------------------------------------------------------------------------------
    @property
    def daemons(self) -> UnicastDaemons | None:
        return self._daemons

    def statistics(self) -> EngineStatistics:
        c = self._counters
        unresolved = sum(1 for topic in self._receivers_by_topic if not self._cache.get(topic))
        return EngineStatistics(
            tr_dgrams_sent=c.get("tr_dgrams_sent"),
            tr_bytes_sent=c.get("tr_bytes_sent"),
            tr_dgrams_rcved=c.get("tr_dgrams_rcved"),
            tr_bytes_rcved=c.get("tr_bytes_rcved"),
            tr_dgrams_dropped_ver=c.get("tr_dgrams_dropped_ver"),
            tr_dgrams_dropped_type=c.get("tr_dgrams_dropped_type"),
            tr_dgrams_dropped_malformed=c.get("tr_dgrams_dropped_malformed"),
            tr_dgrams_dropped_unknown_source=c.get("tr_dgrams_dropped_unknown_source"),
            tr_src_topics=len(self._sources_by_topic),
            tr_rcv_topics=len(self._receivers_by_topic),
            tr_rcv_unresolved_topics=unresolved,
            tirs_sent=c.get("tirs_sent"),
            tqrs_sent=c.get("tqrs_sent"),
            wildcard_tqrs_sent=c.get("wildcard_tqrs_sent"),
            tirs_rcved=c.get("tirs_rcved"),
            tqrs_rcved=c.get("tqrs_rcved"),
            wildcard_tqrs_rcved=c.get("wildcard_tqrs_rcved"),
            keepalives_sent=c.get("keepalives_sent"),
            keepalives_rcved=c.get("keepalives_rcved"),
            own_dgrams_ignored=c.get("own_dgrams_ignored"),
            records_rate_limited=c.get("records_rate_limited"),
            cache_entries=sum(len(v) for v in self._cache.values()),
            final_advertisements_sent=c.get("final_advertisements_sent"),
            final_advertisements_rcved=c.get("final_advertisements_rcved"),
            requests_sent=c.get("requests_sent"),
            requests_rcved=c.get("requests_rcved"),
            cache_entries_evicted=c.get("cache_entries_evicted"),
            cache_entries_expired=c.get("cache_entries_expired"),
            wildcard_tqrs_dropped_pattern=c.get("wildcard_tqrs_dropped_pattern"),
            wildcard_tqrs_dropped_work=c.get("wildcard_tqrs_dropped_work"),
            wildcard_match_steps=c.get("wildcard_match_steps"),
            tmr_records_ignored=c.get("tmr_records_ignored"),
        )


def _tir_size(info: TopicInfo) -> int:
    # name + NUL + transport/tlen/ttl/index (8) + context-instance option block (16) + transport info
    return len(info.topic.encode()) + 1 + 8 + 16 + 16
