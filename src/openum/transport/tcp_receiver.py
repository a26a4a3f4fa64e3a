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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from openum.runtime import NS_PER_MS, EventLoop, FdEvent
from openum.wire import WireError
from openum.wire.lbmc import (
    AppHeaderChain,
    FragmentHeader,
    MessageType,
    PropertiesLengthElement,
    TsniHeader,
    decode_data_fast,
    decode_message_at,
    decode_properties,
)
from openum.wire.lbttcp import StreamDecoder, session_id_message

__all__ = ["TcpReceiverSession", "TcpReceiverStatistics", "TopicHandler"]

RECV_BUFFER = 256 * 1024
FLAG_RETRANSMIT = 0x8  # LBM_MSG_FLAG_RETRANSMIT


class TopicHandler(Protocol):
    def on_data(
        self,
        sqn: int,
        payload: memoryview | bytes,
        now_ns: int,
        fragment: tuple[int, int, int] | None,
        flags: int,
        properties: Any,
    ) -> None: ...

    def on_tsni(self, sqn: int, now_ns: int) -> None: ...


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
        self.topics: dict[int, TopicHandler] = {}
        self.active = False
        self.closed = False
        self._connected = False
        self._decoder = StreamDecoder()
        self._buf = bytearray(RECV_BUFFER)
        self._view = memoryview(self._buf)
        self._stats = {
            "bytes_rcved": 0,
            "lbm_msgs_rcved": 0,
            "lbm_msgs_no_topic_rcved": 0,
            "tsnis_rcved": 0,
            "msgs_malformed": 0,
        }
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
        loop.register_fd(self.sock.fileno(), FdEvent.WRITE, self._event, None)
        if self._activity_ns:
            self._activity_timer = loop.schedule_timer(self._activity_ns / NS_PER_MS, self._check_activity)

    @property
    def key(self) -> tuple[str, int, int | None]:
        return (self.ip, self.port, self.session_id)

    def _event(self, _fd: int, events: FdEvent, _clientd: Any) -> None:
        if self.closed:
            return
        if not self._connected:
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
            self.loop.modify_fd(self.sock.fileno(), FdEvent.READ)
            return
        if events & FdEvent.READ:
            self._readable()

    def _readable(self) -> None:
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
        self._stats["bytes_rcved"] += count
        try:
            messages = self._decoder.feed(self._view[:count])
        except WireError as exc:
            self._stats["msgs_malformed"] += 1
            self.close(f"the stream is corrupt ({exc})")
            return
        if not self.active:
            self.active = True
            self.on_active()  # the first bytes from the source: the session is active (BOS)
        topics = self.topics
        stats = self._stats
        for view in messages:
            fast = decode_data_fast(view)
            if fast is not None:
                stats["lbm_msgs_rcved"] += 1
                handler = topics.get(fast[0])
                if handler is None:
                    stats["lbm_msgs_no_topic_rcved"] += 1
                    continue
                handler.on_data(fast[1], fast[2], now, None, 0, None)
                continue
            if not self._slow_path(view, now):
                return

    def _slow_path(self, view: memoryview, now: int) -> bool:
        try:
            msg, _ = decode_message_at(view)
        except WireError as exc:
            self._stats["msgs_malformed"] += 1
            self.close(f"the source sent a malformed message ({exc})")
            return False
        if msg.is_data:
            self._stats["lbm_msgs_rcved"] += 1
            handler = self.topics.get(msg.topic_index)
            if handler is None:
                self._stats["lbm_msgs_no_topic_rcved"] += 1
                return True
            flags = FLAG_RETRANSMIT if msg.type is MessageType.RETRANSMISSION else 0
            frag_hdr = msg.header(FragmentHeader)
            fragment = (
                None if frag_hdr is None else (frag_hdr.first_sqn, frag_hdr.offset, frag_hdr.total_length)
            )
            properties: Any = None
            payload: bytes | memoryview = msg.payload  # type: ignore[assignment]
            if msg.properties is not None:
                properties = msg.properties.to_dict()
            elif fragment is not None:
                chain = msg.header(AppHeaderChain)
                if chain is not None:
                    for element in chain.elements:
                        if isinstance(element, PropertiesLengthElement):
                            properties = _PropertiesLength(element.length)
            handler.on_data(msg.sqn, payload, now, fragment, flags, properties)
            return True
        tsni = msg.header(TsniHeader)
        if tsni is not None:
            for tidx, sqn in tsni.records:
                self._stats["tsnis_rcved"] += 1
                handler = self.topics.get(tidx)
                if handler is not None:
                    handler.on_tsni(sqn, now)
        return True

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
        return TcpReceiverStatistics(**self._stats)

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


@dataclass(frozen=True, slots=True)
class _PropertiesLength:
    """A fragmented message with properties: the last ``length`` bytes of the whole are the block."""

    length: int

    def split(self, whole: bytes) -> tuple[bytes, dict[str, Any]]:
        if self.length <= 0 or self.length > len(whole):
            return whole, {}
        try:
            props = decode_properties(whole[-self.length :]).to_dict()
        except WireError:
            return whole, {}
        return whole[: -self.length], props


def split_properties(payload: bytes, properties: Any) -> tuple[bytes, Any]:
    """For a reassembled message: separate the properties block announced by its fragments."""
    if isinstance(properties, _PropertiesLength):
        return properties.split(payload)
    return payload, properties
