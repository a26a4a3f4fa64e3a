"""End-to-end throughput of one transport, publisher -> subscriber in two processes (PERFORMANCE.md).

A small, dependency-free driver for the profiling pass: the subscriber's callback does the least a real
application does (read the 8-byte counter, check it is the next one), so what is measured is openum's
receive path.  ``openum bench`` is the full side-by-side comparison; this script exists to profile one
side at a time::

    python bench/e2e_bench.py [--transport tcp|lbtrm|lbtru] [--count 1000000] [--size 64] [--runs 3]
    python bench/e2e_bench.py --profile-sub 'py-spy record -r 400 -o sub.svg --'   # profile the receiver
    python bench/e2e_bench.py --profile-pub 'py-spy record -r 400 -o pub.svg --'   # ... or the sender

Each run uses a fresh block of ports on 127.0.0.1 (resolver, TCP, LBT-RU and LBT-RM ports).  LBT-RM
and LBT-RU run with ``transport_*_data_rate_limit`` raised to 1 Gbit/s (UM's default, 10 Mbit/s, would
be what is measured otherwise).  The subscriber reports msgs/s from its first to its last message and
whether every counter arrived in order; the publisher reports its own send rate.  Medians over
``--runs``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any

COUNTER = struct.Struct(">Q")
HELLO = (1 << 64) - 1


def _options(base: int) -> list[str]:
    """Options that keep one run's traffic on its own ports (``base`` .. ``base + 15``)."""
    return [
        f"context resolver_multicast_port {base}",
        f"context transport_tcp_port_low {base + 1}",
        f"context transport_tcp_port_high {base + 4}",
        f"context transport_lbtru_port_low {base + 5}",
        f"context transport_lbtru_port_high {base + 6}",
        f"receiver transport_lbtru_port_low {base + 7}",
        f"receiver transport_lbtru_port_high {base + 8}",
        f"context transport_lbtrm_source_port_low {base + 9}",
        f"context transport_lbtrm_source_port_high {base + 10}",
        f"source transport_lbtrm_destination_port {base + 11}",
        "context transport_lbtrm_data_rate_limit 1000000000",
        "context transport_lbtru_data_rate_limit 1000000000",
    ]


def _free_ports() -> int:
    """The first of 16 consecutive ports free for both TCP and UDP on 127.0.0.1."""
    rng = random.Random()
    while True:
        base = rng.randrange(20000, 31000)
        ok = True
        for port in range(base, base + 16):
            for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
                with socket.socket(socket.AF_INET, kind) as s:
                    try:
                        s.bind(("127.0.0.1", port))
                    except OSError:
                        ok = False
        if ok:
            return base


def run_sub(options: list[str], count: int) -> None:
    import openum

    done = threading.Event()
    state = {"next": 0, "bad": 0, "first": 0.0, "last": 0.0}
    unpack = COUNTER.unpack_from
    data_type = openum.MsgType.DATA
    expected = 0
    bad = 0
    first = 0.0

    def on_message(msg: Any) -> None:
        nonlocal expected, bad, first
        if msg.type is not data_type:
            return
        c = unpack(msg.data, 0)[0]
        if c == HELLO:
            if not state["first"]:
                state["first"] = 1.0
                print("SYNCED", flush=True)
            return
        if c == 0:
            first = time.perf_counter()
        if c != expected:
            bad += 1
        expected = c + 1
        if expected == count:
            state["last"] = time.perf_counter()
            done.set()

    with openum.Context(options=options) as ctx:
        rcv = ctx.create_receiver("bench/e2e", on_message)
        print("READY", flush=True)
        done.wait(120)
        rcv.close()
    seconds = state["last"] - first
    print(
        json.dumps({"received": expected, "out_of_order": bad, "msgs_per_sec": round(count / seconds, 1)}),
        flush=True,
    )


def run_pub(options: list[str], count: int, size: int, transport: str) -> None:
    import openum

    with openum.Context(options=options) as ctx:
        src = ctx.create_source("bench/e2e", {"transport": transport})
        hello = bytearray(size)
        COUNTER.pack_into(hello, 0, HELLO)
        go = threading.Event()
        threading.Thread(target=lambda: (sys.stdin.readline(), go.set()), daemon=True).start()
        while not go.wait(0.01):
            src.send(hello, openum.SendFlags.FLUSH)
        payload = bytearray(size)
        pack = COUNTER.pack_into
        send = src.send
        start = time.perf_counter()
        for i in range(count):
            pack(payload, 0, i)
            send(payload)
        src.flush()
        seconds = time.perf_counter() - start
        print(json.dumps({"sent": count, "msgs_per_sec": round(count / seconds, 1)}), flush=True)
        sys.stdin.readline()  # the harness says when the subscriber is done
        src.close()


def _line(stream: Any, prefix: str) -> str:
    """The next line starting with ``prefix`` (profilers print their own lines on stdout)."""
    while True:
        line = stream.readline()
        if not line:
            raise SystemExit(f"a bench process ended before it said {prefix!r}")
        if line.startswith(prefix):
            return line.strip()


def one_run(args: argparse.Namespace) -> dict[str, Any]:
    opts = json.dumps(_options(_free_ports()))
    me = [sys.executable, os.path.abspath(__file__)]
    sub_cmd = [*shlex.split(args.profile_sub), *me, "--role", "sub", "--opts", opts]
    sub_cmd += ["--count", str(args.count)]
    pub_cmd = [*shlex.split(args.profile_pub), *me, "--role", "pub", "--opts", opts]
    pub_cmd += ["--count", str(args.count), "--size", str(args.size), "--transport", args.transport]
    sub = subprocess.Popen(sub_cmd, stdout=subprocess.PIPE, text=True)
    assert sub.stdout is not None
    _line(sub.stdout, "READY")
    pub = subprocess.Popen(pub_cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert pub.stdin is not None
    assert pub.stdout is not None
    _line(sub.stdout, "SYNCED")
    pub.stdin.write("GO\n")
    pub.stdin.flush()
    sent = json.loads(_line(pub.stdout, "{"))
    got = json.loads(_line(sub.stdout, "{"))
    pub.stdin.write("STOP\n")
    pub.stdin.flush()
    sub.wait(60)
    pub.wait(60)
    return {"sub": got, "pub": sent}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--role", choices=("sub", "pub"))
    parser.add_argument("--opts", default="[]")
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--transport", default="tcp", help="openum transport (tcp, lbtrm, lbtru)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile-sub", default="", help="command prefix for the subscriber (py-spy ...)")
    parser.add_argument("--profile-pub", default="", help="command prefix for the publisher")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.role == "sub":
        run_sub(json.loads(args.opts), args.count)
        return
    if args.role == "pub":
        run_pub(json.loads(args.opts), args.count, args.size, args.transport)
        return
    runs = [one_run(args) for _ in range(args.runs)]
    result = {
        "transport": args.transport,
        "count": args.count,
        "size": args.size,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "sub_msgs_per_sec": statistics.median(r["sub"]["msgs_per_sec"] for r in runs),
        "pub_msgs_per_sec": statistics.median(r["pub"]["msgs_per_sec"] for r in runs),
        "out_of_order": sum(r["sub"]["out_of_order"] for r in runs),
        "runs": runs,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"{args.transport}: {args.count} x {args.size} B, median of {args.runs}: subscriber "
            f"{result['sub_msgs_per_sec']:,.0f} msgs/s, publisher {result['pub_msgs_per_sec']:,.0f} msgs/s, "
            f"out of order {result['out_of_order']}"
        )


if __name__ == "__main__":
    main()
