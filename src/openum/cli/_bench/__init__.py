"""``openum bench``: openum against pyzmq and zenoh, side by side in one invocation (PERFORMANCE.md).

For every openum transport this build has (``openum._source.AVAILABLE_TRANSPORTS``, read at run time;
the others are reported as not available) and every installed peer (pyzmq PUB/SUB over ``tcp://`` and
``ipc://``, zenoh-python over TCP), alternating the systems within each repeat:

* throughput: a fixed count of messages, publisher and subscriber in separate processes, the
  subscriber checks every counter arrived in order and reports msgs/s;
* round-trip latency: ``openum ping``/``openum pong`` and the peers' equivalents, percentiles after a
  warm-up;
* the maximum sustainable rate of the UDP transports (binary search on the send rate);
* a message size sweep (16 B .. 64 KB);
* the subscriber's RSS at 1 M and 10 M messages (``--memory N`` for a shorter check).

The harness lives in this package (``_harness``, ``_report``); worker processes run
``python -m openum.cli._bench._worker SPEC``.  ``bench/system_bench.py`` is the same command for a
source checkout.  Output: a markdown report on stdout, ``--json FILE`` with every run and the machine
facts.  Exit status: 0 when every run passed its check (targets may FAIL: they are results), 1 when a
run failed its check (or, with ``--strict``, a target failed), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from openum.cli._args import non_negative, positive

__all__ = ["register"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
BENCHMARKS = ("throughput", "latency", "rate", "sweep", "memory")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "bench",
        parents=[common],
        help="benchmark openum against pyzmq and zenoh side by side",
        description="Run openum and its peers (pyzmq, zenoh) side by side: throughput, round-trip latency, "
        "maximum sustainable rate (UDP transports), a message size sweep and receiver memory. Prints a "
        "markdown report with medians and openum/peer ratios, and the PERFORMANCE.md targets as "
        "PASS/FAIL lines.",
    )
    p.add_argument(
        "--transports",
        type=_names,
        default=None,
        metavar="LIST",
        help="openum transports, comma-separated (default: every one; those this build lacks are "
        "reported as not available)",
    )
    p.add_argument(
        "--peers", type=_names, default=None, metavar="LIST", help="peers: pyzmq,zenoh (default both)"
    )
    p.add_argument(
        "--count", type=positive, default=1_000_000, help="messages per throughput run (default 1000000)"
    )
    p.add_argument("--size", type=_size, default=64, help="payload bytes for throughput and latency (64)")
    p.add_argument(
        "--repeat", type=positive, default=3, help="throughput runs of each system; medians (default 3)"
    )
    p.add_argument(
        "--latency-repeat",
        type=positive,
        default=5,
        help="round-trip runs of each system; medians (default 5: a ping/pong pair's speed depends on "
        "where both processes' code was loaded, different at every start; see docs/performance.md)",
    )
    p.add_argument("--pings", type=positive, default=10_000, help="measured round trips per run (10000)")
    p.add_argument("--warmup", type=non_negative, default=1000, help="discarded round trips (1000)")
    p.add_argument(
        "--busy",
        action="store_true",
        help="also measure busy-waiting ping/pong (ping and pong on different CPUs)",
    )
    p.add_argument(
        "--latency-cpus",
        choices=("same", "any"),
        default="same",
        help="same: ping and pong pinned to one CPU, as PERFORMANCE.md measured (default); any: unpinned",
    )
    p.add_argument(
        "--sizes",
        type=_sizes,
        default=None,
        metavar="LIST",
        help="message size sweep, comma-separated bytes (default 16,64,256,1024,4096,16384,65536)",
    )
    p.add_argument(
        "--sweep-count",
        type=positive,
        default=None,
        help="messages per sweep run, capped at --sweep-mb of payload (default: 200000 or --count, "
        "the smaller)",
    )
    p.add_argument("--sweep-mb", type=positive, default=128, help="payload MB per sweep run at most (128)")
    p.add_argument("--sweep-repeat", type=positive, default=1, help="runs per size and system (default 1)")
    p.add_argument("--no-sweep", action="store_true", help="skip the size sweep")
    p.add_argument(
        "--rate-duration",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="length of each maximum-sustainable-rate probe (default 5; UM's method uses 60)",
    )
    p.add_argument("--rate-steps", type=positive, default=8, help="binary search steps (default 8)")
    p.add_argument(
        "--rate-start",
        type=float,
        default=100_000.0,
        metavar="MSGS_PER_SEC",
        help="first rate the search probes; it doubles while probes hold, then bisects (default 100000)",
    )
    p.add_argument("--no-rate", action="store_true", help="skip the maximum sustainable rate search")
    memory = p.add_mutually_exclusive_group()
    memory.add_argument(
        "--memory",
        type=positive,
        default=None,
        metavar="N",
        dest="memory_count",
        help="receiver memory check: RSS at 1 M and at N messages (default 10000000: the target)",
    )
    memory.add_argument("--no-memory", action="store_true", help="skip the receiver memory check")
    p.add_argument(
        "--memory-rate",
        type=float,
        default=None,
        metavar="MSGS_PER_SEC",
        help="send rate of the memory runs (default: unlimited on TCP; 80%% of the maximum sustainable "
        "rate on LBT-RU/LBT-RM, which have no flow control; 0: unlimited)",
    )
    p.add_argument(
        "--only",
        type=_names,
        default=None,
        metavar="LIST",
        help=f"run only these benchmarks ({','.join(BENCHMARKS)})",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="write every run and the machine facts here")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target FAILs")
    p.add_argument("--progress", action="store_true", help="progress lines on stderr even when not a tty")
    p.add_argument("--seed", type=int, default=None, help="seed of the port choice (default random)")
    p.set_defaults(handler=cmd_bench)


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _size(text: str) -> int:
    value = int(text)
    if not 8 <= value <= 1 << 24:
        raise argparse.ArgumentTypeError(f"sizes must be 8 bytes (the counter) .. 16 MB, not {value}")
    return value


def _sizes(text: str) -> list[int]:
    return [_size(part) for part in _names(text)]


def cmd_bench(args: argparse.Namespace) -> int:
    from openum._source import AVAILABLE_TRANSPORTS
    from openum.cli._bench._harness import MEMORY_TARGET_COUNT, PEERS, TRANSPORTS, Bench, Settings
    from openum.cli._bench._report import markdown

    transports = args.transports or list(TRANSPORTS)
    peers = args.peers or list(PEERS)
    only = args.only or list(BENCHMARKS)
    for name, given, known in (
        ("transport", transports, TRANSPORTS),
        ("peer", peers, tuple(PEERS)),
        ("benchmark", only, BENCHMARKS),
    ):
        bad = [x for x in given if x not in known]
        if bad:
            print(
                f"openum bench: unknown {name} {', '.join(bad)} (known: {', '.join(known)})", file=sys.stderr
            )
            return EXIT_USAGE
    if args.no_sweep:
        only = [b for b in only if b != "sweep"]
    if args.no_rate:
        only = [b for b in only if b != "rate"]
    if args.no_memory:
        only = [b for b in only if b != "memory"]
    memory_count = args.memory_count or MEMORY_TARGET_COUNT
    if args.rate_duration <= 0:
        print("openum bench: --rate-duration must be positive", file=sys.stderr)
        return EXIT_USAGE
    # Check the configuration once here, so a bad -c/--option is a usage error, not N failed runs.
    from openum.cli import build_config

    build_config(args)
    settings = Settings(
        transports=transports,
        peers=peers,
        count=args.count,
        size=args.size,
        repeat=args.repeat,
        latency_repeat=args.latency_repeat,
        pings=args.pings,
        warmup=args.warmup,
        busy=args.busy,
        latency_cpus=args.latency_cpus,
        sweep_count=args.sweep_count or min(200_000, args.count),
        sweep_bytes=args.sweep_mb * 1024 * 1024,
        sweep_repeat=args.sweep_repeat,
        rate_duration=args.rate_duration,
        rate_steps=args.rate_steps,
        rate_start=args.rate_start,
        memory_count=memory_count,
        memory_rate=args.memory_rate,
        benchmarks=only,
        config_files=list(args.config),
        options=list(args.option),
        seed=args.seed,
    )
    if args.sizes:
        settings.sizes = args.sizes
    show = args.progress or sys.stderr.isatty()

    def progress(text: str) -> None:
        if show:
            print(text, file=sys.stderr, flush=True)

    started = time.monotonic()
    bench = Bench(settings, tuple(AVAILABLE_TRANSPORTS), progress)
    for t in bench.not_available:
        progress(f"openum {t}: not available in this build")
    for text in bench.missing_peers.values():
        progress(text)
    bench.run()
    summary = bench.summary()
    targets = bench.targets(summary)
    doc: dict[str, Any] = {
        "machine": bench.machine(),
        "settings": {
            **{k: v for k, v in vars(settings).items() if k not in ("options", "config_files")},
            "options": settings.options,
            "config_files": settings.config_files,
        },
        "available_transports": list(AVAILABLE_TRANSPORTS),
        "not_available": bench.not_available,
        "missing_peers": bench.missing_peers,
        "notes": bench.notes,
        "summary": summary,
        "targets": targets,
        "runs": [r.as_dict() for r in bench.runs],
        "total_seconds": round(time.monotonic() - started, 1),
    }
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1, sort_keys=False)
            f.write("\n")
    print(markdown(doc), flush=True)
    failed = any(not r.ok for r in bench.runs)  # announced UDP loss when unthrottled is not a failure
    if failed or (args.strict and any(t["status"] == "FAIL" for t in targets)):
        return EXIT_FAILED
    return EXIT_OK
