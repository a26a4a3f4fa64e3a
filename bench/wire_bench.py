"""Micro-benchmark of the LBMC codec and LBT-TCP framing (PERFORMANCE.md: measured, never asserted).

Encodes and decodes a batch of small LBMC data messages (64-byte payloads by default) through

* the hot path: ``encode_data_into`` into a preallocated buffer, ``decode_data_fast`` over it, and
  ``encode_data_topic_into`` (a TOPICNAME header, as on a source's first message of a topic);
* the record API: ``encode_message(data_message(...))`` and ``decode_messages``;
* LBT-TCP framing: ``StreamDecoder.feed`` over the batch cut into TCP-sized reads.

Reports the median of several timed runs in messages per second, with the machine facts.

    python bench/wire_bench.py [--payload 64] [--batch 64] [--runs 7] [--seconds 0.3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable

from openum.wire.lbmc import (
    data_message,
    decode_data_fast,
    decode_messages,
    encode_data_into,
    encode_data_topic_into,
    encode_message,
    topic_name_block,
)
from openum.wire.lbttcp import StreamDecoder


def _rate(run_batch: Callable[[], int], seconds: float, runs: int) -> float:
    """Median msgs/s over ``runs`` timed runs of about ``seconds`` each (after one warm-up run)."""
    run_batch()
    rates = []
    for _ in range(runs):
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            count += run_batch()
            now = time.perf_counter()
            if now >= deadline:
                break
        rates.append(count / (now - start))
    return statistics.median(rates)


def build_benchmarks(payload_size: int, batch: int, read_size: int) -> dict[str, Callable[[], int]]:
    payload = bytes(range(256)) * (payload_size // 256) + bytes(range(payload_size % 256))
    msg_len = 12 + payload_size
    buf = bytearray(msg_len * batch)
    tidx = 7

    def hot_encode() -> int:
        pos = 0
        for sqn in range(batch):
            pos = encode_data_into(buf, pos, tidx, sqn, payload)
        return batch

    topic_block = topic_name_block("bench/orders/EMEA")
    topic_buf = bytearray((msg_len + len(topic_block)) * batch)

    def hot_encode_topic() -> int:
        pos = 0
        for sqn in range(batch):
            pos = encode_data_topic_into(topic_buf, pos, tidx, sqn, topic_block, payload)
        return batch

    hot_encode()
    encoded = bytes(buf)
    view = memoryview(encoded)

    def hot_decode() -> int:
        pos = 0
        end = len(view)
        total = 0
        while pos < end:
            res = decode_data_fast(view, pos)
            if res is None:  # never here: every message is plain data
                raise RuntimeError("unexpected slow-path message")
            total += len(res[2])
            pos = res[3]
        return batch

    messages = [data_message(tidx, sqn, payload) for sqn in range(batch)]

    def record_encode() -> int:
        out = b"".join([encode_message(data_message(tidx, sqn, payload)) for sqn in range(batch)])
        if len(out) != len(encoded):
            raise RuntimeError("record and hot-path encodings differ in size")
        return batch

    def record_encode_prebuilt() -> int:
        b"".join([encode_message(m) for m in messages])
        return batch

    def record_decode() -> int:
        if len(decode_messages(encoded)) != batch:
            raise RuntimeError("lost messages")
        return batch

    reads = [view[i : i + read_size] for i in range(0, len(view), read_size)]

    def stream_decode() -> int:
        dec = StreamDecoder()
        got = 0
        for chunk in reads:
            got += len(dec.feed(chunk))
        if got != batch:
            raise RuntimeError("lost messages")
        return batch

    return {
        "hot path encode (encode_data_into)": hot_encode,
        "hot path encode + TOPICNAME (encode_data_topic_into)": hot_encode_topic,
        "hot path decode (decode_data_fast)": hot_decode,
        "record encode (data_message + encode_message)": record_encode,
        "record encode (prebuilt records)": record_encode_prebuilt,
        "record decode (decode_messages)": record_decode,
        f"LBT-TCP StreamDecoder.feed ({read_size}-byte reads)": stream_decode,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per message (default 64)")
    parser.add_argument("--batch", type=int, default=64, help="messages per batch buffer (default 64)")
    parser.add_argument("--read-size", type=int, default=1500, help="TCP read size for the stream decoder")
    parser.add_argument("--runs", type=int, default=7, help="timed runs per benchmark; the median is shown")
    parser.add_argument("--seconds", type=float, default=0.3, help="duration of each timed run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()

    results = {
        name: _rate(func, args.seconds, args.runs)
        for name, func in build_benchmarks(args.payload, args.batch, args.read_size).items()
    }
    facts = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "payload_bytes": args.payload,
        "batch": args.batch,
        "runs": args.runs,
    }
    if args.json:
        print(json.dumps({"facts": facts, "msgs_per_s": results}, indent=2, sort_keys=True))
        return
    print(", ".join(f"{k}={v}" for k, v in facts.items()))
    width = max(len(name) for name in results)
    for name, rate in results.items():
        print(f"{name:<{width}}  {rate / 1e6:8.3f} M msgs/s")


if __name__ == "__main__":
    main()
