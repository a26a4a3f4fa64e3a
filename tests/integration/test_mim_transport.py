"""Multicast immediate messaging (UM Concepts Guide, section 10.8): the MIM sender's temporary LBT-RM
session and MIM reception, over real sockets (multicast on 127.0.0.1 only) with a real event loop running
in a thread.  Every test uses its own multicast group and UDP port, so tests never hear each other."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import random
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openum._errors import ClosedError, ConfigError, WouldBlock
from openum.config import ContextAttributes, set_unimplemented_policy
from openum.runtime import EventLoop, MonotonicClock
from openum.transport.mim import (
    MAX_QUEUED_BYTES,
    MAX_SESSIONS,
    MimMessage,
    MimReceiver,
    MimSender,
    mim_incoming,
    mim_outgoing,
)
from openum.wire.lbmc import (
    AppHeader,
    FragmentHeader,
    PropertiesBlock,
    RequestHeader,
)
from openum.wire.lbtrm import FLAG_RX, TYPE_DATA, RmData, RmSessionMessage, encode
from tests.helpers import wait_until

LOG = logging.getLogger("test.mim")
TIMEOUT = 20.0
IFACE = "127.0.0.1"
BIG = bytes(random.Random(5).randrange(256) for _ in range(200_000))

_groups = itertools.count(random.Random(os.getpid()).randrange(0, 60_000))


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


def fresh_group() -> str:
    """A multicast group of 224.10.x.y that no other test of this process uses."""
    n = next(_groups) % 65_000
    return f"224.10.{1 + n // 254}.{1 + n % 254}"


def context_attrs(**options: Any) -> ContextAttributes:
    """Context attributes with ``options`` set; MIM options not yet marked implemented are let through."""
    set_unimplemented_policy("warn")
    try:
        attrs = ContextAttributes()
        for name, value in options.items():
            attrs.set(name, value)
        return attrs
    finally:
        set_unimplemented_policy(None)


class Inbox:
    """Collects what a MimReceiver delivers (payloads copied: the receive buffer is reused)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[MimMessage] = []
        self.losses: list[tuple[str, int]] = []

    def on_message(self, msg: MimMessage) -> None:
        with self.lock:
            self.messages.append(dataclasses.replace(msg, payload=bytes(msg.payload)))

    def on_loss(self, source: str, sqn: int) -> None:
        with self.lock:
            self.losses.append((source, sqn))

    def __len__(self) -> int:
        with self.lock:
            return len(self.messages)

    def snapshot(self) -> list[MimMessage]:
        with self.lock:
            return list(self.messages)

    def wait_for(self, count: int) -> list[MimMessage]:
        assert wait_until(lambda: len(self) >= count, TIMEOUT), f"got {len(self)} of {count} messages"
        return self.snapshot()


@pytest.fixture
def loop() -> Iterator[EventLoop]:
    ev = EventLoop(MonotonicClock(), LOG, "mim-test")
    thread = threading.Thread(target=ev.run, name="mim-loop", daemon=True)
    thread.start()
    yield ev
    ev.stop()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    ev.close()


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """``closing(obj)``: close ``obj`` when the test ends (returns it)."""
    objects: list[Any] = []

    def add(obj: Any) -> Any:
        objects.append(obj)
        return obj

    yield add
    for obj in reversed(objects):
        obj.close()


class Mim:
    """One test's MIM address (group and port) and factories for senders and receivers on it."""

    def __init__(self, loop: EventLoop, closing: Callable[[Any], Any]) -> None:
        self.loop = loop
        self.closing = closing
        self.group = fresh_group()
        self.port = free_udp_port()

    def options(self, **options: Any) -> dict[str, Any]:
        return {"mim_address": self.group, "mim_destination_port": self.port, **options}

    def sender(self, **options: Any) -> MimSender:
        attrs = context_attrs(**self.options(**options))
        sender = MimSender(self.loop, attrs, IFACE, LOG, random.Random())
        return self.closing(sender)  # type: ignore[no-any-return]

    def receiver(self, inbox: Inbox, *, drop: Any = None, **options: Any) -> MimReceiver:
        attrs = context_attrs(**self.options(**options))
        return self.receiver_with(attrs, inbox, drop=drop)

    def receiver_with(self, attrs: ContextAttributes, inbox: Inbox, *, drop: Any = None) -> MimReceiver:
        rcv = MimReceiver(
            self.loop, attrs, IFACE, inbox.on_message, inbox.on_loss, LOG, random.Random(7), drop=drop
        )
        self.closing(OnLoop(self.loop, rcv))  # a receiver closes on the context thread
        return rcv

    def inject(self, datagram: bytes) -> None:
        """Send a raw datagram to the group (garbage, forged sessions)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(IFACE))
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            sock.sendto(datagram, (self.group, self.port))


class OnLoop:
    """Closes ``obj`` on the loop's thread (where a context closes its MIM receiver)."""

    def __init__(self, loop: EventLoop, obj: Any) -> None:
        self.loop = loop
        self.obj = obj

    def close(self) -> None:
        run_on_loop(self.loop, self.obj.close)


