"""Late Join over a context's request port (UM Concepts Guide 10.2; wire ``lbmc-pdm-srs.md`` 2.7).

A source with ``late_join`` keeps what it sends in a retention buffer
(:class:`~openum.protocol.recovery.RetentionBuffer`; ``Source`` fills it on its send path) and
advertises Late Join in its TIR: the late-join option 0x04 and the extended-functionality option 0x0E
with the LATE_JOIN bit, both naming its context's request port.  A receiver with ``use_late_join``
that joins such a source asks over that port, on the UIM connection to it:

* LJI_REQ (0x4E, an LBMC control message) for the retained range; the source answers UME_LJ_INFO
  (0x1E) on a UIM connection to the receiver's request port (``req_ip``/``req_port`` of the request);
* UME_RXREQ (0x15) per sqn; the source re-sends the retained message (or fragment) as an LBMC data
  message of type 0xA (``MessageType.RETRANSMISSION``) with its original topic index, sqn and
  headers, plus SRCIDX (the source's index, :func:`~openum._immediate.source_index`) and CTXINSTR
  (its context's instance), so that the receiving context can tell which source it is from; a sqn it
  no longer holds is answered with a UME_LJ_INFO giving its current range (the receiver then reports
  what is gone as unrecoverable loss at once), a request with the T flag with a TSNI.

The requests name the source by ``transport_idx`` (the source's transport session id, as its
late-join option advertises it) and its topic index (``topic_idx``; ``id_2`` of a UME_RXREQ).

This module is the context's router for both sides: :class:`LateJoin` keeps the context's late-join
sources (requests arrive here) and the topic subscriptions recovering from a source (answers arrive
here), and counts what passes (``ContextStatistics.late_join_*``).  Everything but
:meth:`LateJoin.add_source` / :meth:`LateJoin.remove_source` runs on the context thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Final

from openum._immediate import source_index
from openum.protocol.recovery import (
    NotRetained,
    RecoveryKind,
    RecoveryParams,
    RequesterStatistics,
    RetentionBuffer,
    RetentionParams,
    RetransmissionResponder,
    SendLateJoinInfo,
    SendRequest,
    SendRetransmission,
    SendTsni,
)
from openum.transport._demux import PropertiesLength
from openum.wire.lbmc import (
    AppHeaderChain,
    FragmentHeader,
    Header,
    LateJoinInfoHeader,
    LateJoinInfoRequestHeader,
    LbmcMessage,
    MessageType,
    PropertiesLengthElement,
    RetransmissionRequestHeader,
    ReturnContextInstanceHeader,
    SourceIndexHeader,
    TsniHeader,
    control_message,
    encode_message,
)
from openum.wire.lbmr import (
    ExtendedFunctionalityOption,
    Functionality,
    LateJoinOption,
    TopicInfo,
    TopicOption,
)

if TYPE_CHECKING:
    from openum._immediate import ImmediateMessaging
    from openum._source import Source

__all__ = ["COUNTERS", "LateJoin", "late_join_offer", "recovery_params", "retention_params"]

_MASK: Final = 0xFFFFFFFF

#: The context's Late Join counters (``ContextStatistics``), both sides.
COUNTERS: Final = (
    # receiver side
    "late_join_info_requests_sent",
    "late_join_rx_requests_sent",
    "late_join_msgs_recovered",
    "late_join_msgs_unrecoverable",
    "late_join_retransmissions_dropped",
    # source side
    "late_join_info_requests_rcved",
    "late_join_rx_requests_rcved",
    "late_join_retransmissions_sent",
    "late_join_rx_requests_not_retained",
    "late_join_requests_ignored",
    # off-transport recovery, receiver side (the source side is Late Join's: the same requests)
    "otr_rx_requests_sent",
    "otr_msgs_recovered",
    "otr_msgs_unrecoverable",
)


def retention_params(attrs: Any) -> RetentionParams:
    """The source options of Late Join (``late_join``, ``retransmit_retention_*``)."""
    return RetentionParams(
        late_join=bool(attrs.get("late_join")),
        size_threshold=int(attrs.get("retransmit_retention_size_threshold")),
        size_limit=int(attrs.get("retransmit_retention_size_limit")),
        age_threshold=int(attrs.get("retransmit_retention_age_threshold")),
    )


def recovery_params(attrs: Any) -> RecoveryParams:
    """The receiver options of Late Join and off-transport recovery (``use_otr`` 2, the default, leaves
    OTR off for a receiver without persistence, as in UM)."""
    return RecoveryParams(
        use_late_join=bool(attrs.get("use_late_join")),
        late_join_info_request_interval=int(attrs.get("late_join_info_request_interval")),
        late_join_info_request_maximum=int(attrs.get("late_join_info_request_maximum")),
        retransmit_request_interval=int(attrs.get("retransmit_request_interval")),
        retransmit_request_maximum=int(attrs.get("retransmit_request_maximum")),
        retransmit_request_message_timeout=int(attrs.get("retransmit_request_message_timeout")),
        retransmit_request_outstanding_maximum=int(attrs.get("retransmit_request_outstanding_maximum")),
        retransmit_initial_sequence_number_request=bool(
            attrs.get("retransmit_initial_sequence_number_request")
        ),
        retransmit_message_caching_proximity=int(attrs.get("retransmit_message_caching_proximity")),
        use_otr=int(attrs.get("use_otr")),
        otr_request_initial_delay=int(attrs.get("otr_request_initial_delay")),
        otr_request_minimum_interval=int(attrs.get("otr_request_minimum_interval")),
        otr_request_maximum_interval=int(attrs.get("otr_request_maximum_interval")),
        otr_request_message_timeout=int(attrs.get("otr_request_message_timeout")),
        otr_request_outstanding_maximum=int(attrs.get("otr_request_outstanding_maximum")),
        otr_request_log_alert_cooldown=int(attrs.get("otr_request_log_alert_cooldown")),
        otr_message_caching_threshold=int(attrs.get("otr_message_caching_threshold")),
        otr_request_duration=_optional_int(attrs.get("otr_request_duration")),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def late_join_offer(info: TopicInfo) -> LateJoinOption | None:
    """The late-join option of a TIR whose source offers Late Join (its extended-functionality option
    has the LATE_JOIN bit), else None."""
    offer: LateJoinOption | None = None
    flagged = False
    for opt in info.options:
        if isinstance(opt, LateJoinOption):
            offer = opt
        elif isinstance(opt, ExtendedFunctionalityOption) and opt.functionality & Functionality.LATE_JOIN:
            flagged = True
    return offer if flagged and offer is not None and offer.source_port else None


def _transport_index(transport: Any) -> int:
    return int(getattr(transport, "session_id", 0) or 0) & _MASK


class _LateJoinSource:
    """One late-join source of this context: its responder (and retention buffer) and where its
    retransmissions say they come from."""

    __slots__ = ("extra", "responder", "source")

    def __init__(
        self, source: Source, responder: RetransmissionResponder[Any], extra: tuple[Header, ...]
    ) -> None:
        self.source = source
        self.responder = responder
        self.extra = extra


class LateJoin:
    """A context's Late Join router (module docstring)."""

    def __init__(self, messaging: ImmediateMessaging) -> None:
        self._messaging = messaging
        self._lock = threading.Lock()
        self._sources: dict[tuple[int, int], _LateJoinSource] = {}
        self._by_request: dict[int, Any] = {}  # request index -> TopicSubscription
        self._by_source: dict[tuple[bytes | None, int], Any] = {}  # (instance, SRCIDX) -> subscription
        self._counters = dict.fromkeys(COUNTERS, 0)

    @property
    def _ctx(self) -> Any:
        return self._messaging.ctx

    # -- the source side -------------------------------------------------------------------------------
    def add_source(self, source: Source, params: RetentionParams) -> tuple[TopicOption, ...]:
        """Make ``source`` a late-join source: give it a retention buffer, take its requests, and return
        the topic options its TIR carries.  Without a request port (``request_tcp_bind_request_port``
        0) nothing can reach it: a warning, and the source does not offer Late Join."""
        address = self._messaging.address
        if address is None:
            self._ctx.log.warning(
                "source %r: late_join needs the context's request port (request_tcp_bind_request_port 1); "
                "the source does not offer Late Join",
                source.topic,
            )
            return ()
        notice = params.notice(source.topic)
        if notice is not None:
            self._ctx.log.info("%s", notice)
        transport = source.session.transport_info()
        xidx = _transport_index(transport)
        buffer: RetentionBuffer[Any] = RetentionBuffer(params)
        responder: RetransmissionResponder[Any] = RetransmissionResponder(
            buffer, params, topic_index=source.topic_index, initial_sqn=source._next_sqn
        )
        extra: tuple[Header, ...] = (
            SourceIndexHeader(source_index(transport, source.topic_index)),
            ReturnContextInstanceHeader(self._messaging.instance),
        )
        with self._lock:
            self._sources[(xidx, source.topic_index)] = _LateJoinSource(source, responder, extra)
        source._retention = buffer
        return responder.topic_options(address[0], address[1], xidx, self._ctx.now_ns())

    def remove_source(self, source: Source) -> None:
        key = (_transport_index(source.session.transport_info()), source.topic_index)
        with self._lock:
            entry = self._sources.get(key)
            if entry is not None and entry.source is source:
                del self._sources[key]

    def _source(self, transport_idx: int, topic_idx: int) -> _LateJoinSource | None:
        with self._lock:
            return self._sources.get((transport_idx, topic_idx))

    def _on_lji_request(self, request: LateJoinInfoRequestHeader) -> None:
        self._count("late_join_info_requests_rcved")
        entry = self._source(request.transport_idx, request.topic_idx)
        if entry is None:
            self._count("late_join_requests_ignored")
            return
        with entry.source.session.lock:
            answer = entry.responder.on_late_join_info_request(request, self._ctx.now_ns())
        if answer is None:
            self._count("late_join_requests_ignored")
            return
        self._send_info(answer)

    def _on_rx_request(self, request: RetransmissionRequestHeader) -> None:
        self._count("late_join_rx_requests_rcved")
        entry = self._source(request.transport_idx, request.id_2)
        if entry is None:
            self._count("late_join_requests_ignored")
            return
        session = entry.source.session
        with session.lock:
            answer = entry.responder.on_retransmission_request(request, self._ctx.now_ns())
        if answer is None:
            self._count("late_join_requests_ignored")
        elif isinstance(answer, SendRetransmission):
            data = session.retransmission(entry.source.topic_index, answer.message, entry.extra)
            self._messaging._out.send(answer.destination, data)
            self._count("late_join_retransmissions_sent")
        elif isinstance(answer, NotRetained):
            self._count("late_join_rx_requests_not_retained")
            self._send_info(SendLateJoinInfo(answer.info, answer.destination))
        elif isinstance(answer, SendTsni):
            self._send_control(answer.destination, TsniHeader(((answer.topic_index, answer.sqn),)))

    def _send_info(self, answer: SendLateJoinInfo) -> None:
        self._send_control(answer.destination, answer.header)

    def _send_control(self, destination: tuple[str, int], header: Header) -> None:
        """One LBMC control message (CTXINSTR, ``header``) on the UIM connection to ``destination``."""
        message = control_message(ReturnContextInstanceHeader(self._messaging.instance), header)
        self._messaging._out.send(destination, encode_message(message))

    # -- the receiver side -----------------------------------------------------------------------------
    def add_subscription(self, sub: Any, request_index: int, instance: bytes | None, srcidx: int) -> None:
        """``sub`` (a TopicSubscription) recovers from its source: route that source's answers to it."""
        self._by_request[request_index] = sub
        self._by_source[(instance, srcidx)] = sub

    def remove_subscription(self, sub: Any, request_index: int, instance: bytes | None, srcidx: int) -> None:
        if self._by_request.get(request_index) is sub:
            del self._by_request[request_index]
        if self._by_source.get((instance, srcidx)) is sub:
            del self._by_source[(instance, srcidx)]

    def send_request(self, request: SendRequest) -> None:
        """Send a requester's LJI_REQ or UME_RXREQ to the source's request port."""
        header = request.header
        self._send_control(request.destination, header)
        if isinstance(header, LateJoinInfoRequestHeader):
            self._count("late_join_info_requests_sent")
        elif request.kind is RecoveryKind.OTR:
            self._count("otr_rx_requests_sent")
        else:
            self._count("late_join_rx_requests_sent")

    def count_recovery(self, stats: RequesterStatistics) -> None:
        """A recovering subscription ended: keep what it recovered and gave up."""
        with self._lock:
            _add_recovery(self._counters, stats)

    def _sender(self, msg: LbmcMessage) -> bytes | None:
        hdr = msg.header(ReturnContextInstanceHeader)
        return None if hdr is None else hdr.ctxinst

    def _subscription_of(self, instance: bytes | None, srcidx: int) -> Any:
        sub = self._by_source.get((instance, srcidx))
        if sub is None and instance is not None:
            sub = self._by_source.get((None, srcidx))
        return sub

    def _on_retransmission(self, msg: LbmcMessage) -> None:
        index = msg.header(SourceIndexHeader)
        sub = None if index is None else self._subscription_of(self._sender(msg), index.source_index)
        if sub is None or sub.merge is None:
            self._count("late_join_retransmissions_dropped")
            return
        frag = msg.header(FragmentHeader)
        properties: Any = None
        fragment: tuple[int, int, int] | None = None
        if frag is not None:
            fragment = (frag.first_sqn, frag.offset, frag.total_length)
            for chained in (h for h in msg.headers if isinstance(h, AppHeaderChain)):
                for element in chained.elements:
                    if isinstance(element, PropertiesLengthElement):
                        properties = PropertiesLength(element.length)
        elif msg.properties is not None:
            properties = msg.properties.to_dict()
        payload = msg.payload
        sub.on_retransmission(
            msg.sqn, bytes(payload) if not isinstance(payload, bytes) else payload, fragment, properties
        )

    def _on_info(self, info: LateJoinInfoHeader) -> None:
        sub = self._by_request.get(info.request_idx)
        if sub is None or sub.merge is None:
            self._count("late_join_requests_ignored")
            return
        sub.on_late_join_info(info)

    def _on_tsni(self, msg: LbmcMessage, tsni: TsniHeader) -> bool:
        """A source's answer to a request with the T flag: its last sqn, for the subscription of that
        topic index from that context.  False when no subscription took it (not Late Join's)."""
        instance = self._sender(msg)
        taken = False
        for topic_index, sqn in tsni.records:
            for (inst, srcidx), sub in list(self._by_source.items()):
                if inst == instance and srcidx & _MASK == topic_index and sub.merge is not None:
                    sub.on_initial_sqn(sqn)
                    taken = True
        return taken

    # -- what arrives at the request port (context thread) -----------------------------------------------
    def on_message(self, msg: LbmcMessage) -> bool:
        """A message that is not a plain UIM: True if it was Late Join's (handled or counted)."""
        if msg.type is MessageType.RETRANSMISSION:
            self._on_retransmission(msg)
            return True
        if msg.type is not MessageType.CONTROL:
            return False
        handled = False
        for header in msg.headers:
            if isinstance(header, LateJoinInfoRequestHeader):
                handled = True
                self._on_lji_request(header)
            elif isinstance(header, RetransmissionRequestHeader):
                handled = True
                self._on_rx_request(header)
            elif isinstance(header, LateJoinInfoHeader):
                handled = True
                self._on_info(header)
            elif isinstance(header, TsniHeader) and self._on_tsni(msg, header):
                handled = True
        return handled

    def _count(self, name: str) -> None:
        with self._lock:
            self._counters[name] += 1

    def statistics(self) -> dict[str, int]:
        """The counters, with what the subscriptions recovering now did so far (context thread)."""
        with self._lock:
            counters = dict(self._counters)
        for sub in list(self._by_request.values()):
            merge = sub.merge
            if merge is not None:
                _add_recovery(counters, merge.requester.statistics())
        return counters


def _add_recovery(counters: dict[str, int], stats: RequesterStatistics) -> None:
    counters["late_join_msgs_recovered"] += stats.lj_recovered
    counters["late_join_msgs_unrecoverable"] += stats.lj_lost
    counters["otr_msgs_recovered"] += stats.otr_recovered
    counters["otr_msgs_unrecoverable"] += stats.otr_lost
