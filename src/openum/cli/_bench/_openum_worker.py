"""openum publisher and subscriber processes of ``openum bench`` (latency uses ``openum ping``/``pong``)."""

from __future__ import annotations

import time
from typing import Any

from openum.cli._bench._common import (
    COUNTER,
    HELLO,
    HELLO_INTERVAL,
    PACING_QUANTUM,
    Control,
    Verifier,
    emit,
    rss_bytes,
    say,
)
from openum.cli._pacing import paced_batches

__all__ = ["pub", "sub"]

#: Messages acquired before each ``buffs_complete`` (LBT-SMX's batching by several acquires, 6.5.2).
SMX_BATCH = 64


def _context(spec: dict[str, Any]) -> Any:
    from openum._context import Context
    from openum.config import default_config

    config = default_config().copy()
    for path in spec.get("config_files", []):
        config.load_file(path)
    config.set_options(spec.get("options", []), source="openum bench")
    return Context(config)


def pub(spec: dict[str, Any]) -> int:
    from openum._source import SendFlags

    control = Control()
    count: int = spec["count"]
    size: int = spec["size"]
    rate: float = spec.get("rate", 0.0)
    with _context(spec) as ctx:
        src = ctx.create_source(spec["topic"], {"transport": spec["transport"]})
        hello = bytearray(size)
        COUNTER.pack_into(hello, 0, HELLO)
        hellos = 0
        while not control.go.wait(HELLO_INTERVAL):
            src.send(hello, SendFlags.FLUSH)
            hellos += 1
        if control.stop.is_set():
            src.close()
            return 1
        payload = bytearray(size)
        pack = COUNTER.pack_into
        send = src.send
        none = SendFlags.NONE
        sent = 0
        start = time.perf_counter()
        # Unpaced (rate 0): one batch of everything.  Paced: intelligent batching, flushed when caught up
        # with the rate, full datagrams while behind.  The last batch is flushed below.
        if spec["transport"] == "lbtsmx" and not rate:
            # LBT-SMX's zero-copy API (UM Concepts Guide 6.5.2): messages written in place in the ring,
            # published a batch at a time.
            acquire, complete = src.buff_acquire, src.buffs_complete
            while sent < count:
                end = min(count, sent + SMX_BATCH)
                for i in range(sent, end):
                    pack(acquire(size), 0, i)
                complete()
                sent = end
        for due in paced_batches(count - sent, rate, src.flush, start=start, quantum=PACING_QUANTUM):
            for i in range(sent, due):
                pack(payload, 0, i)
                send(payload, none)
            sent = due
        src.flush()
        seconds = time.perf_counter() - start
        stats = src.statistics()
        emit(
            {
                "sent": sent,
                "hellos": hellos,
                "seconds": round(seconds, 6),
                "msgs_per_sec": round(sent / seconds, 1) if seconds > 0 else 0.0,
                "source": src.source_string,
                "statistics": _plain(stats),
            }
        )
        control.stop.wait()
        src.close()
    return 0


def sub(spec: dict[str, Any]) -> int:
    from openum._message import MsgType

    count: int = spec["count"]
    verifier = Verifier(count, spec.get("rss_points"))
    unpack = COUNTER.unpack_from
    slow = verifier.slow
    at_checkpoint = verifier.at_checkpoint
    expected = -1
    checkpoint = verifier.checkpoint
    losses = [0, 0]  # UNRECOVERABLE_LOSS, UNRECOVERABLE_LOSS_BURST events
    data_type = MsgType.DATA
    loss_type, burst_type = MsgType.UNRECOVERABLE_LOSS, MsgType.UNRECOVERABLE_LOSS_BURST

    def on_message(msg: Any) -> None:
        nonlocal expected, checkpoint
        kind = msg.type
        if kind is data_type:
            c = unpack(msg.data, 0)[0]
            if c == expected:
                expected += 1
                if expected == checkpoint:
                    checkpoint = at_checkpoint(expected)
            else:
                expected = slow(c, expected)
                checkpoint = verifier.checkpoint
        elif kind is loss_type:
            losses[0] += 1
        elif kind is burst_type:
            losses[1] += 1

    with _context(spec) as ctx:
        rcv = ctx.create_receiver(spec["topic"], on_message)
        verifier.rss["subscribed"] = rss_bytes()
        say("READY")
        verifier.wait(spec.get("idle_timeout", 10.0), lambda: expected)
        rcv.close()
    emit(
        verifier.result(
            expected,
            unrecoverable_loss=losses[0],
            unrecoverable_loss_burst=losses[1],
        )
    )
    return 0


def _plain(stats: Any) -> dict[str, Any]:
    """A statistics snapshot as a JSON-able dict (whatever shape the transport's snapshot has)."""
    if hasattr(stats, "_asdict"):
        items = stats._asdict().items()
    elif hasattr(stats, "__dataclass_fields__"):
        items = ((k, getattr(stats, k)) for k in stats.__dataclass_fields__)
    elif isinstance(stats, dict):
        items = stats.items()
    else:
        return {}
    return {k: v for k, v in items if isinstance(v, int | float | str)}
