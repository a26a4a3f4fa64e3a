"""What the LBT-RM and LBT-RU transports share over real sockets (seed 2.12.1, 6.2, 6.3, 8.10).

The reliability itself (transmission window, NAKs, NCFs, session messages, activity timeouts, the rate
controller) lives in the sans-I/O engines of :mod:`openum.protocol.reliable`; this module drives them:

* :class:`ReliableSourceSession`: a source transport session (batching, fragmentation, TSNIs and flow
  control from :class:`~openum.transport._source_session.SourceSessionBase`) whose datagrams go through
  its engine to a UDP socket.  A datagram the rate controller refuses waits in a backlog, in order;
  sends meanwhile block or raise :class:`~openum.WouldBlock`, and the refused sources get ``WAKEUP``
  when the rate interval refreshes (seed 2.12.1).  The socket's input (NAKs; LBT-RU CREQs and ACKs) is
  read on the context thread.
* :class:`ReliableReceiverSession`: this context's reception of one source's session: its engine, the
  LBMC demultiplexer feeding the topics' delivery controllers, and the engine's timer.
* :func:`loss_hook_from_env`: test-only receive loss, ``OPENUM_TEST_DROP=probability[:seed]``.

Locking: a source session's engine is used by sending threads and the context thread, always under the
session lock, which the sessions of one pool share because their engines share the rate controller; a
receiver session is used only on the context thread.
"""

from __future__ import annotations

import abc
import errno
import fcntl
import os
import random
import socket
import sys
import termios
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from openum.protocol.reliable import (
    Outgoing,
    RateController,
    Received,
    ReceiverConnected,
    ReceiverDisconnected,
    RmReceiver,
    RmReceiverStatistics,
    RmSource,
    RmSourceStatistics,
    RuReceiver,
    RuReceiverStatistics,
    RuSource,
    RuSourceStatistics,
    SessionActive,
    SessionEnded,
    SourceEvent,
)
from openum.runtime import EventLoop, FdEvent
from openum.runtime._libc import LIBC, libc_error
from openum.transport._demux import FLAG_RETRANSMIT, LbmcDemux
from openum.transport._engine_timer import EngineTimer
from openum.transport._source_session import EVENT_CONNECT, EVENT_DISCONNECT, SourceSessionBase

__all__ = [
    "CAN_DISCONNECT",
    "MAX_DRAIN",
    "RECV_SIZE",
    "SIBLING_SOCKETS",
    "DrainGate",
    "DropHook",
    "ReliableReceiverSession",
    "ReliableSourceSession",
    "ReliableSourceStatistics",
    "close_socket",
    "connected_sibling",
    "datagram_pending",
    "disconnect",
    "dissolve",
    "loss_hook_from_env",
    "receive_buffer",
    "set_buffer",
]

#: Datagrams read per readiness event before the loop looks at its other work.
MAX_DRAIN: Final = 64
#: Receive buffer size: the largest UDP datagram.
RECV_SIZE: Final = 65536
#: Environment variable of the test-only receive loss hook.
DROP_ENV = "OPENUM_TEST_DROP"

Address = tuple[str, int]


_NOTHING_PENDING: Final = b"\0\0\0\0"  # FIONREAD's answer when no datagram waits


def datagram_pending(fd: int, scratch: bytearray) -> bool:
    """Whether the UDP socket ``fd`` holds another datagram to read (``scratch``: 4 bytes to reuse).

    Asked after the first read of a readiness event: ``FIONREAD`` (the size of the next datagram; 0 also
    for an empty one, which the next event reads) costs a third of a read that fails with EAGAIN and
    raises, which otherwise ended every event, and so every round trip."""
    fcntl.ioctl(fd, termios.FIONREAD, scratch)
    return scratch != _NOTHING_PENDING


