"""``openum ipc-resources``: the shared-memory segments of LBT-IPC and LBT-SMX (UM Concepts Guide,
sections 6.4.9 and 6.5.10; UM's ``lbtipc_resource_manager`` and ``lbtsmx_resource_manager``).

Without arguments it lists every openum segment in ``/dev/shm``: its kind, state, size, session and
transport ids, owner pid, whether the owner is alive (``ORPHANED`` when a killed process left it) and
its receivers.  ``--reclaim`` deletes the orphaned ones (never one whose owner lives);
``--delete NAME`` deletes one (``--force`` even if its owner lives: never while openum applications
use it).  ``--json`` prints JSON instead of a table.  Exit status 0, or 1 when something could not be
deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["register"]


def register(sub: Any, _common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "ipc-resources",
        help="list and reclaim the shared-memory segments of LBT-IPC and LBT-SMX",
        description="List openum's shared-memory segments (LBT-IPC, LBT-SMX) with their owners and "
        "receivers; reclaim what killed processes left (UM's lbtipc_resource_manager).",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument(
        "--reclaim", action="store_true", help="delete every orphaned segment (its owner process is gone)"
    )
    action.add_argument("--delete", metavar="NAME", help="delete one segment (refused if its owner lives)")
    parser.add_argument("--force", action="store_true", help="with --delete: even if its owner lives")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=cmd_ipc_resources)


def cmd_ipc_resources(args: argparse.Namespace) -> int:
    from openum.transport.shm import SegmentError
    from openum.transport.shm_resources import (
        delete_segment,
        format_table,
        list_segments,
        reclaim,
        to_json,
    )

    if args.force and not args.delete:
        print("openum ipc-resources: --force goes with --delete NAME", file=sys.stderr)
        return 2
    if args.delete:
        try:
            gone = delete_segment(args.delete, force=args.force)
        except SegmentError as exc:
            print(f"openum ipc-resources: {exc}", file=sys.stderr)
            return 1
        if args.json:
            print(json.dumps({"deleted": [gone.as_dict()]}, indent=2))
        else:
            print(f"deleted {gone.name} ({gone.kind}, owner pid {gone.owner_pid})")
        return 0
    if args.reclaim:
        done = reclaim()
        if args.json:
            print(json.dumps({"deleted": [s.as_dict() for s in done]}, indent=2))
        else:
            for s in done:
                print(f"reclaimed {s.name} ({s.kind}, {s.size} bytes, owner pid {s.owner_pid} is gone)")
            print(f"{len(done)} segment(s) reclaimed")
        return 0
    segments = list_segments()
    if args.json:
        print(to_json(segments))
    elif segments:
        print(format_table(segments))
        orphans = sum(1 for s in segments if s.orphaned)
        if orphans:
            print(f"{orphans} orphaned segment(s): 'openum ipc-resources --reclaim' deletes them")
    else:
        print("no openum shared-memory segments")
    return 0
