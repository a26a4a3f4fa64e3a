"""``openum lbmrd``: the unicast UDP topic resolution daemon (CLI.md "Daemons"; seed §15.1).

The flags and their handling live with the daemon (:mod:`openum.daemons.lbmrd`); this module only
registers them as a subcommand.  The UM configuration flags shared by other subcommands (``-c``,
``--option``) are not added: lbmrd is not a UM context and reads only its own XML file.
"""

from __future__ import annotations

import argparse
from typing import Any

from openum.daemons.lbmrd import DESCRIPTION, EPILOG, add_arguments, run

__all__ = ["register"]


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    del common  # lbmrd takes its own XML file, not UM configuration files
    parser = sub.add_parser(
        "lbmrd",
        help="unicast UDP topic resolution daemon (UM's lbmrd)",
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_arguments(parser)
    parser.set_defaults(handler=run)
