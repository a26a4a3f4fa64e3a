"""What every bench worker process shares: the payload format, the start handshake, in-order
verification, RSS sampling and the line protocol to the harness.

Line protocol (worker stdout, one line each): ``READY`` (a subscriber is subscribed), ``SYNCED`` (it
received the publisher's first hello), ``RESULT {json}`` (the final summary).  The harness writes
``GO`` to a publisher's stdin when its subscriber is synced, and ``STOP`` (or closes stdin) when the
publisher may close.

Payload of message i: 8-byte big-endian i padded with zeros to the size (as ``openum send``).  Before
``GO`` a publisher sends *hellos* (counter ``HELLO``) every 10 ms, so a subscriber knows the stream
has reached it (subscriptions, connections and joins take time on every system) before counter 0 is
sent; subscribers ignore hellos.  That makes "nothing lost at start" a property of the method.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from typing import Any

__all__ = [
    "COUNTER",
    "HELLO",
    "PACING_QUANTUM",
    "Control",
    "Verifier",
    "emit",
    "rss_bytes",
    "say",
]

COUNTER = struct.Struct(">Q")
HELLO = (1 << 64) - 1
HELLO_INTERVAL = 0.01
#: A paced publisher (``rate``) that has caught up sleeps until this much of its schedule is due and sends
#: it as one burst (openum.cli._pacing): 1 ms of messages a wake-up, as a market-data feed arrives, and
#: finer than UM's own rate limiter, which releases a 10 ms budget at a time (LBT-RM's default
#: ``transport_lbtrm_rate_interval``).  Without it the datagram size followed the sender's wake-up
#: latency (2-3 messages a datagram at 100-200 k msgs/s in one slow period).
PACING_QUANTUM = 0.001
#: A subscriber's result lists where its first gaps were (``gap_list``), up to this many.
MAX_GAPS_LISTED = 20
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def emit(result: dict[str, Any]) -> None:
    say("RESULT " + json.dumps(result, sort_keys=True))


def _sleeps() -> int:
    """Voluntary context switches of this process so far: how often one of its threads slept (0 where
    there is no ``resource`` module)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not a POSIX system
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def rss_bytes() -> int:
    """Resident set size of this process (``/proc/self/statm``; 0 where there is no /proc)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


class Control:
    """The harness's commands on stdin: ``go`` is set by GO, ``stop`` by STOP or end of input."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.stop = threading.Event()
        threading.Thread(target=self._read, name="bench-control", daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "GO":
                self.go.set()
            elif word == "STOP":
                break
        self.go.set()
        self.stop.set()


class Verifier:
    """In-order check of counters 0, 1, 2, ... with no per-message memory (flat RSS is measured too).

    Subscribers run the fast path inline, with ``expected`` and ``checkpoint`` as local variables::

        if c == expected:
            expected += 1
            if expected == checkpoint:
                checkpoint = verifier.at_checkpoint(expected)
        else:
            expected = verifier.slow(c, expected)
            checkpoint = verifier.checkpoint

    starting from ``expected = -1`` (so the first message takes the slow path, which starts the clock)
    and ``checkpoint = verifier.checkpoint``.  A checkpoint is the next RSS sampling point or the
    count.  ``gaps``: times a counter skipped ahead; ``missing``: counters skipped over; ``behind``:
    counters below the next expected one (duplicates or reordering); ``gap_list``: where the first
    :data:`MAX_GAPS_LISTED` gaps were, as ``[first missing counter, counters missing]``.
    """

    def __init__(self, count: int, rss_points: list[int] | None = None) -> None:
        self.count = count
        self.gaps = 0
        self.missing = 0
        self.gap_list: list[list[int]] = []  # [first missing counter, how many], the first MAX_GAPS_LISTED
        self.behind = 0
        self.start = 0.0
        self.end = 0.0
        self.cpu_start = 0.0  # the process's CPU time (user + system) at the first counter
        self.cpu_end = 0.0  # and at the last
        self.sleeps_start = 0  # the process's voluntary context switches (waits that slept), likewise
        self.sleeps_end = 0
        self.expected = -1
        self.synced = threading.Event()
        self.done = threading.Event()
        self.rss: dict[str, int] = {}
        self.sample_rss = bool(rss_points)
        self._points = sorted({p for p in rss_points or [] if 0 < p < count} | {count})
        self.checkpoint = self._points[0]

    def _advance(self, expected: int) -> int:
        """Record every checkpoint at or below ``expected``; return the next one."""
        points = self._points
        while points and points[0] <= expected:
            point = points.pop(0)
            if point >= self.count:
                self.end = time.perf_counter()
                self.cpu_end = time.process_time()
                self.sleeps_end = _sleeps()
                if self.sample_rss:
                    self.rss[str(point)] = rss_bytes()
                self.done.set()
            else:
                self.rss[str(point)] = rss_bytes()
        self.checkpoint = points[0] if points else -2
        return self.checkpoint

    def at_checkpoint(self, expected: int) -> int:
        self.expected = expected
        return self._advance(expected)

    def slow(self, value: int, expected: int) -> int:
        """Everything but the next counter in order: hellos, the first message, gaps, repeats."""
        if value == HELLO:
            if not self.synced.is_set():
                self.synced.set()
                say("SYNCED")
            return expected
        if expected < 0:
            self.start = time.perf_counter()
            self.cpu_start = time.process_time()
            self.sleeps_start = _sleeps()
            expected = 0
        if value < expected:
            self.behind += 1
            return expected
        if value > expected:
            self.gaps += 1
            self.missing += value - expected
            if len(self.gap_list) < MAX_GAPS_LISTED:
                self.gap_list.append([expected, value - expected])
        expected = value + 1
        self.expected = expected
        self._advance(expected)
        return expected

    @property
    def received(self) -> int:
        return max(0, self.expected) - self.missing + self.behind

    def wait(self, idle_timeout: float, progress: Any = None) -> bool:
        """Wait until the last counter arrived; False when nothing arrived for ``idle_timeout`` s.

        ``progress()`` returns the subscriber's current ``expected`` (its local variable)."""
        last = None
        idle_since = time.monotonic()
        while not self.done.wait(0.25):
            now_at = progress() if progress is not None else self.expected
            if now_at != last:
                last = now_at
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since >= idle_timeout:
                return False
        return True

    def result(self, expected: int, **extra: Any) -> dict[str, Any]:
        """The summary, given the subscriber's final ``expected``."""
        self.expected = max(self.expected, expected)
        received = self.received
        end = self.end or time.perf_counter()
        seconds = end - self.start if received and self.start else 0.0
        out: dict[str, Any] = {
            "count": self.count,
            "received": received,
            "gaps": self.gaps,
            "missing": self.missing + max(0, self.count - max(0, self.expected)),
            "behind": self.behind,
            "gap_list": self.gap_list,
            "seconds": round(seconds, 6),
            "msgs_per_sec": round(received / seconds, 1) if seconds > 0 else 0.0,
            "rss": self.rss,
            "rss_end": rss_bytes(),
            "cpu_seconds": round((self.cpu_end or time.process_time()) - self.cpu_start, 3),
            "sleeps": (self.sleeps_end or _sleeps()) - self.sleeps_start,
            "complete": received == self.count and self.gaps == 0 and self.behind == 0,
        }
        out.update(extra)
        return out
