"""LBT-RM reliability engines, sans-I/O: :class:`RmSource` and :class:`RmReceiver` (seed 6.3).

Spec: ``02-transports-and-resolution.md`` 3 (NAK suppression 3.2, differences from PGM 3.3, acceptance
tests 3.4), ``01-fundamentals-and-objects.md`` 2.4 and 2.12.1, ``03-architecture.md`` A34-A35; wire:
``lbtrm-lbtru-lbttcp-transports.md`` 3.

The source multicasts DATA, session messages (SM) and NCFs to the session's group
(``Outgoing.destination`` ``None``); receivers unicast NAKs to the source's NAK port.  Every packet,
NAKs included, carries the source's ``ucast_port`` (the NAK port) and ``session_id``.

Driving them (the transport, or a simulator)::

    src = RmSource(session_id=sid, nak_port=14390, params=RmSourceParams(), rate=rate, now_ns=t)
    result = src.send(lbmc_bytes, t)            # write result.outgoing; result.refused -> WouldBlock
    out = src.datagram_received(nak, addr, t)   # retransmissions / NCFs to write
    out, events = src.poll(t)                   # at src.next_deadline(): SMs, released datagrams,
                                                # queued retransmissions, SourceUnblocked

    rcv = RmReceiver(session_id=sid, source=(src_ip, 14390), params=RmReceiverParams(), rng=rng,
                     now_ns=t)
    received, out, events = rcv.datagram_received(datagram, sender, t)
    out, events = rcv.poll(t)                   # at rcv.next_deadline(): NAKs, give-ups, EOS
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openum.protocol._rng import Rng
from openum.protocol.reliable._common import (
    SQN_MASK,
    Address,
    Outgoing,
    Received,
    ReceiverEvent,
    SessionActive,
    SourceEvent,
    new_record,
)
from openum.protocol.reliable._nak import Verdict
from openum.protocol.reliable._ratelimit import RateController
from openum.protocol.reliable._receiver import EMPTY_IN, EMPTY_OUT, ReceiverBase
from openum.protocol.reliable._source import SourceBase
from openum.protocol.reliable._stats import RmReceiverStatistics, RmSourceStatistics
from openum.wire._common import WireError
from openum.wire._datapath import rm_original_sqn
from openum.wire.lbtrm import (
    DATA_HEADER_LEN,
    FLAG_RX,
    FLAG_UCAST_NAKS,
    TYPE_DATA,
    TYPE_NAK,
    TYPE_NCF,
    TYPE_SM,
    NakFormat,
    RmNak,
    RmNcf,
    RmSessionMessage,
    data_header_template,
    decode,
    decode_data_header,
    encode,
)

__all__ = ["RmReceiver", "RmReceiverParams", "RmSource", "RmSourceParams"]

_BASE_LEN: Final = 8
_SM_LEN: Final = 24
_NAK_LEN: Final = 12
_NCF_LEN: Final = 16
_FLAGS_OFFSET: Final = 16
_TRAIL_OFFSET: Final = 12
_PAYLOAD_OFFSET: Final = 20  # of original DATA: DATA_HEADER_LEN, as a literal the compiled code inlines
assert _PAYLOAD_OFFSET == DATA_HEADER_LEN
_ACTIVE: Final = SessionActive()


@dataclass(frozen=True, slots=True)
class RmSourceParams:
    """Source-side options (``transport_lbtrm_*``), UM's defaults; times in ms, sizes in bytes."""

    transmission_window_size: int = 25_165_824
    transmission_window_limit: int = 0  # payload + headers cap; 0: only the size applies
    ignore_interval: int = 500
    sm_minimum_interval: int = 200
    sm_maximum_interval: int = 10_000
    datagram_max_size: int = 8192

    @classmethod
    def from_options(cls, source: Callable[[str], Any], context: Callable[[str], Any]) -> RmSourceParams:
        """From source-scope and context-scope option getters (``SourceAttributes.get`` ...)."""
        return cls(
            transmission_window_size=int(source("transport_lbtrm_transmission_window_size")),
            transmission_window_limit=int(source("transport_lbtrm_transmission_window_limit")),
            ignore_interval=int(source("transport_lbtrm_ignore_interval")),
            sm_minimum_interval=int(source("transport_lbtrm_sm_minimum_interval")),
            sm_maximum_interval=int(source("transport_lbtrm_sm_maximum_interval")),
            datagram_max_size=int(context("transport_lbtrm_datagram_max_size")),
        )


