"""What every source transport session shares, whatever carries its datagrams (seed 2.9, 8.6, 8.7, 8.9).

A source transport session numbers its topics, batches the LBMC messages of all its sources into
datagrams (implicit batching, seed 8.6.1: flush when the batch reaches ``implicit_batching_minimum_length``,
before it would overflow the datagram, on ``FLUSH``, or when its oldest message waited
``implicit_batching_interval``), fragments what does not fit one datagram (seed 8.7), sends TSNIs for idle
topics (seed 8.9), and applies flow control before each send: a session that has no room blocks the
sender or raises :class:`~openum.WouldBlock`, and owes the refused sources a ``WAKEUP`` event (seed
2.11.3).  Subclasses say what "no room" means and deliver the datagrams (TCP: to connected receivers;
LBT-RM/LBT-RU: through their reliability engine).

``send`` runs on the caller's thread under the session lock (ARCHITECTURE.md 3); timers and socket events
run on the context thread.
"""

from __future__ import annotations

import abc
import itertools
import threading
from collections.abc import Callable
from typing import Any, Final

from openum._errors import ClosedError, InvalidStateError, WouldBlock
from openum.runtime import NS_PER_MS, EventLoop, in_context_callback
from openum.wire.lbmc import (
    FRAGMENT_HEADER_LEN,
    AppHeaderChain,
    FragmentHeader,
    Header,
    LbmcMessage,
    MessageType,
    PropertiesBlock,
    PropertiesLengthElement,
    TsniHeader,
    control_message,
    data_message_packer,
    encode_data_into,
    encode_fragment_into,
    encode_message,
    encode_properties,
)

__all__ = [
    "EVENT_CONNECT",
    "EVENT_DISCONNECT",
    "EVENT_WAKEUP",
    "SQN_MASK",
    "RetainedMessage",
    "SourceSessionBase",
    "TopicSender",
]

DATA_HEADER: Final = 12
FRAGMENT_OVERHEAD: Final = FRAGMENT_HEADER_LEN  # 28: data header + FRAG extension header
PROPERTIES_FRAGMENT_OVERHEAD: Final = 40  # ... plus the properties-length chain element
SQN_MASK: Final = 0xFFFFFFFF

EVENT_CONNECT, EVENT_DISCONNECT, EVENT_WAKEUP = 1, 2, 3

# How many payload sizes a session keeps a packer for (applications send a handful of sizes; the rest
# take the slow way).
_MAX_PACKERS: Final = 64
#: ``pack(buf, offset, msglen, topic_index, sqn, payload)``: wire.lbmc.data_message_packer's encoder.
_Packer = Callable[[Any, int, int, int, int, bytes | bytearray], None]


class TopicSender:
    """What a session reads and advances of the source of each of its topics (``openum.Source`` is one).

    ``topic_index``: the topic's index in the session; ``_next_sqn``: the topic sequence number of its
    next message; ``_last_send_ns``: when it last sent (None: never), for TSNIs.  (A class, not a
    protocol, so that compiled sessions reach these attributes directly.)
    """

    topic_index: int
    _next_sqn: int
    _last_send_ns: int | None
    #: The source's Late Join retention buffer (``openum.protocol.recovery.RetentionBuffer`` of
    #: :class:`RetainedMessage`), or None: only a source with ``late_join`` keeps what it sends.
    _retention: Any = None


class RetainedMessage:
    """One message as a late-join source sent it, kept for retransmission: its payload, properties and
    extension headers, its first topic sqn and how many sqns (fragments) it took.  The retention buffer
    holds one entry per fragment sqn, each ``(this, fragment number)``."""

    __slots__ = ("count", "data", "first_sqn", "headers", "properties")

    def __init__(
        self,
        data: bytes,
        properties: PropertiesBlock | None,
        headers: tuple[Header, ...],
        first_sqn: int,
        count: int,
    ) -> None:
        self.data = data
        self.properties = properties
        self.headers = headers
        self.first_sqn = first_sqn
        self.count = count


