"""Off-transport recovery between real contexts on 127.0.0.1 (UM Concepts Guide 10.3; issue 25).

A receiver with ``use_otr 1`` asks a late-join source's retention buffer for what its transport could
not repair: on LBT-RM and LBT-RU with NAKs off and 20% of the data datagrams dropped by the test-only
receive hook (``OPENUM_TEST_DROP``; the iptables version is in ``tests/faults/test_otr_loss.py``), and on
TCP for what was sent while the receiver's connection was down.  Everything the source still retains
arrives in order, the recovered messages flagged ``MsgFlags.OTR``; with OTR off the loss is reported.
"""

from __future__ import annotations

import socket

import pytest

import openum
from openum import MsgFlags, MsgType, SourceEvent
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Contexts, Ports, Recorder, SourceEvents

OTR = int(MsgFlags.OTR)
LOSS_KINDS = (MsgType.UNRECOVERABLE_LOSS, MsgType.UNRECOVERABLE_LOSS_BURST)
#: Fast OTR for tests (UM's defaults wait 2 s before the first request, then 1 s between requests).
FAST_OTR = (
    "receiver otr_request_initial_delay 20",
    "receiver otr_request_minimum_interval 100",
    "receiver otr_request_maximum_interval 400",
)


#: A late-join source that retains every message of these tests.
RETAIN_ALL = {
    "retransmit_retention_size_threshold": 16 * 1024 * 1024,
    "retransmit_retention_size_limit": 32 << 20,
}


def _source(
    ctx: openum.Context,
    topic: str,
    transport: str,
    events: SourceEvents,
    retention: dict[str, int] | None = None,
) -> openum.Source:
    attrs = {"transport": transport, "late_join": 1, **(RETAIN_ALL if retention is None else retention)}
    return ctx.create_source(topic, attrs=attrs, event_callback=events)


def _lossy(
    contexts: Contexts,
    monkeypatch: pytest.MonkeyPatch,
    topic: str,
    transport: str,
    drop: str,
    *receiver_options: str,
    wildcard: bool = False,
    retention: dict[str, int] | None = None,
) -> tuple[openum.Context, openum.Context, Recorder, openum.Source]:
    """A source context, and a receiving one whose data sockets lose ``drop`` (``OPENUM_TEST_DROP``)
    with NAKs off and ``receiver_options``; a receiver (``wildcard``: of ``^otr/``) and a late-join
    source of ``topic``, ready to send.  Returns (source context, receiving context, recorder, source)."""
    events = SourceEvents()
    src_ctx = contexts.new()
    monkeypatch.setenv("OPENUM_TEST_DROP", drop)
    rcv_ctx = contexts.new(*receiver_options, *_no_naks(transport))
    rec = Recorder()
    if wildcard:
        rcv_ctx.create_wildcard_receiver("^otr/", rec)
    else:
        rcv_ctx.create_receiver(topic, rec)
    src = _source(src_ctx, topic, transport, events, retention)
    assert _ready(rcv_ctx, transport, events)
    return src_ctx, rcv_ctx, rec, src


def _no_naks(transport: str) -> tuple[str, ...]:
    """The transport repairs nothing: NAKs off, and it gives up on a gap after 300 ms."""
    return (
        f"receiver transport_{transport}_send_naks 0",
        f"receiver transport_{transport}_nak_generation_interval 300",
    )


def _ready(ctx: openum.Context, transport: str, events: SourceEvents) -> bool:
    if transport == "lbtru":
        return events.wait(SourceEvent.CONNECT)
    return wait_until(lambda: ctx.statistics().lbtrm_rcv_sessions >= 1, WAIT)


