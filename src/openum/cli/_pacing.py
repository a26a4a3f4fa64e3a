"""Sending at a fixed rate with intelligent batching (``openum send --rate`` and the bench's publishers).

A paced sender is either behind its schedule, with messages due that it has not sent, or caught up,
waiting for the next one to fall due.  :func:`paced_batches` tells it which: it yields how far to send
now, and when the sender has caught up it flushes what the source holds back (the implicit batch) and
sleeps until the next message is due.  So messages sent while the sender is behind are batched into
full datagrams, and a message waits in a batch only while its sender is still busy sending more: UM's
*intelligent batching* (Concepts Guide 8.11.2: "almost no latency is added by batching, so long as the
second message is ready to send immediately after the first").

Flushing after every batch of due messages instead, as the bench did before, makes the datagram size a
property of the sender's speed: a sender whose flush (a system call) takes a few microseconds finds
only a few messages due after each one, and sends them as a datagram of their own, at every rate
it can keep up with.  Its receiver then pays its per-datagram costs (a read, a wake-up, a header) for
every few messages, and on a slow machine that, not the message rate, is what it cannot keep up with:
in one such period the bench's LBT-RM publisher sent 4-10 messages a datagram at 450-500 k msgs/s, and
its receiver lost messages at 500 k while keeping up with 700 k unpaced (27 messages a datagram).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

__all__ = ["paced_batches"]


def paced_batches(
    count: int,
    rate: float,
    flush: Callable[[], object] | None,
    *,
    start: float | None = None,
    quantum: float = 0.0,
    chunk: int = 1 << 30,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], bool | None] = time.sleep,
) -> Iterator[int]:
    """Yield ``due``: send messages ``sent .. due - 1`` now (``sent``: the previous ``due``, first 0).

    At ``rate`` messages per second (0 or less: unlimited) from ``start`` (default: the first
    ``next()``; a value of ``clock``).  When every due message has been sent, ``flush()`` is called
    (once per catch-up, and only when something was sent since the last one; None: a sender that
    holds nothing back) and the generator sleeps until the next message is due.  A ``sleep`` that
    returns True ends the batches: pass a stop event's ``wait``, which returns True once the event is
    set (``time.sleep`` returns None).  ``quantum`` (seconds): a sender that has caught up sleeps until
    that long a stretch of messages is due (at least one), so it sends at least ``rate * quantum``
    messages a wake-up (0: wakes for every message), each at most ``quantum`` after it was due.
    ``chunk`` caps a batch, so that a caller checking for a stop or showing progress between batches
    does so at least every ``chunk`` messages.  The caller sends everything it is given before asking
    for more, and flushes after the last batch (no flush follows it here).
    """
    if count < 0 or chunk < 1 or quantum < 0:
        raise ValueError(
            "count and quantum must be >= 0 and chunk >= 1, "
            f"got count={count}, quantum={quantum}, chunk={chunk}"
        )
    burst = max(1, int(rate * quantum)) if rate > 0 else 1
    if start is None:
        start = clock()
    sent = 0
    flushed = 0
    while sent < count:
        if rate > 0:
            due = min(count, int((clock() - start) * rate) + 1)
            if due <= sent:
                if sent != flushed and flush is not None:  # caught up: the held-back batch leaves now
                    flush()
                    flushed = sent
                pause = start + (sent + burst - 1) / rate - clock()
                if pause > 0 and sleep(pause) is True:
                    return
                continue
        else:
            due = count
        due = min(due, sent + chunk)
        yield due
        sent = due
