"""Late Join between real contexts on 127.0.0.1 (UM Concepts Guide 10.2; issue 25): a receiver that
joins a late-join source after it sent gets what the source retains, as retransmissions
(``MsgFlags.RETRANSMIT``), merged in order with live data and never twice; what the source no longer
holds is reported once as unrecoverable loss.

Each test has its own resolver, transport and request ports (``tests.integration.pubsub.Ports``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

import openum
from openum import MsgFlags, MsgType, SourceEvent
from openum.wire.lbmc import (
    LateJoinInfoRequestHeader,
    LbmcMessage,
    MessageType,
    SourceIndexHeader,
    control_message,
    encode_message,
)
from openum.wire.lbmr import ExtendedFunctionalityOption, Functionality, LateJoinOption
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Ports, SourceEvents

TRANSPORTS = ("tcp", "lbtru", "lbtrm")
RETRANSMIT = int(MsgFlags.RETRANSMIT)


@dataclass(frozen=True)
class Seen:
    type: MsgType
    sqn: int
    data: bytes
    flags: int


class Log:
    def __init__(self) -> None:
        self.items: list[Seen] = []
        self.lock = threading.Lock()

    def __call__(self, msg: openum.Message) -> None:
        data = bytes(msg.data) if msg.type is MsgType.DATA else b""
        with self.lock:
            self.items.append(Seen(msg.type, msg.sequence_number, data, int(msg.flags)))

    def of(self, kind: MsgType) -> list[Seen]:
        with self.lock:
            return [s for s in self.items if s.type is kind]

    def count(self, kind: MsgType = MsgType.DATA) -> int:
        return len(self.of(kind))


@pytest.fixture
def ports() -> Ports:
    return Ports.allocate()


@pytest.fixture
def contexts(ports: Ports) -> Iterator[list[openum.Context]]:
    made: list[openum.Context] = []
    try:
        yield made
    finally:
        for ctx in reversed(made):
            ctx.__exit__(None, None, None)


def _context(ports: Ports, made: list[openum.Context], *extra: str) -> openum.Context:
    ctx = openum.Context(options=ports.options(*extra))
    made.append(ctx)
    return ctx


def _late_join_source(ctx: openum.Context, topic: str, transport: str, **attrs: object) -> openum.Source:
    return ctx.create_source(
        topic,
        attrs={
            "transport": transport,
            "late_join": 1,
            "retransmit_retention_size_threshold": 64 * 1024 * 1024,
            "retransmit_retention_size_limit": 128 * 1024 * 1024,
            **attrs,
        },
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_receiver_started_after_the_last_send_gets_everything_retained_in_order(
    ports: Ports, contexts: list[openum.Context], transport: str
) -> None:
    count = 2000
    source_ctx = _context(ports, contexts)
    topic = f"lj/{transport}"
    src = _late_join_source(source_ctx, topic, transport)
    for i in range(count):
        src.send(i.to_bytes(8, "big") + b"x" * 24)
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver use_late_join 1")
    log = Log()
    rcv_ctx.create_receiver(topic, log)
    assert wait_until(lambda: log.count() >= count, WAIT), (log.count(), rcv_ctx.statistics())
    data = log.of(MsgType.DATA)
    assert [int.from_bytes(d.data[:8], "big") for d in data] == list(range(count))
    assert [d.sqn for d in data] == list(range(count))
    assert all(d.flags & RETRANSMIT for d in data)
    assert not log.of(MsgType.UNRECOVERABLE_LOSS) and not log.of(MsgType.UNRECOVERABLE_LOSS_BURST)
    stats = rcv_ctx.statistics()
    assert stats.late_join_info_requests_sent >= 1
    source_stats = source_ctx.statistics()
    assert source_stats.late_join_info_requests_rcved >= 1
    if transport == "tcp":
        # (LBT-RM and LBT-RU receivers also repair their session's transmission window by NAK when they
        # join: the transport's retransmissions, flagged RETRANSMIT too, may then bring some first.)
        assert stats.late_join_rx_requests_sent >= count
        assert source_stats.late_join_retransmissions_sent >= count
        assert source_stats.late_join_rx_requests_rcved >= count
    # Live messages after the recovery follow in order, without the flag, and the merge retires.
    for i in range(count, count + 10):
        src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)
    assert wait_until(lambda: log.count() >= count + 10, WAIT), log.count()
    data = log.of(MsgType.DATA)
    assert [d.sqn for d in data] == list(range(count + 10))
    assert not any(d.flags & RETRANSMIT for d in data[count:])
    recovered = rcv_ctx.statistics().late_join_msgs_recovered
    assert recovered == count if transport == "tcp" else 0 < recovered <= count


@pytest.mark.parametrize("transport", ["tcp", "lbtrm"])  # LBT-RU repairs its window by NAK on join
def test_what_the_source_no_longer_holds_is_reported_once_and_the_rest_recovered(
    ports: Ports, contexts: list[openum.Context], transport: str
) -> None:
    source_ctx = _context(ports, contexts)
    topic = f"lj/limit/{transport}"
    # Retention of about 10 messages of 100 bytes (each counts its payload plus 64 bytes).
    src = source_ctx.create_source(
        topic,
        attrs={
            "transport": transport,
            "late_join": 1,
            "retransmit_retention_size_threshold": 1640,
            "retransmit_retention_size_limit": 8192,
        },
    )
    for i in range(50):
        src.send(i.to_bytes(8, "big") + b"y" * 92)
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver use_late_join 1")
    log = Log()
    rcv_ctx.create_receiver(topic, log)
    assert wait_until(lambda: log.count() >= 10, WAIT), log.items
    data = log.of(MsgType.DATA)
    sqns = [d.sqn for d in data]
    assert sqns == list(range(sqns[0], 50)) and 35 <= sqns[0] <= 41, sqns
    assert all(d.flags & RETRANSMIT for d in data)
    assert not log.of(MsgType.UNRECOVERABLE_LOSS_BURST)  # leading loss: nothing was asked before low


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_live_data_while_recovering_is_merged_in_order_never_twice(
    ports: Ports, contexts: list[openum.Context], transport: str
) -> None:
    source_ctx = _context(ports, contexts)
    topic = f"lj/live/{transport}"
    events = SourceEvents()
    src = source_ctx.create_source(
        topic,
        attrs={"transport": transport, "late_join": 1, "retransmit_retention_size_threshold": 1 << 24},
        event_callback=events,
    )
    for i in range(300):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    rcv_ctx = _context(
        ports, contexts, "receiver use_late_join 1", "receiver retransmit_request_outstanding_maximum 3"
    )
    log = Log()
    rcv_ctx.create_receiver(topic, log)
    if transport != "lbtrm":
        assert events.wait(SourceEvent.CONNECT)
    for i in range(300, 400):
        src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)
    assert wait_until(lambda: log.count() >= 400, WAIT), (log.count(), rcv_ctx.statistics())
    data = log.of(MsgType.DATA)
    assert [d.sqn for d in data] == list(range(400))
    assert [int.from_bytes(d.data[:8], "big") for d in data] == list(range(400))
    assert all(d.flags & RETRANSMIT for d in data[:300])


def test_a_late_join_source_advertises_late_join_in_its_tir(
    ports: Ports, contexts: list[openum.Context]
) -> None:
    source_ctx = _context(ports, contexts)
    rcv_ctx = _context(ports, contexts)
    seen: list[openum.Message] = []
    rcv_ctx.create_receiver("lj/tir", seen.append)
    _late_join_source(source_ctx, "lj/tir", "tcp")
    plain = source_ctx.create_source("lj/plain", attrs={"transport": "tcp"})
    resolver = rcv_ctx._resolver
    assert wait_until(lambda: list(resolver.engine.cached_sources("lj/tir")), WAIT)
    [info] = resolver.engine.cached_sources("lj/tir")
    port = source_ctx.request_port
    assert port is not None
    [offer] = [o for o in info.options if isinstance(o, LateJoinOption)]
    [exfunc] = [o for o in info.options if isinstance(o, ExtendedFunctionalityOption)]
    assert (offer.source_port, exfunc.source_port) == (port[1], port[1])
    assert exfunc.functionality & Functionality.LATE_JOIN
    local = source_ctx._resolver.engine
    assert wait_until(lambda: list(local.cached_sources("lj/plain")), WAIT)
    [plain_info] = local.cached_sources("lj/plain")
    assert not any(isinstance(o, LateJoinOption) for o in plain_info.options)
    [plain_exfunc] = [o for o in plain_info.options if isinstance(o, ExtendedFunctionalityOption)]
    assert plain_exfunc.functionality == 0 and plain.topic == "lj/plain"


def test_without_use_late_join_the_receiver_gets_only_live_data(
    ports: Ports, contexts: list[openum.Context]
) -> None:
    source_ctx = _context(ports, contexts)
    events = SourceEvents()
    src = source_ctx.create_source(
        "lj/off", attrs={"transport": "tcp", "late_join": 1}, event_callback=events
    )
    for i in range(20):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver use_late_join 0")
    log = Log()
    rcv_ctx.create_receiver("lj/off", log)
    assert events.wait(SourceEvent.CONNECT)
    src.send(b"live", openum.SendFlags.FLUSH)
    assert wait_until(lambda: log.count() >= 1, WAIT)
    assert [(d.sqn, d.data, d.flags & RETRANSMIT) for d in log.of(MsgType.DATA)] == [(20, b"live", 0)]
    assert rcv_ctx.statistics().late_join_info_requests_sent == 0


def test_a_wildcard_receiver_late_joins_too(ports: Ports, contexts: list[openum.Context]) -> None:
    source_ctx = _context(ports, contexts)
    src = _late_join_source(source_ctx, "ljw/a", "lbtru")
    for i in range(100):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver use_late_join 1")
    log = Log()
    rcv_ctx.create_wildcard_receiver("^ljw/.*", log)
    assert wait_until(lambda: log.count() >= 100, WAIT), log.count()
    data = log.of(MsgType.DATA)
    assert [d.sqn for d in data] == list(range(100))
    assert all(d.flags & RETRANSMIT for d in data)


def test_large_messages_with_properties_are_retransmitted_whole(
    ports: Ports, contexts: list[openum.Context]
) -> None:
    source_ctx = _context(ports, contexts)
    src = _late_join_source(source_ctx, "lj/large", "lbtrm")
    big = bytes(range(256)) * 100  # 25,600 bytes: several fragments
    src.send(big, properties={"k": 7})
    src.send(b"small", properties={"k": 8})
    src.send(big[::-1])
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver use_late_join 1")
    got: list[tuple[bytes, object, int]] = []
    lock = threading.Lock()

    def on_msg(msg: openum.Message) -> None:
        if msg.type is MsgType.DATA:
            with lock:
                got.append((bytes(msg.data), msg.properties, int(msg.flags) & RETRANSMIT))

    rcv_ctx.create_receiver("lj/large", on_msg)
    assert wait_until(lambda: len(got) >= 3, WAIT), got
    assert got == [
        (big, {"k": 7}, RETRANSMIT),
        (b"small", {"k": 8}, RETRANSMIT),
        (big[::-1], None, RETRANSMIT),
    ]


def test_sqns_the_source_dropped_before_their_request_came_are_reported_lost_once(
    ports: Ports, contexts: list[openum.Context]
) -> None:
    # The source's context runs sequentially, so the test decides when it answers: after the receiver
    # learned the retained range and asked for its oldest messages, the source sends enough to evict
    # them (retransmit_retention_size_limit), then answers: "not retained", with its current range.
    source_ctx = _context(ports, contexts, "context operational_mode sequential")
    src = source_ctx.create_source(
        "lj/evicted",
        attrs={
            "transport": "tcp",
            "late_join": 1,
            "retransmit_retention_size_threshold": 8192,
            "retransmit_retention_size_limit": 8192,
        },
    )
    for i in range(40):  # 40 x (100 + 64 counted) bytes: all retained
        src.send(i.to_bytes(8, "big") + b"z" * 92)
    src.flush()
    rcv_ctx = _context(ports, contexts, "receiver retransmit_request_outstanding_maximum 5")
    log = Log()
    rcv_ctx.create_receiver("lj/evicted", log)

    def run_source_until(condition: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + WAIT
        while not condition():
            if time.monotonic() > deadline:
                return False
            source_ctx.process_events(0)
        return True

    # Connect the source's context to the receiver's request port first: the UME_LJ_INFO then leaves
    # in the same loop iteration as the LJI_REQ is handled, and the requests that follow it wait.
    target = rcv_ctx.immediate_target
    assert target is not None
    source_ctx.unicast_immediate_message(target, b"hello")
    assert run_source_until(lambda: rcv_ctx.statistics().uim_port_msgs_rcved >= 1)
    assert run_source_until(lambda: source_ctx.statistics().late_join_info_requests_rcved >= 1)
    assert wait_until(lambda: rcv_ctx.statistics().late_join_rx_requests_sent >= 5, WAIT)
    for i in range(40, 140):  # evicts the oldest (the limit holds 49 of them)
        src.send(i.to_bytes(8, "big") + b"z" * 92)
    src.flush()
    assert run_source_until(lambda: source_ctx.statistics().late_join_rx_requests_not_retained >= 1)
    assert run_source_until(lambda: rcv_ctx.statistics().late_join_msgs_unrecoverable >= 1)
    assert run_source_until(lambda: log.count() >= 1 and log.of(MsgType.DATA)[-1].sqn == 139)
    # 0..39 are gone: one UNRECOVERABLE_LOSS_BURST (its sqn: the burst's last), then 40.. live; or,
    # when the transport connected only after the second send, 0..90 (the source had evicted them
    # when it answered) and then 91.. recovered.
    others = [(g.type, g.sqn) for g in log.items if g.type is not MsgType.DATA]
    assert len(others) == 2 and others[0] == (MsgType.BOS, 0), others
    kind, last = others[1]
    assert kind is MsgType.UNRECOVERABLE_LOSS_BURST and last in (39, 90), others
    assert [d.sqn for d in log.of(MsgType.DATA)] == list(range(last + 1, 140))
    assert rcv_ctx.statistics().late_join_msgs_unrecoverable >= 1
    src.close()


def test_requests_and_answers_for_no_late_join_source_or_subscription_are_counted_and_dropped(
    ports: Ports, contexts: list[openum.Context]
) -> None:
    ctx = _context(ports, contexts)
    port = ctx.request_port
    assert port is not None
    request = LateJoinInfoRequestHeader(1, 2, 999, "127.0.0.1", 9, flags=0)
    stray = LbmcMessage(MessageType.RETRANSMISSION, 3, 7, (SourceIndexHeader(12345),), b"nobody asked", None)
    with socket.create_connection(port, timeout=WAIT) as conn:
        conn.sendall(encode_message(control_message(request)) + encode_message(stray))
        assert wait_until(lambda: ctx.statistics().late_join_retransmissions_dropped == 1, WAIT)
    stats = ctx.statistics()
    assert stats.late_join_info_requests_rcved == 1 and stats.late_join_requests_ignored == 1
    assert stats.immediate_msgs_rcved == 0 and stats.immediate_control_msgs_ignored == 0


@pytest.mark.parametrize("transport", ["tcp", "lbtrm"])
def test_a_source_that_sent_nothing_yet_gives_its_initial_sqn_and_live_data_follows(
    ports: Ports, contexts: list[openum.Context], transport: str
) -> None:
    source_ctx = _context(ports, contexts)
    src = _late_join_source(source_ctx, f"lj/empty/{transport}", transport)
    rcv_ctx = _context(ports, contexts)
    log = Log()
    rcv_ctx.create_receiver(f"lj/empty/{transport}", log)
    # The empty range makes the receiver ask for the source's initial sqn (a request with the T flag),
    # which the source answers with a TSNI.
    assert wait_until(lambda: rcv_ctx.statistics().late_join_rx_requests_sent >= 1, WAIT)
    assert wait_until(lambda: source_ctx.statistics().late_join_rx_requests_rcved >= 1, WAIT)
    for i in range(10):
        src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)
    # Live, or (sent before the transport connected) recovered: each once, in order, none lost.
    assert wait_until(lambda: log.count() >= 10, WAIT), log.items
    assert [d.sqn for d in log.of(MsgType.DATA)] == list(range(10))
    assert not log.of(MsgType.UNRECOVERABLE_LOSS) and not log.of(MsgType.UNRECOVERABLE_LOSS_BURST)
