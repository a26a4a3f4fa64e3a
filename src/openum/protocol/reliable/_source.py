"""What LBT-RM and LBT-RU sources have in common (seed 2.12.1, 6.2, 6.3, 8.10).

A source session numbers its datagrams (from 0, seed 8.11.1), keeps them in the transmission window,
charges them to the rate controller, answers NAKs through the :class:`RepairServer` and sends session
messages while idle.  The wire encodings and the destinations are the concrete classes' business
(:mod:`openum.protocol.reliable.lbtrm`, :mod:`openum.protocol.reliable.lbtru`).
"""

from __future__ import annotations

import abc
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Final

from openum.protocol.reliable._common import (
    NS_PER_MS,
    REFUSED,
    SQN_MASK,
    Address,
    Outgoing,
    SendResult,
    SourceEvent,
    SourceUnblocked,
    new_record,
)
from openum.protocol.reliable._ratelimit import RateController, RateDecision
from openum.protocol.reliable._repair import NcfEntry, RepairServer, SmTimer
from openum.protocol.reliable._stats import Drops
from openum.protocol.reliable._window import TransmissionWindow
from openum.wire._datapath import HeaderTemplate

__all__ = ["SourceBase"]

_UNBLOCKED = SourceUnblocked()
# Read once: an enum member lookup runs Python code in 3.11, and send() runs for every datagram.
_SEND: Final = RateDecision.SEND
_REFUSE: Final = RateDecision.REFUSE
_OWN_DESTINATION: Final[tuple[Address | None, ...]] = (None,)


