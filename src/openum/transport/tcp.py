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
so (seed 8.6.1: the batch exceeds ``implicit_batching_minimum_length``; the next message would overflow
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

import errno
import itertools
import random
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openum._errors import ClosedError, InvalidStateError, SystemCallError, WouldBlock
from openum.config import REGISTRY, SourceAttributes
from openum.runtime import NS_PER_MS, EventLoop, FdEvent, in_context_callback
from openum.transport._interfaces import resolve_interface
from openum.wire import WireError
from openum.wire.lbmc import (
    AppHeaderChain,
    FragmentHeader,
    LbmcMessage,
    MessageType,
    PropertiesBlock,
    PropertiesLengthElement,
    SessionIdHeader,
    TsniHeader,
    control_message,
    decode_message_at,
    encode_data_into,
    encode_message,
    encode_properties,
)
from openum.wire.lbttcp import StreamDecoder, session_id_message

__all__ = ["TcpSessionPool", "TcpSourceSession", "TcpSourceStatistics"]

#: Source options that belong to the TCP transport session (first source wins, seed 3.3.3).
SESSION_OPTIONS = tuple(
    name
    for name in REGISTRY.names("source")
    if REGISTRY.lookup("source", name).session
    and (
        name.startswith(("transport_tcp_", "implicit_batching_", "transport_session_")) or name == "transport"
    )
)

DATA_HEADER = 12
FRAGMENT_OVERHEAD = 28  # data header + FRAG extension header
PROPERTIES_FRAGMENT_OVERHEAD = 40  # ... plus the properties-length chain element
MAX_LBMC = 65535  # msglen is 16 bits
SQN_MASK = 0xFFFFFFFF

SourceEventCallback = Callable[[int, Any], Any]


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


class TcpSourceSession:
    """One listening TCP transport session: its receivers, batch buffer and flow control."""

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
        self.loop = loop
        self.interface = interface
        self.port = port
        self.session_id = session_id
        self.attrs = attrs
        self.listener = listener
        self.log = log
        self.topics: dict[int, Any] = {}  # topic index -> the source (an object with on_session_event)
        self._indices = itertools.count(1)
        self.clients: list[_Client] = []
        self.closed = False
        self.lock = threading.Lock()
        self._unblocked = threading.Condition(self.lock)
        behavior = attrs.get("transport_tcp_multiple_receiver_behavior")
        if behavior == "bounded_latency":
            log.warning(
                "transport_tcp_multiple_receiver_behavior bounded_latency is deprecated (UM 6.9); "
                "the session behaves as source_paced"
            )
            behavior = "source_paced"
        self.receiver_paced = behavior == "normal"
        self.max_buffer: int = attrs.get("transport_session_maximum_buffer")
        self.batch_min: int = attrs.get("implicit_batching_minimum_length")
        self.batch_interval_ms: int = attrs.get("implicit_batching_interval")
        self.datagram_max: int = min(context_attrs.get("transport_tcp_datagram_max_size"), MAX_LBMC)
        self.max_payload = self.datagram_max - DATA_HEADER
        self._batch = bytearray(self.datagram_max)
        self._blen = 0
        self._batch_timer: int | None = None
        self._wakeup_wanted: set[int] = set()  # topic indices that got WouldBlock
        self._hello = session_id_message(session_id) if session_id is not None else b""
        self._stats = dict.fromkeys(
            (
                "msgs_sent",
                "bytes_sent",
                "datagrams_sent",
                "fragments_sent",
                "tsnis_sent",
                "blocked",
                "drops",
                "clients_rejected",
            ),
            0,
        )
        self._tsni_interval_ms: int = attrs.get("transport_topic_sequence_number_info_interval")
        self._tsni_active_ms: int = attrs.get("transport_topic_sequence_number_info_active_threshold") * 1000
        self._tsni_timer: int | None = None

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.interface, self.port, self.session_id)

    # -- topics ------------------------------------------------------------------------------------
    def allocate_index(self, source: Any) -> int:
        """A topic index for a new source on this session (unique within the session).

        Receivers already connected to the session are connected to the new source too: it gets a
        CONNECT event for each of them (on the context thread).
        """
        index = next(self._indices)
        with self.lock:
            self.topics[index] = source
            peers = [client.peer for client in self.clients]
        for peer in peers:
            self.loop.call_soon(source._session_event, 1, peer)
        return index

    def release_index(self, index: int) -> None:
        with self.lock:
            self.topics.pop(index, None)
            self._wakeup_wanted.discard(index)

    # -- accepting receivers (context thread) -------------------------------------------------------
    def start(self) -> None:
        self.loop.register_fd(self.listener.fileno(), FdEvent.READ, self._accept, None)
        if self._tsni_interval_ms:
            self._tsni_timer = self.loop.schedule_timer(self._tsni_interval_ms, self._tsni_tick)

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
                self.clients.append(client)
                self._write_client(client)
                if client.out and not client.writing:
                    client.writing = True
                    self.loop.modify_fd(conn.fileno(), FdEvent.READ | FdEvent.WRITE)
            self.log.debug(
                "TCP session %s:%d: receiver %s:%d connected", self.interface, self.port, *client.peer
            )
            self._notify(1, client.peer)  # CONNECT to every source on the session (seed 2.11.2)

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
        self._notify(2, client.peer)  # DISCONNECT

    def _notify(self, event: int, info: Any) -> None:
        for source in list(self.topics.values()):
            source._session_event(event, info)

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

    def _deliver(self, data: bytes) -> None:
        """Write one datagram to every receiver (lock held)."""
        self._stats["datagrams_sent"] += 1
        for client in self.clients:
            if client.out:
                if not self.receiver_paced and len(client.out) + len(data) > self.max_buffer:
                    self._stats["drops"] += 1  # source_paced: this slow receiver misses the datagram
                    continue
                client.out += data
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
                if not client.writing:
                    client.writing = True
                    self.loop.modify_fd(client.sock.fileno(), FdEvent.READ | FdEvent.WRITE)

    def _flush_locked(self) -> None:
        if self._blen:
            data = bytes(self._batch[: self._blen])
            self._blen = 0
            self._deliver(data)

    def _release_blocked(self) -> list[int]:
        """When the buffers drained below the cap: wake blocked senders; topics owed a WAKEUP event."""
        if self.receiver_paced and self._buffered() >= self.max_buffer:
            return []
        self._unblocked.notify_all()
        wake = list(self._wakeup_wanted)
        self._wakeup_wanted.clear()
        return wake

    def _wake(self, topic_indices: list[int]) -> None:
        for index in topic_indices:
            source = self.topics.get(index)
            if source is not None:
                source._session_event(3, None)  # WAKEUP, on the context thread (seed 2.11.3)

    def _wait_room(self, topic_index: int, nonblock: bool) -> None:
        """Flow control before a send (lock held): block or raise WouldBlock while receivers lag."""
        if not self.receiver_paced:
            return
        while self._buffered() >= self.max_buffer:
            if self.closed:
                raise ClosedError("the source's transport session is closed")
            self._stats["blocked"] += 1
            if nonblock:
                self._wakeup_wanted.add(topic_index)
                raise WouldBlock(
                    f"TCP session {self.interface}:{self.port}: {self._buffered()} bytes are waiting for "
                    f"slow receivers (transport_session_maximum_buffer {self.max_buffer}); a WAKEUP source "
                    "event follows when they catch up"
                )
            if in_context_callback():
                raise InvalidStateError(
                    "a blocking send from a context-thread callback would deadlock (the context thread is "
                    "the one that drains the buffers); send with SendFlags.NONBLOCK there (seed 2.12.1)"
                )
            self._unblocked.wait(1.0)

    # -- the send path ----------------------------------------------------------------------------
    def send(
        self,
        source: Any,
        data: bytes | bytearray | memoryview,
        *,
        flush: bool,
        nonblock: bool,
        hold: bool = False,
        properties: PropertiesBlock | None = None,
    ) -> int:
        """Send one application message of ``source`` (its ``topic_index`` and next sequence number,
        ``_next_sqn``, which this advances under the session lock so concurrent senders stay ordered).

        ``hold`` keeps the batch from being flushed for its size (explicit batching, seed 8.6.4).
        Returns the topic sequence number of the (last fragment of the) message.
        """
        with self.lock:
            if self.closed:
                raise ClosedError("the source's transport session is closed")
            topic_index = source.topic_index
            self._wait_room(topic_index, nonblock)
            sqn: int = source._next_sqn
            size = len(data)
            if properties is None and size <= self.max_payload:
                if self._blen + DATA_HEADER + size > self.datagram_max:
                    self._flush_locked()  # never overflow the datagram (seed 8.6.1, rule 3)
                self._blen = encode_data_into(self._batch, self._blen, topic_index, sqn, data)
                used = 1
                self._stats["bytes_sent"] += size
            else:
                used = self._send_large(topic_index, sqn, data, properties)
            self._stats["msgs_sent"] += 1
            source._next_sqn = (sqn + used) & SQN_MASK
            if flush or (self._blen >= self.batch_min and not hold):
                self._flush_locked()
            elif self._blen and self._batch_timer is None:
                self._batch_timer = self.loop.schedule_timer(self.batch_interval_ms, self._batch_expired)
            source._last_send_ns = self.loop.clock.now_ns()
        return (sqn + used - 1) & SQN_MASK

    def _append_message(self, encoded: bytes) -> None:
        if self._blen + len(encoded) > self.datagram_max:
            self._flush_locked()
        self._batch[self._blen : self._blen + len(encoded)] = encoded
        self._blen += len(encoded)

    def _send_large(
        self,
        topic_index: int,
        sqn: int,
        data: bytes | bytearray | memoryview,
        properties: PropertiesBlock | None,
    ) -> int:
        """Messages with properties or larger than a datagram: LBMC fragments (seed 8.7, 10.11)."""
        if (
            properties is not None
            and len(data) + len(encode_properties(properties)) + 40 <= self.datagram_max
        ):
            self._append_message(
                encode_message(LbmcMessage(MessageType.DATA, topic_index, sqn, (), data, properties))
            )
            self._stats["bytes_sent"] += len(data)
            return 1
        whole = bytes(data)
        headers_extra: tuple[AppHeaderChain, ...] = ()
        overhead = FRAGMENT_OVERHEAD
        if properties is not None:
            block = encode_properties(properties)
            whole += block
            headers_extra = (AppHeaderChain((PropertiesLengthElement(len(block)),)),)
            overhead = PROPERTIES_FRAGMENT_OVERHEAD
        chunk = self.datagram_max - overhead
        total = len(whole)
        count = (total + chunk - 1) // chunk
        for i in range(count):
            offset = i * chunk
            piece = whole[offset : offset + chunk]
            frag = FragmentHeader(sqn, offset, total)
            msg = LbmcMessage(
                MessageType.DATA, topic_index, (sqn + i) & SQN_MASK, (frag, *headers_extra), piece
            )
            self._append_message(encode_message(msg))
            self._flush_locked()  # each fragment is its own datagram
        self._stats["fragments_sent"] += count
        self._stats["bytes_sent"] += len(data)
        return count

    def flush(self) -> None:
        with self.lock:
            self._flush_locked()

    def _batch_expired(self, _clientd: Any) -> None:
        with self.lock:
            self._batch_timer = None
            self._flush_locked()

    # -- TSNI (seed 8.9) -------------------------------------------------------------------------
    def _tsni_tick(self, _clientd: Any) -> None:
        self._tsni_timer = None
        if self.closed:
            return
        now = self.loop.clock.now_ns()
        interval_ns = self._tsni_interval_ms * NS_PER_MS
        records: list[tuple[int, int]] = []
        for index, source in list(self.topics.items()):
            last = source._last_send_ns
            if last is None:
                continue  # nothing sent yet: nothing to tell
            idle = now - last
            if idle >= interval_ns and (not self._tsni_active_ms or idle <= self._tsni_active_ms * NS_PER_MS):
                records.append((index, (source._next_sqn - 1) & SQN_MASK))
        if records:
            with self.lock:
                for start in range(0, len(records), TsniHeader.MAX_RECORDS):
                    chunk = tuple(records[start : start + TsniHeader.MAX_RECORDS])
                    self._append_message(encode_message(control_message(TsniHeader(chunk))))
                    self._stats["tsnis_sent"] += len(chunk)
                self._flush_locked()
        self._tsni_timer = self.loop.schedule_timer(self._tsni_interval_ms, self._tsni_tick)

    # -- statistics and closing --------------------------------------------------------------------
    def statistics(self) -> TcpSourceStatistics:
        with self.lock:
            return TcpSourceStatistics(
                num_clients=len(self.clients), bytes_buffered=self._buffered(), **self._stats
            )

    def close(self) -> None:
        with self.lock:
            if self.closed:
                return
            self._flush_locked()
            self.closed = True
            self._unblocked.notify_all()
            clients = list(self.clients)
            self.clients.clear()
        for timer in (self._batch_timer, self._tsni_timer):
            if timer is not None:
                try:
                    self.loop.cancel_timer(timer)
                except Exception:
                    pass
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


