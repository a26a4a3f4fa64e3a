"""Unicast immediate messaging over TCP: the context's request port and its outgoing UIM connections.

UM Concepts Guide, sections 10.7 (Unicast Immediate Messaging) and 10.12 (Request/Response).

**The request port** (a.k.a. UIM port, :class:`RequestPort`).  Every context that receives unicast
immediate messages, responses or UIM requests listens on a TCP port: ``request_tcp_port`` when it is
set, else the first free port of ``request_tcp_port_low..request_tcp_port_high``, on
``request_tcp_interface`` (else the context's ``default_interface``).  Other contexts connect to it and
send LBMC messages back to back, framed by LBMC's own ``msglen`` exactly like an LBT-TCP stream, but
without a session-id handshake.  Each decoded message (data and control alike) is handed to the
layer above on the context thread.  A connection whose bytes are not LBMC messages is closed (a TCP
stream cannot be resynchronised); the others go on.  Strangers cost a bounded amount: at most
:data:`MAX_INCOMING` connections at once, and ``request_tcp_activity_timeout`` closes connections that
stay silent.

**Outgoing connections** (:class:`UimConnections`).  One TCP connection per destination request port,
opened lazily by the first send (section 10.7.4: the first message waits while the connection is
established) or ahead of it by :meth:`UimConnections.connect` (section 10.7.5: a context that receives a
request connects back to the requester at once).  Sending never blocks: bytes the socket does not take
wait in the connection's send queue, bounded by ``response_session_maximum_buffer``, and the context
thread writes them when the socket turns writable.  A connection nobody holds and nobody sent on for
``response_tcp_deletion_timeout`` is closed; while bytes still wait, or while a response object holds
it (:meth:`UimConnections.hold`), it stays (section 10.7.5).  Delivery is not guaranteed (section
10.7.1): bytes queued on a connection that fails are dropped, counted and logged, and the next send to
that destination raises :class:`UimConnectionError` once.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from openum._errors import LBM_EOS, ClosedError, InvalidStateError, OpenUMError, SystemCallError, WouldBlock
from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.transport._interfaces import InterfaceError, resolve_interface
from openum.transport._pool import bind_first_free
from openum.wire import WireError
from openum.wire.lbmc import LbmcMessage, decode_message
from openum.wire.lbttcp import StreamDecoder

__all__ = [
    "MAX_INCOMING",
    "MessageHandler",
    "RequestPort",
    "UimConnectionError",
    "UimConnections",
    "format_destination",
]

#: Most connections a request port keeps open at once; more are accepted and closed at once.
MAX_INCOMING: Final = 1024
#: Bytes read per ``recv``: a fresh ``bytes`` object each time, so decoded payloads stay valid.
RECV_SIZE: Final = 65536
#: Most destinations whose last connection failure waits to be reported by a send.
MAX_REMEMBERED_FAILURES: Final = 4096

#: ``on_message(msg, peer)``: a decoded LBMC message and the (ip, port) it came from.
MessageHandler = Callable[[LbmcMessage, tuple[str, int]], None]


def format_destination(dest: tuple[str, int]) -> str:
    """UM's text form of a request-port address: ``TCP:ip:port`` (UM Concepts Guide, section 10.7.2)."""
    return f"TCP:{dest[0]}:{dest[1]}"