@dataclass(frozen=True, slots=True)
class RmReceiverParams:
    """Receiver-side options (``transport_lbtrm_*``), UM's defaults; times in ms."""

    nak_initial_backoff_interval: int = 50
    nak_backoff_interval: int = 200
    nak_suppress_interval: int = 1000
    nak_generation_interval: int = 10_000
    activity_timeout: int = 60_000
    preactivity_timeout: int = 0  # before the first datagram; 0: activity_timeout applies
    send_naks: bool = True
    datagram_max_size: int = 8192

    @classmethod
    def from_options(cls, receiver: Callable[[str], Any], context: Callable[[str], Any]) -> RmReceiverParams:
        return cls(
            nak_initial_backoff_interval=int(receiver("transport_lbtrm_nak_initial_backoff_interval")),
            nak_backoff_interval=int(receiver("transport_lbtrm_nak_backoff_interval")),
            nak_suppress_interval=int(receiver("transport_lbtrm_nak_suppress_interval")),
            nak_generation_interval=int(receiver("transport_lbtrm_nak_generation_interval")),
            activity_timeout=int(receiver("transport_lbtrm_activity_timeout")),
            preactivity_timeout=int(receiver("transport_lbtrm_preactivity_timeout")),
            send_naks=bool(receiver("transport_lbtrm_send_naks")),
            datagram_max_size=int(context("transport_lbtrm_datagram_max_size")),
        )


