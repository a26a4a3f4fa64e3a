"""The lbmrd forwarding core, sans I/O (seed 8.1.9-8.1.11, chapters 15-16; spec 03 A12-A13, 06 C).

:class:`Forwarder` holds the client table and the NAT rules.  It is fed datagrams with their sender and
the time, and returns what to send where; it never touches a socket or a clock (PRACTICES.md 1, 4):

- a client is an (address, port) it received any well-formed LBMR datagram from: a TIR, a TQR or a
  keepalive (seed 8.1.9); malformed or non-LBMR datagrams are counted and dropped and never make a
  client (PRACTICES.md 6);
- keepalives (LBMR type 0 with no records, "receiver alive" type 2, "source alive" type 3; W1 §3.1)
  refresh their client and are answered with a keepalive to that client alone, so clients can tell a
  live daemon from a dead one (``resolver_unicast_activity_timeout``) and rotate among live ones;
- every other datagram (TIRs and TQRs, and the rest of topic resolution: wildcard queries, topic
  management, context-name and gateway messages) goes to every other client in the table, never back
  to its sender; lbmrd keeps no topic state (seed 8.1.9);
- :meth:`Forwarder.scan`, due every ``activity``, removes clients nothing was received from for
  ``ttl`` (seed §15.1), keepalive senders included once their keepalives stop;
- the table is bounded, since any UDP sender can become a client and every client multiplies each TIR
  and TQR: at most ``max_clients`` clients in all (:data:`DEFAULT_MAX_CLIENTS`) and
  ``max_clients_per_host`` from one IP address (:data:`DEFAULT_MAX_CLIENTS_PER_HOST`); a new sender
  past either limit does not become a client, and its datagrams are neither forwarded nor answered
  (counted: ``dgrams_dropped_table_full``, ``dgrams_dropped_host_limit``).  One datagram so becomes at
  most ``max_clients - 1`` copies;
- NAT (seed 8.1.10-11, §16.1.2-9): clients are sorted into ``<domain>``s by source address (the most
  specific network wins; document order breaks ties).  A copy of a datagram carrying TIRs that goes
  from a client in domain S to a client in domain D has each TIR's transport address and port
  rewritten by the first matching rule of the ``<transform source=S destination=D>`` elements.  The
  copy is re-encoded only when a rule matched; everything else goes out byte for byte.

Rewritten are the address and port a receiver connects or sends to: TCP and LBT-RU ``ip:port``,
LBT-RM ``source_ip:source_port`` (where NAKs go; the multicast group is not an address behind a NAT)
and LBT-RDMA ``ip:port``.  Shared-memory transports carry no address.  Addresses inside topic options
(late join, UME) are left alone: the seed lists those features as incompatible with lbmrd NAT.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from openum.daemons.lbmrd._config import Domain, Rule, Transform
from openum.daemons.lbmrd._values import DEFAULT_ACTIVITY_MS, DEFAULT_TTL_S
from openum.wire._common import WireError
from openum.wire.lbmr import (
    LbmrPacket,
    LbtrdmaTransport,
    LbtrmTransport,
    LbtruTransport,
    ReceiverAlive,
    ResolverKeepalive,
    SourceAlive,
    TcpTransport,
    TopicResolution,
    Transport,
    WildcardResolution,
    decode_packet,
    encode_packet,
)

__all__ = [
    "DEFAULT_MAX_CLIENTS",
    "DEFAULT_MAX_CLIENTS_PER_HOST",
    "NS_PER_MS",
    "NS_PER_S",
    "Address",
    "Client",
    "Forwarder",
    "ForwarderStatistics",
]

NS_PER_MS: Final = 1_000_000
NS_PER_S: Final = 1_000_000_000

#: A UDP endpoint: (IPv4 address, port).
Address = tuple[str, int]

#: Clients in the table at most: one per context using this lbmrd (a context has one unicast resolver
#: port), so a deployment of a thousand application contexts fits; one datagram becomes at most this many
#: copies, less one.
DEFAULT_MAX_CLIENTS: Final = 1024
#: Clients from one IP address at most: the contexts of one host (each UM application has one or a few).
DEFAULT_MAX_CLIENTS_PER_HOST: Final = 64

#: At most one warning per this many ns for floods of malformed datagrams or failed sends.
_WARN_INTERVAL_NS: Final = 10 * NS_PER_S

_KEEPALIVES: Final = (ResolverKeepalive, ReceiverAlive, SourceAlive)
_KEEPALIVE_REPLY: Final = encode_packet(LbmrPacket(ResolverKeepalive()))


@dataclass(frozen=True, slots=True)
class Client:
    """A snapshot of one entry of the client table."""

    address: str
    port: int
    #: the ``<domain>`` its address falls in, or None
    domain: str | None
    first_seen_ns: int
    last_seen_ns: int
    #: well-formed LBMR datagrams received from it
    dgrams_received: int

    def __str__(self) -> str:
        return f"{self.address}:{self.port}"


class _ClientState:
    __slots__ = ("address", "dgrams_received", "domain", "first_seen_ns", "last_seen_ns", "port")

    def __init__(self, address: str, port: int, domain: str | None, now_ns: int) -> None:
        self.address = address
        self.port = port
        self.domain = domain
        self.first_seen_ns = now_ns
        self.last_seen_ns = now_ns
        self.dgrams_received = 0

    def snapshot(self) -> Client:
        return Client(
            self.address, self.port, self.domain, self.first_seen_ns, self.last_seen_ns, self.dgrams_received
        )


@dataclass(frozen=True, slots=True)
class ForwarderStatistics:
    """An immutable snapshot of the forwarder's counters (PRACTICES.md 10)."""

    dgrams_received: int = 0
    """Datagrams handed to the forwarder, well-formed or not."""
    bytes_received: int = 0
    """Bytes of those datagrams."""
    tr_dgrams_received: int = 0
    """Well-formed datagrams with topic resolution records (TIRs, TQRs, wildcard TQRs)."""
    keepalives_received: int = 0
    """Keepalives: LBMR type 0 without records, receiver alive (type 2), source alive (type 3)."""
    keepalives_sent: int = 0
    """Keepalives sent back to the clients that sent one (they tell a client the daemon is alive)."""
    other_dgrams_received: int = 0
    """Other well-formed LBMR datagrams (topic management, UMQ, extended types); forwarded too."""
    dgrams_forwarded: int = 0
    """Copies handed out to be sent (one per destination client)."""
    bytes_forwarded: int = 0
    """Bytes of those copies."""
    dgrams_rewritten: int = 0
    """Forwarded copies whose TIRs were rewritten by a NAT rule (and so re-encoded)."""
    tirs_rewritten: int = 0
    """TIR records rewritten in those copies."""
    dgrams_dropped_malformed: int = 0
    """Datagrams dropped because they are not well-formed LBMR; their senders did not become clients."""
    dgrams_dropped_self: int = 0
    """Datagrams dropped because they claim to come from the daemon's own address and port: a forged
    sender (the daemon never sends to itself), which would otherwise make it a client of itself."""
    dgrams_dropped_send: int = 0
    """Copies the socket refused (reported by the I/O driver through :meth:`Forwarder.send_failed`)."""
    dgrams_dropped_table_full: int = 0
    """Datagrams from a new sender dropped (not forwarded, not answered, no client made) because the
    table held ``max_clients`` clients."""
    dgrams_dropped_host_limit: int = 0
    """Datagrams from a new sender dropped because its IP address already had ``max_clients_per_host``
    clients."""
    clients_added: int = 0
    """Clients that entered the table."""
    clients_removed: int = 0
    """Clients removed by the dead-client scan (nothing received for ``ttl``)."""
    clients_active: int = 0
    """Clients in the table now."""

    def summary(self) -> str:
        """One line for the log: received, forwarded, dropped by reason, clients."""
        dropped = (
            self.dgrams_dropped_malformed
            + self.dgrams_dropped_self
            + self.dgrams_dropped_send
            + self.dgrams_dropped_table_full
            + self.dgrams_dropped_host_limit
        )
        return (
            f"received {self.dgrams_received} datagrams ({self.tr_dgrams_received} TIR/TQR, "
            f"{self.keepalives_received} keepalive, {self.other_dgrams_received} other; "
            f"{self.bytes_received} bytes), forwarded {self.dgrams_forwarded} ({self.dgrams_rewritten} "
            f"NAT-rewritten, {self.tirs_rewritten} TIRs; {self.bytes_forwarded} bytes), dropped {dropped} "
            f"(malformed {self.dgrams_dropped_malformed}, own address {self.dgrams_dropped_self}, "
            f"send failed {self.dgrams_dropped_send}, table full {self.dgrams_dropped_table_full}, "
            f"host limit {self.dgrams_dropped_host_limit}), "
            f"clients {self.clients_active} active ({self.clients_added} added, "
            f"{self.clients_removed} removed as dead)"
        )