class TcpSessionPool:
    """The context's TCP sessions: lazy activation, round-robin assignment, explicit ports."""

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random | None = None
    ) -> None:
        self.loop = loop
        self.log = log
        self.interface = interface
        self.context_attrs = context_attrs
        self.rng = rng or random.Random()
        self.port_low: int = context_attrs.get("transport_tcp_port_low")
        self.port_high: int = context_attrs.get("transport_tcp_port_high")
        self.maximum_ports: int = context_attrs.get("transport_tcp_maximum_ports")
        self._implicit: list[TcpSourceSession] = []
        self._pool: list[TcpSourceSession] = []  # implicit sessions plus explicit ones (seed 2.9.2)
        self._next = 0

    @property
    def sessions(self) -> list[TcpSourceSession]:
        return list(self._pool)

    def session_for(self, attrs: SourceAttributes) -> TcpSourceSession:
        """The session a new source goes to (activating one if needed)."""
        explicit = attrs.get("transport_tcp_port")
        if explicit:
            for session in self._pool:
                if session.port == explicit:
                    self._check_first_source_wins(session, attrs)
                    return session
            session = self._activate(attrs, [explicit])
            self._pool.append(session)
            return session
        # Round-robin over the pool's slots: active sessions, then the implicit ones not yet activated.
        not_activated = max(1, self.maximum_ports) - len(self._implicit)
        slots = len(self._pool) + max(0, not_activated)
        slot = self._next % slots
        self._next = slot + 1
        if slot >= len(self._pool):
            session = self._activate(attrs, self._free_ports())
            self._implicit.append(session)
            self._pool.append(session)
            return session
        session = self._pool[slot]
        self._check_first_source_wins(session, attrs)
        return session

    def _free_ports(self) -> list[int]:
        used = {s.port for s in self._pool}
        return [p for p in range(self.port_low, self.port_high + 1) if p not in used]

    def _activate(self, attrs: SourceAttributes, ports: list[int]) -> TcpSourceSession:
        interface_spec = attrs.get("transport_tcp_interface")
        interface = resolve_interface(interface_spec) if interface_spec else self.interface
        last: OSError | None = None
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                if attrs.get("transport_tcp_reuseaddr"):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((interface, port))
                sock.listen(attrs.get("transport_tcp_listen_backlog") or 5)
                sock.setblocking(False)
            except OSError as exc:
                sock.close()
                if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                    raise SystemCallError(
                        f"TCP transport: cannot listen on {interface}:{port}: {exc.strerror}"
                    ) from exc
                last = exc
                continue
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
        span = f"{ports[0]}-{ports[-1]}" if ports else f"{self.port_low}-{self.port_high}"
        reason = last.strerror if last else "every port of the range is taken by this context"
        raise SystemCallError(
            f"TCP transport: no free port on {interface} in {span} (transport_tcp_port_low/high, "
            f"transport_tcp_maximum_ports): {reason}"
        )

    def _check_first_source_wins(self, session: TcpSourceSession, attrs: SourceAttributes) -> None:
        for name in SESSION_OPTIONS:
            if attrs.is_set(name) and attrs.get(name) != session.attrs.get(name):
                self.log.warning(
                    "source option %s=%s is ignored: the TCP session on port %d already uses %s from its "
                    "first source (seed 3.3.3)",
                    name,
                    attrs.get_str(name),
                    session.port,
                    session.attrs.get_str(name),
                )

    def release(self, session: TcpSourceSession) -> None:
        """Close a session whose last source was deleted (its receivers see EOS, seed 2.11.1)."""
        if session in self._pool:
            self._pool.remove(session)
        if session in self._implicit:
            self._implicit.remove(session)
        session.close()

    def close(self) -> None:
        for session in self._pool:
            session.close()
        self._pool.clear()
        self._implicit.clear()
