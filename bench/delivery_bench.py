"""Micro-benchmark of the delivery controller (PERFORMANCE.md: measured, never asserted).

Measures, in deliveries per second (median of several timed runs, after a warm-up run):

* ``in-order``: the hot path, ``DeliveryController.on_message`` with the next sqn, no gap (the case
  the DC is built for: a few attribute reads and writes and one ``Delivery``);
* ``reorder``: every pair of messages swapped (each second message waits in the order map);
* ``fragments``: 4-fragment messages reassembled in order (deliveries are whole messages).

    python bench/delivery_bench.py [--payload 64] [--batch 10000] [--runs 7] [--seconds 0.3] [--json]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _report import machine_facts, report
from openum.protocol.delivery import DeliveryController

NOW = 1_000_000_000


def _rate(run_batch: Callable[[], int], seconds: float, runs: int) -> float:
    """Median deliveries/s over ``runs`` timed runs of about ``seconds`` each (after one warm-up)."""
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


def build_benchmarks(payload_size: int, batch: int) -> dict[str, Callable[[], int]]:
    payload = memoryview(bytes(payload_size))
    in_order = DeliveryController()
    in_order.on_message(0, payload, NOW)
    state = {"in_order": 1, "reorder": 1, "frag": 1}

    def hot() -> int:
        on_message = in_order.on_message
        sqn = state["in_order"]
        delivered = 0
        for s in range(sqn, sqn + batch):
            delivered += len(on_message(s & 0xFFFF_FFFF, payload, NOW))
        state["in_order"] = sqn + batch
        return delivered

    reorder_dc = DeliveryController()
    reorder_dc.on_message(0, payload, NOW)

    def reorder() -> int:
        on_message = reorder_dc.on_message
        sqn = state["reorder"]
        delivered = 0
        for s in range(sqn, sqn + batch, 2):
            delivered += len(on_message((s + 1) & 0xFFFF_FFFF, payload, NOW))
            delivered += len(on_message(s & 0xFFFF_FFFF, payload, NOW))
        state["reorder"] = sqn + batch - batch % 2
        return delivered

    frag_dc = DeliveryController()
    frag_dc.on_message(0, payload, NOW)
    nfrag = 4
    total = payload_size * nfrag

    def fragments() -> int:
        on_message = frag_dc.on_message
        sqn = state["frag"]
        delivered = 0
        for first in range(sqn, sqn + batch, nfrag):
            for i in range(nfrag):
                frag = (first & 0xFFFF_FFFF, i * payload_size, total)
                delivered += len(on_message((first + i) & 0xFFFF_FFFF, payload, NOW, fragment=frag))
        state["frag"] = sqn + batch - batch % nfrag + (nfrag if batch % nfrag else 0)
        return delivered

    return {"in-order": hot, "reorder": reorder, "fragments": fragments}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--payload", type=int, default=64, help="payload bytes per message")
    parser.add_argument("--batch", type=int, default=10_000, help="messages per timed batch")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.3, help="length of one timed run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    results = {
        name: _rate(fn, args.seconds, args.runs)
        for name, fn in build_benchmarks(args.payload, args.batch).items()
    }
    report(
        results,
        machine_facts(payload=args.payload),
        args.json,
        "deliveries_per_s",
        lambda name, rate: f"{name:>10}: {rate:>12,.0f} deliveries/s  ({1e9 / rate:,.0f} ns each)",
    )


if __name__ == "__main__":
    main()
