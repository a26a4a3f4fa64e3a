"""The LBT-RU transport over real sockets: reliable unicast UDP (seed 2.9.2, 6.2, 8.10, 2.12.1).

**Source side.** A context's LBT-RU sessions are pooled like TCP's (seed 2.9.2): sources are assigned
round-robin over at most ``transport_lbtru_maximum_ports`` sessions, each bound to the first free UDP
port of ``transport_lbtru_port_low..high`` (14380-14389) on ``transport_lbtru_interface`` (else the
context's ``default_interface``); ``transport_lbtru_port`` names one explicitly.  A session has a random
session id (advertised, and carried in every packet with ``transport_lbtru_use_session_id``), accepts
receivers ("clients") that connect with a CREQ, sends every datagram to each of them, repairs per client
and drops a client silent for ``transport_lbtru_client_activity_timeout``.  Sources on the session get
``CONNECT``/``DISCONNECT`` events as clients come and go.  Rate control is shared by the context's LBT-RU
sessions (``transport_lbtru_data_rate_limit`` / ``retransmit_rate_limit`` per ``rate_interval``; every
unicast copy counts).

Each connected client gets a socket of its own (on Linux, :data:`CLIENT_SOCKETS`): bound to the session's
address and port next to the session's socket (``SO_REUSEPORT``, which only sockets of the same user may
share) and connected to the client.  Data and retransmissions for the client leave from it, so from the
session's port as before, without ``sendto``'s per-datagram address parsing and route lookup (a round trip
across processes 0.7 us shorter); the kernel hands the client's CREQs, ACKs and NAKs to it and everyone
else's to the session's socket, and both are read.  The socket closes when the client goes (timed out, or
the session closes).  The session's socket gets ``SO_REUSEPORT`` only once bound, so a pool looking for a
free port still finds it taken.  Should a client's socket fail to open, the client is served from the
session's socket.

**Receiver side.** One UDP socket per context, bound to the first free port of the receiver's
``transport_lbtru_port_low..high`` (14360-14379) on ``transport_lbtru_interface`` (else
``default_interface``): it sends the CREQs, ACKs and NAKs of every joined session and receives their
data, told apart by the source's address.  A datagram from an address the context has not joined is
counted (``lbtru_dgrams_dropped_unknown``) and dropped.

While the socket serves the one session it was opened for (the common case: one source), it is
*connected* to that source (on Linux): the kernel then keeps other senders' datagrams off it, and each
read needs no sender address (``recvfrom`` formats one per datagram; the kernel also finds a connected
socket early, with its route).  A round trip across processes is 2-3 us shorter.  The association is
dissolved for good as soon as the set of sessions changes (a second source, the first one leaving), so
datagrams queued from then on are told apart by their address again; datagrams queued before the
connect are read with their address right after it.  Strangers' datagrams sent to a connected socket
are dropped by the kernel, not counted.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

from openum.config import SourceAttributes
from openum.protocol.reliable import (
    Outgoing,
    RateController,
    ReceiverConnected,
    ReceiverDisconnected,
    RuReceiver,
    RuReceiverParams,
    RuSource,
    RuSourceParams,
    SourceEvent,
)
from openum.runtime import EventLoop, FdEvent
from openum.transport._interfaces import resolve_interface
from openum.transport._pool import PortSessionPool, bind_first_free, session_options
from openum.transport._reliable import (
    CAN_DISCONNECT,
    MAX_DRAIN,
    RECV_SIZE,
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
from openum.wire.lbmr import LbtruTransport

__all__ = ["RuReceiverSession", "RuReceiving", "RuSessionPool", "RuSourceSession"]

Address = tuple[str, int]

#: Whether a receiver socket may be connected to its only source: needs a way to dissolve the association
#: again (:func:`~openum.transport._reliable.disconnect`).
_CONNECT_ONLY_SOURCE = CAN_DISCONNECT

#: Source options of an LBT-RU session (first source wins, seed 3.3.3).
SESSION_OPTIONS = session_options("transport_lbtru_")


def _udp_socket(interface: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((interface, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


#: Whether each client of a source session gets a socket of its own (see the module docstring): Linux's
#: SO_REUSEPORT, whose connected members take only their peer's datagrams.
CLIENT_SOCKETS: Final = SIBLING_SOCKETS


def client_socket(shared: socket.socket, client: Address) -> socket.socket:
    """A socket of ``client``'s own next to the session's ``shared`` one (:func:`connected_sibling`):
    datagrams sent on it leave from the session's address and port, as from the shared socket, without
    ``sendto``'s address conversion and route lookup.  The kernel delivers the client's datagrams (CREQs,
    ACKs, NAKs) to it, everyone else's to the shared socket, which must stay unconnected."""
    return connected_sibling(shared, socket.socket(socket.AF_INET, socket.SOCK_DGRAM), client)