class SourceBase(abc.ABC):
    """Window, rate control, repair and session-message timing of one source session."""

    __slots__ = (
        "_bytes_sent",
        "_datagram_max_size",
        "_drops",
        "_header_len",
        "_header_prefix",
        "_header_suffix",
        "_lead_sent",
        "_msgs_sent",
        "_nak_pckts_rcved",
        "_ncf_pckts_sent",
        "_pack_header",
        "_queued",
        "_rate",
        "_rctlr_data_msgs",
        "_refused",
        "_repair",
        "_rx_bytes_sent",
        "_rxs_sent",
        "_sends_refused",
        "_sm",
        "_sm_sqn",
        "_sms_sent",
        "_window",
    )

    def __init__(
        self,
        *,
        header_len: int,
        datagram_max_size: int,
        window_size: int,
        window_limit: int,
        ignore_interval_ms: int,
        sm_minimum_interval_ms: int,
        sm_maximum_interval_ms: int,
        rate: RateController,
        header: HeaderTemplate,
    ) -> None:
        self._header_len = header_len
        self._pack_header, self._header_prefix, self._header_suffix = header
        self._datagram_max_size = datagram_max_size
        self._window = TransmissionWindow(
            size_bytes=window_size, limit_bytes=window_limit, header_len=header_len
        )
        self._rate = rate
        self._repair = RepairServer(self._window, rate, ignore_interval_ns=ignore_interval_ms * NS_PER_MS)
        self._sm = SmTimer(sm_minimum_interval_ms * NS_PER_MS, sm_maximum_interval_ms * NS_PER_MS)
        self._sm_sqn = 0
        self._lead_sent = -1  # absolute sqn of the newest datagram actually written
        self._queued: bytes | None = None  # the datagram the rate controller holds for us
        self._refused = False  # a send was refused since the last unblock: owe a SourceUnblocked
        self._drops = Drops()
        self._msgs_sent = 0
        self._bytes_sent = 0
        self._rxs_sent = 0
        self._rx_bytes_sent = 0
        self._nak_pckts_rcved = 0
        self._ncf_pckts_sent = 0
        self._sms_sent = 0
        self._sends_refused = 0
        self._rctlr_data_msgs = 0

    # -- hooks for the concrete transports -----------------------------------------------------------

    def _encode_data(self, sqn: int, payload: bytes | bytearray | memoryview) -> bytes:
        """The DATA datagram carrying ``payload`` as sequence number ``sqn``."""
        header = self._pack_header(
            self._header_prefix, sqn & SQN_MASK, self._window.trail & SQN_MASK, self._header_suffix
        )
        return header + payload

    def _copies(self) -> int:
        """Unicast copies of each new datagram (LBT-RU: the connected clients)."""
        return 1

    @abc.abstractmethod
    def _data_outgoing(self, datagram: bytes) -> tuple[Outgoing, ...]:
        """Where a new DATA datagram goes (one multicast send, or one copy per unicast client)."""

    @abc.abstractmethod
    def _retransmission(self, key: Hashable, datagram: bytes) -> Outgoing | None:
        """The retransmission of ``datagram`` for the NAK from ``key``, or None when it cannot go."""

    @abc.abstractmethod
    def _session_messages(self) -> list[Outgoing]:
        """The session messages (SMs) due now."""

    @abc.abstractmethod
    def _ncf_outgoing(self, key: Hashable, reason: int, sqns: list[int]) -> Outgoing | None:
        """The NCF answering the NAK from ``key`` for ``sqns`` with ``reason``, or None."""

    @abc.abstractmethod
    def _max_ncf_entries(self) -> int:
        """How many sequence numbers one NCF datagram holds."""

    # -- sending ---------------------------------------------------------------------------------------

    @property
    def max_payload(self) -> int:
        """The largest payload one datagram carries (``datagram_max_size`` minus this transport's header)."""
        return self._datagram_max_size - self._header_len

    @property
    def session_message_due(self) -> int | None:
        """When the next session message is due (None before the session's first datagram)."""
        return self._sm.due

    @property
    def next_sqn(self) -> int:
        """The transport sequence number the next datagram gets."""
        return self._window.next & SQN_MASK

    @property
    def trail_sqn(self) -> int:
        """The oldest sequence number still retransmittable."""
        return self._window.trail & SQN_MASK

    @property
    def lead_sqn(self) -> int:
        """The newest sequence number written (``-1 & 0xFFFFFFFF`` before the first)."""
        return self._lead_sent & SQN_MASK

    def send(self, payload: bytes | bytearray | memoryview, now_ns: int) -> SendResult:
        """Send one datagram carrying ``payload`` (LBMC message(s), already framed and batched).

        Returns :data:`REFUSED` (``refused=True``, nothing changed) while the rate controller is
        blocked; raises ``ValueError`` when header plus payload exceed the datagram max size.
        """
        nbytes = self._header_len + len(payload)
        if nbytes > self._datagram_max_size:
            raise ValueError(
                f"datagram of {nbytes} bytes exceeds the datagram max size {self._datagram_max_size}"
            )
        decision = self._rate.offer_data(self, nbytes * self._copies(), now_ns)
        if decision is _REFUSE:
            self._refused = True
            self._sends_refused += 1
            return REFUSED
        # A datagram the rate controller released since the last call goes first.
        released = self._take_released(now_ns) if self._queued is not None else ()
        datagram = self._keep(payload)
        sqn = self._window.next - 1
        if decision is _SEND:
            out = self._transmit(sqn, datagram, now_ns)
            return new_record(SendResult, (released + out if released else out, False, False, sqn & SQN_MASK))
        self._queued = datagram
        self._rctlr_data_msgs += 1
        return new_record(SendResult, (released, True, False, sqn & SQN_MASK))

    def send_direct(self, payload: bytes | bytearray | memoryview, now_ns: int) -> bytes | None:
        """:meth:`send` for the common case, without its records: the datagram carrying ``payload``, to
        be written at once to every destination of :meth:`data_destinations`, when it may go now and
        nothing goes before it.  None, with nothing changed, when :meth:`send` must decide (the rate
        controller would refuse or queue it, a queued datagram comes first, or it is too large)."""
        copies = self._copies()
        nbytes = self._header_len + len(payload)
        if (
            self._queued is not None
            or nbytes > self._datagram_max_size
            or not self._rate.take_data(nbytes * copies, now_ns)
        ):
            return None
        datagram = self._keep(payload)
        self._count_sent(self._window.next - 1, datagram, copies, now_ns)
        return datagram

    def data_destinations(self) -> Iterable[Address | None]:
        """Where :meth:`send_direct`'s datagrams go: None for the session's own destination (LBT-RM's
        group), else the unicast addresses (LBT-RU's clients)."""
        return _OWN_DESTINATION

    def _keep(self, payload: bytes | bytearray | memoryview) -> bytes:
        """The DATA datagram carrying ``payload`` as the next sequence number, kept in the window."""
        window = self._window
        datagram = self._encode_data(window.make_room(len(payload)), payload)
        window.append(datagram)
        return datagram

    def _count_sent(self, sqn: int, datagram: bytes, copies: int, now_ns: int) -> None:
        """``datagram`` (sequence number ``sqn``) goes out now, in ``copies`` copies."""
        self._lead_sent = sqn
        self._msgs_sent += copies
        self._bytes_sent += len(datagram) * copies
        self._sm.activity(now_ns)

    def _transmit(self, sqn: int, datagram: bytes, now_ns: int) -> tuple[Outgoing, ...]:
        out = self._data_outgoing(datagram)
        self._count_sent(sqn, datagram, len(out), now_ns)
        return out

    def _take_released(self, now_ns: int) -> tuple[Outgoing, ...]:
        if self._queued is None or not self._rate.take_release(self, now_ns):
            return ()
        datagram, self._queued = self._queued, None
        return self._transmit(self._lead_sent + 1, datagram, now_ns)

    # -- repair ----------------------------------------------------------------------------------------

    def _service_nak(self, key: Hashable, sqns: Sequence[int], now_ns: int) -> list[Outgoing]:
        self._nak_pckts_rcved += 1
        retransmit, ncfs = self._repair.on_nak(key, sqns, now_ns)
        out = self._retransmissions(retransmit)
        if ncfs:
            out += self._ncfs(ncfs)
        return out

    def _retransmissions(self, which: list[tuple[Hashable, int]]) -> list[Outgoing]:
        out: list[Outgoing] = []
        window = self._window
        for key, sqn in which:
            datagram = window.get(sqn)
            if datagram is None:
                continue
            msg = self._retransmission(key, datagram)
            if msg is not None:
                out.append(msg)
                self._rxs_sent += 1
                self._rx_bytes_sent += len(msg.data)
        return out

    def _ncfs(self, entries: list[NcfEntry]) -> list[Outgoing]:
        groups: dict[tuple[Hashable, int], list[int]] = {}
        for key, reason, wire in entries:
            groups.setdefault((key, reason), []).append(wire)
        out: list[Outgoing] = []
        size = self._max_ncf_entries()
        for (key, reason), sqns in groups.items():
            sqns.sort()
            for i in range(0, len(sqns), size):
                msg = self._ncf_outgoing(key, reason, sqns[i : i + size])
                if msg is not None:
                    out.append(msg)
                    self._ncf_pckts_sent += 1
        return out

    # -- timers ----------------------------------------------------------------------------------------

    def _release_rate(self) -> None:
        """Closing: a datagram still held by the rate controller is dropped (it was never written)."""
        self._rate.discard(self)
        self._queued = None
        self._refused = False

    def _poll_common(self, now_ns: int) -> tuple[list[Outgoing], list[SourceEvent]]:
        out = list(self._take_released(now_ns))
        events: list[SourceEvent] = []
        if self._refused and not self._rate.blocked(now_ns):
            self._refused = False
            events.append(_UNBLOCKED)
        if self._repair.pending:
            out += self._retransmissions(self._repair.poll(now_ns))
        if self._sm.fire(now_ns):
            sms = self._session_messages()
            self._sm_sqn += 1
            self._sms_sent += len(sms)
            out += sms
        return out, events

    def next_deadline(self) -> int | None:
        """When :meth:`poll` should run next (None: nothing scheduled)."""
        if self._queued is None and not self._refused and not self._repair.pending:
            return self._sm.due  # the common case, asked after every datagram: only the next SM
        rate = self._rate
        times: list[int] = []
        if self._sm.due is not None:
            times.append(self._sm.due)
        if self._queued is not None:
            released = rate.release_time(self)
            times.append(rate.next_refresh_ns() if released is None else released)
        if self._refused:
            times.append(rate.next_refresh_ns() if rate.is_blocked else rate.last_release_ns)
        if self._repair.pending:
            times.append(rate.next_refresh_ns())
        return min(times) if times else None

    def _source_fields(self) -> dict[str, Any]:
        repair = self._repair
        return {
            "msgs_sent": self._msgs_sent,
            "bytes_sent": self._bytes_sent,
            "txw_msgs": self._window.msgs,
            "txw_bytes": self._window.payload_bytes,
            "nak_pckts_rcved": self._nak_pckts_rcved,
            "naks_rcved": repair.naks_rcved,
            "naks_ignored": repair.naks_ignored,
            "naks_shed": repair.naks_shed,
            "naks_rx_delay_ignored": repair.naks_rx_delay_ignored,
            "rxs_sent": self._rxs_sent,
            "rx_bytes_sent": self._rx_bytes_sent,
            "ncf_pckts_sent": self._ncf_pckts_sent,
            "ncfs_ignored": repair.ncfs_ignored,
            "ncfs_rx_delay": repair.ncfs_rx_delay,
            "ncfs_shed": repair.ncfs_shed,
            "rctlr_data_msgs": self._rctlr_data_msgs,
            "rctlr_rx_msgs": repair.pending,
            "sends_refused": self._sends_refused,
            "sms_sent": self._sms_sent,
            **self._drops.fields(),
        }
