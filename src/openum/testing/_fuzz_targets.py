"""The receive paths :mod:`openum.testing.fuzz` drives, and the valid traffic each starts from.

Each :class:`FuzzTarget` builds fresh receiving state for every input (so an input replays alone),
makes valid traffic with openum's own encoders and source engines (:meth:`FuzzTarget.trace`), and
feeds an input to the same objects a context feeds, under a fake clock (:meth:`FuzzTarget.run`):

- ``resolver``: the topic resolution engine (``ResolverEngine.datagram_received`` then ``poll``), with
  sources, receivers and wildcard receivers of its own, fed TIRs, TQRs, wildcard TQRs, topic
  management records and keepalives of other contexts;
- ``lbtrm``: an LBT-RM receiving session (the engine behind the transport's LBMC demultiplexer,
  ``ReliableReceiverSession``) with delivery controllers on its topics, fed DATA (LBMC messages,
  fragments, properties, TSNIs), SMs and NCFs; NAKs go to a real ``RmSource``;
- ``lbtru``: the same for LBT-RU (DATA, SYN and plain SMs, NCFs, RSTs), CREQs, ACKs and NAKs going
  to an ``RuSource``;
- ``tcp``: the TCP receiver (``TcpReceiverSession``: stream framing, messages split across reads, the
  demultiplexer and delivery controllers), connected over loopback to a listener of the harness,
  which writes each input chunk and has the session read it;
- ``lbmrd``: the lbmrd forwarding core (``Forwarder``: client table, keepalives, NAT rewriting), in
  :mod:`openum.daemons.lbmrd._fuzz_target`.

Traffic is deterministic from the ``random.Random`` given; nothing here reads the wall clock.
"""

from __future__ import annotations

import abc
import importlib
import itertools
import logging
import random
import select
import socket
from collections.abc import Callable, Sequence
from typing import Any, Final

from openum.protocol.delivery import DeliveryController
from openum.protocol.reliable import (
    Outgoing,
    RateController,
    RmReceiver,
    RmReceiverParams,
    RmSource,
    RmSourceParams,
    RuReceiver,
    RuReceiverParams,
    RuSource,
    RuSourceParams,
)
from openum.protocol.resolution import (
    PhaseParams,
    ReceiverSpec,
    ResolverEngine,
    ResolverSettings,
    SourceSpec,
    WildcardSpec,
)
from openum.runtime import EventLoop, FdEvent, ManualClock
from openum.transport._demux import TopicHandler, split_properties
from openum.transport._reliable import ReliableReceiverSession
from openum.transport.tcp_receiver import TcpReceiverSession
from openum.wire import lbtrm, lbtru
from openum.wire.lbmc import (
    FragmentHeader,
    TsniHeader,
    control_message,
    data_message,
    decode_properties,
    encode_data,
    encode_message,
    encode_properties,
)
from openum.wire.lbmr import (
    PATTERN_PCRE,
    LbmrPacket,
    LbtrmTransport,
    LbtruTransport,
    ReceiverAlive,
    ResolverKeepalive,
    SourceAlive,
    SourceIdOption,
    TcpTransport,
    TopicInfo,
    TopicManagement,
    TopicManagementRecord,
    TopicQuery,
    TopicResolution,
    WildcardQuery,
    WildcardResolution,
    encode_packet,
)

__all__ = ["LOG", "TARGETS", "Budget", "BudgetExceededError", "FuzzTarget", "make_target"]

MS: Final = 1_000_000
S: Final = 1000 * MS
#: After the last datagram of an input, timers run up to this long (activity timeouts are 60 s).
HORIZON_NS: Final = 90 * S
#: At most this many timer firings per input after its last datagram.
MAX_POLLS: Final = 64

SUBSCRIBED: Final = (1, 2, 3)  # topic indices with a delivery controller; 4 and up: nobody's
_PROP_VALUES: Final[dict[str, int | float | str | bool]] = {"k": 7, "name": "fuzz", "f": 1.5, "ok": True}
_PROPS: Final = decode_properties(encode_properties(_PROP_VALUES))
LOG = logging.getLogger("openum.testing.fuzz.targets")
# The receive paths log what they drop (rate-limited); a fuzz run drops millions of datagrams on purpose.
LOG.propagate = False
LOG.addHandler(logging.NullHandler())
LOG.setLevel(logging.CRITICAL)


