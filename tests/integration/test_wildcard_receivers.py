"""Wildcard receivers' per-topic receivers and the counters of receivers and event queues, over real
TCP sessions on 127.0.0.1 (UM Concepts Guide, sections 3.4.2 and 3.5.1; issue 22).

A wildcard receiver receives each matching topic through a receiver of its own: ``receiver_create_callback``
runs when that receiver is about to be created (and may adjust its options), ``receiver_delete_callback``
when it is about to be deleted (``resolver_no_source_linger_timeout`` after the topic's last source left,
or when the wildcard receiver closes).  Sources live in other contexts of this process; each test has its
own resolver port and TCP port range.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

import openum
from openum import ConfigError, MsgType, SendFlags, SourceEvent
from openum.config import ReceiverAttributes
from tests.helpers import wait_until
from tests.integration.pubsub import WAIT, Contexts, Ports, Recorder, SourceEvents

DATA, BOS, EOS = MsgType.DATA, MsgType.BOS, MsgType.EOS


@pytest.fixture
def contexts() -> Iterator[Contexts]:
    c = Contexts(Ports.allocate())
    try:
        yield c
    finally:
        c.close()


@dataclass(frozen=True)
class Entry:
    """One thing that happened, in the order it happened: a callback or a delivered message."""

    what: str  # "create", "delete", or a MsgType name
    topic: str
    clientd: Any = None
    on_context_thread: bool = False
    at: float = 0.0


class Journal:
    """The create and delete callbacks and the receiver callback of one wildcard receiver, in one log."""

    def __init__(self, ctx: openum.Context) -> None:
        self.ctx = ctx
        self.entries: list[Entry] = []
        self.attrs: dict[str, Any] = {}  # topic -> the attributes object create was given
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)

    def _add(self, entry: Entry) -> None:
        with self.lock:
            self.entries.append(entry)
            self.changed.notify_all()

    def _here(self) -> bool:
        return threading.current_thread() is self.ctx.thread

    def create(self, topic: str, attrs: Any, clientd: Any) -> int:
        with self.lock:
            self.attrs[topic] = attrs
        self._add(Entry("create", topic, clientd, self._here(), time.monotonic()))
        return 0

    def delete(self, topic: str, clientd: Any) -> int:
        self._add(Entry("delete", topic, clientd, self._here(), time.monotonic()))
        return 0

    def on_message(self, msg: openum.Message) -> None:
        self._add(Entry(msg.type.name, msg.topic, None, self._here(), time.monotonic()))

    def of(self, what: str) -> list[Entry]:
        with self.lock:
            return [e for e in self.entries if e.what == what]

    def topics(self, what: str) -> list[str]:
        return sorted(e.topic for e in self.of(what))

    def wait(self, what: str, n: int, topic: str | None = None) -> bool:
        def enough() -> bool:
            return sum(1 for e in self.entries if e.what == what and topic in (None, e.topic)) >= n

        with self.lock:
            return self.changed.wait_for(enough, WAIT)

    def index(self, what: str, topic: str) -> int:
        with self.lock:
            return next(i for i, e in enumerate(self.entries) if e.what == what and e.topic == topic)

    def attributes(self) -> dict[str, Any]:
        """The wildcard receiver options that call this journal, as (function, clientd) pairs."""
        return {
            "receiver_create_callback": (self.create, "create-cd"),
            "receiver_delete_callback": (self.delete, "delete-cd"),
        }


def connected(ctx: openum.Context, topic: str) -> tuple[openum.Source, SourceEvents]:
    """A TCP source of ``topic`` and its events, once a receiver has joined its session (for a session
    already joined for another topic, that says nothing of this topic)."""
    events = SourceEvents()
    src = ctx.create_source(topic, event_callback=events)
    assert events.wait(SourceEvent.CONNECT), f"no receiver joined the session of {topic}"
    return src, events


# -- receiver_create_callback and receiver_delete_callback --------------------------------------------


def test_create_runs_once_per_topic_before_its_first_message_and_delete_when_the_wildcard_closes(
    contexts: Contexts,
) -> None:
    pub_a, pub_b, sub = contexts.new(), contexts.new(), contexts.new()
    journal = Journal(sub)
    wrcv = sub.create_wildcard_receiver(r"^wc/cb/", journal.on_message, attrs=journal.attributes())
    # Topic a has a source in each of two contexts: still one receiver, one create.
    a1, _ = connected(pub_a, "wc/cb/a")
    a2, _ = connected(pub_b, "wc/cb/a")
    b, _ = connected(pub_a, "wc/cb/b")
    pub_a.create_source("other/x")  # does not match: no create
    # b's CONNECT may come from the session a1 opened: wait until its topic is joined too.
    assert journal.wait("create", 1, topic="wc/cb/b")
    for src in (a1, a2, b):
        src.send(b"hello", SendFlags.FLUSH)
    assert journal.wait("DATA", 3)

    creates = journal.of("create")
    assert journal.topics("create") == ["wc/cb/a", "wc/cb/b"]
    assert all(e.clientd == "create-cd" and e.on_context_thread for e in creates)
    for topic in ("wc/cb/a", "wc/cb/b"):
        assert journal.index("create", topic) < journal.index("BOS", topic) < journal.index("DATA", topic)
        # The options the topic's receiver is created with: a receiver-scope attributes object.
        assert isinstance(journal.attrs[topic], ReceiverAttributes)
    assert journal.of("delete") == []  # every topic still has its sources

    wrcv.close()
    assert journal.wait("delete", 2)
    deletes = journal.of("delete")
    assert journal.topics("delete") == ["wc/cb/a", "wc/cb/b"]
    assert all(e.clientd == "delete-cd" and e.on_context_thread for e in deletes)


@pytest.mark.parametrize("linger_ms", [0, 150])
def test_delete_runs_the_linger_timeout_after_the_last_source_of_the_topic_left(
    contexts: Contexts, linger_ms: int
) -> None:
    pub_a, pub_b, sub = contexts.new(), contexts.new(), contexts.new()
    journal = Journal(sub)
    attrs = {**journal.attributes(), "resolver_no_source_linger_timeout": linger_ms}
    sub.create_wildcard_receiver(r"^wc/linger/", journal.on_message, attrs=attrs)
    first, _ = connected(pub_a, "wc/linger/a")
    second, _ = connected(pub_b, "wc/linger/a")
    first.send(b"1", SendFlags.FLUSH)
    assert journal.wait("DATA", 1)

    first.close()  # a source of the topic is left: its receiver stays
    second.send(b"2", SendFlags.FLUSH)
    assert journal.wait("DATA", 2)
    assert journal.of("delete") == []
    second.close()  # the last one: EOS, then the receiver lingers, then goes
    assert journal.wait("delete", 1)
    eos, delete = journal.of("EOS")[-1], journal.of("delete")[0]
    assert journal.index("EOS", "wc/linger/a") < journal.index("delete", "wc/linger/a")
    assert delete.on_context_thread and delete.clientd == "delete-cd"
    # The linger timer starts when the last source is gone, which is when its EOS is delivered.
    assert delete.at - eos.at >= linger_ms / 1000 * 0.9

    # A source of the topic after the delete: a new receiver, created again before its messages.
    third, _ = connected(pub_a, "wc/linger/a")
    third.send(b"3", SendFlags.FLUSH)
    assert journal.wait("DATA", 3)
    assert journal.topics("create") == ["wc/linger/a", "wc/linger/a"]
    assert journal.entries.index(journal.of("create")[1]) < journal.entries.index(journal.of("DATA")[2])


def test_a_source_back_within_the_linger_timeout_keeps_the_topic_receiver(contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    journal = Journal(sub)
    attrs = {**journal.attributes(), "resolver_no_source_linger_timeout": 600_000}
    wrcv = sub.create_wildcard_receiver(r"^wc/back/", journal.on_message, attrs=attrs)
    src, _ = connected(pub, "wc/back/a")
    src.send(b"1", SendFlags.FLUSH)
    assert journal.wait("DATA", 1)
    src.close()
    assert journal.wait("EOS", 1)
    again, _ = connected(pub, "wc/back/a")
    again.send(b"2", SendFlags.FLUSH)
    assert journal.wait("DATA", 2)
    assert journal.topics("create") == ["wc/back/a"]  # the same receiver: not created again
    assert journal.of("delete") == []
    again.close()
    assert journal.wait("EOS", 2)
    wrcv.close()  # the lingering receiver goes with the wildcard receiver, once
    assert journal.wait("delete", 1)
    assert journal.topics("delete") == ["wc/back/a"]


def test_options_set_by_the_create_callback_apply_to_that_topic_only(
    contexts: Contexts, caplog: pytest.LogCaptureFixture
) -> None:
    pub, sub = contexts.new(), contexts.new()
    rec = Recorder()
    created: list[str] = []

    def create(topic: str, attrs: Any, clientd: Any) -> None:
        created.append(topic)
        if topic.endswith("/raw"):
            attrs.set("ordered_delivery", 0)  # arrival order, no reassembly: one DATA per fragment
        # Read by the wildcard receiver for all its topics: said, not silently ignored.
        attrs.set("resolution_no_source_notification_threshold", 3)

    sub.create_wildcard_receiver(r"^wc/attrs/", rec, attrs={"receiver_create_callback": create})
    with caplog.at_level(logging.WARNING, logger="openum"):
        raw, _ = connected(pub, "wc/attrs/raw")
        whole, _ = connected(pub, "wc/attrs/whole")  # the same TCP session as raw
        # Its CONNECT may come from the session raw opened: wait until the topic is joined too.
        assert wait_until(lambda: len(created) == 2)
    warnings = [
        r.getMessage() for r in caplog.records if "resolution_no_source_notification" in r.getMessage()
    ]
    assert len(warnings) == 1 and "has no effect" in warnings[0]  # once, not once per topic
    assert "queries with its wildcard_receiver options" in warnings[0]  # says what to set instead
    blob = random.Random(22).randbytes(150_000)  # three fragments of at most 65,507 bytes
    raw.send(blob, SendFlags.FLUSH)
    whole.send(blob, SendFlags.FLUSH)
    assert rec.wait_count(4)
    by_topic = {t: [g.data for g in rec.of(DATA) if g.topic == t] for t in ("wc/attrs/raw", "wc/attrs/whole")}
    assert by_topic["wc/attrs/whole"] == [blob]
    assert len(by_topic["wc/attrs/raw"]) == 3
    assert b"".join(by_topic["wc/attrs/raw"]) == blob


def test_callbacks_that_raise_are_logged_and_delivery_goes_on(
    contexts: Contexts, caplog: pytest.LogCaptureFixture
) -> None:
    pub, sub = contexts.new(), contexts.new()
    rec = Recorder()
    deleted = threading.Event()

    def create(topic: str, attrs: Any, clientd: Any) -> None:
        attrs.set("ordered_delivery", 0)  # discarded: the callback raises after it
        raise RuntimeError("create failed")

    def delete(topic: str, clientd: Any) -> None:
        deleted.set()
        raise RuntimeError("delete failed")

    attrs = {"receiver_create_callback": create, "receiver_delete_callback": delete}
    with caplog.at_level(logging.ERROR, logger="openum"):
        wrcv = sub.create_wildcard_receiver(r"^wc/raise/", rec, attrs=attrs)
        src, _ = connected(pub, "wc/raise/a")
        blob = bytes(100_000)
        src.send(blob, SendFlags.FLUSH)
        src.send(b"after", SendFlags.FLUSH)
        assert rec.wait_count(2)
        # The topic is received with the wildcard receiver's own options: the blob reassembled.
        assert [g.data for g in rec.of(DATA)] == [blob, b"after"]
        wrcv.close()
        assert deleted.wait(WAIT)
        assert wait_until(lambda: "receiver_delete_callback for topic 'wc/raise/a' raised" in caplog.text)
    assert "receiver_create_callback for topic 'wc/raise/a' raised" in caplog.text


# -- counters -----------------------------------------------------------------------------------------


def _spin(us: int) -> None:
    """Take at least ``us`` microseconds (a callback with a known minimum service time)."""
    end = time.monotonic_ns() + us * 1000
    while time.monotonic_ns() < end:
        pass


def test_an_event_queue_counts_wildcard_receiver_events_as_wrcv_msgs(contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    evq = openum.EventQueue(
        attrs={"queue_count_enabled": 1, "queue_age_enabled": 1, "queue_service_time_enabled": 1}
    )
    try:
        wild = Recorder()
        plain = Recorder()

        def slow_wild(msg: openum.Message) -> None:
            wild(msg)
            _spin(2000)

        wrcv = sub.create_wildcard_receiver(r"^wc/evq/", slow_wild, event_queue=evq)
        rcv = sub.create_receiver("wc/evq/a", plain, event_queue=evq)
        src, _ = connected(pub, "wc/evq/a")
        n = 5
        for i in range(n):
            src.send(i.to_bytes(4, "big"), SendFlags.FLUSH)
        # BOS and n messages for each receiver object, nothing dispatched yet.
        assert wait_until(lambda: evq.statistics().wrcv_msgs >= n + 1 and evq.statistics().data_msgs >= n + 1)
        queued = evq.statistics()
        assert (queued.wrcv_msgs, queued.wrcv_msgs_tot) == (n + 1, n + 1)
        assert (queued.data_msgs, queued.data_msgs_tot) == (n + 1, n + 1)
        assert queued.events == 2 * (n + 1)
        while evq.dispatch(openum.EventQueue.POLL):
            pass
        assert wild.count() == plain.count() == n
        done = evq.statistics()
        assert (done.wrcv_msgs, done.wrcv_msgs_tot) == (done.data_msgs, done.data_msgs_tot) == (0, n + 1)
        assert done.wrcv_msgs_svc_max >= done.wrcv_msgs_svc_mean >= done.wrcv_msgs_svc_min >= 2000
        assert done.age_max >= 2000  # events behind a wildcard callback waited for it
        # The receivers' own counters, through the same public API.
        for stats in (wrcv.statistics(), rcv.statistics()):
            assert (stats.msgs_rcved, stats.bytes_rcved, stats.bos, stats.sources) == (n, 4 * n, 1, 1)
        src.close()
        assert wait_until(lambda: evq.statistics().wrcv_msgs_tot == n + 2)  # EOS
        while evq.dispatch(openum.EventQueue.POLL):
            pass
        assert wild.count(EOS) == 1
        assert (wrcv.statistics().eos, wrcv.statistics().sources) == (1, 0)
        wrcv.close()
        rcv.close()
    finally:
        evq.close()


def test_a_receiver_counts_no_source_notifications(contexts: Contexts) -> None:
    sub = contexts.new()
    rec = Recorder()
    rcv = sub.create_receiver(
        "wc/nobody",
        rec,
        attrs={"resolution_no_source_notification_threshold": 2},
    )
    assert rec.wait_count(1, MsgType.NO_SOURCE_NOTIFICATION)
    stats = rcv.statistics()
    assert stats.no_source_notifications == rec.count(MsgType.NO_SOURCE_NOTIFICATION) == 1
    assert (stats.msgs_rcved, stats.sources) == (0, 0)


@pytest.mark.parametrize("maximum_burst_loss", [1_000_000, 0])
def test_a_receiver_counts_the_losses_it_delivers(
    contexts: Contexts, monkeypatch: pytest.MonkeyPatch, maximum_burst_loss: int
) -> None:
    # LBT-RM with a fifth of the datagrams dropped on arrival (the test-only receive hook) and no NAKs:
    # every gap is given up after the NAK generation interval.  A gap of more than
    # delivery_control_maximum_burst_loss sequence numbers is one burst (0: every gap).
    pub = contexts.new()
    monkeypatch.setenv("OPENUM_TEST_DROP", "0.2:22")
    sub = contexts.new(
        "receiver transport_lbtrm_send_naks 0",
        "receiver transport_lbtrm_nak_generation_interval 100",
        f"receiver delivery_control_maximum_burst_loss {maximum_burst_loss}",
    )
    rec = Recorder()
    rcv = sub.create_receiver("wc/loss", rec)
    wrcv = sub.create_wildcard_receiver(r"^wc/loss$", Recorder())
    src = pub.create_source("wc/loss", {"transport": "lbtrm"})
    assert wait_until(lambda: sub.statistics().lbtrm_rcv_sessions == 1, WAIT)
    n = 400
    for i in range(n):
        src.send(i.to_bytes(4, "big"), SendFlags.FLUSH)
    kind = MsgType.UNRECOVERABLE_LOSS_BURST if maximum_burst_loss == 0 else MsgType.UNRECOVERABLE_LOSS
    assert rec.wait_count(1, kind)

    def agree() -> bool:
        stats = rcv.statistics()
        return (
            stats.msgs_rcved == rec.count(DATA)
            and stats.unrecoverable_loss == rec.count(MsgType.UNRECOVERABLE_LOSS)
            and stats.unrecoverable_loss_burst == rec.count(MsgType.UNRECOVERABLE_LOSS_BURST)
        )

    assert wait_until(agree), (rcv.statistics(), rec.counts)
    stats = rcv.statistics()
    assert 0 < stats.msgs_rcved < n
    if maximum_burst_loss == 0:
        assert stats.unrecoverable_loss_burst > 0 and stats.unrecoverable_loss == 0
    else:
        assert stats.unrecoverable_loss > 0 and stats.unrecoverable_loss_burst == 0
    # The wildcard receiver of the same topic shares the delivery controller: the same events.
    assert wait_until(lambda: wrcv.statistics() == rcv.statistics()), (wrcv.statistics(), rcv.statistics())


def test_every_event_queue_counter_moves_through_the_public_api(contexts: Contexts) -> None:
    # One event of each kind openum queues, each made the way an application makes it.
    pub, sub = contexts.new(), contexts.new()
    evq = openum.EventQueue(
        attrs={"queue_count_enabled": 1, "queue_age_enabled": 1, "queue_service_time_enabled": 1}
    )
    read_fd, write_fd = os.pipe()
    try:
        sub.schedule_timer(0, lambda _clientd: _spin(100), event_queue=evq)  # timer_events
        sub.register_fd(read_fd, lambda fd, _ev, _cd: os.read(fd, 1), event_queue=evq)  # io_events
        os.write(write_fd, b"x")
        wrcv = sub.create_wildcard_receiver(r"^wc/all/", lambda _m: _spin(100), event_queue=evq)  # wrcv_msgs
        rcv = sub.create_receiver("wc/all/a", lambda _m: _spin(100), event_queue=evq)  # data_msgs
        src = pub.create_source("wc/all/a", event_callback=lambda *_: None, event_queue=evq)  # source_events
        evq.call(_spin, 100)  # callback_events
        evq.unblock()  # unblock_events
        sub.receive_immediate_messages(lambda _m, _d: _spin(100), event_queue=evq)  # topicless_im_msgs
        pub.unicast_immediate_message(sub.immediate_target or "", b"im")
        pub.create_receiver("wc/rr", lambda m: m.respond(b"r") if m.type is openum.MsgType.REQUEST else None)
        request = sub.unicast_immediate_request(  # resp_msgs
            pub.immediate_target or "", b"q", lambda _m: _spin(100), topic="wc/rr", event_queue=evq
        )

        def totals() -> dict[str, int]:
            stats = evq.statistics()
            return {name: getattr(stats, name) for name in TOTALS}

        TOTALS = (
            "timer_events_tot", "io_events_tot", "wrcv_msgs_tot", "data_msgs_tot", "source_events_tot",
            "callback_events_tot", "unblock_events_tot", "topicless_im_msgs_tot", "resp_msgs_tot",
        )  # fmt: skip
        assert wait_until(lambda: all(totals().values())), totals()  # BOS for the receivers, CONNECT
        assert evq.statistics().unblock_events == 1  # queued until a dispatch consumes it
        assert evq.dispatch(openum.EventQueue.BLOCK) == 0
        while evq.dispatch(openum.EventQueue.POLL):
            pass
        stats = evq.statistics()
        queued_now = {"events", "data_msgs", "wrcv_msgs", "io_events", "timer_events", "source_events"}
        queued_now |= {"callback_events", "unblock_events", "topicless_im_msgs", "resp_msgs"}
        zero = {name for name, value in asdict(stats).items() if value == 0}
        # Everything moved; what is zero is only what is queued now (all dispatched) and no drop.
        assert zero == queued_now | {"dropped_tot"}, zero
        request.close()
        src.close()
        wrcv.close()
        rcv.close()
        sub.unregister_fd(read_fd)
        evq.shutdown()
        evq.call(_spin, 0)  # refused after shutdown: dropped_tot
        assert evq.statistics().dropped_tot >= 1
    finally:
        os.close(read_fd)
        os.close(write_fd)
        evq.close()


def test_a_copy_of_the_wildcard_receivers_options_keeps_its_receiver_options() -> None:
    from tests.integration.test_lbmrd_process import free_udp_port

    with openum.Context(options=[f"context resolver_multicast_port {free_udp_port()}"]) as ctx:
        wrcv = ctx.create_wildcard_receiver(
            "^copied/", attrs={"resolver_query_minimum_interval": 70}, receiver_attrs={"ordered_delivery": 0}
        )
        copy = wrcv.attributes.copy()
        assert copy.get("resolver_query_minimum_interval") == 70
        assert copy.get("ordered_delivery") == 0  # a receiver option, through the copy
        assert copy.receiver is not wrcv.attributes.receiver  # type: ignore[attr-defined]
        wrcv.close()


@pytest.mark.parametrize(
    "name", ["resolver_query_sustain_interval", "resolution_number_of_sources_query_threshold"]
)
def test_query_options_in_a_wildcard_receivers_receiver_attrs_are_refused(
    contexts: Contexts, name: str
) -> None:
    """A wildcard receiver queries with its wildcard_receiver options: a single-topic receiver's query
    option given for it would do nothing, so it is refused with what to set instead."""
    sub = contexts.new()
    with pytest.raises(ConfigError, match=f"{name} in receiver_attrs of a wildcard receiver") as info:
        sub.create_wildcard_receiver(r"^wc/q/", Recorder(), receiver_attrs={name: 2})
    assert "resolver_query_minimum_interval" in str(info.value)
    attrs = ReceiverAttributes()
    attrs.set(name, 2)
    with pytest.raises(ConfigError, match=name):
        sub.create_wildcard_receiver(r"^wc/q/", Recorder(), receiver_attrs=attrs)
    # The receiver scope of a configuration names every receiver: it does not stop wildcard receivers.
    with openum.Context(options=[*contexts.ports.options(), f"receiver {name} 2"]) as ctx:
        ctx.create_wildcard_receiver(r"^wc/q/", Recorder()).close()
