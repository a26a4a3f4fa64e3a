"""In-process benchmark of the TCP transport's send and receive hot paths (PERFORMANCE.md: profile first).

One process, one thread, real sockets on 127.0.0.1, no topic resolution traffic on the measured path and
no scheduler in the loop, so the numbers are repeatable and ``valgrind --tool=callgrind`` gives stable
instruction counts:

* ``receive``: a sequential-mode context with one receiver is joined to a plain listening socket that
  plays the source; the bench writes a pre-encoded LBT-TCP stream (64-byte messages, batched as a
  source batches them) into the connection in 64 KiB chunks and drives ``ctx.process_events(0)`` until
  the receiver callback (read the counter, check it is the next one) has seen every message: socket
  read, stream framing, LBMC decode, demultiplexing, delivery controller, ``Message``, callback.
  ``receive --transport lbtrm``: the same over LBT-RM: a plain socket plays the source and sends its
  datagrams (26 messages of 64 bytes each, as a source's 2 KB implicit batch holds them) to the group
  on the loopback interface; the receiver adds the group socket's reads and the LBT-RM engine.
* ``send``: ``Source.send(payload)`` on a TCP source with one connected plain socket as its receiver,
  drained after every 1000 sends: flags, flow control, batching, encoding, the socket writes.
* ``echo``: one round at a time through both paths (a plain socket plays the remote source and
  receiver): the TCP part of a round trip, per event-loop iteration.
* ``roundtrip``: a whole openum round trip on any transport (``--transport tcp|lbtru|lbtrm``) in one
  thread: two sequential-mode contexts, ping and pong, each waiting in ``process_events`` until its
  callback unblocks it (no spinning).  Both hops' Python and system calls, without process switches:
  what the reliability engines add to a round trip shows here first.  Rounds per second.

    python bench/hotpath_bench.py [receive|send|echo|roundtrip|both] [--count 200000] [--size 64]
                                  [--runs 5] [--transport tcp|lbtru|lbtrm] [--json]
    valgrind --tool=callgrind --callgrind-out-file=cg.out python bench/hotpath_bench.py receive --runs 1

Results are messages per second (median of ``--runs`` after one warm-up run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import statistics
import struct
import sys
import time
from typing import Any

import openum
from openum.wire import lbtrm
from openum.wire.lbmc import encode_data_into
from openum.wire.lbmr import LbtrmTransport, TcpTransport, TopicInfo
from openum.wire.lbttcp import session_id_message

COUNTER = struct.Struct(">Q")
TOPIC = "bench/hotpath"
CHUNK = 64 * 1024
BATCH = 2048  # implicit_batching_minimum_length's default: how a source groups messages


def _options() -> list[str]:
    port = random.Random().randrange(20000, 31000)
    return [
        "context operational_mode sequential",
        f"context resolver_multicast_port {port}",
        f"context transport_tcp_port_low {port + 1}",
        f"context transport_tcp_port_high {port + 8}",
    ]


def _stream(count: int, size: int, topic_index: int) -> bytes:
    """``count`` data messages (sqn = counter = 0..count-1) as a source would write them."""
    out = bytearray()
    buf = bytearray(CHUNK)
    used = 0
    payload = bytearray(size)
    for i in range(count):
        COUNTER.pack_into(payload, 0, i)
        if used + 12 + size > BATCH and used:
            out += buf[:used]
            used = 0
        used = encode_data_into(buf, used, topic_index, i, bytes(payload))
    out += buf[:used]
    return bytes(out)


class _CountingReceiver:
    """A sequential-mode context with one receiver whose callback checks that the counters (0, 1, ...)
    arrive in order: ``expected`` is the next one, ``bad`` counts the others."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.expected = 0
        self.bad = 0
        self.ctx = openum.Context(options=_options())
        unpack = COUNTER.unpack_from
        data_type = openum.MsgType.DATA

        def on_message(msg: Any) -> None:
            if msg.type is data_type:
                c = unpack(msg.data, 0)[0]
                if c != self.expected:
                    self.bad += 1
                self.expected = c + 1

        self.rcv = self.ctx.create_receiver(TOPIC, on_message)

    def _check(self, what: str) -> None:
        if self.expected != self.count or self.bad:
            raise SystemExit(f"{what}: got {self.expected}/{self.count}, {self.bad} out of order")


