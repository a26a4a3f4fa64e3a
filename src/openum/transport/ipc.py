"""The shared-memory transports LBT-IPC and LBT-SMX (UM Concepts Guide, sections 6.4 and 6.5).

A source transport session is one shared-memory segment (:class:`~openum.transport.shm.Writer`, named
``openum-ipc-<transport id>-<session id>`` / ``openum-smx-...`` in ``/dev/shm``); each of its records
is one datagram of LBMC messages, batched, fragmented and TSNI'd by :class:`SourceSessionBase` as on the
network transports, so topic indices, sequence numbers, properties, Late Join and OTR work unchanged.
Topic resolution advertises the session as an LBT-IPC or LBT-SMX TIR (host id, session id, transport
id); a receiving context on the same host (:func:`host_id`) joins it with a
:class:`~openum.transport.shm.Reader` (:class:`ShmReceiverSession`), one on another host ignores it.

LBT-IPC (6.4): ``transport_lbtipc_behavior`` source-paced (the writer never waits; a receiver that fell
a whole ring behind loses what was overwritten: unrecoverable loss, repaired by OTR when the source
retains) or receiver-paced (a send waits for the slowest live receiver, or raises ``WouldBlock`` with
``NONBLOCK``); receivers pend on a wake-up socket in the context's event loop, or busy-wait
(``transport_lbtipc_receiver_thread_behavior``; then the context thread polls and never sleeps).

LBT-SMX (6.5): receiver-paced, busy-wait receivers, no batching (every send is published at once), no
fragmentation (a message may be ``transport_lbtsmx_datagram_max_size`` - 16 bytes), no properties;
the zero-copy API of :class:`~openum.Source` (``buff_acquire`` / ``buffs_complete``) writes straight
into the ring, and receivers get views into the ring, valid during the callback.

Dead peers never wedge the others: a writer frees the slots of receivers whose process died (every
``transport_*_sm_interval``, and while it waits for room), a reader notices a dead writer and ends the
session (EOS).  :mod:`openum.transport.shm_resources` (``openum ipc-resources``) lists and removes what
a killed process left.
"""

from __future__ import annotations

import random
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from openum._errors import ClosedError, ConfigError, NotSupportedError, OpenUMError, WouldBlock
from openum.config import SourceAttributes
from openum.runtime import EventLoop, FdEvent
from openum.transport._demux import LbmcDemux
from openum.transport._pool import PortSessionPool, session_options
from openum.transport._source_session import SourceSessionBase, TopicSender
from openum.transport.shm import (
    BUSY_WAIT,
    KIND_IPC,
    KIND_SMX,
    MAX_RECEIVERS,
    PEND,
    RECEIVER_PACED,
    SPIN,
    Loss,
    Reader,
    SegmentError,
    Writer,
    segment_name,
)
from openum.wire.lbmr import LbtipcTransport, LbtsmxTransport

__all__ = [
    "IpcSessionPool",
    "ShmReceiverSession",
    "ShmReceiverStatistics",
    "ShmSourceSession",
    "ShmSourceStatistics",
    "SmxSessionPool",
    "SmxSourceSession",
    "host_id",
]

#: LBT-SMX's per-message header allowance (UM Concepts Guide 6.5.3: datagram_max_size - 16).
SMX_HEADER: Final = 16
_MAX_TRANSPORT_ID: Final = 0xFFFF  # the TIR's transport id is 16 bits (wire lbmr-topic-resolution)
#: How often a pending receiver checks that the writer lives, and a source services its segment at least.
_LIVENESS_MS: Final = 200
#: How long a closing receiver-paced source waits for room for its last batch and end of session (s).
_CLOSE_WAIT_S: Final = 1.0

_host_id: int | None = None


def host_id() -> int:
    """This host's id in LBT-IPC/LBT-SMX advertisements: a CRC-32 of ``/etc/machine-id`` (of the host
    name without one), never 0.  Receivers join only sessions advertised with their own host id."""
    global _host_id
    if _host_id is None:
        try:
            with open("/etc/machine-id", "rb") as f:
                seed = f.read().strip()
        except OSError:
            seed = b""
        _host_id = zlib.crc32(seed or socket.gethostname().encode()) or 1
    return _host_id


