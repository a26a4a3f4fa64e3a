"""Helpers for publish/subscribe tests over real sockets: per-test ports, message recorders and
``openum`` child processes."""

from __future__ import annotations

import json
import os
import random
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openum
from openum import MsgType
from tests.helpers import wait_until
from tests.integration.test_lbmrd_process import free_udp_port

ROOT = Path(__file__).resolve().parents[2]
#: Request (UIM) ports of one test's contexts: one each (UM's default range has 5 for a whole machine).
REQUEST_PORTS = 8
WAIT = 20.0  # generous: a loaded 2-core machine still resolves and connects well within this

# Below Linux's ephemeral range (32768-60999), so receivers' outgoing connections never take them.
_TCP_LOW, _TCP_HIGH = 20000, 32000


def free_tcp_range(count: int = 8, host: str = "127.0.0.1") -> tuple[int, int]:
    """``count`` consecutive TCP ports that are free now (each one bound and released to check)."""
    rng = random.Random()
    for _ in range(200):
        low = rng.randrange(_TCP_LOW, _TCP_HIGH - count)
        ok = True
        for port in range(low, low + count):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return low, low + count - 1
    raise RuntimeError(f"no {count} consecutive free TCP ports in {_TCP_LOW}-{_TCP_HIGH}")


def free_udp_range(count: int, host: str = "127.0.0.1") -> int:
    """The first of ``count`` consecutive UDP ports that are free now (each bound and released)."""
    rng = random.Random()
    for _ in range(200):
        low = rng.randrange(_TCP_LOW, _TCP_HIGH - count)
        ok = True
        for port in range(low, low + count):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    ok = False
                    break
        if ok:
            return low
    raise RuntimeError(f"no {count} consecutive free UDP ports in {_TCP_LOW}-{_TCP_HIGH}")


#: UDP ports per test: LBT-RM source ports (8), LBT-RM destination port, LBT-RU source ports (8),
#: LBT-RU receiver ports (15).
UDP_PORTS = 32


@dataclass(frozen=True)
class Ports:
    """One test's resolver port, TCP port range and LBT-RM/LBT-RU ports, as ``--option`` lines.

    Every test gets its own ports so that a test never hears another's sessions (nor a benchmark
    running on the same machine).  ``udp_low``: the first of ``UDP_PORTS`` consecutive UDP ports.
    """

    resolver: int
    tcp_low: int
    tcp_high: int
    udp_low: int = 0
    #: The first of REQUEST_PORTS request (UIM) ports (0: the contexts use UM's default range).
    request_low: int = 0

    @classmethod
    def allocate(cls, tcp_count: int = 8) -> Ports:
        low, high = free_tcp_range(tcp_count + REQUEST_PORTS)
        return cls(
            free_udp_port(), low, high - REQUEST_PORTS, free_udp_range(UDP_PORTS), high - REQUEST_PORTS + 1
        )

    @property
    def lbtrm_destination_port(self) -> int:
        return self.udp_low + 8

    @property
    def lbtru_source_ports(self) -> tuple[int, int]:
        return self.udp_low + 9, self.udp_low + 16

    @property
    def lbtru_receiver_ports(self) -> tuple[int, int]:
        return self.udp_low + 17, self.udp_low + UDP_PORTS - 1

    def options(self, *extra: str) -> list[str]:
        udp = []
        if self.udp_low:
            u = self.udp_low
            udp = [
                f"context transport_lbtrm_source_port_low {u}",
                f"context transport_lbtrm_source_port_high {u + 7}",
                f"source transport_lbtrm_destination_port {self.lbtrm_destination_port}",
                f"context transport_lbtru_port_low {self.lbtru_source_ports[0]}",
                f"context transport_lbtru_port_high {self.lbtru_source_ports[1]}",
                f"receiver transport_lbtru_port_low {self.lbtru_receiver_ports[0]}",
                f"receiver transport_lbtru_port_high {self.lbtru_receiver_ports[1]}",
            ]
        request = []
        if self.request_low:
            request = [
                f"context request_tcp_port_low {self.request_low}",
                f"context request_tcp_port_high {self.request_low + REQUEST_PORTS - 1}",
            ]
        return [
            f"context resolver_multicast_port {self.resolver}",
            f"context transport_tcp_port_low {self.tcp_low}",
            f"context transport_tcp_port_high {self.tcp_high}",
            *udp,
            *request,
            *extra,
        ]

    def argv(self, *extra: str) -> list[str]:
        out: list[str] = []
        for opt in self.options(*extra):
            out += ["--option", opt]
        return out