#: An event looks for a burst only when it began within this many ns of the end of the previous event:
#: the socket was readable again at once (between two events only the loop's own way back through epoll,
#: about 1-2 us).  After a wait the socket held one datagram when the loop woke, which is no burst.
BURST_IDLE_NS: Final = 4_000
#: After a look that found nothing, this many events that began at once read their first datagram
#: without looking: round trips on one CPU, where the answer comes back while the callback runs.
SKIP_EVENTS: Final = 16


class DrainGate:
    """Whether an LBT-RM/RU readiness event reads on after its first datagram, until the socket is empty.

    Asked after the event's first read and before that datagram is handled: a burst shows as another
    datagram already waiting (:func:`datagram_pending`, an ``ioctl``).  Asking after the handling would
    mistake a round trip for a burst: when the answer's sender runs on the same CPU, the callback's send
    lets it run at once, and its answer is waiting when the callback returns, every time.  A drain that
    follows such answers, reading each one before going back to epoll, changes how the two processes
    share the CPU (the one reading on uses less of it per round trip, and the scheduler lets it preempt
    its peer in turn, so both sleep in some round trips): round trips took 3-5 us longer in a third of
    them.  Not reading on loses nothing: epoll is level-triggered, so a socket that still holds a
    datagram is reported again at once and the next event reads it, for one more trip through the loop.

    Looks cost a system call, so an event looks only when it began within :data:`BURST_IDLE_NS` of the
    previous event's end (a burst keeps the socket readable; after a wait, the one datagram that woke
    the loop is no burst), and after a look that found nothing the next :data:`SKIP_EVENTS` events that
    began at once do not look (the round trips above, whose next event always begins at once).  A burst
    that starts then is read one datagram an event until the gate looks again.  A drain ends with a read
    that fails (EAGAIN: one raised exception per drain, not a look per datagram) or after
    :data:`MAX_DRAIN` datagrams.  ``now_ns`` is the loop's clock; the receivers pass the time their
    event began, and call :meth:`ended` when it is over.
    """

    __slots__ = ("_ended", "_now_ns", "_scratch", "_skip")

    def __init__(self, now_ns: Callable[[], int]) -> None:
        self._scratch = bytearray(4)
        self._now_ns = now_ns
        self._ended = 0  # when the last event ended
        self._skip = 0  # events that began at once still to read without looking

    def drain(self, fd: int, began: int) -> bool:
        """Read ``fd`` until it is empty, in the event that began at ``began`` and has read one datagram?"""
        if began - self._ended > BURST_IDLE_NS:
            return False
        skip = self._skip
        if skip:
            self._skip = skip - 1
            return False
        if datagram_pending(fd, self._scratch):
            return True
        self._skip = SKIP_EVENTS
        return False

    def ended(self) -> None:
        """The current event is over (every datagram it read was handled)."""
        self._ended = self._now_ns()


#: Whether a session's socket can have connected siblings (:func:`connected_sibling`): Linux's
#: SO_REUSEPORT, whose connected members take only their peer's datagrams.
SIBLING_SOCKETS: Final = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def connected_sibling(shared: socket.socket, own: socket.socket, peer: Address) -> socket.socket:
    """``own`` (a new UDP socket, options set) bound next to a session's ``shared`` socket, to the same
    address and port (SO_REUSEPORT, set on both; only sockets of the same user may join), with the shared
    socket's send buffer, non-blocking, and connected to ``peer``; closed and the error raised if any step
    fails.  Datagrams sent on it leave from the session's address and port without ``sendto``'s conversion
    of the destination per datagram.  The shared socket gets SO_REUSEPORT only here, after it was bound: a
    pool looking for a free port binds without it, so it still finds the port taken."""
    try:
        shared.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        # Linux reports twice the size set: the shared socket's send buffer, as configured.
        own.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, shared.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) // 2
        )
        own.bind(shared.getsockname())
        own.connect(peer)
        own.setblocking(False)
    except OSError:
        own.close()
        raise
    return own


