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

While a group socket serves the one session it was opened for (the common case), it is *connected* to
that source's address and port (on Linux) once a datagram of the session has come from them (UM and
openum sources send from their NAK port, the advertised ``source_port``; a source sending from elsewhere
is simply never connected to).  Then the kernel keeps every other sender's datagrams off the socket,
above all the context's *own* LBT-RM sources: the default pool gives every context the same first group
(224.10.10.10), so a process that publishes and subscribes over LBT-RM hears its own datagrams (looped
back by the kernel) on the group socket it joined for its peer, one wake-up and read per message for
nothing.  Reads need no sender address either.  Datagrams queued before the connect are read with their
address first.  The association is dissolved for good when a second session joins the socket.  Others'
datagrams sent to a connected socket are dropped by the kernel, not counted.
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
from openum.transport._pool import bind_first_free, session_options, warn_first_wins
from openum.transport._reliable import (
    CAN_DISCONNECT,
    MAX_DRAIN,
    SIBLING_SOCKETS,
    DrainGate,
    ReliableReceiverSession,
    ReliableSourceSession,
    close_socket,
    connected_sibling,
    dissolve,
    loss_hook_from_env,
    receive_buffer,
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


#: Whether a source session sends through a socket connected to its group (see :func:`group_socket`):
#: Linux's SO_REUSEPORT, whose connected members take only their peer's datagrams.
GROUP_SOCKETS: Final = SIBLING_SOCKETS


def group_socket(shared: socket.socket, destination: Address, interface: str, ttl: int) -> socket.socket:
    """A socket next to the session's ``shared`` one (:func:`connected_sibling`) connected to the group
    ``destination``, through which the session's multicast leaves.

    A ``send`` on it skips what ``sendto`` does per datagram before the kernel sees it: the destination
    given as a (host, port) pair converted to a socket address (1.7 k of the 15 k instructions of a send,
    counted with callgrind).  The kernel still routes each multicast datagram (it does not use a
    connected socket's route for a multicast destination).  Nothing is read from it: no datagram comes
    from a group address, so the receivers' NAKs still arrive at ``shared``."""
    return connected_sibling(shared, _multicast_sender(interface, ttl), destination)


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
        self.destination = self._group_address = (group, dest_port)
        # The socket connected to the group (GROUP_SOCKETS), or None: sendto from the session's socket.
        self._group_sock: socket.socket | None = None

    def open_group_socket(self, interface: str, ttl: int) -> None:
        """Send through a socket connected to the group from now on, where it can be opened."""
        if not GROUP_SOCKETS:
            return
        try:
            own = group_socket(self.sock, self._group_address, interface, ttl)
        except OSError as exc:  # the session's socket serves
            self.log.debug("%s: no socket connected to the group: %s", self.label, exc)
            return
        with self.lock:
            self._group_sock = own

    def _write_data(self, datagram: bytes) -> None:
        own = self._group_sock
        if own is None:
            super()._write(datagram, self._group_address)
            return
        try:
            own.send(datagram)
        except OSError as exc:
            self._write_failed(exc, self._group_address, expected=False)

    def _write(self, datagram: bytes, destination: Address | None) -> None:
        if destination == self._group_address:
            self._write_data(datagram)  # through the group socket, where there is one
        else:
            super()._write(datagram, destination)

    def close(self) -> None:
        super().close()
        with self.lock:
            own, self._group_sock = self._group_sock, None
        if own is not None:
            own.close()

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
            warn_first_wins(self.log, "source", SESSION_OPTIONS, existing.attrs, attrs, existing.label)
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
        session.open_group_socket(self.interface, self.ttl)
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
        self.session_id = transport.session_id
        self.demux_key = (transport.source_ip, transport.session_id)
        self.socket_key = (transport.group, transport.dest_port)
        #: Where the source sends from: its address and NAK port.
        self.sender: Address = (transport.source_ip, transport.source_port)
        super().__init__(owner.loop, engine, owner.send, owner.forget, on_active, on_end)


class _GroupSocket:
    """The socket of one (group, destination port) and whether it is connected to its only source."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: Still serving only the session it was opened for, never connected: may be connected to it.
        self.fresh = CAN_DISCONNECT
        #: The session the socket is connected to, or None: reads name their sender.
        self.only: RmReceiverSession | None = None
        #: Connected, and every datagram queued before the connect has been read.
        self.settled = False


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
        self._groups: dict[Address, _GroupSocket] = {}
        self._sessions: dict[tuple[str, int], RmReceiverSession] = {}  # (source ip, session id)
        self._nak_sock: socket.socket | None = None
        self._drop = loss_hook_from_env()
        self._gate = DrainGate(loop.clock.now_ns)  # whether an event reads past its first datagrams
        self._buf, self._view = receive_buffer()  # every datagram is read into it, then handled
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
        group = self._groups.get(key)
        if group is None:
            group = _GroupSocket(self._open_group(*key))
            self.loop.register_fd(group.sock.fileno(), FdEvent.READ, self._readable, group)
            self._groups[key] = group
        else:
            self._dissolve(group)  # a second session on the socket: its source must get through
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
        return sock

    def _readable(self, fd: int, _events: FdEvent, group: _GroupSocket) -> None:
        now = self.loop.clock.now_ns()
        sessions = self._sessions
        drop = self._drop
        gate = self._gate
        sock = group.sock
        only = group.only
        buf = self._buf
        view = self._view
        # Just connected: what was queued before came from anyone, so read with senders until none is left.
        settling = only is not None and not group.settled
        if settling:
            only = None
        drain = settling  # read on after the first datagram (DrainGate: a burst; settling: until empty)
        for i in range(MAX_DRAIN):
            if i and not drain:
                break
            try:
                if only is not None:  # connected to the only source: no sender address to read
                    size = sock.recv_into(buf)
                    addr = only.sender
                else:
                    size, addr = sock.recvfrom_into(buf)
            except (BlockingIOError, InterruptedError):
                if settling:
                    group.settled = True
                break
            except OSError as exc:
                self.log.debug("LBT-RM: receive error: %s", exc)
                break
            data = view[:size]
            if not drain:
                drain = gate.drain(fd, now)  # before the datagram's callbacks can cause an answer
            if drop is not None and drop(data):
                self.dgrams_dropped_test += 1
                continue
            if len(data) < 8:
                self.dgrams_dropped_unknown += 1  # too short to name a session
                continue
            sid = _SID.unpack_from(data, 4)[0]
            if only is not None:
                session = only if sid == only.session_id else None
            else:
                session = sessions.get((addr[0], sid))  # an IPv4 socket's address: (host, port)
            if session is None:
                self.dgrams_dropped_unknown += 1  # a session this context has not joined, or garbage
                continue
            if group.fresh and addr == session.sender:
                settling = self._connect(group, session)
                drain = drain or settling
            session.datagram(data, addr, now)
        gate.ended()

    def _connect(self, group: _GroupSocket, session: RmReceiverSession) -> bool:
        """Connect the group socket to the source of its only session (see the module docstring)."""
        group.fresh = False
        try:
            group.sock.connect(session.sender)
        except OSError as exc:  # stays unconnected: every read then names its sender
            self.log.debug("LBT-RM: group socket not connected to %s:%d: %s", *session.sender, exc)
            return False
        group.only = session
        group.settled = False
        return True

    def _dissolve(self, group: _GroupSocket) -> None:
        """Undo :meth:`_connect` for good: a second session joined the socket."""
        group.fresh = False
        if group.only is None:
            return
        group.only = None
        dissolve(group.sock, self.log, "LBT-RM: a group socket")

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
            group = self._groups.pop(session.socket_key, None)
            if group is not None:
                close_socket(self.loop, group.sock)

    def close(self) -> None:
        for session in list(self._sessions.values()):
            session.on_end = lambda reason: None
            session.close("the context is closing")
        for group in self._groups.values():
            close_socket(self.loop, group.sock)
        self._groups.clear()
        if self._nak_sock is not None:
            self._nak_sock.close()
            self._nak_sock = None