class BudgetExceededError(Exception):
    """Raised between two steps of an input once it has used more CPU time than its hard limit."""


class Budget:
    """The CPU-time limit of one input, checked between steps (a datagram, a read, a timer)."""

    __slots__ = ("clock", "limit")

    def __init__(self, clock: Callable[[], float], limit_s: float) -> None:
        self.clock = clock
        self.limit = clock() + limit_s

    def check(self) -> None:
        if self.clock() > self.limit:
            raise BudgetExceededError


# --- LBMC messages, as sources write them ----------------------------------------------------------


def lbmc_messages(rng: random.Random, topic_sqns: dict[int, int], count: int) -> list[bytes]:
    """``count`` LBMC messages (or groups of fragments, one message each) for topics 1-4: plain data,
    data with properties, fragments of a larger message, TSNIs."""
    out: list[bytes] = []
    for _ in range(count):
        tidx = rng.choice((1, 1, 2, 3, 4))
        sqn = topic_sqns.get(tidx, 0)
        kind = rng.random()
        if kind < 0.55:
            out.append(encode_data(tidx, sqn, rng.randbytes(rng.randrange(0, 40))))
            topic_sqns[tidx] = sqn + 1
        elif kind < 0.7:
            out.append(encode_message(data_message(tidx, sqn, b"with properties", properties=_PROPS)))
            topic_sqns[tidx] = sqn + 1
        elif kind < 0.92:
            whole = rng.randbytes(rng.randrange(8, 90))
            step = max(1, len(whole) // rng.randrange(2, 5))
            for i, offset in enumerate(range(0, len(whole), step)):
                frag = FragmentHeader(sqn, offset, len(whole))
                out.append(encode_message(data_message(tidx, sqn + i, whole[offset : offset + step], frag)))
                topic_sqns[tidx] = sqn + i + 1
        else:
            records = tuple((t, max(0, topic_sqns.get(t, 0) - 1)) for t in (1, 2, 3))
            out.append(encode_message(control_message(TsniHeader(records))))
    return out


def batches(rng: random.Random, messages: list[bytes], limit: int = 1400) -> list[bytes]:
    """Messages batched into datagram payloads (one to a few messages each, as a source batches)."""
    out: list[bytes] = []
    current = b""
    for msg in messages:
        if current and (len(current) + len(msg) > limit or rng.random() < 0.6):
            out.append(current)
            current = b""
        current += msg
    if current:
        out.append(current)
    return out


class _Topic(TopicHandler):
    """What a context's topic subscription does with a topic's messages: a delivery controller, its
    deliveries (properties split off a reassembled message) counted as work."""

    __slots__ = ("dc", "delivered")

    def __init__(self, loss_timeout_ns: int) -> None:
        self.dc = DeliveryController(loss_timeout_ns=loss_timeout_ns)
        self.delivered = 0

    def on_data(
        self,
        sqn: int,
        payload: memoryview | bytes,
        now_ns: int,
        fragment: tuple[int, int, int] | None,
        flags: int,
        properties: Any,
    ) -> None:
        if fragment is None and self.dc.take_next(sqn, len(payload)):
            self.delivered += 1
            return
        self._deliver(
            self.dc.on_message(sqn, payload, now_ns, fragment=fragment, flags=flags, properties=properties)
        )

    def on_tsni(self, sqn: int, now_ns: int) -> None:
        self._deliver(self.dc.on_tsni(sqn, now_ns))

    def timer(self, now_ns: int) -> None:
        deadline = self.dc.next_deadline()
        if deadline is not None and deadline <= now_ns:
            self._deliver(self.dc.on_timer(now_ns))

    def _deliver(self, deliveries: Sequence[Any]) -> None:
        for d in deliveries:
            if d.properties is not None and not isinstance(d.properties, dict):
                split_properties(bytes(d.payload), d.properties)
            self.delivered += 1


# --- targets ----------------------------------------------------------------------------------------


class FuzzTarget(abc.ABC):
    """One receive path.  ``trace`` makes the valid traffic of one input; ``run`` feeds an input
    (datagrams or stream chunks, each after its time gap) to fresh receiving state and returns the
    work it caused (datagrams sent, messages delivered, events).  ``run`` must not raise: anything it
    raises (other than :class:`BudgetExceededError`) is a finding."""

    name: str = ""
    description: str = ""
    #: Byte strings the ``dictionary`` mutation inserts (AFL's dictionaries): tokens of the format.
    dictionary: tuple[bytes, ...] = ()

    def start(self) -> None:  # noqa: B027 (an optional hook)
        """Once, before the first input (sockets, listeners)."""

    def close(self) -> None:  # noqa: B027 (an optional hook)
        """Once, after the last input."""

    @abc.abstractmethod
    def trace(self, rng: random.Random) -> list[bytes]:
        """Valid traffic for one input, in order."""

    def run(self, chunks: Sequence[bytes], gaps_ns: Sequence[int], budget: Budget) -> int:
        self.reset()
        now = 0
        for data, gap in zip(chunks, gaps_ns, strict=True):
            now += gap
            self.feed(data, now)
            budget.check()
            self.timers(now)
            budget.check()
        end = now + HORIZON_NS
        for _ in range(MAX_POLLS):
            deadline = self.deadline()
            if deadline is None or deadline > end:
                break
            now = max(now, deadline)
            self.timers(now)
            budget.check()
        return self.finish()

    @abc.abstractmethod
    def reset(self) -> None:
        """Fresh receiving state for the next input."""

    @abc.abstractmethod
    def feed(self, data: bytes, now_ns: int) -> None:
        """One datagram (or stream chunk) arrives at ``now_ns``."""

    @abc.abstractmethod
    def timers(self, now_ns: int) -> None:
        """Run whatever is due at ``now_ns``."""

    @abc.abstractmethod
    def deadline(self) -> int | None:
        """The earliest time something is due, or None."""

    @abc.abstractmethod
    def finish(self) -> int:
        """The work the input caused; release what ``reset`` made."""


# --- topic resolution -------------------------------------------------------------------------------

_ADV = PhaseParams.from_ms(10, 500, 5000, 1000, 60_000)
_QRY = PhaseParams.from_ms(20, 200, 5000, 1000, 60_000)
_WC = PhaseParams.from_ms(50, 1000, 60_000, 0, 0)
_TOPICS: Final = tuple(
    f"{market}/{region}/{sym}"
    for market in ("Market", "Orders")
    for region in ("US", "EU")
    for sym in ("IBM", "MSFT", "AAPL", "ORCL", "SAP")
)
_PATTERNS: Final = (r"^Market/US/.*", r"Orders/.*/IBM$", r"^(Market|Orders)/EU/[A-Z]+$", r".*", r"SAP")


def _transport(rng: random.Random, i: int) -> Any:
    kind = rng.randrange(3)
    if kind == 0:
        return TcpTransport("127.0.0.2", 14371 + i % 20, 0x1000 + i)
    if kind == 1:
        return LbtruTransport("127.0.0.2", 14380 + i % 10, 0x2000 + i)
    return LbtrmTransport("127.0.0.2", "224.10.10.10", 0x3000 + i, 14400, 14390 + i % 10)


class ResolverTarget(FuzzTarget):
    name = "resolver"
    description = "topic resolution engine: TIRs, TQRs, wildcard TQRs, TMRs, keepalives"
    dictionary = (
        b"(.*)",
        b".*",
        b"+",
        b"*",
        b"(",
        b")",
        b"|",
        b"\\",
        b"[",
        b"]",
        b"{9999}",
        b"^",
        b"$",
        b"\x00",
    )

    def __init__(self) -> None:
        self.engine: ResolverEngine | None = None
        self.work = 0

    def trace(self, rng: random.Random) -> list[bytes]:
        out: list[bytes] = []
        others = [bytes([0xA0 + i]) * 8 for i in range(3)]
        for _ in range(rng.randrange(2, 12)):
            kind = rng.random()
            sid = (SourceIdOption(rng.choice(others)),)
            if kind < 0.35:
                infos = tuple(
                    TopicInfo(rng.choice(_TOPICS), rng.randrange(1, 50), _transport(rng, j))
                    for j in range(rng.randrange(1, 6))
                )
                queries = tuple(TopicQuery(rng.choice(_TOPICS)) for _ in range(rng.randrange(0, 3)))
                out.append(encode_packet(LbmrPacket(TopicResolution(queries, infos), sid)))
            elif kind < 0.55:
                queries = tuple(TopicQuery(rng.choice(_TOPICS)) for _ in range(rng.randrange(1, 6)))
                out.append(encode_packet(LbmrPacket(TopicResolution(queries), sid)))
            elif kind < 0.75:
                wq = tuple(
                    WildcardQuery(rng.choice(_PATTERNS), PATTERN_PCRE) for _ in range(rng.randrange(1, 3))
                )
                out.append(encode_packet(LbmrPacket(WildcardResolution(wq), sid)))
            elif kind < 0.88:
                recs = tuple(
                    TopicManagementRecord(rng.choice(_TOPICS), 0) for _ in range(rng.randrange(1, 4))
                )
                out.append(encode_packet(LbmrPacket(TopicManagement(recs), sid)))
            else:
                body = rng.choice((ResolverKeepalive(), ReceiverAlive(), SourceAlive()))
                out.append(encode_packet(LbmrPacket(body, sid)))
        return out

    def reset(self) -> None:
        engine = ResolverEngine(ResolverSettings(context_instance=b"\x01" * 8), random.Random(1))
        for i, topic in enumerate(_TOPICS[::2]):
            engine.add_source(
                i + 1, SourceSpec(topic, TcpTransport("127.0.0.1", 14371, 0x99), i + 1, _ADV), 0
            )
        for i, topic in enumerate(_TOPICS[1::3]):
            engine.add_receiver(i + 1, ReceiverSpec(topic, _QRY), 0)
        engine.add_wildcard(1, WildcardSpec(r"^Orders/.*", PATTERN_PCRE, _WC), 0)
        engine.poll(0)  # the first advertisements and queries: not the input's work
        self.engine = engine
        self.work = 0

    def feed(self, data: bytes, now_ns: int) -> None:
        assert self.engine is not None
        self.work += len(self.engine.datagram_received(data, None, now_ns))

    def timers(self, now_ns: int) -> None:
        assert self.engine is not None
        deadline = self.engine.next_deadline()
        if deadline is not None and deadline <= now_ns:
            self.work += len(self.engine.poll(now_ns))

    def deadline(self) -> int | None:
        assert self.engine is not None
        return self.engine.next_deadline()

    def finish(self) -> int:
        self.engine = None
        return self.work


# --- LBT-RM and LBT-RU ------------------------------------------------------------------------------

_RM_SID: Final = 0x1A2B3C4D
_RM_SOURCE: Final = ("127.0.0.1", 14390)
_RU_SID: Final = 0x0BADCAFE
_RU_SOURCE: Final = ("127.0.0.1", 14380)
_RU_RECEIVER: Final = ("127.0.0.2", 14360)


def _rate() -> RateController:
    return RateController(data_rate_limit=10**9, retransmit_rate_limit=10**9, rate_interval_ms=10, now_ns=0)


class _ReliableTarget(FuzzTarget):
    """A receiving session (engine + LBMC demultiplexer + delivery controllers) and the source its
    NAKs (and LBT-RU CREQs/ACKs) go to, both fresh for every input."""

    dictionary = (
        b"\x00\x00\x00\x00",
        b"\x7f\xff\xff\xff",
        b"\x80\x00\x00\x00",
        b"\xff\xff\xff\xff",
        b"\x00\x00",
    )
    #: Datagram types (the low nibble of the first byte) that go to the source, not the receiver.
    to_source: frozenset[int] = frozenset()

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.loop = EventLoop(self.clock, LOG, f"fuzz-{self.name}")
        self.session: ReliableReceiverSession | None = None
        self.topics: list[_Topic] = []
        self.sent: list[Outgoing] = []
        self.work = 0

    def close(self) -> None:
        self.loop.close()

    @abc.abstractmethod
    def _engine(self) -> RmReceiver | RuReceiver: ...

    @abc.abstractmethod
    def _source_receive(self, data: bytes, now_ns: int) -> int: ...

    @abc.abstractmethod
    def _source_poll(self, now_ns: int) -> int: ...

    @abc.abstractmethod
    def _source_deadline(self) -> int | None: ...

    @property
    @abc.abstractmethod
    def sender(self) -> tuple[str, int]:
        """The source's address: what every datagram fed to the receiving session comes from."""

    def reset(self) -> None:
        self.clock = self.loop.clock = ManualClock()  # every input starts at time 0
        self.sent = []
        session = ReliableReceiverSession(
            self.loop, self._engine(), self.sent.extend, lambda _s: None, _noop, _ignore
        )
        session.TRANSPORT = self.name
        self.topics = []
        for tidx in SUBSCRIBED:
            topic = _Topic(10 * S)
            session.topics[tidx] = topic
            self.topics.append(topic)
        self.session = session
        self.work = 0

    def feed(self, data: bytes, now_ns: int) -> None:
        assert self.session is not None
        self.clock.set(now_ns)
        if data and data[0] & 0x0F in self.to_source:
            self.work += self._source_receive(data, now_ns)
        elif not self.session.closed:
            self.session.datagram(memoryview(data), self.sender, now_ns)

    def timers(self, now_ns: int) -> None:
        session = self.session
        assert session is not None
        self.clock.set(now_ns)
        deadline = None if session.closed else session.engine.next_deadline()
        if deadline is not None and deadline <= now_ns:
            session._poll()
        for topic in self.topics:
            topic.timer(now_ns)
        deadline = self._source_deadline()
        if deadline is not None and deadline <= now_ns:
            self.work += self._source_poll(now_ns)

    def deadline(self) -> int | None:
        session = self.session
        assert session is not None
        times = [t for t in (topic.dc.next_deadline() for topic in self.topics) if t is not None]
        if not session.closed:
            d = session.engine.next_deadline()
            if d is not None:
                times.append(d)
        d = self._source_deadline()
        if d is not None:
            times.append(d)
        return min(times) if times else None

    def finish(self) -> int:
        assert self.session is not None
        self.session.statistics()
        self.session.close()
        self.session = None
        return self.work + len(self.sent) + sum(t.delivered for t in self.topics)


def _noop() -> None:
    pass


def _ignore(_reason: str) -> None:
    pass


class RmTarget(_ReliableTarget):
    name = "lbtrm"
    description = "LBT-RM receiving session + delivery controllers: DATA, SM, NCF; NAKs to the source"
    to_source = frozenset({lbtrm.TYPE_NAK})

    def __init__(self) -> None:
        super().__init__()
        self.source: RmSource | None = None

    @property
    def sender(self) -> tuple[str, int]:
        return _RM_SOURCE

    def _engine(self) -> RmReceiver:
        self.source = RmSource(
            session_id=_RM_SID, nak_port=_RM_SOURCE[1], params=RmSourceParams(), rate=_rate(), now_ns=0
        )
        for payload in (encode_data(1, i, b"x" * 20) for i in range(32)):  # what NAKs may ask for
            self.source.send(payload, 0)
        return RmReceiver(
            session_id=_RM_SID, source=_RM_SOURCE, params=RmReceiverParams(), rng=random.Random(3), now_ns=0
        )

    def _source_receive(self, data: bytes, now_ns: int) -> int:
        assert self.source is not None
        return len(self.source.datagram_received(data, ("127.0.0.2", 14400), now_ns))

    def _source_poll(self, now_ns: int) -> int:
        assert self.source is not None
        out, events = self.source.poll(now_ns)
        return len(out) + len(events)

    def _source_deadline(self) -> int | None:
        return None if self.source is None else self.source.next_deadline()

    def trace(self, rng: random.Random) -> list[bytes]:
        source = RmSource(
            session_id=_RM_SID, nak_port=_RM_SOURCE[1], params=RmSourceParams(), rate=_rate(), now_ns=0
        )
        out: list[bytes] = []
        sqns: dict[int, int] = {}
        now = 0
        for payload in batches(rng, lbmc_messages(rng, sqns, rng.randrange(1, 14))):
            now += rng.randrange(0, 20) * MS
            out += [o.data for o in source.send(payload, now).outgoing]
            if rng.random() < 0.2:
                polled, _ = source.poll(now + 300 * MS)
                out += [o.data for o in polled]  # session messages
        lead = max(0, len(out) - 1)
        for _ in range(rng.randrange(0, 3)):
            sqns_asked = tuple(sorted({rng.randrange(0, lead + 2) for _ in range(rng.randrange(1, 4))}))
            if rng.random() < 0.5:
                nak = lbtrm.RmNak(_RM_SOURCE[1], _RM_SID, sqns_asked)
                out.insert(rng.randrange(len(out) + 1), lbtrm.encode(nak))
            else:
                ncf = lbtrm.RmNcf(_RM_SOURCE[1], _RM_SID, 0, sqns_asked, lbtrm.NcfReason.RETRANSMIT_DELAY)
                out.insert(rng.randrange(len(out) + 1), lbtrm.encode(ncf))
        return out


class RuTarget(_ReliableTarget):
    name = "lbtru"
    description = (
        "LBT-RU receiving session + delivery controllers: DATA, SM, NCF, RST; CREQ/ACK/NAK to the source"
    )
    to_source = frozenset({lbtru.TYPE_NAK, lbtru.TYPE_ACK, lbtru.TYPE_CREQ})

    def __init__(self) -> None:
        super().__init__()
        self.source: RuSource | None = None

    @property
    def sender(self) -> tuple[str, int]:
        return _RU_SOURCE

    def _engine(self) -> RuReceiver:
        self.source = RuSource(session_id=_RU_SID, params=RuSourceParams(), rate=_rate(), now_ns=0)
        self.source.datagram_received(_creq(), _RU_RECEIVER, 0)
        for payload in (encode_data(1, i, b"x" * 20) for i in range(32)):
            self.source.send(payload, 0)
        return RuReceiver(
            session_id=_RU_SID, source=_RU_SOURCE, params=RuReceiverParams(), rng=random.Random(3), now_ns=0
        )

    def _source_receive(self, data: bytes, now_ns: int) -> int:
        assert self.source is not None
        out, events = self.source.datagram_received(data, _RU_RECEIVER, now_ns)
        return len(out) + len(events)

    def _source_poll(self, now_ns: int) -> int:
        assert self.source is not None
        out, events = self.source.poll(now_ns)
        return len(out) + len(events)

    def _source_deadline(self) -> int | None:
        return None if self.source is None else self.source.next_deadline()

    def trace(self, rng: random.Random) -> list[bytes]:
        source = RuSource(session_id=_RU_SID, params=RuSourceParams(), rate=_rate(), now_ns=0)
        out: list[bytes] = [_creq()]
        syn, _ = source.datagram_received(_creq(), _RU_RECEIVER, 0)  # the SYN session message
        out += [o.data for o in syn]
        sqns: dict[int, int] = {}
        now = 0
        for payload in batches(rng, lbmc_messages(rng, sqns, rng.randrange(1, 14))):
            now += rng.randrange(0, 20) * MS
            out += [o.data for o in source.send(payload, now).outgoing]
            if rng.random() < 0.2:
                polled, _ = source.poll(now + 300 * MS)
                out += [o.data for o in polled]
        opts = lbtru.make_options(_RU_SID)
        lead = max(0, len(out) - 3)
        for _ in range(rng.randrange(0, 4)):
            asked = tuple(sorted({rng.randrange(0, lead + 2) for _ in range(rng.randrange(1, 4))}))
            kind = rng.randrange(4)
            if kind == 0:
                record: Any = lbtru.RuNak(asked, options=opts)
            elif kind == 1:
                record = lbtru.RuNcf(0, asked, options=opts)
            elif kind == 2:
                record = lbtru.RuAck(asked[-1], options=opts)
            else:
                record = lbtru.RuRst(options=opts) if rng.random() < 0.3 else lbtru.RuCreq(options=opts)
            out.insert(rng.randrange(1, len(out) + 1), lbtru.encode(record))
        return out


def _creq() -> bytes:
    return lbtru.encode(lbtru.RuCreq(options=lbtru.make_options(_RU_SID)))


# --- TCP ----------------------------------------------------------------------------------------------


class TcpTarget(FuzzTarget):
    """Each input is a connection: the session connects to the harness's listener, the harness writes
    every chunk and the session reads it (one ``_readable`` per chunk, until nothing is left)."""

    name = "tcp"
    description = "TCP receiver: LBMC stream framing across reads, demultiplexer, delivery controllers"
    dictionary = (b"\x00\x00\x00\x00", b"\xff\xff", b"\x00\x0c", b"\x08\x20\x00\x10", b"\x01\x00")

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.loop = EventLoop(self.clock, LOG, "fuzz-tcp")
        self.listener: socket.socket | None = None
        self.session: TcpReceiverSession | None = None
        self.peer: socket.socket | None = None
        self.topics: list[_Topic] = []
        self.work = 0

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self.listener = listener

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
        self.loop.close()

    def trace(self, rng: random.Random) -> list[bytes]:
        stream = b"".join(lbmc_messages(rng, {}, rng.randrange(1, 16)))
        cuts = sorted(
            {rng.randrange(1, len(stream)) for _ in range(rng.randrange(0, 6))} if len(stream) > 1 else set()
        )
        edges = [0, *cuts, len(stream)]
        return [stream[a:b] for a, b in itertools.pairwise(edges)]

    def reset(self) -> None:
        assert self.listener is not None
        self.clock = self.loop.clock = ManualClock()
        port = self.listener.getsockname()[1]
        session = TcpReceiverSession(self.loop, "127.0.0.1", port, 0x1234, LOG, _noop, _ignore)
        peer, _ = self.listener.accept()
        session._connect_event(session.sock.fileno(), FdEvent.WRITE, None)
        peer.recv(64)  # the session id the receiver confirms
        self.topics = []
        for tidx in SUBSCRIBED:
            topic = _Topic(0)  # TCP never retransmits: gaps are lost at once
            session.topics[tidx] = topic
            self.topics.append(topic)
        self.session = session
        self.peer = peer
        self.work = 0

    def feed(self, data: bytes, now_ns: int) -> None:
        session = self.session
        assert session is not None
        assert self.peer is not None
        self.clock.set(now_ns)
        if session.closed or not data:
            return
        self.peer.sendall(data)
        while not session.closed and select.select([session.sock], [], [], 0)[0]:
            session._readable()

    def timers(self, now_ns: int) -> None:
        for topic in self.topics:
            topic.timer(now_ns)

    def deadline(self) -> int | None:
        times = [t for t in (topic.dc.next_deadline() for topic in self.topics) if t is not None]
        return min(times) if times else None

    def finish(self) -> int:
        assert self.session is not None
        assert self.peer is not None
        self.session.statistics()
        self.session.close()
        self.peer.close()
        self.session = self.peer = None
        return self.work + sum(t.delivered for t in self.topics)


#: Target name -> ``module:class``.  Loaded by name: a target may live in a higher layer than
#: :mod:`openum.testing` (the lbmrd target lives with lbmrd), and openum.testing must not import it.
TARGETS: Final[dict[str, str]] = {
    "resolver": f"{__name__}:ResolverTarget",
    "lbtrm": f"{__name__}:RmTarget",
    "lbtru": f"{__name__}:RuTarget",
    "tcp": f"{__name__}:TcpTarget",
    "lbmrd": "openum.daemons.lbmrd._fuzz_target:LbmrdTarget",
}


def make_target(name: str) -> FuzzTarget:
    """A new target of that name (:data:`TARGETS`)."""
    try:
        module, attr = TARGETS[name].split(":")
    except KeyError:
        raise ValueError(f"unknown fuzz target {name!r}; the targets are {', '.join(TARGETS)}") from None
    target = getattr(importlib.import_module(module), attr)()
    assert isinstance(target, FuzzTarget)
    return target
