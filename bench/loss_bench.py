"""Micro-benchmark of the receiver's loss detector under loss (PERFORMANCE.md: measured, never asserted).

A receiver that fell behind holds many losses, and every datagram goes through ``LossDetector.data``
(the in-order hot path needs nothing missing).  Measures, in microseconds per datagram handled (median
of several runs):

* ``repair-in-order``: one gap of ``--gap`` datagrams, then its repairs in order, each followed by a
  new datagram (what a receiver sees while a source answers its NAKs);
* ``gaps-and-repairs``: ``--gaps`` gaps of 50 datagrams, 20 repairs (oldest first) and 20 new
  datagrams after each (losses keep coming while older ones are repaired).

Both grew with the number of losses held before pass 12 (docs/performance.md): finding the lowest loss
scanned the loss map's deleted entries, and every gap reordered the whole timer heap.

    python bench/loss_bench.py [--gap 16000] [--gaps 2000] [--runs 5] [--json]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import deque

from _report import machine_facts, report
from openum._accel import COMPILED
from openum.protocol.reliable._nak import LossDetector

MS = 1_000_000


def _detector() -> LossDetector:
    # Long NAK intervals: nothing times out during a run, every datagram is the data path alone.
    return LossDetector(
        initial_backoff_ns=1000 * MS,
        backoff_ns=1000 * MS,
        suppress_ns=1000 * MS,
        generation_ns=10**6 * MS,
        send_naks=True,
        max_naks_per_packet=200,
        rng=random.Random(1),
    )


def repair_in_order(gap: int) -> float:
    """Seconds per datagram: a gap of ``gap``, then each repair followed by a new datagram."""
    det = _detector()
    data = det.data
    data(0, 0, False, 0)
    data(gap + 1, 0, False, MS)
    nxt = gap + 2
    start = time.perf_counter()
    for s in range(1, gap + 1):
        data(s, 0, True, 2 * MS)
        data(nxt, 0, False, 2 * MS)
        nxt += 1
    return (time.perf_counter() - start) / (2 * gap)


def gaps_and_repairs(gaps: int, size: int = 50, repairs: int = 20) -> float:
    """Seconds per datagram: ``gaps`` gaps of ``size``, each followed by ``repairs`` repairs of the oldest
    losses and as many new datagrams."""
    det = _detector()
    data = det.data
    data(0, 0, False, 0)
    missing: deque[int] = deque()
    nxt = 1
    handled = 0
    start = time.perf_counter()
    for g in range(gaps):
        data(nxt + size, 0, False, g)
        missing.extend(range(nxt, nxt + size))
        nxt += size + 1
        handled += 1
        for _ in range(repairs):
            if missing:
                data(missing.popleft(), 0, True, g)
                handled += 1
            data(nxt, 0, False, g)
            nxt += 1
            handled += 1
    return (time.perf_counter() - start) / handled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gap", type=int, default=16_000, help="datagrams in the gap of repair-in-order")
    parser.add_argument("--gaps", type=int, default=2000, help="gaps in gaps-and-repairs")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    cases = {
        f"repair-in-order (gap {args.gap // 4:,})": lambda: repair_in_order(args.gap // 4),
        f"repair-in-order (gap {args.gap:,})": lambda: repair_in_order(args.gap),
        f"gaps-and-repairs ({args.gaps // 4:,} gaps)": lambda: gaps_and_repairs(args.gaps // 4),
        f"gaps-and-repairs ({args.gaps:,} gaps)": lambda: gaps_and_repairs(args.gaps),
    }
    results = {name: statistics.median(fn() for _ in range(args.runs)) * 1e6 for name, fn in cases.items()}
    report(
        results,
        machine_facts(compiled=COMPILED),
        args.json,
        "us_per_datagram",
        lambda name, us: f"{name:>32}: {us:6.2f} us per datagram",
    )


if __name__ == "__main__":
    main()