@dataclass(frozen=True, slots=True)
class ShmSourceStatistics:
    """Counters of an LBT-IPC/LBT-SMX source session.

    ``msgs_sent``/``bytes_sent``: LBMC messages and payload bytes; ``datagrams_sent``: ring records (a
    batch of messages each, one per message on LBT-SMX); ``bytes_buffered``: ring bytes published that
    the slowest receiver has not read; ``blocked``: sends that found no room (receiver-paced);
    ``blocked_ns``: time blocking sends waited; ``receivers``: live receivers now;
    ``receivers_evicted``: slots freed because their process died; ``fragments_sent``, ``tsnis_sent``."""

    msgs_sent: int
    bytes_sent: int
    datagrams_sent: int
    bytes_buffered: int
    blocked: int
    blocked_ns: int
    receivers: int
    receivers_evicted: int
    fragments_sent: int
    tsnis_sent: int


class ShmSourceSession(SourceSessionBase):
    """One LBT-IPC or LBT-SMX source transport session: its segment and the sources on it."""

    def __init__(
        self,
        loop: EventLoop,
        log: Any,
        attrs: Any,
        context_attrs: Any,
        kind: str,
        transport_id: int,
        session_id: int,
    ) -> None:
        self.kind = kind
        self.port = transport_id  # the pool's key
        self.session_id = session_id
        smx = kind == KIND_SMX
        if transport_id > _MAX_TRANSPORT_ID:
            option = "transport_lbtsmx_id" if smx else "transport_lbtipc_id"
            raise ConfigError(
                f"{option} {transport_id} does not fit the 16-bit transport id of a TIR",
                option=option,
                value=transport_id,
                allowed=f"1 to {_MAX_TRANSPORT_ID}",
            )
        if smx:
            capacity = _power_of_two(attrs.get("transport_lbtsmx_transmission_window_size"), log)
            datagram_max = int(attrs.get("transport_lbtsmx_datagram_max_size"))
            capacity = max(capacity, _power_of_two(2 * datagram_max + 64, None))
            pacing = RECEIVER_PACED
            receivers = int(attrs.get("transport_lbtsmx_maximum_receivers_per_transport"))
            self._sm_ms = int(attrs.get("transport_lbtsmx_sm_interval"))
        else:
            capacity = int(attrs.get("transport_lbtipc_transmission_window_size")) // 8 * 8
            datagram_max = int(context_attrs.get("transport_lbtipc_datagram_max_size"))
            pacing = str(attrs.get("transport_lbtipc_behavior"))
            receivers = int(attrs.get("transport_lbtipc_maximum_receivers_per_transport"))
            self._sm_ms = int(attrs.get("transport_lbtipc_sm_interval"))
        if receivers > MAX_RECEIVERS:
            option = f"transport_{'lbtsmx' if smx else 'lbtipc'}_maximum_receivers_per_transport"
            raise ConfigError(
                f"{option} {receivers}: openum's segments have at most {MAX_RECEIVERS} receiver slots",
                option=option,
                value=receivers,
                allowed=f"1 to {MAX_RECEIVERS}",
            )
        self.writer = Writer(
            segment_name(kind, transport_id, session_id),
            kind=kind,
            capacity=capacity,
            pacing=pacing,
            max_receivers=receivers,
            session_id=session_id,
            transport_id=transport_id,
            wait=SPIN if smx else PEND,
        )
        if self.writer.reclaimed_from_pid is not None:
            log.warning(
                "%s: reclaimed the segment left by pid %d (it died)",
                self.writer.path,
                self.writer.reclaimed_from_pid,
            )
        if datagram_max > self.writer.max_record:
            log.warning(
                "%s: a record of this %d-byte ring holds at most %d bytes: datagrams (and %s) are limited to "
                "that, not to the %d configured",
                self.writer.path,
                capacity,
                self.writer.max_record,
                "messages" if smx else "batches",
                datagram_max,
            )
            datagram_max = self.writer.max_record
        super().__init__(loop, log, attrs, datagram_max, ("records_sent",))
        self.pacing = pacing
        self._receiver_paced = pacing == RECEIVER_PACED
        self._send_record: Callable[[bytes | bytearray], None] = self.writer.send
        self._service_timer: int | None = None
        self._room_timer: int | None = None
        self._acquirer: TopicSender | None = None  # the source that acquired last
        self._acquire_message = self.writer.acquire_message
        self.transport: LbtipcTransport | LbtsmxTransport = (LbtsmxTransport if smx else LbtipcTransport)(
            host_id(), session_id, transport_id
        )

    def start(self) -> None:
        self.start_timers()
        self._service_timer = self.loop.schedule_timer(min(self._sm_ms, _LIVENESS_MS * 5), self._service)

    def _service(self, _clientd: Any) -> None:
        """Heartbeat for readers, dead readers' slots freed (6.4.6 receiver monitoring)."""
        self._service_timer = None
        if self.closed:
            return
        with self.lock:
            try:
                evicted = self.writer.service()
            except (OSError, SegmentError) as exc:
                self.log.warning("%s: %s", self.writer.path, exc)
                evicted = []
            wake = self._release_blocked() if evicted else []
        if evicted:
            self.log.info("%s: freed the slots of %d receiver(s) that died", self.writer.path, len(evicted))
        self._wake(wake)
        self._service_timer = self.loop.schedule_timer(min(self._sm_ms, _LIVENESS_MS * 5), self._service)

    def _send_bounded(self, data: bytes | bytearray) -> None:
        self.writer.send(data, timeout=_CLOSE_WAIT_S)

    # -- SourceSessionBase -----------------------------------------------------------------------------
    def _deliver(self, data: bytes | bytearray) -> None:
        self._send_record(data)
        self._stats["records_sent"] += 1

    def _has_room(self) -> bool:
        return not self._receiver_paced or self.writer.has_room(self.datagram_max)

    def _wait_room(self, topic_index: int, nonblock: bool) -> None:
        """Receiver-paced flow control (lock held).  A blocking send waits in the writer itself (it
        spins, then sleeps until a receiver signals that it read); a NONBLOCK send that finds the ring
        full raises WouldBlock, and a WAKEUP follows once there is room again."""
        if not nonblock or not self._receiver_paced or self.writer.has_room(self.datagram_max):
            return
        if self.closed:
            raise ClosedError("the source's transport session is closed")
        self._stats["blocked"] += 1
        self._wakeup_wanted.add(topic_index)
        if self._room_timer is None:
            self._room_timer = self.loop.schedule_timer(1, self._room_check)
        raise WouldBlock(f"{self._blocked_reason()}; a WAKEUP source event follows when sending may resume")

    def _room_check(self, _clientd: Any) -> None:
        """Look for room for the senders that got WouldBlock (every millisecond until there is)."""
        with self.lock:
            self._room_timer = None
            if self.closed:
                return
            wake = self._release_blocked()
            if self._wakeup_wanted:
                self._room_timer = self.loop.schedule_timer(1, self._room_check)
        self._wake(wake)

    def _blocked_reason(self) -> str:
        return f"the {self.kind.upper()} ring is full: a receiver has not read what was sent (receiver_paced)"

    def _room_poll_s(self) -> float:
        return 0.0005

    def transport_info(self) -> Any:
        return self.transport

    def statistics(self) -> ShmSourceStatistics:
        with self.lock:
            w = self.writer.statistics()
            lags = [r.lag for r in self.writer.receivers()]
            return ShmSourceStatistics(
                self._msgs_sent,
                self._bytes_sent,
                self._stats["records_sent"],
                max(lags, default=0),
                self._stats["blocked"] + w.would_block,
                self._blocked_ns + w.blocked_ns,
                w.receivers,
                w.evictions,
                self._stats["fragments_sent"],
                self._stats["tsnis_sent"],
            )

    def close(self) -> None:
        if self.closed:
            return
        with self.lock:
            # A receiver that stopped reading must not hold the close up: what it leaves no room for
            # within _CLOSE_WAIT_S is dropped (and its receivers see EOS all the same).
            self._send_record = self._send_bounded
            try:
                self._flush_locked()
            except (OSError, OpenUMError) as exc:
                self.log.warning("%s: closing: the last batch was not delivered (%s)", self.writer.path, exc)
                self._blen = 0
        if not self._close_base():
            return
        for timer in (self._service_timer, self._room_timer):
            if timer is not None:
                self.loop.cancel_timer(timer)
        self._service_timer = self._room_timer = None
        with self.lock:
            self.writer.close(timeout=_CLOSE_WAIT_S if self._receiver_paced else 0.0)