def receive_buffer() -> tuple[bytearray, memoryview]:
    """The buffer an LBT-RM/RU receiving socket reads every datagram into, and a view of it to slice.

    Reused for each datagram (``recv_into``: no 64 KB allocation per read, shrunk to the datagram):
    nothing may keep a view of it past the datagram's handling.  The demultiplexer and the delivery
    controller copy what they hold (fragments, messages waiting for a gap), and a message's payload is a
    view only during its callback (``Message.retain()`` copies it), as with TCP's stream buffer."""
    buf = bytearray(RECV_SIZE)
    return buf, memoryview(buf)


#: A test-only receive hook: ``drop(datagram) -> True`` drops it (counted as ``dgrams_dropped_test_hook``).
DropHook = Callable[[bytes | memoryview], bool]


def loss_hook_from_env(environ: Any = os.environ) -> DropHook | None:
    """``OPENUM_TEST_DROP=p[:seed]``: a function answering "drop this datagram?" (tests only).

    A receiving context drops that share of the datagrams it reads on its LBT-RM/LBT-RU data sockets,
    which exercises NAK recovery without root.  Raises ``ValueError`` naming the variable for a bad value.
    """
    spec = environ.get(DROP_ENV)
    if not spec:
        return None
    share, _, seed = spec.partition(":")
    try:
        probability = float(share)
        rng = random.Random(int(seed) if seed else None)
    except ValueError:
        raise ValueError(
            f"{DROP_ENV}={spec!r}: expected a probability in [0, 1), optionally ':seed' (e.g. 0.05:7)"
        ) from None
    if not 0.0 <= probability < 1.0:
        raise ValueError(f"{DROP_ENV}={spec!r}: the probability must be in [0, 1)")
    return lambda _datagram: rng.random() < probability


# Linux's variants that may exceed net.core.rmem_max / wmem_max (with CAP_NET_ADMIN, e.g. as root);
# Python's socket module does not name them (<asm-generic/socket.h>: SO_SNDBUFFORCE 32, SO_RCVBUFFORCE 33).
_FORCE: dict[int, int] = (
    {socket.SO_RCVBUF: 33, socket.SO_SNDBUF: 32} if sys.platform.startswith("linux") else {}
)
_SYSCTL = {socket.SO_RCVBUF: "net.core.rmem_max", socket.SO_SNDBUF: "net.core.wmem_max"}


def set_buffer(sock: socket.socket, option: int, size: int, log: Any, what: str) -> int:
    """Set SO_RCVBUF/SO_SNDBUF to ``size`` bytes when it is non-zero; returns the size the kernel gave.

    The kernel silently caps the size at ``net.core.rmem_max``/``wmem_max``; the size is read back, the
    ``*FORCE`` variant tried when the cap bit (allowed with CAP_NET_ADMIN), and a size still short of
    the request is logged with the sysctl to raise (a small receive buffer is what turns a burst into
    loss).  A refusal is logged, never fatal."""
    if not size:
        return 0
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, size)
    except OSError as exc:
        log.warning("%s: cannot set the socket buffer to %d bytes: %s", what, size, exc)
        return 0
    got = _buffer_size(sock, option)
    force = _FORCE.get(option)
    if got < size and force is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, size)
            got = _buffer_size(sock, option)
        except OSError:
            pass  # not permitted: the capped size stays
    if got < size:
        sysctl = _SYSCTL.get(option, "net.core.rmem_max")
        log.warning(
            "%s: the kernel gave a %d-byte socket buffer of the %d requested (raise %s, e.g. "
            "sysctl -w %s=%d)",
            what,
            got,
            size,
            sysctl,
            sysctl,
            size,
        )
    return got


def _buffer_size(sock: socket.socket, option: int) -> int:
    """The buffer size in the units it was set in (Linux reports twice the size, for its bookkeeping)."""
    reported = int(sock.getsockopt(socket.SOL_SOCKET, option))
    return reported // 2 if sys.platform.startswith("linux") else reported


