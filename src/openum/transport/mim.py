"""Multicast immediate messaging (MIM) over LBT-RM: UM Concepts Guide, section 10.8.

A MIM message goes to one well-known multicast group that every MIM-enabled context listens to, over
the LBT-RM protocol, without topic resolution and without a source object (10.8).  On the wire a MIM
transport session *is* an LBT-RM session (``../shared/wire/lbtrm-lbtru-lbttcp-transports.md`` 3): DATA
datagrams to ``group:port``, session messages (SM) while idle, NAKs unicast to the sender's port and
NCFs/retransmissions back to the group.  Each DATA datagram carries LBMC data messages of topic index 0
whose sequence numbers count the session's messages (one per fragment), each with a TOPICNAME header
(none for a topicless message) and whatever headers the caller adds (REQUEST for an immediate request,
10.12).  Wireshark tells MIM apart from other LBT-RM traffic by its destination (``224.10.10.21:14401``,
the ``lbtrm.mim_*`` preferences).

**Sending** (:class:`MimSender`, 10.8.1).  The first send creates the context's *temporary transport
session*: an LBT-RM source engine with a fresh random session id, on a socket bound to the first free
port of ``transport_lbtrm_source_port_low..high`` on the context's interface (the port Wireshark's
heuristic expects NAKs on; when every port of the range is taken, an ephemeral port, logged once).
Messages are batched (implicit batching) and large ones fragmented exactly as a source's are.  The
session is deleted after ``mim_src_deletion_timeout`` without sends; receivers get no EOS (10.8.2), and the
next send creates a new session with a new session id.  Sending never blocks: a message the LBT-RM
rate controller (the context's ``transport_lbtrm_data_rate_limit`` per ``transport_lbtrm_rate_interval``,
shared with the context's LBT-RM sources when the context passes its pool's controller) cannot take now
waits, in order, in the sender and goes out as the budget refreshes; only when :data:`MAX_QUEUED_BYTES`
wait already does a send raise :class:`~openum.WouldBlock`, and no WAKEUP event follows (10.8.2): the
application retries.

**Receiving** (:class:`MimReceiver`, 10.8, "Reception disabled by default").  Reception is on only when
the incoming address (below) is a multicast group.  The receiver binds the incoming port, joins the group
on the context's interface and, on the first datagram of each (sender IP, session id), creates an LBT-RM
receiver engine (NAKs with the ``mim_nak_*`` options) and a delivery controller (``mim_ordered_delivery``:
1 in order with reassembly, -1 arrival order with reassembly, 0 arrival order without reassembly, as
``ordered_delivery`` does for receivers, section 8.8).  At most :data:`MAX_SESSIONS` sessions are tracked;
datagrams of further ones are dropped and counted.  A session silent for ``mim_activity_timeout`` is
forgotten without an EOS; a delivery controller without messages for
``mim_delivery_control_activity_timeout`` (looked at every ``mim_delivery_control_activity_check_interval``)
is deleted, and the session's next message starts a new one.  Unrecoverable loss is reported per session
(``on_loss``), not per topic: UM cannot know which topics the lost data carried (10.8.2).

Addresses: ``mim_address`` (when not None) stands for both ``mim_incoming_address`` and
``mim_outgoing_address``; either of those set explicitly wins over it.  The outgoing address must be a
multicast group: a non-multicast ``mim_address`` (UM shows ``0.0.0.0``) only disables reception and
leaves the outgoing default (224.10.10.21).  Ports: ``mim_incoming_destination_port`` /
``mim_outgoing_destination_port``, None meaning ``mim_destination_port``.

Options read (context scope):

* addresses and ports: ``mim_address``, ``mim_incoming_address``, ``mim_outgoing_address``,
  ``mim_destination_port``, ``mim_incoming_destination_port``, ``mim_outgoing_destination_port``;
* sending: ``mim_src_deletion_timeout``, ``mim_implicit_batching_minimum_length``,
  ``mim_implicit_batching_interval``, ``mim_transmission_window_size``, ``mim_transmission_window_limit``,
  ``mim_ignore_interval``, ``mim_sm_minimum_interval``, ``mim_sm_maximum_interval``;
* receiving: ``mim_ordered_delivery``, ``mim_activity_timeout``, ``mim_nak_initial_backoff_interval``,
  ``mim_nak_backoff_interval``, ``mim_nak_suppress_interval``, ``mim_nak_generation_interval`` (also the
  delivery controllers' loss timer, section 8.11.5), ``mim_send_naks``,
  ``mim_delivery_control_activity_timeout``, ``mim_delivery_control_activity_check_interval``;
* shared with LBT-RM: ``transport_lbtrm_datagram_max_size``, ``transport_lbtrm_source_port_low``,
  ``transport_lbtrm_source_port_high``, ``transport_lbtrm_data_rate_limit``,
  ``transport_lbtrm_retransmit_rate_limit``, ``transport_lbtrm_rate_interval`` (when no rate controller
  is passed in), ``transport_lbtrm_receiver_socket_buffer`` (the MIM group socket's receive buffer),
  ``resolver_multicast_ttl``, ``delivery_control_maximum_total_map_entries``.

Not read (they stay refused): ``mim_tgsz`` (openum sends no FEC, so DATA carries tgsz 0),
``mim_delivery_control_loss_check_interval`` (the delivery controllers' gap timers declare loss),
``mim_delivery_control_order_tablesz`` (a hash-table size), ``mim_sqn_window_size`` and
``mim_sqn_window_increment`` (the LBT-RM engine's receive window does duplicate detection), and
``mim_unrecoverable_loss_function`` (the context's callback, which the context hands in as ``on_loss``).
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openum._errors import ClosedError, ConfigError, SystemCallError, WouldBlock
from openum.config import SourceAttributes
from openum.protocol.delivery import Delivery, DeliveryController, DeliveryKind
from openum.protocol.reliable import (
    Outgoing,
    RateController,
    Received,
    RmReceiver,
    RmReceiverParams,
    SessionActive,
    SessionEnded,
)
from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.transport._engine_timer import EngineTimer
from openum.transport._pool import bind_first_free
from openum.transport._reliable import (
    MAX_DRAIN,
    RECV_SIZE,
    DropHook,
    close_socket,
    loss_hook_from_env,
    set_buffer,
)
from openum.transport._source_session import TopicSender
from openum.transport.lbtrm import RmSourceSession
from openum.wire import WireError
from openum.wire.lbmc import (
    AppHeaderChain,
    FragmentHeader,
    Header,
    LbmcMessage,
    PropertiesBlock,
    PropertiesLengthElement,
    RequestHeader,
    TopicNameHeader,
    decode_message_at,
    decode_properties,
)
from openum.wire.lbtrm import TYPE_DATA, TYPE_NAK, TYPE_NCF, TYPE_SM, RmNcf
from openum.wire.lbtrm import decode as decode_lbtrm

__all__ = [
    "MAX_QUEUED_BYTES",
    "MAX_SESSIONS",
    "MimMessage",
    "MimReceiver",
    "MimSender",
    "mim_incoming",
    "mim_outgoing",
]

#: Most MIM sessions a receiver tracks at once; datagrams of further sessions are dropped and counted.
MAX_SESSIONS: Final = 256
#: A gap of more than this many messages in a MIM session is one burst loss (``delivery_control_maximum_
#: burst_loss``'s default: MIM has no option of its own).
MAXIMUM_BURST_LOSS: Final = 1024
#: Most payload bytes a MIM sender keeps waiting for the rate controller; a send beyond raises WouldBlock
#: (a single message is always taken when nothing waits).
MAX_QUEUED_BYTES: Final = 16 << 20
#: Distinct sessions refused for the limit that are remembered (to count sessions, not datagrams).
_MAX_REFUSED_REMEMBERED: Final = 4096

Address = tuple[str, int]
_SID: Final = struct.Struct(">HI")  # ucast_port, session_id at offset 2 of every LBT-RM header
_KNOWN_TYPES: Final = frozenset({TYPE_DATA, TYPE_SM, TYPE_NCF})
_DATA: Final = DeliveryKind.DATA
_LOSS: Final = DeliveryKind.UNRECOVERABLE_LOSS
_BURST: Final = DeliveryKind.UNRECOVERABLE_LOSS_BURST


# -- options ------------------------------------------------------------------------------------------


def _explicit(attrs: Any, name: str) -> bool:
    is_set = getattr(attrs, "is_set", None)
    return bool(is_set(name)) if is_set is not None else False


def mim_incoming(attrs: Any) -> tuple[str, int]:
    """The group and port MIM is received on (the group may be non-multicast: reception disabled)."""
    group: str = attrs.get("mim_incoming_address")
    common = attrs.get("mim_address")
    if common is not None and not _explicit(attrs, "mim_incoming_address"):
        group = common
    port = attrs.get("mim_incoming_destination_port")
    return str(group), int(attrs.get("mim_destination_port") if port is None else port)


def mim_outgoing(attrs: Any) -> tuple[str, int]:
    """The group and port MIM is sent to (a non-multicast ``mim_address`` leaves the outgoing default)."""
    group: str = attrs.get("mim_outgoing_address")
    common = attrs.get("mim_address")
    if common is not None and not _explicit(attrs, "mim_outgoing_address") and _is_multicast(common):
        group = common
    port = attrs.get("mim_outgoing_destination_port")
    return str(group), int(attrs.get("mim_destination_port") if port is None else port)


def _is_multicast(address: str) -> bool:
    try:
        return ipaddress.IPv4Address(address).is_multicast
    except ValueError:
        return False


def _session_attributes(attrs: Any) -> SourceAttributes:
    """The source options an LBT-RM session reads, given the context's ``mim_*`` values (the LBT-RM
    session code is shared with sources).  Stored as already validated: they were validated as the
    ``mim_*`` options they come from."""
    minimum, maximum = attrs.get("mim_sm_minimum_interval"), attrs.get("mim_sm_maximum_interval")
    if minimum > maximum:
        raise ConfigError(
            f"mim_sm_minimum_interval ({minimum} ms) exceeds mim_sm_maximum_interval ({maximum} ms)",
            option="mim_sm_minimum_interval",
            scope="context",
            value=minimum,
            allowed=f"at most mim_sm_maximum_interval ({maximum})",
        )
    values = {
        "implicit_batching_minimum_length": attrs.get("mim_implicit_batching_minimum_length"),
        "implicit_batching_interval": attrs.get("mim_implicit_batching_interval"),
        "transport_lbtrm_transmission_window_size": attrs.get("mim_transmission_window_size"),
        "transport_lbtrm_transmission_window_limit": attrs.get("mim_transmission_window_limit"),
        "transport_lbtrm_ignore_interval": attrs.get("mim_ignore_interval"),
        "transport_lbtrm_sm_minimum_interval": minimum,
        "transport_lbtrm_sm_maximum_interval": maximum,
        # A MIM session sends no TSNIs: its messages share one sequence, which SMs keep alive.
        "transport_topic_sequence_number_info_interval": 0,
    }
    src = SourceAttributes()
    for name, value in values.items():
        src.set_typed(src.option(name), value, "context option mim_*")
    return src


def _multicast_socket(interface: str, ttl: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, struct.pack("B", ttl))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


# -- sending -----------------------------------------------------------------------------------------


class MimSender:
    """The context's temporary MIM transport session (UM Concepts Guide, section 10.8.1).

    ``attrs``: the context's attributes; ``interface``: the IPv4 address multicast leaves through (the
    context's resolved ``default_interface``, 127.0.0.1 out of the box).  ``rate``/``lock``: the rate
    controller of the context's LBT-RM sessions and the lock guarding it (``RmSessionPool.rate`` and
    ``.lock``), so that MIM shares their ``transport_lbtrm_data_rate_limit``; without them the sender has
    a rate controller of its own built from the same options.  Thread-safe.
    """

    def __init__(
        self,
        loop: EventLoop,
        attrs: Any,
        interface: str,
        log: Any,
        rng: random.Random,
        *,
        rate: RateController | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.loop = loop
        self.attrs = attrs
        self.interface = interface
        self.log = log
        self.rng = rng
        self.group, self.port = mim_outgoing(attrs)
        if not _is_multicast(self.group):
            raise ConfigError(
                f"mim_outgoing_address {self.group} is not a multicast group",
                option="mim_outgoing_address",
                scope="context",
                value=self.group,
                allowed="224.0.0.0-239.255.255.255",
            )
        self._session_attrs = _session_attributes(attrs)
        self._deletion_ms: int = attrs.get("mim_src_deletion_timeout")
        self._ttl: int = attrs.get("resolver_multicast_ttl")
        self.rate = rate or RateController.from_options(attrs.get, "lbtrm", now_ns=loop.clock.now_ns())
        self._engine_lock = lock or threading.Lock()
        self._lock = threading.Lock()  # the session's life (created, deleted) and the waiting messages
        self._session: RmSourceSession | None = None
        self._topic = TopicSender()  # topic index 0: the session's one message sequence
        self._last_send_ns = 0
        self._deletion_timer: int | None = None
        self._closed = False
        self._warned_ephemeral = False
        self._totals: dict[str, int] = dict.fromkeys(_SENDER_SESSION_COUNTERS, 0)
        self._sessions_created = 0
        self._sessions_deleted = 0
        self._would_block = 0
        # Messages the rate controller held back, in order: (headers, payload, properties, flush).
        self._queue: deque[tuple[tuple[Header, ...], bytes, PropertiesBlock | None, bool]] = deque()
        self._queued_bytes = 0
        self._drain_timer: int | None = None

    # -- the session ---------------------------------------------------------------------------------
    @property
    def session_id(self) -> int | None:
        """The current session's id (None while there is none)."""
        session = self._session
        return None if session is None else session.session_id

    @property
    def source_port(self) -> int | None:
        """The current session's port (its NAK port), or None."""
        session = self._session
        return None if session is None else session.port

    def _create(self) -> RmSourceSession:
        low: int = self.attrs.get("transport_lbtrm_source_port_low")
        high: int = self.attrs.get("transport_lbtrm_source_port_high")

        def open_port(port: int) -> socket.socket:
            sock = _multicast_socket(self.interface, self._ttl)
            try:
                sock.bind((self.interface, port))
            except OSError:
                sock.close()
                raise
            return sock

        what = f"MIM transport session on {self.interface}"
        try:
            sock = bind_first_free(
                range(low, high + 1), open_port, what, "transport_lbtrm_source_port_low/high"
            )
        except SystemCallError as exc:
            if not self._warned_ephemeral:
                self._warned_ephemeral = True
                self.log.warning(
                    "%s; MIM uses an ephemeral port instead (Wireshark may not decode its NAKs)", exc
                )
            try:
                sock = open_port(0)
            except OSError as err:
                raise SystemCallError(f"{what}: cannot bind a port: {err.strerror or err}") from err
        session = RmSourceSession(
            self.loop,
            self.log,
            self._session_attrs,
            self.attrs,
            self.group,
            self.port,
            sock,
            self.rng.randrange(1, 1 << 32),
            self.rate,
            self._engine_lock,
        )
        session.open_group_socket(self.interface, self._ttl)
        session.start()
        self._topic.topic_index = 0
        self._topic._next_sqn = 0
        self._topic._last_send_ns = None
        self._sessions_created += 1
        self._deletion_timer = self.loop.schedule_timer(self._deletion_ms, self._check_idle, session)
        self.log.debug("MIM: %s created (session id %08x)", session.label, session.session_id)
        return session

    def _check_idle(self, session: RmSourceSession) -> None:
        """The deletion timer (10.8.1): delete the session after ``mim_src_deletion_timeout`` idle (and
        once nothing of it waits for the rate controller)."""
        with self._lock:
            if self._session is not session:
                return
            idle_ns = self.loop.clock.now_ns() - self._last_send_ns
            remaining_ms = self._deletion_ms - idle_ns / NS_PER_MS
            if remaining_ms <= 0 and (self._queue or session.statistics().backlog):
                remaining_ms = max(1.0, self._rate_delay_ms())
            if remaining_ms > 0:
                self._deletion_timer = self.loop.schedule_timer(remaining_ms, self._check_idle, session)
                return
            self._deletion_timer = None
            self._delete_locked()
            self.log.debug("MIM: %s deleted after %d ms without sends", session.label, self._deletion_ms)

    def _delete_locked(self) -> None:
        """Close the session (no EOS: receivers time out, 10.8.2) and keep its counters."""
        session, self._session = self._session, None
        if session is None:
            return
        timers = (self._deletion_timer, self._drain_timer)
        self._deletion_timer = self._drain_timer = None
        session.close()
        for timer in timers:
            if timer is not None:
                try:
                    self.loop.cancel_timer(timer)
                except Exception:  # the loop may be closed already
                    pass
        for name, value in _session_counters(session).items():
            self._totals[name] += value
        self._sessions_deleted += 1

    # -- sending -------------------------------------------------------------------------------------
    def send(
        self,
        topic: str | None,
        payload: bytes | bytearray | memoryview,
        headers: tuple[Header, ...] = (),
        properties: PropertiesBlock | None = None,
        *,
        flush: bool = False,
    ) -> None:
        """Send one multicast immediate message (``topic`` None: topicless) with extension ``headers``
        (e.g. a :class:`~openum.wire.lbmc.RequestHeader`) and message ``properties``.

        The message is batched (``mim_implicit_batching_minimum_length`` / ``_interval``) unless
        ``flush``.  Never blocks: while the LBT-RM rate controller holds the session back, messages wait
        in order in the sender (a copy of each) and go out as the budget refreshes.  Raises
        :class:`~openum.WouldBlock` when :data:`MAX_QUEUED_BYTES` wait already (retry later: no WAKEUP
        event follows for MIM, 10.8.2), :class:`~openum.ClosedError` after :meth:`close`, ``ValueError``
        for a topic name that does not fit a TOPICNAME header.
        """
        all_headers = headers
        if topic is not None:
            try:
                all_headers = (TopicNameHeader(topic), *headers)
            except WireError as exc:
                raise ValueError(f"MIM topic {topic!r}: {exc}") from None
        with self._lock:
            if self._closed:
                raise ClosedError("the context's MIM sender is closed")
            session = self._session
            if session is None:
                session = self._session = self._create()
            self._last_send_ns = self.loop.clock.now_ns()
            if not self._queue:
                try:
                    self._send_now(session, all_headers, payload, properties, flush)
                    return
                except WouldBlock:
                    pass  # the rate controller holds the session back: the message waits
            queued = self._queued_bytes
            if queued and queued + len(payload) > MAX_QUEUED_BYTES:
                self._would_block += 1
                raise WouldBlock(
                    f"MIM: {queued} bytes already wait for the LBT-RM rate controller "
                    f"(transport_lbtrm_data_rate_limit per transport_lbtrm_rate_interval); retry the send "
                    f"later (MIM delivers no WAKEUP event, UM Concepts Guide 10.8.2)"
                )
            self._queue.append((all_headers, bytes(payload), properties, flush))
            self._queued_bytes = queued + len(payload)
            if self._drain_timer is None:
                self._drain_timer = self.loop.schedule_timer(self._rate_delay_ms(), self._drain)

    def _send_now(
        self,
        session: RmSourceSession,
        headers: tuple[Header, ...],
        payload: bytes | bytearray | memoryview,
        properties: PropertiesBlock | None,
        flush: bool,
    ) -> None:
        """One message into the session, non-blocking (WouldBlock: nothing was taken)."""
        if headers:
            session.send_with_headers(self._topic, payload, headers, flush, True, properties)
        else:
            session.send(self._topic, payload, flush, True, False, properties)

    def _rate_delay_ms(self) -> float:
        """How long until the rate controller's next interval (when waiting messages may go)."""
        return max(0.2, (self.rate.next_refresh_ns() - self.loop.clock.now_ns()) / NS_PER_MS)

    def _drain(self, _clientd: Any) -> None:
        """Send the waiting messages the rate controller takes now (context thread)."""
        with self._lock:
            self._drain_timer = None
            session = self._session
            if session is None:
                return
            self._drain_locked(session)
            if self._queue:
                self._drain_timer = self.loop.schedule_timer(self._rate_delay_ms(), self._drain)

    def _drain_locked(self, session: RmSourceSession) -> None:
        queue = self._queue
        while queue:
            headers, payload, properties, flush = queue[0]
            try:
                self._send_now(session, headers, payload, properties, flush)
            except WouldBlock:
                return
            queue.popleft()
            self._queued_bytes -= len(payload)

    def flush(self) -> None:
        """Send what is batched now (messages waiting for the rate controller go as it allows)."""
        with self._lock:
            if self._session is not None:
                self._session.flush()

    # -- statistics and closing ----------------------------------------------------------------------
    def statistics(self) -> dict[str, int]:
        """Counters over every session this sender had (the current one included).

        ``msgs_sent``/``bytes_sent``: application messages and payload bytes handed to the session;
        ``datagrams_sent``: DATA datagrams (batches); ``fragments_sent``;
        ``sessions_created``/``sessions_deleted``; ``naks_rcved`` (sequence numbers NAKed),
        ``nak_pckts_rcved``, ``retransmissions_sent``, ``rx_bytes_sent``, ``ncf_pckts_sent``,
        ``naks_ignored``, ``naks_shed``, ``sms_sent``; ``queued``/``queued_bytes`` (messages waiting in
        the sender for the rate controller now), ``would_block`` (sends refused with WouldBlock),
        ``send_buffer_full`` (datagrams the socket refused: repaired by NAKs);
        ``dgrams_dropped_malformed`` (garbage on the NAK port); ``txw_msgs``/``txw_bytes`` (the current
        transmission window); ``session_id`` (the current session's id, 0 without one).
        """
        with self._lock:
            totals = dict(self._totals)
            session = self._session
            current = {} if session is None else _session_counters(session)
            out = {name: totals[name] + current.get(name, 0) for name in _SENDER_SESSION_COUNTERS}
            window = None if session is None else session.statistics().transport
            out.update(
                sessions_created=self._sessions_created,
                sessions_deleted=self._sessions_deleted,
                queued=len(self._queue),
                queued_bytes=self._queued_bytes,
                would_block=self._would_block,
                txw_msgs=0 if window is None else window.txw_msgs,
                txw_bytes=0 if window is None else window.txw_bytes,
                session_id=0 if session is None else session.session_id,
            )
            return out

    def close(self) -> None:
        """Send what the rate controller takes now, then delete the session (receivers get no EOS; what
        still waits is dropped and logged); later sends raise ClosedError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            session = self._session
            if session is not None:
                self._drain_locked(session)
            if self._queue:
                self.log.warning(
                    "MIM sender closed with %d message(s) still waiting for the LBT-RM rate controller; "
                    "they were not sent",
                    len(self._queue),
                )
                self._queue.clear()
                self._queued_bytes = 0
            self._delete_locked()


_SENDER_SESSION_COUNTERS: Final = (
    "msgs_sent",
    "bytes_sent",
    "datagrams_sent",
    "fragments_sent",
    "send_buffer_full",
    "naks_rcved",
    "nak_pckts_rcved",
    "naks_ignored",
    "naks_shed",
    "retransmissions_sent",
    "rx_bytes_sent",
    "ncf_pckts_sent",
    "sms_sent",
    "dgrams_dropped_malformed",
)


def _session_counters(session: RmSourceSession) -> dict[str, int]:
    s = session.statistics()
    t = s.transport
    return {
        "msgs_sent": s.msgs_sent,
        "bytes_sent": s.bytes_sent,
        "datagrams_sent": s.datagrams_sent,
        "fragments_sent": s.fragments_sent,
        "send_buffer_full": s.send_buffer_full,
        "naks_rcved": t.naks_rcved,
        "nak_pckts_rcved": t.nak_pckts_rcved,
        "naks_ignored": t.naks_ignored,
        "naks_shed": t.naks_shed,
        "retransmissions_sent": t.rxs_sent,
        "rx_bytes_sent": t.rx_bytes_sent,
        "ncf_pckts_sent": t.ncf_pckts_sent,
        "sms_sent": t.sms_sent,
        "dgrams_dropped_malformed": t.dgrams_dropped_size
        + t.dgrams_dropped_type
        + t.dgrams_dropped_version
        + t.dgrams_dropped_hdr
        + t.dgrams_dropped_sid
        + t.dgrams_dropped_other,
    }


# -- receiving ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MimMessage:
    """One multicast immediate message, as a :class:`MimReceiver` delivers it.

    ``topic``: from the TOPICNAME header (None: topicless).  ``payload``: the whole message (reassembled
    when it was fragmented; with ``mim_ordered_delivery`` 0 each fragment is its own message); a
    ``memoryview`` into the receive buffer is valid only during the ``on_message`` call: copy it
    (``bytes(msg.payload)``) to keep it.  ``properties``: the message properties (``{name: value}``) or
    None.  ``request``: the REQUEST header of an immediate request (section 10.12), else None.
    ``source``: the sender's MIM session as a source string
    (``LBTRM:ip:port:session_id:group:dest_port``, the session id in hex).  ``sequence_number``: the
    message's sequence number in that session (a reassembled message's last fragment's, section 8.11.3).
    ``headers``: the extension headers as sent, without TOPICNAME, without FRAG (kept with
    ``mim_ordered_delivery`` 0, where it tells a fragment) and without the properties-length element
    the encoder adds; REQUEST stays.
    """

    topic: str | None
    payload: bytes | memoryview
    properties: dict[str, Any] | None
    request: RequestHeader | None
    source: str
    sequence_number: int
    headers: tuple[Header, ...]


@dataclass(frozen=True, slots=True)
class _Meta:
    """What the delivery controller carries through for a message (its ``properties`` slot)."""

    topic: str | None
    headers: tuple[Header, ...]
    properties: dict[str, Any] | None
    request: RequestHeader | None
    properties_length: int | None  # fragments: the properties block at the whole message's tail


class _MimSession:
    """This context's reception of one sender's MIM session (context thread only)."""

    __slots__ = ("dc", "engine", "key", "last_message_ns", "owner", "sender", "source", "timer")

    def __init__(self, owner: MimReceiver, key: tuple[str, int], nak_port: int, now: int) -> None:
        self.owner = owner
        self.key = key
        self.sender: Address = (key[0], nak_port)
        self.source = f"LBTRM:{key[0]}:{nak_port}:{key[1]:08x}:{owner.group}:{owner.port}"
        self.engine = RmReceiver(
            session_id=key[1], source=self.sender, params=owner.params, rng=owner.rng, now_ns=now
        )
        self.dc: DeliveryController | None = None
        self.last_message_ns = now
        self.timer = EngineTimer(owner.loop, self._poll, self._deadline)

    def _deadline(self) -> int | None:
        due = self.engine.next_deadline()
        dc = self.dc
        if dc is not None:
            loss = dc.next_deadline()
            if loss is not None and (due is None or loss < due):
                due = loss
        return due

    def datagram(self, data: memoryview, sender: Address, now: int) -> None:
        engine = self.engine
        start = engine.data_in_order(data, sender, now)
        if start >= 0:
            self.owner._messages(self, data[start:], now)
        else:
            received, outgoing, events = engine.datagram_received(data, sender, now)
            if outgoing:
                self.owner._send(outgoing)
            if events:
                self._events(events, now)
            if received:
                self._received(received, now)
        if self.owner._sessions.get(self.key) is self:
            self.timer.reschedule()

    def _received(self, received: Sequence[Received], now: int) -> None:
        for item in received:
            got = item.payload
            self.owner._messages(self, got if isinstance(got, memoryview) else memoryview(got), now)

    def _events(self, events: Sequence[Any], now: int) -> None:
        for event in events:
            if isinstance(event, SessionEnded):
                self.end(now)
            elif isinstance(event, SessionActive):
                self.owner._count["sessions_created"] += 1

    def _poll(self) -> None:
        if self.owner._sessions.get(self.key) is not self:
            return
        now = self.owner.loop.clock.now_ns()
        outgoing, events = self.engine.poll(now)
        if outgoing:
            self.owner._send(outgoing)
        self._events(events, now)
        if self.owner._sessions.get(self.key) is not self:
            return
        released = self.engine.take_released()  # held for head loss the timers gave up on
        if released:
            self._received(released, now)
        if self.dc is not None:
            self.owner._deliver(self, self.dc.on_timer(now))
        self.timer.reschedule()

    def end(self, now: int) -> None:
        """The session is over (activity timeout, or the receiver closes): what the delivery controller
        still holds is delivered and its gaps reported lost, but no EOS (10.8.2)."""
        owner = self.owner
        if owner._sessions.get(self.key) is not self:
            return
        del owner._sessions[self.key]
        self.timer.cancel()
        self.retire_dc(now)
        owner._retired(self)

    def retire_dc(self, now: int) -> None:
        dc, self.dc = self.dc, None
        if dc is not None:
            self.owner._deliver(self, dc.end(now))
            self.owner._count["delivery_controllers_deleted"] += 1


class MimReceiver:
    """The context's MIM reception (UM Concepts Guide, section 10.8).

    Enabled only when the incoming address (``mim_incoming_address``, or ``mim_address``) is a multicast
    group: UM 6.8 and later disable reception by default, and the option table's default incoming
    address, ``0.0.0.0``, means exactly that.  A disabled receiver opens no socket and delivers nothing
    (:attr:`enabled` is False).  ``on_message(msg)`` gets each :class:`MimMessage`; ``on_loss(source,
    sqn)`` each unrecoverable loss of a session (one call per lost message; a burst, more than
    :data:`MAXIMUM_BURST_LOSS` at once, one call with its last sequence number); both on the context
    thread.  ``drop``: test-only receive loss (see :func:`~openum.transport._reliable.loss_hook_from_env`;
    by default ``OPENUM_TEST_DROP``).
    """

    def __init__(
        self,
        loop: EventLoop,
        attrs: Any,
        interface: str,
        on_message: Callable[[MimMessage], None],
        on_loss: Callable[[str, int], None],
        log: Any,
        rng: random.Random,
        *,
        drop: DropHook | None = None,
    ) -> None:
        self.loop = loop
        self.log = log
        self.rng = rng
        self.interface = interface
        self.on_message = on_message
        self.on_loss = on_loss
        self.group, self.port = mim_incoming(attrs)
        self.enabled = _is_multicast(self.group)
        self.params = RmReceiverParams(
            nak_initial_backoff_interval=int(attrs.get("mim_nak_initial_backoff_interval")),
            nak_backoff_interval=int(attrs.get("mim_nak_backoff_interval")),
            nak_suppress_interval=int(attrs.get("mim_nak_suppress_interval")),
            nak_generation_interval=int(attrs.get("mim_nak_generation_interval")),
            activity_timeout=int(attrs.get("mim_activity_timeout")),
            preactivity_timeout=0,
            send_naks=bool(attrs.get("mim_send_naks")),
            datagram_max_size=int(attrs.get("transport_lbtrm_datagram_max_size")),
        )
        self._ordered: int = attrs.get("mim_ordered_delivery")
        self._loss_timeout_ns = int(attrs.get("mim_nak_generation_interval")) * NS_PER_MS
        self._map_entries: int = attrs.get("delivery_control_maximum_total_map_entries")
        self._dc_timeout_ns = int(attrs.get("mim_delivery_control_activity_timeout")) * NS_PER_MS
        self._dc_check_ms: int = attrs.get("mim_delivery_control_activity_check_interval")
        self._rcvbuf: int = attrs.get("transport_lbtrm_receiver_socket_buffer")
        self._drop = drop if drop is not None else loss_hook_from_env()
        self._sessions: dict[tuple[str, int], _MimSession] = {}
        self._refused: set[tuple[str, int]] = set()
        self._count: dict[str, int] = dict.fromkeys(_RECEIVER_COUNTERS, 0)
        self._ended: dict[str, int] = dict.fromkeys(_ENGINE_COUNTERS, 0)  # engines of ended sessions
        self._buf = bytearray(RECV_SIZE)
        self._view = memoryview(self._buf)
        self._sock: socket.socket | None = None
        self._nak_sock: socket.socket | None = None
        self._check_timer: int | None = None
        self._closed = False
        if self.enabled:
            self._open()

    def _open(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            set_buffer(sock, socket.SO_RCVBUF, self._rcvbuf, self.log, f"MIM group {self.group}:{self.port}")
            sock.bind((self.group, self.port))
            membership = socket.inet_aton(self.group) + socket.inet_aton(self.interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
            sock.setblocking(False)
            nak = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError as exc:
            sock.close()
            raise SystemCallError(
                f"MIM reception on {self.group}:{self.port} via {self.interface}: {exc.strerror or exc} "
                f"(mim_incoming_address / mim_incoming_destination_port)"
            ) from exc
        try:
            nak.bind((self.interface, 0))
            nak.setblocking(False)
        except OSError as exc:
            sock.close()
            nak.close()
            raise SystemCallError(f"MIM: cannot bind a NAK socket on {self.interface}: {exc}") from exc
        self._sock, self._nak_sock = sock, nak
        self.loop.register_fd(sock.fileno(), FdEvent.READ, self._readable, None)
        self._check_timer = self.loop.schedule_timer(self._dc_check_ms, self._check_activity)

    # -- input ---------------------------------------------------------------------------------------
    def _readable(self, _fd: int, _events: FdEvent, _clientd: Any) -> None:
        sock = self._sock
        if sock is None:
            return
        count = self._count
        view = self._view
        drop = self._drop
        sessions = self._sessions
        now = self.loop.clock.now_ns()
        for _ in range(MAX_DRAIN):
            if self._closed:  # a callback closed the receiver
                break
            try:
                size, addr = sock.recvfrom_into(self._buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self.log.debug("MIM: receive error: %s", exc)
                break
            count["dgrams_rcved"] += 1
            data = view[:size]
            if drop is not None and drop(data):
                count["dgrams_dropped_test_hook"] += 1
                continue
            if size < 8 or data[0] & 0xF0:
                count["dgrams_dropped_malformed"] += 1
                continue
            kind = data[0] & 0x0F
            if kind not in _KNOWN_TYPES:
                # NAKs are unicast to the sender; a NAK on the group is someone else's business.
                count["dgrams_dropped_type" if kind == TYPE_NAK else "dgrams_dropped_malformed"] += 1
                continue
            nak_port, sid = _SID.unpack_from(data, 2)
            key = (addr[0], sid)
            session = sessions.get(key)
            if session is None:
                session = self._new_session(key, nak_port, data, now)
                if session is None:
                    continue
            session.datagram(data, (addr[0], addr[1]), now)

    def _new_session(
        self, key: tuple[str, int], nak_port: int, data: memoryview, now: int
    ) -> _MimSession | None:
        count = self._count
        try:
            record = decode_lbtrm(data)
        except WireError:
            count["dgrams_dropped_malformed"] += 1
            return None
        if isinstance(record, RmNcf) or key[1] == 0:
            count["dgrams_dropped_unknown"] += 1  # an NCF answers a NAK: no session starts with one
            return None
        if len(self._sessions) >= MAX_SESSIONS:
            count["sessions_dropped_limit"] += 1
            if key not in self._refused:
                if len(self._refused) >= _MAX_REFUSED_REMEMBERED:
                    self._refused.clear()
                self._refused.add(key)
                count["sessions_refused_limit"] += 1
                self.log.warning(
                    "MIM: %d sessions are active; session %08x from %s is ignored",
                    MAX_SESSIONS,
                    key[1],
                    key[0],
                )
            return None
        session = _MimSession(self, key, nak_port, now)
        self._sessions[key] = session
        return session

    def _messages(self, session: _MimSession, payload: memoryview, now: int) -> None:
        """The LBMC messages of one DATA datagram of ``session``, through its delivery controller."""
        count = self._count
        offset = 0
        end = len(payload)
        session.last_message_ns = now
        while offset < end and not self._closed:
            try:
                msg, offset = decode_message_at(payload, offset)
            except WireError:
                count["dgrams_dropped_malformed"] += 1  # the rest of the datagram is lost to the gap timer
                return
            if not msg.is_data:
                count["control_msgs_ignored"] += 1
                continue
            meta, fragment = _meta(msg, self._ordered)
            dc = session.dc
            if dc is None:
                dc = session.dc = DeliveryController(
                    ordered=self._ordered,
                    loss_timeout_ns=self._loss_timeout_ns,
                    maximum_burst_loss=MAXIMUM_BURST_LOSS,
                    maximum_map_entries=self._map_entries,
                )
            body = msg.payload
            if isinstance(body, bytearray):
                body = bytes(body)
            self._deliver(session, dc.on_message(msg.sqn, body, now, fragment=fragment, properties=meta))

    def _deliver(self, session: _MimSession, deliveries: Sequence[Delivery]) -> None:
        count = self._count
        for d in deliveries:
            kind = d.kind
            if kind is _DATA:
                meta = d.properties
                assert isinstance(meta, _Meta)
                payload = d.payload
                properties = meta.properties
                if meta.properties_length is not None and d.fragment is None:
                    payload, properties = _split_properties(payload, meta.properties_length)
                count["msgs_rcved"] += 1
                count["bytes_rcved"] += len(payload)
                message = MimMessage(
                    meta.topic, payload, properties, meta.request, session.source, d.sqn, meta.headers
                )
                try:
                    self.on_message(message)
                except Exception:
                    self.log.exception("MIM: the message callback raised (message from %s)", session.source)
            elif kind is _LOSS or kind is _BURST:
                if kind is _BURST:
                    count["unrecoverable_loss_bursts"] += 1
                    count["unrecoverable_loss"] += ((d.sqn - (d.first_sqn or d.sqn)) & 0xFFFFFFFF) + 1
                else:
                    count["unrecoverable_loss"] += 1
                try:
                    self.on_loss(session.source, d.sqn)
                except Exception:
                    self.log.exception("MIM: the unrecoverable-loss callback raised (%s)", session.source)
            # BOS and EOS are not delivered for MIM (10.8.2)

    def _send(self, outgoing: Sequence[Outgoing]) -> None:
        sock = self._nak_sock
        if sock is None:
            return
        for out in outgoing:
            if out.destination is None:
                continue
            try:
                sock.sendto(out.data, out.destination)
            except OSError as exc:
                self.log.debug("MIM: sending a NAK to %s:%d failed: %s", *out.destination, exc)

    def _retired(self, session: _MimSession) -> None:
        stats = session.engine.statistics()
        for name in _ENGINE_COUNTERS:
            self._ended[name] += getattr(stats, name)
        self._count["sessions_ended"] += 1

    def _check_activity(self, _clientd: Any) -> None:
        """Delete delivery controllers idle for ``mim_delivery_control_activity_timeout`` (the next
        message of their session starts a new one), every ``..._activity_check_interval``."""
        self._check_timer = None
        if self._closed:
            return
        now = self.loop.clock.now_ns()
        for session in list(self._sessions.values()):
            if session.dc is not None and now - session.last_message_ns >= self._dc_timeout_ns:
                session.retire_dc(now)
        self._check_timer = self.loop.schedule_timer(self._dc_check_ms, self._check_activity)

    # -- statistics and closing ----------------------------------------------------------------------
    def statistics(self) -> dict[str, int]:
        """Counters of MIM reception (all 0 while reception is disabled).

        ``dgrams_rcved``: datagrams read; ``msgs_rcved``/``bytes_rcved``: messages delivered and their
        payload bytes; ``sessions_active``, ``sessions_created`` (sessions heard), ``sessions_ended``
        (forgotten after ``mim_activity_timeout``); ``sessions_dropped_limit`` (datagrams of new sessions
        dropped because :data:`MAX_SESSIONS` were active) and ``sessions_refused_limit`` (such sessions);
        ``dgrams_dropped_malformed`` (not LBT-RM, or LBMC that does not decode: the rest of that datagram
        is dropped), ``dgrams_dropped_type`` (NAKs on the group), ``dgrams_dropped_unknown`` (an NCF of a
        session not heard before), ``dgrams_dropped_test_hook``; ``naks_sent``, ``nak_pckts_sent``,
        ``rxs_rcved``, ``sms_rcved``, ``duplicate_data``, ``unrecovered_txw``, ``unrecovered_tmo``,
        ``dgrams_dropped_sid`` (a session's datagram naming another NAK port) from the LBT-RM engines;
        ``unrecoverable_loss`` (messages lost), ``unrecoverable_loss_bursts``; ``control_msgs_ignored``;
        ``delivery_controllers_deleted``.  A snapshot that may be taken from any thread (not atomic
        across counters while the context thread receives).
        """
        out = dict(self._count)
        engines = dict(self._ended)
        for session in list(self._sessions.values()):
            stats = session.engine.statistics()
            for name in _ENGINE_COUNTERS:
                engines[name] += getattr(stats, name)
        malformed = sum(engines.pop(name) for name in _ENGINE_DROPS)
        out["dgrams_dropped_malformed"] += malformed
        out.update(engines)
        out["sessions_active"] = len(self._sessions)
        return out

    def close(self) -> None:
        """Stop receiving: sockets closed, sessions forgotten (what their delivery controllers hold is
        delivered and their gaps reported lost; no EOS).  Call it on the context thread (or once the
        loop has stopped): it may call ``on_message`` and ``on_loss``."""
        if self._closed:
            return
        self._closed = True
        now = self.loop.clock.now_ns()
        for session in list(self._sessions.values()):
            session.end(now)
        if self._check_timer is not None:
            try:
                self.loop.cancel_timer(self._check_timer)
            except Exception:  # the loop may be closed already
                pass
            self._check_timer = None
        if self._sock is not None:
            close_socket(self.loop, self._sock)
            self._sock = None
        if self._nak_sock is not None:
            self._nak_sock.close()
            self._nak_sock = None


_RECEIVER_COUNTERS: Final = (
    "dgrams_rcved",
    "msgs_rcved",
    "bytes_rcved",
    "sessions_created",
    "sessions_ended",
    "sessions_dropped_limit",
    "sessions_refused_limit",
    "dgrams_dropped_malformed",
    "dgrams_dropped_type",
    "dgrams_dropped_unknown",
    "dgrams_dropped_test_hook",
    "unrecoverable_loss",
    "unrecoverable_loss_bursts",
    "control_msgs_ignored",
    "delivery_controllers_deleted",
)
#: Engine counters summed into the receiver's statistics (the drops into ``dgrams_dropped_malformed``).
_ENGINE_DROPS: Final = ("dgrams_dropped_size", "dgrams_dropped_version", "dgrams_dropped_hdr")
_ENGINE_COUNTERS: Final = (
    "naks_sent",
    "nak_pckts_sent",
    "rxs_rcved",
    "sms_rcved",
    "duplicate_data",
    "unrecovered_txw",
    "unrecovered_tmo",
    "dgrams_dropped_sid",
    *_ENGINE_DROPS,
)


def _meta(msg: LbmcMessage, ordered: int) -> tuple[_Meta, tuple[int, int, int] | None]:
    """A data message's topic, headers, properties and request, and its fragment fields."""
    topic: str | None = None
    request: RequestHeader | None = None
    fragment: tuple[int, int, int] | None = None
    properties_length: int | None = None
    kept: list[Header] = []
    for header in msg.headers:
        if isinstance(header, TopicNameHeader):
            if topic is None:
                topic = header.topic
                continue
        elif isinstance(header, FragmentHeader):
            if fragment is None:
                fragment = (header.first_sqn, header.offset, header.total_length)
            if ordered != 0:
                continue
        elif isinstance(header, AppHeaderChain):
            elements = tuple(e for e in header.elements if not isinstance(e, PropertiesLengthElement))
            if len(elements) != len(header.elements):
                for element in header.elements:
                    if isinstance(element, PropertiesLengthElement) and properties_length is None:
                        properties_length = element.length
                if elements:
                    kept.append(AppHeaderChain(elements, header.res))
                continue
        elif isinstance(header, RequestHeader) and request is None:
            request = header
        kept.append(header)
    block = msg.properties
    properties = None if block is None else block.to_dict()
    return _Meta(topic, tuple(kept), properties, request, properties_length), fragment


def _split_properties(
    whole: bytes | memoryview, length: int
) -> tuple[bytes | memoryview, dict[str, Any] | None]:
    """A reassembled message whose last ``length`` bytes are its properties block."""
    if length <= 0 or length > len(whole):
        return whole, None
    try:
        props = decode_properties(whole[len(whole) - length :]).to_dict()
    except WireError:
        return whole, None
    return whole[: len(whole) - length], props
