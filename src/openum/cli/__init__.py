"""The ``openum`` command (../shared/design/CLI.md).

Every subcommand takes ``-c/--config FILE`` (repeatable, flat or XML) and ``--option "SCOPE OPTION
VALUE"`` (repeatable, applied after the files).  Exit status: 0 success, 1 the job ran but its check
failed, 2 bad usage or configuration (with a message naming what was wrong).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from openum._errors import ConfigError, OpenUMError
from openum._version import __version__

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]


def config_arguments() -> argparse.ArgumentParser:
    """The configuration flags shared by every subcommand."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("configuration")
    group.add_argument(
        "-c",
        "--config",
        action="append",
        default=[],
        metavar="FILE",
        help="UM flat (scope option value) or XML configuration file; repeatable",
    )
    group.add_argument(
        "--option",
        action="append",
        default=[],
        metavar='"SCOPE OPTION VALUE"',
        help="one option, as a flat-file line; repeatable; applied after the files",
    )
    group.add_argument(
        "--application",
        metavar="NAME",
        help="application name selecting an <application> of XML files (LBM_XML_CONFIG_APPNAME)",
    )
    group.add_argument(
        "--allow-unimplemented",
        action="store_true",
        help="let options openum does not implement through (they have no effect; each context logs one "
        "warning per option) instead of refusing them: for migrating a UM configuration "
        "(OPENUM_UNIMPLEMENTED_OPTIONS=warn does the same)",
    )
    return parent


def build_config(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """A :class:`~openum.config.Config` from the process defaults, ``-c`` files and ``--option`` lines."""
    from openum.config import default_config

    config = default_config().copy()
    if args.application:
        config.application = args.application
    for path in args.config:
        config.load_file(path)
    if args.option:
        config.set_options(args.option)
    return config


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from openum.cli import (
        _bench,
        _config_cmd,
        _demo_cmd,
        _ipc_resources,
        _latency,
        _lbmrd_cmd,
        _pubsub,
        _reqresp,
        _tr_monitor,
    )

    parser = _Parser(
        prog="openum",
        description="openum: brokerless publish/subscribe speaking Ultra Messaging's wire protocol.",
    )
    parser.add_argument("--version", action="version", version=f"openum {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    common = config_arguments()
    _config_cmd.register(sub, common)
    _lbmrd_cmd.register(sub, common)
    _tr_monitor.register(sub, common)
    _pubsub.register(sub, common)
    _reqresp.register(sub, common)
    _demo_cmd.register(sub, common)
    _latency.register(sub, common)
    _bench.register(sub, common)
    _ipc_resources.register(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        if getattr(args, "allow_unimplemented", False):
            from openum.config import set_unimplemented_policy

            set_unimplemented_policy("warn")
        return handler(args)
    except ConfigError as exc:
        print(f"openum: configuration error:\n{exc}", file=sys.stderr)
        return EXIT_USAGE
    except OpenUMError as exc:
        print(f"openum: {exc.errname}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("openum: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # e.g. `openum config options | head`: the reader went away; not an error of ours.
        sys.stderr.close()
        return EXIT_OK