class ReceiveBench(_CountingReceiver):
    """A receiver joined to a socket we write into."""

    def __init__(self, count: int, size: int) -> None:
        super().__init__(count)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.session_id = 0x5EED
        self.stream = _stream(count, size, 1)
        self.conn: socket.socket | None = None

    def _connect(self) -> None:
        """A fresh connection (a new 'source') for each run, so the delivery controller starts clean."""
        if self.conn is not None:
            self.conn.close()
            self.ctx.process_events(0)
        port = self.listener.getsockname()[1]
        self.session_id += 1
        info = TopicInfo(TOPIC, 1, TcpTransport("127.0.0.1", port, self.session_id))
        self.ctx.process_events(0)
        self.rcv._source_found(info, f"TCP:127.0.0.1:{port}:{self.session_id:08x}[1]")
        self.conn, _ = self.listener.accept()
        self.conn.setblocking(False)
        hello = b""
        while len(hello) < 12:  # the receiver's session-id message
            self.ctx.process_events(1)
            try:
                hello += self.conn.recv(64)
            except BlockingIOError:
                pass
        self.conn.setblocking(True)
        self.conn.sendall(session_id_message(self.session_id))

    def run(self) -> float:
        self._connect()
        assert self.conn is not None
        self.expected = 0
        stream = memoryview(self.stream)
        process = self.ctx.process_events
        start = time.perf_counter()
        for offset in range(0, len(stream), CHUNK):
            chunk = stream[offset : offset + CHUNK]
            self.conn.sendall(chunk)
            # Process events until the receiver has read everything written so far.
            while self.ctx._subscriptions.sessions and self._pending(offset + len(chunk)):
                process(0)
        seconds = time.perf_counter() - start
        self._check("receive bench")
        return self.count / seconds

    def _pending(self, written: int) -> bool:
        session = next(iter(self.ctx._subscriptions.sessions.values()))
        return session.statistics().bytes_rcved < written + 12

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.rcv.close()
        self.ctx.process_events(0)
        self.ctx.close()
        self.listener.close()


def _rm_datagrams(count: int, size: int, topic_index: int, session_id: int, port: int) -> list[bytes]:
    """``count`` data messages as an LBT-RM source sends them: 20-byte DATA header (sqn 0, 1, ...) and
    as many LBMC messages as the 2 KB implicit batch holds (26 of 64 bytes)."""
    out = []
    buf = bytearray(lbtrm.DATA_HEADER_LEN + BATCH)
    used = 0
    payload = bytearray(size)
    for i in range(count):
        COUNTER.pack_into(payload, 0, i)
        if used and used + 12 + size > BATCH:
            out.append(bytes(buf[: lbtrm.DATA_HEADER_LEN + used]))
            used = 0
        if not used:
            lbtrm.encode_data_into(buf, 0, len(out), 0, ucast_port=port, session_id=session_id)
        used = encode_data_into(buf, lbtrm.DATA_HEADER_LEN + used, topic_index, i, bytes(payload))
        used -= lbtrm.DATA_HEADER_LEN
    out.append(bytes(buf[: lbtrm.DATA_HEADER_LEN + used]))
    return out


