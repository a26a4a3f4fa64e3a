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

**Sending never hops threads** (ARCHITECTURE.md 3).  ``send`` encodes into the session's batch buffer
under the session lock and writes to the sockets from the caller's thread when implicit batching says
so (seed 8.6.1: the batch reaches ``implicit_batching_minimum_length``; the next message would overflow
the datagram; ``FLUSH``; or the oldest message has waited ``implicit_batching_interval``).  What a
socket does not take at once is kept per connection and written by the context thread when the socket
becomes writable.

**Pacing** (``transport_tcp_multiple_receiver_behavior``, seed 2.10, 6.1.3): ``normal`` is receiver
paced: when the bytes kept for slow receivers reach ``transport_session_maximum_buffer``, blocking sends
wait and non-blocking sends raise :class:`~openum.WouldBlock`, and a ``WAKEUP`` source event follows
once the buffers drain.  ``source_paced`` never blocks: a receiver whose buffer is full misses whole
datagrams, which its delivery controller reports as unrecoverable loss.
"""

from __future__ import annotations

import random
import socket
from dataclasses import dataclass, field
from typing import Any

from openum.config import SourceAttributes
from openum.runtime import EventLoop, FdEvent
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
    ``blocked``: sends that waited or raised WouldBlock.  ``drops``: datagrams not sent to a slow receiver
    (source_paced).  ``clients_rejected``: connections closed for a stale session id.
    """

    num_clients: int
    bytes_buffered: int
    msgs_sent: int
    bytes_sent: int
    datagrams_sent: int
    fragments_sent: int
    tsnis_sent: int
    blocked: int
    drops: int
    clients_rejected: int


@dataclass(eq=False)
class _Client:
    sock: socket.socket
    peer: tuple[str, int]
    out: bytearray = field(default_factory=bytearray)
    decoder: StreamDecoder = field(default_factory=StreamDecoder)
    writing: bool = False
    confirmed: bool = False


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
        super().__init__(loop, log, attrs, datagram_max, ("drops", "clients_rejected"))
        self.interface = interface
        self.port = port
        self.session_id = session_id
        self.listener = listener
        self.clients: list[_Client] = []
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
                    client.out += self._hello  # the session-id message goes first (wire §5.3)
                    self._maybe_buffered = True
                self.clients.append(client)
                self._write_client(client)
                if client.out and not client.writing:
                    client.writing = True
                    self.loop.modify_fd(conn.fileno(), FdEvent.READ | FdEvent.WRITE)
            self.log.debug(
                "TCP session %s:%d: receiver %s:%d connected", self.interface, self.port, *client.peer
            )
            self.notify(EVENT_CONNECT, client.peer)  # CONNECT to every source on the session (seed 2.11.2)

    def _client_event(self, _fd: int, events: FdEvent, client: _Client) -> None:
        if events & FdEvent.READ:
            self._client_readable(client)
        if events & FdEvent.WRITE and client in self.clients:
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
            self._drop(client, f"sent garbage ({exc})")
            return
        for view in messages:
            try:
                msg, _ = decode_message_at(view)
            except WireError as exc:
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
                client.confirmed = True

    def _drop(self, client: _Client, why: str) -> None:
        with self.lock:
            if client not in self.clients:
                return
            self.clients.remove(client)
            wake = self._release_blocked()
        try:
            self.loop.unregister_fd(client.sock.fileno())
        except Exception:  # the loop may be closing
            pass
        client.sock.close()
        self.log.debug("TCP session %s:%d: receiver %s:%d %s", self.interface, self.port, *client.peer, why)
        self._wake(wake)
        self.notify(EVENT_DISCONNECT, client.peer)  # DISCONNECT

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
        del client.out[:sent]

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
        return self._buffered() < self.max_buffer

    def _blocked_reason(self) -> str:
        return (
            f"TCP session {self.interface}:{self.port}: {self._buffered()} bytes are waiting for slow "
            f"receivers (transport_session_maximum_buffer {self.max_buffer})"
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
                if not client.writing:
                    client.writing = True
                    self.loop.modify_fd(client.sock.fileno(), FdEvent.READ | FdEvent.WRITE)

    # -- statistics and closing --------------------------------------------------------------------
    def statistics(self) -> TcpSourceStatistics:
        with self.lock:
            return TcpSourceStatistics(
                num_clients=len(self.clients), bytes_buffered=self._buffered(), **self._counters()
            )

    def close(self) -> None:
        if not self._close_base():
            return
        with self.lock:
            clients = list(self.clients)
            self.clients.clear()
        try:
            self.loop.unregister_fd(self.listener.fileno())
        except Exception:  # the loop may be closed already
            pass
        self.listener.close()
        for client in clients:
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
