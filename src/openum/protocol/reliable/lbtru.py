"""LBT-RU reliability engines, sans-I/O: :class:`RuSource` and :class:`RuReceiver` (seed 6.2).

Spec: ``02-transports-and-resolution.md`` 2 (and 3.2 for the NAK suppression LBT-RU shares with
LBT-RM), ``01-fundamentals-and-objects.md`` 2.12.1; wire: ``lbtrm-lbtru-lbttcp-transports.md`` 4.

LBT-RU is connection-oriented unicast: one source socket serves many receivers ("clients").

* Handshake (wire 4.5): the receiver sends CREQ (SYN) every ``transport_lbtru_connect_interval``, up
  to ``transport_lbtru_maximum_connect_attempts``; the source answers with an SM carrying the SYN flag,
  its leading/trailing edges, the session ID and the client ID it assigned.  The receiver starts after
  the leading edge (a late join is not loss).
* Session ID (seed 6.2.2): with ``transport_lbtru_use_session_id`` every packet but RST carries the SID
  option (wire 7.3); a source ignores CREQs/NAKs/ACKs of another session, a receiver drops datagrams of
  another session, so a receiver holding a stale session ID never connects ("connect failed") or times
  out (EOS) instead of receiving.
* Keepalive: the receiver ACKs (``ack_sqn`` = newest datagram held with nothing missing before it) every
  ``transport_lbtru_acknowledgement_interval``; the source drops a client it has not heard from for
  ``transport_lbtru_client_activity_timeout``.  NAKs/ACKs from a client the source does not know are
  answered with a bare RST.  A receiver ends the session on an RST that carries its session ID; a bare
  RST (the form Wireshark parses, and the one sources send) names no session, so anyone who knows the
  source's address could forge one: the receiver checks it by asking the source (a CREQ at once, then
  every ``transport_lbtru_connect_interval``) and ends the session only when no answer (SM SYN) of its
  session comes within :data:`RST_CHECK_INTERVALS` connect intervals; an answer refutes the RST
  (``rsts_refuted``) and the session goes on (reconnected, if the source had dropped the client).
* One sequence space and one transmission window per session; every DATA goes to every client (the
  rate controller is charged for all copies).  Repairs are per client: a retransmission and an NCF go
  only to the client that NAKed, and the ignore interval is per client.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openum.protocol._rng import Rng
from openum.protocol.reliable._common import (
    NS_PER_MS,
    SQN_MASK,
    Address,
    Outgoing,
    Received,
    ReceiverConnected,
    ReceiverDisconnected,
    ReceiverEvent,
    SessionActive,
    SourceEvent,
    new_record,
)
from openum.protocol.reliable._nak import Verdict
from openum.protocol.reliable._ratelimit import RateController
from openum.protocol.reliable._receiver import EMPTY_IN, EMPTY_OUT, ReceiverBase
from openum.protocol.reliable._source import SourceBase
from openum.protocol.reliable._stats import Drops, RuReceiverStatistics, RuSourceStatistics
from openum.wire._common import WireError
from openum.wire._datapath import ru_original_sqn
from openum.wire.lbtru import (
    DATA_HEADER_LEN,
    FLAG_RX,
    FLAG_SYN,
    TYPE_ACK,
    TYPE_CREQ,
    TYPE_DATA,
    TYPE_NAK,
    TYPE_NCF,
    TYPE_RST,
    TYPE_SM,
    NakFormat,
    RuAck,
    RuCreq,
    RuNak,
    RuNcf,
    RuOption,
    RuRst,
    RuSessionMessage,
    data_header_template,
    decode,
    decode_data_header,
    encode,
    make_options,
)

__all__ = ["RuReceiver", "RuReceiverParams", "RuReceiverState", "RuSource", "RuSourceParams"]

_BASE_LEN: Final = 4
_OPT_LEN: Final = 8
_RST: Final = encode(RuRst())  # always bare: Wireshark mis-parses an RST with options (wire 4.4)
#: Connect intervals a receiver waits for the source to answer after a bare RST (module docstring).
RST_CHECK_INTERVALS: Final = 3
_SOURCE_TYPES: Final = frozenset((TYPE_NAK, TYPE_ACK, TYPE_CREQ))
_RECEIVER_TYPES: Final = frozenset((TYPE_DATA, TYPE_SM, TYPE_NCF, TYPE_RST))


@dataclass(frozen=True, slots=True)
class RuSourceParams:
    """Source-side options (``transport_lbtru_*``), UM's defaults; times in ms, sizes in bytes."""

    transmission_window_size: int = 25_165_824
    transmission_window_limit: int = 0
    ignore_interval: int = 500
    sm_minimum_interval: int = 200
    sm_maximum_interval: int = 10_000
    client_activity_timeout: int = 10_000
    use_session_id: bool = True
    datagram_max_size: int = 8192

    @classmethod
    def from_options(cls, source: Callable[[str], Any], context: Callable[[str], Any]) -> RuSourceParams:
        return cls(
            transmission_window_size=int(source("transport_lbtru_transmission_window_size")),
            transmission_window_limit=int(source("transport_lbtru_transmission_window_limit")),
            ignore_interval=int(source("transport_lbtru_ignore_interval")),
            sm_minimum_interval=int(source("transport_lbtru_sm_minimum_interval")),
            sm_maximum_interval=int(source("transport_lbtru_sm_maximum_interval")),
            client_activity_timeout=int(source("transport_lbtru_client_activity_timeout")),
            use_session_id=bool(source("transport_lbtru_use_session_id")),
            datagram_max_size=int(context("transport_lbtru_datagram_max_size")),
        )


