"""The TCP transport, receiver side: one connection per joined source transport session (seed 6.1).

The receiving context connects to the source's TCP port (from the TIR), confirms the session id the TIR
carried (seed 6.1.2: a source disconnects a receiver with a stale id), and then reads the stream of
LBMC messages on its context thread: data messages are handed to the topic handler registered for
their topic index (topics it does not subscribe to are counted and dropped, seed 2.9.1), TSNIs to the
same handlers, and the first bytes from the source mark the session active (BOS, seed 2.11.1).  A
disconnect, a read error or ``transport_tcp_activity_timeout`` of silence ends the session (EOS).

Receive buffers are reused: payloads handed to handlers are views valid only during the call.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.transport._demux import LbmcDemux, TopicHandler, split_properties, stream_frame_error
from openum.wire.lbmc import CONTROL_HEADER_LEN
from openum.wire.lbttcp import session_id_message

__all__ = ["TcpReceiverSession", "TcpReceiverStatistics", "TopicHandler", "split_properties"]

RECV_BUFFER = 256 * 1024
_HEAD = struct.Struct(">BxH")  # ver/type, msglen: the start of every LBMC message
_INCOMPLETE = -2  # _complete_pending: the read ended inside the pending message again


@dataclass(frozen=True, slots=True)
class TcpReceiverStatistics:
    """Counters of one received TCP transport session (UM's ``lbm_rcv_transport_stats_tcp_t`` names).

    ``bytes_rcved``: bytes read from the connection.  ``lbm_msgs_rcved``: LBMC data messages received.
    ``lbm_msgs_no_topic_rcved``: of those, for topics this context does not subscribe to (dropped).
    ``tsnis_rcved``: TSNI records.  ``msgs_malformed``: undecodable messages (the connection is then
    dropped: a TCP stream cannot be resynchronised).
    """

    bytes_rcved: int
    lbm_msgs_rcved: int
    lbm_msgs_no_topic_rcved: int
    tsnis_rcved: int
    msgs_malformed: int


class TcpReceiverSession:
    """This context's connection to one source TCP transport session."""

    def __init__(
        self,
        loop: EventLoop,
        ip: str,
        port: int,
        session_id: int | None,
        log: Any,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
        *,
        activity_timeout_ms: int = 0,
        receive_buffer: int = 0,
        interface: str | None = None,
    ) -> None:
        self.loop = loop
        self.ip = ip
        self.port = port
        self.session_id = session_id
        self.log = log
        self.on_active = on_active
        self.on_end = on_end
        self.demux = LbmcDemux()
        self.topics = self.demux.topics
        self.active = False
        self.closed = False
        self._connected = False
        self._pending: bytearray | None = None  # the start of a message a read ended inside
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._bytes_rcved = 0
        self._activity_ns = activity_timeout_ms * NS_PER_MS
        self._last_activity = loop.clock.now_ns()
        self._activity_timer: int | None = None
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setblocking(False)
        if receive_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        if interface:
            self.sock.bind((interface, 0))
        code = self.sock.connect_ex((ip, port))
        if code not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self.sock.close()
            raise OSError(
                code, f"cannot connect to the TCP source at {ip}:{port}: {errno.errorcode.get(code)}"
            )
        loop.register_fd(self.sock.fileno(), FdEvent.WRITE, self._connect_event, None)
        if self._activity_ns:
            self._activity_timer = loop.schedule_timer(self._activity_ns / NS_PER_MS, self._check_activity)

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.ip, self.port, self.session_id)

    def _connect_event(self, fd: int, _events: FdEvent, _clientd: Any) -> None:
        """The non-blocking connect finished (the socket became writable): confirm it, then read."""
        if self.closed:
            return
        error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            self.close(f"connect to {self.ip}:{self.port} failed: {errno.errorcode.get(error, error)}")
            return
        self._connected = True
        if self.session_id is not None:
            try:  # confirm the session id we resolved (seed 6.1.2)
                self.sock.send(session_id_message(self.session_id))
            except OSError as exc:
                self.close(f"sending the session id failed: {exc}")
                return
        # From now on the loop calls _readable itself: one Python call less on every read.
        self.loop.unregister_fd(fd)
        self.loop.register_fd(fd, FdEvent.READ, self._readable, None)

    def _readable(self, _fd: int = -1, _events: Any = None, _clientd: Any = None) -> None:
        """Read what the socket has (one ``recv_into`` of up to 256 KiB) and deliver every whole
        message in it; an incomplete message at the end is kept for the next read.  The loop's
        callback for the connected socket."""
        if self.closed:
            return
        now = self.loop.clock.now_ns()
        try:
            count = self.sock.recv_into(self._buf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.close(f"read failed: {exc.strerror or exc}")
            return
        if count == 0:
            self.close("the source closed the connection")
            return
        self._last_activity = now
        self._bytes_rcved += count
        if not self.active:
            self.active = True
            self.on_active()  # the first bytes from the source: the session is active (BOS)
        view = self._view[:count]
        pos = 0
        if self._pending is not None:
            pos = self._complete_pending(view, now)
            if pos < 0:
                return  # closed, or the read ended inside the message again
        if pos:
            view = view[pos:]
        used = self.demux.dispatch_stream(view, now)
        if used < 0:
            self.close("the source sent a malformed message")
        elif used < len(view):
            self._pending = bytearray(view[used:])  # a copy: the receive buffer is reused

    def _complete_pending(self, view: memoryview, now: int) -> int:
        """Complete the message a previous read ended inside, from ``view``; deliver it once whole.

        Returns how many bytes of ``view`` it took, -1 when the stream is corrupt (then closed), or
        _INCOMPLETE when ``view`` ended inside the message again (it took all of it).
        The completed message gets a buffer of its own that is never resized afterwards, so payload
        views of it stay valid for their callbacks."""
        pending = self._pending
        assert pending is not None
        took: int = 0
        if len(pending) < CONTROL_HEADER_LEN:
            took = min(CONTROL_HEADER_LEN - len(pending), len(view))
            pending += view[:took]
            if len(pending) < CONTROL_HEADER_LEN:
                return _INCOMPLETE
        ver_type, msglen = _HEAD.unpack_from(pending, 0)
        problem = stream_frame_error(ver_type, msglen)
        if problem is not None:
            self.demux.msgs_malformed += 1
            self.close(f"the stream is corrupt ({problem})")
            return -1
        more: int = min(msglen - len(pending), len(view) - took)
        pending += view[took : took + more]
        took += more
        if len(pending) < msglen:
            return _INCOMPLETE
        self._pending = None
        if self.demux.dispatch_stream(memoryview(pending), now) != msglen:
            self.close("the source sent a malformed message")
            return -1
        return took

    def _check_activity(self, _clientd: Any) -> None:
        self._activity_timer = None
        if self.closed:
            return
        now = self.loop.clock.now_ns()
        silent = now - self._last_activity
        if silent >= self._activity_ns:
            self.close(f"no activity for {silent // NS_PER_MS} ms (transport_tcp_activity_timeout)")
            return
        self._activity_timer = self.loop.schedule_timer(
            (self._activity_ns - silent) / NS_PER_MS, self._check_activity
        )

    def statistics(self) -> TcpReceiverStatistics:
        d = self.demux
        return TcpReceiverStatistics(
            self._bytes_rcved, d.lbm_msgs_rcved, d.lbm_msgs_no_topic_rcved, d.tsnis_rcved, d.msgs_malformed
        )

    def close(self, reason: str = "closed") -> None:
        """Disconnect; ``on_end(reason)`` tells the subscriptions (EOS) unless the close was asked for."""
        if self.closed:
            return
        self.closed = True
        if self._activity_timer is not None:
            self.loop.cancel_timer(self._activity_timer)
        try:
            self.loop.unregister_fd(self.sock.fileno())
        except Exception:  # the loop may be closing
            pass
        self.sock.close()
        self.log.debug("TCP session %s:%d: %s", self.ip, self.port, reason)
        self.on_end(reason)
