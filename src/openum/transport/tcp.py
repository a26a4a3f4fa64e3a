"""The TCP transport, source side (seed 2.9, 2.10, 6.1, 8.6, 8.7; ../shared/wire LBT-TCP).

**Sessions.** A context owns a pool of TCP transport sessions, activated lazily, one listening port
each: sources without ``transport_tcp_port`` are assigned round-robin over at most
``transport_tcp_maximum_ports`` sessions bound to the first free ports of
``transport_tcp_port_low..high``; a source with an explicit ``transport_tcp_port`` uses (or creates) the
session on that port, which then joins the pool (seed 2.9.2).  A session has a random non-zero 32-bit
session id and numbers its topics.  Session options come from its first source; a later source with a
conflicting session option gets a logged warning (seed 3.3.3).

**Wire.** Every connection starts with the TCP session-id control message; then LBMC messages follow
back to back (LBT-TCP has no header of its own).  A receiver answers with its own session-id message;
a receiver presenting a stale id is disconnected (seed 6.1.2).

**Who is a receiver.** With session ids on (``transport_tcp_use_session_id``, the default) an accepted
connection is only *pending* until it presents this session's id: it gets the source's session-id message
and nothing else, it is no receiver (no ``CONNECT``, not in ``num_clients``, no data kept for it, so it can
never pace the source), and it is closed when it has not presented the id within
``transport_tcp_activity_timeout`` (counted in ``clients_unconfirmed``).  Without session ids every
connection is a receiver at once (pre-6.0 peers send nothing).

**Stuck receivers** (UM Concepts Guide, section 2.10.7, "Suspended Receiver Problem").  In receiver-paced
mode a receiver that takes none of the bytes waiting for it for ``transport_tcp_activity_timeout`` is
disconnected (``clients_stalled``), so one suspended receiver holds the source and its other receivers up
for at most that long.  A receiver that reads, however slowly, paces the source as UM's receiver pacing
promises.

**Sending never hops threads** (ARCHITECTURE.md 3).  ``send`` encodes into the session's batch buffer
under the session lock and writes to the sockets from the caller's thread when implicit batching says
so (seed 8.6.1: the batch reaches ``implicit_batching_minimum_length``; the next message would overflow
the datagram; ``FLUSH``; or the oldest message has waited ``implicit_batching_interval``).  What a
socket does not take at once is kept per connection and written by the context thread when the socket
becomes writable.

**Pacing** (``transport_tcp_multiple_receiver_behavior``, seed 2.10, 6.1.3): ``normal`` is receiver
paced: when the bytes kept for slow receivers reach ``transport_session_maximum_buffer``, blocking sends
wait and non-blocking sends raise :class:`~openum.WouldBlock`, and a ``WAKEUP`` source event follows
once the buffers drain (``blocked_ns`` adds up the time blocking sends waited).  ``source_paced`` never
blocks: a receiver whose buffer is full misses whole datagrams, which its delivery controller reports as
unrecoverable loss.
"""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass, field
from typing import Any

from openum.config import SourceAttributes
from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.transport._interfaces import resolve_interface
from openum.transport._pool import PortSessionPool, session_options
from openum.transport._source_session import EVENT_CONNECT, EVENT_DISCONNECT, SourceSessionBase
from openum.wire import WireError
from openum.wire.lbmc import SessionIdHeader, decode_message_at
from openum.wire.lbmr import TcpTransport
from openum.wire.lbttcp import StreamDecoder, session_id_message

__all__ = ["TcpSessionPool", "TcpSourceSession", "TcpSourceStatistics"]

#: Source options that belong to the TCP transport session (first source wins, seed 3.3.3).
SESSION_OPTIONS = session_options("transport_tcp_")

MAX_LBMC = 65535  # msglen is 16 bits