@pytest.mark.parametrize(("transport", "wildcard"), [("lbtrm", False), ("lbtru", False), ("lbtrm", True)])
def test_otr_recovers_what_the_transport_could_not_repair(
    ports: Ports, contexts: Contexts, transport: str, wildcard: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 2000
    src_ctx, rcv_ctx, rec, src = _lossy(  # the receiving context's data sockets lose 20%
        contexts, monkeypatch, f"otr/{transport}", transport, "0.2:25",
        "receiver use_otr 1", "receiver use_late_join 0", *FAST_OTR, wildcard=wildcard,
    )  # fmt: skip
    for i in range(count):
        src.send(i.to_bytes(8, "big") + b"o" * 56)
    src.flush()
    assert rec.wait_count(count, timeout=60), (rec.count(), rcv_ctx.statistics())
    data = rec.of(MsgType.DATA)
    assert [g.counter for g in data] == list(range(count))  # in order, nothing twice
    assert not any(rec.count(kind) for kind in LOSS_KINDS)
    recovered = [g.counter for g in data if g.flags & OTR]
    stats = rcv_ctx.statistics()
    assert stats.dgrams_dropped_test_hook > 0 and recovered, stats
    assert stats.otr_msgs_recovered >= len(recovered) and stats.otr_rx_requests_sent >= len(recovered)
    assert stats.otr_msgs_unrecoverable == 0
    assert src_ctx.statistics().late_join_retransmissions_sent >= len(recovered)


def test_with_otr_off_the_loss_is_reported(
    ports: Ports, contexts: Contexts, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 1000
    _, rcv_ctx, rec, src = _lossy(
        contexts, monkeypatch, "otr/off", "lbtrm", "0.2:26", "receiver use_otr 0", "receiver use_late_join 0"
    )
    for i in range(count):
        src.send(i.to_bytes(8, "big") + b"o" * 56)
    src.flush()

    # Each message is delivered or reported lost (the last ones once the TSNI reveals the tail).
    assert wait_until(lambda: rec.count() + rec.count(MsgType.UNRECOVERABLE_LOSS) >= count, WAIT), (
        rec.count(),
        rec.count(MsgType.UNRECOVERABLE_LOSS),
        rcv_ctx.statistics(),
    )
    data = [g.counter for g in rec.of(MsgType.DATA)]
    lost = [g.sqn for g in rec.of(MsgType.UNRECOVERABLE_LOSS)]
    assert lost and sorted(data + lost) == list(range(count))
    assert not any(g.flags & OTR for g in rec.of(MsgType.DATA))
    assert rcv_ctx.statistics().otr_rx_requests_sent == 0


def test_tcp_recovers_what_was_sent_while_the_connection_was_down(ports: Ports, contexts: Contexts) -> None:
    topic = "otr/tcp-reconnect"
    events = SourceEvents()
    src_ctx = contexts.new()
    rcv_ctx = contexts.new("receiver use_otr 1", "receiver use_late_join 0", *FAST_OTR)
    rec = Recorder()
    rcv_ctx.create_receiver(topic, rec)
    src = _source(src_ctx, topic, "tcp", events)
    assert events.wait(SourceEvent.CONNECT)
    for i in range(100):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    assert rec.wait_count(100)
    # The receiver's connection breaks; the source goes on sending to nobody.
    session = next(iter(rcv_ctx._subscriptions.sessions.values()))
    session.sock.shutdown(socket.SHUT_RDWR)
    assert events.wait(SourceEvent.DISCONNECT)
    for i in range(100, 200):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    # Topic resolution brings the receiver back; from then on it gets live data again.
    assert events.wait(SourceEvent.CONNECT, 2, timeout=30)
    for i in range(200, 300):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    assert rec.wait_count(300, timeout=30), (rec.count(), rcv_ctx.statistics())
    data = rec.of(MsgType.DATA)
    assert [g.counter for g in data] == list(range(300))
    assert {g.counter for g in data if g.flags & OTR} == set(range(100, 200))
    assert rec.count(MsgType.EOS) == 1 and rec.count(MsgType.BOS) == 2
    assert not any(rec.count(kind) for kind in LOSS_KINDS)


@pytest.mark.parametrize("late_join", [1, 0])
def test_a_lost_first_message_is_recovered_or_reported(
    ports: Ports, contexts: Contexts, late_join: int
) -> None:
    """Head loss with NAKs off: the receiver was there before the source sent; the datagram with its first
    message is lost.  With Late Join (openum's default) the receiver learned where the stream starts and
    recovers it; without, it is leading loss (UM Concepts Guide 2.4.3) and the stream starts after it."""
    topic = f"otr/head/{late_join}"
    events = SourceEvents()
    src_ctx = contexts.new()
    rcv_ctx = contexts.new(
        "receiver use_otr 1", f"receiver use_late_join {late_join}", *FAST_OTR, *_no_naks("lbtrm")
    )
    rec = Recorder()
    rcv_ctx.create_receiver(topic, rec)
    src = _source(src_ctx, topic, "lbtrm", events)
    assert _ready(rcv_ctx, "lbtrm", events)
    rm = rcv_ctx._subscriptions._rm
    assert rm is not None
    first = [True]

    def drop_first(_datagram: object) -> bool:
        was, first[0] = first[0], False
        return was

    rm._drop = drop_first
    for i in range(10):
        src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)
    expected = list(range(10)) if late_join else list(range(1, 10))
    assert rec.wait_count(len(expected), timeout=30), (rec.snapshot(), rcv_ctx.statistics())
    assert [g.counter for g in rec.of(MsgType.DATA)] == expected
    assert rcv_ctx.statistics().dgrams_dropped_test_hook == 1


def test_only_what_the_source_no_longer_retains_is_reported_lost(
    ports: Ports, contexts: Contexts, monkeypatch: pytest.MonkeyPatch
) -> None:
    count = 300
    # Retention thresholds 0: the source keeps only its latest message (UM Concepts Guide 10.2.4).
    _, rcv_ctx, rec, src = _lossy(
        contexts, monkeypatch, "otr/gone", "lbtrm", "0.3:27",
        "receiver use_otr 1", "receiver use_late_join 0", *FAST_OTR, retention={},
    )  # fmt: skip
    for i in range(count):
        src.send(i.to_bytes(8, "big"), openum.SendFlags.FLUSH)

    def settled() -> bool:
        return rec.count() + rec.count(MsgType.UNRECOVERABLE_LOSS) >= count

    assert wait_until(settled, 30), (rec.count(), rec.count(MsgType.UNRECOVERABLE_LOSS), rcv_ctx.statistics())
    data = [g.counter for g in rec.of(MsgType.DATA)]
    lost = [g.sqn for g in rec.of(MsgType.UNRECOVERABLE_LOSS)]
    assert lost and sorted(data + lost) == list(range(count)) and data == sorted(data)
    stats = rcv_ctx.statistics()
    # One "not retained" answer (the source's current range) settles every pending sqn below it.
    assert stats.otr_msgs_unrecoverable == len(lost) and stats.otr_rx_requests_sent > 0
