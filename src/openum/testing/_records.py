"""The records of the simulated network: packet fates, captured packets and per-address counters."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from openum.testing._node import Address

__all__ = ["COPIES", "Counters", "Fate", "LivelockError", "NodeStats", "Packet", "SentDatagram"]


class Fate(enum.Enum):
    """What the network did with a datagram on one path."""

    DELIVERED = "delivered"
    DROPPED = "dropped"
    DUPLICATED = "duplicated"  # delivered twice
    UNREACHABLE = "unreachable"  # no node at the destination address (a closed UDP port)


COPIES: Final = {Fate.DELIVERED: 1, Fate.DUPLICATED: 2, Fate.DROPPED: 0, Fate.UNREACHABLE: 0}


@dataclass(frozen=True, slots=True)
class Packet:
    """One datagram on one path: what :meth:`SimNetwork.on_packet` hooks see and ``packets`` keeps.

    A multicast datagram gives one ``Packet`` per receiving member (``group`` is the group it was
    sent to; ``dst`` is the member).  ``arrival_ns`` holds one time per copy that will arrive: none
    when dropped, two when duplicated.  ``send_index`` numbers the :meth:`SimNetwork.send` calls.
    """

    time_ns: int
    src: Address
    dst: Address
    data: bytes
    fate: Fate
    group: Address | None = None
    arrival_ns: tuple[int, ...] = ()
    send_index: int = 0


@dataclass(frozen=True, slots=True)
class SentDatagram:
    """One :meth:`SimNetwork.send` call as the sender put it on the wire."""

    time_ns: int
    src: Address
    dst: Address
    data: bytes


@dataclass(frozen=True, slots=True)
class NodeStats:
    """Datagram counters of one address (snapshot).

    ``sent``: datagrams it sent (a multicast send counts once).  ``received``: copies delivered to
    it (a duplicated datagram counts twice).  ``dropped``: datagrams to it the network dropped (link
    models, drop rules, hooks, or the node was removed while they were in flight).  ``duplicated``:
    datagrams to it delivered twice.  ``bytes_sent`` / ``bytes_received``: the same in bytes.
    """

    sent: int = 0
    received: int = 0
    dropped: int = 0
    duplicated: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0


class LivelockError(RuntimeError):
    """The simulation stopped advancing: too many steps at one instant."""


class Counters:
    __slots__ = ("bytes_received", "bytes_sent", "dropped", "duplicated", "received", "sent")

    def __init__(self) -> None:
        self.sent = self.received = self.dropped = self.duplicated = 0
        self.bytes_sent = self.bytes_received = 0

    def snapshot(self) -> NodeStats:
        return NodeStats(
            self.sent, self.received, self.dropped, self.duplicated, self.bytes_sent, self.bytes_received
        )