class RmSource(SourceBase):
    """The sending side of one LBT-RM transport session."""

    __slots__ = ("_port", "_sid")

    def __init__(
        self,
        *,
        session_id: int,
        nak_port: int,
        params: RmSourceParams,
        rate: RateController,
        now_ns: int,
        rng: Rng | None = None,
    ) -> None:
        """``rng`` is accepted for symmetry with the receivers; the source itself draws nothing
        (UM starts sequence numbers at 0 and answers NAKs at once)."""
        if not 0 < session_id <= SQN_MASK:
            raise ValueError(f"session_id must be a non-zero u32, got {session_id}")
        super().__init__(
            header_len=DATA_HEADER_LEN,
            datagram_max_size=params.datagram_max_size,
            window_size=params.transmission_window_size,
            window_limit=params.transmission_window_limit,
            ignore_interval_ms=params.ignore_interval,
            sm_minimum_interval_ms=params.sm_minimum_interval,
            sm_maximum_interval_ms=params.sm_maximum_interval,
            rate=rate,
            header=data_header_template(nak_port, session_id),
        )
        self._sid = session_id
        self._port = nak_port
        del now_ns  # nothing is sent before the first datagram (seed 8.11: "created but not started")

    @property
    def session_id(self) -> int:
        return self._sid

    @property
    def nak_port(self) -> int:
        return self._port

    # -- wire ------------------------------------------------------------------------------------------

    def _data_outgoing(self, datagram: bytes) -> tuple[Outgoing, ...]:
        return (new_record(Outgoing, (datagram, None)),)

    def _retransmission(self, key: Hashable, datagram: bytes) -> Outgoing | None:
        buf = bytearray(datagram)
        buf[_FLAGS_OFFSET] |= FLAG_RX
        buf[_TRAIL_OFFSET : _TRAIL_OFFSET + 4] = (self._window.trail & SQN_MASK).to_bytes(4, "big")
        return Outgoing(bytes(buf))

    def _session_messages(self) -> list[Outgoing]:
        sm = RmSessionMessage(
            self._port,
            self._sid,
            self._sm_sqn & SQN_MASK,
            self._lead_sent & SQN_MASK,
            self._window.trail & SQN_MASK,
            FLAG_UCAST_NAKS,
        )
        return [Outgoing(encode(sm))]

    def _ncf_outgoing(self, key: Hashable, reason: int, sqns: list[int]) -> Outgoing | None:
        ncf = RmNcf(self._port, self._sid, self._window.trail & SQN_MASK, tuple(sqns), reason)
        return Outgoing(encode(ncf))

    def _max_ncf_entries(self) -> int:
        return min(0xFFFF, (self._datagram_max_size - _NCF_LEN) // 4)

    # -- input and timers ------------------------------------------------------------------------------

    def datagram_received(self, data: bytes | memoryview, sender: Address, now_ns: int) -> list[Outgoing]:
        """A datagram on the NAK port: NAKs become retransmissions (oldest first, retransmit-rate
        limited) or NCFs.  Anything else is counted and dropped, never raised."""
        drops = self._drops
        n = len(data)
        if n < _BASE_LEN:
            drops.size += 1
            return []
        if data[0] & 0xF0:
            drops.version += 1
            return []
        if data[0] != TYPE_NAK:
            drops.type += 1
            return []
        if n < _NAK_LEN:
            drops.size += 1
            return []
        try:
            nak = decode(data)
        except WireError:
            drops.hdr += 1
            return []
        assert isinstance(nak, RmNak)
        if nak.session_id != self._sid or nak.ucast_port != self._port:
            drops.sid += 1
            return []
        if nak.format != NakFormat.SELECTIVE:
            drops.other += 1  # parity NAKs need FEC, which openum does not send
            return []
        return self._service_nak(None, nak.sqns, now_ns)

    def poll(self, now_ns: int) -> tuple[list[Outgoing], list[SourceEvent]]:
        """Session messages while idle, datagrams the rate controller released, queued
        retransmissions, and :class:`SourceUnblocked` after a refused send."""
        return self._poll_common(now_ns)

    def close(self) -> None:
        """The session is deleted.  Nothing is sent (seed 8.11.6: receivers time out); a datagram the
        rate controller still holds is dropped so that it does not block the context's other sessions."""
        self._release_rate()

    def statistics(self) -> RmSourceStatistics:
        return RmSourceStatistics(**self._source_fields())


class RmReceiver(ReceiverBase):
    """The receiving side of one LBT-RM transport session (one source's session on a group)."""

    __slots__ = ("_port", "_sid", "_source")

    def __init__(
        self,
        *,
        session_id: int,
        source: Address,
        params: RmReceiverParams,
        rng: Rng,
        now_ns: int,
    ) -> None:
        """``source``: the source's IP and NAK port (``ucast_port``), where NAKs go."""
        max_naks = min(0xFFFF, (params.datagram_max_size - _NAK_LEN) // 4)
        super().__init__(
            initial_backoff_ms=params.nak_initial_backoff_interval,
            backoff_ms=params.nak_backoff_interval,
            suppress_ms=params.nak_suppress_interval,
            generation_ms=params.nak_generation_interval,
            send_naks=params.send_naks,
            max_naks_per_packet=max_naks,
            activity_timeout_ms=params.activity_timeout,
            first_timeout_ms=params.preactivity_timeout or params.activity_timeout,
            rng=rng,
            now_ns=now_ns,
        )
        self._sid = session_id
        self._source = source
        self._port = source[1]

    @property
    def session_id(self) -> int:
        return self._sid

    def _naks(self, packets: list[list[int]]) -> list[Outgoing]:
        return [Outgoing(encode(RmNak(self._port, self._sid, tuple(p))), self._source) for p in packets]

    def data_in_order(self, data: memoryview, sender: Address, now_ns: int) -> int:
        if self._ended or not self._heard:
            return -1
        sqn = rm_original_sqn(data, self._port, self._sid)
        if sqn < 0 or not self._det.in_order(sqn):  # anything else: the general path reads it
            return -1
        self._take_in_order(len(data), now_ns)
        return _PAYLOAD_OFFSET

    def datagram_received(
        self, data: bytes | memoryview, sender: Address, now_ns: int
    ) -> tuple[Sequence[Received], Sequence[Outgoing], Sequence[ReceiverEvent]]:
        """One datagram from the group: the payloads to hand upward (in arrival order, duplicates
        dropped), NAKs due at once, and events.  Foreign, malformed and unexpected datagrams are
        counted (``dgrams_dropped_*``) and dropped, never raised."""
        drops = self._counters.drops
        if self._ended:  # inert (the transport forgets an ended session: nothing reaches it then)
            return EMPTY_IN, EMPTY_OUT, ()
        n = len(data)
        if n < _BASE_LEN:
            drops.size += 1
            return EMPTY_IN, EMPTY_OUT, ()
        first = data[0]
        if first & 0xF0:
            drops.version += 1
            return EMPTY_IN, EMPTY_OUT, ()
        received: Sequence[Received] = EMPTY_IN
        det = self._det
        events: list[ReceiverEvent] = []
        try:
            if first == TYPE_DATA:
                if n < DATA_HEADER_LEN:
                    drops.size += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                port, sid, sqn, trail, flags, offset = decode_data_header(data)
                if sid != self._sid or port != self._port:
                    drops.sid += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                if self._heard_now(now_ns):
                    events.append(_ACTIVE)
                c = self._counters
                c.msgs_rcved += 1
                c.bytes_rcved += n
                rx = bool(flags & FLAG_RX)
                if rx:
                    c.rxs_rcved += 1
                if det.data(sqn, trail, rx, now_ns) == Verdict.NEW:
                    view = data if isinstance(data, memoryview) else memoryview(data)
                    received = [Received(view[offset:], rx, sqn)]
            elif first in (TYPE_SM, TYPE_NCF):
                if n < (_SM_LEN if first == TYPE_SM else _NCF_LEN):
                    drops.size += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                record = decode(data)
                assert isinstance(record, RmSessionMessage | RmNcf)
                if record.session_id != self._sid or record.ucast_port != self._port:
                    drops.sid += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                if self._heard_now(now_ns):
                    events.append(_ACTIVE)
                if isinstance(record, RmSessionMessage):
                    self._counters.sms_rcved += 1
                    det.edges(record.lead_sqn, record.trail_sqn, now_ns)
                else:
                    det.ncf(record.sqns, record.trail_sqn, record.reason, now_ns)
            else:
                drops.type += 1  # NAKs (multicast NAKs are not used) and undefined types
                return EMPTY_IN, EMPTY_OUT, ()
        except WireError:
            drops.hdr += 1
            return EMPTY_IN, EMPTY_OUT, ()
        out: list[Outgoing] = []
        self._run_detector(now_ns, out, events)
        if self._held or det.head_pending():
            received = self._hold(received)
        return received, out or EMPTY_OUT, events

    def poll(self, now_ns: int) -> tuple[list[Outgoing], list[ReceiverEvent]]:
        """NAKs due, give-ups (:class:`Unrecovered`), and the activity timeout
        (:class:`SessionEnded`, after which the receiver is inert)."""
        if self._ended:
            return [], []
        if now_ns >= self._deadline:
            return [], [self._end("activity timeout")]
        out: list[Outgoing] = []
        events: list[ReceiverEvent] = []
        self._run_detector(now_ns, out, events)
        return out, events

    def next_deadline(self) -> int | None:
        if self._ended:
            return None
        due = self._det.next_deadline()  # asked after every datagram: _detector_deadline() inlined
        return self._deadline if due is None or due > self._deadline else due

    def statistics(self) -> RmReceiverStatistics:
        return RmReceiverStatistics(**self._counters.fields(self._det))
