"""The LBT-RM transport over real sockets: reliable multicast (seed 2.9.2, 6.3, 8.10, 2.12.1).

**Source side.** A context's LBT-RM sessions come from its pool of multicast groups
``transport_lbtrm_multicast_address_low..high`` (224.10.10.10-14), one session per group, assigned to
sources round-robin; a source with ``transport_lbtrm_multicast_address`` gets the session on that group
(created if needed).  Each session sends to ``group:transport_lbtrm_destination_port`` (14400) from its
own unicast port of ``transport_lbtrm_source_port_low..high`` (14390-14399), where receivers' NAKs
arrive.  Multicast leaves through the context's ``default_interface`` (127.0.0.1 unless configured,
with multicast loopback on, so nothing leaves the machine by default) with TTL
``resolver_multicast_ttl``.  The sessions of a context share one rate controller
(``transport_lbtrm_data_rate_limit`` and ``transport_lbtrm_retransmit_rate_limit`` per
``transport_lbtrm_rate_interval``, seed 2.12.1).

**Receiver side.** One socket per (group, destination port) the context has joined, shared by every
source session sent there and told apart by the sender's address and the LBT-RM session id; NAKs leave
from one unicast socket of the context.  A datagram of a session the context has not joined, or too
short to name one, is counted (``lbtrm_dgrams_dropped_unknown`` in the context statistics) and dropped.
"""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from openum._errors import ConfigError
from openum.config import SourceAttributes
from openum.protocol.reliable import (
    Outgoing,
    RateController,
    RmReceiver,
    RmReceiverParams,
    RmSource,
    RmSourceParams,
    SourceEvent,
)
from openum.runtime import EventLoop, FdEvent
from openum.transport._pool import bind_first_free, session_options, warn_first_source_wins
from openum.transport._reliable import (
    MAX_DRAIN,
    RECV_SIZE,
    DrainGate,
    ReliableReceiverSession,
    ReliableSourceSession,
    close_socket,
    loss_hook_from_env,
    set_buffer,
)
from openum.wire.lbmr import LbtrmTransport

__all__ = ["RmReceiverSession", "RmReceiving", "RmSessionPool", "RmSourceSession"]

Address = tuple[str, int]

#: Source options of an LBT-RM session (first source wins, seed 3.3.3).
SESSION_OPTIONS = session_options("transport_lbtrm_")
_SID: Final = struct.Struct(">I")


def _multicast_sender(interface: str, ttl: int) -> socket.socket:
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


class RmSourceSession(ReliableSourceSession):
    """One LBT-RM transport session of a source context: a multicast group and a NAK port."""

    TRANSPORT = "LBT-RM"
    OPTION_PREFIX = "transport_lbtrm_"

    def __init__(
        self,
        loop: EventLoop,
        log: Any,
        attrs: SourceAttributes,
        context_attrs: Any,
        group: str,
        dest_port: int,
        sock: socket.socket,
        session_id: int,
        rate: RateController,
        lock: threading.Lock,
    ) -> None:
        engine = RmSource(
            session_id=session_id,
            nak_port=sock.getsockname()[1],
            params=RmSourceParams.from_options(attrs.get, context_attrs.get),
            rate=rate,
            now_ns=loop.clock.now_ns(),
        )
        super().__init__(loop, log, attrs, engine, sock, rate, lock)
        self.rm: RmSource = engine
        self.group = group
        self.dest_port = dest_port
        self.session_id = session_id
        self.destination = (group, dest_port)

    @property
    def label(self) -> str:
        return f"LBT-RM session {self.group}:{self.dest_port} (from {self.interface}:{self.port})"

    def transport_info(self) -> LbtrmTransport:
        """What topic resolution advertises for the session's sources."""
        return LbtrmTransport(self.interface, self.group, self.session_id, self.dest_port, self.port)

    def _input(
        self, data: bytes, sender: Address, now: int
    ) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        return self.rm.datagram_received(data, sender, now), ()

    def _close_engine(self) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        self.rm.close()  # nothing is sent: receivers time out (seed 8.11.6)
        return (), ()