@dataclass(frozen=True, slots=True)
class RuReceiverParams:
    """Receiver-side options (``transport_lbtru_*``), UM's defaults; times in ms."""

    nak_initial_backoff_interval: int = 0
    nak_backoff_interval: int = 200
    nak_suppress_interval: int = 1000
    nak_generation_interval: int = 10_000
    activity_timeout: int = 60_000
    connect_interval: int = 100
    maximum_connect_attempts: int = 600
    acknowledgement_interval: int = 500
    send_naks: bool = True
    datagram_max_size: int = 8192

    @classmethod
    def from_options(cls, receiver: Callable[[str], Any], context: Callable[[str], Any]) -> RuReceiverParams:
        return cls(
            nak_initial_backoff_interval=int(receiver("transport_lbtru_nak_initial_backoff_interval")),
            nak_backoff_interval=int(receiver("transport_lbtru_nak_backoff_interval")),
            nak_suppress_interval=int(receiver("transport_lbtru_nak_suppress_interval")),
            nak_generation_interval=int(receiver("transport_lbtru_nak_generation_interval")),
            activity_timeout=int(receiver("transport_lbtru_activity_timeout")),
            connect_interval=int(receiver("transport_lbtru_connect_interval")),
            maximum_connect_attempts=int(receiver("transport_lbtru_maximum_connect_attempts")),
            acknowledgement_interval=int(receiver("transport_lbtru_acknowledgement_interval")),
            send_naks=bool(receiver("transport_lbtru_send_naks")),
            datagram_max_size=int(context("transport_lbtru_datagram_max_size")),
        )


def _check_type(data: bytes | memoryview, allowed: frozenset[int], drops: Drops) -> bool:
    """Length, version and direction checks shared by both ends; counts what it refuses."""
    if len(data) < _BASE_LEN:
        drops.size += 1
        return False
    if data[0] & 0xF0:
        drops.version += 1
        return False
    if data[0] not in allowed:
        drops.type += 1
        return False
    return True


# --- source -------------------------------------------------------------------------------------------


