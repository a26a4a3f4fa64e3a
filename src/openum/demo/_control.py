"""What the demo's processes share: stop requests, the parent's control lines, report markers, hints.

A child started by the demo (``--control-stdin``) reads one command per line on stdin from its parent:
``go`` (publisher: start sending), ``expect N`` (subscriber: N ticks were sent), ``stop``; end of file
means the parent went away and is a ``stop`` too.  Children report to the parent with marker lines on
stdout (``@@demo ready``, ``@@demo summary {json}``) that the parent does not relay.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

MARKER: Final = "@@demo "

BIND_HINT: Final = (
    "hint: the demo runs on the embedded defaults: topic resolution by multicast 224.9.10.11:12965 on "
    "the loopback interface and TCP transport ports 14371-14390. If another program holds them, stop it "
    "or give other values, e.g. --option 'context transport_tcp_port_low 24371' --option 'context "
    "transport_tcp_port_high 24390' --option 'context resolver_multicast_port 22965'"
)


@dataclass(frozen=True, slots=True)
class Settings:
    """The demo's run parameters (the same in the parent and both children)."""

    venues: tuple[str, ...]
    symbols: int
    rate: float
    duration: float
    seed: int | None
    join_timeout: float
    #: The publisher's transport (``tcp``, ``lbtru``, ``lbtrm``); None: the configuration's.
    transport: str | None = None


def say(text: str = "") -> None:
    print(text, flush=True)


def report(to_parent: bool, kind: str, payload: Any = None) -> None:
    """A marker line for the parent (``@@demo KIND [json]``), when there is one."""
    if not to_parent:
        return
    tail = "" if payload is None else " " + json.dumps(payload, sort_keys=True, separators=(",", ":"))
    print(f"{MARKER}{kind}{tail}", flush=True)


def parse_marker(line: str) -> tuple[str, Any] | None:
    if not line.startswith(MARKER):
        return None
    kind, _, rest = line[len(MARKER) :].partition(" ")
    try:
        return kind, (json.loads(rest) if rest else None)
    except ValueError:
        return None


class Control:
    """Stop requests (SIGINT, SIGTERM, ``stop`` or EOF from the parent) and the parent's commands.

    Signal handlers only set a flag (taking a lock in a handler can deadlock the thread it
    interrupted); loops poll :attr:`stopped` at least every few tens of milliseconds.
    """

    def __init__(
        self, *, from_stdin: bool, on_command: Callable[[str, list[str]], None] | None = None
    ) -> None:
        self._signalled = False
        self.commands = threading.Event()  # set by the stdin reader on each command (wakes waiters)
        self.go = threading.Event()
        self.stop_requested = threading.Event()
        self.expect: int | None = None
        self._on_command = on_command
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._signal)
        if from_stdin:
            threading.Thread(target=self._read_stdin, name="demo-control", daemon=True).start()

    def _signal(self, _signum: int, _frame: Any) -> None:
        self._signalled = True

    @property
    def stopped(self) -> bool:
        return self._signalled or self.stop_requested.is_set()

    def _read_stdin(self) -> None:
        for line in sys.stdin:
            words = line.split()
            if not words:
                continue
            command, args = words[0], words[1:]
            if command == "go":
                self.go.set()
            elif command == "stop":
                self.stop_requested.set()
            elif command == "expect" and args and args[0].isdigit():
                self.expect = int(args[0])
            if self._on_command is not None:
                self._on_command(command, args)
            self.commands.set()
        self.stop_requested.set()  # EOF: the parent is gone
        if self._on_command is not None:
            self._on_command("stop", [])
        self.commands.set()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` (at most 50 ms at a time, so signals are noticed) or a command."""
        if self.commands.wait(max(0.0, min(seconds, 0.05))):
            self.commands.clear()