class RmSessionPool:
    """The context's LBT-RM source sessions: one per multicast group, round-robin (seed 2.9.2)."""

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random | None = None
    ) -> None:
        self.loop = loop
        self.log = log
        self.context_attrs = context_attrs
        self.interface = interface
        self.rng = rng or random.Random()
        low = ipaddress.IPv4Address(context_attrs.get("transport_lbtrm_multicast_address_low"))
        high = ipaddress.IPv4Address(context_attrs.get("transport_lbtrm_multicast_address_high"))
        self.groups = [str(ipaddress.IPv4Address(a)) for a in range(int(low), int(high) + 1)]
        self.rate = RateController.from_options(context_attrs.get, "lbtrm", now_ns=loop.clock.now_ns())
        self.lock = threading.Lock()  # the sessions' engines share the rate controller
        self.ttl: int = context_attrs.get("resolver_multicast_ttl")
        self._sessions: dict[tuple[str, int], RmSourceSession] = {}
        self._next = 0

    @property
    def sessions(self) -> list[RmSourceSession]:
        return list(self._sessions.values())

    def session_for(self, attrs: SourceAttributes) -> RmSourceSession:
        """The session a new source goes to (activating one if needed)."""
        dest_port: int = attrs.get("transport_lbtrm_destination_port")
        group: str | None = attrs.get("transport_lbtrm_multicast_address") or None
        if group is None:
            group = self.groups[self._next % len(self.groups)]
            self._next += 1
        elif not ipaddress.IPv4Address(group).is_multicast:
            raise ConfigError(
                f"transport_lbtrm_multicast_address {group} is not a multicast address",
                option="transport_lbtrm_multicast_address",
                scope="source",
                value=group,
                allowed="224.0.0.0-239.255.255.255",
            )
        existing = self._sessions.get((group, dest_port))
        if existing is not None:
            warn_first_source_wins(self.log, SESSION_OPTIONS, existing.attrs, attrs, existing.label)
            return existing
        session = self._activate(attrs, group, dest_port)
        self._sessions[(group, dest_port)] = session
        return session

    def _activate(self, attrs: SourceAttributes, group: str, dest_port: int) -> RmSourceSession:
        low: int = self.context_attrs.get("transport_lbtrm_source_port_low")
        high: int = self.context_attrs.get("transport_lbtrm_source_port_high")
        used = {s.port for s in self._sessions.values()}

        def open_port(port: int) -> RmSourceSession:
            sock = _multicast_sender(self.interface, self.ttl)
            try:
                sock.bind((self.interface, port))
            except OSError:
                sock.close()
                raise
            set_buffer(
                sock,
                socket.SO_SNDBUF,
                self.context_attrs.get("transport_lbtrm_source_socket_buffer"),
                self.log,
                f"LBT-RM source port {port}",
            )
            session_id = self.rng.randrange(1, 1 << 32)
            return RmSourceSession(
                self.loop,
                self.log,
                attrs.copy(),
                self.context_attrs,
                group,
                dest_port,
                sock,
                session_id,
                self.rate,
                self.lock,
            )

        session = bind_first_free(
            [p for p in range(low, high + 1) if p not in used],
            open_port,
            f"LBT-RM transport on {self.interface}",
            "transport_lbtrm_source_port_low/high",
        )
        session.start()
        self.log.debug("%s activated (session id %08x)", session.label, session.session_id)
        return session

    def release(self, session: RmSourceSession) -> None:
        """Close a session whose last source was deleted (receivers time out: seed 8.11.6)."""
        self._sessions.pop((session.group, session.dest_port), None)
        session.close()

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()


# -- receiving ----------------------------------------------------------------------------------------


class RmReceiverSession(ReliableReceiverSession):
    """This context's reception of one source's LBT-RM session."""

    TRANSPORT = "LBT-RM"

    def __init__(
        self,
        owner: RmReceiving,
        transport: LbtrmTransport,
        params: RmReceiverParams,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
    ) -> None:
        engine = RmReceiver(
            session_id=transport.session_id,
            source=(transport.source_ip, transport.source_port),
            params=params,
            rng=owner.rng,
            now_ns=owner.loop.clock.now_ns(),
        )
        self.transport = transport
        self.demux_key = (transport.source_ip, transport.session_id)
        self.socket_key = (transport.group, transport.dest_port)
        super().__init__(owner.loop, engine, owner.send, owner.forget, on_active, on_end)