class SmxSourceSession(ShmSourceSession):
    """An LBT-SMX source session: every message published at once, no fragments, properties or
    requests, and the zero-copy API (UM Concepts Guide 6.5.2-6.5.6)."""

    def send(
        self,
        source: TopicSender,
        data: bytes | bytearray | memoryview,
        flush: bool,
        nonblock: bool,
        hold: bool,
        block: Any,
    ) -> int:
        if block is not None:
            raise NotSupportedError("LBT-SMX does not carry message properties (UM Concepts Guide 6.5.6)")
        if len(data) > self.datagram_max - SMX_HEADER:
            raise ValueError(
                f"a {len(data)}-byte message does not fit LBT-SMX: at most "
                f"transport_lbtsmx_datagram_max_size - 16 = {self.datagram_max - SMX_HEADER} bytes "
                "(LBT-SMX does not fragment)"
            )
        # No implicit batching on LBT-SMX: every send is published at once (6.5.3).
        return super().send(source, data, True, nonblock, False, None)

    def send_with_headers(
        self,
        source: TopicSender,
        data: bytes | bytearray | memoryview,
        headers: tuple[Any, ...],
        flush: bool,
        nonblock: bool,
        properties: Any,
    ) -> int:
        raise NotSupportedError(
            "LBT-SMX carries plain messages only: no requests, application headers or properties "
            "(UM Concepts Guide 6.5.6); use LBT-IPC"
        )

    # -- the SMX zero-copy API -------------------------------------------------------------------------
    def acquire(self, source: TopicSender, n: int, nonblock: bool) -> memoryview:
        """A writable view of ``n`` payload bytes in the ring for ``source``'s next message
        (``lbm_src_buff_acquire``); published by :meth:`complete`."""
        if n < 0 or n > self.datagram_max - SMX_HEADER:
            raise ValueError(
                f"buff_acquire({n}): at most transport_lbtsmx_datagram_max_size - 16 = "
                f"{self.datagram_max - SMX_HEADER} bytes"
            )
        sqn = source._next_sqn
        view = self._acquire_message(n, source.topic_index, sqn, not nonblock)
        if view is None:
            self._stats["blocked"] += 1
            raise WouldBlock(self._blocked_reason())
        source._next_sqn = (sqn + 1) & 0xFFFFFFFF
        self._msgs_sent += 1
        self._bytes_sent += n
        if self._acquirer is not source:
            self._acquirer = source
        return view

    def flush(self) -> None:
        """Publish the acquired buffers and what is held (``lbm_src_flush``: a thread-safe
        ``lbm_src_buffs_complete``, 6.5.3)."""
        with self.lock:
            self.complete()
        super().flush()

    def complete(self) -> int:
        """Publish every acquired message (``lbm_src_buffs_complete``); returns how many."""
        done = self.writer.complete()
        if done:
            self._stats["records_sent"] += done
            if self._acquirer is not None:
                self._acquirer._last_send_ns = self._now()  # for its TSNIs (8.9)
        return done

    def cancel(self, source: TopicSender) -> int:
        """Drop the acquired messages (``lbm_src_buffs_cancel``); their sequence numbers are given back."""
        dropped = self.writer.cancel()
        source._next_sqn = (source._next_sqn - dropped) & 0xFFFFFFFF
        self._msgs_sent -= dropped
        return dropped