#: ``struct sockaddr`` with ``sa_family`` ``AF_UNSPEC`` (0): connecting a UDP socket to it dissolves the
#: socket's association with its peer.
_UNSPEC_ADDRESS: Final = bytes(16)
#: Whether :func:`disconnect` works here: a UDP socket may be connected to one peer for a while.
CAN_DISCONNECT: Final = LIBC is not None


def disconnect(sock: socket.socket) -> None:
    """Dissolve a connected UDP socket's association with its peer: it receives from every sender again.

    POSIX's way is ``connect`` to an address of family ``AF_UNSPEC``, which Python's ``socket`` module
    cannot express; it is called through libc.  (Connecting an AF_INET socket to 0.0.0.0:0 instead is no
    dissolution: Linux takes 0.0.0.0 for this host and connects the socket to 127.0.0.1, any port, after
    which datagrams from other hosts are dropped.)  The socket keeps its address and port (Linux lets go
    of a port the kernel chose at bind time: it is bound again).  ``OSError`` if the system refuses or
    offers no way (see :data:`CAN_DISCONNECT`)."""
    if LIBC is None:
        raise OSError(errno.EOPNOTSUPP, "dissolving a UDP socket's peer needs connect(AF_UNSPEC) from libc")
    bound = sock.getsockname()
    if LIBC.connect(sock.fileno(), _UNSPEC_ADDRESS, len(_UNSPEC_ADDRESS)) != 0:
        raise libc_error("connect(AF_UNSPEC)")
    if sock.getsockname()[1] != bound[1]:
        sock.bind(bound)


def dissolve(sock: socket.socket, log: Any, what: str) -> None:
    """:func:`disconnect` ``sock``, or log why ``what`` (a transport's receiving socket) stays connected."""
    try:
        disconnect(sock)
    except OSError as exc:
        log.warning(
            "%s stays connected to one source (%s): other sources sending to it cannot reach this context",
            what,
            exc,
        )


def close_socket(loop: EventLoop, sock: socket.socket) -> None:
    """Stop watching ``sock`` (the loop may be closed already) and close it."""
    try:
        loop.unregister_fd(sock.fileno())
    except Exception:  # the loop may be closed already
        pass
    sock.close()


@dataclass(frozen=True, slots=True)
class ReliableSourceStatistics:
    """An LBT-RM or LBT-RU source transport session.

    ``transport``: the engine's counters with UM's names (``RmSourceStatistics`` or
    ``RuSourceStatistics`` of :mod:`openum.protocol.reliable`: datagrams, NAKs, NCFs, retransmissions,
    session messages, rate controller).  The rest counts LBMC traffic handed to the session:
    ``msgs_sent``/``bytes_sent`` (application messages and bytes), ``datagrams_sent`` (batches
    flushed), ``fragments_sent``, ``tsnis_sent``, ``blocked`` (sends that waited or raised
    ``WouldBlock``), ``blocked_ns`` (time blocking sends spent waiting), ``send_buffer_full``
    (datagrams the socket refused because its buffer was full:
    lost on the wire, repaired by NAKs), ``backlog`` (datagrams waiting for the rate controller now)
    and ``bytes_buffered`` (their bytes; UM's TCP name).
    """

    transport: RmSourceStatistics | RuSourceStatistics
    msgs_sent: int
    bytes_sent: int
    datagrams_sent: int
    fragments_sent: int
    tsnis_sent: int
    blocked: int
    send_buffer_full: int
    backlog: int
    bytes_buffered: int
    blocked_ns: int