class RuSourceSession(ReliableSourceSession):
    """One LBT-RU transport session of a source context: a UDP port and its connected clients."""

    TRANSPORT = "LBT-RU"
    OPTION_PREFIX = "transport_lbtru_"

    def __init__(
        self,
        loop: EventLoop,
        log: Any,
        attrs: SourceAttributes,
        context_attrs: Any,
        sock: socket.socket,
        session_id: int,
        rate: RateController,
        lock: threading.Lock,
    ) -> None:
        params = RuSourceParams.from_options(attrs.get, context_attrs.get)
        engine = RuSource(session_id=session_id, params=params, rate=rate, now_ns=loop.clock.now_ns())
        super().__init__(loop, log, attrs, engine, sock, rate, lock)
        self.ru: RuSource = engine
        self.session_id = session_id
        self.use_session_id = params.use_session_id
        # Each connected client's own socket (CLIENT_SOCKETS), by the client's address.
        self._client_socks: dict[Address, socket.socket] = {}
        # Every connected client's own socket and address, when each client has one; listed when the
        # engine's ``membership`` was _writers_of (-1: not listed).  New datagrams go straight to them
        # while it still is (lock held).
        self._writers: list[tuple[socket.socket, Address]] = []
        self._writers_of = -1

    def transport_info(self) -> LbtruTransport:
        """What topic resolution advertises for the session's sources."""
        return LbtruTransport(self.interface, self.port, self.session_id if self.use_session_id else None)

    def _connected_peers(self) -> list[Any]:
        return list(self.ru.clients)

    def _input(
        self, data: bytes, sender: Address, now: int
    ) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        return self.ru.datagram_received(data, sender, now)

    def _close_engine(self) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        return self.ru.close()  # an RST to every client ends their sessions (EOS)

    # -- a socket of each client's own (see the module docstring) -----------------------------------------
    def _write_data(self, datagram: bytes) -> None:
        if self._writers_of != self.ru.membership:  # clients came or went since: by address
            super()._write_data(datagram)
            return
        for own, client in self._writers:
            try:
                own.send(datagram)
            except OSError as exc:  # ECONNREFUSED: an ICMP error from a receiver that went away
                self._write_failed(exc, client, expected=True)

    def _write(self, datagram: bytes, destination: Address | None) -> None:
        own = self._client_socks.get(destination) if destination is not None else None
        if own is None or destination is None:
            super()._write(datagram, destination)
            return
        try:
            own.send(datagram)
        except OSError as exc:  # ECONNREFUSED: an ICMP error from a receiver that went away (it times out)
            self._write_failed(exc, destination, expected=True)

    def _session_events(self, events: Sequence[SourceEvent]) -> None:
        if CLIENT_SOCKETS:
            for event in events:
                if isinstance(event, ReceiverConnected):
                    self._open_client_socket(event.address)
                elif isinstance(event, ReceiverDisconnected):
                    self._close_client_socket(event.address)
            if events:
                self._list_writers()
        super()._session_events(events)

    def _list_writers(self) -> None:
        """List the clients' own sockets for :meth:`_write_data`, if every connected client has one."""
        with self.lock:
            engine = self.ru
            clients = engine.clients
            socks = self._client_socks
            if self.closed or not all(client in socks for client in clients):
                self._writers_of = -1
                return
            self._writers = [(socks[client], client) for client in clients]
            self._writers_of = engine.membership

    def _open_client_socket(self, client: Address) -> None:
        with self.lock:
            if self.closed or client in self._client_socks:
                return
            try:
                own = client_socket(self.sock, client)
            except OSError as exc:  # the client is served from the shared socket
                self.log.debug("%s: no socket of its own for %s:%d: %s", self.label, *client, exc)
                return
            self._client_socks[client] = own
            self.loop.register_fd(own.fileno(), FdEvent.READ, self._readable, own)

    def _close_client_socket(self, client: Address) -> None:
        with self.lock:
            own = self._client_socks.pop(client, None)
        if own is not None:
            close_socket(self.loop, own)

    def close(self) -> None:
        super().close()
        with self.lock:
            owns = list(self._client_socks.values())
            self._client_socks.clear()
            self._writers, self._writers_of = [], -1
        for own in owns:
            close_socket(self.loop, own)


