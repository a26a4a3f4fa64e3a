"""``openum ping`` and ``openum pong``: round-trip latency (like UM's lbmlatping / lbmlatpong; CLI.md).

``pong TOPIC_PING TOPIC_PONG`` receives on TOPIC_PING and echoes every message on its source for
TOPIC_PONG.  ``ping TOPIC_PING TOPIC_PONG`` sends a message (an 8-byte big-endian counter padded to
``--size``) with ``SendFlags.FLUSH``, waits for its echo, records the round trip with
``time.perf_counter_ns`` and sends the next one; after ``--warmup`` discarded round trips it records
``--count`` of them and reports min/p50/p90/p99/p99.9/max in microseconds (exact percentiles of the
sorted samples, nearest rank).

How the echo reaches the pinging code (``--mode``):

* ``callback`` (default, the lowest latency without spinning): the receive callback, on the context
  thread, takes the round-trip time and sends the next ping itself (``SendFlags.NONBLOCK | FLUSH``).
  No thread hand-off is on the measured path. The main thread resends late pings during the warm-up
  (it wakes every 50 ms for that); ``HANDOFF_MARGIN`` pings before the warm-up ends the callback leaves
  one send to it, and from then on it sleeps until the run ends, waking only once per ``--timeout``
  seconds to check for progress (``main_wakeups`` in the summary counts those wake-ups): no other
  thread of the process runs among the measured round trips (docs/performance.md, pass 13).
* ``thread``: the receive callback sets a ``threading.Event`` that the main thread waits on; the main
  thread takes the time and sends the next ping.  This measures what an application pays for the
  hand-off from the context thread to its own thread (a GIL hand-over and a futex wake-up).
* ``--busy`` (with either mode's bookkeeping, callback-driven): the context runs in
  ``operational_mode sequential`` and the main thread spins on ``process_events(0)`` (a zero-timeout
  ``select``), so no thread ever sleeps: the lowest latency at the cost of a whole CPU.

During the warm-up a ping whose echo has not come back within ``--resend`` seconds is sent again (the
first pings go out before the peers have resolved and connected to each other); a stale echo (of an
earlier counter) is ignored.  Measured pings are never resent: a missing echo after ``--timeout``
seconds ends the run with exit status 1 (in callback mode noticed within two ``--timeout`` periods).

``pong`` echoes from its receive callback on the context thread with ``SendFlags.NONBLOCK | FLUSH``:
a blocking send there could deadlock (the context thread drains the buffers it would wait for).  When
a send raises :class:`~openum.WouldBlock`, the payload is copied to a queue and every later echo goes
behind it, in order; the source's ``WAKEUP`` event (delivered on the same context thread, so it can
never overtake the ``WouldBlock``) sends the queue out.  With ``--busy`` the pong spins too; otherwise
its main thread sleeps until SIGINT/SIGTERM, ``--count`` echoes or ``--duration`` ends it, without
waking up in between.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import signal
import struct
import sys
import threading
import time
from typing import Any

from openum._errors import WouldBlock
from openum._message import Message, MsgType, SourceEvent
from openum.cli._args import counter_size, non_negative, positive

__all__ = ["percentiles", "register"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_COUNTER = struct.Struct(">Q")
_DATA = MsgType.DATA  # read once: an enum member lookup runs Python code in 3.11
_TRANSPORTS = ("tcp", "lbtru", "lbtrm", "lbtipc", "lbtsmx")

#: Callback mode: this many pings before the warm-up ends, the receive callback leaves the next send to
#: the main thread, which then sleeps until the run ends (its last wake-up falls among warm-up pings).
HANDOFF_MARGIN = 16
#: Callback mode: how often the main thread looks for late pings during the warm-up, at most (seconds).
WARMUP_TICK = 0.05


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    ping = sub.add_parser(
        "ping",
        parents=[common],
        help="measure round-trip latency against an `openum pong` (like lbmlatping)",
        description="Send messages on TOPIC_PING, wait for each echo on TOPIC_PONG, and report round-trip "
        "percentiles in microseconds after a discarded warm-up.",
    )
    ping.add_argument("topic_ping", metavar="TOPIC_PING")
    ping.add_argument("topic_pong", metavar="TOPIC_PONG")
    ping.add_argument("--count", type=positive, default=10000, help="measured round trips (default 10000)")
    ping.add_argument(
        "--warmup", type=non_negative, default=1000, help="round trips discarded first (default 1000)"
    )
    ping.add_argument("--size", type=counter_size, default=64, help="payload bytes, at least 8 (default 64)")
    ping.add_argument("--transport", choices=_TRANSPORTS, default=None, help="transport (default tcp)")
    ping.add_argument(
        "--mode",
        choices=("callback", "thread"),
        default="callback",
        help="callback: the receive callback sends the next ping (default, lowest latency); thread: "
        "the callback wakes the main thread, which sends it",
    )
    ping.add_argument(
        "--busy",
        action="store_true",
        help="sequential mode, the main thread spins on process_events(0) (uses a whole CPU)",
    )
    ping.add_argument(
        "--resend",
        type=float,
        default=0.1,
        metavar="SECONDS",
        help="during the warm-up, resend a ping whose echo is this late (default 0.1)",
    )
    ping.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="give up when no echo arrives for this long (default 10)",
    )
    ping.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    ping.set_defaults(handler=cmd_ping)

    pong = sub.add_parser(
        "pong",
        parents=[common],
        help="echo every message of TOPIC_PING on TOPIC_PONG (like lbmlatpong)",
        description="Receive on TOPIC_PING and echo every message on TOPIC_PONG until interrupted "
        "(SIGINT/SIGTERM), --count echoes, or --duration seconds.",
    )
    pong.add_argument("topic_ping", metavar="TOPIC_PING")
    pong.add_argument("topic_pong", metavar="TOPIC_PONG")
    pong.add_argument("--transport", choices=_TRANSPORTS, default=None, help="transport (default tcp)")
    pong.add_argument("--count", type=positive, default=None, help="stop after this many echoes")
    pong.add_argument("--duration", type=float, default=None, metavar="SECONDS", help="stop after this long")
    pong.add_argument(
        "--busy",
        action="store_true",
        help="sequential mode, the main thread spins on process_events(0) (uses a whole CPU)",
    )
    pong.add_argument("--json", action="store_true", help="print the summary as JSON on the last line")
    pong.set_defaults(handler=cmd_pong)


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """min/p50/p90/p99/p999/max of round trips in nanoseconds, as microseconds (nearest rank)."""
    if not samples_ns:
        return {}
    ordered = sorted(samples_ns)
    n = len(ordered)

    def rank(q: float) -> float:
        return ordered[min(n - 1, max(0, math.ceil(q * n) - 1))] / 1000.0

    return {
        "min": round(ordered[0] / 1000.0, 3),
        "p50": round(rank(0.50), 3),
        "p90": round(rank(0.90), 3),
        "p99": round(rank(0.99), 3),
        "p999": round(rank(0.999), 3),
        "max": round(ordered[-1] / 1000.0, 3),
        "mean": round(sum(ordered) / n / 1000.0, 3),
    }


def _context(args: argparse.Namespace, busy: bool) -> Any:
    from openum._context import Context
    from openum.cli import build_config

    config = build_config(args)
    if busy:
        config.set_options(["context operational_mode sequential"], source="--busy")
    return Context(config)


def _emit(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, sort_keys=True), flush=True)
        return
    print("  ".join(f"{k}={v}" for k, v in summary.items() if not isinstance(v, dict)))
    rtt = summary.get("rtt_us")
    if rtt:
        print("rtt_us  " + "  ".join(f"{k}={v}" for k, v in rtt.items()), flush=True)


# -- ping ------------------------------------------------------------------------------------------


class _Pinger:
    """The ping state: the counter in flight, when it was sent, and the recorded round trips."""

    def __init__(self, src: Any, args: argparse.Namespace, send_from_callback: bool) -> None:
        from openum._source import SendFlags

        self.src = src
        self.warmup: int = args.warmup
        self.total: int = args.warmup + args.count
        self.payload = bytearray(args.size)
        self.samples: list[int] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.echo = threading.Event()
        self.send_from_callback = send_from_callback
        # Callback mode: the counter the main thread sends itself before it goes quiet (at least 1: the
        # path must have carried an echo, as no ping is resent after it), and the event that hands it
        # over (also set when the run ends or is stopped first).
        self.handoff_at = max(1, self.warmup - HANDOFF_MARGIN)
        self.handoff = threading.Event()
        self.main_wakeups = 0  # main-thread wake-ups after the hand-off (callback mode)
        self.flags_callback = SendFlags.FLUSH | SendFlags.NONBLOCK
        self.flags_thread = SendFlags.FLUSH
        self.current = -1  # the counter in flight (-1: none)
        self.sent_ns = 0
        self.echo_ns = 0
        self.sent = 0
        self.received = 0
        self.stale = 0
        self.resends = 0
        self.would_block = 0
        self.progress_ns = time.perf_counter_ns()

    def send_locked(self, counter: int, flags: int) -> None:
        _COUNTER.pack_into(self.payload, 0, counter)
        self.current = counter
        self.sent += 1
        self.sent_ns = time.perf_counter_ns()
        try:
            self.src.send(self.payload, flags)
        except WouldBlock:
            # Only one ping is ever in flight, so this means the session is still busy with something
            # else; the main thread's watchdog resends it (warm-up) or the run times out.
            self.would_block += 1

    def on_message(self, msg: Message) -> None:
        if msg.type is not _DATA:
            return
        now = time.perf_counter_ns()
        data = msg.data
        if len(data) < 8:
            return
        counter = _COUNTER.unpack_from(data, 0)[0]
        with self.lock:
            if counter != self.current:
                self.stale += 1
                return
            self.received += 1
            self.progress_ns = now
            if not self.send_from_callback:
                self.echo_ns = now
                self.current = -1
                self.echo.set()
                return
            if counter >= self.warmup:
                self.samples.append(now - self.sent_ns)
            following = counter + 1
            if following >= self.total:
                self.current = -1
                self.finish()
                return
            if following == self.handoff_at:
                self.current = following  # the main thread sends it (an early echo of it is not stale)
                self.handoff.set()
                return
            self.send_locked(following, self.flags_callback)

    def finish(self) -> None:
        """The run is over (or stopped): wake the main thread wherever it waits."""
        self.done.set()
        self.handoff.set()


def cmd_ping(args: argparse.Namespace) -> int:
    attrs = {"transport": args.transport} if args.transport else None
    stop = threading.Event()
    pingers: list[_Pinger] = []

    def on_sigterm(*_: Any) -> None:
        stop.set()
        for pinger in pingers:
            pinger.finish()  # the callback mode's main thread sleeps on it

    signal.signal(signal.SIGTERM, on_sigterm)
    mode = "busy" if args.busy else args.mode
    with _context(args, args.busy) as ctx:
        src = ctx.create_source(args.topic_ping, attrs)
        pinger = _Pinger(src, args, send_from_callback=mode != "thread")
        pingers.append(pinger)
        rcv = ctx.create_receiver(args.topic_pong, pinger.on_message)
        start = time.monotonic()
        try:
            if mode == "thread":
                ok = _ping_thread(pinger, args, stop)
            elif mode == "busy":
                ok = _ping_busy(ctx, pinger, args, stop)
            else:
                ok = _ping_callback(pinger, args, stop)
        except KeyboardInterrupt:
            ok = False
        seconds = time.monotonic() - start
        source_string = src.source_string
        rcv.close()
        src.close()
    samples = pinger.samples
    summary: dict[str, Any] = {
        "sent": pinger.sent,
        "received": pinger.received,
        "count": len(samples),
        "warmup": args.warmup,
        "size": args.size,
        "bytes": pinger.sent * args.size,
        "seconds": round(seconds, 6),
        "resends": pinger.resends,
        "stale": pinger.stale,
        "would_block": pinger.would_block,
        "main_wakeups": pinger.main_wakeups,
        "mode": mode,
        "transport": args.transport or "tcp",
        "source": source_string,
        "rtt_us": percentiles(samples),
    }
    _emit(summary, args.json)
    if not ok or len(samples) < args.count:
        print(
            f"openum ping: {len(samples)} of {args.count} round trips measured "
            f"(no echo for {args.timeout} s, or interrupted)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def _watchdog(pinger: _Pinger, args: argparse.Namespace, flags: int) -> bool:
    """Resend a late warm-up ping; False when no echo came for ``--timeout`` seconds."""
    now = time.perf_counter_ns()
    with pinger.lock:
        current = pinger.current
        if current < 0:
            return True
        if (current < pinger.warmup or not pinger.received) and now - pinger.sent_ns >= args.resend * 1e9:
            pinger.resends += 1
            pinger.send_locked(current, flags)
    return bool(now - pinger.progress_ns < args.timeout * 1e9)


def _ping_callback(pinger: _Pinger, args: argparse.Namespace, stop: threading.Event) -> bool:
    """Callback mode: the receive callback sends every ping but the first and the hand-off one.

    Until the hand-off the main thread wakes every ``--resend`` seconds (at most ``WARMUP_TICK``) to
    resend a late ping; after it, it sleeps on ``pinger.done`` and wakes once per ``--timeout`` seconds
    at most, to see whether echoes still come. ``stop`` must be set together with :meth:`_Pinger.finish`
    (cmd_ping's SIGTERM handler does both)."""
    with pinger.lock:
        pinger.send_locked(0, pinger.flags_thread)
    tick = min(args.resend, WARMUP_TICK)
    while not pinger.handoff.wait(tick):
        if stop.is_set() or not _watchdog(pinger, args, pinger.flags_thread):
            return False
    if stop.is_set():
        return False
    if not pinger.done.is_set():
        with pinger.lock:
            pinger.send_locked(pinger.handoff_at, pinger.flags_thread)
    timeout_ns = args.timeout * 1e9
    while not pinger.done.wait(args.timeout):
        pinger.main_wakeups += 1
        if stop.is_set() or time.perf_counter_ns() - pinger.progress_ns >= timeout_ns:
            return False
    return not stop.is_set()


def _ping_busy(ctx: Any, pinger: _Pinger, args: argparse.Namespace, stop: threading.Event) -> bool:
    with pinger.lock:
        pinger.send_locked(0, pinger.flags_thread)
    process = ctx.process_events
    done = pinger.done.is_set
    spins = 0
    while not done():
        process(0)
        spins += 1
        if spins >= 1000:
            spins = 0
            if stop.is_set() or not _watchdog(pinger, args, pinger.flags_thread):
                return False
    return True


def _ping_thread(pinger: _Pinger, args: argparse.Namespace, stop: threading.Event) -> bool:
    echo = pinger.echo
    flags = pinger.flags_thread
    samples = pinger.samples
    warmup = pinger.warmup
    timeout_ns = args.timeout * 1e9
    for counter in range(pinger.total):
        with pinger.lock:
            echo.clear()
            pinger.send_locked(counter, flags)
            sent_ns = pinger.sent_ns
        while not echo.wait(args.resend):
            if stop.is_set():
                return False
            if time.perf_counter_ns() - pinger.progress_ns > timeout_ns:
                return False
            if counter < warmup or not pinger.received:
                with pinger.lock:
                    if echo.is_set():
                        break
                    pinger.resends += 1
                    pinger.send_locked(counter, flags)
                    sent_ns = pinger.sent_ns
        now = time.perf_counter_ns()
        if counter >= warmup:
            samples.append(now - sent_ns)
    pinger.done.set()
    return True


# -- pong ------------------------------------------------------------------------------------------


class _Ponger:
    """Echo from the receive callback without blocking; queue behind a WouldBlock until WAKEUP."""

    def __init__(self, count: int | None) -> None:
        from openum._source import SendFlags

        self.src: Any = None
        self.flags = SendFlags.FLUSH | SendFlags.NONBLOCK
        self.pending: collections.deque[bytes] = collections.deque()
        self.echoed = 0
        self.bytes = 0
        self.blocked = 0
        self.count = count
        self.done = threading.Event()

    def on_message(self, msg: Message) -> None:
        if msg.type is not _DATA or self.src is None:
            return
        data = msg.data
        if self.pending:
            self.pending.append(bytes(data))
            return
        try:
            self.src.send(data, self.flags)
        except WouldBlock:
            self.blocked += 1
            self.pending.append(bytes(data))
            return
        self._echoed(len(data))

    def _echoed(self, size: int) -> None:
        self.echoed += 1
        self.bytes += size
        if self.count is not None and self.echoed >= self.count:
            self.done.set()

    def on_source_event(self, event: SourceEvent, _info: Any, _clientd: Any) -> None:
        if event is not SourceEvent.WAKEUP:
            return
        pending = self.pending
        while pending:
            try:
                self.src.send(pending[0], self.flags)
            except WouldBlock:
                self.blocked += 1
                return
            self._echoed(len(pending.popleft()))


def cmd_pong(args: argparse.Namespace) -> int:
    attrs = {"transport": args.transport} if args.transport else None
    stop = threading.Event()
    ponger = _Ponger(args.count)

    def on_sigterm(*_: Any) -> None:
        stop.set()
        ponger.done.set()  # the main thread sleeps on it

    signal.signal(signal.SIGTERM, on_sigterm)
    deadline = time.monotonic() + args.duration if args.duration else None
    start = time.monotonic()
    with _context(args, args.busy) as ctx:
        ponger.src = src = ctx.create_source(args.topic_pong, attrs, event_callback=ponger.on_source_event)
        rcv = ctx.create_receiver(args.topic_ping, ponger.on_message)
        try:
            if args.busy:
                process = ctx.process_events
                spins = 0
                while not ponger.done.is_set():
                    process(0)
                    spins += 1
                    if spins >= 2000:
                        spins = 0
                        if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
                            break
            else:
                # Asleep until the end, never waking in between (see the module docstring).
                ponger.done.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            pass
        seconds = time.monotonic() - start
        source_string = src.source_string
        rcv.close()
        src.close()
    _emit(
        {
            "echoed": ponger.echoed,
            "bytes": ponger.bytes,
            "blocked": ponger.blocked,
            "pending": len(ponger.pending),
            "seconds": round(seconds, 6),
            "mode": "busy" if args.busy else "callback",
            "transport": args.transport or "tcp",
            "source": source_string,
        },
        args.json,
    )
    return EXIT_OK
