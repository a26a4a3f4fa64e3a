"""The lbmrd fuzz target of :mod:`openum.testing.fuzz`: the forwarding core (:class:`Forwarder`:
client table, keepalives, forwarding, NAT rewriting of TIRs) fed mutated topic resolution traffic.

It lives with lbmrd (a daemon) because :mod:`openum.testing` sits below the daemons' layer and loads
it by name.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Final

from openum.daemons.lbmrd._config import Domain, Endpoint, Rule, Transform
from openum.daemons.lbmrd._forwarder import Forwarder
from openum.testing._fuzz_targets import LOG, FuzzTarget, ResolverTarget

__all__ = ["LbmrdTarget"]

# --- lbmrd ----------------------------------------------------------------------------------------------

_CLIENTS: Final = (("127.1.0.5", 14402), ("127.1.0.6", 14402), ("127.168.7.9", 14402), ("127.168.7.9", 15000))


class LbmrdTarget(FuzzTarget):
    """The forwarder with two NAT domains and a transform; the first byte of each chunk picks which
    client sent it (so mutations also vary the sender), the rest is the datagram."""

    name = "lbmrd"
    description = "lbmrd forwarder: client table, keepalives, forwarding, NAT rewriting of TIRs"
    dictionary = ResolverTarget.dictionary

    def __init__(self) -> None:
        self.forwarder: Forwarder | None = None
        self.work = 0
        self._resolver = ResolverTarget()

    def trace(self, rng: random.Random) -> list[bytes]:
        return [bytes([rng.randrange(len(_CLIENTS))]) + d for d in self._resolver.trace(rng)]

    def reset(self) -> None:
        inside = Domain("inside", (ipaddress.IPv4Network("127.0.0.0/9"),))
        outside = Domain("outside", (ipaddress.IPv4Network("127.128.0.0/9"),))
        rule = Rule(Endpoint("127.0.0.2", None), Endpoint("127.168.1.1", None))
        self.forwarder = Forwarder(
            domains=(inside, outside),
            transforms=(Transform("inside", "outside", (rule,)),),
            own_address=("127.1.0.1", 15380),
            log=LOG,
        )
        self.work = 0

    def feed(self, data: bytes, now_ns: int) -> None:
        assert self.forwarder is not None
        if not data:
            return
        sender = (
            _CLIENTS[data[0] % len(_CLIENTS)]
            if data[0] < 0x80
            else (f"127.9.{data[0] & 7}.{data[0] >> 3 & 15}", 14402)
        )
        self.work += len(self.forwarder.datagram_received(data[1:], sender, now_ns))

    def timers(self, now_ns: int) -> None:
        assert self.forwarder is not None
        if self.forwarder.next_scan_ns <= now_ns:
            self.forwarder.poll(now_ns)

    def deadline(self) -> int | None:
        assert self.forwarder is not None
        return self.forwarder.next_scan_ns if self.forwarder.clients() else None

    def finish(self) -> int:
        assert self.forwarder is not None
        self.forwarder.statistics()
        self.forwarder = None
        return self.work
