"""pyzmq peer processes of ``openum bench``: PUB/SUB over ``tcp://`` or ``ipc://``.

High-water marks: PUB/SUB has no flow control: when a queue reaches its high-water mark, libzmq
*drops* messages.  The bench counts every message, so both ends set ``SNDHWM``/``RCVHWM`` to 0 (no
limit): nothing is dropped and the queues absorb the difference in speed (the receiver's rate is what
is reported).  The subscriber binds and the publisher connects, so the subscription reaches the
publisher as soon as the connection is up; the hello handshake (``_common``) confirms it before the
first counted message is sent.

Ping/pong: two PUB/SUB pairs (ping's PUB on ``endpoint_ping`` -> pong's SUB, pong's PUB on
``endpoint_pong`` -> ping's SUB), a blocking ``recv`` on the main thread (libzmq waits in ``poll`` with
the GIL released), or ``recv(NOBLOCK)`` in a loop with ``busy``.  During the warm-up a ping whose echo
is late is sent again (subscriptions take a moment to propagate); measured pings are never resent.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import zmq

from openum.cli._bench._common import (
    COUNTER,
    HELLO,
    HELLO_INTERVAL,
    PACING_QUANTUM,
    Control,
    Verifier,
    emit,
    say,
)
from openum.cli._pacing import paced_batches

__all__ = ["ping", "pong", "pub", "sub"]


def _socket(ctx: Any, kind: int) -> Any:
    sock = ctx.socket(kind)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.setsockopt(zmq.SNDHWM, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    return sock


def pub(spec: dict[str, Any]) -> int:
    control = Control()
    count: int = spec["count"]
    size: int = spec["size"]
    rate: float = spec.get("rate", 0.0)
    ctx = zmq.Context()
    sock = _socket(ctx, zmq.PUB)
    sock.connect(spec["endpoint"])
    hello = bytearray(size)
    COUNTER.pack_into(hello, 0, HELLO)
    hellos = 0
    while not control.go.wait(HELLO_INTERVAL):
        sock.send(hello)
        hellos += 1
    payload = bytearray(size)
    pack = COUNTER.pack_into
    send = sock.send
    sent = 0
    start = time.perf_counter()
    for due in paced_batches(count, rate, None, start=start, quantum=PACING_QUANTUM):  # rate 0: one batch
        for i in range(sent, due):
            pack(payload, 0, i)
            send(payload)
        sent = due
    seconds = time.perf_counter() - start
    emit(
        {
            "sent": sent,
            "hellos": hellos,
            "seconds": round(seconds, 6),
            "msgs_per_sec": round(sent / seconds, 1) if seconds > 0 else 0.0,
        }
    )
    control.stop.wait()
    sock.close()
    ctx.term()
    return 0


def sub(spec: dict[str, Any]) -> int:
    count: int = spec["count"]
    idle_timeout: float = spec.get("idle_timeout", 10.0)
    verifier = Verifier(count, spec.get("rss_points"))
    ctx = zmq.Context()
    sock = _socket(ctx, zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.setsockopt(zmq.RCVTIMEO, 250)
    sock.bind(spec["endpoint"])
    say("READY")
    unpack = COUNTER.unpack_from
    recv = sock.recv
    slow = verifier.slow
    at_checkpoint = verifier.at_checkpoint
    done = verifier.done.is_set
    expected = -1
    checkpoint = verifier.checkpoint
    idle_since = time.monotonic()
    while not done():
        try:
            c = unpack(recv(), 0)[0]
        except zmq.Again:
            if time.monotonic() - idle_since >= idle_timeout:
                break
            continue
        if c == expected:
            expected += 1
            if expected == checkpoint:
                checkpoint = at_checkpoint(expected)
                idle_since = time.monotonic()
        else:
            expected = slow(c, expected)
            checkpoint = verifier.checkpoint
            idle_since = time.monotonic()
    result = verifier.result(expected)
    sock.close(linger=0)
    ctx.term()
    emit(result)
    return 0


def ping(spec: dict[str, Any]) -> int:
    from openum.cli._latency import percentiles

    count: int = spec["count"]
    warmup: int = spec["warmup"]
    busy: bool = spec.get("busy", False)
    resend_ms = int(spec.get("resend", 0.1) * 1000)
    timeout_ms = int(spec.get("timeout", 10.0) * 1000)
    ctx = zmq.Context()
    out = _socket(ctx, zmq.PUB)
    out.bind(spec["endpoint_ping"])
    inp = _socket(ctx, zmq.SUB)
    inp.setsockopt(zmq.SUBSCRIBE, b"")
    inp.connect(spec["endpoint_pong"])
    payload = bytearray(spec["size"])
    pack, unpack = COUNTER.pack_into, COUNTER.unpack_from
    send, recv = out.send, inp.recv
    perf_ns = time.perf_counter_ns
    samples: list[int] = []
    sent = received = stale = resends = 0
    ok = True
    start = time.monotonic()
    inp.setsockopt(zmq.RCVTIMEO, resend_ms)
    syncing = True
    for i in range(warmup + count):
        if syncing and i >= warmup and received:
            syncing = False
            inp.setsockopt(zmq.RCVTIMEO, timeout_ms)
        pack(payload, 0, i)
        t0 = perf_ns()
        send(payload)
        sent += 1
        while True:
            try:
                data = _spin(recv, t0, resend_ms if syncing else timeout_ms) if busy else recv()
            except zmq.Again:
                if syncing:
                    resends += 1
                    t0 = perf_ns()
                    send(payload)
                    sent += 1
                    continue
                ok = False
                break
            if unpack(data, 0)[0] == i:
                break
            stale += 1
        if not ok:
            break
        now = perf_ns()
        received += 1
        if i >= warmup:
            samples.append(now - t0)
    seconds = time.monotonic() - start
    out.close(linger=0)
    inp.close(linger=0)
    ctx.term()
    emit(
        {
            "sent": sent,
            "received": received,
            "count": len(samples),
            "warmup": warmup,
            "size": spec["size"],
            "seconds": round(seconds, 6),
            "resends": resends,
            "stale": stale,
            "mode": "busy" if busy else "blocking recv",
            "rtt_us": percentiles(samples),
        }
    )
    return 0 if ok and len(samples) == count else 1


def _spin(recv: Any, t0: int, timeout_ms: int) -> bytes:
    flags = zmq.NOBLOCK
    limit = t0 + timeout_ms * 1_000_000
    perf_ns = time.perf_counter_ns
    while True:
        try:
            data: bytes = recv(flags)
            return data
        except zmq.Again:
            if perf_ns() > limit:
                raise


def pong(spec: dict[str, Any]) -> int:
    busy: bool = spec.get("busy", False)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ctx = zmq.Context()
    inp = _socket(ctx, zmq.SUB)
    inp.setsockopt(zmq.SUBSCRIBE, b"")
    inp.setsockopt(zmq.RCVTIMEO, 200)
    inp.connect(spec["endpoint_ping"])
    out = _socket(ctx, zmq.PUB)
    out.bind(spec["endpoint_pong"])
    say("READY")
    recv, send = inp.recv, out.send
    echoed = 0
    flags = zmq.NOBLOCK if busy else 0
    while not stop.is_set():
        try:
            data = recv(flags)
        except zmq.Again:
            continue
        send(data)
        echoed += 1
    out.close(linger=0)
    inp.close(linger=0)
    ctx.term()
    emit({"echoed": echoed})
    return 0