def _rewrite_transport(transport: Transport, rules: Sequence[Rule]) -> Transport | None:
    """``transport`` with its address rewritten by the first matching rule, or None if none matched."""
    if isinstance(transport, (TcpTransport, LbtruTransport, LbtrdmaTransport)):
        for rule in rules:
            hit = rule.apply(transport.ip, transport.port)
            if hit is not None:
                return dataclasses.replace(transport, ip=hit[0], port=hit[1])
    elif isinstance(transport, LbtrmTransport):
        for rule in rules:
            hit = rule.apply(transport.source_ip, transport.source_port)
            if hit is not None:
                return dataclasses.replace(transport, source_ip=hit[0], source_port=hit[1])
    return None


class _RateLimitedWarning:
    """Log the first event at WARNING, then at most one summary per interval; the rest at DEBUG."""

    __slots__ = ("_log", "_next_ns", "_suppressed")

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._next_ns: int | None = None
        self._suppressed = 0

    def __call__(self, now_ns: int, message: str) -> None:
        if self._next_ns is None or now_ns >= self._next_ns:
            more = f" ({self._suppressed} more since the last warning)" if self._suppressed else ""
            self._log.warning("%s%s", message, more)
            self._next_ns = now_ns + _WARN_INTERVAL_NS
            self._suppressed = 0
        else:
            self._suppressed += 1
            self._log.debug("%s", message)