class Contexts:
    """Contexts of one test, closed (with everything in them) at the end."""

    def __init__(self, ports: Ports) -> None:
        self.ports = ports
        self.contexts: list[openum.Context] = []

    def new(self, *extra: str) -> openum.Context:
        ctx = openum.Context(options=self.ports.options(*extra))
        self.contexts.append(ctx)
        return ctx

    def close(self) -> None:
        for ctx in reversed(self.contexts):
            ctx.__exit__(None, None, None)


@dataclass(frozen=True)
class Got:
    """A copy of one delivered message (the payload of a Message is only valid during its callback)."""

    type: MsgType
    topic: str
    source: str
    sqn: int
    data: bytes
    properties: dict[str, Any] | None
    flags: int = 0

    @property
    def counter(self) -> int:
        """The 8-byte big-endian counter ``openum send`` puts at the start of each payload."""
        return int.from_bytes(self.data[:8], "big")


class Recorder:
    """A receiver callback that keeps a copy of everything delivered; optionally blocks on a gate.

    ``gate``: when given, every DATA callback waits on it (up to ``gate_timeout``) before returning, which
    blocks the receiving context's thread, the way a slow application does.
    """

    def __init__(self, gate: threading.Event | None = None, gate_timeout: float = 60.0) -> None:
        self.got: list[Got] = []
        self.counts: Counter[MsgType] = Counter()
        self.gate = gate
        self.gate_timeout = gate_timeout
        self.lock = threading.Lock()

    def __call__(self, msg: openum.Message) -> None:
        data = bytes(msg.data) if msg.type is MsgType.DATA else b""
        item = Got(msg.type, msg.topic, msg.source, msg.sequence_number, data, msg.properties, int(msg.flags))
        with self.lock:
            self.got.append(item)
            self.counts[msg.type] += 1
        if self.gate is not None and msg.type is MsgType.DATA:
            self.gate.wait(self.gate_timeout)

    def snapshot(self) -> list[Got]:
        with self.lock:
            return list(self.got)

    def of(self, kind: MsgType) -> list[Got]:
        return [g for g in self.snapshot() if g.type is kind]

    def count(self, kind: MsgType = MsgType.DATA) -> int:
        with self.lock:
            return self.counts[kind]

    def types(self) -> list[MsgType]:
        return [g.type for g in self.snapshot()]

    def wait_count(self, n: int, kind: MsgType = MsgType.DATA, timeout: float = WAIT) -> bool:
        return wait_until(lambda: self.count(kind) >= n, timeout)


class SourceEvents:
    """A source event callback that records ``(event, info)`` and counts connections."""

    def __init__(self) -> None:
        self.events: list[tuple[openum.SourceEvent, Any]] = []
        self.lock = threading.Lock()

    def __call__(self, event: openum.SourceEvent, info: Any, _clientd: Any) -> None:
        with self.lock:
            self.events.append((event, info))

    def count(self, event: openum.SourceEvent) -> int:
        with self.lock:
            return sum(1 for e, _ in self.events if e is event)

    def wait(self, event: openum.SourceEvent, n: int = 1, timeout: float = WAIT) -> bool:
        return wait_until(lambda: self.count(event) >= n, timeout)


def child_env() -> dict[str, str]:
    """The environment for ``openum`` children: unbuffered, this checkout, no configuration files."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    for var in ("LBM_DEFAULT_CONFIG_FILE", "OPENUM_CONFIG_FILE", "LBM_XML_CONFIG_FILENAME"):
        env.pop(var, None)
    return env


class Processes:
    """Starts ``python -m openum ...`` children and kills whatever is still running at the end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def openum(
        self, *args: str, env: dict[str, str] | None = None, prefix: tuple[str, ...] = ()
    ) -> subprocess.Popen[str]:
        """``python -m openum ARGS`` (``env``: extra environment variables; ``prefix``: a command to run it
        under, e.g. ``("ip", "netns", "exec", NAME)``)."""
        proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "openum", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**child_env(), **(env or {})},
            cwd=ROOT,
        )
        self.started.append(proc)
        return proc

    def close(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            try:
                proc.communicate(timeout=10)
            except (subprocess.TimeoutExpired, ValueError):
                pass
            for stream in (proc.stdout, proc.stderr):
                if stream is not None and not stream.closed:
                    stream.close()


def last_json(text: str) -> dict[str, Any]:
    """The JSON summary an ``openum`` command prints on its last non-empty line (``--json``)."""
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no output"
    summary: dict[str, Any] = json.loads(lines[-1])
    return summary


def processes() -> Iterator[Processes]:
    """The body of the ``procs`` fixture (tests/conftest.py): child processes closed at the end."""
    p = Processes()
    try:
        yield p
    finally:
        p.close()


def stays_false(predicate: Callable[[], bool], seconds: float) -> bool:
    """True when ``predicate`` stayed false for ``seconds`` (for "nothing happens" checks)."""
    return not wait_until(predicate, seconds, interval=0.01)