class RuSessionPool(PortSessionPool[RuSourceSession]):
    """The context's LBT-RU source sessions."""

    PORT_OPTION = "transport_lbtru_port"
    KIND = "LBT-RU session"

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random | None = None
    ) -> None:
        super().__init__(
            loop,
            context_attrs,
            interface,
            log,
            rng,
            port_low=context_attrs.get("transport_lbtru_port_low"),
            port_high=context_attrs.get("transport_lbtru_port_high"),
            maximum_ports=context_attrs.get("transport_lbtru_maximum_ports"),
            session_option_names=SESSION_OPTIONS,
            range_hint="transport_lbtru_port_low/high, transport_lbtru_maximum_ports",
        )
        self.rate = RateController.from_options(context_attrs.get, "lbtru", now_ns=loop.clock.now_ns())
        self.lock = threading.Lock()  # the sessions' engines share the rate controller

    def _open(self, attrs: SourceAttributes, port: int) -> RuSourceSession:
        spec = attrs.get("transport_lbtru_interface")
        sock = _udp_socket(resolve_interface(spec) if spec else self.interface, port)
        set_buffer(
            sock,
            socket.SO_SNDBUF,
            self.context_attrs.get("transport_lbtru_source_socket_buffer"),
            self.log,
            f"LBT-RU source port {port}",
        )
        session_id = self.rng.randrange(1, 1 << 32)
        session = RuSourceSession(
            self.loop, self.log, attrs.copy(), self.context_attrs, sock, session_id, self.rate, self.lock
        )
        session.start()
        self.log.debug("%s activated (session id %08x)", session.label, session_id)
        return session


# -- receiving ----------------------------------------------------------------------------------------


class RuReceiverSession(ReliableReceiverSession):
    """This context's connection to one source's LBT-RU session."""

    TRANSPORT = "LBT-RU"

    def __init__(
        self,
        owner: RuReceiving,
        transport: LbtruTransport,
        params: RuReceiverParams,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
    ) -> None:
        engine = RuReceiver(
            session_id=transport.session_id,
            source=(transport.ip, transport.port),
            params=params,
            rng=owner.rng,
            now_ns=owner.loop.clock.now_ns(),
        )
        self.transport = transport
        self.source = (transport.ip, transport.port)
        super().__init__(owner.loop, engine, owner.send, owner.forget, on_active, on_end)