class UimConnectionError(OpenUMError, ConnectionError):
    """The last attempt to connect to (or send on a connection to) a destination failed
    (``LBM_EOS``): the peer's request port refused the connection or reset it, e.g. because the
    requester went away.  Reported once, by the next send; the send after it connects again.
    ``errno`` is the operating system's error number when there was one."""

    errnum = LBM_EOS

    def __init__(self, message: str, *, os_errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = os_errno


def _os_reason(exc: OSError | int) -> str:
    """``Connection refused (ECONNREFUSED)`` for an OSError or an errno."""
    if isinstance(exc, int):
        code: int | None = exc
        text = os.strerror(exc)
    else:
        code = exc.errno
        text = exc.strerror or str(exc)
    name = errno.errorcode.get(code, "") if code is not None else ""
    return f"{text} ({name})" if name else text


def _decode_chunk(
    decoder: StreamDecoder,
    data: bytes,
    peer: tuple[str, int],
    on_message: MessageHandler | None,
    log: Any,
    still_open: Callable[[], bool],
) -> tuple[int, str | None]:
    """Split ``data`` (the next bytes of a stream) into LBMC messages and hand each to ``on_message``.

    Returns how many messages were decoded and, when the stream turned out corrupt, what was wrong
    (the caller closes the connection).  Stops early when ``still_open()`` turns false in a callback.
    """
    try:
        views = decoder.feed(data)
    except WireError as exc:
        return 0, f"sent bytes that are not LBMC messages ({exc})"
    decoded = 0
    for view in views:
        try:
            msg = decode_message(view)
        except WireError as exc:
            return decoded, f"sent a malformed LBMC message ({exc})"
        decoded += 1
        if on_message is None:
            continue
        try:
            on_message(msg, peer)
        except Exception:
            log.exception("UIM message from %s: the message handler raised", format_destination(peer))
        if not still_open():
            break
    return decoded, None


def _is_set(attrs: Any, name: str) -> bool:
    """Whether option ``name`` was set (not its default); attributes without ``is_set`` count as set."""
    is_set = getattr(attrs, "is_set", None)
    return True if is_set is None else bool(is_set(name))


def _cancel(loop: EventLoop, timer: int | None) -> None:
    if timer is not None:
        try:
            loop.cancel_timer(timer)
        except Exception:  # the loop may be closed already
            pass


def _release_socket(loop: EventLoop, sock: socket.socket, fd: int) -> None:
    try:
        loop.unregister_fd(fd)
    except Exception:  # the loop may be closed already
        pass
    sock.close()


# -- the request port ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _Incoming:
    sock: socket.socket
    fd: int
    peer: tuple[str, int]
    last_ns: int
    decoder: StreamDecoder = field(default_factory=StreamDecoder)
    closed: bool = False


class RequestPort:
    """The context's request (UIM) port: a TCP listener whose connections carry LBMC messages.

    Binds in the constructor (a :class:`~openum.SystemCallError` names the port or range and the
    options when it cannot); :meth:`start` registers it with the loop.  ``on_message(msg, peer)`` runs
    on the loop's thread for every decoded message, in stream order per connection; a decoded payload
    is a view of a buffer that is never reused, so it may be kept.  An exception it raises is logged
    and the connection goes on.  A connection that sends bytes that are not LBMC messages is closed;
    the whole messages that came in the same read as the bad bytes are dropped with them.

    Options read (context scope): ``request_tcp_interface``, ``request_tcp_port``,
    ``request_tcp_port_low``, ``request_tcp_port_high``, ``request_tcp_reuseaddr``,
    ``request_tcp_listen_backlog`` and ``request_tcp_activity_timeout`` (``request_tcp_exclusiveaddr``
    is Windows-only and has no effect elsewhere).
    """

    def __init__(
        self,
        loop: EventLoop,
        attrs: Any,
        default_interface: str,
        on_message: MessageHandler,
        log: Any,
        *,
        max_incoming: int = MAX_INCOMING,
    ) -> None:
        self.loop = loop
        self.log = log
        self.on_message = on_message
        self.max_incoming = max_incoming
        spec = attrs.get("request_tcp_interface")
        try:
            self.interface = resolve_interface(spec) if spec else default_interface
        except InterfaceError as exc:
            raise InterfaceError(f"request_tcp_interface: {exc}") from None
        self._reuseaddr = bool(attrs.get("request_tcp_reuseaddr"))
        self._backlog = int(attrs.get("request_tcp_listen_backlog"))
        self._idle_ms = int(attrs.get("request_tcp_activity_timeout"))
        self._idle_ns = self._idle_ms * NS_PER_MS
        what = f"UIM request port on {self.interface}"
        explicit = attrs.get("request_tcp_port")
        if explicit:
            try:
                self._listener = self._bind(explicit)
            except OSError as exc:
                raise SystemCallError(
                    f"{what}: cannot bind request_tcp_port {explicit}: {exc.strerror or exc}"
                ) from exc
        else:
            low, high = attrs.get("request_tcp_port_low"), attrs.get("request_tcp_port_high")
            if low > high:
                raise SystemCallError(
                    f"{what}: the port range request_tcp_port_low..request_tcp_port_high ({low}..{high}) "
                    "is empty"
                )
            try:
                self._listener = bind_first_free(
                    range(low, high + 1),
                    self._bind,
                    what,
                    "request_tcp_port_low..request_tcp_port_high; or set request_tcp_port",
                )
            except SystemCallError as exc:
                # UM's default range has 5 ports for a whole machine: more contexts than that (Spark
                # executors, tests) take an ephemeral port, advertised like any (a range the application
                # set stays a hard limit).
                if _is_set(attrs, "request_tcp_port_low") or _is_set(attrs, "request_tcp_port_high"):
                    raise
                self._listener = self._bind(0)
                log.warning(
                    "%s: %s; bound ephemeral port %d instead (set request_tcp_port_low/high to a wider "
                    "range, or request_tcp_port, to choose)",
                    what,
                    exc,
                    self._listener.getsockname()[1],
                )
        self.port: int = self._listener.getsockname()[1]
        self._fd = self._listener.fileno()
        self._lock = threading.Lock()
        self._conns: set[_Incoming] = set()
        self._started = False
        self._closed = False
        self._idle_timer: int | None = None
        self._stats = dict.fromkeys(
            (
                "connections_accepted",
                "connections_refused_limit",
                "connections_closed_idle",
                "connections_closed_malformed",
                "msgs_rcved",
                "bytes_rcved",
                "msgs_dropped_malformed",
            ),
            0,
        )

    def _bind(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            if self._reuseaddr:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.interface, port))
            sock.listen(self._backlog)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        return sock

    @property
    def address(self) -> tuple[str, int]:
        """The bound ``(ip, port)``: what other contexts send to (``TCP:ip:port``)."""
        return (self.interface, self.port)

    def start(self) -> None:
        """Start accepting (on the loop's thread, or before the loop runs)."""
        with self._lock:
            if self._closed:
                raise ClosedError(f"the UIM request port {format_destination(self.address)} is closed")
            if self._started:
                return
            self._started = True
        self.loop.register_fd(self._fd, FdEvent.READ, self._accept, None)
        self.log.debug("UIM request port listening on %s", format_destination(self.address))

    # -- accepting and reading (loop thread) -----------------------------------------------------------
    def _accept(self, _fd: int, _events: FdEvent, _clientd: Any) -> None:
        while True:
            try:
                sock, addr = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if not self._closed:
                    self.log.warning(
                        "UIM request port %s: accept failed: %s", format_destination(self.address), exc
                    )
                return
            peer = (addr[0], addr[1])
            with self._lock:
                if self._closed:
                    sock.close()
                    return
                if len(self._conns) >= self.max_incoming:
                    self._stats["connections_refused_limit"] += 1
                    first = self._stats["connections_refused_limit"] == 1
                    sock.close()
                    (self.log.warning if first else self.log.debug)(
                        "UIM request port %s: connection from %s closed: %d connections are open "
                        "already (the most a request port keeps)",
                        format_destination(self.address),
                        format_destination(peer),
                        self.max_incoming,
                    )
                    continue
                sock.setblocking(False)
                conn = _Incoming(sock, sock.fileno(), peer, self.loop.clock.now_ns())
                self._conns.add(conn)
                self._stats["connections_accepted"] += 1
                self.loop.register_fd(conn.fd, FdEvent.READ, self._readable, conn)
                if self._idle_ns and self._idle_timer is None:
                    self._idle_timer = self.loop.schedule_timer(self._idle_ms, self._check_idle)

    def _readable(self, _fd: int, _events: FdEvent, conn: _Incoming) -> None:
        if conn.closed:
            return
        try:
            data = conn.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(conn, f"read failed: {_os_reason(exc)}")
            return
        if not data:
            self._drop(conn, "closed by the peer")
            return
        conn.last_ns = self.loop.clock.now_ns()
        self._stats["bytes_rcved"] += len(data)
        decoded, problem = _decode_chunk(
            conn.decoder, data, conn.peer, self.on_message, self.log, lambda: not conn.closed
        )
        self._stats["msgs_rcved"] += decoded
        if problem is not None:
            self._stats["msgs_dropped_malformed"] += 1
            self._stats["connections_closed_malformed"] += 1
            self._drop(conn, problem, warn=self._stats["connections_closed_malformed"] == 1)

    def _drop(self, conn: _Incoming, why: str, *, warn: bool = False) -> None:
        with self._lock:
            if conn.closed:
                return
            conn.closed = True
            self._conns.discard(conn)
        _release_socket(self.loop, conn.sock, conn.fd)
        (self.log.warning if warn else self.log.debug)(
            "UIM request port %s: connection from %s %s: closed",
            format_destination(self.address),
            format_destination(conn.peer),
            why,
        )

    def _check_idle(self, _clientd: Any) -> None:
        """Close the connections silent for ``request_tcp_activity_timeout``; look again when the next
        one could be (no sooner than a sixteenth of the timeout: many connections, few sweeps)."""
        with self._lock:
            self._idle_timer = None
            if self._closed:
                return
            now = self.loop.clock.now_ns()
            idle = [c for c in self._conns if now - c.last_ns >= self._idle_ns]
            for conn in idle:
                conn.closed = True
                self._conns.discard(conn)
                self._stats["connections_closed_idle"] += 1
            if self._conns:
                due = min(c.last_ns for c in self._conns) + self._idle_ns
                delay_ns = max(due - now, self._idle_ns // 16, NS_PER_MS)
                self._idle_timer = self.loop.schedule_timer(delay_ns / NS_PER_MS, self._check_idle)
        for conn in idle:
            _release_socket(self.loop, conn.sock, conn.fd)
            self.log.debug(
                "UIM request port %s: connection from %s sent nothing for %d ms "
                "(request_tcp_activity_timeout): closed",
                format_destination(self.address),
                format_destination(conn.peer),
                self._idle_ms,
            )

    # -- statistics and closing (any thread) -----------------------------------------------------------
    def statistics(self) -> dict[str, int]:
        """Counters: ``connections_accepted``, ``connections_active`` (open now),
        ``connections_refused_limit`` (closed at once: :data:`MAX_INCOMING` were open),
        ``connections_closed_idle`` (silent for ``request_tcp_activity_timeout``),
        ``connections_closed_malformed`` (sent bytes that are not LBMC messages), ``msgs_rcved``
        (messages decoded and handed on), ``bytes_rcved`` and ``msgs_dropped_malformed``."""
        with self._lock:
            stats = dict(self._stats)
            stats["connections_active"] = len(self._conns)
        return stats

    def close(self) -> None:
        """Stop listening and close every accepted connection (idempotent, from any thread)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns)
            self._conns.clear()
            for conn in conns:
                conn.closed = True
            timer, self._idle_timer = self._idle_timer, None
        _cancel(self.loop, timer)
        _release_socket(self.loop, self._listener, self._fd)
        for conn in conns:
            _release_socket(self.loop, conn.sock, conn.fd)


# -- outgoing connections -----------------------------------------------------------------------------


@dataclass(eq=False)
class _Outgoing:
    dest: tuple[str, int]
    sock: socket.socket
    fd: int
    out: bytearray = field(default_factory=bytearray)
    #: Lengths of the messages in ``out``, the first one less what of it was written already.
    lens: deque[int] = field(default_factory=deque)
    decoder: StreamDecoder = field(default_factory=StreamDecoder)
    up: bool = False
    closed: bool = False
    writing: bool = False  # WRITE events watched (once up)
    last_used_ns: int = 0  # the last send, connect or release: the deletion clock
    moved_ns: int = 0  # when ``out`` last moved (or became non-empty): the stall clock
    deletion_timer: int | None = None
    stall_timer: int | None = None


class UimConnections:
    """The context's outgoing UIM/response connections, one per destination request port.

    :meth:`send` is thread-safe and never blocks on the network.  Messages a peer sends back on one of
    these connections (UM allows UIM both ways) go to ``on_message(msg, dest)`` on the loop's thread,
    or are counted and discarded without one.

    Options read (context scope): ``response_tcp_interface``, ``response_tcp_nodelay``,
    ``response_session_sender_socket_buffer``, ``response_session_maximum_buffer``,
    ``response_tcp_deletion_timeout`` and ``response_tcp_activity_timeout``.
    """

    def __init__(
        self,
        loop: EventLoop,
        attrs: Any,
        default_interface: str,
        log: Any,
        *,
        on_message: MessageHandler | None = None,
    ) -> None:
        self.loop = loop
        self.log = log
        self.on_message = on_message
        spec = attrs.get("response_tcp_interface")
        try:
            self.interface = resolve_interface(spec) if spec else default_interface
        except InterfaceError as exc:
            raise InterfaceError(f"response_tcp_interface: {exc}") from None
        self._nodelay = bool(attrs.get("response_tcp_nodelay"))
        self._sndbuf = int(attrs.get("response_session_sender_socket_buffer"))
        self._max_buffer = int(attrs.get("response_session_maximum_buffer"))
        self._deletion_ms = int(attrs.get("response_tcp_deletion_timeout"))
        self._deletion_ns = self._deletion_ms * NS_PER_MS
        self._stall_ms = int(attrs.get("response_tcp_activity_timeout"))
        self._stall_ns = self._stall_ms * NS_PER_MS
        self._lock = threading.RLock()
        self._conns: dict[tuple[str, int], _Outgoing] = {}
        self._holds: dict[tuple[str, int], int] = {}
        #: The last connection attempt to these destinations failed: (message, errno), reported once.
        self._failures: dict[tuple[str, int], tuple[str, int | None]] = {}
        self._closed = False
        self._stats = dict.fromkeys(
            (
                "connections_opened",
                "connections_failed",
                "connections_closed_idle",
                "connections_closed_stalled",
                "connections_closed_malformed",
                "msgs_sent",
                "bytes_sent",
                "msgs_dropped",
                "bytes_dropped",
                "msgs_rcved",
                "bytes_rcved",
                "msgs_discarded",
            ),
            0,
        )

    # -- the API (any thread) --------------------------------------------------------------------------
    def send(self, dest: tuple[str, int], data: bytes | bytearray | memoryview) -> None:
        """Send ``data`` (whole LBMC messages) to the request port at ``dest``, connecting if needed.

        What the socket does not take now waits in the connection's queue.  Raises
        :class:`~openum.WouldBlock` when bytes are queued already and ``data`` would take the queue past
        ``response_session_maximum_buffer`` (one message is always accepted by an empty queue, so no
        message is too large to send), and :class:`UimConnectionError` when the last attempt to reach
        ``dest`` failed (once: the next send connects again)."""
        size = len(data)
        with self._lock:
            if self._closed:
                raise ClosedError("the context's UIM connections are closed")
            conn = self._conns.get(dest)
            if conn is None:
                failure = self._failures.pop(dest, None)
                if failure is not None:
                    raise UimConnectionError(failure[0], os_errno=failure[1])
                conn = self._open(dest)
            if conn.out and self._max_buffer and len(conn.out) + size > self._max_buffer:
                raise WouldBlock(
                    f"UIM connection to {format_destination(dest)}: {len(conn.out)} bytes are waiting "
                    f"for the peer to read; {size} more would pass response_session_maximum_buffer "
                    f"({self._max_buffer})"
                )
            now = self.loop.clock.now_ns()
            sent = 0
            if conn.up and not conn.out:
                try:
                    sent = conn.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError as exc:
                    message = f"UIM connection to {format_destination(dest)} failed: {_os_reason(exc)}"
                    self._stats["connections_failed"] += 1
                    self._close(conn, message, os_errno=exc.errno, remember=False)
                    raise UimConnectionError(message, os_errno=exc.errno) from exc
                self._stats["bytes_sent"] += sent
            self._stats["msgs_sent"] += 1
            conn.last_used_ns = now
            if sent < size:
                if not conn.out:
                    conn.moved_ns = now
                conn.out += memoryview(data)[sent:] if sent else data
                conn.lens.append(size - sent)
                if self._stall_ns and conn.stall_timer is None:
                    conn.stall_timer = self.loop.schedule_timer(self._stall_ms, self._check_stall, conn)
                if conn.up and not conn.writing:
                    conn.writing = True
                    self.loop.modify_fd(conn.fd, FdEvent.READ | FdEvent.WRITE)
            self._arm_deletion(conn, self._deletion_ms)

    def connect(self, dest: tuple[str, int]) -> None:
        """Open the connection to ``dest`` ahead of the first send (UM Concepts Guide, section 10.7.5:
        a context that receives a request connects back to the requester at once).  A failure is not
        raised here; the next :meth:`send` to ``dest`` reports it."""
        with self._lock:
            if self._closed:
                raise ClosedError("the context's UIM connections are closed")
            if dest in self._conns:
                return
            self._failures.pop(dest, None)  # this attempt's outcome replaces the last one's
            try:
                self._open(dest)
            except UimConnectionError as exc:
                self._remember(dest, str(exc), exc.errno)
                self.log.warning("%s", exc)

    def hold(self, dest: tuple[str, int]) -> None:
        """A response object keeps the connection to ``dest`` open: no deletion timeout runs until the
        matching :meth:`release` (UM Concepts Guide, section 10.7.5)."""
        with self._lock:
            self._holds[dest] = self._holds.get(dest, 0) + 1

    def release(self, dest: tuple[str, int]) -> None:
        """End one :meth:`hold`; after the last, ``response_tcp_deletion_timeout`` starts."""
        with self._lock:
            count = self._holds.get(dest, 0)
            if count <= 0:
                raise InvalidStateError(f"release({format_destination(dest)}) without a matching hold()")
            if count > 1:
                self._holds[dest] = count - 1
                return
            del self._holds[dest]
            conn = self._conns.get(dest)
            if conn is not None:
                conn.last_used_ns = self.loop.clock.now_ns()
                self._arm_deletion(conn, self._deletion_ms)

    def pending(self, dest: tuple[str, int]) -> int:
        """Bytes queued for ``dest`` now (sent by the application, not yet taken by the socket)."""
        with self._lock:
            conn = self._conns.get(dest)
            return len(conn.out) if conn is not None else 0

    def statistics(self) -> dict[str, int]:
        """Counters: ``connections_opened`` (connection attempts), ``connections_active`` (open or
        connecting now), ``connections_failed`` (refused, reset, or closed by the peer with bytes
        queued), ``connections_closed_idle`` (``response_tcp_deletion_timeout``),
        ``connections_closed_stalled`` (queued bytes did not move for ``response_tcp_activity_timeout``),
        ``connections_closed_malformed`` (the peer sent bytes that are not LBMC messages),
        ``msgs_sent`` (sends accepted), ``bytes_sent`` (bytes the sockets took), ``msgs_dropped`` and
        ``bytes_dropped`` (queued on a connection that closed), ``bytes_queued`` (now),
        ``msgs_rcved``/``bytes_rcved`` (what peers sent back on these connections) and
        ``msgs_discarded`` (of those, dropped for want of a handler)."""
        with self._lock:
            stats = dict(self._stats)
            stats["connections_active"] = len(self._conns)
            stats["bytes_queued"] = sum(len(c.out) for c in self._conns.values())
        return stats

    def close(self) -> None:
        """Close every connection (idempotent, from any thread); queued bytes are dropped, counted."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for conn in list(self._conns.values()):
                self._close(conn, "closed with the context", remember=False, quiet=True)
            self._failures.clear()

    # -- connections (lock held) -----------------------------------------------------------------------
    def _open(self, dest: tuple[str, int]) -> _Outgoing:
        """Start a non-blocking connect to ``dest``; :class:`UimConnectionError` when it fails at once."""
        ip, port = dest
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"UIM destination {dest!r}: the port must be 1..65535")
        where = format_destination(dest)
        self._stats["connections_opened"] += 1
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if self._nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._sndbuf:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._sndbuf)
            sock.bind((self.interface, 0))  # response_tcp_interface
            code = sock.connect_ex((ip, port))
        except OSError as exc:
            sock.close()
            self._stats["connections_failed"] += 1
            raise UimConnectionError(
                f"UIM connection to {where} (from response_tcp_interface {self.interface}) failed: "
                f"{_os_reason(exc)}",
                os_errno=exc.errno,
            ) from exc
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            self._stats["connections_failed"] += 1
            raise UimConnectionError(f"UIM connection to {where} failed: {_os_reason(code)}", os_errno=code)
        conn = _Outgoing(dest, sock, sock.fileno())
        conn.last_used_ns = self.loop.clock.now_ns()
        try:
            # WRITE: the connect completed (or failed); READ is added once it is up.
            self.loop.register_fd(conn.fd, FdEvent.WRITE, self._event, conn)
        except Exception:
            sock.close()
            raise
        self._conns[dest] = conn
        self._arm_deletion(conn, self._deletion_ms)
        self.log.debug("UIM connection to %s: connecting", where)
        return conn

    def _arm_deletion(self, conn: _Outgoing, delay_ms: float) -> None:
        if conn.deletion_timer is None and not conn.closed and not self._holds.get(conn.dest):
            conn.deletion_timer = self.loop.schedule_timer(delay_ms, self._check_deletion, conn)

    def _remember(self, dest: tuple[str, int], message: str, os_errno: int | None) -> None:
        self._failures.pop(dest, None)
        if len(self._failures) >= MAX_REMEMBERED_FAILURES:
            del self._failures[next(iter(self._failures))]  # the oldest
        self._failures[dest] = (message, os_errno)

    def _close(
        self,
        conn: _Outgoing,
        message: str,
        *,
        os_errno: int | None = None,
        remember: bool = True,
        quiet: bool = False,
    ) -> None:
        """Close ``conn``, dropping (and counting) what is queued; ``remember``: the next send to its
        destination raises ``message``; ``quiet``: log at debug level rather than as a warning."""
        if conn.closed:
            return
        conn.closed = True
        if self._conns.get(conn.dest) is conn:
            del self._conns[conn.dest]
        _cancel(self.loop, conn.deletion_timer)
        _cancel(self.loop, conn.stall_timer)
        conn.deletion_timer = conn.stall_timer = None
        msgs, size = len(conn.lens), len(conn.out)
        conn.out.clear()
        conn.lens.clear()
        self._stats["msgs_dropped"] += msgs
        self._stats["bytes_dropped"] += size
        if remember:
            self._remember(conn.dest, message, os_errno)
        _release_socket(self.loop, conn.sock, conn.fd)
        dropped = f"; {msgs} message(s) ({size} bytes) dropped" if msgs else ""
        (self.log.debug if quiet else self.log.warning)("%s%s", message, dropped)

    def _write(self, conn: _Outgoing) -> OSError | None:
        """Write what the socket takes of ``conn.out``; the error when the connection broke."""
        try:
            sent = conn.sock.send(conn.out)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            return exc
        if sent:
            del conn.out[:sent]
            self._stats["bytes_sent"] += sent
            conn.moved_ns = self.loop.clock.now_ns()
            lens = conn.lens
            while sent:
                if sent >= lens[0]:
                    sent -= lens.popleft()
                else:
                    lens[0] -= sent
                    sent = 0
        return None

    # -- events (loop thread) --------------------------------------------------------------------------
    def _event(self, _fd: int, events: FdEvent, conn: _Outgoing) -> None:
        if conn.closed:
            return
        if not conn.up:
            self._connect_done(conn)
            return
        if events & FdEvent.READ:
            self._readable(conn)
        if events & FdEvent.WRITE and not conn.closed:
            with self._lock:
                if conn.closed:
                    return
                error = self._write(conn)
                if error is not None:
                    self._fail(conn, f"write failed: {_os_reason(error)}", error.errno)
                elif not conn.out and conn.writing:
                    conn.writing = False
                    self.loop.modify_fd(conn.fd, FdEvent.READ)

    def _fail(self, conn: _Outgoing, why: str, os_errno: int | None) -> None:
        if conn.closed:
            return
        self._stats["connections_failed"] += 1
        self._close(
            conn, f"UIM connection to {format_destination(conn.dest)} failed: {why}", os_errno=os_errno
        )

    def _connect_done(self, conn: _Outgoing) -> None:
        """The socket turned writable (or failed) while connecting."""
        with self._lock:
            if conn.closed:
                return
            code = conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                self._fail(conn, _os_reason(code), code)
                return
            try:
                conn.sock.getpeername()
            except OSError as exc:
                if exc.errno == errno.ENOTCONN:
                    return  # still connecting: a stale wake-up
                self._fail(conn, _os_reason(exc), exc.errno)
                return
            conn.up = True
            self.log.debug("UIM connection to %s: connected", format_destination(conn.dest))
            error = self._write(conn) if conn.out else None
            if error is not None:
                self._fail(conn, f"write failed: {_os_reason(error)}", error.errno)
                return
            conn.writing = bool(conn.out)
            self.loop.modify_fd(conn.fd, FdEvent.READ | FdEvent.WRITE if conn.out else FdEvent.READ)

    def _readable(self, conn: _Outgoing) -> None:
        try:
            data = conn.sock.recv(RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            with self._lock:
                self._fail(conn, f"read failed: {_os_reason(exc)}", exc.errno)
            return
        if not data:
            with self._lock:
                if conn.out:
                    self._stats["connections_failed"] += 1
                    self._close(
                        conn,
                        f"UIM connection to {format_destination(conn.dest)} failed: closed by the peer",
                    )
                else:
                    self._close(
                        conn,
                        f"UIM connection to {format_destination(conn.dest)}: closed by the peer",
                        remember=False,
                        quiet=True,
                    )
            return
        self._stats["bytes_rcved"] += len(data)
        decoded, problem = _decode_chunk(
            conn.decoder, data, conn.dest, self.on_message, self.log, lambda: not conn.closed
        )
        self._stats["msgs_rcved"] += decoded
        if self.on_message is None:
            self._stats["msgs_discarded"] += decoded
        if problem is not None:
            with self._lock:
                self._stats["connections_closed_malformed"] += 1
                self._fail(conn, f"the peer {problem}", None)

    def _check_deletion(self, conn: _Outgoing) -> None:
        """``response_tcp_deletion_timeout``: close the connection when nobody holds it, nothing is
        queued and nothing was sent for that long (UM Concepts Guide, section 10.7.5)."""
        with self._lock:
            conn.deletion_timer = None
            if conn.closed or self._holds.get(conn.dest):
                return  # release() starts the timeout again
            now = self.loop.clock.now_ns()
            if conn.out:  # still sending (a large response, a slow peer): wait another period
                self._arm_deletion(conn, self._deletion_ms)
                return
            remaining = conn.last_used_ns + self._deletion_ns - now
            if remaining > 0:
                self._arm_deletion(conn, remaining / NS_PER_MS)
                return
            self._stats["connections_closed_idle"] += 1
            self._close(
                conn,
                f"UIM connection to {format_destination(conn.dest)}: unused for {self._deletion_ms} ms "
                "(response_tcp_deletion_timeout): closed",
                remember=False,
                quiet=True,
            )

    def _check_stall(self, conn: _Outgoing) -> None:
        """``response_tcp_activity_timeout``: close the connection when its queued bytes did not move for
        that long (the peer does not read, or the connect hangs)."""
        with self._lock:
            conn.stall_timer = None
            if conn.closed or not conn.out:
                return
            remaining = conn.moved_ns + self._stall_ns - self.loop.clock.now_ns()
            if remaining > 0:
                conn.stall_timer = self.loop.schedule_timer(remaining / NS_PER_MS, self._check_stall, conn)
                return
            self._stats["connections_closed_stalled"] += 1
            self._close(
                conn,
                f"UIM connection to {format_destination(conn.dest)} failed: the peer took none of the "
                f"{len(conn.out)} queued bytes for {self._stall_ms} ms (response_tcp_activity_timeout)",
            )
