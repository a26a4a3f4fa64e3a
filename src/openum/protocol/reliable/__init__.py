"""Sans-I/O reliability engines of the LBT-RM and LBT-RU transports (seed 2.12.1, 6.2, 6.3, 8.10).

* :class:`RmSource` / :class:`RmReceiver`: LBT-RM (reliable multicast);
* :class:`RuSource` / :class:`RuReceiver`: LBT-RU (reliable unicast, with its CREQ/SYN handshake);
* :class:`RateController`: the transport rate controller (data and retransmit budgets per interval,
  queue-one-then-block, seed 2.12.1), possibly shared by the sessions of a context.

They never touch sockets, clocks or global randomness: every call takes ``now_ns`` (and receivers a
``random.Random``-like :class:`~openum.protocol._rng.Rng`), returns :class:`Outgoing` datagrams to
write, :class:`Received` payloads to hand upward and frozen events, and ``next_deadline()`` says when
to call ``poll`` next.  LBMC payloads are opaque bytes here.
"""

from openum.protocol.reliable._common import (
    REFUSED,
    SQN_MASK,
    Address,
    EndReason,
    Outgoing,
    Received,
    ReceiverConnected,
    ReceiverDisconnected,
    ReceiverEvent,
    SendResult,
    SessionActive,
    SessionEnded,
    SourceEvent,
    SourceUnblocked,
    Unrecovered,
    UnrecoveredReason,
    sqn_diff,
)
from openum.protocol.reliable._nak import MAX_TRACKED_LOSSES
from openum.protocol.reliable._ratelimit import RateController, RateControllerStatistics, RateDecision
from openum.protocol.reliable._stats import (
    RmReceiverStatistics,
    RmSourceStatistics,
    RuReceiverStatistics,
    RuSourceStatistics,
)
from openum.protocol.reliable.lbtrm import RmReceiver, RmReceiverParams, RmSource, RmSourceParams
from openum.protocol.reliable.lbtru import (
    RuReceiver,
    RuReceiverParams,
    RuReceiverState,
    RuSource,
    RuSourceParams,
)

__all__ = [
    "MAX_TRACKED_LOSSES",
    "REFUSED",
    "SQN_MASK",
    "Address",
    "EndReason",
    "Outgoing",
    "RateController",
    "RateControllerStatistics",
    "RateDecision",
    "Received",
    "ReceiverConnected",
    "ReceiverDisconnected",
    "ReceiverEvent",
    "RmReceiver",
    "RmReceiverParams",
    "RmReceiverStatistics",
    "RmSource",
    "RmSourceParams",
    "RmSourceStatistics",
    "RuReceiver",
    "RuReceiverParams",
    "RuReceiverState",
    "RuReceiverStatistics",
    "RuSource",
    "RuSourceParams",
    "RuSourceStatistics",
    "SendResult",
    "SessionActive",
    "SessionEnded",
    "SourceEvent",
    "SourceUnblocked",
    "Unrecovered",
    "UnrecoveredReason",
    "sqn_diff",
]
