"""zenoh-python peer processes of ``openum bench``: put / subscriber over TCP on 127.0.0.1.

Both sessions run in peer mode with scouting (multicast and gossip) disabled and explicit endpoints:
the subscriber (or pong) listens on ``tcp/127.0.0.1:PORT``, the publisher (or ping) connects to it.
Publishers use ``CongestionControl.BLOCK`` (the default, DROP, would lose messages when the
subscriber falls behind; the bench counts every message).  Throughput publishers batch
(``express=False``); ping/pong publishers send at once (``express=True``).  Subscribers take samples in
a callback on zenoh's thread; the ping's callback sends the next ping itself, like ``openum ping``'s
default mode.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import zenoh

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

KEY = "openum/bench"


def _session(listen: str | None, connect: str | None) -> Any:
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    conf.insert_json5("listen/endpoints", f'["{listen}"]' if listen else "[]")
    conf.insert_json5("connect/endpoints", f'["{connect}"]' if connect else "[]")
    return zenoh.open(conf)


def _endpoint(port: int) -> str:
    return f"tcp/127.0.0.1:{port}"


def pub(spec: dict[str, Any]) -> int:
    control = Control()
    count: int = spec["count"]
    size: int = spec["size"]
    rate: float = spec.get("rate", 0.0)
    session = _session(None, _endpoint(spec["port"]))
    publisher = session.declare_publisher(
        KEY, congestion_control=zenoh.CongestionControl.BLOCK, express=False
    )
    hello = bytearray(size)
    COUNTER.pack_into(hello, 0, HELLO)
    hellos = 0
    while not control.go.wait(HELLO_INTERVAL):
        publisher.put(bytes(hello))
        hellos += 1
    pack = COUNTER.pack
    pad = bytes(size - 8)
    put = publisher.put
    sent = 0
    start = time.perf_counter()
    for due in paced_batches(count, rate, None, start=start, quantum=PACING_QUANTUM):  # rate 0: one batch
        for i in range(sent, due):
            put(pack(i) + pad)
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
    publisher.undeclare()
    session.close()
    return 0


def sub(spec: dict[str, Any]) -> int:
    count: int = spec["count"]
    verifier = Verifier(count, spec.get("rss_points"))
    unpack = COUNTER.unpack_from
    slow = verifier.slow
    at_checkpoint = verifier.at_checkpoint
    expected = -1
    checkpoint = verifier.checkpoint

    def on_sample(sample: Any) -> None:
        nonlocal expected, checkpoint
        c = unpack(sample.payload.to_bytes(), 0)[0]
        if c == expected:
            expected += 1
            if expected == checkpoint:
                checkpoint = at_checkpoint(expected)
        else:
            expected = slow(c, expected)
            checkpoint = verifier.checkpoint

    session = _session(_endpoint(spec["port"]), None)
    subscriber = session.declare_subscriber(KEY, on_sample)
    say("READY")
    verifier.wait(spec.get("idle_timeout", 10.0), lambda: expected)
    result = verifier.result(expected)
    subscriber.undeclare()
    session.close()
    emit(result)
    return 0


class _Src:
    """Lets ``openum ping``'s pinger send through a zenoh publisher."""

    def __init__(self, publisher: Any) -> None:
        self.put = publisher.put

    def send(self, payload: bytearray, _flags: int) -> None:
        self.put(bytes(payload))


class _Msg:
    __slots__ = ("data", "type")

    def __init__(self, data: bytes) -> None:
        from openum._message import MsgType

        self.type = MsgType.DATA
        self.data = data


def ping(spec: dict[str, Any]) -> int:
    import argparse

    from openum.cli._latency import _ping_callback, _Pinger, percentiles

    args = argparse.Namespace(
        count=spec["count"],
        warmup=spec["warmup"],
        size=spec["size"],
        resend=spec.get("resend", 0.1),
        timeout=spec.get("timeout", 10.0),
    )
    session = _session(None, _endpoint(spec["port"]))
    publisher = session.declare_publisher(
        f"{KEY}/ping", congestion_control=zenoh.CongestionControl.BLOCK, express=True
    )
    pinger = _Pinger(_Src(publisher), args, send_from_callback=True)
    on_message: Any = pinger.on_message  # takes the duck-typed _Msg

    def on_sample(sample: Any) -> None:
        on_message(_Msg(sample.payload.to_bytes()))

    subscriber = session.declare_subscriber(f"{KEY}/pong", on_sample)
    start = time.monotonic()
    ok = _ping_callback(pinger, args, threading.Event())
    seconds = time.monotonic() - start
    subscriber.undeclare()
    publisher.undeclare()
    session.close()
    emit(
        {
            "sent": pinger.sent,
            "received": pinger.received,
            "count": len(pinger.samples),
            "warmup": args.warmup,
            "size": args.size,
            "seconds": round(seconds, 6),
            "resends": pinger.resends,
            "stale": pinger.stale,
            "mode": "callback",
            "rtt_us": percentiles(pinger.samples),
        }
    )
    return 0 if ok and len(pinger.samples) == args.count else 1


def pong(spec: dict[str, Any]) -> int:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    session = _session(_endpoint(spec["port"]), None)
    publisher = session.declare_publisher(
        f"{KEY}/pong", congestion_control=zenoh.CongestionControl.BLOCK, express=True
    )
    put = publisher.put
    echoed = [0]

    def on_sample(sample: Any) -> None:
        put(sample.payload)
        echoed[0] += 1

    subscriber = session.declare_subscriber(f"{KEY}/ping", on_sample)
    say("READY")
    stop.wait()  # asleep until SIGTERM, out of the round trips' way (as openum pong)
    subscriber.undeclare()
    publisher.undeclare()
    session.close()
    emit({"echoed": echoed[0]})
    return 0