class _Client:
    __slots__ = ("ack_sqn", "address", "client_id", "last_heard", "sm_sqn")

    def __init__(self, address: Address, client_id: int, now_ns: int) -> None:
        self.address = address
        self.client_id = client_id
        self.last_heard = now_ns
        self.sm_sqn = 0
        self.ack_sqn: int | None = None


class RuSource(SourceBase):
    """The sending side of one LBT-RU transport session and its connected clients."""

    __slots__ = (
        "_acks_rcved",
        "_client_timeout",
        "_clients",
        "_creqs_rcved",
        "_last_client_id",
        "_max_ncf",
        "_membership",
        "_opts",
        "_rsts_sent",
        "_sid",
        "_timed_out",
        "_use_sid",
    )

    def __init__(
        self,
        *,
        session_id: int,
        params: RuSourceParams,
        rate: RateController,
        now_ns: int,
        rng: Rng | None = None,
    ) -> None:
        """``rng`` is accepted for symmetry; the source draws nothing.  ``now_ns`` is unused: nothing
        is sent before a client connects or data is sent."""
        if not 0 < session_id <= SQN_MASK:
            raise ValueError(f"session_id must be a non-zero u32, got {session_id}")
        self._use_sid = params.use_session_id
        self._opts: tuple[RuOption, ...] = make_options(session_id) if self._use_sid else ()
        opt_len = _OPT_LEN * len(self._opts)
        super().__init__(
            header_len=DATA_HEADER_LEN + opt_len,
            datagram_max_size=params.datagram_max_size,
            window_size=params.transmission_window_size,
            window_limit=params.transmission_window_limit,
            ignore_interval_ms=params.ignore_interval,
            sm_minimum_interval_ms=params.sm_minimum_interval,
            sm_maximum_interval_ms=params.sm_maximum_interval,
            rate=rate,
            header=data_header_template(session_id if self._use_sid else None),
        )
        self._sid = session_id
        self._max_ncf = min(0xFFFF, (params.datagram_max_size - 12 - opt_len) // 4)
        self._client_timeout = params.client_activity_timeout * NS_PER_MS
        self._clients: dict[Address, _Client] = {}  # least recently heard first
        self._membership = 0  # counts the clients' comings and goings
        self._last_client_id = 0
        self._creqs_rcved = 0
        self._acks_rcved = 0
        self._timed_out = 0
        self._rsts_sent = 0
        del now_ns

    @property
    def session_id(self) -> int:
        return self._sid

    @property
    def clients(self) -> tuple[Address, ...]:
        """Addresses of the connected clients."""
        return tuple(self._clients)

    @property
    def membership(self) -> int:
        """A number that changes whenever a client connects or goes (what :attr:`clients` holds, not
        their order): a caller's view of the clients is current while it is unchanged."""
        return self._membership

    # -- wire ------------------------------------------------------------------------------------------

    def _copies(self) -> int:
        return len(self._clients)

    def _data_outgoing(self, datagram: bytes) -> tuple[Outgoing, ...]:
        return tuple([new_record(Outgoing, (datagram, address)) for address in self._clients])

    def data_destinations(self) -> Iterable[Address | None]:
        return self._clients  # the clients by address

    def _retransmission(self, key: Hashable, datagram: bytes) -> Outgoing | None:
        if key not in self._clients:
            return None
        assert isinstance(key, tuple)
        buf = bytearray(datagram)
        buf[2] |= FLAG_RX >> 8
        buf[8:12] = (self._window.trail & SQN_MASK).to_bytes(4, "big")
        return Outgoing(bytes(buf), key)

    def _sm_to(self, client: _Client, flags: int) -> Outgoing:
        opts = self._opts
        if flags & FLAG_SYN:
            opts = make_options(self._sid if self._use_sid else None, client.client_id)
        sm = RuSessionMessage(
            client.sm_sqn & SQN_MASK, self._lead_sent & SQN_MASK, self._window.trail & SQN_MASK, flags, opts
        )
        client.sm_sqn += 1
        return Outgoing(encode(sm), client.address)

    def _session_messages(self) -> list[Outgoing]:
        return [self._sm_to(client, 0) for client in self._clients.values()]

    def _ncf_outgoing(self, key: Hashable, reason: int, sqns: list[int]) -> Outgoing | None:
        if key not in self._clients:
            return None
        assert isinstance(key, tuple)
        ncf = RuNcf(self._window.trail & SQN_MASK, tuple(sqns), reason, options=self._opts)
        return Outgoing(encode(ncf), key)

    def _max_ncf_entries(self) -> int:
        return self._max_ncf

    # -- input -----------------------------------------------------------------------------------------

    def datagram_received(
        self, data: bytes | memoryview, sender: Address, now_ns: int
    ) -> tuple[list[Outgoing], list[SourceEvent]]:
        """CREQs connect clients (answered with SM SYN), ACKs keep them alive, NAKs become
        retransmissions or NCFs to that client.  Garbage is counted and dropped, never raised."""
        drops = self._drops
        if not _check_type(data, _SOURCE_TYPES, drops):
            return [], []
        try:
            record = decode(data)
        except WireError:
            drops.hdr += 1
            return [], []
        assert isinstance(record, RuNak | RuAck | RuCreq)
        if self._use_sid and record.session_id != self._sid:
            drops.sid += 1
            return [], []
        clients = self._clients
        client = clients.pop(sender, None)
        if isinstance(record, RuCreq):
            self._creqs_rcved += 1
            events: list[SourceEvent] = []
            if client is None:
                self._last_client_id += 1
                client = _Client(sender, self._last_client_id, now_ns)
                self._membership += 1
                events.append(ReceiverConnected(sender, client.client_id))
            client.last_heard = now_ns
            clients[sender] = client  # re-inserted last: most recently heard
            if self._sm.due is None:  # the session starts with its first client
                self._sm.activity(now_ns)
            return [self._sm_to(client, FLAG_SYN)], events
        if client is None:  # not connected (timed out, or from before a restart): reset it
            self._rsts_sent += 1
            return [Outgoing(_RST, sender)], []
        client.last_heard = now_ns
        clients[sender] = client
        if isinstance(record, RuAck):
            self._acks_rcved += 1
            client.ack_sqn = record.ack_sqn
            return [], []
        if record.format != NakFormat.SELECTIVE:
            drops.other += 1
            return [], []
        return self._service_nak(sender, record.sqns, now_ns), []

    def poll(self, now_ns: int) -> tuple[list[Outgoing], list[SourceEvent]]:
        """Client activity timeouts (:class:`ReceiverDisconnected`), then as for LBT-RM: session
        messages, released datagrams, queued retransmissions, :class:`SourceUnblocked`."""
        events: list[SourceEvent] = []
        clients = self._clients
        while clients:
            client = next(iter(clients.values()))
            if now_ns < client.last_heard + self._client_timeout:
                break
            del clients[client.address]
            self._membership += 1
            self._repair.forget(client.address)
            self._timed_out += 1
            events.append(ReceiverDisconnected(client.address, client.client_id, "timeout"))
        out, more = self._poll_common(now_ns)
        return out, events + more

    def next_deadline(self) -> int | None:
        deadline = super().next_deadline()
        if self._clients:
            first = next(iter(self._clients.values())).last_heard + self._client_timeout
            deadline = first if deadline is None else min(deadline, first)
        return deadline

    def close(self) -> tuple[list[Outgoing], list[SourceEvent]]:
        """The session is being deleted: a bare RST to every client, which ends their sessions."""
        out = [Outgoing(_RST, address) for address in self._clients]
        events: list[SourceEvent] = [
            ReceiverDisconnected(c.address, c.client_id, "closed") for c in self._clients.values()
        ]
        self._rsts_sent += len(out)
        self._clients.clear()
        self._membership += 1
        self._release_rate()
        return out, events

    def statistics(self) -> RuSourceStatistics:
        return RuSourceStatistics(
            **self._source_fields(),
            num_clients=len(self._clients),
            creqs_rcved=self._creqs_rcved,
            acks_rcved=self._acks_rcved,
            clients_timed_out=self._timed_out,
            rsts_sent=self._rsts_sent,
        )


# --- receiver -----------------------------------------------------------------------------------------


class RuReceiverState(enum.Enum):
    CONNECTING = "connecting"  # sending CREQs
    CONNECTED = "connected"
    ENDED = "ended"


_CONNECTING, _CONNECTED, _ENDED = RuReceiverState
#: ``(state, input) -> state``; anything else ends the session (PRACTICES.md 2).
_TRANSITIONS: Final[dict[tuple[RuReceiverState, str], RuReceiverState]] = {
    (_CONNECTING, "syn"): _CONNECTED,
    (_CONNECTING, "traffic"): _CONNECTED,  # DATA/SM/NCF of the session: the SYN answer was lost
    (_CONNECTING, "attempts exhausted"): _ENDED,
    (_CONNECTING, "rst"): _ENDED,
    (_CONNECTED, "syn"): _CONNECTED,  # an answer to a CREQ retry
    (_CONNECTED, "traffic"): _CONNECTED,
    (_CONNECTED, "rst"): _ENDED,
    (_CONNECTED, "activity timeout"): _ENDED,
}


class RuReceiver(ReceiverBase):
    """The receiving side of one LBT-RU transport session (a connection to one source)."""

    __slots__ = (
        "_ack_interval",
        "_acks_sent",
        "_attempts",
        "_client_id",
        "_connect_interval",
        "_connected",
        "_creqs_sent",
        "_max_attempts",
        "_next_ack",
        "_next_creq",
        "_opts",
        "_payload_offset",
        "_reset_due",
        "_rsts_rcved",
        "_rsts_refuted",
        "_sid",
        "_source",
        "_state",
    )

    def __init__(
        self,
        *,
        session_id: int | None,
        source: Address,
        params: RuReceiverParams,
        rng: Rng,
        now_ns: int,
    ) -> None:
        """``session_id``: from the source's advertisement (``None`` when it has none: a source with
        ``transport_lbtru_use_session_id 0``).  ``source``: the source's IP and port.  The first CREQ
        is due at once (:meth:`poll` at ``now_ns``)."""
        self._opts: tuple[RuOption, ...] = make_options(session_id)
        max_naks = min(0xFFFF, (params.datagram_max_size - 8 - _OPT_LEN * len(self._opts)) // 4)
        super().__init__(
            initial_backoff_ms=params.nak_initial_backoff_interval,
            backoff_ms=params.nak_backoff_interval,
            suppress_ms=params.nak_suppress_interval,
            generation_ms=params.nak_generation_interval,
            send_naks=params.send_naks,
            max_naks_per_packet=max_naks,
            activity_timeout_ms=params.activity_timeout,
            first_timeout_ms=params.activity_timeout,
            rng=rng,
            now_ns=now_ns,
        )
        self._sid = session_id
        self._source = source
        self._state = RuReceiverState.CONNECTING
        self._connected = False  # _state is CONNECTED
        self._payload_offset = DATA_HEADER_LEN + _OPT_LEN * len(self._opts)  # of original DATA
        self._connect_interval = params.connect_interval * NS_PER_MS
        self._max_attempts = params.maximum_connect_attempts
        self._ack_interval = params.acknowledgement_interval * NS_PER_MS
        self._attempts = 0
        self._next_creq = now_ns
        self._next_ack = now_ns
        self._client_id: int | None = None
        self._creqs_sent = 0
        self._acks_sent = 0
        self._reset_due: int | None = None  # a bare RST is being checked: the session ends then
        self._rsts_rcved = 0
        self._rsts_refuted = 0

    @property
    def state(self) -> RuReceiverState:
        return self._state

    @property
    def client_id(self) -> int | None:
        return self._client_id

    def _step(self, what: str, now_ns: int) -> None:
        before = self._state
        self._state = _TRANSITIONS.get((before, what), _ENDED)
        self._connected = self._state is _CONNECTED
        if self._state is _ENDED:
            self._ended = True
        elif before is _CONNECTING:  # just connected: keepalives start
            self._next_ack = now_ns + self._ack_interval

    def _naks(self, packets: list[list[int]]) -> list[Outgoing]:
        return [Outgoing(encode(RuNak(tuple(p), options=self._opts)), self._source) for p in packets]

    def data_in_order(self, data: memoryview, sender: Address, now_ns: int) -> int:
        if self._ended or not self._heard or not self._connected or sender != self._source:
            return -1
        sqn = ru_original_sqn(data, self._sid)
        if sqn < 0 or not self._det.in_order(sqn):  # anything else: the general path reads it
            return -1
        self._take_in_order(len(data), now_ns)
        return self._payload_offset

    def datagram_received(
        self, data: bytes | memoryview, sender: Address, now_ns: int
    ) -> tuple[Sequence[Received], Sequence[Outgoing], Sequence[ReceiverEvent]]:
        """One datagram from the source: payloads to hand upward (arrival order, no duplicates), NAKs
        due at once, events.  Datagrams from another address or session are counted
        (``dgrams_dropped_sid``), malformed ones too, and dropped."""
        drops = self._counters.drops
        if self._ended:  # inert (the transport forgets an ended session: nothing reaches it then)
            return EMPTY_IN, EMPTY_OUT, ()
        if sender != self._source:
            drops.sid += 1
            return EMPTY_IN, EMPTY_OUT, ()
        if not _check_type(data, _RECEIVER_TYPES, drops):
            return EMPTY_IN, EMPTY_OUT, ()
        ptype = data[0]
        if ptype == TYPE_RST:
            return self._rst(data, now_ns)
        received: Sequence[Received] = EMPTY_IN
        events: list[ReceiverEvent] = []
        det = self._det
        try:
            if ptype == TYPE_DATA:
                if len(data) < DATA_HEADER_LEN:
                    drops.size += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                flags, sqn, trail, sid, offset = decode_data_header(data)
                if sid != self._sid:
                    drops.sid += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                self._arrived("traffic", now_ns, events)
                c = self._counters
                c.msgs_rcved += 1
                c.bytes_rcved += len(data)
                rx = bool(flags & FLAG_RX)
                if rx:
                    c.rxs_rcved += 1
                if det.data(sqn, trail, rx, now_ns) == Verdict.NEW:
                    view = data if isinstance(data, memoryview) else memoryview(data)
                    received = [Received(view[offset:], rx, sqn)]
            else:
                record = decode(data)
                assert isinstance(record, RuSessionMessage | RuNcf)
                if record.session_id != self._sid:
                    drops.sid += 1
                    return EMPTY_IN, EMPTY_OUT, ()
                if isinstance(record, RuSessionMessage):
                    if record.syn:
                        self._client_id = record.client_id
                        if self._reset_due is not None:  # the source answered: the RST was not its word
                            self._reset_due = None
                            self._rsts_refuted += 1
                    self._arrived("syn" if record.syn else "traffic", now_ns, events)
                    self._counters.sms_rcved += 1
                    det.edges(record.lead_sqn, record.trail_sqn, now_ns)
                else:
                    self._arrived("traffic", now_ns, events)
                    det.ncf(record.sqns, record.trail_sqn, record.reason, now_ns)
        except WireError:
            drops.hdr += 1
            return EMPTY_IN, EMPTY_OUT, ()
        out: list[Outgoing] = []
        self._run_detector(now_ns, out, events)
        if self._held or det.head_pending():
            received = self._hold(received)
        return received, out or EMPTY_OUT, events

    def _rst(
        self, data: bytes | memoryview, now_ns: int
    ) -> tuple[Sequence[Received], Sequence[Outgoing], Sequence[ReceiverEvent]]:
        """An RST from the source's address: ends the session when it carries this session's ID;
        a bare one is checked first (module docstring)."""
        try:
            record = decode(data)
        except WireError:
            self._counters.drops.hdr += 1
            return EMPTY_IN, EMPTY_OUT, ()
        sid = record.session_id
        if sid is not None and sid != self._sid:
            self._counters.drops.sid += 1
            return EMPTY_IN, EMPTY_OUT, ()
        self._rsts_rcved += 1
        if sid is not None:
            self._step("rst", now_ns)
            return EMPTY_IN, EMPTY_OUT, (self._end("reset"),)
        if self._reset_due is not None:
            return EMPTY_IN, EMPTY_OUT, ()  # already being checked
        self._reset_due = now_ns + RST_CHECK_INTERVALS * self._connect_interval
        self._next_creq = now_ns + self._connect_interval
        self._creqs_sent += 1
        return EMPTY_IN, [Outgoing(encode(RuCreq(options=self._opts)), self._source)], ()

    def _arrived(self, what: str, now_ns: int, events: list[ReceiverEvent]) -> None:
        if self._state is not _CONNECTED or what == "syn":
            self._step(what, now_ns)
        if self._heard_now(now_ns):
            events.append(SessionActive(self._client_id))

    def poll(self, now_ns: int) -> tuple[list[Outgoing], list[ReceiverEvent]]:
        """CREQs while connecting (``SessionEnded("connect failed")`` when they run out); once
        connected ACKs, NAKs, give-ups and the activity timeout."""
        if self._ended:
            return [], []
        out: list[Outgoing] = []
        events: list[ReceiverEvent] = []
        if self._reset_due is not None:
            if now_ns >= self._reset_due:  # nothing of the session answered: the RST stands
                self._step("rst", now_ns)
                return [], [self._end("reset")]
            if self._state is _CONNECTED and now_ns >= self._next_creq:
                self._creqs_sent += 1
                self._next_creq = now_ns + self._connect_interval
                out.append(Outgoing(encode(RuCreq(options=self._opts)), self._source))
        if self._state is _CONNECTING:
            if now_ns >= self._next_creq:
                if self._attempts >= self._max_attempts and self._reset_due is None:
                    self._step("attempts exhausted", now_ns)
                    return [], [self._end("connect failed")]
                self._attempts += 1
                self._creqs_sent += 1
                self._next_creq = now_ns + self._connect_interval
                out.append(Outgoing(encode(RuCreq(options=self._opts)), self._source))
            return out, events
        if now_ns >= self._deadline:
            self._step("activity timeout", now_ns)
            return [], [self._end("activity timeout")]
        self._run_detector(now_ns, out, events)
        if now_ns >= self._next_ack:
            self._next_ack = now_ns + self._ack_interval
            self._acks_sent += 1
            ack = RuAck(self._det.contiguous(), options=self._opts)
            out.append(Outgoing(encode(ack), self._source))
        return out, events

    def next_deadline(self) -> int | None:
        if self._ended:
            return None
        if self._state is _CONNECTING:
            return self._next_creq if self._reset_due is None else min(self._next_creq, self._reset_due)
        # Asked after every datagram: _detector_deadline() and min() inlined.
        deadline = self._deadline if self._deadline < self._next_ack else self._next_ack
        if self._reset_due is not None:
            deadline = min(deadline, self._reset_due, self._next_creq)
        due = self._det.next_deadline()
        return deadline if due is None or due > deadline else due

    def statistics(self) -> RuReceiverStatistics:
        return RuReceiverStatistics(
            **self._counters.fields(self._det),
            creqs_sent=self._creqs_sent,
            acks_sent=self._acks_sent,
            rsts_rcved=self._rsts_rcved,
            rsts_refuted=self._rsts_refuted,
            client_id=self._client_id,
            connected=self._state is _CONNECTED,
        )
