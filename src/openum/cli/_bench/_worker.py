"""Entry point of a bench worker process: ``python -m openum.cli._bench._worker '<spec json>'``.

The spec names the ``system`` (openum, pyzmq, zenoh) and the ``role`` (pub, sub, ping, pong); see
``_common`` for the line protocol to the harness.
"""

from __future__ import annotations

import importlib
import json
import sys

__all__ = ["main"]

MODULES = {
    "openum": "openum.cli._bench._openum_worker",
    "pyzmq": "openum.cli._bench._zmq_worker",
    "zenoh": "openum.cli._bench._zenoh_worker",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m openum.cli._bench._worker SPEC_JSON", file=sys.stderr)
        return 2
    spec = json.loads(args[0])
    module = importlib.import_module(MODULES[spec["system"]])
    rc: int = getattr(module, spec["role"])(spec)
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
