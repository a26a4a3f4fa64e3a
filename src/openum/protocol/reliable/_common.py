"""What the reliability engines hand back to their drivers: datagrams, payloads and events.

Seed sections: 6.2 (LBT-RU), 6.3 (LBT-RM), 2.11.1 (BOS/EOS), 2.12.1 (WAKEUP after a rate-limited send),
8.10 and 8.11.5-8.11.6 (transport-level loss and session end).  Every engine is sans-I/O: it returns
:class:`Outgoing` datagrams for the transport to write, :class:`Received` payloads to hand to the LBMC
layer above, and small frozen events.

Transport sequence numbers are u32 and wrap (2**32 datagrams is about 12 hours at 100k datagrams per
second), so every comparison between wire sequence numbers is serial-number arithmetic with a window of
2**31 (:func:`sqn_diff`).  Internally the engines count in *absolute* sequence numbers (unbounded Python
ints) and only mask to 32 bits on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

__all__ = [
    "NS_PER_MS",
    "SQN_MASK",
    "Address",
    "EndReason",
    "Outgoing",
    "Received",
    "ReceiverConnected",
    "ReceiverDisconnected",
    "ReceiverEvent",
    "SendResult",
    "SessionActive",
    "SessionEnded",
    "SourceEvent",
    "SourceUnblocked",
    "Unrecovered",
    "UnrecoveredReason",
    "new_record",
    "sqn_diff",
]

NS_PER_MS: Final = 1_000_000
SQN_MASK: Final = 0xFFFF_FFFF
_HALF: Final = 0x8000_0000

#: A UDP endpoint, ``(ip, port)``.
Address = tuple[str, int]


def sqn_diff(a: int, b: int) -> int:
    """``a - b`` for u32 sequence numbers that may have wrapped, in ``[-2**31, 2**31)``."""
    return ((a - b + _HALF) & SQN_MASK) - _HALF


class Outgoing(NamedTuple):
    """One datagram to write.

    ``destination`` ``None`` means the session's multicast group and destination port (LBT-RM DATA,
    SM and NCF); otherwise the unicast address (LBT-RM NAKs to the source's NAK port; every LBT-RU
    datagram).
    """

    data: bytes
    destination: Address | None = None


class Received(NamedTuple):
    """One transport datagram's LBMC payload, to hand upward in arrival order (never a duplicate).

    ``payload`` is a zero-copy slice of the datagram the engine was given: the caller must finish with
    it (or copy it) before reusing its receive buffer.  ``retransmission``: the datagram carried the
    transport's RX flag.  ``transport_sqn`` is never shown to applications (seed 8.11.1).
    """

    payload: memoryview | bytes
    retransmission: bool
    transport_sqn: int


class SendResult(NamedTuple):
    """What :meth:`send` did with one datagram (seed 2.12.1).

    ``outgoing``: datagrams to write now, in order; a datagram the rate controller released since the
    last call comes first.  ``queued``: the datagram was accepted but waits for the rate controller;
    the send *succeeded*.  ``refused``: nothing was accepted because the rate controller is blocked;
    the transport raises ``WouldBlock`` (non-blocking send) or waits for :class:`SourceUnblocked`
    (blocking send) and tries again.  ``sqn``: the transport sequence number given to the datagram.
    """

    outgoing: tuple[Outgoing, ...]
    queued: bool = False
    refused: bool = False
    sqn: int | None = None


#: The single "refused" result (nothing changed, so nothing to say).
REFUSED: Final = SendResult((), refused=True)

#: ``new_record(Outgoing, (data, destination))``: a result record built from all of its fields, on the
#: per-datagram paths.  A NamedTuple's own constructor runs a Python ``__new__`` (interpreted even where
#: the engines are compiled) that only does this.
new_record: Final = tuple.__new__


# --- events ---------------------------------------------------------------------------------------

EndReason = Literal["activity timeout", "connect failed", "reset"]
UnrecoveredReason = Literal["timeout", "window"]


@dataclass(frozen=True, slots=True)
class SessionActive:
    """The first datagram of any kind arrived on the transport session (BOS for every DC, seed 8.11.1).

    ``client_id``: LBT-RU only, the client ID the source assigned (``None`` when not known yet).
    """

    client_id: int | None = None


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """The receiving side of the session is over (EOS for every DC, seed 8.11.6).

    ``reason``: ``"activity timeout"`` (nothing heard for ``*_activity_timeout``), ``"connect failed"``
    (LBT-RU: ``transport_lbtru_maximum_connect_attempts`` unanswered) or ``"reset"`` (LBT-RU: the
    source sent RST).
    """

    reason: EndReason


@dataclass(frozen=True, slots=True)
class Unrecovered:
    """The transport gave up on these datagrams (wire sqns, ascending).

    ``"timeout"``: ``*_nak_generation_interval`` passed without a repair (``unrecovered_tmo``).
    ``"window"``: the source no longer holds them, its trailing edge moved past them or it said "do
    not retry" (``unrecovered_txw``).  This is transport-level information only: the transport cannot
    know which topics the datagrams carried, so the delivery controllers decide what the application
    sees (seed 8.11.5).
    """

    sqns: tuple[int, ...]
    reason: UnrecoveredReason
    #: Datagrams just before ``sqns`` also given up on but not listed (only for a gap of more than
    #: ``MAX_TRACKED_LOSSES`` datagrams: a long outage, or a garbage sequence number).
    unlisted: int = 0


@dataclass(frozen=True, slots=True)
class SourceUnblocked:
    """The rate controller released the queued datagram: a send refused since may be retried
    (deliver ``WAKEUP`` to non-blocking senders, wake blocking ones; seed 2.12.1)."""


@dataclass(frozen=True, slots=True)
class ReceiverConnected:
    """LBT-RU: a receiver (client) connected with a CREQ; ``client_id`` is what the source assigned."""

    address: Address
    client_id: int


@dataclass(frozen=True, slots=True)
class ReceiverDisconnected:
    """LBT-RU: a client was dropped: ``"timeout"`` (silent for ``client_activity_timeout``) or
    ``"closed"`` (the source closed the session)."""

    address: Address
    client_id: int
    reason: Literal["timeout", "closed"]


ReceiverEvent = SessionActive | SessionEnded | Unrecovered
SourceEvent = SourceUnblocked | ReceiverConnected | ReceiverDisconnected