@pytest.fixture
def mim(loop: EventLoop, closing: Callable[[Any], Any]) -> Mim:
    return Mim(loop, closing)


def run_on_loop(loop: EventLoop, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the loop's thread and return its result."""
    done = threading.Event()
    result: list[Any] = []

    def call() -> None:
        result.append(fn())
        done.set()

    loop.call_soon(call)
    assert done.wait(TIMEOUT)
    return result[0]


def session_id_of(source: str) -> int:
    return int(source.split(":")[3], 16)


# -- addresses and options -------------------------------------------------------------------------------


def test_addresses_follow_mim_address_unless_the_specific_option_is_set() -> None:
    defaults = context_attrs()
    assert mim_incoming(defaults) == ("0.0.0.0", 14401)  # reception disabled (UM 6.8 and later)
    assert mim_outgoing(defaults) == ("224.10.10.21", 14401)
    both = context_attrs(mim_address="224.10.77.1", mim_destination_port=15001)
    assert mim_incoming(both) == ("224.10.77.1", 15001)
    assert mim_outgoing(both) == ("224.10.77.1", 15001)
    split = context_attrs(
        mim_address="224.10.77.1",
        mim_outgoing_address="224.10.77.2",
        mim_incoming_destination_port=15002,
        mim_outgoing_destination_port=15003,
    )
    assert mim_incoming(split) == ("224.10.77.1", 15002)
    assert mim_outgoing(split) == ("224.10.77.2", 15003)
    # A non-multicast mim_address disables reception and leaves the outgoing default in place.
    off = context_attrs(mim_address="0.0.0.0")
    assert mim_incoming(off)[0] == "0.0.0.0"
    assert mim_outgoing(off)[0] == "224.10.10.21"


def test_inconsistent_session_message_intervals_are_refused(loop: EventLoop) -> None:
    attrs = context_attrs(mim_sm_minimum_interval=5000, mim_sm_maximum_interval=1000)
    with pytest.raises(ConfigError, match="mim_sm_minimum_interval"):
        MimSender(loop, attrs, IFACE, LOG, random.Random())


# -- delivery --------------------------------------------------------------------------------------------


def test_topic_topicless_and_fragmented_messages_arrive_in_order_with_their_headers(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(inbox)
    assert rcv.enabled
    sender = mim.sender(mim_implicit_batching_interval=20)
    request = RequestHeader(request_index=42, port=14391, ip="127.0.0.1")
    app = AppHeader(app_code=7, data=b"app-header")
    props = PropertiesBlock.from_mapping({"count": 3, "name": "x"})
    sent: list[tuple[str | None, bytes, tuple[Any, ...], dict[str, Any] | None]] = [
        ("T", b"first", (), None),
        (None, b"topicless", (), None),
        ("Orders/1", b"request", (request,), None),
        ("T", BIG, (), None),
        (None, b"with properties", (app,), {"count": 3, "name": "x"}),
        ("Big/Props", BIG[:70_000], (request,), {"count": 3, "name": "x"}),
        ("T", b"last", (), None),
    ]
    for topic, payload, headers, properties in sent:
        sender.send(topic, payload, headers, props if properties is not None else None)
    sender.flush()

    got = inbox.wait_for(len(sent))
    assert len(got) == len(sent)
    for msg, (topic, payload, headers, properties) in zip(got, sent, strict=True):
        assert msg.topic == topic
        assert msg.payload == payload
        assert msg.headers == headers
        assert msg.properties == properties
        assert msg.request == (request if request in headers else None)
    sqns = [m.sequence_number for m in got]
    assert sqns == sorted(sqns) and len(set(sqns)) == len(sqns)
    assert sqns[0] == 0 and sqns[-1] > len(sent)  # fragments take one sequence number each
    source = got[0].source
    assert {m.source for m in got} == {source}
    assert source.startswith(f"LBTRM:{IFACE}:{sender.source_port}:")
    assert source.endswith(f":{mim.group}:{mim.port}")
    assert session_id_of(source) == sender.session_id

    sent_stats = sender.statistics()
    assert sent_stats["msgs_sent"] == len(sent)
    assert sent_stats["sessions_created"] == 1
    assert sent_stats["fragments_sent"] > 25  # 200 KB in 8 KB datagrams, and the 70 KB one
    assert sent_stats["datagrams_sent"] >= sent_stats["fragments_sent"]
    rcv_stats = run_on_loop(mim.loop, rcv.statistics)
    assert rcv_stats["msgs_rcved"] == len(sent)
    assert rcv_stats["sessions_active"] == 1
    assert rcv_stats["unrecoverable_loss"] == rcv_stats["dgrams_dropped_malformed"] == 0
    assert inbox.losses == []


def test_small_messages_are_batched_into_one_datagram(mim: Mim) -> None:
    inbox = Inbox()
    mim.receiver(inbox)
    sender = mim.sender(mim_implicit_batching_interval=60_000)
    for i in range(20):
        sender.send("T", b"m%d" % i)
    assert sender.statistics()["datagrams_sent"] == 0  # below the minimum length, before the interval
    sender.flush()
    got = inbox.wait_for(20)
    assert [m.payload for m in got] == [b"m%d" % i for i in range(20)]
    assert sender.statistics()["datagrams_sent"] == 1


def test_two_receivers_both_get_every_message(mim: Mim) -> None:
    first, second = Inbox(), Inbox()
    mim.receiver(first)
    mim.receiver(second)
    sender = mim.sender()
    payloads = [b"p%d" % i for i in range(30)] + [BIG]
    for payload in payloads:
        sender.send("Shared", payload, flush=True)
    for inbox in (first, second):
        got = inbox.wait_for(len(payloads))
        assert [m.payload for m in got] == payloads
        assert {m.topic for m in got} == {"Shared"}


def test_a_context_with_reception_disabled_gets_nothing(mim: Mim) -> None:
    heard, deaf = Inbox(), Inbox()
    mim.receiver(heard)
    # The defaults: mim_incoming_address 0.0.0.0, reception disabled; it sends to the test's group.
    disabled = mim.receiver_with(
        context_attrs(mim_outgoing_address=mim.group, mim_destination_port=mim.port), deaf
    )
    assert not disabled.enabled
    sender = mim.sender()
    for i in range(10):
        sender.send("T", b"%d" % i, flush=True)
    heard.wait_for(10)
    assert len(deaf) == 0
    assert set(disabled.statistics().values()) == {0}


@pytest.mark.parametrize("ordered", [1, -1, 0])
def test_ordered_delivery_option(mim: Mim, ordered: int) -> None:
    inbox = Inbox()
    mim.receiver(inbox, mim_ordered_delivery=ordered)
    sender = mim.sender()
    sender.send("T", b"before", flush=True)
    sender.send("T", BIG[:50_000], flush=True)
    sender.send("T", b"after", flush=True)
    if ordered == 0:  # arrival order without reassembly: every fragment is a message, FRAG header kept
        got = inbox.wait_for(2 + 7)
        pieces = got[1:-1]
        assert all(isinstance(m.headers[0], FragmentHeader) for m in pieces)
        assert b"".join(m.payload for m in pieces) == BIG[:50_000]
    else:
        got = inbox.wait_for(3)
        assert [m.payload for m in got] == [b"before", BIG[:50_000], b"after"]
        assert got[1].headers == ()
    assert got[0].payload == b"before" and got[-1].payload == b"after"


# -- reliability -----------------------------------------------------------------------------------------


def drop_every_third_original(data: bytes | memoryview) -> bool:
    """Drop original (not retransmitted) DATA datagrams whose transport sequence number is 1 mod 3."""
    if len(data) < 20 or data[0] & 0x0F != TYPE_DATA or data[16] & FLAG_RX:
        return False
    sqn: int = struct.unpack_from(">I", data, 8)[0]
    return sqn % 3 == 1


def test_lost_datagrams_are_repaired_by_naks_and_retransmissions(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(inbox, drop=drop_every_third_original, mim_nak_initial_backoff_interval=10)
    sender = mim.sender()
    payloads = [b"msg-%03d" % i for i in range(60)] + [BIG[:100_000], b"tail"]
    for payload in payloads:
        sender.send("Lossy", payload, flush=True)
    got = inbox.wait_for(len(payloads))
    assert [m.payload for m in got] == payloads
    assert inbox.losses == []
    sent = sender.statistics()
    received = run_on_loop(mim.loop, rcv.statistics)
    assert received["dgrams_dropped_test_hook"] > 20
    assert received["naks_sent"] >= received["dgrams_dropped_test_hook"] - 1
    assert received["rxs_rcved"] > 20
    assert sent["naks_rcved"] > 20
    assert sent["retransmissions_sent"] > 20
    assert received["unrecoverable_loss"] == 0


def test_loss_the_sender_cannot_repair_is_reported_once_per_message(mim: Mim) -> None:
    inbox = Inbox()
    mim.receiver(
        inbox,
        drop=lambda d: len(d) > 20 and d[0] & 0x0F == TYPE_DATA and struct.unpack_from(">I", d, 8)[0] == 2,
        mim_send_naks=0,
        mim_nak_generation_interval=300,
    )
    sender = mim.sender()
    for i in range(5):
        sender.send("T", b"%d" % i, flush=True)
    got = inbox.wait_for(4)
    assert [m.payload for m in got] == [b"0", b"1", b"3", b"4"]
    assert wait_until(lambda: len(inbox.losses) == 1, TIMEOUT)
    assert inbox.losses == [(got[0].source, 2)]
    assert sender.statistics()["naks_rcved"] == 0


# -- the temporary transport session ---------------------------------------------------------------------


def test_the_session_is_deleted_when_idle_and_a_new_one_has_a_new_id(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(inbox, mim_activity_timeout=1500)
    sender = mim.sender(mim_src_deletion_timeout=300)
    sender.send("T", b"one", flush=True)
    first = inbox.wait_for(1)[0]
    first_id = sender.session_id
    assert first_id is not None and session_id_of(first.source) == first_id
    assert wait_until(lambda: sender.statistics()["sessions_deleted"] == 1, TIMEOUT), sender.statistics()
    assert sender.session_id is None
    # The receiver is told nothing (no EOS, 10.8.2); it forgets the silent session after its timeout.
    assert wait_until(lambda: run_on_loop(mim.loop, rcv.statistics)["sessions_ended"] == 1, TIMEOUT)
    assert len(inbox) == 1
    sender.send("T", b"two", flush=True)
    second = inbox.wait_for(2)[1]
    assert sender.session_id not in (None, first_id)
    assert session_id_of(second.source) == sender.session_id
    assert second.sequence_number == 0  # a new session numbers its messages from 0 again
    stats = sender.statistics()
    assert (stats["sessions_created"], stats["msgs_sent"]) == (2, 2)


def test_an_idle_delivery_controller_is_deleted_and_the_next_message_starts_a_new_one(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(
        inbox, mim_delivery_control_activity_timeout=300, mim_delivery_control_activity_check_interval=50
    )
    sender = mim.sender()
    sender.send("T", b"a", flush=True)
    inbox.wait_for(1)

    def deleted() -> int:
        count: int = run_on_loop(mim.loop, rcv.statistics)["delivery_controllers_deleted"]
        return count

    assert wait_until(lambda: deleted() == 1, TIMEOUT)
    sender.send("T", b"b", flush=True)
    sender.send("T", b"c", flush=True)
    got = inbox.wait_for(3)
    assert [(m.payload, m.sequence_number) for m in got] == [(b"a", 0), (b"b", 1), (b"c", 2)]
    stats = run_on_loop(mim.loop, rcv.statistics)
    assert (stats["sessions_active"], stats["unrecoverable_loss"]) == (1, 0)


def test_a_session_in_use_is_kept(mim: Mim) -> None:
    inbox = Inbox()
    mim.receiver(inbox)
    sender = mim.sender(mim_src_deletion_timeout=1000)
    stop = threading.Event()

    def keep_sending() -> None:  # for about three deletion timeouts
        for i in range(60):
            sender.send("T", b"%d" % i, flush=True)
            if stop.wait(0.05):
                return

    thread = threading.Thread(target=keep_sending)
    thread.start()
    try:
        inbox.wait_for(60)
    finally:
        stop.set()
        thread.join(TIMEOUT)
    stats = sender.statistics()
    assert (stats["sessions_created"], stats["sessions_deleted"]) == (1, 0)
    assert len({m.source for m in inbox.snapshot()}) == 1


def test_sends_held_back_by_the_rate_limit_wait_in_order_and_a_full_queue_would_block(mim: Mim) -> None:
    inbox = Inbox()
    mim.receiver(inbox)
    # 1000 bytes per 100 ms interval.
    sender = mim.sender(transport_lbtrm_data_rate_limit=80_000, transport_lbtrm_rate_interval=100)
    sender.send("T", b"x" * 4000, flush=True)  # over one interval's budget: the controller holds it
    sender.send("T", b"second", flush=True)  # waits in the sender; the send returns at once
    sender.send(None, b"third", flush=True)
    stats = sender.statistics()
    assert (stats["queued"], stats["queued_bytes"]) == (2, len(b"second") + len(b"third"))
    with pytest.raises(WouldBlock, match="transport_lbtrm_data_rate_limit"):
        sender.send("T", bytes(MAX_QUEUED_BYTES), flush=True)
    assert sender.statistics()["would_block"] == 1
    got = inbox.wait_for(3)
    assert [(m.topic, m.payload) for m in got] == [("T", b"x" * 4000), ("T", b"second"), (None, b"third")]
    assert [m.sequence_number for m in got] == [0, 1, 2]
    assert wait_until(lambda: sender.statistics()["queued"] == 0, TIMEOUT)


def test_closed_sender_and_bad_topic_are_refused(mim: Mim) -> None:
    sender = mim.sender()
    with pytest.raises(ValueError, match="topic"):
        sender.send("x" * 300, b"too long a topic")
    sender.close()
    with pytest.raises(ClosedError):
        sender.send("T", b"after close")


# -- hostile input ---------------------------------------------------------------------------------------


def test_malformed_datagrams_are_counted_and_dropped(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(inbox)
    sender = mim.sender()
    sender.send("T", b"before", flush=True)
    inbox.wait_for(1)
    garbage = [
        b"\x00\x00",  # too short
        b"\x10" + bytes(30),  # LBT-RM version 1
        b"\x07" + bytes(30),  # no such type
        b"\x00\x00\x01\x02\x00\x00\x00\x09",  # DATA header cut short
        # A DATA datagram of a new session whose payload is not LBMC.
        encode(RmData(14390, 0x1234, 0, 0, b"\xde\xad\xbe\xef" * 4)),
    ]
    for datagram in garbage:
        mim.inject(datagram)
    assert wait_until(
        lambda: run_on_loop(mim.loop, rcv.statistics)["dgrams_dropped_malformed"] == len(garbage), TIMEOUT
    ), run_on_loop(mim.loop, rcv.statistics)
    sender.send("T", b"after", flush=True)
    assert [m.payload for m in inbox.wait_for(2)] == [b"before", b"after"]
    # Garbage on the sender's NAK port is counted too.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\x03junk", (IFACE, sender.source_port or 0))
    assert wait_until(lambda: sender.statistics()["dgrams_dropped_malformed"] == 1, TIMEOUT)


def test_sessions_are_bounded(mim: Mim) -> None:
    inbox = Inbox()
    rcv = mim.receiver(inbox, mim_send_naks=0)
    sids = range(1, MAX_SESSIONS + 11)

    def read() -> int:
        count: int = run_on_loop(mim.loop, rcv.statistics)["dgrams_rcved"]
        return count

    for start in range(0, len(sids), 32):  # in bursts the receive buffer holds
        for sid in sids[start : start + 32]:
            mim.inject(encode(RmSessionMessage(14390, sid, 0, 0xFFFFFFFF, 0, 0)))
        expected = min(start + 32, len(sids))
        assert wait_until(lambda: read() >= expected, TIMEOUT), read()  # noqa: B023 - called at once
    stats = run_on_loop(mim.loop, rcv.statistics)
    assert stats["sessions_active"] == MAX_SESSIONS
    assert (stats["sessions_refused_limit"], stats["sessions_dropped_limit"]) == (10, 10)
    mim.inject(encode(RmSessionMessage(14390, sids[-1], 1, 0xFFFFFFFF, 0, 0)))  # a refused one again
    assert wait_until(lambda: run_on_loop(mim.loop, rcv.statistics)["sessions_dropped_limit"] == 11, TIMEOUT)
    assert run_on_loop(mim.loop, rcv.statistics)["sessions_refused_limit"] == 10


# -- conformance -----------------------------------------------------------------------------------------


@pytest.mark.tshark
def test_a_captured_mim_session_decodes_cleanly_as_lbtrm(loop: EventLoop, tmp_path: Path) -> None:
    """Capture a MIM session on lo (with loss, so NAKs, NCFs and retransmissions are on the wire too) and
    let tshark's LBT-RM heuristic, told the test's MIM address, recognise and decode every frame."""
    from tests.conformance.test_tr_capture import Capture
    from tests.conformance.tshark import Tshark, TsharkMissingError, tshark_path

    try:
        tshark_path()
    except TsharkMissingError as exc:
        if os.environ.get("OPENUM_SKIP_TSHARK") == "1":
            pytest.skip(f"OPENUM_SKIP_TSHARK=1: {exc}")
        pytest.fail(str(exc), pytrace=False)
    if os.geteuid() != 0:
        pytest.skip("capturing on lo needs root (CI runs as root)")
    objects: list[Any] = []

    def keep(obj: Any) -> Any:
        objects.append(obj)
        return obj

    mim = Mim(loop, keep)
    nak_port = free_udp_port()
    pcap = tmp_path / "mim.pcap"
    cap = Capture(pcap, f"udp port {mim.port} or udp port {nak_port}")
    try:
        assert cap.ready.wait(TIMEOUT), cap.stderr
        inbox = Inbox()
        mim.receiver(inbox, drop=drop_every_third_original, mim_nak_initial_backoff_interval=10)
        sender = mim.sender(
            transport_lbtrm_source_port_low=nak_port, transport_lbtrm_source_port_high=nak_port
        )
        assert sender.statistics()["sessions_created"] == 0
        request = RequestHeader(request_index=1, port=14391, ip="127.0.0.1")
        payloads = [b"mim-%02d" % i for i in range(20)]
        for i, payload in enumerate(payloads):
            sender.send(None if i == 5 else "MIM/Topic", payload, (request,) if i == 7 else (), flush=True)
        sender.send("MIM/Big", BIG[:30_000], flush=True)
        inbox.wait_for(len(payloads) + 1)
        assert sender.source_port == nak_port
        assert sender.statistics()["retransmissions_sent"] > 0
        # Idle: session messages follow (mim_sm_minimum_interval, 200 ms).
        assert wait_until(lambda: sender.statistics()["sms_sent"] >= 2, TIMEOUT)
        assert cap.wait_packets(40)
    finally:
        for obj in reversed(objects):
            obj.close()
        cap.stop()
    tshark = Tshark(
        decode_as=(),
        prefs={
            "lbtrm.mim_incoming_address": mim.group,
            "lbtrm.mim_outgoing_address": mim.group,
            "lbtrm.mim_incoming_dport": str(mim.port),
            "lbtrm.mim_outgoing_dport": str(mim.port),
            "lbtrm.sport_low": str(nak_port),
            "lbtrm.sport_high": str(nak_port),
        },
    )
    rows = tshark.assert_clean(
        pcap,
        allowed_expert=(r"^NAK$",),
        fields=[
            "frame.protocols",
            "lbtrm.hdr.type",
            "lbtrm.hdr.session_id",
            "lbmc.topicname.topic",
            "lbmc.tidx",
            "lbmc.sqn",
        ],
    )
    assert rows, "nothing captured"
    assert all("lbtrm" in row["frame.protocols"][0] for row in rows), [r["frame.protocols"] for r in rows]
    types = {int(t, 0) for row in rows for t in row.get("lbtrm.hdr.type", [])}
    assert {0, 2, 3} <= types  # DATA, SM, NAK (and NCFs when a NAK came during the ignore interval)
    sids = {int(s, 0) for row in rows for s in row.get("lbtrm.hdr.session_id", [])}
    assert len(sids) == 1
    topics = {t for row in rows for t in row.get("lbmc.topicname.topic", [])}
    assert topics == {"MIM/Topic", "MIM/Big"}
    assert {int(t, 0) for row in rows for t in row.get("lbmc.tidx", [])} == {0}
    # The session's messages (one sequence number per fragment) are all on the wire.
    sqns = {int(q, 0) for row in rows for q in row.get("lbmc.sqn", [])}
    assert sqns == set(range(max(sqns) + 1)) and max(sqns) > len(payloads)