def _power_of_two(value: int, log: Any) -> int:
    """LBT-SMX's window is a power of two: rounded up, with a warning (UM Concepts Guide 6.5.6)."""
    size = 1 << max(10, (int(value) - 1).bit_length())
    if size != value and log is not None:
        log.warning(
            "transport_lbtsmx_transmission_window_size %d is not a power of two: using %d", value, size
        )
    return size


class _ShmPool(PortSessionPool[ShmSourceSession]):
    """A context's LBT-IPC or LBT-SMX sessions: transport ids of a range, assigned round-robin (6.4.7)."""

    TRANSPORT_KIND: str
    #: The context options of the pool's transport id range.
    RANGE_OPTIONS: tuple[str, str]

    def __init__(
        self,
        loop: EventLoop,
        context_attrs: Any,
        interface: str,
        log: Any,
        rng: random.Random | None = None,
    ) -> None:
        prefix = f"transport_{'lbtsmx' if self.TRANSPORT_KIND == KIND_SMX else 'lbtipc'}_"
        low, high = (context_attrs.get(name) for name in self.RANGE_OPTIONS)
        super().__init__(
            loop,
            context_attrs,
            interface,
            log,
            rng,
            port_low=low,
            port_high=high,
            maximum_ports=high - low + 1,
            session_option_names=session_options(prefix),
            range_hint=f"{prefix}id_low/high",
        )

    def _open(self, attrs: SourceAttributes, port: int) -> ShmSourceSession:
        session = (SmxSourceSession if self.TRANSPORT_KIND == KIND_SMX else ShmSourceSession)(
            self.loop,
            self.log,
            attrs.copy(),
            self.context_attrs,
            self.TRANSPORT_KIND,
            port,
            self.rng.randrange(1, 1 << 32),
        )
        session.start()
        self.log.debug("%s session: segment %s", self.KIND, session.writer.path)
        return session