class RmReceiveBench(_CountingReceiver):
    """``receive --transport lbtrm``: a receiver joined to an LBT-RM session that a plain socket plays.

    The bench sends the session's datagrams to the group on the loopback interface, a window of them
    at a time (well inside the socket buffer, so none is lost), and drives ``ctx.process_events(0)``
    until the callback has seen each window: the group socket's reads, the LBT-RM engine's in-order
    check, then the same demultiplexing and delivery as TCP's receive path.
    """

    WINDOW = 64  # datagrams written before the receiver reads them (about 280 KB of socket buffer)

    def __init__(self, count: int, size: int) -> None:
        super().__init__(count)
        self.size = size
        self.per_datagram = max(1, BATCH // (12 + size))
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        rng = random.Random()
        self.group = (f"239.193.77.{rng.randrange(1, 250)}", rng.randrange(31000, 32000))
        self.session_id = 0x5EED
        self.info: TopicInfo | None = None

    def _join(self) -> list[bytes]:
        """A new session for each run, so the engine and the delivery controller start clean."""
        if self.info is not None:
            self.rcv._source_gone(self.info, "")
            self.ctx.process_events(0)
        self.session_id += 1
        port = self.sock.getsockname()[1]
        self.info = TopicInfo(
            TOPIC, 1, LbtrmTransport("127.0.0.1", self.group[0], self.session_id, self.group[1], port)
        )
        text = f"LBTRM:127.0.0.1:{port}:{self.session_id:08x}:{self.group[0]}:{self.group[1]}[1]"
        self.rcv._source_found(self.info, text)
        self.ctx.process_events(0)
        return _rm_datagrams(self.count, self.size, 1, self.session_id, port)

    def run(self) -> float:
        datagrams = self._join()
        self.expected = 0
        process = self.ctx.process_events
        sendto = self.sock.sendto
        group = self.group
        start = time.perf_counter()
        for first in range(0, len(datagrams), self.WINDOW):
            window = datagrams[first : first + self.WINDOW]
            for datagram in window:
                sendto(datagram, group)
            want = min(self.count, (first + len(window)) * self.per_datagram)
            deadline = time.monotonic() + 10
            while self.expected < want:
                process(0)
                if time.monotonic() > deadline:
                    raise SystemExit(f"receive bench (lbtrm): stuck at {self.expected}/{want} messages")
        seconds = time.perf_counter() - start
        self._check("receive bench (lbtrm)")
        return self.count / seconds

    def close(self) -> None:
        self.rcv.close()
        self.ctx.process_events(0)
        self.ctx.close()
        self.sock.close()


class SendBench:
    """A TCP source with one plain socket connected as its receiver."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.size = size
        self.ctx = openum.Context(options=_options())
        self.src = self.ctx.create_source(TOPIC)
        session = self.src.session
        self.peer = socket.create_connection(("127.0.0.1", session.port))
        self.peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.peer.sendall(session_id_message(session.session_id))  # a receiver once it presents the id
        self.peer.setblocking(False)
        while not session.clients:
            self.ctx.process_events(1)

    def _drain(self) -> None:
        try:
            while self.peer.recv(1 << 20):
                pass
        except BlockingIOError:
            pass

    def run(self) -> float:
        payload = bytearray(self.size)
        pack = COUNTER.pack_into
        send = self.src.send
        drain = self._drain
        start = time.perf_counter()
        for i in range(self.count):
            pack(payload, 0, i)
            send(payload)
            if not i % 1000:
                drain()
        self.src.flush()
        seconds = time.perf_counter() - start
        drain()
        return self.count / seconds

    def close(self) -> None:
        self.peer.close()
        self.src.close()
        self.ctx.close()


class EchoBench:
    """One round trip at a time through both paths, as ``openum pong`` does it: a message arrives on
    the receiver (written by a plain socket playing the remote source), the callback echoes it with
    ``send(FLUSH | NONBLOCK)`` on a source, and a plain socket (the remote receiver) reads the echo.
    Per round: two event-loop iterations' worth of work, one read, one delivery, one flushed send."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.rx = ReceiveBench(1, size)  # its context gets the source too
        ctx = self.rx.ctx
        self.src = ctx.create_source(TOPIC + "/echo")
        self.peer = socket.create_connection(("127.0.0.1", self.src.session.port))
        self.peer.sendall(session_id_message(self.src.session.session_id))  # a receiver once it presents it
        while not self.src.session.clients:
            ctx.process_events(1)
        self.peer.recv(64)  # the session-id message
        payload = bytearray(size)
        self.frames = []
        for i in range(count):
            COUNTER.pack_into(payload, 0, i)
            buf = bytearray(12 + size)
            encode_data_into(buf, 0, 1, i, bytes(payload))
            self.frames.append(bytes(buf))
        flags = openum.SendFlags.FLUSH | openum.SendFlags.NONBLOCK
        send = self.src.send
        self.echoed = 0

        def on_message(msg: Any) -> None:
            if msg.type is openum.MsgType.DATA:
                send(msg.data, flags)
                self.echoed += 1

        self.rx.rcv.callback = on_message

    def run(self) -> float:
        self.rx._connect()
        conn = self.rx.conn
        assert conn is not None
        process = self.rx.ctx.process_events
        recv = self.peer.recv
        want = len(self.frames[0])
        self.echoed = 0
        start = time.perf_counter()
        for frame in self.frames:
            conn.sendall(frame)
            before = self.echoed
            while self.echoed == before:
                process(0)
            got = 0
            while got < want:
                got += len(recv(want - got))
        seconds = time.perf_counter() - start
        return self.count / seconds

    def close(self) -> None:
        self.peer.close()
        self.src.close()
        self.rx.close()


class RoundTripBench:
    """Ping and pong as two sequential-mode contexts driven by one thread (see the module docstring)."""

    def __init__(self, count: int, size: int, transport: str = "tcp") -> None:
        self.count = count
        options = [
            *_options(),
            f"source transport {transport}",
            # The UDP transports' default rate limit (10 Mbit/s) is not what is measured here.
            "context transport_lbtrm_data_rate_limit 1000000000",
            "context transport_lbtru_data_rate_limit 1000000000",
        ]
        self.ping_ctx = openum.Context(options=options)
        # The pong's LBT-RM source on its own group, as openum bench does: on one group each context
        # would also read its own datagrams back through multicast loopback.
        self.pong_ctx = openum.Context(
            options=[*options, "source transport_lbtrm_multicast_address 224.10.10.11"]
        )
        self.ping_src = self.ping_ctx.create_source(TOPIC + "/ping")
        self.pong_src = self.pong_ctx.create_source(TOPIC + "/pong")
        flags = openum.SendFlags.FLUSH | openum.SendFlags.NONBLOCK
        data_type = openum.MsgType.DATA
        self.flags = flags
        self.rounds = 0
        pong_send, pong_unblock = self.pong_src.send, self.pong_ctx.unblock
        ping_unblock = self.ping_ctx.unblock

        def on_ping(msg: Any) -> None:
            if msg.type is data_type:
                pong_send(msg.data, flags)
                pong_unblock()

        def on_pong(msg: Any) -> None:
            if msg.type is data_type:
                self.rounds += 1
                ping_unblock()

        self.pong_rcv = self.pong_ctx.create_receiver(TOPIC + "/ping", on_ping)
        self.ping_rcv = self.ping_ctx.create_receiver(TOPIC + "/pong", on_pong)
        self.payload = bytes(size)
        # Topic resolution and the transports' connection setup: ping until an echo comes back.
        deadline = time.monotonic() + 10
        while not self.rounds:
            if time.monotonic() > deadline:
                raise SystemExit(f"roundtrip bench: no echo over {transport} within 10 s")
            self.ping_src.send(self.payload, flags)
            for _ in range(10):
                self.ping_ctx.process_events(2)
                self.pong_ctx.process_events(2)

    def run(self) -> float:
        send, payload, flags = self.ping_src.send, self.payload, self.flags
        ping, pong = self.ping_ctx.process_events, self.pong_ctx.process_events
        start_rounds = self.rounds
        start = time.perf_counter()
        for _ in range(self.count):
            send(payload, flags)
            pong(100)  # returns when the pong's callback has echoed (unblock), or after 100 ms
            ping(100)
        seconds = time.perf_counter() - start
        done = self.rounds - start_rounds
        if done != self.count:
            raise SystemExit(
                f"roundtrip bench: {done} of {self.count} rounds completed (a message was lost?)"
            )
        return self.count / seconds

    def close(self) -> None:
        for obj in (self.ping_rcv, self.pong_rcv, self.ping_src, self.pong_src):
            obj.close()
        for ctx in (self.ping_ctx, self.pong_ctx):
            ctx.process_events(0)
            ctx.close()


def _measure(bench: Any, runs: int) -> list[float]:
    bench.run()  # warm-up: caches, struct formats, first-message paths
    return [bench.run() for _ in range(runs)]


BENCHES: dict[str, Any] = {
    "receive": ReceiveBench,
    "send": SendBench,
    "echo": EchoBench,
    "roundtrip": RoundTripBench,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "which", nargs="?", choices=("receive", "send", "echo", "roundtrip", "both"), default="both"
    )
    parser.add_argument(
        "--count", type=int, default=None, help="messages per run (200000; rounds for echo/roundtrip: 20000)"
    )
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--transport",
        choices=("tcp", "lbtru", "lbtrm"),
        default="tcp",
        help="roundtrip: any; receive: tcp or lbtrm; send, echo: tcp",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.count is None:
        args.count = 20_000 if args.which in ("echo", "roundtrip") else 200_000
    result: dict[str, Any] = {
        "count": args.count,
        "size": args.size,
        "runs": args.runs,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    kinds = ("receive", "send") if args.which == "both" else (args.which,)
    allowed = {"roundtrip": ("tcp", "lbtru", "lbtrm"), "receive": ("tcp", "lbtrm")}
    for kind in kinds:
        if args.transport not in allowed.get(kind, ("tcp",)):
            parser.error(
                f"{kind} runs over {' or '.join(allowed.get(kind, ('tcp',)))}, not {args.transport}"
                + (" (an LBT-RU receiver needs a source that answers it)" if kind == "receive" else "")
            )
    for kind in kinds:
        if kind == "roundtrip":
            bench = RoundTripBench(args.count, args.size, args.transport)
            result["transport"] = args.transport
        elif kind == "receive" and args.transport == "lbtrm":
            bench = RmReceiveBench(args.count, args.size)
            result["transport"] = args.transport
        else:
            bench = BENCHES[kind](args.count, args.size)
        try:
            rates = _measure(bench, args.runs)
        finally:
            bench.close()
        result[kind] = {
            "median_msgs_per_sec": round(statistics.median(rates)),
            "all": [round(r) for r in rates],
        }
    if args.json:
        print(json.dumps(result))
        return
    for kind in kinds:
        r = result[kind]
        runs = ", ".join(f"{x:,}" for x in r["all"])
        if kind in ("echo", "roundtrip"):
            rate = r["median_msgs_per_sec"]
            where = f" over {args.transport}" if kind == "roundtrip" else ""
            print(f"{kind:8s} {rate:>10,} rounds/s = {1e6 / rate:.1f} us per round{where}  (runs: {runs})")
        else:
            print(f"{kind:8s} {r['median_msgs_per_sec']:>10,} msgs/s  (runs: {runs})")


if __name__ == "__main__":
    sys.exit(main())