class ReliableSourceSession(SourceSessionBase):
    """A source transport session whose datagrams go through a reliability engine to a UDP socket."""

    #: Names for messages: ``"LBT-RM"`` / ``"LBT-RU"`` and the option prefix ``"transport_lbtrm_"``.
    TRANSPORT: str
    OPTION_PREFIX: str

    def __init__(
        self,
        loop: EventLoop,
        log: Any,
        attrs: Any,
        engine: RmSource | RuSource,
        sock: socket.socket,
        rate: RateController,
        lock: threading.Lock,
    ) -> None:
        """``lock`` is shared by every session of the pool: their engines share ``rate``."""
        super().__init__(loop, log, attrs, engine.max_payload, ("send_buffer_full",), lock)
        self.engine = engine
        self.sock = sock
        self.interface: str = sock.getsockname()[0]
        self.port: int = sock.getsockname()[1]
        self.rate = rate
        self._backlog: deque[bytes | bytearray] = deque()
        self._rate_waiting = False  # a sender found the rate controller blocked: wake it at the refresh
        self.timer = EngineTimer(loop, self._poll, self._deadline)

    #: Where an :class:`Outgoing` without a destination goes (LBT-RM: the group; LBT-RU has none).
    destination: Address | None = None

    # -- what LBT-RM and LBT-RU do differently ---------------------------------------------------------
    @abc.abstractmethod
    def _input(
        self, data: bytes, sender: Address, now: int
    ) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        """One datagram read from the session's socket, through the engine (lock held)."""

    def _close_engine(self) -> tuple[Sequence[Outgoing], Sequence[SourceEvent]]:
        """The engine's last words (lock held)."""
        return (), ()

    @property
    def label(self) -> str:
        return f"{self.TRANSPORT} session {self.interface}:{self.port}"

    # -- start ---------------------------------------------------------------------------------------
    def start(self) -> None:
        self.loop.register_fd(self.sock.fileno(), FdEvent.READ, self._readable, None)
        self.start_timers()

    # -- sending (lock held) ---------------------------------------------------------------------------
    def _deliver(self, data: bytes | bytearray) -> None:
        if self._backlog:
            self._backlog.append(data)  # keep order behind what the rate controller refused
        else:
            engine = self.engine
            now = self._now()
            datagram = engine.send_direct(data, now)  # the common case, without records
            if datagram is not None:
                self._write_data(datagram)
                # Of the engine's deadlines only the next session message moved (to a minimum interval
                # from now): nothing to do while the timer is armed for that or earlier.
                due = engine.session_message_due
                if due is None or not self.timer.armed_by(due):
                    self.timer.reschedule()
                return
            result = engine.send(data, now)
            if result.refused:
                self._backlog.append(data)
            self._send(result.outgoing)
        self.timer.reschedule()

    def _has_room(self) -> bool:
        # The controller unblocks only when time passes (never blocks by itself), so an unblocked one
        # needs no clock reading: the common case of every send.
        if not self._backlog and not self.rate.is_blocked:
            return True
        now = self._now()
        blocked = self.rate.blocked(now)
        if self._backlog and not blocked:
            # The controller has budget again: send what it refused (before anything new), as the
            # context thread does at the refresh; a blocked sender in sequential mode relies on this.
            self._drain_backlog(now)
            blocked = self.rate.is_blocked  # the backlog may have used the budget up again
        if self._backlog or blocked:
            if not self._rate_waiting:
                self._rate_waiting = True
                self.timer.reschedule()
            return False
        return True

    def _room_poll_s(self) -> float:
        # Room comes with the rate controller's next interval.
        return min(1.0, max(0.0002, (self.rate.next_refresh_ns() - self._now()) / 1e9))

    def _blocked_reason(self) -> str:
        prefix = self.OPTION_PREFIX
        return (
            f"{self.label}: the data rate limit ({prefix}data_rate_limit per {prefix}rate_interval) "
            f"is reached"
        )

    def _send(self, outgoing: Iterable[Outgoing]) -> None:
        for out in outgoing:
            self._write(out.data, out.destination or self.destination)

    def _write_data(self, datagram: bytes) -> None:
        """Write a datagram of :meth:`~openum.protocol.reliable.RmSource.send_direct` where it goes."""
        for destination in self.engine.data_destinations():
            self._write(datagram, destination or self.destination)

    def _write(self, datagram: bytes, destination: Address | None) -> None:
        assert destination is not None, "an LBT-RU datagram without a client address"
        try:
            self.sock.sendto(datagram, destination)
        except OSError as exc:
            self._write_failed(exc, destination, expected=False)

    def _write_failed(self, exc: OSError, destination: Address, expected: bool) -> None:
        """A datagram to ``destination`` did not go out.  ``expected``: an error a socket connected to
        it reports when it went away (an ICMP error), logged at debug level only."""
        if isinstance(exc, (BlockingIOError, InterruptedError)):
            # The socket buffer is full: the datagram is lost on the wire and NAKs repair it.
            self._stats["send_buffer_full"] += 1
        elif expected:
            self.log.debug("%s: sending to %s:%d failed: %s", self.label, *destination, exc)
        else:
            self.log.warning("%s: sending to %s:%d failed: %s", self.label, *destination, exc)

    def _drain_backlog(self, now: int) -> None:
        while self._backlog:
            result = self.engine.send(self._backlog[0], now)
            if result.refused:
                break
            self._backlog.popleft()
            self._send(result.outgoing)

    # -- the context thread ----------------------------------------------------------------------------
    def _readable(self, _fd: int, _events: FdEvent, clientd: Any) -> None:
        """Read the session's socket, or the socket ``clientd`` names (LBT-RU: a client's own socket)."""
        now = self.loop.clock.now_ns()
        events: list[SourceEvent] = []
        sock: socket.socket = self.sock if clientd is None else clientd
        with self.lock:
            if self.closed:  # the engine said its last word (LBT-RU: the RST); a late NAK gets no answer
                return
            for _ in range(MAX_DRAIN):
                try:
                    data, addr = sock.recvfrom(RECV_SIZE)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:  # e.g. ICMP port unreachable reported on the socket
                    self.log.debug("%s: receive error: %s", self.label, exc)
                    break
                out, more = self._input(data, (addr[0], addr[1]), now)
                self._send(out)
                events += more
            self.timer.reschedule()
        self._session_events(events)

    def _poll(self) -> None:
        with self.lock:
            if self.closed:
                return
            now = self._now()
            outgoing, events = self.engine.poll(now)
            self._send(outgoing)
            if self._backlog:
                self._drain_backlog(now)
            wake = self._release_blocked()
            if wake or self._has_room():
                self._rate_waiting = False
            self.timer.reschedule()
        self._session_events(events)
        self._wake(wake)

    def _deadline(self) -> int | None:
        deadline = self.engine.next_deadline()
        if self._rate_waiting or self._backlog:
            refresh = self.rate.next_refresh_ns()
            deadline = refresh if deadline is None else min(deadline, refresh)
        return deadline

    def _session_events(self, events: Sequence[SourceEvent]) -> None:
        for event in events:
            if isinstance(event, ReceiverConnected):
                self.log.debug("%s: receiver %s:%d connected", self.label, *event.address)
                self.notify(EVENT_CONNECT, event.address)
            elif isinstance(event, ReceiverDisconnected):
                self.log.debug("%s: receiver %s:%d %s", self.label, *event.address, event.reason)
                self.notify(EVENT_DISCONNECT, event.address)

    # -- statistics and closing ------------------------------------------------------------------------
    def statistics(self) -> ReliableSourceStatistics:
        with self.lock:
            return ReliableSourceStatistics(
                self.engine.statistics(),
                backlog=len(self._backlog),
                bytes_buffered=sum(len(d) for d in self._backlog),
                blocked_ns=self._blocked_ns,
                **self._counters(),
            )

    def close(self) -> None:
        """Flush what is batched and backlogged (as far as the rate controller allows), stop, release."""
        if not self._close_base():
            return
        with self.lock:
            self._drain_backlog(self._now())
            dropped = len(self._backlog)
            self._backlog.clear()
            outgoing, _events = self._close_engine()
            self._send(outgoing)
        if dropped:
            self.log.warning(
                "%s closed with %d datagram(s) still held by the rate controller; they were not sent",
                self.label,
                dropped,
            )
        self.timer.cancel()
        close_socket(self.loop, self.sock)