class IpcSessionPool(_ShmPool):
    PORT_OPTION = "transport_lbtipc_id"
    KIND = "LBT-IPC session"
    TRANSPORT_KIND = KIND_IPC
    RANGE_OPTIONS = ("transport_lbtipc_id_low", "transport_lbtipc_id_high")


class SmxSessionPool(_ShmPool):
    PORT_OPTION = "transport_lbtsmx_id"
    KIND = "LBT-SMX session"
    TRANSPORT_KIND = KIND_SMX
    RANGE_OPTIONS = ("transport_lbtsmx_id_low", "transport_lbtsmx_id_high")


# -- receiving ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShmReceiverStatistics:
    """Counters of a received LBT-IPC/LBT-SMX session.  ``records_rcved``: ring records (datagrams);
    ``bytes_rcved``: their bytes; ``lbm_msgs_rcved`` / ``lbm_msgs_no_topic_rcved`` / ``tsnis_rcved`` /
    ``msgs_malformed``: as for TCP; ``records_lost``: records overwritten before this receiver read them
    (source-paced LBT-IPC; the messages in them are reported as unrecoverable loss); ``sleeps``: times the
    receiver pended (pend mode)."""

    records_rcved: int
    bytes_rcved: int
    lbm_msgs_rcved: int
    lbm_msgs_no_topic_rcved: int
    tsnis_rcved: int
    msgs_malformed: int
    records_lost: int
    sleeps: int