@dataclass(frozen=True, slots=True)
class TcpSourceStatistics:
    """Counters of one TCP source transport session (UM's ``lbm_src_transport_stats_tcp_t`` plus openum's).

    ``num_clients``: receivers connected now.  ``bytes_buffered``: bytes kept for slow receivers now.
    ``msgs_sent``/``bytes_sent``: LBMC messages and bytes handed to the session.  ``datagrams_sent``:
    batches flushed.  ``fragments_sent``: messages that were fragments.  ``tsnis_sent``.
    ``blocked``: sends that waited or raised WouldBlock.  ``blocked_ns``: time blocking sends spent waiting
    for room (nanoseconds, all sends together).  ``drops``: datagrams not sent to a slow receiver
    (source_paced).  ``clients_pending``: connections now waiting to present the session id (no
    receivers yet).  ``clients_rejected``: connections closed for a stale session id.
    ``clients_unconfirmed``: connections closed for not presenting the session id within
    ``transport_tcp_activity_timeout``.  ``clients_stalled``: receivers disconnected for taking no bytes
    for ``transport_tcp_activity_timeout`` while data waited for them (receiver-paced).
    ``clients_malformed``: connections closed for sending bytes that are not LBMC messages.
    """

    num_clients: int
    bytes_buffered: int
    msgs_sent: int
    bytes_sent: int
    datagrams_sent: int
    fragments_sent: int
    tsnis_sent: int
    blocked: int
    blocked_ns: int
    drops: int
    clients_pending: int
    clients_rejected: int
    clients_unconfirmed: int
    clients_stalled: int
    clients_malformed: int


@dataclass(eq=False)
class _Client:
    sock: socket.socket
    peer: tuple[str, int]
    out: bytearray = field(default_factory=bytearray)
    decoder: StreamDecoder = field(default_factory=StreamDecoder)
    writing: bool = False
    confirmed: bool = False
    #: When the bytes kept in ``out`` last moved (``out`` non-empty; 0 while it is empty): the stall clock.
    stalled_since: int = 0
    handshake_timer: int | None = None
    closed: bool = False


