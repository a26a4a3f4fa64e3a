"""The TCP transport, source side: the session pool and listening sessions (seed 2.9, 2.9.2, 6.1).

A context owns a pool of TCP transport sessions.  Sessions are activated lazily, one listening port each:
sources without ``transport_tcp_port`` are assigned round-robin over at most
``transport_tcp_maximum_ports`` sessions, each bound to the first free port of
``transport_tcp_port_low..high``; a source with an explicit ``transport_tcp_port`` uses (or creates) the
session on that port, which then joins the pool for later implicit sources (seed 2.9.2's worked
example).  Each session has a random non-zero 32-bit session id (``transport_tcp_use_session_id``) and
gives each topic a topic index.  Options of a session come from its first source; a later source with
a conflicting session option gets a logged warning and the session's value (seed 3.3.3).
"""

from __future__ import annotations

import errno
import itertools
import random
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openum._errors import SystemCallError
from openum.config import REGISTRY, SourceAttributes
from openum.runtime import EventLoop, FdEvent
from openum.transport._interfaces import resolve_interface

__all__ = ["TcpSessionPool", "TcpSourceSession"]

#: Source options that belong to the TCP transport session (first source wins, seed 3.3.3).
SESSION_OPTIONS = tuple(
    name
    for name in REGISTRY.names("source")
    if REGISTRY.lookup("source", name).session and (name.startswith("transport_tcp_") or name == "transport")
)


@dataclass
class TcpSourceSession:
    """One listening TCP transport session of a context."""

    loop: EventLoop
    interface: str
    port: int
    session_id: int | None
    attrs: SourceAttributes
    listener: socket.socket
    log: Any
    topics: dict[int, str] = field(default_factory=dict)
    connections: list[socket.socket] = field(default_factory=list)
    on_connection: Callable[[TcpSourceSession, socket.socket], None] | None = None
    _indices: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    closed: bool = False

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.interface, self.port, self.session_id)

    def allocate_index(self, topic: str) -> int:
        """A topic index for ``topic`` on this session (unique within the session)."""
        index = next(self._indices)
        self.topics[index] = topic
        return index

    def release_index(self, index: int) -> None:
        self.topics.pop(index, None)

    def start(self) -> None:
        self.loop.register_fd(self.listener.fileno(), FdEvent.READ, self._accept, None)

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
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections.append(conn)
            self.log.debug(
                "TCP session %s:%d: receiver connected from %s:%d", self.interface, self.port, *addr
            )
            if self.on_connection is not None:
                self.on_connection(self, conn)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.loop.unregister_fd(self.listener.fileno())
        except Exception:  # the loop may be closed already
            pass
        self.listener.close()
        for conn in self.connections:
            conn.close()
        self.connections.clear()


class TcpSessionPool:
    """The context's TCP sessions: lazy activation, round-robin assignment, explicit ports."""

    def __init__(
        self, loop: EventLoop, context_attrs: Any, interface: str, log: Any, rng: random.Random | None = None
    ) -> None:
        self.loop = loop
        self.log = log
        self.interface = interface
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
            session = TcpSourceSession(self.loop, interface, port, session_id, attrs.copy(), sock, self.log)
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