class RuReceiving:
    """The context's LBT-RU reception: one socket for every joined session."""

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random
    ) -> None:
        self.loop = loop
        self.log = log
        self.default_interface = interface
        self.rng = rng
        self.rcvbuf: int = context_attrs.get("transport_lbtru_receiver_socket_buffer")
        self._sock: socket.socket | None = None
        self._sessions: dict[Address, RuReceiverSession] = {}
        self._drop = loss_hook_from_env()
        self._gate = DrainGate(loop.clock.now_ns)  # whether an event reads past its first datagrams
        self._buf, self._view = receive_buffer()  # every datagram is read into it, then handled
        # The session the socket is connected to (the only one), or None: reads name their sender.
        self._only: RuReceiverSession | None = None
        self._connected = False
        self.dgrams_dropped_unknown = 0
        self.dgrams_dropped_test = 0

    @property
    def sessions(self) -> list[RuReceiverSession]:
        return list(self._sessions.values())

    @property
    def address(self) -> Address | None:
        """The receiving socket's address (once a session was joined)."""
        if self._sock is None:
            return None
        host, port = self._sock.getsockname()[:2]
        return (host, port)

    def join(
        self,
        transport: LbtruTransport,
        params: RuReceiverParams,
        receiver_attrs: Any,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
    ) -> RuReceiverSession:
        """Connect to the session ``transport`` describes (CREQs start at once)."""
        fresh = self._sock is None
        if fresh:
            self._sock = self._open(receiver_attrs)
        else:
            self._dissolve()  # before the new session's first CREQ: its source must get through
        source = (transport.ip, transport.port)
        old = self._sessions.get(source)
        if old is not None:  # a new session at the same address: the source was restarted
            old.close("replaced by a new session at the same address")
        # Connected before the session sends its first CREQ, so nothing of the source's is queued yet.
        connected = fresh and _CONNECT_ONLY_SOURCE and self._connect(source)
        session = RuReceiverSession(self, transport, params, on_active, on_end)
        self._sessions[source] = session
        if connected:
            self._only = session
        return session

    def _connect(self, source: Address) -> bool:
        """Connect the socket to ``source``, the only one it will serve (see the module docstring)."""
        sock = self._sock
        assert sock is not None
        try:
            sock.connect(source)
        except OSError as exc:  # stays unconnected: every read then names its sender, as with several
            self.log.debug("LBT-RU: receiver socket not connected to %s:%d: %s", *source, exc)
            return False
        self._connected = True
        # Anything queued before the connect came from someone else (the source has not had a CREQ
        # yet): read it with its sender and drop it, so no later read takes it for the source's.
        for _ in range(MAX_DRAIN):
            try:
                _, addr = sock.recvfrom(RECV_SIZE)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError:
                continue
            self.dgrams_dropped_unknown += 1
            self.log.debug("LBT-RU: a datagram from %s:%d before the session began: dropped", *addr)
        self._dissolve()  # still more queued (a flood from somewhere): stay unconnected
        return False

    def _dissolve(self) -> None:
        """Undo :meth:`_connect` for good: the set of sessions changed."""
        self._only = None
        if not self._connected or self._sock is None:
            return
        self._connected = False
        dissolve(self._sock, self.log, "LBT-RU: the receiver socket")

    def _open(self, receiver_attrs: Any) -> socket.socket:
        spec = receiver_attrs.get("transport_lbtru_interface")
        interface = resolve_interface(spec) if spec else self.default_interface
        low: int = receiver_attrs.get("transport_lbtru_port_low")
        high: int = receiver_attrs.get("transport_lbtru_port_high")
        sock = bind_first_free(
            range(low, high + 1),
            lambda port: _udp_socket(interface, port),
            f"LBT-RU receiver on {interface}",
            "receiver transport_lbtru_port_low/high",
        )
        set_buffer(sock, socket.SO_RCVBUF, self.rcvbuf, self.log, "LBT-RU receiver socket")
        self.loop.register_fd(sock.fileno(), FdEvent.READ, self._readable, sock)
        return sock

    def _readable(self, fd: int, _events: FdEvent, sock: socket.socket) -> None:
        now = self.loop.clock.now_ns()
        sessions = self._sessions
        drop = self._drop
        gate = self._gate
        buf = self._buf
        view = self._view
        drain = False  # read on after the first datagram (DrainGate: a burst)
        for i in range(MAX_DRAIN):
            if i and not drain:
                break
            only = self._only
            try:
                if only is not None:  # connected to the only source: no sender address to read
                    size = sock.recv_into(buf)
                    addr = only.source
                else:
                    size, addr = sock.recvfrom_into(buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:  # e.g. ICMP port unreachable: a source went away
                self.log.debug("LBT-RU: receive error: %s", exc)
                continue
            data = view[:size]
            if not drain:
                drain = gate.drain(fd, now)  # before the datagram's callbacks can cause an answer
            if drop is not None and drop(data):
                self.dgrams_dropped_test += 1
                continue
            # An IPv4 socket's addresses are (host, port) pairs.
            session = only if only is not None else sessions.get(addr)
            if session is None:
                self.dgrams_dropped_unknown += 1  # not a source this context has joined
                continue
            session.datagram(data, addr, now)
        gate.ended()

    def send(self, outgoing: Sequence[Outgoing]) -> None:
        sock = self._sock
        if sock is None:
            return
        for out in outgoing:
            if out.destination is None:
                continue
            try:
                sock.sendto(out.data, out.destination)
            except OSError as exc:
                self.log.debug("LBT-RU: sending to %s:%d failed: %s", *out.destination, exc)

    def forget(self, session: ReliableReceiverSession) -> None:
        assert isinstance(session, RuReceiverSession)
        if self._sessions.get(session.source) is session:
            del self._sessions[session.source]
        self._dissolve()

    def close(self) -> None:
        for session in list(self._sessions.values()):
            session.on_end = lambda reason: None
            session.close("the context is closing")
        if self._sock is not None:
            close_socket(self.loop, self._sock)
            self._sock = None
        self._only = None
        self._connected = False