class ShmReceiverSession:
    """This context's view of one LBT-IPC or LBT-SMX source session."""

    def __init__(
        self,
        loop: EventLoop,
        transport: LbtipcTransport | LbtsmxTransport,
        log: Any,
        on_active: Callable[[], None],
        on_end: Callable[[str], None],
        *,
        mode: str = PEND,
        linger: int = 1,
    ) -> None:
        self.loop = loop
        self.log = log
        self.on_active = on_active
        self.on_end = on_end
        self.kind = KIND_SMX if isinstance(transport, LbtsmxTransport) else KIND_IPC
        if self.kind == KIND_SMX:
            mode = BUSY_WAIT  # LBT-SMX receivers only busy-wait (6.5)
        self.mode = mode
        self.demux = LbmcDemux()
        self.topics = self.demux.topics
        self.active = False
        self.closed = False
        self._records_lost = 0
        name = segment_name(self.kind, transport.transport_id, transport.session_id)
        self.reader = Reader(
            name,
            mode=mode,
            linger=linger,
            on_loss=self._on_loss,
            kind=self.kind,
            session_id=transport.session_id,
        )
        self._poll = self.reader.poll
        self._dispatch = self.demux.dispatch
        self._now = loop.clock.now_ns
        self._recheck: int | None = None
        self._timer: int | None = loop.schedule_timer(_LIVENESS_MS, self._liveness)
        if mode == BUSY_WAIT:
            loop.add_spinner(self._spin)
        else:
            loop.register_fd(self.reader.fileno(), FdEvent.READ, self._readable, None)
            loop.call_soon(self._readable)

    @property
    def key(self) -> str:
        return self.reader.name

    def _record(self, view: memoryview, _kind: int) -> None:
        if not self.active:  # the first record: the session is active (BOS before its messages)
            self.active = True
            self.on_active()
        if not self._dispatch(view, self._now()):
            self.log.debug("%s: a malformed record", self.reader.name)

    def _on_loss(self, loss: Loss) -> None:
        self._records_lost += loss.count
        self.log.warning(
            "%s: %d record(s) were overwritten before this receiver read them (source_paced; a slow "
            "receiver loses what the ring no longer holds)",
            self.reader.name,
            loss.count,
        )

    def _drain(self) -> int:
        got = 0
        poll = self._poll
        record = self._record
        while True:
            n = poll(record)
            if not n:
                break
            got += n
        if self.reader.end_of_session is not None and not self.closed:
            self.close(f"the source session ended ({self.reader.end_of_session})")
        return got

    def _spin(self) -> int:
        """Busy-wait: the context thread polls the ring (6.4.2, 6.5)."""
        if self.closed:
            return 0
        return self._drain()

    def _readable(self, _fd: int = -1, _events: Any = None, _clientd: Any = None) -> None:
        """Pend: woken (or polled): take everything, then sleep again (the arm/re-check protocol)."""
        reader = self.reader
        while not self.closed:
            reader.disarm()
            self._drain()
            if self.closed:
                return
            most = reader.arm()
            if most > 0.0:
                # Asleep until the writer signals; until it has taken this reader's join into account it
                # may not, so look again after what arm() allows (the liveness timer covers the rest).
                if most * 1000 < _LIVENESS_MS and self._recheck is None:
                    self._recheck = self.loop.schedule_timer(most * 1000, self._recheck_due)
                return

    def _recheck_due(self, _clientd: Any) -> None:
        self._recheck = None
        if not self.closed:
            self._readable()

    def _liveness(self, _clientd: Any) -> None:
        self._timer = None
        if self.closed:
            return
        if not self.reader.check_writer():
            self._drain()  # what the writer published before it closed or died, then EOS
            if not self.closed:
                self.close("the source's process is gone")
            return
        self.reader.heartbeat()
        if self.mode == PEND:
            self._readable()  # a wake-up lost to a race costs at most this long
        self._timer = self.loop.schedule_timer(_LIVENESS_MS, self._liveness)

    def statistics(self) -> ShmReceiverStatistics:
        r = self.reader.statistics()
        d = self.demux
        return ShmReceiverStatistics(
            r.records,
            r.ring_bytes,
            d.lbm_msgs_rcved,
            d.lbm_msgs_no_topic_rcved,
            d.tsnis_rcved,
            d.msgs_malformed,
            self._records_lost,
            r.sleeps,
        )

    def close(self, reason: str = "closed") -> None:
        """Leave the segment; ``on_end(reason)`` tells the subscriptions (EOS) unless asked for."""
        if self.closed:
            return
        self.closed = True
        for timer in (self._timer, self._recheck):
            if timer is not None:
                self.loop.cancel_timer(timer)
        self._timer = self._recheck = None
        try:
            if self.mode == BUSY_WAIT:
                self.loop.remove_spinner(self._spin)
            else:
                self.loop.unregister_fd(self.reader.fileno())
        except Exception:  # the loop may be closing
            pass
        try:
            self.reader.close()
        except (OSError, SegmentError) as exc:
            self.log.debug("%s: %s", self.reader.name, exc)
        self.log.debug("%s session %s: %s", self.kind, self.reader.name, reason)
        self.on_end(reason)


def receiver_mode(context_attrs: Any) -> tuple[str, int]:
    """``transport_lbtipc_receiver_thread_behavior`` and its linger count."""
    behavior = str(context_attrs.get("transport_lbtipc_receiver_thread_behavior"))
    linger = int(context_attrs.get("transport_lbtipc_pend_behavior_linger_loop_count"))
    return (BUSY_WAIT if behavior == "busy_wait" else PEND), linger