class Forwarder:
    """lbmrd's client table, forwarding and NAT rewriting; time is passed in (``now_ns``).

    ``own_address`` is where the daemon listens: datagrams claiming to come from it are dropped, so a
    misconfiguration cannot make the daemon forward to itself.  ``max_clients`` and
    ``max_clients_per_host`` bound the client table (0: no bound).
    """

    def __init__(
        self,
        *,
        ttl_ns: int = DEFAULT_TTL_S * NS_PER_S,
        activity_ns: int = DEFAULT_ACTIVITY_MS * NS_PER_MS,
        domains: Sequence[Domain] = (),
        transforms: Sequence[Transform] = (),
        own_address: Address | None = None,
        start_ns: int = 0,
        log: logging.Logger | None = None,
        max_clients: int = DEFAULT_MAX_CLIENTS,
        max_clients_per_host: int = DEFAULT_MAX_CLIENTS_PER_HOST,
    ) -> None:
        if ttl_ns <= 0 or activity_ns <= 0:
            raise ValueError(f"ttl_ns and activity_ns must be positive, got {ttl_ns} and {activity_ns}")
        if max_clients < 0 or max_clients_per_host < 0:
            raise ValueError(
                f"max_clients and max_clients_per_host must be 0 (no limit) or more, got {max_clients} "
                f"and {max_clients_per_host}"
            )
        self.max_clients = max_clients
        self.max_clients_per_host = max_clients_per_host
        self._per_host: dict[str, int] = {}
        self._warn_limit = _RateLimitedWarning(log if log is not None else logging.getLogger("openum.lbmrd"))
        self.ttl_ns = ttl_ns
        self.activity_ns = activity_ns
        self._own = own_address
        self._log = log if log is not None else logging.getLogger("openum.lbmrd")
        self._warn_malformed = _RateLimitedWarning(self._log)
        self._warn_send = _RateLimitedWarning(self._log)
        self._clients: dict[Address, _ClientState] = {}
        self._next_scan_ns = start_ns + activity_ns
        # most specific network first; sorted() is stable, so document order breaks ties
        self._networks = sorted(
            ((net, d.name) for d in domains for net in d.networks), key=lambda item: -item[0].prefixlen
        )
        self._rules: dict[tuple[str, str], tuple[Rule, ...]] = {}
        for t in transforms:
            key = (t.source, t.destination)
            self._rules[key] = self._rules.get(key, ()) + t.rules
        self._stats: dict[str, int] = dict.fromkeys(
            (f.name for f in dataclasses.fields(ForwarderStatistics)), 0
        )

    # -- counters

    def _count(self, name: str, amount: int = 1) -> None:
        self._stats[name] += amount

    def statistics(self) -> ForwarderStatistics:
        """A snapshot of the counters."""
        values = dict(self._stats)
        values["clients_active"] = len(self._clients)
        return ForwarderStatistics(**values)

    # -- the client table

    @property
    def next_scan_ns(self) -> int:
        """When the next dead-client scan is due."""
        return self._next_scan_ns

    def clients(self) -> tuple[Client, ...]:
        """Snapshots of the clients in the table, oldest first."""
        return tuple(c.snapshot() for c in self._clients.values())

    def domain_of(self, address: str) -> str | None:
        """The name of the ``<domain>`` whose most specific network holds ``address``, or None."""
        try:
            ip = ipaddress.IPv4Address(address)
        except ValueError:
            return None
        for net, name in self._networks:
            if ip in net:
                return name
        return None

    def _touch(self, addr: Address, now_ns: int) -> _ClientState | None:
        """The client ``addr`` (refreshed), made now if new; None: a new sender past a limit (counted)."""
        client = self._clients.get(addr)
        if client is None:
            if self.max_clients and len(self._clients) >= self.max_clients:
                self._count("dgrams_dropped_table_full")
                self._warn_limit(
                    now_ns, f"{addr[0]}:{addr[1]} not added: the table is full ({self.max_clients} clients)"
                )
                return None
            on_host = self._per_host.get(addr[0], 0)
            if self.max_clients_per_host and on_host >= self.max_clients_per_host:
                self._count("dgrams_dropped_host_limit")
                self._warn_limit(
                    now_ns,
                    f"{addr[0]}:{addr[1]} not added: {addr[0]} has {on_host} clients "
                    f"(at most {self.max_clients_per_host} per host)",
                )
                return None
            self._per_host[addr[0]] = on_host + 1
            client = _ClientState(addr[0], addr[1], self.domain_of(addr[0]), now_ns)
            self._clients[addr] = client
            self._count("clients_added")
            where = f" (domain {client.domain})" if client.domain else ""
            self._log.info("client %s:%d added%s; %d active", addr[0], addr[1], where, len(self._clients))
        client.last_seen_ns = max(client.last_seen_ns, now_ns)
        client.dgrams_received += 1
        return client

    def scan(self, now_ns: int) -> list[Client]:
        """Remove the clients nothing was received from for ``ttl``; the next scan is due ``activity`` on."""
        dead = [c for c in self._clients.values() if now_ns - c.last_seen_ns >= self.ttl_ns]
        for c in dead:
            del self._clients[(c.address, c.port)]
            left = self._per_host[c.address] - 1
            if left:
                self._per_host[c.address] = left
            else:
                del self._per_host[c.address]
            self._count("clients_removed")
            self._log.info(
                "client %s:%d removed: nothing received for %.3f s (ttl %g s); %d active",
                c.address,
                c.port,
                (now_ns - c.last_seen_ns) / NS_PER_S,
                self.ttl_ns / NS_PER_S,
                len(self._clients),
            )
        self._next_scan_ns = now_ns + self.activity_ns
        return [c.snapshot() for c in dead]

    def poll(self, now_ns: int) -> list[Client]:
        """Run the dead-client scan if it is due; the removed clients."""
        return self.scan(now_ns) if now_ns >= self._next_scan_ns else []

    def send_failed(self, addr: Address, error: OSError, now_ns: int) -> None:
        """The I/O driver could not send a copy to ``addr``: counted, and logged (rate-limited)."""
        self._count("dgrams_dropped_send")
        self._warn_send(now_ns, f"could not send to {addr[0]}:{addr[1]}: {error}")

    # -- datagrams

    def datagram_received(self, data: bytes, addr: Address, now_ns: int) -> list[tuple[bytes, Address]]:
        """Account for one datagram from ``addr``; the ``(payload, destination)`` copies to send."""
        self._count("dgrams_received")
        self._count("bytes_received", len(data))
        if self._own is not None and addr == self._own:
            self._count("dgrams_dropped_self")
            return []
        try:
            packet = decode_packet(data)
        except WireError as exc:
            self._count("dgrams_dropped_malformed")
            self._warn_malformed(
                now_ns, f"dropped a malformed datagram of {len(data)} bytes from {addr[0]}:{addr[1]}: {exc}"
            )
            return []
        sender = self._touch(addr, now_ns)
        if sender is None:
            return []
        body = packet.body
        if isinstance(body, _KEEPALIVES):
            self._count("keepalives_received")
            self._count("keepalives_sent")
            return [(_KEEPALIVE_REPLY, addr)]
        if isinstance(body, (TopicResolution, WildcardResolution)):
            self._count("tr_dgrams_received")
            has_tirs = bool(body.infos)
        else:
            self._count("other_dgrams_received")
            has_tirs = False
        out: list[tuple[bytes, Address]] = []
        # destination domain -> (rewritten copy, TIRs rewritten); (None, 0): no rule matched
        rewritten: dict[str, tuple[bytes | None, int]] = {}
        for dest_addr, dest in self._clients.items():
            if dest is sender:
                continue
            payload = data
            if has_tirs and sender.domain is not None and dest.domain is not None:
                rules = self._rules.get((sender.domain, dest.domain))
                if rules:
                    if dest.domain not in rewritten:
                        rewritten[dest.domain] = self._rewrite(packet, rules)
                    copy, tirs = rewritten[dest.domain]
                    if copy is not None:
                        payload = copy
                        self._count("dgrams_rewritten")
                        self._count("tirs_rewritten", tirs)
            out.append((payload, dest_addr))
            self._count("dgrams_forwarded")
            self._count("bytes_forwarded", len(payload))
        return out

    def _rewrite(self, packet: LbmrPacket, rules: Sequence[Rule]) -> tuple[bytes | None, int]:
        """``(re-encoded copy, TIRs rewritten)``; ``(None, 0)`` if no rule matched.

        The copy always encodes: a rule only puts a dotted-decimal IPv4 address and a port of 0-65535
        (checked when the configuration was read) into the fixed-size fields of a TIR that decoded, and
        every LBMR packet that decodes re-encodes (fuzzed in ``tests/unit/wire/test_lbmr.py``)."""
        body = packet.body
        assert isinstance(body, (TopicResolution, WildcardResolution))
        infos = []
        changed = 0
        for tir in body.infos:
            transport = _rewrite_transport(tir.transport, rules)
            if transport is None:
                infos.append(tir)
            else:
                infos.append(dataclasses.replace(tir, transport=transport))
                changed += 1
        if not changed:
            return None, 0
        new_body = dataclasses.replace(body, infos=tuple(infos))
        return encode_packet(dataclasses.replace(packet, body=new_body)), changed