class SourceSessionBase(abc.ABC):
    """Topics, batching, fragmentation, TSNIs and flow control of one source transport session."""

    #: Counters every session keeps (subclasses add their own).
    BASE_COUNTERS = ("fragments_sent", "tsnis_sent", "blocked")

    def __init__(
        self,
        loop: EventLoop,
        log: Any,
        attrs: Any,
        datagram_max: int,
        counters: tuple[str, ...],
        lock: threading.Lock | None = None,
    ) -> None:
        """``lock``: shared by sessions whose engines share state (a rate controller); default: own lock."""
        self.loop = loop
        self.log = log
        self.attrs = attrs
        self.topics: dict[int, Any] = {}  # topic index -> the Source (has _session_event, _next_sqn, ...)
        self._indices = itertools.count(1)
        self.closed = False
        self.lock = lock or threading.Lock()
        # The send path takes the lock with these (``with`` looks __enter__ and __exit__ up every time,
        # and __exit__ parses three arguments).
        self._acquire = self.lock.acquire
        self._release = self.lock.release
        self._unblocked = threading.Condition(self.lock)
        self.batch_min: int = attrs.get("implicit_batching_minimum_length")
        self.batch_interval_ms: int = attrs.get("implicit_batching_interval")
        self.datagram_max = datagram_max
        self.max_payload = datagram_max - DATA_HEADER
        self._batch = bytearray(datagram_max)
        self._blen = 0
        self._packers: dict[int, _Packer] = {}
        self._batch_timer: int | None = None
        self._wakeup_wanted: set[int] = set()  # topic indices that got WouldBlock
        self._stats = dict.fromkeys((*self.BASE_COUNTERS, *counters), 0)
        #: Time blocking sends spent waiting for room, in nanoseconds (a subclass's statistics may show it).
        self._blocked_ns = 0
        # The hot path's counters (msgs_sent, bytes_sent, datagrams_sent of the statistics).
        self._msgs_sent = 0
        self._bytes_sent = 0
        self._datagrams_sent = 0
        self._now = loop.clock.now_ns
        self._tsni_interval_ms: int = attrs.get("transport_topic_sequence_number_info_interval")
        self._tsni_active_ms: int = attrs.get("transport_topic_sequence_number_info_active_threshold") * 1000
        self._tsni_timer: int | None = None
        self._tsnis_for: dict[int, tuple[int, int]] = {}  # topic index -> (last send it is for, TSNIs sent)

    # -- what subclasses provide ---------------------------------------------------------------------
    @abc.abstractmethod
    def _deliver(self, data: bytes | bytearray) -> None:
        """Send one datagram of LBMC messages (lock held); ``data`` is the session's to keep."""

    @abc.abstractmethod
    def transport_info(self) -> Any:
        """The session's transport information as topic resolution advertises it (an LBMR record)."""

    @abc.abstractmethod
    def statistics(self) -> Any:
        """A snapshot of the session's counters."""

    @abc.abstractmethod
    def close(self) -> None:
        """Flush, stop and release the session's sockets."""

    def _has_room(self) -> bool:
        """Whether a send may go ahead now (lock held)."""
        return True

    def _blocked_reason(self) -> str:
        return "the transport session has no room"

    def _connected_peers(self) -> list[Any]:
        """Receivers connected to the session now (a new source gets CONNECT for each)."""
        return []

    # -- topics ------------------------------------------------------------------------------------
    def allocate_index(self, source: Any) -> int:
        """A topic index for a new source on this session (unique within the session).

        Receivers already connected to the session are connected to the new source too: it gets a
        CONNECT event for each of them (on the context thread).
        """
        index = next(self._indices)
        with self.lock:
            self.topics[index] = source
            peers = self._connected_peers()
        for peer in peers:
            self.loop.call_soon(source._session_event, EVENT_CONNECT, peer)
        return index

    def release_index(self, index: int) -> None:
        with self.lock:
            self.topics.pop(index, None)
            self._wakeup_wanted.discard(index)

    def notify(self, event: int, info: Any) -> None:
        """A session event for every source on the session (context thread)."""
        for source in list(self.topics.values()):
            source._session_event(event, info)

    def start_timers(self) -> None:
        if self._tsni_interval_ms:
            self._tsni_timer = self.loop.schedule_timer(self._tsni_interval_ms, self._tsni_tick)

    # -- flow control --------------------------------------------------------------------------------
    def _release_blocked(self) -> list[int]:
        """When there is room again: wake blocked senders; return the topics owed a WAKEUP (lock held)."""
        if not self._has_room():
            return []
        self._unblocked.notify_all()
        wake = list(self._wakeup_wanted)
        self._wakeup_wanted.clear()
        return wake

    def _wake(self, topic_indices: list[int]) -> None:
        for index in topic_indices:
            source = self.topics.get(index)
            if source is not None:
                source._session_event(EVENT_WAKEUP, None)  # on the context thread (seed 2.11.3)

    def _room_poll_s(self) -> float:
        """How long a blocked sender waits before it looks for room again while no thread processes the
        context's events (sequential mode between ``process_events`` calls): ``_has_room`` then makes
        the progress the context thread would make (subclasses say when it may)."""
        return 0.001

    def _wait_room(self, topic_index: int, nonblock: bool) -> None:
        """Flow control before a send (lock held): block, or raise WouldBlock, while there is no room.

        A blocked sender is woken when the context thread makes room; while no thread processes the
        context's events it looks again every :meth:`_room_poll_s` and makes room itself."""
        if self._has_room():
            return
        if self.closed:
            raise ClosedError("the source's transport session is closed")
        self._stats["blocked"] += 1
        if nonblock:
            self._wakeup_wanted.add(topic_index)
            raise WouldBlock(
                f"{self._blocked_reason()}; a WAKEUP source event follows when sending may resume"
            )
        if in_context_callback():
            raise InvalidStateError(
                "a blocking send from a context-thread callback would deadlock (the context thread is "
                "the one that makes room); send with SendFlags.NONBLOCK there (seed 2.12.1)"
            )
        start = self._now()
        try:
            while True:
                self._unblocked.wait(1.0 if self.loop.running else self._room_poll_s())
                if self.closed:
                    raise ClosedError("the source's transport session is closed")
                if self._has_room():
                    return
        finally:
            self._blocked_ns += self._now() - start

    # -- the send path ----------------------------------------------------------------------------
    def send(
        self,
        source: TopicSender,
        data: bytes | bytearray | memoryview,
        flush: bool,
        nonblock: bool,
        hold: bool,
        properties: PropertiesBlock | None,
    ) -> int:
        """Send one application message of ``source`` (its ``topic_index`` and next sequence number,
        ``_next_sqn``, which this advances under the session lock so concurrent senders stay ordered).

        ``flush`` sends the batch now; ``nonblock`` raises WouldBlock instead of waiting for room;
        ``hold`` keeps the batch from being flushed for its size (explicit batching, seed 8.6.4).
        Returns the topic sequence number of the (last fragment of the) message.

        On the hot path (a message that fits the datagram, without properties) the counters are
        attributes rather than entries of the statistics dict.
        """
        self._acquire()
        try:
            if self.closed:
                raise ClosedError("the source's transport session is closed")
            topic_index = source.topic_index
            if not self._has_room():
                self._wait_room(topic_index, nonblock)
            sqn: int = source._next_sqn
            size = len(data)
            if properties is None and size <= self.max_payload:
                blen = self._blen
                if blen + DATA_HEADER + size > self.datagram_max:
                    self._flush_locked()  # never overflow the datagram (seed 8.6.1, rule 3)
                    blen = 0
                # One struct call per message for the payload sizes this session sends (its first
                # message of a size takes encode_data_into and leaves a packer for the next ones); a
                # struct packs bytes, so a memoryview (a byte view: Source.send saw to it) is copied.
                pack: _Packer | None = self._packers.get(size)
                if pack is not None:
                    msglen = DATA_HEADER + size
                    pack(
                        self._batch,
                        blen,
                        msglen,
                        topic_index,
                        sqn,
                        data if type(data) is not memoryview else data.tobytes(),
                    )
                    self._blen = blen + msglen
                else:
                    self._blen = encode_data_into(self._batch, blen, topic_index, sqn, data)
                    if pack is None and len(self._packers) < _MAX_PACKERS:
                        self._packers[size] = data_message_packer(size)
                self._bytes_sent += size
                used = 1
            else:
                used = self._send_large(topic_index, sqn, data, properties)
            self._msgs_sent += 1
            source._next_sqn = (sqn + used) & SQN_MASK
            if source._retention is not None:  # a late-join source keeps what it sends
                self._retain(source._retention, sqn, used, data, properties, ())
            if flush or (self._blen >= self.batch_min and not hold):
                self._flush_locked()
            elif self._blen and self._batch_timer is None:
                self._batch_timer = self.loop.schedule_timer(self.batch_interval_ms, self._batch_expired)
            source._last_send_ns = self._now()
        finally:
            self._release()
        return (sqn + used - 1) & SQN_MASK

    def send_with_headers(
        self,
        source: TopicSender,
        data: bytes | bytearray | memoryview,
        headers: tuple[Header, ...],
        flush: bool,
        nonblock: bool,
        properties: PropertiesBlock | None,
    ) -> int:
        """:meth:`send` for a message that carries extension ``headers`` (a request's REQUEST header, seed
        10.12): the record path, every fragment of a large message carrying them; returns its (last
        fragment's) topic sequence number.  The batch is flushed when ``flush`` says so or it is full."""
        self._acquire()
        try:
            if self.closed:
                raise ClosedError("the source's transport session is closed")
            topic_index = source.topic_index
            if not self._has_room():
                self._wait_room(topic_index, nonblock)
            sqn: int = source._next_sqn
            used = self._send_large(topic_index, sqn, data, properties, headers)
            self._msgs_sent += 1
            source._next_sqn = (sqn + used) & SQN_MASK
            if source._retention is not None:
                self._retain(source._retention, sqn, used, data, properties, headers)
            if flush or self._blen >= self.batch_min:
                self._flush_locked()
            elif self._blen and self._batch_timer is None:
                self._batch_timer = self.loop.schedule_timer(self.batch_interval_ms, self._batch_expired)
            source._last_send_ns = self._now()
        finally:
            self._release()
        return (sqn + used - 1) & SQN_MASK

    # -- Late Join retention (UM Concepts Guide 10.2) -----------------------------------------------
    def _retain(
        self,
        retention: Any,
        sqn: int,
        used: int,
        data: bytes | bytearray | memoryview,
        properties: PropertiesBlock | None,
        headers: tuple[Header, ...],
    ) -> None:
        """Add the message just sent (``used`` sqns from ``sqn``) to a late-join source's retention
        buffer, one entry per fragment, each counted by its payload size (lock held)."""
        record = RetainedMessage(bytes(data), properties, headers, sqn, used)
        now = self._now()
        if used == 1:
            retention.add(sqn, (record, 0), now, size=len(data))
            return
        chunk, total = self._fragment_chunk(record)
        for i in range(used):
            size = min(chunk, total - i * chunk)
            retention.add((sqn + i) & SQN_MASK, (record, i), now, size=size)

    def _fragment_chunk(self, record: RetainedMessage) -> tuple[int, int]:
        """``(piece size, whole length)`` of a fragmented message, as :meth:`_send_fragments` cut it."""
        block = None if record.properties is None else encode_properties(record.properties)
        overhead = FRAGMENT_OVERHEAD if block is None else PROPERTIES_FRAGMENT_OVERHEAD
        overhead += sum(len(h.encode_body()) + 2 for h in record.headers)
        total = len(record.data) + (0 if block is None else len(block))
        return self.datagram_max - overhead, total

    def retransmission(
        self, topic_index: int, retained: tuple[RetainedMessage, int], extra: tuple[Header, ...]
    ) -> bytes:
        """A retained message (or fragment) encoded again as a retransmission: an LBMC data message of
        type 0xA with its original topic index, sqn, headers and payload, plus ``extra`` headers."""
        record, i = retained
        if record.count == 1:
            message = LbmcMessage(
                MessageType.RETRANSMISSION,
                topic_index,
                record.first_sqn,
                (*extra, *record.headers),
                record.data,
                record.properties,
            )
            return encode_message(message)
        chunk, total = self._fragment_chunk(record)
        if record.properties is None:
            whole = record.data
            chained: tuple[Header, ...] = record.headers
        else:
            block = encode_properties(record.properties)
            whole = record.data + block
            chained = (*record.headers, AppHeaderChain((PropertiesLengthElement(len(block)),)))
        offset = i * chunk
        frag = FragmentHeader(record.first_sqn, offset, total)
        message = LbmcMessage(
            MessageType.RETRANSMISSION,
            topic_index,
            (record.first_sqn + i) & SQN_MASK,
            (*extra, frag, *chained),
            whole[offset : offset + chunk],
        )
        return encode_message(message)

    def _counters(self) -> dict[str, int]:
        """The session's counters for its statistics (lock held)."""
        return {
            **self._stats,
            "msgs_sent": self._msgs_sent,
            "bytes_sent": self._bytes_sent,
            "datagrams_sent": self._datagrams_sent,
        }

    def _flush_locked(self) -> None:
        if self._blen:
            # A copy of the batch (one allocation): the batch buffer is reused, a transport may keep the
            # datagram (a TCP client's backlog, a rate controller's queue, the retransmission window).
            data = self._batch[: self._blen]
            self._blen = 0
            self._datagrams_sent += 1
            self._deliver(data)

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
        headers: tuple[Header, ...] = (),
    ) -> int:
        """Messages with properties or extension ``headers``, or larger than a datagram: LBMC fragments
        (seed 8.7, 10.11)."""
        block = None if properties is None else encode_properties(properties)
        if block is not None or headers:
            extra = sum(len(h.encode_body()) + 2 for h in headers)
            if len(data) + (0 if block is None else len(block)) + 40 + extra <= self.datagram_max:
                self._append_message(
                    encode_message(LbmcMessage(MessageType.DATA, topic_index, sqn, headers, data, properties))
                )
                self._bytes_sent += len(data)
                return 1
        return self._send_fragments(topic_index, sqn, data, block, headers)

    def _send_fragments(
        self,
        topic_index: int,
        sqn: int,
        data: bytes | bytearray | memoryview,
        block: bytes | None,
        headers: tuple[Header, ...] = (),
    ) -> int:
        """A message larger than a datagram: one fragment per datagram (seed 8.7).  Without properties a
        fragment is written straight into the batch (``encode_fragment_into``: one struct call and one
        copy of its piece); with properties (``block``: their encoding) the block follows the payload and
        every fragment announces its length in an extra header (the record path)."""
        if block is None:
            whole = memoryview(data)
            extra: tuple[Header, ...] = headers
            overhead = FRAGMENT_OVERHEAD
        else:
            whole = memoryview(bytes(data) + block)
            extra = (*headers, AppHeaderChain((PropertiesLengthElement(len(block)),)))
            overhead = PROPERTIES_FRAGMENT_OVERHEAD
        overhead += sum(len(h.encode_body()) + 2 for h in headers)
        total = len(whole)
        chunk = self.datagram_max - overhead
        count = (total + chunk - 1) // chunk
        for i in range(count):
            offset = i * chunk
            piece = whole[offset : offset + chunk]
            fragment_sqn = (sqn + i) & SQN_MASK
            if extra:
                frag = FragmentHeader(sqn, offset, total)
                msg = LbmcMessage(MessageType.DATA, topic_index, fragment_sqn, (frag, *extra), piece)
                self._append_message(encode_message(msg))
            else:
                if self._blen + FRAGMENT_OVERHEAD + len(piece) > self.datagram_max:
                    self._flush_locked()
                self._blen = encode_fragment_into(
                    self._batch, self._blen, topic_index, fragment_sqn, sqn, offset, total, piece
                )
            self._flush_locked()  # each fragment is its own datagram
        self._stats["fragments_sent"] += count
        self._bytes_sent += len(data)
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
        """TSNIs for the topics idle for a whole interval since their last send (or last TSNI), then the
        timer for the next one due (seed 8.9, 8.11.5: each send starts the topic's TSNI timer)."""
        self._tsni_timer = None
        if self.closed:
            return
        now = self.loop.clock.now_ns()
        interval_ns = self._tsni_interval_ms * NS_PER_MS
        active_ns = self._tsni_active_ms * NS_PER_MS
        records: list[tuple[int, int]] = []
        next_due: int | None = None
        sent = self._tsnis_for
        for index, source in list(self.topics.items()):
            last = source._last_send_ns
            if last is None:
                continue  # nothing sent yet: nothing to tell
            base, count = sent.get(index, (last, 0))
            if base != last:  # sent again since the last TSNI: its timer restarted
                base, count = last, 0
            due = last + interval_ns * (count + 1)
            if due <= now and (not active_ns or due - last <= active_ns):
                records.append((index, (source._next_sqn - 1) & SQN_MASK))
                count += 1
                due = last + interval_ns * (count + 1)
            sent[index] = (base, count)
            if not active_ns or due - last <= active_ns:
                next_due = due if next_due is None else min(next_due, due)
        for index in [i for i in sent if i not in self.topics]:
            del sent[index]
        if records:
            with self.lock:
                for start in range(0, len(records), TsniHeader.MAX_RECORDS):
                    chunk = tuple(records[start : start + TsniHeader.MAX_RECORDS])
                    self._append_message(encode_message(control_message(TsniHeader(chunk))))
                    self._stats["tsnis_sent"] += len(chunk)
                self._flush_locked()
        # A topic sending for the first time after now is due no earlier than now + interval.
        delay_ns = interval_ns if next_due is None else min(interval_ns, next_due - now)
        self._tsni_timer = self.loop.schedule_timer(max(delay_ns, 0) / NS_PER_MS, self._tsni_tick)

    # -- closing ---------------------------------------------------------------------------------------
    def _close_base(self) -> bool:
        """Flush, mark closed, wake blocked senders, cancel timers; False if it was closed already."""
        with self.lock:
            if self.closed:
                return False
            self._flush_locked()
            self.closed = True
            self._unblocked.notify_all()
        for timer in (self._batch_timer, self._tsni_timer):
            if timer is not None:
                try:
                    self.loop.cancel_timer(timer)
                except Exception:  # the loop may be closed already
                    pass
        return True