class ReliableReceiverSession:
    """This context's reception of one source's LBT-RM or LBT-RU session (context thread only).

    ``send(outgoing)`` writes the engine's NAKs (and LBT-RU CREQs/ACKs); ``on_active()`` runs once when
    the first datagram of the session arrives (BOS); ``on_end(reason)`` when the session ends (EOS), or
    when :meth:`close` is called (replace ``on_end`` first when the close is asked for).
    """

    TRANSPORT: str

    def __init__(
        self,
        loop: EventLoop,
        engine: RmReceiver | RuReceiver,
        send: Callable[[Sequence[Outgoing]], None],
        forget: Callable[[ReliableReceiverSession], None],
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
    ) -> None:
        self.loop = loop
        self.engine = engine
        self._send = send
        self._forget = forget
        self.on_active = on_active
        self.on_end = on_end
        self.demux = LbmcDemux()
        self.topics = self.demux.topics
        self._synced = (0, 0)
        self.active = False
        self.closed = False
        self.timer = EngineTimer(loop, self._poll, engine.next_deadline)
        self.timer.reschedule()

    def datagram(self, data: memoryview, sender: Address, now: int) -> None:
        start = self.engine.data_in_order(data, sender, now)
        if start >= 0:
            # The next datagram, nothing missing: nothing to send, no event, and no engine deadline
            # moved earlier, so the timer (always armed while the session lives) stands.
            self.demux.dispatch(data, now, 0, start)
            return
        received, outgoing, events = self.engine.datagram_received(data, sender, now)
        if outgoing:
            self._send(outgoing)
        if events:
            self._events(events)
        if received:
            self._dispatch(received, now)
        if not self.closed:
            self.timer.reschedule()

    def _dispatch(self, received: Sequence[Received], now: int) -> None:
        dispatch = self.demux.dispatch
        for item in received:
            got = item.payload
            view = got if isinstance(got, memoryview) else memoryview(got)
            dispatch(view, now, FLAG_RETRANSMIT if item.retransmission else 0)

    def _poll(self) -> None:
        if self.closed:
            return
        outgoing, events = self.engine.poll(self.loop.clock.now_ns())
        if outgoing:
            self._send(outgoing)
        self._events(events)
        released = self.engine.take_released()  # held for head loss the timers gave up on
        if released and not self.closed:
            self._dispatch(released, self.loop.clock.now_ns())
        if not self.closed:
            self.timer.reschedule()

    def _events(self, events: Iterable[Any]) -> None:
        for event in events:
            if isinstance(event, SessionActive) and not self.active:
                self.active = True
                self.on_active()
            elif isinstance(event, SessionEnded):
                self.close(f"{self.TRANSPORT} session ended: {event.reason}")

    def statistics(self) -> RmReceiverStatistics | RuReceiverStatistics:
        d = self.demux
        synced = self._synced
        self.engine.count_lbm_messages(
            msgs=d.lbm_msgs_rcved - synced[0], no_topic=d.lbm_msgs_no_topic_rcved - synced[1]
        )
        self._synced = (d.lbm_msgs_rcved, d.lbm_msgs_no_topic_rcved)
        return self.engine.statistics()

    def close(self, reason: str = "closed") -> None:
        """Stop receiving; ``on_end(reason)`` tells the subscriptions (EOS)."""
        if self.closed:
            return
        self.closed = True
        self.timer.cancel()
        self._forget(self)
        self.on_end(reason)