class RmReceiving:
    """The context's LBT-RM reception: group sockets, the NAK socket and the joined sessions."""

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random
    ) -> None:
        self.loop = loop
        self.log = log
        self.interface = interface
        self.rng = rng
        self.rcvbuf: int = context_attrs.get("transport_lbtrm_receiver_socket_buffer")
        self._groups: dict[Address, socket.socket] = {}
        self._sessions: dict[tuple[str, int], RmReceiverSession] = {}  # (source ip, session id)
        self._nak_sock: socket.socket | None = None
        self._drop = loss_hook_from_env()
        self._gate = DrainGate()  # whether an event reads past its first datagrams
        self.dgrams_dropped_unknown = 0
        self.dgrams_dropped_test = 0

    @property
    def sessions(self) -> list[RmReceiverSession]:
        return list(self._sessions.values())

    def join(
        self,
        transport: LbtrmTransport,
        params: RmReceiverParams,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
    ) -> RmReceiverSession:
        """Start receiving the session ``transport`` describes (``OSError`` if its group cannot be joined)."""
        old = self._sessions.get((transport.source_ip, transport.session_id))
        if old is not None:  # the same session id from the same host, advertised elsewhere now
            old.close("replaced by a new advertisement of the same session")
        key = (transport.group, transport.dest_port)
        if key not in self._groups:
            self._groups[key] = self._open_group(*key)
        if self._nak_sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.bind((self.interface, 0))
            sock.setblocking(False)
            self._nak_sock = sock
        session = RmReceiverSession(self, transport, params, on_active, on_end)
        self._sessions[session.demux_key] = session
        return session

    def _open_group(self, group: str, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if hasattr(socket, "SO_REUSEPORT"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            set_buffer(sock, socket.SO_RCVBUF, self.rcvbuf, self.log, f"LBT-RM group {group}:{port}")
            sock.bind((group, port))
            membership = socket.inet_aton(group) + socket.inet_aton(self.interface)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self.loop.register_fd(sock.fileno(), FdEvent.READ, self._readable, sock)
        return sock

    def _readable(self, fd: int, _events: FdEvent, sock: socket.socket) -> None:
        now = self.loop.clock.now_ns()
        sessions = self._sessions
        drop = self._drop
        gate = self._gate
        for i in range(MAX_DRAIN):
            # A round trip's event ends without a failed read; a burst reads on until one fails
            # (EAGAIN: one raised exception per event, not a look per datagram).
            if 0 < i < 3 and not gate.more(fd, i):
                return
            try:
                data, addr = sock.recvfrom(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.log.debug("LBT-RM: receive error: %s", exc)
                return
            if drop is not None and drop(data):
                self.dgrams_dropped_test += 1
                continue
            if len(data) < 8:
                self.dgrams_dropped_unknown += 1  # too short to name a session
                continue
            session = sessions.get((addr[0], _SID.unpack_from(data, 4)[0]))
            if session is None:
                self.dgrams_dropped_unknown += 1  # a session this context has not joined, or garbage
                continue
            session.datagram(memoryview(data), addr, now)  # an IPv4 socket's address: (host, port)

    def send(self, outgoing: Sequence[Outgoing]) -> None:
        sock = self._nak_sock
        if sock is None:
            return
        for out in outgoing:
            if out.destination is None:
                continue
            try:
                sock.sendto(out.data, out.destination)
            except OSError as exc:
                self.log.debug("LBT-RM: sending a NAK to %s:%d failed: %s", *out.destination, exc)

    def forget(self, session: ReliableReceiverSession) -> None:
        assert isinstance(session, RmReceiverSession)
        if self._sessions.get(session.demux_key) is session:
            del self._sessions[session.demux_key]
        if not any(s.socket_key == session.socket_key for s in self._sessions.values()):
            sock = self._groups.pop(session.socket_key, None)
            if sock is not None:
                close_socket(self.loop, sock)

    def close(self) -> None:
        for session in list(self._sessions.values()):
            session.on_end = lambda reason: None
            session.close("the context is closing")
        for sock in self._groups.values():
            close_socket(self.loop, sock)
        self._groups.clear()
        if self._nak_sock is not None:
            self._nak_sock.close()
            self._nak_sock = None
