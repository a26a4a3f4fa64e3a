"""LBT-IPC and LBT-SMX between real contexts and processes on this host (UM Concepts Guide 6.4, 6.5;
issue 26): messages in order, fragmentation and properties over LBT-IPC, source- and receiver-paced
rings, LBT-SMX's zero-copy API and its limits, Late Join over LBT-IPC, ``kill -9`` of either side and
``openum ipc-resources``.

Each test has its own resolver port (``tests.integration.pubsub.Ports``) and transport ids of its own
(the segments' names carry random session ids, so tests never share one).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading

import pytest

import openum
from openum import MsgType, SendFlags, SourceEvent, SourceString, WouldBlock
from openum.transport.shm_resources import list_segments
from tests.helpers import wait_until
from tests.integration.pubsub import (
    ROOT,
    WAIT,
    Contexts,
    Ports,
    Processes,
    Recorder,
    SourceEvents,
    child_env,
    last_json,
)

DATA, BOS, EOS = MsgType.DATA, MsgType.BOS, MsgType.EOS


def _joined(ctx: openum.Context) -> bool:
    return bool(ctx._subscriptions.sessions)


def _segments_of(pid: int) -> list[str]:
    return [s.name for s in list_segments() if s.owner_pid == pid]


def _fill_ring(src: openum.Source, first: int) -> int:
    """Send counters from ``first`` (NONBLOCK) until a receiver-paced ring is full; returns the first
    counter not sent."""
    sent = first
    while sent < first + 100_000:
        try:
            src.send(sent.to_bytes(8, "big") + b"r" * 56, SendFlags.NONBLOCK | SendFlags.FLUSH)
        except WouldBlock:
            return sent
        sent += 1
    raise AssertionError("a receiver-paced ring took 100,000 messages without blocking")


def _sending_to_a_receiver(pid: int) -> bool:
    """A segment of process ``pid`` has a receiver and a write position past 0 (the u64 at byte 128,
    docs/shared-memory-layout.md): data is flowing."""
    for s in list_segments():
        if s.owner_pid == pid and s.receivers:
            with open(s.path, "rb") as f:
                if struct.unpack_from("<Q", f.read(136), 128)[0] > 0:
                    return True
    return False


@pytest.mark.parametrize("behavior", ["source_paced", "receiver_paced"])
def test_lbtipc_delivers_in_order_with_fragments_and_properties(contexts: Contexts, behavior: str) -> None:
    pub, sub = contexts.new(), contexts.new()
    rec = Recorder()
    sub.create_receiver("ipc/a", rec)
    src = pub.create_source("ipc/a", {"transport": "lbtipc", "transport_lbtipc_behavior": behavior})
    parsed = SourceString.parse(src.source_string)
    assert (parsed.transport.value, parsed.transport_id) == ("lbtipc", 20001)  # the range's first
    segment = next(s for s in list_segments() if s.session_id == parsed.session_id)
    assert segment.kind == "ipc" and segment.owner_pid == os.getpid() and segment.pacing == behavior
    assert wait_until(lambda: _joined(sub), WAIT)
    for i in range(5000):
        src.send(i.to_bytes(8, "big") + b"p" * 56)
    big = bytes(range(256)) * 400  # 102,400 bytes: fragmented
    src.send(big, properties={"k": 7, "s": "x"})
    src.flush()
    assert rec.wait_count(5001), (rec.count(), sub.statistics())
    data = rec.of(DATA)
    assert [g.counter for g in data[:5000]] == list(range(5000))
    assert data[5000].data == big and data[5000].properties == {"k": 7, "s": "x"}
    assert rec.types()[0] is BOS
    stats = sub.retrieve_transport_stats(src.source_string)
    assert stats.lbm_msgs_rcved >= 5000 and stats.records_lost == 0
    assert src.statistics().msgs_sent >= 5001 and src.statistics().receivers == 1
    src.close()
    assert wait_until(lambda: rec.count(EOS) == 1, WAIT)
    assert not any(s.session_id == parsed.session_id for s in list_segments())  # unlinked at close


def test_source_paced_overrun_is_reported_as_loss_and_the_source_never_blocks(contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    gate = threading.Event()
    rec = Recorder(gate=gate)
    sub.create_receiver("ipc/overrun", rec)
    src = pub.create_source(
        "ipc/overrun", {"transport": "lbtipc", "transport_lbtipc_transmission_window_size": 65536}
    )
    assert wait_until(lambda: _joined(sub), WAIT)
    src.send((0).to_bytes(8, "big"), SendFlags.FLUSH)
    assert rec.wait_count(1)  # the receiver is now stuck in its callback
    for i in range(1, 20_001):  # about 1.3 MB through a 64 KB ring
        src.send(i.to_bytes(8, "big") + b"o" * 56)
    src.flush()
    assert src.statistics().blocked == 0
    gate.set()
    lost = (MsgType.UNRECOVERABLE_LOSS, MsgType.UNRECOVERABLE_LOSS_BURST)
    assert wait_until(lambda: any(rec.count(k) for k in lost), WAIT), rec.counts
    src.send((20_001).to_bytes(8, "big"), SendFlags.FLUSH)
    assert wait_until(lambda: rec.of(DATA)[-1].counter == 20_001, WAIT)
    counters = [g.counter for g in rec.of(DATA)]
    assert counters == sorted(counters) and len(counters) < 20_002
    assert sub.retrieve_transport_stats(src.source_string).records_lost > 0


def test_receiver_paced_nonblock_gets_wouldblock_then_wakeup_and_nothing_is_lost(contexts: Contexts) -> None:
    pub, sub = contexts.new(), contexts.new()
    gate = threading.Event()
    rec = Recorder(gate=gate)
    events = SourceEvents()
    sub.create_receiver("ipc/paced", rec)
    src = pub.create_source(
        "ipc/paced",
        {
            "transport": "lbtipc",
            "transport_lbtipc_behavior": "receiver_paced",
            "transport_lbtipc_transmission_window_size": 65536,
        },
        event_callback=events,
    )
    assert wait_until(lambda: _joined(sub), WAIT)
    src.send((0).to_bytes(8, "big"), SendFlags.FLUSH)
    assert rec.wait_count(1)
    sent = _fill_ring(src, 1)
    gate.set()
    assert events.wait(SourceEvent.WAKEUP)
    src.send(sent.to_bytes(8, "big"), SendFlags.FLUSH)
    assert rec.wait_count(sent + 1), (rec.count(), sent)
    assert [g.counter for g in rec.of(DATA)] == list(range(sent + 1))
    assert not rec.count(MsgType.UNRECOVERABLE_LOSS) and not rec.count(MsgType.UNRECOVERABLE_LOSS_BURST)


def test_a_late_joiner_gets_what_an_lbtipc_source_retains(contexts: Contexts) -> None:
    pub = contexts.new()
    src = pub.create_source(
        "ipc/lj", {"transport": "lbtipc", "late_join": 1, "retransmit_retention_size_threshold": 1 << 20}
    )
    for i in range(100):
        src.send(i.to_bytes(8, "big"))
    src.flush()
    sub = contexts.new()
    rec = Recorder()
    sub.create_receiver("ipc/lj", rec)
    assert rec.wait_count(100), (rec.count(), sub.statistics())
    data = rec.of(DATA)
    assert [g.counter for g in data] == list(range(100))
    assert all(g.flags & openum.MsgFlags.RETRANSMIT for g in data)


def test_lbtsmx_zero_copy_api_and_its_limits(contexts: Contexts, caplog: pytest.LogCaptureFixture) -> None:
    pub = contexts.new()
    sub = contexts.new()
    rec = Recorder()
    sub.create_receiver("smx/a", rec)
    caplog.set_level(logging.WARNING, logger="openum")
    src = pub.create_source(
        "smx/a",
        {
            "transport": "lbtsmx",
            "transport_lbtsmx_datagram_max_size": 1024,
            "transport_lbtsmx_transmission_window_size": 25165824,
            "late_join": 1,
        },
    )
    warnings = [r.getMessage() for r in caplog.records]
    assert any("not a power of two: using 33554432" in w for w in warnings), warnings
    assert any("LBT-SMX does not support Late Join" in w for w in warnings), warnings
    assert next(s for s in list_segments() if s.name.startswith("openum-smx-")).capacity == 33554432
    assert wait_until(lambda: _joined(sub), WAIT)
    view = src.buff_acquire(100)
    assert len(view) == 100
    view[:] = bytes(range(100))
    view.release()
    second = src.buff_acquire(8)
    second[:] = b"complete"
    second.release()
    assert src.buffs_complete() == 2
    assert src.send(b"general") == 2  # the general API publishes at once (no batching on LBT-SMX)
    assert rec.wait_count(3)
    assert [g.data for g in rec.of(DATA)] == [bytes(range(100)), b"complete", b"general"]
    assert [g.sqn for g in rec.of(DATA)] == [0, 1, 2]
    assert src.send(b"x" * 1008) == 3  # datagram_max_size - 16
    with pytest.raises(ValueError, match="at most transport_lbtsmx_datagram_max_size - 16 = 1008"):
        src.send(b"x" * 1009)
    with pytest.raises(openum.NotSupportedError, match="properties"):
        src.send(b"p", properties={"k": 1})
    cancelled = src.buff_acquire(4)
    cancelled.release()
    assert src.buffs_cancel() == 1 and src.sequence_number == 4
    assert rec.wait_count(4)


def test_zero_copy_calls_on_other_transports_are_refused(contexts: Contexts) -> None:
    src = contexts.new().create_source("ipc/nozc", {"transport": "lbtipc"})
    with pytest.raises(openum.NotSupportedError, match="LBT-SMX"):
        src.buff_acquire(8)
    tcp = contexts.new().create_source("tcp/nozc", {"transport": "tcp"})
    with pytest.raises(openum.NotSupportedError, match="LBT-SMX"):
        tcp.buffs_complete()


# -- separate processes -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["lbtipc", "lbtsmx"])
def test_cli_a_million_messages_in_order(transport: str, ports: Ports, procs: Processes) -> None:
    n = 1_000_000
    topic = f"shm/cli/{transport}"
    extra = ["--option", "source transport_lbtipc_behavior receiver_paced"] if transport == "lbtipc" else []
    recv = procs.openum(
        "recv", topic, "--count", str(n), "--verify", "--json", "--timeout", "60", *ports.argv()
    )
    send = procs.openum(
        "send", topic, "--count", str(n), "--transport", transport, "--json", "--delay", "2",
        *extra, *ports.argv(),
    )  # fmt: skip
    send_out, send_err = send.communicate(timeout=300)
    assert send.returncode == 0, send_err
    recv_out, recv_err = recv.communicate(timeout=120)
    assert recv.returncode == 0, (recv_out[-2000:], recv_err[-2000:])
    sent, got = last_json(send_out), last_json(recv_out)
    assert sent["sent"] == n and sent["transport"] == transport
    assert got["received"] == n
    assert got["gaps"] == got["duplicates"] == got["out_of_order"] == 0
    assert got["unrecoverable_loss"] == got["unrecoverable_loss_burst"] == 0


def _ipc_resources(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openum", "ipc-resources", *args],
        capture_output=True, text=True, timeout=60, env=child_env(), cwd=ROOT, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_kill_9_of_the_source_ends_the_session_and_ipc_resources_reclaims_it(
    ports: Ports, procs: Processes
) -> None:
    topic = "shm/kill/source"
    recv = procs.openum("recv", topic, "--json", "--timeout", "5", *ports.argv())
    send = procs.openum(
        "send", topic, "--count", "100000000", "--transport", "lbtipc", "--delay", "2", *ports.argv()
    )
    assert wait_until(lambda: _sending_to_a_receiver(send.pid), 30), _ipc_resources().stdout
    send.send_signal(signal.SIGKILL)
    send.wait(10)
    recv_out, recv_err = recv.communicate(timeout=60)
    assert recv.returncode == 0, recv_err[-2000:]
    got = last_json(recv_out)
    assert got["eos"] == 1 and got["received"] > 0 and got["gaps"] == 0, got
    # What the killed source left: listed as orphaned, reclaimed, gone.
    listed = json.loads(_ipc_resources("--json").stdout)
    mine = [s for s in listed if s["owner_pid"] == send.pid]
    assert mine and all(s["orphaned"] for s in mine), listed
    done = _ipc_resources("--reclaim", "--json")
    assert done.returncode == 0
    assert {s["name"] for s in json.loads(done.stdout)["deleted"]} >= {s["name"] for s in mine}
    assert not _segments_of(send.pid)
    # A second run starts clean.
    recv2 = procs.openum(
        "recv", topic, "--count", "1000", "--verify", "--json", "--timeout", "30", *ports.argv()
    )
    send2 = procs.openum(
        "send", topic, "--count", "1000", "--transport", "lbtipc", "--delay", "2", "--json", *ports.argv()
    )
    assert send2.wait(60) == 0
    out, err = recv2.communicate(timeout=60)
    assert recv2.returncode == 0 and last_json(out)["received"] == 1000, err[-2000:]
    assert not _segments_of(send2.pid)  # nothing left after a clean shutdown


@pytest.mark.slow
def test_kill_9_of_a_receiver_never_wedges_a_receiver_paced_source(ports: Ports, procs: Processes) -> None:
    topic = "shm/kill/receiver"
    n = 3_000_000
    recv = procs.openum("recv", topic, "--timeout", "60", *ports.argv())
    send = procs.openum(
        "send", topic, "--count", str(n), "--transport", "lbtipc", "--delay", "2", "--json",
        "--option", "source transport_lbtipc_behavior receiver_paced",
        "--option", "source transport_lbtipc_transmission_window_size 1048576", *ports.argv(),
    )  # fmt: skip
    assert wait_until(lambda: _sending_to_a_receiver(send.pid), 30), _ipc_resources().stdout
    recv.send_signal(signal.SIGKILL)
    recv.wait(10)
    out, err = send.communicate(timeout=240)
    assert send.returncode == 0, err[-2000:]
    assert last_json(out)["sent"] == n
    assert not _segments_of(send.pid)


def test_closing_a_receiver_paced_source_is_not_held_up_by_a_receiver_that_stopped_reading(
    contexts: Contexts,
) -> None:
    pub, sub = contexts.new(), contexts.new()
    gate = threading.Event()
    rec = Recorder(gate=gate)
    sub.create_receiver("ipc/stuck", rec)
    src = pub.create_source(
        "ipc/stuck",
        {
            "transport": "lbtipc",
            "transport_lbtipc_behavior": "receiver_paced",
            "transport_lbtipc_transmission_window_size": 65536,
        },
    )
    assert wait_until(lambda: _joined(sub), WAIT)
    src.send(b"first", SendFlags.FLUSH)
    assert rec.wait_count(1)  # the receiver is stuck in its callback from now on
    _fill_ring(src, 1)
    src.close()  # returns although the end of session finds no room (the receiver sees the closed header)
    gate.set()
    assert wait_until(lambda: rec.count(EOS) == 1, WAIT), rec.counts
