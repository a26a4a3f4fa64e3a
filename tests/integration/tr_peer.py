"""A topic-resolution peer run as a real process by the integration tests.

    python -m tests.integration.tr_peer source TOPIC [--option "scope option value"]...
    python -m tests.integration.tr_peer receiver TOPIC [...]
    python -m tests.integration.tr_peer wildcard PATTERN [...]

It prints one JSON object per line on stdout: ``{"event": "ready", ...}`` once its object exists (with
the source string for a source), ``{"event": "source_create"|"source_delete", "source": ...}`` for
receivers, and exits when stdin closes or says ``quit``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

import openum


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("source", "receiver", "wildcard"))
    parser.add_argument("topic")
    parser.add_argument("--option", action="append", default=[])
    args = parser.parse_args()
    lock = threading.Lock()

    def create(source: str, clientd: Any) -> str:
        with lock:
            emit(event="source_create", source=source, clientd=clientd)
        return f"sc:{source}"

    def delete(source: str, clientd: Any, source_clientd: Any) -> None:
        with lock:
            emit(event="source_delete", source=source, source_clientd=source_clientd)

    notify = {"source_notification_function": (create, delete, "peer")}
    with openum.Context(options=args.option) as ctx:
        if args.role == "source":
            src = ctx.create_source(args.topic)
            emit(event="ready", source=src.source_string)
        elif args.role == "receiver":
            ctx.create_receiver(args.topic, lambda msg: None, attrs=notify)
            emit(event="ready")
        else:
            ctx.create_wildcard_receiver(args.topic, lambda msg: None, receiver_attrs=notify)
            emit(event="ready")
        for line in sys.stdin:
            if line.strip() == "quit":
                break
            if line.strip() == "stats":
                emit(event="stats", **dict(vars_of(ctx.statistics()).items()))
    return 0


def vars_of(obj: Any) -> dict[str, Any]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}


if __name__ == "__main__":
    raise SystemExit(main())
