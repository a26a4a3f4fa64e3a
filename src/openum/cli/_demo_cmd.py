"""``openum demo``: the main demo, simulated market data from a publisher to a wildcard subscriber.

``openum demo`` starts two child processes of itself, ``openum demo publisher`` and ``openum demo
subscriber`` (hidden roles), handing them its ``-c``/``--option``/``--application`` arguments, and relays
their output (:mod:`openum.demo`).  Exit status: 0 when the subscriber saw ticks on every topic with no
gap, 1 when the run failed (the reasons are printed), 2 on bad usage or configuration, 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register"]

ROLES = ("run", "publisher", "subscriber")


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
        default=20.0,
        metavar="SECONDS",
        help="how long to send (default 20)",
    )
    parser.add_argument(
        "--rate",
        type=_positive_float,
        default=20000.0,
        metavar="MSGS_PER_SEC",
        help="ticks per second over all topics (default 20000)",
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
    parser.add_argument("--json", action="store_true", help="print the final summary as one JSON object")
    parser.add_argument("--control-stdin", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--max-seconds", type=_positive_float, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from openum.cli import build_config
    from openum.demo import Settings, run_demo, run_publisher, run_subscriber

    config = build_config(args)  # a bad file or option is exit 2 before anything starts
    settings = Settings(
        venues=tuple(args.venues),
        symbols=args.symbols,
        rate=args.rate,
        duration=args.duration,
        seed=args.seed,
        join_timeout=args.join_timeout,
    )
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