class TcpSourceSession(SourceSessionBase):
    """One listening TCP transport session: its connected receivers and their buffers."""

    def __init__(
        self,
        loop: EventLoop,
        interface: str,
        port: int,
        session_id: int | None,
        attrs: SourceAttributes,
        context_attrs: Any,
        listener: socket.socket,
        log: Any,
    ) -> None:
        datagram_max = min(context_attrs.get("transport_tcp_datagram_max_size"), MAX_LBMC)
        super().__init__(
            loop,
            log,
            attrs,
            datagram_max,
            ("drops", "clients_rejected", "clients_unconfirmed", "clients_stalled", "clients_malformed"),
        )
        self.interface = interface
        self.port = port
        self.session_id = session_id
        self.listener = listener
        self.clients: list[_Client] = []  # receivers: connections that presented the session id
        self.pending: list[_Client] = []  # connections that have not (yet): no data goes to them
        behavior = attrs.get("transport_tcp_multiple_receiver_behavior")
        if behavior == "bounded_latency":
            log.warning(
                "transport_tcp_multiple_receiver_behavior bounded_latency is deprecated (UM 6.9); "
                "the session behaves as source_paced"
            )
            behavior = "source_paced"
        self.receiver_paced = behavior == "normal"
        # Set whenever bytes are added to a client's buffer, cleared by _has_room once it has found every
        # buffer empty: while it is clear, nothing is buffered and a send needs no look at the clients.
        self._maybe_buffered = False
        self.max_buffer: int = attrs.get("transport_session_maximum_buffer")
        self._hello = session_id_message(session_id) if session_id is not None else b""
        # UM Concepts Guide, section 2.10.7: one suspended receiver must not stop the source for good.
        self.activity_timeout_ms: int = attrs.get("transport_tcp_activity_timeout")
        self._activity_ns = self.activity_timeout_ms * NS_PER_MS
        self._stall_timer: int | None = None

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.interface, self.port, self.session_id)

    def transport_info(self) -> TcpTransport:
        """What topic resolution advertises for the session's sources."""
        return TcpTransport(self.interface, self.port, self.session_id)

    def _connected_peers(self) -> list[Any]:
        return [client.peer for client in self.clients]

    # -- accepting receivers (context thread) -------------------------------------------------------
    def start(self) -> None:
        self.loop.register_fd(self.listener.fileno(), FdEvent.READ, self._accept, None)
        self.start_timers()

    def _accept(self, _fd: int, _events: FdEvent, _clientd: Any) -> None:
        while True:
            try:
                conn, addr = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.log.warning("TCP session %s:%d: accept failed: %s", self.interface, self.port, exc)
                return
            conn.setblocking(False)
            if self.attrs.get("transport_tcp_nodelay"):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sndbuf = self.attrs.get("transport_tcp_sender_socket_buffer")
            if sndbuf:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            client = _Client(conn, (addr[0], addr[1]))
            # Registered before senders can see it: a send that half-writes to it asks for WRITE events.
            self.loop.register_fd(conn.fileno(), FdEvent.READ, self._client_event, client)
            with self.lock:
                if self._hello:
                    # The session-id message goes first (wire §5.3); the connection becomes a receiver
                    # when it presents this session's id (UM Concepts Guide, section 6.1).
                    client.out += self._hello
                    self.pending.append(client)
                else:
                    client.confirmed = True  # no session ids: pre-6.0 receivers send nothing
                    self.clients.append(client)
                self._write_client(client)
                if client.out and not client.writing:
                    client.writing = True
                    self.loop.modify_fd(conn.fileno(), FdEvent.READ | FdEvent.WRITE)
            if client.confirmed:
                self._connected(client)
            elif self._activity_ns:
                client.handshake_timer = self.loop.schedule_timer(
                    self.activity_timeout_ms, self._handshake_expired, client
                )

    def _connected(self, client: _Client) -> None:
        self.log.debug("TCP session %s:%d: receiver %s:%d connected", self.interface, self.port, *client.peer)
        self.notify(EVENT_CONNECT, client.peer)  # CONNECT to every source on the session (seed 2.11.2)

    def _confirm(self, client: _Client) -> None:
        """``client`` presented this session's id: from now on it is a receiver."""
        with self.lock:
            if client not in self.pending:
                return
            self.pending.remove(client)
            client.confirmed = True
            self.clients.append(client)
            if client.out:
                client.stalled_since = self._now()
                self._maybe_buffered = True
        if client.handshake_timer is not None:
            self.loop.cancel_timer(client.handshake_timer)
            client.handshake_timer = None
        self._connected(client)

    def _handshake_expired(self, client: _Client) -> None:
        client.handshake_timer = None
        with self.lock:
            if client not in self.pending:
                return
            self._stats["clients_unconfirmed"] += 1
        self._drop(
            client,
            f"did not present the session id within {self.activity_timeout_ms} ms "
            "(transport_tcp_activity_timeout)",
        )

    def _client_event(self, _fd: int, events: FdEvent, client: _Client) -> None:
        if events & FdEvent.READ:
            self._client_readable(client)
        if events & FdEvent.WRITE and (client in self.clients or client in self.pending):
            wake: list[int] = []
            with self.lock:
                self._write_client(client)
                if not client.out:
                    client.writing = False
                    self.loop.modify_fd(client.sock.fileno(), FdEvent.READ)
                wake = self._release_blocked()
            self._wake(wake)

    def _client_readable(self, client: _Client) -> None:
        try:
            data = client.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(client, f"read failed: {exc.strerror or exc}")
            return
        if not data:
            self._drop(client, "closed by the receiver")
            return
        try:
            messages = client.decoder.feed(data)
        except WireError as exc:
            self._stats["clients_malformed"] += 1
            self._drop(client, f"sent garbage ({exc})")
            return
        for view in messages:
            try:
                msg, _ = decode_message_at(view)
            except WireError as exc:
                self._stats["clients_malformed"] += 1
                self._drop(client, f"sent a malformed message ({exc})")
                return
            sid = msg.header(SessionIdHeader)
            if sid is not None:
                if self.session_id is not None and sid.session_id != self.session_id:
                    self._stats["clients_rejected"] += 1
                    self._drop(
                        client,
                        f"presented session id {sid.session_id:08x}, this session is "
                        f"{self.session_id:08x} (stale transport information)",
                    )
                    return
                if not client.confirmed:
                    self._confirm(client)

    def _drop(self, client: _Client, why: str) -> None:
        with self.lock:
            if client in self.clients:
                self.clients.remove(client)
            elif client in self.pending:
                self.pending.remove(client)
            else:
                return
        self._finish((client, why))

    def _finish(self, dropped: tuple[_Client, str]) -> None:
        """Close a connection already taken off the session's lists (context thread)."""
        client, why = dropped
        if client.closed:
            return
        client.closed = True
        if client.handshake_timer is not None:
            try:
                self.loop.cancel_timer(client.handshake_timer)
            except Exception:  # the loop may be closing
                pass
            client.handshake_timer = None
        try:
            self.loop.unregister_fd(client.sock.fileno())
        except Exception:  # the loop may be closing
            pass
        client.sock.close()
        self.log.debug("TCP session %s:%d: receiver %s:%d %s", self.interface, self.port, *client.peer, why)
        with self.lock:
            wake = self._release_blocked()
        self._wake(wake)
        if client.confirmed:
            self.notify(EVENT_DISCONNECT, client.peer)  # DISCONNECT (a pending one was never CONNECTed)

    # -- stuck receivers (UM Concepts Guide, section 2.10.7) ---------------------------------------
    def _take_stalled(self, now: int) -> list[_Client]:
        """Take off the receivers that took no byte of what waits for them for the activity timeout;
        schedule the next look while others have bytes waiting (lock held, receiver-paced)."""
        stalled: list[_Client] = []
        next_due = 0
        for client in self.clients:
            since = client.stalled_since
            if since and client.out:
                due = since + self._activity_ns
                if due <= now:
                    stalled.append(client)
                elif not next_due or due < next_due:
                    next_due = due
        for client in stalled:
            self.clients.remove(client)
            self._stats["clients_stalled"] += 1
            try:
                client.sock.shutdown(socket.SHUT_RDWR)  # the receiver sees the end at once
            except OSError:
                pass
        if next_due and self._stall_timer is None and not self.closed:
            self._stall_timer = self.loop.schedule_timer((next_due - now) / NS_PER_MS, self._check_stalls)
        return stalled

    def _stall_reason(self) -> str:
        return (
            f"took no data for {self.activity_timeout_ms} ms while {self.max_buffer} bytes or more waited "
            "(transport_tcp_activity_timeout): disconnected"
        )

    def _check_stalls(self, _clientd: Any) -> None:
        with self.lock:
            self._stall_timer = None
            if self.closed:
                return
            stalled = self._take_stalled(self._now())
        for client in stalled:
            self._finish((client, self._stall_reason()))

    def _watch_stall(self, client: _Client) -> None:
        """``client``'s buffer just became non-empty (lock held): start its stall clock."""
        client.stalled_since = self._now()
        if self._activity_ns and self.receiver_paced and self._stall_timer is None and not self.closed:
            self._stall_timer = self.loop.schedule_timer(self.activity_timeout_ms, self._check_stalls)

    # -- writing (caller's thread or context thread, under the lock) ---------------------------------
    def _write_client(self, client: _Client) -> None:
        if not client.out:
            return
        try:
            sent = client.sock.send(client.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return  # the reader side notices the broken connection and drops it
        if sent:
            del client.out[:sent]
            client.stalled_since = self._now() if client.out else 0

    def _buffered(self) -> int:
        return sum(len(c.out) for c in self.clients)

    def _has_room(self) -> bool:
        # Called before every send: nothing to look at while no bytes were buffered since the last time
        # every buffer was found empty; then a plain loop, no generator (usually one or two clients).
        if not self.receiver_paced or not self._maybe_buffered:
            return True
        total = 0
        for client in self.clients:
            if client.out:
                total += len(client.out)
        if not total:
            self._maybe_buffered = False
            return True
        if total < self.max_buffer:
            return True
        # Full: write what the receivers will take now (the context thread does so when their sockets
        # turn writable; a blocked sender in sequential mode relies on this), then look again.
        for client in self.clients:
            self._write_client(client)
        if self._buffered() < self.max_buffer:
            return True
        if not self._activity_ns:
            return False
        # Still full: a receiver stuck past the activity timeout is let go here too, so a sender blocked
        # while no thread runs the context's timers (sequential mode) is held up no longer than that.
        stalled = self._take_stalled(self._now())
        for client in stalled:
            try:
                self.loop.schedule_timer(0, self._finish, (client, self._stall_reason()))
            except Exception:  # the loop is closed: nothing left to notify
                client.closed = True
                client.sock.close()
        return self._buffered() < self.max_buffer

    def _blocked_reason(self) -> str:
        bound = (
            f"; a receiver that takes nothing for {self.activity_timeout_ms} ms is disconnected "
            "(transport_tcp_activity_timeout)"
            if self._activity_ns
            else ""
        )
        return (
            f"TCP session {self.interface}:{self.port}: {self._buffered()} bytes are waiting for slow "
            f"receivers (transport_session_maximum_buffer {self.max_buffer}){bound}"
        )

    def _deliver(self, data: bytes | bytearray) -> None:
        """Write one datagram to every receiver (lock held)."""
        for client in self.clients:
            if client.out:
                if not self.receiver_paced and len(client.out) + len(data) > self.max_buffer:
                    self._stats["drops"] += 1  # source_paced: this slow receiver misses the datagram
                    continue
                client.out += data
                self._maybe_buffered = True
                continue
            try:
                sent = client.sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                continue  # broken: the context thread drops it on its next read
            if sent < len(data):
                # Part of the datagram went out: the rest must follow, or the stream is cut mid-message.
                client.out += memoryview(data)[sent:]
                self._maybe_buffered = True
                self._watch_stall(client)
                if not client.writing:
                    client.writing = True
                    self.loop.modify_fd(client.sock.fileno(), FdEvent.READ | FdEvent.WRITE)

    # -- statistics and closing --------------------------------------------------------------------
    def statistics(self) -> TcpSourceStatistics:
        with self.lock:
            return TcpSourceStatistics(
                num_clients=len(self.clients),
                bytes_buffered=self._buffered(),
                blocked_ns=self._blocked_ns,
                clients_pending=len(self.pending),
                **self._counters(),
            )

    def close(self) -> None:
        if not self._close_base():
            return
        with self.lock:
            clients = [*self.clients, *self.pending]
            self.clients.clear()
            self.pending.clear()
            stall_timer, self._stall_timer = self._stall_timer, None
        timers = [stall_timer, *(c.handshake_timer for c in clients)]
        for timer in timers:
            if timer is not None:
                try:
                    self.loop.cancel_timer(timer)
                except Exception:  # the loop may be closed already
                    pass
        try:
            self.loop.unregister_fd(self.listener.fileno())
        except Exception:  # the loop may be closed already
            pass
        self.listener.close()
        for client in clients:
            client.closed = True
            try:
                self.loop.unregister_fd(client.sock.fileno())
            except Exception:
                pass
            try:
                if client.out:  # best effort: what is buffered goes out before the close
                    client.sock.setblocking(True)
                    client.sock.settimeout(1.0)
                    client.sock.sendall(client.out)
            except OSError:
                pass
            client.sock.close()


class TcpSessionPool(PortSessionPool[TcpSourceSession]):
    """The context's TCP sessions: lazy activation, round-robin assignment, explicit ports (seed 2.9.2)."""

    PORT_OPTION = "transport_tcp_port"
    KIND = "TCP session"

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random | None = None
    ) -> None:
        super().__init__(
            loop,
            context_attrs,
            interface,
            log,
            rng,
            port_low=context_attrs.get("transport_tcp_port_low"),
            port_high=context_attrs.get("transport_tcp_port_high"),
            maximum_ports=context_attrs.get("transport_tcp_maximum_ports"),
            session_option_names=SESSION_OPTIONS,
            range_hint="transport_tcp_port_low/high, transport_tcp_maximum_ports",
        )

    def _open(self, attrs: SourceAttributes, port: int) -> TcpSourceSession:
        interface_spec = attrs.get("transport_tcp_interface")
        interface = resolve_interface(interface_spec) if interface_spec else self.interface
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if attrs.get("transport_tcp_reuseaddr"):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((interface, port))
            sock.listen(attrs.get("transport_tcp_listen_backlog") or 5)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        session_id = self.rng.randrange(1, 1 << 32) if attrs.get("transport_tcp_use_session_id") else None
        session = TcpSourceSession(
            self.loop, interface, port, session_id, attrs.copy(), self.context_attrs, sock, self.log
        )
        session.start()
        self.log.debug(
            "TCP session activated on %s:%d (session id %s)",
            interface,
            port,
            f"{session_id:08x}" if session_id is not None else "none",
        )
        return session
