"""``openum demo``: the main demo, simulated market data from a publisher to a wildcard subscriber.

``openum demo`` starts two child processes of itself, ``openum demo publisher`` and ``openum demo
subscriber`` (hidden roles), handing them its ``-c``/``--option``/``--application`` arguments, and relays
their output (:mod:`openum.demo`).  ``openum demo --spark`` (what ``make run`` runs) puts the Spark
market-data pipeline between the publisher and an analytics subscriber (``openum demo analytics``), or
says why it cannot and runs the plain demo.  Exit status: 0 when the run's checks passed, 1 when the run
failed (the reasons are printed), 2 on bad usage or configuration, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
from typing import Any

from openum._source import AVAILABLE_TRANSPORTS

__all__ = ["register"]

ROLES = ("run", "publisher", "subscriber", "analytics")
#: (duration s, rate ticks/s) when not given: the plain demo, and the Spark demo (Spark start-up takes
#: part of the time budget of ``make run``, and a laptop's Spark keeps up with a few thousand ticks/s).
PLAIN_DEFAULTS = (20.0, 20000.0)
SPARK_DEFAULTS = (20.0, 3000.0)


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    from openum.demo import DEFAULT_VENUES, DESCRIPTION, EPILOG, SYMBOLS

    parser = sub.add_parser(
        "demo",
        parents=[common],
        help="the main demo: simulated market data, publisher -> wildcard subscriber",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    parser.add_argument("role", nargs="?", choices=ROLES, default="run", help=argparse.SUPPRESS)
    parser.add_argument(
        "--duration",
        type=_positive_float,
        default=None,
        metavar="SECONDS",
        help=f"how long to send (default {PLAIN_DEFAULTS[0]:g}; with --spark {SPARK_DEFAULTS[0]:g})",
    )
    parser.add_argument(
        "--rate",
        type=_positive_float,
        default=None,
        metavar="MSGS_PER_SEC",
        help=f"ticks per second over all topics (default {PLAIN_DEFAULTS[1]:.0f}; with --spark "
        f"{SPARK_DEFAULTS[1]:.0f})",
    )
    parser.add_argument(
        "--venues",
        type=_venues,
        default=DEFAULT_VENUES,
        metavar="V1,V2,...",
        help=f"venues, comma-separated (default {','.join(DEFAULT_VENUES)})",
    )
    parser.add_argument(
        "--symbols",
        type=_symbols(len(SYMBOLS)),
        default=50,
        metavar="N",
        help=f"symbols per venue, 1-{len(SYMBOLS)}, from a fixed list of tickers (default 50)",
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed of the market simulation (default random)"
    )
    parser.add_argument(
        "--join-timeout",
        type=_positive_float,
        default=10.0,
        metavar="SECONDS",
        help="how long the publisher waits for the subscriber to join every topic (default 10)",
    )
    parser.add_argument(
        "--transport",
        choices=AVAILABLE_TRANSPORTS,
        default=None,
        help="the publisher's transport (default: the configuration's 'source transport', tcp)",
    )
    parser.add_argument("--json", action="store_true", help="print the final summary as one JSON object")
    parser.add_argument(
        "--spark",
        action="store_true",
        help="put the Spark market-data pipeline (OHLC, VWAP, rates per symbol) between the publisher and an "
        "analytics subscriber; without PySpark or Java, say why and run the plain demo (docs/spark.md)",
    )
    parser.add_argument("--control-stdin", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=_positive_float, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from openum.cli import build_config
    from openum.demo import Settings, run_demo, run_publisher, run_subscriber

    config = build_config(args)  # a bad file or option is exit 2 before anything starts
    spark = args.spark and args.role == "run"
    defaults = SPARK_DEFAULTS if spark else PLAIN_DEFAULTS
    settings = Settings(
        venues=tuple(args.venues),
        symbols=args.symbols,
        rate=args.rate if args.rate is not None else defaults[1],
        duration=args.duration if args.duration is not None else defaults[0],
        seed=args.seed,
        join_timeout=args.join_timeout,
        transport=args.transport,
    )
    if args.role == "analytics":
        from openum.demo import run_analytics_subscriber

        return run_analytics_subscriber(
            config, control_stdin=args.control_stdin, max_seconds=args.max_seconds
        )
    if spark:
        from openum.demo import run_spark_demo

        fallback = Settings(
            venues=settings.venues,
            symbols=settings.symbols,
            rate=args.rate if args.rate is not None else PLAIN_DEFAULTS[1],
            duration=args.duration if args.duration is not None else PLAIN_DEFAULTS[0],
            seed=settings.seed,
            join_timeout=settings.join_timeout,
            transport=settings.transport,
        )
        return run_spark_demo(settings, config_arguments(args), as_json=args.json, fallback=fallback)
    if args.role == "publisher":
        return run_publisher(config, settings, control_stdin=args.control_stdin)
    if args.role == "subscriber":
        return run_subscriber(
            config, settings, control_stdin=args.control_stdin, max_seconds=args.max_seconds
        )
    return run_demo(settings, config_arguments(args), as_json=args.json)


def config_arguments(args: argparse.Namespace) -> list[str]:
    """The ``-c``/``--option``/``--application`` arguments again, for the child processes."""
    out: list[str] = []
    for path in args.config:
        out += ["-c", path]
    for line in args.option:
        out += ["--option", line]
    if args.application:
        out += ["--application", args.application]
    return out


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _venues(text: str) -> tuple[str, ...]:
    from openum.demo import check_universe

    venues = tuple(v.strip() for v in text.split(",") if v.strip())
    try:
        check_universe(venues, 1)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return venues


def _symbols(limit: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not 1 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be 1-{limit}, not {value}")
        return value

    return parse
